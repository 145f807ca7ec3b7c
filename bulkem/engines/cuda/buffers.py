"""A chunk's arrays in one byte buffer each way: page-locked host memory and its device twin.

A chunk's inputs travel to the GPU in one copy and its results come back in
one; page-locking and device allocation are slow, so buffers are pooled per
GPU for later chunks and calls.
"""

from __future__ import annotations

import math
import threading

import numpy as np

from .compat import SIMULATED, cuda

ALIGN = 256  # bytes: where each array of a chunk's buffer starts
_pool: dict = {}  # device -> Buffers (page-locked) not in use
_pool_lock = threading.Lock()


def layout(arrays: list[tuple[np.dtype, tuple]]) -> list[tuple[int, np.dtype | None, tuple]]:
    """(byte offset, dtype, shape) of each array in one buffer, then ``(end, None, ())``."""
    out, pos = [], 0
    for dtype, shape in arrays:
        dtype = np.dtype(dtype)
        out.append((pos, dtype, tuple(shape)))
        pos += -(-dtype.itemsize * math.prod(shape) // ALIGN) * ALIGN
    out.append((pos, None, ()))
    return out


def _views(buf, layout) -> list:
    """Typed views of a host or device byte buffer, as ``layout`` places them."""
    return [buf[pos:pos + dtype.itemsize * math.prod(shape)].view(dtype).reshape(shape)
            for pos, dtype, shape in layout[:-1]]


class Buffers:
    """A chunk's host and device byte buffers, of one size, and their last typed views.

    The host buffer is page-locked when ``pinned`` (asynchronous copies at
    full speed).  The views of the last layout are kept: chunks of the same
    shape (the next call on a batch of the same shape) reuse them.
    """

    def __init__(self, nbytes: int, pinned: bool) -> None:
        self.host = cuda.pinned_array(nbytes, np.uint8) if pinned else np.empty(nbytes, np.uint8)
        self.device = cuda.device_array(nbytes, np.uint8)
        self.pinned = pinned
        self._key: tuple | None = None
        self._views: tuple = ()

    def __len__(self) -> int:
        return len(self.host)

    def views(self, layout) -> tuple[list, list]:
        """Typed views of the host and the device buffer, as ``layout`` places them."""
        key = tuple(layout)
        if key != self._key:
            self._views = (_views(self.host, layout), _views(self.device, layout))
            self._key = key
        return self._views


def take(nbytes: int, tuning) -> Buffers:
    """Host and device buffers for one chunk.

    Page-locking and device allocation are slow, so buffers up to
    ``tuning.cuda_pinned_max_bytes`` are page-locked and kept in a pool for
    later chunks and calls (:func:`give` returns them).  Larger
    ones (and all under the simulator) are ordinary host memory, not pooled.
    """
    if nbytes > tuning.cuda_pinned_max_bytes or SIMULATED:
        return Buffers(nbytes, pinned=False)
    dev = cuda.get_current_device().id
    with _pool_lock:
        free = _pool.setdefault(dev, [])
        big = [k for k, b in enumerate(free) if len(b) >= nbytes]
        if big:
            return free.pop(min(big, key=lambda k: len(free[k])))  # the smallest that will do
    return Buffers(nbytes, pinned=True)


def give(bufs: Buffers, tuning) -> None:
    """Return a chunk's buffers to the pool (of at most ``tuning.cuda_pinned_pool``) once the
    GPU is done with them."""
    if not bufs.pinned:
        return
    with _pool_lock:
        free = _pool.setdefault(cuda.get_current_device().id, [])
        free.append(bufs)
        if len(free) > tuning.cuda_pinned_pool:
            free.pop(min(range(len(free)), key=lambda k: len(free[k])))




_copiers: list = []  # one thread pool for the host copies of every upload


def _copy(src: np.ndarray, dst: np.ndarray, threads: int) -> None:
    """``dst[:] = src`` (1-D) on ``threads`` host threads (numpy copies without the GIL)."""
    n = len(src)
    if threads <= 1 or n < (1 << 20):
        dst[:] = src
        return
    if not _copiers:
        from concurrent.futures import ThreadPoolExecutor

        with _pool_lock:
            if not _copiers:
                _copiers.append(ThreadPoolExecutor(threads, thread_name_prefix="bulkem-copy"))
    cuts = np.linspace(0, n, threads + 1).astype(np.int64)
    jobs = [_copiers[0].submit(np.copyto, dst[a:b], src[a:b])
            for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    for job in jobs:
        job.result()


def upload(host: np.ndarray, tuning) -> object:
    """A 1-D host array copied to the current GPU, in chunks through page-locked buffers.

    The GPU reads page-locked host memory several times faster than pageable memory
    (which the driver copies through its own small staging buffers).  Chunks of
    ``tuning.cuda_pinned_max_bytes`` go through two pooled page-locked buffers (:func:`take`):
    host threads (``tuning.host_copy_threads``; 0: every core) fill one while the GPU
    copies the other.  A host array of at most one chunk is copied as it is.
    """
    import os

    host = np.ascontiguousarray(host).reshape(-1)
    per = max(1, tuning.cuda_pinned_max_bytes // host.itemsize)
    if len(host) <= per:
        return cuda.to_device(host)
    out = cuda.device_array(len(host), host.dtype)
    threads = tuning.host_copy_threads or (os.cpu_count() or 1)
    stream = cuda.stream()
    bufs = [take(per * host.itemsize, tuning) for _ in range(2)]
    done: list = [None, None]
    try:
        for k, lo in enumerate(range(0, len(host), per)):
            hi = min(lo + per, len(host))
            stage = bufs[k % 2].host[:(hi - lo) * host.itemsize].view(host.dtype)
            if done[k % 2] is not None:
                done[k % 2].synchronize()  # the GPU has read this buffer's last chunk
            _copy(host[lo:hi], stage, threads)
            out[lo:hi].copy_to_device(stage, stream=stream)
            done[k % 2] = cuda.event()
            done[k % 2].record(stream)
        stream.synchronize()
    finally:
        for b in bufs:
            give(b, tuning)
    return out
