"""The wide regime on the GPU: one fit spread over every thread of the grid, any model of units.

A fit's units (a TMAP trace's runs, an HMM dataset's sequences) are dealt
to all the threads of a grid sized to fill the GPU, and each iteration is
three small pieces of work with no host round trip:

1. The E-step kernel: thread ``t`` of ``T`` runs the model's ``estep`` over
   its units ``t, t + T, t + 2T, ...`` (a lane of the driver with
   ``step = T``) into statistics of its own (registers and local memory;
   small: 18 values for a TMAP of 3 branches), then each warp sums its
   threads' statistics by butterfly shuffles and the block sums its warps in
   warp order: one row of block partials per block, in a fixed order.
2. The reduction kernel (one block): column sums of the partials in a fixed
   order; then one thread runs ``complete``, the stopping rule, the M-step
   and ``prepare`` for the next iteration, on the device.  A done flag makes
   later launches return at once; the host reads it every
   ``Tuning.wide_cuda_check_every`` iterations.

Balance: before the fit, the units are sorted longest first and dealt in
rounds of ``T``, every other round in reverse (a snake deal), and stored in
that order: thread ``t``'s ``r``-th unit is unit ``r T + t`` of the copy.
Each thread gets the same number of units (one less in the last round),
their total lengths differ by about one unit's length at most (as the
paper's greedy longest-first deal), the threads of a warp take units of
nearly equal lengths side by side (little divergence), and their reads of
each round's units are neighbours in memory.

float32 fits follow the driver: a fit that float32 would stop as degenerate
is fitted again in float64 from its start, and the returned log-likelihood
of a float32 fit is one float64 E-step at its parameters.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
from numba import float32, float64, njit

from ...fitting.driver import accel_size, gave_up, make_accel, make_step
from ...kernels.fastmath import EXP_CONSTS
from ...kernels.target import Target
from ...tuning import WARP_SIZE
from .bulk import _APPROX32, _group_sums
from .compat import SIMULATED, cuda, device, local_array, prepared_launch, register_exit_hook

_WARP = WARP_SIZE


@device
def _same(x):
    return x


@device
def _nothing(a, lo, hi):
    pass


# The pieces run by one thread each: nothing to sum across lanes inside them.
_TARGET = Target("cuda", device, _same, _nothing, approx32=_APPROX32, redo_here=False,
                 local=local_array)


def deal(lengths: np.ndarray, n_threads: int) -> np.ndarray:
    """The order in which a fit's units are stored so that the threads get equal work.

    Parameters
    ----------
    lengths : ndarray of shape (n_units,)
        Values per unit (the cost of a unit).
    n_threads : int
        ``T``, the threads of the grid.

    Returns
    -------
    ndarray of shape (n_units,)
        ``order``: position ``r T + t`` of the copy holds unit ``order[r T + t]``,
        thread ``t``'s ``r``-th unit.  Units are taken longest first, ``T`` per
        round; every other full round is dealt in reverse (thread ``T - 1``
        first), the last, partial round to threads ``0, 1, ...``.
    """
    lengths = np.asarray(lengths)
    n = len(lengths)
    if n and lengths.dtype.kind in "iu" and 0 <= lengths.min() and lengths.max() <= 4 * n + 1024:
        order = np.empty(n, dtype=np.int64)  # (a counting sort: one pass to count, one to place)
        _deal_counting(lengths.astype(np.int64, copy=False), n_threads, int(lengths.max()), order)
        return order
    key = -lengths
    if n and 0 <= lengths.min() and lengths.max() < 1 << 15:
        key = key.astype(np.int16)  # (numpy's stable sort of 16-bit keys is a radix sort)
    ranked = np.argsort(key, kind="stable")
    k = np.arange(n)
    r, t = k // n_threads, k % n_threads
    full = n // n_threads
    thread = np.where((r % 2 == 1) & (r < full), n_threads - 1 - t, t)
    order = np.empty(n, dtype=np.int64)
    order[r * n_threads + thread] = ranked
    return order


@njit(cache=True, nogil=True)
def _deal_counting(lengths, T, top, order):
    """:func:`deal` by a counting sort of the lengths (``0 <= lengths <= top``): units of equal
    length keep their order, as in the stable sort, so the same ``order``."""
    n = len(lengths)
    at = np.zeros(top + 2, np.int64)  # rank of the first unit of each length, longest first
    for i in range(n):
        at[top - lengths[i] + 1] += 1
    for k in range(1, top + 2):
        at[k] += at[k - 1]
    full = n // T
    for i in range(n):
        key = top - lengths[i]
        k = at[key]
        at[key] = k + 1
        r = k // T
        t = k - r * T
        if r % 2 == 1 and r < full:
            t = T - 1 - t
        order[r * T + t] = i


def thread_loads(lengths: np.ndarray, order: np.ndarray, n_threads: int) -> np.ndarray:
    """Values each thread takes under ``order`` (:func:`deal`), ``(n_threads,)``."""
    out = np.zeros(n_threads, dtype=np.int64)
    _add_loads(np.asarray(lengths, dtype=np.int64), np.asarray(order, dtype=np.int64), out)
    return out


@njit(cache=True, nogil=True)
def _add_loads(lengths, order, out):
    """``out[r % T] += lengths[order[r]]``: one pass (a bincount of 10^6 weighted positions
    took 15 ms of a TMAP Table-1 call)."""
    T = len(out)
    for r in range(len(order)):
        out[r % T] += lengths[order[r]]


_kernels: dict = {}


def kernels(model, dtype):
    """``(init, estep, reduce, n_partials)`` of a model and compute dtype (compiled once).

    * ``init[1, 1](params, tot, coef, work, fstate, back, accel)``: ``fstate[2] =
      prepare(...)`` (and the accelerator's state in ``back`` begun,
      :func:`bulkem.fitting.driver.make_accel`);
    * ``estep[nb, wide_cuda_threads](data, lo, hi, work, part, istate, buf, xc)``;
    * ``reduce[1, wide_cuda_reduce_threads](part, nb, istate, fstate, params, tot,
      coef, work, n, const, max_iter, tol, drop_rtol, reg, back, accel, trace)``: the step
      after the E-step (:func:`bulkem.fitting.driver.make_step`), each pass's log-likelihood
      in ``trace[it]`` as far as it is long (``fit(trace=True)``; zero-length otherwise).

    ``istate`` (int64): done flag, passes done, status; ``fstate`` (float64):
    the last kept log-likelihood, the log-likelihood, ``prepare``'s base term.  The sizes are the
    model's ``tuning`` (``wide_cuda_*``), compiled in.
    """
    dtype = np.dtype(dtype)
    tuning = model.tuning
    NTH = tuning.wide_cuda_threads
    RT, RC = tuning.wide_cuda_reduce_threads, tuning.wide_cuda_reduce_cols
    regs = None if SIMULATED else tuning.wide_cuda_max_registers
    key = (model.key, tuning.key("cuda"), dtype.name)
    if key in _kernels:
        return _kernels[key]
    register_exit_hook()
    if NTH % _WARP or RT % RC:
        raise ValueError(f"Tuning.wide_cuda_threads = {NTH} must be a multiple of {_WARP} and "
                         f"wide_cuda_reduce_threads = {RT} a multiple of wide_cuda_reduce_cols "
                         f"= {RC}.")
    cdt = float32 if dtype == np.float32 else float64
    pieces = model.pieces(dtype.type, _TARGET)
    prepare_f, estep_f, complete_f, mstep_f = (pieces.prepare, pieces.estep, pieces.complete,
                                               pieces.mstep)
    FIRST = pieces.first_stat
    sz = model.sizes()
    NS, NK, NX = sz.stats, sz.work, sz.scratch
    NSX = NS + 1  # the statistics and the log-likelihood
    # local and shared arrays: each size one named constant, at least 1
    LS, LK, LX, LSX = max(NS, 1), max(NK, 1), max(NX, 1), NSX
    NWARP = NTH // _WARP
    SH = NWARP * NSX
    RG = RT // RC
    warp_sum = _group_sums(_WARP, 1)[0]
    step_f = make_step(mstep_f, device)
    begin = make_accel(device)[0]
    NP = sz.params
    opts = {} if regs is None else {"max_registers": regs}

    @cuda.jit
    def init(params, tot, coef, work, fstate, back, accel):
        if cuda.grid(1) == 0:
            if accel:
                begin(back, NP)
            fstate[2] = prepare_f((), params, tot, coef, work)

    @cuda.jit(**opts)
    def estep(data, lo, hi, work_g, part, istate, buf, xc):
        if istate[0] != 0:
            return  # the fit has stopped
        tid = cuda.threadIdx.x
        g = cuda.blockIdx.x * NTH + tid
        work = cuda.shared.array(LK, cdt)  # the iteration's coefficients, read by every thread
        for k in range(tid, NK, NTH):
            work[k] = work_g[k]
        cuda.syncthreads()
        stats = cuda.local.array(LS, float64)
        for k in range(NS):
            stats[k] = 0.0
        scratch = cuda.local.array(LX, cdt)
        row = buf[:, g]  # the thread's buffer: a column, so that a warp's values are neighbours
        ll = estep_f(data, lo + g, hi, cuda.gridDim.x * NTH, work, stats, scratch, row, xc)
        share = cuda.shared.array(SH, float64)  # (warp, statistic)
        w = tid // _WARP
        lane = tid % _WARP
        for k in range(FIRST, NS):
            v = warp_sum(stats[k])
            if lane == 0:
                share[w * NSX + k] = v
        v = warp_sum(ll)
        if lane == 0:
            share[w * NSX + NS] = v
        cuda.syncthreads()
        for k in range(FIRST + tid, NSX, NTH):
            s = share[k]
            for q in range(1, NWARP):
                s += share[q * NSX + k]
            part[cuda.blockIdx.x, k] = s

    @cuda.jit
    def reduce(part, nb, istate, fstate, params, tot, coef, work, n, const, max_iter, tol,
               drop_rtol, reg, back, accel, trace):
        if istate[0] != 0:
            return
        tid = cuda.threadIdx.x
        c = tid % RC
        g = tid // RC
        red = cuda.shared.array(RT, float64)
        st = cuda.shared.array(LSX, float64)
        for c0 in range(0, NSX, RC):
            col = c0 + c
            s0 = s1 = s2 = s3 = 0.0  # four independent sums keep four loads in flight
            if col < NSX and col >= FIRST:
                b = g
                while b + 3 * RG < nb:
                    s0 += part[b, col]
                    s1 += part[b + RG, col]
                    s2 += part[b + 2 * RG, col]
                    s3 += part[b + 3 * RG, col]
                    b += 4 * RG
                while b < nb:
                    s0 += part[b, col]
                    b += RG
            red[tid] = (s0 + s1) + (s2 + s3)
            cuda.syncthreads()
            if g == 0 and col < NSX:
                s = red[c]
                for h in range(1, RG):
                    s += red[h * RC + c]
                st[col] = s
            cuda.syncthreads()
        if tid == 0:
            complete_f((), st, tot)
            ll = st[NS] + fstate[2] + const
            code, it, ll_prev, ll = step_f((), st, params, n, reg, ll, istate[1], fstate[0],
                                           back, NP, accel, max_iter, tol, drop_rtol, trace)
            fstate[0] = ll_prev
            fstate[1] = ll
            istate[1] = it
            if code < 0:
                fstate[2] = prepare_f((), params, tot, coef, work)
            else:
                istate[2] = code
                istate[0] = 1

    _kernels[key] = (init, estep, reduce, NSX)
    return _kernels[key]


def _resident_blocks(estep, args, tuning) -> int:
    """E-step blocks: ``tuning.wide_cuda_blocks_per_sm`` per multiprocessor, or as many
    as can be resident at once (one wave; each thread walks its share of units)."""
    if SIMULATED:
        return 2
    n_sm = cuda.get_current_device().MULTIPROCESSOR_COUNT
    if tuning.wide_cuda_blocks_per_sm is not None:
        return tuning.wide_cuda_blocks_per_sm * n_sm
    try:
        kernel = estep.compile(tuple(estep.typeof_pyval(a) for a in args))
        return max(1, kernel.max_cooperative_grid_blocks(tuning.wide_cuda_threads))
    except Exception:  # pragma: no cover - an occupancy query this numba-cuda lacks
        return 4 * n_sm


# The last CUDA fit's iteration loop (launches, flag reads and device work,
# synchronised at both ends), for benchmarks/bench_tmap.py.
last_cuda_loop = {"seconds": 0.0, "iterations": 0, "blocks": 0, "threads": 0, "imbalance": 0.0}


class _Device:
    """One dataset's arrays on the GPU, dealt for ``nb`` blocks, and the kernels' state."""

    def __init__(self, job, d, stream):
        from ..cpu.bulk import narrow

        data = job.data
        n_units = int(data.groups[d + 1] - data.groups[d])
        lengths = np.diff(data.units[data.groups[d]:data.groups[d + 1] + 1])
        self.narrow = np.dtype(job.dtype) != np.float64
        tuning = self.tuning = job.tuning
        threads = tuning.wide_cuda_threads
        k = kernels(job.model, job.dtype)
        k64 = kernels(job.model, np.float64) if self.narrow else k
        rows = max(1, job.model.sizes().buf_per_len * int(lengths.max()))
        # grid: resident blocks, no more than the units need, the buffers within budget
        probe = self._probe_args(job, k[3])
        nb = min(_resident_blocks(k[1], probe, tuning), -(-n_units // threads))
        if tuning.wide_cuda_max_blocks is not None:
            nb = min(nb, tuning.wide_cuda_max_blocks)
        per_block = rows * 8 * threads
        nb = max(1, min(nb, tuning.wide_cuda_buf_bytes // per_block))
        T = nb * threads
        order = deal(lengths, T)
        loads = thread_loads(lengths, order, T)
        self.imbalance = float(loads.max() / loads.mean()) if loads.mean() > 0 else 1.0
        part = data.units_in_order(d, order)
        data64, _, _ = job.model.kernel_data(part, constants=False)  # (run_fits has them)
        host = narrow(data64, job.dtype) if self.narrow else data64
        self.data64 = tuple(cuda.to_device(a, stream=stream) if isinstance(a, np.ndarray)
                            else a for a in data64)
        self.data = (tuple(cuda.to_device(a, stream=stream) if isinstance(a, np.ndarray)
                           else a for a in host) if self.narrow else self.data64)
        self.n_units, self.nb, self.T, self.k, self.k64 = n_units, nb, T, k, k64
        self.part = cuda.device_array((nb, k[3]), np.float64, stream=stream)
        self.buf = cuda.device_array((rows, T), np.float64, stream=stream)
        sz = job.model.sizes()
        self.tot = cuda.to_device(np.zeros(max(sz.totals, 1)), stream=stream)
        self.coef = cuda.device_array(max(sz.coef, 1), np.float64, stream=stream)
        self.work = cuda.device_array(max(sz.work, 1), job.dtype, stream=stream)
        self.work64 = (cuda.device_array(max(sz.work, 1), np.float64, stream=stream)
                       if self.narrow else self.work)
        if sz.totals:  # the fit's constants, once, on the CPU (float64, chunk order)
            from ..cpu.wide import runner

            setup = runner(job.model, np.float64)[0]
            tot = setup(data64, 0, n_units, tuning.wide_cpu_chunk_units)
            self.tot = cuda.to_device(tot, stream=stream)

    @staticmethod
    def _probe_args(job, nsx):
        """Arguments of the E-step's types, for the occupancy query (no data)."""
        data64, _, _ = job.model.kernel_data(job.data.take(np.array([], np.int64)),
                                             constants=False)
        narrow = np.dtype(job.dtype) != np.float64
        data = tuple(a.astype(job.dtype) if narrow and isinstance(a, np.ndarray)
                     and a.dtype == np.float64 else a for a in data64)
        return (data, 0, 0, np.zeros(1, job.dtype), np.zeros((1, nsx)), np.zeros(4, np.int64),
                np.zeros((1, 1)), EXP_CONSTS)


