"""The mixtures' fused E-step: one pass over a fit's observations per iteration.

The families' log densities are linear in their sufficient statistics
(``Family.linear_logdens``): ``log w_m p_m(x) = sum_k c[m, k] g_k(x)``, where
``g(x)`` is the vector that ``accum`` adds.  The pass uses that three ways:

* with float32, the summed statistics of component 0 are the dataset's
  totals ``sum_i g(x_i)`` (computed once per fit) minus those of the other
  components, so the pass accumulates M - 1 components (float64 sums all M:
  the subtraction would amplify rounding for a vanishing component 0), and
  before each E-step the heaviest component is swapped into place 0, so a
  float32 fit may return its components in another order than its start's
  (the result tables sort them);
* the pass evaluates only the differences ``v_m = log w_m p_m - log w_0 p_0``
  (coefficients ``c[m] - c[0]``), and the log-likelihood is
  ``sum_k c[0, k] totals_k`` plus the per-observation
  ``log(1 + sum_m exp(v_m))``;
* that last term is taken relative to the largest ``v``, so each sum ``s``
  lies in ``[1, M]``: no exp can overflow, and the ``s`` of a block of
  observations are multiplied into one product whose log is taken once per
  block (``config.ESTEP_BLOCK_OBS``), instead of one log per observation.

With two components an observation then costs one exp and one reciprocal.
With ``dtype=float32`` the per-observation math and each block's partial
sums are float32; sums across blocks are float64.

The linear form has a price: its terms (``mu^2 / var`` and ``x^2 / var``
for a Gaussian, ``lambda / mu`` for an inverse Gaussian) can be far larger
than the log density they add up to, and then cancel.  A component that
sits on one point far from the rest makes them ~1e18 and the
log-likelihood wrong by hundreds.  So there is a second, exact pass: each
component's log density in centred, scaled form (``z = (x - mu) s``,
``log w p = a - z^2``, :attr:`Family.exact_logdens`), all of them per
observation, the log-sum-exp taken relative to the largest.  The model's
``prepare`` picks the pass of each iteration (:func:`make_bound`): the
linear one where its rounding is provably small beside the log-likelihood,
the exact one otherwise, and always for a fit's first E-step.

Order of the sums: each lane's observations go in blocks of
``BLOCK`` (:func:`_block_obs`) consecutive observations of its own; a
block's sums are taken in the compute dtype, then added, block after block,
to the float64 totals.  One CPU thread fitting a dataset (the bulk engine)
and the one-large-dataset regime, which computes the blocks in parallel
(:func:`make_blocked`) and adds them in the same order, give the same bits.

The one-large-dataset regime (:mod:`bulkem.models.mixture.wide`), which
spreads one fit's pass over many threads, runs the same pieces.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ... import config
from ...kernels.fastmath import make_math


class Pass(NamedTuple):
    """The compiled pieces of an E-step over a fit's observations (see :func:`make_pass`)."""

    totals: object
    shift: object
    estep: object
    complete: object
    first: int  # the first component the pass sums (1: component 0 from the totals)
    exact: object  # the exact pass (centred, scaled log densities)
    block: int  # observations per block of a lane


def _block_obs(dtype, n_components: int) -> int:
    """Observations per lane whose sums ``s <= M`` can be multiplied without overflow."""
    block = config.ESTEP_BLOCK_OBS[np.dtype(dtype).name]
    if n_components > 1:
        block = min(block, int(math.log(np.finfo(dtype).max) / math.log(n_components)) - 1)
    return max(block, 1)


