"""The rocprofv3 importer (ROCm's profiler, rocprofiler-sdk): rocprof_csv — ``read_rocprof_csv``,
a CSV output folder or one of its files → a Trace; counters — per-dispatch counter values →
the measured columns. What they produce is engine.trace's contract (Segments, HostEvents,
Trace); engine.trace.read picks them by content. Nothing here is imported by the package
itself: ``from engine.trace.rocprof.rocprof_csv import read_rocprof_csv``.
"""
