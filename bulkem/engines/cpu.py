"""CPU engine: every (dataset, start) fit in a Numba ``prange`` loop."""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .. import config
from .driver import EXP_CONSTS, make_em


@njit(inline="always")
def _same(x):
    return x


@njit(inline="always")
def _nothing(a, lo, hi):
    pass


_runners: dict = {}


def _runner(family, n_components, n_dims, dtype):
    key = (family.name, n_components, n_dims, np.dtype(dtype).name)
    if key in _runners:
        return _runners[key]
    em = make_em(family, n_components, n_dims, dtype.type, njit(inline="always"), _same, _nothing)
    NP = family.n_params(n_components, n_dims)
    NC = family.n_coef(n_components, n_dims)
    NS = family.n_stats(n_components, n_dims)
    M = n_components
    S = NS // M
    cdt = dtype.type

    @njit(parallel=True)
    def run(feat, feat64, stride, offsets, fit_ds, const, params, status, n_iter, loglik,
            xc, max_iter, tol, drop_rtol, reg):
        for f in prange(len(fit_ds)):
            d = fit_ds[f]
            coef = np.empty(NC)
            dcoef = np.empty(NC, cdt)
            stats = np.empty(NS)
            part = np.empty(NS, cdt)
            tot = np.empty(S)
            t = np.empty(M, cdt)
            dcoef64 = np.empty(NC)
            part64 = np.empty(NS)
            t64 = np.empty(M)
            back = np.empty(NP)
            st, it, ll = em(feat, feat64, stride, offsets[d], offsets[d + 1], 0, 1, const[d],
                            params[f], coef, dcoef, stats, part, tot, t, dcoef64, part64, t64, back,
                            xc, max_iter, tol, drop_rtol, reg)
            status[f] = st
            n_iter[f] = it
            loglik[f] = ll

    _runners[key] = run
    return run


def run_fits(job, progress, on_starts=None) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the CPU, in place.

    The starts are drawn first (``on_starts()``, if given, is called then).
    Fits are done in chunks (smaller while progress is shown); each fit
    depends on nothing but its own inputs, so the chunking does not change any
    result.
    """
    job.start_in_place(on_starts)
    run = _runner(job.family, job.n_components, job.n_dims, job.dtype)
    feat = job.feat.astype(job.dtype, copy=False)
    n = len(job.fit_ds)
    step = config.CPU_CHUNK_FITS
    if progress.active:
        step = min(step, max(config.CPU_MIN_CHUNK_FITS, -(-n // config.PROGRESS_STEPS)))
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        run(feat, job.feat, job.stride, job.offsets, job.fit_ds[lo:hi], job.const,
            job.params[lo:hi], job.status[lo:hi], job.n_iter[lo:hi], job.loglik[lo:hi],
            EXP_CONSTS, job.max_iter, job.tol, job.drop_rtol, job.reg)
        progress(hi - lo)