def make_pass(family, n_components, n_dims, dtype, jit, approx=None) -> Pass:
    """Build the E-step pieces of the driver.

    Parameters
    ----------
    family : Family
        Must have ``linear_logdens``.
    n_components, n_dims : int
        Baked in as compile-time constants.
    dtype : numpy scalar type
        Compute dtype of the per-observation math.
    jit : callable
        Compiles a hook (see :func:`make_em`).
    approx : tuple, optional
        ``(exp_neg, recip)`` compiled by the engine (see :func:`make_math`).

    Returns
    -------
    Pass
        * ``totals(feat, stride, start, hi, step, tot)``: adds ``g(x_i)`` of
          observations ``start, start + step, ... < hi`` to ``tot[:S]``;
        * ``shift(coef, tot, dcoef) -> base``: fills ``dcoef`` (compute
          dtype) with ``c[m] - c[0]`` and returns the part of the
          log-likelihood that follows from the totals, ``sum_k c[0, k]
          tot[k]`` (with M = 2 also half of ``sum_i v_i``), NaN if a
          coefficient is not finite;
        * ``estep(dcoef, feat, stride, start, hi, step, stats, part, t, xc)
          -> ll`` (``xc``: pass ``EXP_CONSTS``): adds the
          responsibility-weighted statistics of components ``first ... M-1``
          over those observations to ``stats`` (earlier blocks untouched) and
          returns the rest of their log mixture density; ``part`` (length
          ``NS``) and ``t`` (length ``M``) are compute-dtype scratch;
        * ``complete(stats, tot)``: with ``first = 1``, component 0's
          statistics, ``tot`` minus the other components' (else nothing);
        * ``first``: 0 in float64, 1 otherwise (see the module docstring);
        * ``exact(ecoef, feat, stride, start, hi, step, stats, part, t, xc)
          -> ll``: as ``estep``, from the family's exact coefficients
          (``Family.exact_coef``), and ``ll`` is the whole log mixture
          density of the observations (no part from the totals);
        * ``block``: observations a lane takes per block.
    """
    if not family.linear_logdens or family.n_coef(1, n_dims) != family.n_stats(1, n_dims):
        raise ValueError(f"family {family.name!r}: the EM driver needs log densities linear "
                         "in the sufficient statistics (Family.linear_logdens)")
    M = n_components
    D = n_dims
    NS = family.n_stats(M, D)
    S = NS // M
    logdens_f = jit(family.logdens)
    exact_f = jit(family.exact_logdens)
    accum_f = jit(family.accum)
    exp_neg, recip = make_math(dtype, jit, approx)
    ONE = dtype(1.0)
    ZERO = dtype(0.0)
    BLOCK = np.uint64(_block_obs(dtype, M))
    # The first component the pass sums.  float64 sums every component; with
    # float32, component 0 is the totals minus the others (its float32 sums
    # would carry more rounding than that subtraction).  In float64 the
    # subtraction would amplify rounding for a vanishing component 0 (n / mass)
    # and CPU and GPU fits could part ways.
    FIRST = 0 if dtype == np.float64 else 1
    K0 = S * FIRST

    def totals(feat, stride, start, hi, step, tot):
        ust = np.uint64(stride)
        for i in range(np.uint64(start), np.uint64(hi), np.uint64(step)):
            accum_f(tot, 0, 1.0, D, feat, ust, i)

    def shift(coef, tot, dcoef):
        base = 0.0
        ok = True
        for k in range(S):
            base += coef[k] * tot[k]
            for m in range(1, M):
                d = coef[S * m + k] - coef[k]
                ok = ok and math.isfinite(d)
                dcoef[S * m + k] = d
                if M == 2:  # the pass sums |v|; max(0, v) = (v + |v|) / 2
                    base += 0.5 * d * tot[k]
        return base if ok else math.nan

    def estep(dcoef, feat, stride, start, hi, step, stats, part, t, xc):
        ust = np.uint64(stride)
        ustep = np.uint64(step)
        uhi = np.uint64(hi)
        i = np.uint64(start)
        ll = 0.0
        while i < uhi:
            end = min(uhi, i + BLOCK * ustep)
            for k in range(K0, NS):
                part[k] = ZERO
            prod = ONE  # product of the block's sums s, each in [1, M]
            top_sum = ZERO  # M = 2: sum of |v|; else sum of max(0, v_1, ...)
            j = i
            while j < end:
                if M == 2:
                    v = logdens_f(dcoef, 1, D, feat, ust, j)
                    a = abs(v)
                    e = exp_neg(a, xc)  # the smaller term relative to the larger
                    s = ONE + e
                    prod *= s
                    top_sum += a
                    q = recip(s)
                    accum_f(part, 1, (ONE if v > ZERO else e) * q, D, feat, ust, j)
                    if FIRST == 0:
                        accum_f(part, 0, (e if v > ZERO else ONE) * q, D, feat, ust, j)
                else:
                    top = ZERO
                    for m in range(1, M):
                        v = logdens_f(dcoef, m, D, feat, ust, j)
                        t[m] = v
                        top = max(top, v)
                    s = exp_neg(top, xc)  # component 0
                    t[0] = s
                    for m in range(1, M):
                        e = exp_neg(top - t[m], xc)
                        t[m] = e
                        s += e
                    prod *= s
                    top_sum += top
                    q = recip(s)
                    for m in range(FIRST, M):
                        accum_f(part, m, t[m] * q, D, feat, ust, j)
                j += ustep
            ll += math.log(np.float64(prod)) + (0.5 if M == 2 else 1.0) * np.float64(top_sum)
            for k in range(K0, NS):
                stats[k] += part[k]
            i = end
        return ll

    def exact(ecoef, feat, stride, start, hi, step, stats, part, t, xc):
        ust = np.uint64(stride)
        ustep = np.uint64(step)
        uhi = np.uint64(hi)
        i = np.uint64(start)
        ll = 0.0
        while i < uhi:
            end = min(uhi, i + BLOCK * ustep)
            for k in range(K0, NS):
                part[k] = ZERO
            prod = ONE  # product of the block's sums s, each in [1, M]
            top_sum = ZERO  # sum of the largest log density of each observation
            j = i
            while j < end:
                top = exact_f(ecoef, 0, D, feat, ust, j)
                t[0] = top
                for m in range(1, M):
                    v = exact_f(ecoef, m, D, feat, ust, j)
                    t[m] = v
                    top = max(top, v)
                s = ZERO
                for m in range(M):
                    e = exp_neg(top - t[m], xc)
                    t[m] = e
                    s += e
                prod *= s
                top_sum += top
                q = recip(s)
                for m in range(FIRST, M):
                    accum_f(part, m, t[m] * q, D, feat, ust, j)
                j += ustep
            ll += math.log(np.float64(prod)) + np.float64(top_sum)
            for k in range(K0, NS):
                stats[k] += part[k]
            i = end
        return ll

    def complete(stats, tot):
        if FIRST == 0:
            return  # summed directly
        for k in range(S):
            s = tot[k]
            for m in range(1, M):
                s -= stats[S * m + k]
            stats[k] = s

    return Pass(jit(totals), jit(shift), jit(estep), jit(complete), FIRST, jit(exact),
                int(BLOCK))


