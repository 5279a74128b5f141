"""`kafkamc check --simulate`: random walks, their dispatch across processes, and shrinking."""
