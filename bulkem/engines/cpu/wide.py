"""The wide regime on the CPU: few fits of many units, each fit over every core.

The bulk engines give every (dataset, start) fit to one CPU thread or a few
lanes of a warp.  A batch of a few fits of datasets with very many units
(one TMAP trace of 10^6 runs, an HMM dataset of 10^5 sequences) would leave
most of the machine idle that way, so the strategy table sends it here and the
fits run one after another, each over every core or the whole GPU.  The
model's pieces (:class:`bulkem.models.base.Pieces`) are the same as the bulk
engines' and the iteration semantics the driver's
(:mod:`bulkem.fitting.driver`: its stopping rule, float32 fits that would
stop as degenerate fitted again in float64 from their start, a float32 fit's
log-likelihood taken in float64 at its returned parameters); only the sums
over units are taken in another order.

CPU (:func:`runner`): each iteration is a ``prange`` over fixed chunks
of ``Tuning.wide_cpu_chunk_units`` units, each chunk running the model's
``estep`` into its own partial statistics, summed in chunk order (the
log-likelihood too, then plus the parameters' and the dataset's constant
terms, as the bulk driver adds them); then ``complete``, the stopping rule,
``mstep`` and ``prepare``.  The chunking is a constant, so results do not
depend on the thread count; a model whose ``estep`` sums its units in blocks
of that many (the hidden chains, :mod:`bulkem.models.hmm.chain`) gets the same
bits here as from the bulk engine.

GPU: :mod:`bulkem.engines.cuda.wide`.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ...fitting import memory
from ...fitting.driver import accel_size, gave_up, make_accel, make_step
from ...kernels.cache import njit_cached
from ...kernels.fastmath import EXP_CONSTS
from ...kernels.target import CPU
from .bulk import buffer_values, narrow

_runners: dict = {}


def runner(model, dtype):
    """``(setup, loop)`` of a model and compute dtype (compiled on first call).

    * ``setup(data64, lo, hi, chunk) -> tot``: the fit's constants;
    * ``loop(data, lo, hi, chunk, const, params, tot, n_buf, xc, max_iter, tol,
      drop_rtol, reg, trace, accel) -> (status, n_iter, loglik)``: the EM iterations, each one's
      log-likelihood in ``trace[it]`` as far as it is long; with ``max_iter=0``, one E-step:
      the log-likelihood at ``params``.
    """
    dtype = np.dtype(dtype)
    key = (model.cpu_key, dtype.name)
    if key in _runners:
        return _runners[key]
    cdt = dtype.type
    pieces = model.pieces(cdt, CPU)
    setup_f = model.pieces(np.float64, CPU).setup
    prepare_f, estep_f, complete_f, mstep_f = (pieces.prepare, pieces.estep, pieces.complete,
                                               pieces.mstep)
    FIRST = pieces.first_stat
    sz = model.sizes()
    NS, NT, NC, NK, NX = sz.stats, sz.totals, sz.coef, sz.work, sz.scratch
    step_f = make_step(mstep_f, CPU.jit)
    begin = make_accel(CPU.jit)[0]
    NP, NB = sz.params, accel_size(sz.params)

    @njit_cached(("wide-setup", model.cpu_key), parallel=True)
    def setup(data64, lo, hi, chunk):
        n_chunks = (hi - lo + chunk - 1) // chunk
        part = np.zeros((n_chunks, NT))
        for c in prange(n_chunks):
            setup_f(data64, lo + c * chunk, min(hi, lo + (c + 1) * chunk), 1, part[c])
        tot = np.zeros(NT)
        for k in range(NT):
            for c in range(n_chunks):
                tot[k] += part[c, k]
        return tot

    @njit_cached(("wide-loop", model.cpu_key, dtype.name), parallel=True)
    def loop(data, lo, hi, chunk, const, params, tot, n_buf, xc, max_iter, tol, drop_rtol, reg,
             trace, accel):
        n = hi - lo
        n_chunks = (n + chunk - 1) // chunk
        part = np.empty((n_chunks, NS))
        llp = np.empty(n_chunks)
        coef = np.empty(NC)
        work = np.empty(NK, cdt)
        stats = np.zeros(NS)
        back = np.empty(NB)
        if accel:
            begin(back, NP)
        it = 0
        ll_prev = 0.0
        while True:
            base = prepare_f(data, params, tot, coef, work)
            for c in prange(n_chunks):
                a = lo + c * chunk
                scratch = np.empty(NX, cdt)
                buf = np.empty(n_buf)
                row = part[c]
                for k in range(NS):
                    row[k] = 0.0
                llp[c] = estep_f(data, a, min(hi, a + chunk), 1, work, row, scratch, buf, xc)
            for k in range(FIRST, NS):
                s = 0.0
                for c in range(n_chunks):
                    s += part[c, k]
                stats[k] = s
            complete_f(data, stats, tot)
            ll = 0.0
            for c in range(n_chunks):
                ll += llp[c]
            ll = ll + base + const  # the bulk driver's order (bulkem.fitting.driver): same bits
            status, it, ll_prev, ll = step_f(data, stats, params, n, reg, ll, it, ll_prev, back,
                                             NP, accel, max_iter, tol, drop_rtol, trace)
            if status >= 0:
                return status, it, ll

    _runners[key] = (setup, loop)
    return _runners[key]


def run_fits(job, progress) -> None:
    data64, offsets, const = job.kernel_data()
    narrow_dt = np.dtype(job.dtype) != np.float64
    data = narrow(data64, job.dtype) if narrow_dt else data64
    n_buf = buffer_values(job.model, job.data.longest_unit())
    memory.check_buffers(n_buf, job.data.longest_unit(), numba.get_num_threads())
    loop = runner(job.model, job.dtype)[1]
    setup64, loop64 = runner(job.model, np.float64)
    chunk = job.tuning.wide_cpu_chunk_units
    no_tot = np.zeros(0)
    trace = job.trace if job.trace is not None else np.empty((len(job.fit_ds), 0))
    for f in range(len(job.fit_ds)):
        d = job.fit_ds[f]
        lo, hi = int(offsets[d]), int(offsets[d + 1])
        tot = setup64(data64, lo, hi, chunk) if job.model.sizes().totals else no_tot
        args = (lo, hi, chunk, float(const[d]), job.params[f], tot, n_buf, EXP_CONSTS)
        st, it, ll = loop(data, *args, job.max_iter, job.tol, job.drop_rtol, job.reg, trace[f],
                          job.accel)
        if narrow_dt and gave_up(st):  # fitted again in float64, from its start
            job.params[f] = job.init[f]
            st, it, ll = loop64(data64, *args, job.max_iter, job.tol,
                                job.drop_rtol64, job.reg, trace[f], job.accel)
        elif narrow_dt:  # the returned log-likelihood: one float64 E-step at the parameters
            ll = loop64(data64, *args, 0, job.tol, job.drop_rtol, job.reg, no_tot, 0)[2]
            if len(trace[f]):
                trace[f, it] = ll
        job.status[f] = st
        job.n_iter[f] = it
        job.loglik[f] = ll
        progress(1)
