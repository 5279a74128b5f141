"""`python -m kafkamc`: the same command line as the `kafkamc` script.

The only file of this folder: the package itself lives in spec/, checker/, invariants/,
traces/ and cli/, which pyproject.toml maps to their kafkamc.* names.
"""

from kafkamc.cli.main import main

if __name__ == "__main__":
    main()
