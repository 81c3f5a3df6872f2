"""One trace taken apart — what it holds, before any advice (engine.analyze.compute joins it):

* ``model`` — the Analysis and its parts (what analysis.json holds; schema in manifests/schemas).
* ``semantics`` / ``steady`` — what counts as GPU time (exact or HTA's rule), the steady window.
* ``idle`` / ``intervals`` / ``launches`` / ``copies`` / ``measured`` / ``fidelity`` — idle per
  stream, interval arithmetic, launch statistics, copies against their links, measured-vs-decoded
  labels, whether the no-lever replay reproduces the trace.
* ``critical`` (+ ``critical_model``, ``critical_ops``) — the critical path and its opportunities.
* ``in_use`` — what the program already uses (graphs, fusion, reduced precision).
* ``cpu_trace`` — a CPU-only PyTorch trace's summary.

Imports nothing else of engine.analyze.
"""
