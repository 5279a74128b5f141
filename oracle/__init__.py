"""The oracle behind `--engine reference`: a search that shares nothing with what it checks.

It keeps exact states, counts symmetry classes afterwards by brute force, and evaluates the
invariants from their Z3 declarations with its own interpreter. It imports only the standard
library, z3, kafkamc.spec and the declaration modules of kafkamc.invariants (catalog, view,
reach, properties), so a bug in the fast path's caches, fingerprints, symmetry reduction or
compiled checks cannot hide in both (tests/test_oracle.py checks the imports).
"""
