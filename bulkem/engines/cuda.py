"""CUDA engine: the whole EM loop of every fit runs inside one kernel launch.

G lanes of a warp (an aligned group; :func:`lanes_per_fit`) own one
(dataset, start) fit; a block has ``config.CUDA_WARPS_PER_BLOCK`` warps.
(The float64 refits of float32 fits may take more lanes than a warp: then a
block per fit, ``config.CUDA_LANES_PER_REFIT``.)
Each lane takes every G-th observation of its dataset, so a group reads
neighbouring addresses; after the fused pass the lanes sum their sufficient
statistics and log-likelihood with butterfly shuffles, which leaves the same
total in every lane, and every lane runs the M-step itself.  The M-step and
the per-iteration bookkeeping cost a group the same whatever G, so smaller
groups spend a larger share of their time on observations.  No shared
memory, no block barriers, no host round trip per iteration: each fit checks
its own convergence on the device.

Importing this module never fails for lack of a GPU; :func:`available`
says whether one can be used and, if not, why.
"""

from __future__ import annotations

import atexit
import math
import threading
import time
from typing import NamedTuple

import numpy as np

# numba-cuda 0.30 still reads numpy.row_stack, which numpy 2.5 removed (seen on
# the GPU image: "module 'numpy' has no attribute 'row_stack'").  Restore the
# alias before numba.cuda is imported; drop this once numba-cuda no longer
# needs it.
# (setattr, so that linters' numpy-2 autofixes cannot rewrite the alias away.)
if not hasattr(np, "row_stack"):
    setattr(np, "row_stack", np.vstack)  # noqa: B010

from numba import config as numba_config  # noqa: E402
from numba import cuda, float32, float64  # noqa: E402

if not numba_config.ENABLE_CUDASIM:
    from numba.cuda import libdevice

from .. import config  # noqa: E402
from .driver import EXP_CONSTS, make_em  # noqa: E402

if numba_config.ENABLE_CUDASIM:
    from . import _cudasim

    _cudasim.install()


def _unload_each_library_once(gpus) -> int:
    """Keep one unloading per kernel library; return how many duplicates were dropped.

    numba-cuda 0.30 loads a kernel's compiled library once per process (the
    library is context-independent) but registers its unloading with every
    GPU's context that ran the kernel.  At exit the second unloading of the
    same library crashed processes that had fitted on two H200s ("double
    free or corruption", a segmentation fault; seen in the weakref exit
    finalizers calling ``cuLibraryUnload``).  Run at exit, before those
    finalizers: the libraries are freed with the process either way.
    """
    seen, dropped = set(), 0
    for gpu in gpus:
        ctx = getattr(gpu, "primary_context", None)
        for handle, module in list(getattr(ctx, "modules", {}).items()):
            finalizer = getattr(module, "_finalizer", None)
            if handle in seen and finalizer is not None:
                finalizer.detach()
                dropped += 1
            seen.add(handle)
    return dropped


def _at_exit() -> None:
    try:
        _unload_each_library_once(cuda.gpus)
    except Exception:  # noqa: BLE001 - nothing is left to report to at exit
        pass

_FULL_MASK = 0xFFFFFFFF
_WARP = config.WARP_SIZE


def available() -> tuple[bool, str]:
    """Whether a usable CUDA GPU is present, and what was found."""
    try:
        if cuda.is_available():
            name = getattr(cuda.get_current_device(), "name", b"CUDA simulator")
            return True, name.decode() if isinstance(name, bytes) else str(name)
        return False, "numba.cuda.is_available() is False (no CUDA driver or no GPU found)"
    except Exception as err:  # pragma: no cover - depends on the machine
        return False, f"CUDA could not be initialised: {err}"


# The simulator's jit takes no forceinline; on hardware, inlining keeps the
# per-fit arrays in registers.
_INLINE = {} if numba_config.ENABLE_CUDASIM else {"forceinline": True}


def _device(fn):
    return cuda.jit(device=True, **_INLINE)(fn)


