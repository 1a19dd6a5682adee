"""The Pants backend of epoch_gate: a thin layer that feeds the core build-graph facts."""
