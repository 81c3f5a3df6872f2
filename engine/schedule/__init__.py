"""The replay graph of a trace and its scheduler, and the causes levers address: what the
planner, the lever library and the optimizer all build on (below all three)."""
