"""Planning: what the language model is told about the world, and how its scores are corrected.

(The target home of the SayCan loop and its scorers; see docs/architecture.md once it lands.)
"""
