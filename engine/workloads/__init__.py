"""Workloads the optimize loop can run: the built-in ones on the simulated GPU, and any real
process (``command``)."""
