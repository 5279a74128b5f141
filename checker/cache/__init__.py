"""The fast path: successors through caches derived from the spec (interned components,
recorded footprints, step outcomes, their memory budget, and the symmetry spot checks)."""
