"""Warp shuffles for the CUDA simulator, which has none.

numba-cuda's simulator (``NUMBA_ENABLE_CUDASIM=1``) runs each CUDA thread as
a Python thread but implements no ``shfl_*_sync``.  The kernels reduce with
``cuda.shfl_xor_sync``, so under the simulator we add it to the fake
``cuda`` module: the 32 threads of a warp meet at a barrier, publish their
values, read their partner's, and meet again before the slots are reused.
The simulator runs one block at a time, so a warp is named by its index in
the block.  Used by tests only; on hardware the real instruction runs.
"""

from __future__ import annotations

import threading

from numba.cuda.simulator import kernelapi

_WARP = 32
_TIMEOUT_S = 120.0  # a warp whose lanes diverged would otherwise hang forever
_lock = threading.Lock()
_warps: dict = {}


def _warp_slot(warp: int):
    with _lock:
        slot = _warps.get(warp)
        if slot is None:
            slot = _warps[warp] = (threading.Barrier(_WARP, timeout=_TIMEOUT_S), [None] * _WARP)
        return slot


def _shfl_xor_sync(self, mask, value, lane_mask):
    tid = threading.current_thread().thread_id
    barrier, values = _warp_slot(tid // _WARP)
    lane = tid % _WARP
    values[lane] = value
    barrier.wait()
    out = values[lane ^ lane_mask]
    barrier.wait()
    return out


def install() -> None:
    """Give the simulator's fake cuda module a ``shfl_xor_sync``."""
    if not hasattr(kernelapi.FakeCUDAModule, "shfl_xor_sync"):
        kernelapi.FakeCUDAModule.shfl_xor_sync = _shfl_xor_sync
