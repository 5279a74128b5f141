"""The search and the simulation on Spark: the driver's side, the executors' tasks, the
context and the standalone cluster the tests and the benchmark start."""
