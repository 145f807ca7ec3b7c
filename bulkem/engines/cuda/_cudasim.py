"""Warp shuffles for the CUDA simulator, which has none.

numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs each CUDA thread as
a Python thread but implements no ``shfl_*_sync``.  The kernels reduce with
``cuda.shfl_xor_sync``, so under the simulator we add it to the fake
``cuda`` module: the threads of a warp named in the mask meet at a barrier,
publish their values, read their partner's, and meet again before the slots
are reused.
The simulator runs one block at a time, so a warp is named by its index in
the block.  Used by tests only; on hardware the real instruction runs.

The simulator's ``cuda.shared.array`` also finds a block's array by the
caller's line without a lock, so two threads arriving together (likely with
the tests' short switch interval) can each make their own copy and no
longer share it.  :func:`install` replaces it with a locked lookup that
fills new float arrays with NaN, so that a read before any write shows.
"""

from __future__ import annotations

import sys
import threading
import traceback

import numpy as np
from numba.core import types
from numba.cuda.simulator import kernelapi
from numba.np import numpy_support

_WARP = 32
_TIMEOUT_S = 120.0  # a warp whose lanes diverged would otherwise hang forever
_lock = threading.Lock()
_warps: dict = {}


def _warp_slot(warp: int, mask: int):
    with _lock:
        slot = _warps.get((warp, mask))
        if slot is None:
            parties = bin(mask).count("1")
            slot = _warps[warp, mask] = (threading.Barrier(parties, timeout=_TIMEOUT_S),
                                         [None] * _WARP)
        return slot


def _shfl_xor_sync(self, mask, value, lane_mask):
    tid = threading.current_thread().thread_id
    barrier, values = _warp_slot(tid // _WARP, int(mask) & 0xFFFFFFFF)
    lane = tid % _WARP
    values[lane] = value
    barrier.wait()
    out = values[lane ^ lane_mask]
    barrier.wait()
    return out


_simulator_shared_array = kernelapi.FakeCUDAShared.array


def _shared_array(self, shape, dtype, alignment=None):
    if shape == 0 or alignment is not None:  # dynamic shared memory, or an error
        return _simulator_shared_array(self, shape, dtype, alignment)
    if isinstance(dtype, types.Type):
        dtype = numpy_support.as_dtype(dtype)
    caller = traceback.extract_stack(sys._getframe(1), limit=1)[-1][0:2]
    with _lock:
        res = self._allocations.get(caller)
        if res is None:
            res = np.full(shape, np.nan, dtype) if dtype.kind == "f" else np.empty(shape, dtype)
            self._allocations[caller] = res
    return res


def install() -> None:
    """Give the simulator's fake cuda module a ``shfl_xor_sync`` and race-free shared arrays."""
    if not hasattr(kernelapi.FakeCUDAModule, "shfl_xor_sync"):
        kernelapi.FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
    kernelapi.FakeCUDAShared.array = _shared_array
