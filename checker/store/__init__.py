"""Where states are kept (TLC's fp/ and queue/): visited sets of fingerprints, frontiers,
the on-disk spill, state records, path keys, and the memory they hold."""
