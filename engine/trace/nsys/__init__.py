"""The Nsight Systems importer (``nsys export --type sqlite``): nsys — ``read_nsys``, the export
→ a Trace. What it produces is engine.trace's contract (Segments, HostEvents, Trace);
engine.trace.read picks it for a file with SQLite's magic. Nothing here is imported by the
package itself: ``from engine.trace.nsys.nsys import read_nsys``.
"""
