"""The PyTorch profiler (Kineto) / Chrome-trace JSON importer and what only it uses.

* kineto — ``read_kineto``: the file → a Trace (columns, host events, framework ops);
* chrome_stream — the decompressed byte stream, the top-level object, the events array;
* json_scan — the numba scanner and field parser; bytemask — its 64-byte compares;
* json_twin — the scanner's Python twin, which a first run reads with while numba compiles;
* shapes — an op's FLOPs and bytes from its recorded shapes; derive — that work given to the
  kernels each op launched (the DERIVED evidence tier);
* collectives — what an NCCL/RCCL kernel's args say of its communicator.

What it produces is engine.trace's contract (Segments, HostEvents, Trace); engine.trace.read
picks this importer for a file that is not an Nsight export. Nothing here is imported by the
package itself: ``from engine.trace.kineto.kineto import read_kineto``.
"""
