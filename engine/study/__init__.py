"""The research harness around the decoder: do-operators on segment tables, the audit ledger,
the validity study and the paper generator. Above the decoder (engine/eesm/), the simulator
and `analyze`, which it runs; nothing in the product's loop imports it."""
