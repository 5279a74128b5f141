"""Liveness (TLC's liveness/): the reachable state graph, its fair cycles, and the lassos
replayed into counterexamples."""
