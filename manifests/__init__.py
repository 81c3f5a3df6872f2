"""Data package: hardware catalogue, kernel-class calibration, EESM hyperparameters, workload specs.

The files are JSON so that people can read and diff them; `engine.manifest` validates them.
"""
