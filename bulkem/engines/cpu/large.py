"""The one-large-dataset regime on the CPU: each mixture fit over every core.

The bulk engines give every (dataset, start) fit to one CPU thread or one
warp.  A batch of a few fits of very many observations (one dataset of
10^7 points, say) would leave most of the machine idle that way, so
:func:`bulkem.engines.select.use_large` sends it here instead and the fits run one after another,
each over every core or the whole GPU.  The per-observation math is the
family's hooks (``coef``, ``logdens``, ``accum``, ``mstep``, the exact pass's
``exact_coef`` and ``exact_logdens``) and the driver's stopping rule
(:mod:`bulkem.fitting.driver`); the results follow the same iteration
semantics as the bulk engines.

CPU: the driver itself (:func:`make_em`) on the ``cpu-wide`` target, whose
passes over the observations compute their blocks (``Tuning.estep_block_obs``
observations each) in a ``prange`` loop and add them in block order: the
very sums one CPU thread takes, so a fit gives the same bits in both regimes
and with any number of threads (float32 fits that give up are fitted again
in float64 there too).
"""

from __future__ import annotations

import numpy as np

from ...fitting.driver import ACCEL_EXTRA, make_em
from ...kernels.cache import njit_cached
from ...kernels.fastmath import EXP_CONSTS
from ...kernels.target import CPU_WIDE
from .bulk import narrow, sizes_array

_cpu_runners: dict = {}


def _cpu_runner(model, dtype):
    """The driver (:func:`make_em`) on the ``cpu-wide`` target: one fit, its blocks in parallel."""
    key = (model.cpu_key, np.dtype(dtype).name)
    if key in _cpu_runners:
        return _cpu_runners[key]
    em = make_em(model, np.dtype(dtype).type, CPU_WIDE)
    cdt = np.dtype(dtype).type

    @njit_cached(key)
    def run(data, data64, lo, hi, const, params, xc, max_iter, tol, drop_rtol, drop64, reg, sz,
            trace, accel):
        NP, NS, NT, NC, NK, NX = sz[0], sz[1], sz[2], sz[3], sz[4], sz[5]
        return em(data, data64, lo, hi, 0, 1, const, params, np.empty(NT), np.empty(NC),
                  np.empty(NK, cdt), np.empty(NS), np.empty(NX, cdt), np.empty(NK),
                  np.empty(NX), np.empty(4 * NP + ACCEL_EXTRA), np.empty(0), xc, max_iter, tol,
                  drop_rtol, drop64, reg, trace, accel)

    _cpu_runners[key] = run
    return run


def run_fits(job, progress) -> None:
    """Each fit in turn over every core, as the bulk CPU engine would fit it on one thread.

    The driver and pieces are the bulk engine's; only the passes over the
    observations run their blocks in parallel and add them in order, so the
    results are those of the bulk CPU engine, bit for bit, whatever the threads.
    """
    run = _cpu_runner(job.model, job.dtype)
    sz = sizes_array(job.model)
    data64, offsets, const = job.kernel_data()
    data = data64 if job.dtype == np.float64 else narrow(data64, job.dtype)
    trace = job.trace if job.trace is not None else np.empty((len(job.fit_ds), 0))
    for f in range(len(job.fit_ds)):
        d = job.fit_ds[f]
        st, it, ll = run(data, data64, offsets[d], offsets[d + 1], const[d], job.params[f],
                         EXP_CONSTS, job.max_iter, job.tol, job.drop_rtol, job.drop_rtol64,
                         job.reg, sz, trace[f], job.accel)
        job.status[f] = st
        job.n_iter[f] = it
        job.loglik[f] = ll
        progress(1)
