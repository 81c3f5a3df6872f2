"""Live capture through CUPTI (cupti-python, the ``[nvidia]`` extra): cupti — ``capture``, the
process's device activity as Segments batches while it runs, and the trace it writes
(Chrome-trace JSON, read back by engine.trace.kineto). Nothing here is imported by the package
itself, so CUPTI's machinery loads only when used: ``from engine.trace.cupti.cupti import
capture`` (or ``engine.trace.capture``).
"""