def make_blocked(pass_f, n_stats: int, n_components: int, dtype, block: int, first: int):
    """A pass over one lane's observations, its blocks computed in parallel (CPU).

    ``run(cf, feat, stride, lo, hi, stats, xc) -> ll`` gives the bits of
    ``pass_f(cf, feat, stride, lo, hi, 1, stats, part, t, xc)`` (one lane,
    ``stats`` zero before): every block's sums are computed by ``pass_f`` on
    its own, in a ``prange`` loop, then added in block order, as the one lane
    adds them.  For the one-large-dataset regime on the CPU.
    """
    from numba import njit, prange

    NS = n_stats
    M = n_components
    B = block
    K0 = first * (n_stats // n_components)
    cdt = dtype

    @njit(parallel=True)
    def run(cf, feat, stride, lo, hi, stats, xc):
        nb = (hi - lo + B - 1) // B
        rows = np.zeros((nb, NS))
        lls = np.empty(nb)
        for b in prange(nb):
            a = lo + b * B
            part = np.empty(NS, cdt)
            t = np.empty(M, cdt)
            lls[b] = pass_f(cf, feat, stride, a, min(hi, a + B), 1, rows[b], part, t, xc)
        ll = 0.0
        for b in range(nb):
            ll += lls[b]
            for k in range(K0, NS):
                stats[k] += rows[b, k]
        return ll

    return run


def make_bound(family, n_components: int, n_dims: int, jit):
    """How far rounding may move the linear pass's log-likelihood, in units of eps.

    ``bound(coef, tot) -> float``.  The linear pass adds up terms
    ``c[m, k] g_k(x_i)`` whose magnitudes total at most ``W_m = sum_k
    |c[m, k]| sum_i |g_k(x_i)|`` for component ``m`` (``Family.coef_bound``
    bounds it from the totals); the log-likelihood follows from the terms of
    component 0 (through the totals) and from differences ``c[m] - c[0]``,
    so rounding moves it by at most a few eps times the largest ``W_m`` (4:
    one term of the base, one of the difference, their products and sums).
    """
    M = n_components
    D = n_dims
    term_f = jit(family.coef_bound)

    def bound(coef, tot):
        worst = 0.0
        for m in range(M):
            worst = max(worst, term_f(coef, tot, m, D))
        return 4.0 * worst

    return jit(bound)
