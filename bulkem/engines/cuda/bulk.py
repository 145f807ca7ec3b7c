"""The bulk CUDA kernel: the whole EM loop of every fit runs inside one launch.

G lanes of a warp (an aligned group; :func:`lanes_per_fit`) own one
(dataset, start) fit; a block has ``Tuning.cuda_warps_per_block`` warps.
(The float64 refits of float32 fits may take more lanes than a warp: then a
block per fit, ``Tuning.cuda_lanes_per_refit``.)
Each lane takes every G-th item of its dataset (observation of a mixture,
sequence of a hidden Markov model), so a group reads neighbouring addresses;
after the E-step the lanes sum their statistics and log-likelihood with
butterfly shuffles, which leaves the same total in every lane, and every lane
runs the M-step itself.  No shared memory (but for block-wide refits), no
host round trip per iteration: each fit checks its own convergence on the
device.  The kernel is the model-agnostic driver
(:func:`bulkem.fitting.driver.make_em`) around a model's pieces.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np
from numba import float32, float64

from ...fitting.driver import accel_size, make_em
from ...kernels.fastmath import EXP_CONSTS
from ...kernels.target import Target
from ...tuning import REDO_FLOAT64, WARP_SIZE
from . import buffers
from .compat import SIMULATED, cuda, device, local_array, register_exit_hook

if not SIMULATED:
    from numba.cuda import libdevice

_FULL_MASK = 0xFFFFFFFF
_WARP = WARP_SIZE

# The simulator's jit takes no forceinline; on hardware, inlining keeps the
# per-fit arrays in registers.


def _device_shared(fn):
    """A device function that declares a shared array, inlined in Numba's IR.

    A device function is its own library, linked into each caller's; when two
    callers of one kernel link it (the driver and its loop), its shared array,
    a global of external linkage, is defined twice and NVVM refuses the
    kernel (ERROR_INVALID_IR).  Inlined in Numba's IR, each call site lowers
    its own array under a name of its own.
    """
    return cuda.jit(device=True, **({} if SIMULATED else {"inline": "always"}))(fn)


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
        @device
        def warp_sum(v):
            off = _WARP // 2
            while off > 0:
                v += cuda.shfl_xor_sync(_FULL_MASK, v, off)
                off //= 2
            return v
    else:
        @device
        def warp_sum(v):
            mask = group << (cuda.threadIdx.x % _WARP // lanes * lanes)
            off = lanes // 2
            while off > 0:
                v += cuda.shfl_xor_sync(mask, v, off)
                off //= 2
            return v

    if lanes <= _WARP:
        @device
        def group_sum_vec(a, lo, hi):
            for k in range(lo, hi):
                a[k] = warp_sum(a[k])

        return warp_sum, group_sum_vec

    W = lanes // _WARP

    @_device_shared
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

    @_device_shared
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


@device
def _exp_neg32(a, xc):
    return libdevice.fast_expf(-a)  # ex2.approx: one multiply and one MUFU


@device
def _recip32(s):
    return libdevice.fast_fdividef(_ONE32, s)  # rcp.approx: one MUFU


# float32 fits use the hardware's approximate exp2 and reciprocal (relative
# error ~1e-7, as float32 itself); the simulator has no libdevice.
_APPROX32 = None if SIMULATED else (_exp_neg32, _recip32)


def target(lanes: int, n_vec: int) -> Target:
    """The CUDA target for fits of ``lanes`` lanes that sum up to ``n_vec`` values at once."""
    return Target("cuda", device, *_group_sums(lanes, n_vec), approx32=_APPROX32,
                  redo_here=False, local=local_array)


def lanes_per_fit(tol: float, dtype, model) -> int:
    """Lanes that share a fit: fewer when every fit runs ``max_iter`` iterations (``tol=0``).

    The fits of a warp then finish together, so packing several into a warp
    costs no idle lanes; with ``tol > 0`` a warp would wait for its slowest fit.
    Sequence models, whose lanes split whole sequences, have their own
    (``Tuning.cuda_lanes_per_fit_units``, or the model's ``cuda_lanes``).  The model's
    ``tuning`` holds the numbers.
    """
    tuning = model.tuning
    if model.sizes().buf_per_len:
        return getattr(model, "cuda_lanes", tuning.cuda_lanes_per_fit_units)[tol != 0]
    if tol != 0:  # (tol < 0: fit(rtol=-tol))
        return tuning.cuda_lanes_per_fit
    return tuning.cuda_lanes_per_fit_tol0[np.dtype(dtype).name]


def _block_threads(lanes: int, tuning) -> int:
    """Threads per block: ``tuning.cuda_warps_per_block`` warps, or one fit's lanes if more."""
    return max(tuning.cuda_warps_per_block * _WARP, lanes)


def _fits_per_block(lanes: int, tuning) -> int:
    return _block_threads(lanes, tuning) // lanes


_kernels: dict = {}
# Local memory a GPU thread may have (CUDA: 512 KiB), less room for the driver's own frames.
LOCAL_BYTES_MAX = 480 * 1024


def kernel(model, dtype, lanes: int = _WARP):
    """The bulk kernel of a model, compute dtype and lanes per fit (compiled once, cached).

    ``kernel[grid, block, stream](data, data64, offsets, fit_ds, const, params, status, n_iter,
    loglik, xc, max_iter, tol, drop_rtol, reg, picked, n_picked, buf, trace, accel,
    stats_out)``: fits ``f``
    (or, when
    ``n_picked`` is not empty, the fits listed in ``picked[:n_picked[0]]``) of dataset
    ``fit_ds[f]``, whose items are ``offsets[d]:offsets[d + 1]``, from ``params[f]`` in place;
    ``buf`` holds one column per thread of the grid (the model's per-lane buffer); ``trace``
    a row per fit for its log-likelihood by iteration (no columns: none kept); ``accel`` 1:
    SQUAREM (:func:`bulkem.fitting.driver.make_accel`); ``stats_out`` a row per fit for its
    last E-step's statistics (``Job.stats``; no columns: none kept).
    """
    G = lanes
    dtype = np.dtype(dtype)
    units = model.sizes().buf_per_len > 0  # a sequence model
    tuning = model.tuning
    regs = (getattr(model, "cuda_max_registers", tuning.cuda_max_registers_units) if units
            else tuning.cuda_max_registers)
    key = (model.key, tuning.key("cuda"), dtype.name, G)
    if key in _kernels:
        return _kernels[key]
    register_exit_hook()
    if G < 1 or G > 1024 or G & (G - 1):
        raise ValueError(f"{G} lanes per fit (Tuning.cuda_lanes_per_*); expected a power "
                         "of 2 up to 1024 (more than 32: a block per fit).")
    sz = model.sizes()
    em = make_em(model, dtype.type, target(G, sz.stats))
    # (local arrays need a positive size)
    NP, NS, NT, NC, NK, NX = (max(n, 1) for n in (sz.params, sz.stats, sz.totals, sz.coef,
                                                   sz.work, sz.scratch))
    NB = accel_size(NP)
    local = 8 * (NP + NT + NC + NS + NB + 2 * (NK + NX))  # bytes of one lane's arrays
    if local > LOCAL_BYTES_MAX:
        raise ValueError(
            f"a fit of {sz.params:,} parameters needs {local / 1024:,.0f} KiB of local memory "
            f"per GPU thread, more than the {LOCAL_BYTES_MAX // 1024} KiB a thread may have "
            "(CUDA's limit); fit it on the CPU (backend='cpu'), with fewer components or "
            "dimensions, or, for a few datasets of at least tuning.large_min_obs values, "
            "over the whole GPU a fit at a time (tuning=Tuning(strategy='large')).")
    FPB = _fits_per_block(G, tuning)
    cdt = float32 if dtype == np.float32 else float64
    opts = {} if regs is None or SIMULATED else {"max_registers": regs}  # (simulator: no option)
    REDO = REDO_FLOAT64

    @cuda.jit(**opts)
    def bulk(data, data64, offsets, fit_ds, const, params_io, status, n_iter, loglik, xc,
             max_iter, tol, drop_rtol, reg, picked, n_picked, buf, trace, accel, stats_out):
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
        tot = cuda.local.array(NT, float64)
        coef = cuda.local.array(NC, float64)
        work = cuda.local.array(NK, cdt)
        stats = cuda.local.array(NS, float64)
        scratch = cuda.local.array(NX, cdt)
        work64 = cuda.local.array(NK, float64)  # (float32 fits' final float64 pass)
        scratch64 = cuda.local.array(NX, float64)
        back = cuda.local.array(NB, float64)  # the accelerator's (a float32 refit's: none here)
        row = buf[:, 0]  # the lane's buffer: a column, so that a warp's lanes are side by side
        if buf.shape[0]:
            row = buf[:, cuda.blockIdx.x * cuda.blockDim.x + tid]
        for k in range(NP):
            params[k] = params_io[f, k]
        d = fit_ds[f]
        st, it, ll = em(data, data64, offsets[d], offsets[d + 1], lane, G, const[d], params,
                        tot, coef, work, stats, scratch, work64, scratch64, back, row, xc,
                        max_iter, tol, drop_rtol, drop_rtol, reg, trace[f], accel)  # (no refit)
        if lane == 0:
            status[f] = st
            n_iter[f] = it
            loglik[f] = ll
            if st != REDO:  # (a fit to do again keeps its start)
                for k in range(NP):
                    params_io[f, k] = params[k]
                for k in range(stats_out.shape[1]):
                    stats_out[f, k] = stats[k]

    _kernels[key] = bulk
    return bulk


@cuda.jit
def _pick(status, value, picked, n_picked):
    """List in ``picked[:n_picked[0]]`` the fits whose status is ``value`` (in any order)."""
    f = cuda.grid(1)
    if f < status.shape[0] and status[f] == value:
        picked[cuda.atomic.add(n_picked, 0, 1)] = f


def _is_array(a) -> bool:
    return isinstance(a, np.ndarray)


def _layout(job, chunk) -> tuple[list, dict]:
    """A chunk's arrays in its one buffer (:func:`buffers.layout`), and where each group starts.

    In order: the inputs (the model's batch arrays in float64, offsets,
    constants, fit datasets; unless the compute dtype is float64, the batch's
    float arrays in it and a zero, the count of fits to do again), then the
    arrays the kernel writes (parameters, which come in as the starts,
    status, iterations, log-likelihoods; unless float64, the list of fits to
    do again, on the GPU only).  One copy takes everything up to the status
    to the GPU and one brings the parameters to the log-likelihoods back.
    ``index`` names the position in the layout of ``data64`` (its arrays),
    ``narrow`` (the converted ones), ``offsets``, ``params``, ``status``,
    ``loglik`` and ``picked``.
    """
    n = len(chunk.fits)
    narrow = np.dtype(job.dtype) != np.float64
    arrays, index = [], {}
    index["data64"] = [len(arrays) + k for k in range(sum(map(_is_array, chunk.data64)))]
    arrays += [(a.dtype, a.shape) for a in chunk.data64 if _is_array(a)]
    index["offsets"] = len(arrays)
    arrays += [(np.int64, chunk.offsets.shape), (np.float64, chunk.const.shape),
               (np.int64, chunk.fit_ds.shape)]
    floats = [a for a in chunk.data64 if _is_array(a) and a.dtype == np.float64] if narrow else []
    index["narrow"] = list(range(len(arrays), len(arrays) + len(floats)))
    arrays += [(job.dtype, a.shape) for a in floats]
    arrays.append((np.int32, (int(narrow),)))
    index["params"] = len(arrays)
    arrays += [(np.float64, (n, job.params.shape[1])), (np.int32, (n,)), (np.int32, (n,)),
               (np.float64, (n,)), (np.int64, (n if narrow else 0,))]
    index["status"], index["loglik"], index["picked"] = (index["params"] + 1,
                                                        index["params"] + 3, index["params"] + 4)
    return buffers.layout(arrays), index


def _tuples(data64: tuple, dev: list, index: dict, narrow: bool) -> tuple[tuple, tuple]:
    """The kernel's ``data`` and ``data64`` tuples: the chunk's arrays replaced by device views."""
    it64 = iter(index["data64"])
    d64 = tuple(dev[next(it64)] if _is_array(a) else a for a in data64)
    if not narrow:
        return d64, d64
    itn = iter(index["narrow"])
    d = tuple(dev[next(itn)] if _is_array(a) and a.dtype == np.float64 else v
              for a, v in zip(data64, d64, strict=True))
    return d, d64


_no_buf: dict = {}  # device -> an empty (0, 1) array, for models without per-lane buffers


def _lane_buffer(rows: int, cols: int):
    """A (cols, rows) float64 device array: each thread's buffer is a column.

    A new one per chunk: chunks in flight on other streams hold theirs.
    Column-major, so that neighbouring lanes' values at the same step are
    neighbours in memory (coalesced).
    """
    if cols == 0:
        dev = getattr(cuda.get_current_device(), "id", 0)  # (the simulator's has none)
        if dev not in _no_buf:
            _no_buf[dev] = cuda.device_array((0, 1), np.float64)
        return _no_buf[dev]
    return cuda.device_array((cols, rows), np.float64)


class Running(NamedTuple):
    """A chunk whose fits were launched: its stream, buffers and done event."""

    chunk: object
    stream: object
    done: object  # event recorded after the kernel (None under the simulator)
    layout: list
    index: dict
    bufs: buffers.Buffers  # results come back into the host buffer; held until the GPU is done
    status: object  # the device view of the status array, read for progress
    lane_buf: object  # the per-lane buffers, held until the GPU is done
    trace: object  # each fit's log-likelihood by iteration (no columns without fit(trace=True))
    stats: object  # each fit's last E-step statistics (no columns without Job.stats)


def launch(job, chunk, stream) -> Running:
    """Copy one chunk to the current GPU and start its fits; return without waiting.

    Parameters
    ----------
    job : bulkem.api.Job
        The chunk's starting values are read from ``job.init``.
    chunk : bulkem.engines.cuda.scheduler.Chunk
        The chunk's datasets, packed on the host (``data64``, ``offsets``, ``const``).
    stream : numba.cuda.cudadrv.driver.Stream

    Returns
    -------
    Running
        Pass it to :func:`finish`.
    """
    lanes = lanes_per_fit(job.tol, job.dtype, job.model)
    bulk = kernel(job.model, job.dtype, lanes)
    narrow = np.dtype(job.dtype) != np.float64
    layout, index = _layout(job, chunk)
    bufs = buffers.take(layout[-1][0], job.tuning)
    h, d = bufs.views(layout)
    arrays = [a for a in chunk.data64 if _is_array(a)]
    for k, a in zip(index["data64"], arrays, strict=True):
        h[k][...] = a
    o = index["offsets"]
    h[o][...], h[o + 1][...], h[o + 2][...] = chunk.offsets, chunk.const, chunk.fit_ds
    floats = [a for a in arrays if a.dtype == np.float64] if narrow else []
    for k, a in zip(index["narrow"], floats, strict=True):
        h[k][...] = a  # the batch's float arrays in the compute dtype
    p = index["params"]
    h[p - 1].fill(0)
    np.take(job.init, chunk.fits, axis=0, out=h[p])
    h[p + 1].fill(-1)  # status -1: not finished
    sent = layout[p + 2][0]  # inputs, starts and status go over; the rest is written there
    bufs.device[:sent].copy_to_device(bufs.host[:sent], stream=stream)
    data, data64 = _tuples(chunk.data64, d, index, narrow)
    offsets, const, fit_ds = d[o], d[o + 1], d[o + 2]
    n_picked, params, status, n_iter, loglik, picked = d[p - 1:p + 5]
    n = len(chunk.fits)
    tuning = job.tuning
    fpb = _fits_per_block(lanes, tuning)
    grid, threads = (n + fpb - 1) // fpb, _block_threads(lanes, tuning)
    if narrow:
        relanes = lanes_per_fit(job.tol, np.float64, job.model)
        if tuning.cuda_lanes_per_refit and not job.model.sizes().buf_per_len:
            relanes = tuning.cuda_lanes_per_refit  # (models with lane buffers: as many as ever)
        refit = kernel(job.model, np.float64, relanes)
        refpb = _fits_per_block(relanes, tuning)
        regrid, rethreads = (n + refpb - 1) // refpb, _block_threads(relanes, tuning)
    rows = max(grid * threads, regrid * rethreads) if narrow else grid * threads
    lane_buf = _lane_buffer(rows, job.model.sizes().buf_per_len * chunk.longest)
    common = (params, status, n_iter, loglik, EXP_CONSTS, job.max_iter, job.tol)  # both kernels'
    # The log-likelihood of every iteration (fit(trace=True)), else rows of none; a refit
    # writes its fit's row again from the start (finish() keeps the first n_iter + 1).
    trace = cuda.device_array((n, job.max_iter + 1 if job.trace is not None else 0),
                              np.float64, stream=stream)
    # Each fit's last E-step statistics (Job.stats: standard errors), else rows of none.
    stats = cuda.device_array((n, job.stats.shape[1] if job.stats is not None else 0),
                              np.float64, stream=stream)
    bulk[grid, threads, stream](data, data64, offsets, fit_ds, const, *common, job.drop_rtol,
                                job.reg, picked[:0], n_picked[:0], lane_buf, trace, job.accel,
                                stats)
    if narrow:
        # The float32 fits that gave up, again in float64 from their starts,
        # on the same stream: no waiting here.  The grid has room for all.
        _pick[(n + 255) // 256, 256, stream](status, REDO_FLOAT64, picked, n_picked)
        refit[regrid, rethreads, stream](data64, data64, offsets, fit_ds, const, *common,
                                         job.drop_rtol64, job.reg, picked,
                                         n_picked, lane_buf, trace, job.accel, stats)
    back, end = layout[p][0], layout[p + 4][0]  # the results: the parameters to the log-likelihoods
    # From page-locked memory the copy back can be queued now; from pageable
    # memory it would wait for the kernel here, so it waits for finish().
    if bufs.pinned:
        bufs.device[back:end].copy_to_host(bufs.host[back:end], stream=stream)
    done = None
    if not SIMULATED:
        done = cuda.event()
        done.record(stream)
    return Running(chunk, stream, done, layout, index, bufs, status, lane_buf, trace, stats)


def finish(job, run: Running, watch=None) -> None:
    """Wait for a launched chunk and copy its results into the job.

    ``watch(done)``, if given, is called every ``tuning.progress_poll_s``
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
            time.sleep(job.tuning.cuda_wait_poll_s)
            if poll is not None and time.perf_counter() - last >= job.tuning.progress_poll_s:
                run.status.copy_to_host(seen, stream=poll)
                poll.synchronize()
                watch(int(np.count_nonzero(seen >= 0)))
                last = time.perf_counter()
    bufs = run.bufs
    if not bufs.pinned:  # not queued by launch()
        p = run.index["params"]
        back, end = run.layout[p][0], run.layout[p + 4][0]
        bufs.device[back:end].copy_to_host(bufs.host[back:end], stream=run.stream)
    run.stream.synchronize()
    fits = run.chunk.fits
    p = run.index["params"]
    params, status, n_iter, loglik = bufs.views(run.layout)[0][p:p + 4]
    job.params[fits], job.status[fits], job.n_iter[fits], job.loglik[fits] = (
        params, status, n_iter, loglik)
    if job.trace is not None:
        job.trace[fits] = run.trace.copy_to_host()
    if job.stats is not None:
        job.stats[fits] = run.stats.copy_to_host()
    buffers.give(bufs, job.tuning)


