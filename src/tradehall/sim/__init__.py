"""The built-in market simulation: reference price paths, market makers and noise takers that
trade as ordinary accounts through the engine, and fault injection for bot testing
(docs/simulation.md)."""
