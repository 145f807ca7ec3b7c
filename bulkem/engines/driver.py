"""The one EM driver, written once and compiled for the CPU and the GPU.

:func:`make_em` builds the EM loop of a single fit from a family's hooks.
The same Python source is compiled with ``numba.njit`` (CPU engine: one
thread runs a fit, ``lane = 0``, ``step = 1``) and as a CUDA device
function (GPU engine: the 32 lanes of a warp share a fit, lane ``j`` takes
observations ``j, j + 32, ...``, and ``allreduce`` sums across the warp with
shuffles).  The number of components and dimensions are compile-time
constants, so the per-component loops unroll and small arrays stay in
registers.

One iteration is a single fused pass over the fit's observations that
accumulates every sufficient statistic and the log-likelihood together
(log-sum-exp responsibilities), then the reduction, the checks and the
M-step.  Two things keep special functions off the hot path: the
log-sum-exp is taken relative to component 0 (M - 1 exps per observation;
only when a term would overflow is it re-centred on the largest), and the
per-observation sums are multiplied into a running product whose log is
taken only when it grows large, instead of one log per observation.  The
returned log-likelihood is that of the returned parameters:

* E-step on the current parameters -> log-likelihood ``L``;
* stop if ``L`` is not finite (degenerate), fell by more than rounding since
  the previous iteration (degenerate), changed by less than ``tol``
  (converged) or ``max_iter`` M-steps are done (max_iter);
* otherwise M-step, and repeat.

``n_iter`` counts the M-steps.

The fused pass (:func:`make_estep`) and the stopping rule (:func:`make_stop`)
are separate pieces so that the one-large-dataset engine
(:mod:`bulkem.engines.large`), which spreads one fit's pass over many
threads or blocks, runs exactly the same per-observation math and rules.
"""

from __future__ import annotations

import math

from .. import config


def make_estep(family, n_components, n_dims, dtype, jit):
    """Build the fused E-step pass over a range of observations.

    Parameters
    ----------
    family : Family
    n_components, n_dims : int
        Baked in as compile-time constants.
    dtype : numpy scalar type
        Compute dtype of the per-observation math.
    jit : callable
        Compiles a hook (see :func:`make_em`).

    Returns
    -------
    callable
        ``estep(coef, feat, stride, start, hi, step, stats, t) -> ll``: adds
        the responsibility-weighted sufficient statistics of observations
        ``start, start + step, ... < hi`` to ``stats`` and returns their
        summed log mixture density (without the family's ``obs_const``).
        ``t`` is scratch of length M in the compute dtype.
    """
    M = n_components
    D = n_dims
    logdens_f = jit(family.logdens)
    accum_f = jit(family.accum)
    ONE = dtype(1.0)  # keeps 1/s in the compute dtype
    SHIFT_MAX = dtype(config.LSE_SHIFT_MAX[dtype.__name__])
    PROD_SAFE = config.LSE_PROD_SAFE
    PROD_FLUSH = config.LSE_PROD_FLUSH

    def estep(coef, feat, stride, start, hi, step, stats, t):
        ll = 0.0
        prod = 1.0
        for i in range(start, hi, step):
            # log-sum-exp with component 0 as the reference: M - 1 exps
            ref = logdens_f(coef, 0, D, feat, stride, i)
            t[0] = ONE
            far = False
            for m in range(1, M):
                v = logdens_f(coef, m, D, feat, stride, i) - ref
                t[m] = v
                if v > SHIFT_MAX:
                    far = True
            if far:  # rare: re-centre on the largest term so that no exp overflows
                top = t[1]
                for m in range(2, M):
                    top = max(top, t[m])
                s = math.exp(-top)
                t[0] = s
                for m in range(1, M):
                    e = math.exp(t[m] - top)
                    t[m] = e
                    s += e
                ref += top
            else:
                s = ONE
                for m in range(1, M):
                    e = math.exp(t[m])
                    t[m] = e
                    s += e
            # sum(log s) as log(prod s): one log per flush instead of per observation
            if s < PROD_SAFE:
                prod *= s
                if prod > PROD_FLUSH:
                    ll += math.log(prod)
                    prod = 1.0
            else:
                ll += math.log(s)
            ll += ref
            inv = ONE / s
            for m in range(M):
                accum_f(stats, m, t[m] * inv, D, feat, stride, i)
        ll += math.log(prod)
        return ll

    return jit(estep)


def make_stop(jit):
    """Build the stopping rule shared by every engine.

    Returns
    -------
    callable
        ``stop(ll, ll_prev, it, max_iter, tol, drop_rtol) -> status``: the
        final status of a fit whose E-step at iteration ``it`` (M-steps done
        so far) gave log-likelihood ``ll``, or -1 to go on with an M-step.
    """
    CONVERGED = config.CONVERGED
    MAX_ITER = config.MAX_ITER
    NONFINITE = config.DEGENERATE_NONFINITE
    DECREASE = config.DEGENERATE_DECREASE

    def stop(ll, ll_prev, it, max_iter, tol, drop_rtol):
        if not math.isfinite(ll):
            return NONFINITE
        if it > 0:
            if ll < ll_prev - drop_rtol * abs(ll_prev):
                return DECREASE
            if abs(ll - ll_prev) < tol:
                return CONVERGED
        if it == max_iter:
            return MAX_ITER
        return -1

    return jit(stop)


def make_em(family, n_components, n_dims, dtype, jit, allreduce, allreduce_vec):
    """Build the single-fit EM loop.

    Parameters
    ----------
    family : Family
    n_components, n_dims : int
        Baked in as compile-time constants.
    dtype : numpy dtype
        Compute dtype of the per-observation math (float32 or float64);
        sums and the M-step are always float64.
    jit : callable
        Compiles a hook: ``numba.njit(inline="always")`` or a CUDA
        device-function decorator.
    allreduce : callable
        ``allreduce(x) -> x`` summed over the lanes sharing a fit.
    allreduce_vec : callable
        ``allreduce_vec(a, n)``: the same, in place, for ``a[:n]``.

    Returns
    -------
    callable
        ``em(feat, stride, lo, hi, lane, step, const, params, coef, stats, t,
        max_iter, tol, drop_rtol, reg) -> (status, n_iter, loglik)``, where
        ``params`` (float64) is updated in place and ``coef``, ``stats``,
        ``t`` are scratch arrays of the family's sizes (``t`` of length M, in
        the compute dtype).
    """
    M = n_components
    D = n_dims
    NS = family.n_stats(M, D)
    coef_f = jit(family.coef)
    mstep_f = jit(family.mstep)
    estep_f = make_estep(family, M, D, dtype, jit)
    stop_f = make_stop(jit)

    def em(feat, stride, lo, hi, lane, step, const, params, coef, stats, t,
           max_iter, tol, drop_rtol, reg):
        n = hi - lo
        it = 0
        ll_prev = 0.0
        while True:
            coef_f(params, M, D, coef)
            for k in range(NS):
                stats[k] = 0.0
            ll = estep_f(coef, feat, stride, lo + lane, hi, step, stats, t)
            ll = allreduce(ll) + const
            allreduce_vec(stats, NS)
            status = stop_f(ll, ll_prev, it, max_iter, tol, drop_rtol)
            if status >= 0:
                return status, it, ll
            status = mstep_f(stats, params, M, D, n, reg)
            if status != 0:
                return status, it, ll
            ll_prev = ll
            it += 1

    return jit(em)
