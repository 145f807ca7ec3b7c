"""CPU engine: every (dataset, start) fit in a Numba ``prange`` loop, one thread per fit."""

from __future__ import annotations

import numba
import numpy as np
from numba import prange

from ...fitting import memory
from ...fitting.driver import ACCEL_EXTRA, make_em
from ...kernels.cache import njit_cached
from ...kernels.fastmath import EXP_CONSTS
from ...kernels.target import CPU, kernel

_runners: dict = {}


def sizes_array(model) -> np.ndarray:
    """The lengths of one fit's arrays (``Model.sizes``), passed to the CPU kernels at run
    time: ``(params, stats, totals, coef, work, scratch)``."""
    sz = model.sizes()
    return np.array([sz.params, sz.stats, sz.totals, sz.coef, sz.work, sz.scratch],
                    dtype=np.int64)


def buffer_values(model, longest: int) -> int:
    """Values of one fit's buffer on the CPU for units of up to ``longest`` observations:
    the model's per observation (``Sizes.buf_per_len``), twice over for the hidden chains,
    whose CPU E-step keeps each step's emission factors beside its forward vector
    (:func:`bulkem.models.hmm.chain.make_chain`)."""
    from ...models.hmm.model import HMMModel

    per = model.sizes().buf_per_len
    return (2 * per if isinstance(model, HMMModel) else per) * longest


def runner(model, dtype):
    """The compiled ``prange`` loop over the fits of a batch, for a model and compute dtype
    (one for every model of the same :attr:`~bulkem.models.base.Model.cpu_key`: the
    sizes of a fit's arrays are an argument, :func:`sizes_array`)."""
    key = (model.cpu_key, np.dtype(dtype).name)
    if key in _runners:
        return _runners[key]
    # A call, not inlined into the prange body: numba's parfor passes copy the loop body's IR
    # over and over, and with the whole EM loop (twice for float32: its float64 refit) in it
    # they took minutes (an inverse-Gaussian float32 kernel compiled in 86 s, 22 s now).
    em = kernel()(make_em(model, np.dtype(dtype).type, CPU).py_func)
    cdt = np.dtype(dtype).type

    @njit_cached(key, parallel=True)
    def run(data, data64, offsets, fit_ds, const, params, status, n_iter, loglik, xc, max_iter,
            tol, drop_rtol, drop64, reg, n_buf, sz, trace, accel, stats_out):
        NP, NS, NT, NC, NK, NX = sz[0], sz[1], sz[2], sz[3], sz[4], sz[5]
        for f in prange(len(fit_ds)):
            d = fit_ds[f]
            tot = np.empty(NT)
            coef = np.empty(NC)
            work = np.empty(NK, cdt)
            stats = stats_out[f] if stats_out.shape[1] else np.empty(NS)  # (kept: Job.stats)
            scratch = np.empty(NX, cdt)
            work64 = np.empty(NK)
            scratch64 = np.empty(NX)
            back = np.empty(4 * NP + ACCEL_EXTRA)
            buf = np.empty(n_buf)
            st, it, ll = em(data, data64, offsets[d], offsets[d + 1], 0, 1, const[d], params[f],
                            tot, coef, work, stats, scratch, work64, scratch64, back, buf, xc,
                            max_iter, tol, drop_rtol, drop64, reg, trace[f], accel)
            status[f] = st
            n_iter[f] = it
            loglik[f] = ll

    _runners[key] = run
    return run


def narrow(data: tuple, dtype) -> tuple:
    """A batch tuple with its float64 arrays in the compute dtype (the rest as they are)."""
    return tuple(a.astype(dtype) if isinstance(a, np.ndarray) and a.dtype == np.float64 else a
                 for a in data)


def run_fits(job, progress, on_starts=None) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the CPU, in place.

    The starts are drawn first (``on_starts()``, if given, is called then).
    Fits are done in chunks (smaller while progress is shown); each fit
    depends on nothing but its own inputs, so the chunking does not change any
    result.
    """
    n_buf = buffer_values(job.model, job.data.longest_unit())
    memory.check_buffers(n_buf, job.data.longest_unit(), min(numba.get_num_threads(),
                                                             len(job.fit_ds)))
    job.start_in_place(on_starts)
    run = runner(job.model, job.dtype)
    data64, offsets, const = job.kernel_data()
    data = data64 if job.dtype == np.float64 else narrow(data64, job.dtype)
    n = len(job.fit_ds)
    tuning = job.tuning
    step = tuning.cpu_chunk_fits
    if progress.active:
        step = min(step, max(tuning.cpu_min_chunk_fits, -(-n // tuning.progress_steps)))
    sz = sizes_array(job.model)
    trace = job.trace if job.trace is not None else np.empty((n, 0))
    stats = job.stats if job.stats is not None else np.empty((n, 0))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        run(data, data64, offsets, job.fit_ds[lo:hi], const, job.params[lo:hi],
            job.status[lo:hi], job.n_iter[lo:hi], job.loglik[lo:hi], EXP_CONSTS, job.max_iter,
            job.tol, job.drop_rtol, job.drop_rtol64, job.reg, n_buf, sz, trace[lo:hi],
            job.accel, stats[lo:hi])
        progress(hi - lo)
