"""The exhaustive searches on one machine: the one-process explorer, the level-synchronous
search that `--workers` and Spark share, the worker processes, and what they all share."""