def _loop(job, dev, kern, data, work, params_g, istate, fstate, stream, const, drop_rtol,
          trace_g):
    """Launch the iterations of one fit until its done flag is set; the loop's wall time.

    ``trace_g`` (a device array, float64) gets each pass's log-likelihood as far as it is
    long: ``max_iter + 1`` with ``fit(trace=True)``, else 0.
    """

    init, estep, reduce, _ = kern
    tuning = job.tuning
    prepared = tuning.cuda_prepared_launch
    with warnings.catch_warnings():  # the one-block kernels' grids are small by design
        warnings.filterwarnings("ignore", message="Grid size")
        back = cuda.device_array(accel_size(job.model.sizes().params), np.float64,
                                 stream=stream)
        init[1, 1, stream](params_g, dev.tot, dev.coef, work, fstate, back, job.accel)
        est = prepared_launch(estep[dev.nb, tuning.wide_cuda_threads, stream],
                              (data, 0, dev.n_units, work, dev.part, istate, dev.buf,
                               EXP_CONSTS), prepared)
        red = prepared_launch(reduce[1, tuning.wide_cuda_reduce_threads, stream],
                              (dev.part, dev.nb, istate, fstate, params_g, dev.tot, dev.coef,
                               work, dev.n_units, const, job.max_iter, job.tol, drop_rtol,
                               job.reg, back, job.accel, trace_g), prepared)
    every = max(1, tuning.wide_cuda_check_every)
    state = np.zeros(4, np.int64)
    stream.synchronize()
    t0 = time.perf_counter()
    for it in range(job.max_iter + 1):
        est()
        red()
        if (it + 1) % every == 0 or it == job.max_iter:
            istate.copy_to_host(state, stream=stream)
            stream.synchronize()
            if state[0]:
                break
    return time.perf_counter() - t0, state


