"""The one numba decorator every kernel uses (EESM, importers, replay): cached to disk, GIL released,
no object mode. At the bottom of the package layers: any layer may compile a kernel."""

from __future__ import annotations

from numba import njit

#: cache=True keeps compiled kernels in __pycache__ (or numba's user cache dir when that is not
#: writable) so only the very first run pays compilation; nogil=True lets a worker thread run a
#: kernel while the UI thread keeps drawing.
jit = njit(cache=True, nogil=True)
