"""What every command module shares: exit statuses and the bad-input exception."""
from __future__ import annotations

EXIT_HOLDS, EXIT_VIOLATED, EXIT_USAGE, EXIT_INCOMPLETE = 0, 1, 2, 3


class UsageProblem(Exception):
    """Bad input found after click parsed the command line; main() prints it as one line, exit 2."""