def run_fits(job, progress) -> None:
    """Run every fit of a :class:`bulkem.api.Job` in the wide regime on the GPU, in place.

    The job's starts are in ``job.params`` already (:func:`bulkem.engines.select.run`).
    """
    _, _, const = job.kernel_data()
    stream = cuda.stream()
    dev, dev_d = None, -1
    # The log-likelihood of every pass (fit(trace=True)), else none: a run-time argument of
    # the reduction kernel, not a compiled-in one; a float64 refit writes it again.
    no_trace = cuda.device_array(0, np.float64, stream=stream)
    for f in range(len(job.fit_ds)):
        d = int(job.fit_ds[f])
        if d != dev_d:
            dev, dev_d = _Device(job, d, stream), d
        params_g = cuda.to_device(job.params[f], stream=stream)
        istate = cuda.to_device(np.zeros(4, np.int64), stream=stream)
        fstate = cuda.to_device(np.zeros(3), stream=stream)
        trace_g = (cuda.to_device(job.trace[f], stream=stream) if job.trace is not None
                   else no_trace)
        seconds, state = _loop(job, dev, dev.k, dev.data, dev.work, params_g, istate, fstate,
                               stream, float(const[d]), job.drop_rtol, trace_g)
        iters = int(state[1]) + 1
        if dev.narrow and gave_up(int(state[2])):  # again in float64, from its start
            params_g = cuda.to_device(job.init[f], stream=stream)
            istate = cuda.to_device(np.zeros(4, np.int64), stream=stream)
            fstate = cuda.to_device(np.zeros(3), stream=stream)
            more, state = _loop(job, dev, dev.k64, dev.data64, dev.work64, params_g, istate,
                                fstate, stream, float(const[d]),
                                job.drop_rtol64, trace_g)
            seconds += more
            iters += int(state[1]) + 1
        fs = fstate.copy_to_host(stream=stream)
        ll = fs[1]
        if dev.narrow and not gave_up(int(state[2])):
            ll = _evaluate64(dev, params_g, stream, float(const[d]))
        params_g.copy_to_host(job.params[f], stream=stream)
        if job.trace is not None:
            trace_g.copy_to_host(job.trace[f], stream=stream)
        stream.synchronize()
        if job.trace is not None and dev.narrow and not gave_up(int(state[2])):
            job.trace[f, state[1]] = ll  # the last: the returned (float64) log-likelihood
        job.status[f] = state[2]
        job.n_iter[f] = state[1]
        job.loglik[f] = ll
        last_cuda_loop.update(seconds=seconds, iterations=iters, blocks=dev.nb, threads=dev.T,
                              imbalance=dev.imbalance)
        progress(1)


def _evaluate64(dev, params_g, stream, const: float) -> float:
    """One float64 E-step at ``params_g``: the returned log-likelihood of a float32 fit."""
    init, estep, _, nsx = dev.k64
    fstate = cuda.to_device(np.zeros(3), stream=stream)
    istate = cuda.to_device(np.zeros(4, np.int64), stream=stream)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Grid size")
        init[1, 1, stream](params_g, dev.tot, dev.coef, dev.work64, fstate, dev.coef, 0)
    estep[dev.nb, dev.tuning.wide_cuda_threads, stream](dev.data64, 0, dev.n_units,
                                                        dev.work64, dev.part, istate, dev.buf,
                                                        EXP_CONSTS)
    part = dev.part.copy_to_host(stream=stream)
    fs = fstate.copy_to_host(stream=stream)
    stream.synchronize()
    return float(part[:, nsx - 1].sum() + fs[2] + const)
