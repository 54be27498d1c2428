"""The training engine: run settings and state, seeded orders, the BCD driver, objectives,
and the one fit path that wires a source, a backend, a feed and a checkpoint together."""