def _group_sums(lanes: int, n_vec: int):
    """Sums over the ``lanes`` lanes that share a fit.

    Up to a warp (aligned groups of a warp), butterfly shuffles leave the
    total in every lane of the group; the mask names the group only, so a fit
    may finish while its warp neighbours go on.  More lanes than a warp make a
    whole block (:func:`_block_threads`): each warp sums its lanes, and every
    lane adds the warps' totals, in warp order, through shared memory.
    ``n_vec`` is the most values ``group_sum_vec`` sums at once.
    """
    group = _FULL_MASK >> (_WARP - min(lanes, _WARP))

    if lanes >= _WARP:  # a constant mask: the code the whole-warp kernel was tuned with
        @_device
        def warp_sum(v):
            off = _WARP // 2
            while off > 0:
                v += cuda.shfl_xor_sync(_FULL_MASK, v, off)
                off //= 2
            return v
    else:
        @_device
        def warp_sum(v):
            mask = group << (cuda.threadIdx.x % _WARP // lanes * lanes)
            off = lanes // 2
            while off > 0:
                v += cuda.shfl_xor_sync(mask, v, off)
                off //= 2
            return v

    if lanes <= _WARP:
        @_device
        def group_sum_vec(a, lo, hi):
            for k in range(lo, hi):
                a[k] = warp_sum(a[k])

        return warp_sum, group_sum_vec

    W = lanes // _WARP

    @_device
    def group_sum(v):
        share = cuda.shared.array(W, float64)
        v = warp_sum(v)
        cuda.syncthreads()  # every lane has read the previous sum
        if cuda.threadIdx.x % _WARP == 0:
            share[cuda.threadIdx.x // _WARP] = v
        cuda.syncthreads()
        v = share[0]
        for w in range(1, W):
            v += share[w]
        return v

    @_device
    def group_sum_vec(a, lo, hi):
        share = cuda.shared.array((W, n_vec), float64)
        for k in range(lo, hi):
            a[k] = warp_sum(a[k])
        cuda.syncthreads()
        if cuda.threadIdx.x % _WARP == 0:
            for k in range(lo, hi):
                share[cuda.threadIdx.x // _WARP, k] = a[k]
        cuda.syncthreads()
        for k in range(lo, hi):
            v = share[0, k]
            for w in range(1, W):
                v += share[w, k]
            a[k] = v

    return group_sum, group_sum_vec


_ONE32 = np.float32(1.0)


@_device
def _exp_neg32(a, xc):
    return libdevice.fast_expf(-a)  # ex2.approx: one multiply and one MUFU


@_device
def _recip32(s):
    return libdevice.fast_fdividef(_ONE32, s)  # rcp.approx: one MUFU


# float32 fits use the hardware's approximate exp2 and reciprocal (relative
# error ~1e-7, as float32 itself); the simulator has no libdevice.
_APPROX32 = None if numba_config.ENABLE_CUDASIM else (_exp_neg32, _recip32)


_kernels: dict = {}


def lanes_per_fit(tol: float, dtype) -> int:
    """Lanes that share a fit: fewer when every fit runs ``max_iter`` iterations (``tol=0``).

    The fits of a warp then finish together, so packing several into a warp
    costs no idle lanes; with ``tol > 0`` a warp would wait for its slowest fit.
    """
    if tol > 0:
        return config.CUDA_LANES_PER_FIT
    return config.CUDA_LANES_PER_FIT_TOL0[np.dtype(dtype).name]


def _block_threads(lanes: int) -> int:
    """Threads per block: ``config.CUDA_WARPS_PER_BLOCK`` warps, or one fit's lanes if more."""
    return max(config.CUDA_WARPS_PER_BLOCK * _WARP, lanes)


def _fits_per_block(lanes: int) -> int:
    return _block_threads(lanes) // lanes


def _kernel(family, n_components, n_dims, dtype, lanes: int = _WARP):
    G = lanes
    key = (family.name, n_components, n_dims, np.dtype(dtype).name, config.CUDA_WARPS_PER_BLOCK,
           config.CUDA_MAX_REGISTERS, G, config.ESTEP_BLOCK_OBS[np.dtype(dtype).name])
    if key in _kernels:
        return _kernels[key]
    if not _kernels and not numba_config.ENABLE_CUDASIM:
        # Registered after numba's exit hooks, so it runs before them (LIFO).
        atexit.register(_at_exit)
    if G < 1 or G > 1024 or G & (G - 1):
        raise ValueError(f"{G} lanes per fit (config.CUDA_LANES_PER_*); expected a power "
                         "of 2 up to 1024 (more than 32: a block per fit).")
    em = make_em(family, n_components, n_dims, dtype.type, _device,
                 *_group_sums(G, family.n_stats(n_components, n_dims)),
                 _APPROX32 if dtype == np.float32 else None, redo_here=False)
    NP = family.n_params(n_components, n_dims)
    NC = family.n_coef(n_components, n_dims)
    NS = family.n_stats(n_components, n_dims)
    M = n_components
    S = NS // M
    FPB = _fits_per_block(G)
    cdt = float32 if dtype == np.float32 else float64
    opts = ({} if config.CUDA_MAX_REGISTERS is None or numba_config.ENABLE_CUDASIM  # no such option
            else {"max_registers": config.CUDA_MAX_REGISTERS})

    REDO = config.REDO_FLOAT64

    @cuda.jit(**opts)
    def kernel(feat, feat64, stride, offsets, fit_ds, const, params_io, status, n_iter, loglik,
               xc, max_iter, tol, drop_rtol, reg, picked, n_picked):
        tid = cuda.threadIdx.x
        f = cuda.blockIdx.x * FPB + tid // G
        lane = tid % G
        if len(n_picked):  # only the fits listed in picked[:n_picked[0]]
            if f >= n_picked[0]:
                return
            f = picked[f]
        elif f >= fit_ds.shape[0]:
            return  # the fit's lanes leave together
        params = cuda.local.array(NP, float64)
        coef = cuda.local.array(NC, float64)
        dcoef = cuda.local.array(NC, cdt)
        stats = cuda.local.array(NS, float64)
        part = cuda.local.array(NS, cdt)
        tot = cuda.local.array(S, float64)
        t = cuda.local.array(M, cdt)
        dcoef64 = cuda.local.array(NC, float64)  # (float32 fits' final float64 pass)
        part64 = cuda.local.array(NS, float64)
        t64 = cuda.local.array(M, float64)
        back = cuda.local.array(NP, float64)  # (unused: float32 fits that give up, REDO)
        for k in range(NP):
            params[k] = params_io[f, k]
        d = fit_ds[f]
        st, it, ll = em(feat, feat64, stride, offsets[d], offsets[d + 1], lane, G, const[d], params,
                        coef, dcoef, stats, part, tot, t, dcoef64, part64, t64, back,
                        xc, max_iter, tol, drop_rtol, reg)
        if lane == 0:
            status[f] = st
            n_iter[f] = it
            loglik[f] = ll
            if st != REDO:  # (a fit to do again keeps its start)
                for k in range(NP):
                    params_io[f, k] = params[k]

    _kernels[key] = kernel
    return kernel


@cuda.jit
def _pick(status, value, picked, n_picked):
    """List in ``picked[:n_picked[0]]`` the fits whose status is ``value`` (in any order)."""
    f = cuda.grid(1)
    if f < status.shape[0] and status[f] == value:
        picked[cuda.atomic.add(n_picked, 0, 1)] = f


_ALIGN = 256  # bytes: where each array of a chunk's buffer starts
_pool: dict = {}  # device -> Buffers (page-locked) not in use
_pool_lock = threading.Lock()


def _layout(job, chunk) -> list[tuple[int, np.dtype, tuple]]:
    """A chunk's arrays in its one buffer: (byte offset, dtype, shape) of each.

    In order: the inputs (float64 features, offsets, constants, fit datasets;
    unless the compute dtype is float64, the features in it and a zero, the
    count of fits to do again), then the arrays the kernel writes
    (parameters, which come in as the starts, status, iterations,
    log-likelihoods; unless float64, the list of fits to do again, on the
    GPU only).  One copy takes everything up to the status to the GPU and one
    brings the parameters to the log-likelihoods back.
    """
    n = len(chunk.fits)
    narrow = np.dtype(job.dtype) != np.float64
    arrays = [(np.float64, chunk.feat.shape), (np.int64, chunk.offsets.shape),
              (np.float64, chunk.const.shape), (np.int64, chunk.fit_ds.shape),
              (job.dtype, chunk.feat.shape if narrow else (0,)), (np.int32, (int(narrow),)),
              (np.float64, (n, job.params.shape[1])), (np.int32, (n,)), (np.int32, (n,)),
              (np.float64, (n,)), (np.int64, (n if narrow else 0,))]
    out, pos = [], 0
    for dtype, shape in arrays:
        dtype = np.dtype(dtype)
        out.append((pos, dtype, shape))
        pos += -(-dtype.itemsize * math.prod(shape) // _ALIGN) * _ALIGN
    out.append((pos, None, ()))  # the end
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


def _take_buffers(nbytes: int) -> Buffers:
    """Host and device buffers for one chunk.

    Page-locking and device allocation are slow, so buffers up to
    ``config.CUDA_PINNED_MAX_BYTES`` are page-locked and kept in a pool for
    later chunks and calls (:func:`_give_buffers` returns them).  Larger
    ones (and all under the simulator) are ordinary host memory, not pooled.
    """
    if nbytes > config.CUDA_PINNED_MAX_BYTES or numba_config.ENABLE_CUDASIM:
        return Buffers(nbytes, pinned=False)
    dev = cuda.get_current_device().id
    with _pool_lock:
        free = _pool.setdefault(dev, [])
        big = [k for k, b in enumerate(free) if len(b) >= nbytes]
        if big:
            return free.pop(min(big, key=lambda k: len(free[k])))  # the smallest that will do
    return Buffers(nbytes, pinned=True)


def _give_buffers(bufs: Buffers) -> None:
    """Return a chunk's buffers to the pool once the GPU is done with them."""
    if not bufs.pinned:
        return
    with _pool_lock:
        free = _pool.setdefault(cuda.get_current_device().id, [])
        free.append(bufs)
        if len(free) > config.CUDA_PINNED_POOL:
            free.pop(min(range(len(free)), key=lambda k: len(free[k])))


class Running(NamedTuple):
    """A chunk whose fits were launched: its stream, buffers and done event."""

    chunk: object
    stream: object
    done: object  # event recorded after the kernel (None under the simulator)
    layout: list
    bufs: Buffers  # results come back into the host buffer; held until the GPU is done
    status: object  # the device view of the status array, read for progress


def launch(job, chunk, stream) -> Running:
    """Copy one chunk to the current GPU and start its fits; return without waiting.

    Parameters
    ----------
    job : bulkem.api.Job
        The chunk's starting values are read from ``job.init``.
    chunk : bulkem.engines.scheduler.Chunk
        The chunk's datasets, packed on the host.
    stream : numba.cuda.cudadrv.driver.Stream

    Returns
    -------
    Running
        Pass it to :func:`finish`.
    """
    lanes = lanes_per_fit(job.tol, job.dtype)
    kernel = _kernel(job.family, job.n_components, job.n_dims, job.dtype, lanes)
    layout = _layout(job, chunk)
    bufs = _take_buffers(layout[-1][0])
    h, d = bufs.views(layout)
    for a, b in zip(h[:4], (chunk.feat, chunk.offsets, chunk.const, chunk.fit_ds), strict=True):
        a[...] = b
    if len(h[4]):
        h[4][...] = chunk.feat  # the features in the compute dtype
    h[5].fill(0)
    np.take(job.init, chunk.fits, axis=0, out=h[6])
    h[7].fill(-1)  # status -1: not finished
    sent = layout[8][0]  # inputs, starts and status go over; the rest is written there
    bufs.device[:sent].copy_to_device(bufs.host[:sent], stream=stream)
    feat64, offsets, const, fit_ds, feat, n_picked, params, status, n_iter, loglik, picked = d
    if len(feat) == 0:
        feat = feat64
    n = len(chunk.fits)
    common = (params, status, n_iter, loglik, EXP_CONSTS, job.max_iter, job.tol)  # both kernels'
    fpb = _fits_per_block(lanes)
    kernel[(n + fpb - 1) // fpb, _block_threads(lanes), stream](
        feat, feat64, chunk.stride, offsets, fit_ds, const, *common, job.drop_rtol, job.reg,
        picked[:0], n_picked[:0])
    if len(n_picked):
        # The float32 fits that gave up, again in float64 from their starts,
        # on the same stream: no waiting here.  The grid has room for all.
        _pick[(n + 255) // 256, 256, stream](status, config.REDO_FLOAT64, picked, n_picked)
        lanes = config.CUDA_LANES_PER_REFIT or lanes_per_fit(job.tol, np.float64)
        refit = _kernel(job.family, job.n_components, job.n_dims, np.dtype(np.float64), lanes)
        fpb = _fits_per_block(lanes)
        refit[(n + fpb - 1) // fpb, _block_threads(lanes), stream](
            feat64, feat64, chunk.stride, offsets, fit_ds, const, *common,
            config.DECREASE_RTOL["float64"], job.reg, picked, n_picked)
    back, end = layout[6][0], layout[10][0]  # the results: the parameters to the log-likelihoods
    # From page-locked memory the copy back can be queued now; from pageable
    # memory it would wait for the kernel here, so it waits for finish().
    if bufs.pinned:
        bufs.device[back:end].copy_to_host(bufs.host[back:end], stream=stream)
    done = None
    if not numba_config.ENABLE_CUDASIM:
        done = cuda.event()
        done.record(stream)
    return Running(chunk, stream, done, layout, bufs, status)


def finish(job, run: Running, watch=None) -> None:
    """Wait for a launched chunk and copy its results into the job.

    ``watch(done)``, if given, is called every ``config.PROGRESS_POLL_S``
    while the kernel runs with the number of the chunk's fits finished so
    far, read through a second stream; the kernel itself is untouched.
    """
    if run.done is not None:
        # Wait by asking, not by a blocking call: the driver's blocking waits
        # keep the GIL (measured: one thread's wait held the others' launches
        # back for tens of ms).  Finished fits are counted seldom.
        poll = cuda.stream() if watch is not None else None
        seen = np.empty(len(run.chunk.fits), np.int32)
        last = time.perf_counter()
        while not run.done.query():
            time.sleep(config.CUDA_WAIT_POLL_S)
            if poll is not None and time.perf_counter() - last >= config.PROGRESS_POLL_S:
                run.status.copy_to_host(seen, stream=poll)
                poll.synchronize()
                watch(int(np.count_nonzero(seen >= 0)))
                last = time.perf_counter()
    bufs = run.bufs
    if not bufs.pinned:  # not queued by launch()
        back, end = run.layout[6][0], run.layout[10][0]
        bufs.device[back:end].copy_to_host(bufs.host[back:end], stream=run.stream)
    run.stream.synchronize()
    fits = run.chunk.fits
    params, status, n_iter, loglik = bufs.views(run.layout)[0][6:10]
    job.params[fits], job.status[fits], job.n_iter[fits], job.loglik[fits] = (
        params, status, n_iter, loglik)
    _give_buffers(bufs)


def run_fits(job, progress, on_starts=None) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the GPUs, in place.

    ``on_starts()``, if given, runs in the calling thread once every start is
    drawn, while the GPUs still work.
    """
    from . import scheduler

    scheduler.run_fits(job, progress, on_starts)
