"""The one numba decorator every EESM kernel uses: cached to disk, GIL released, no object mode."""

from __future__ import annotations

from numba import njit

#: cache=True keeps compiled kernels in __pycache__ (or numba's user cache dir when that is not
#: writable) so only the very first run pays compilation; nogil=True lets a worker thread run a
#: kernel while the UI thread keeps drawing.
jit = njit(cache=True, nogil=True)
