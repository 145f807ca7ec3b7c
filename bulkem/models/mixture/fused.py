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
        * ``first``: 0 in float64, 1 otherwise (see the module docstring).
    """
    if not family.linear_logdens or family.n_coef(1, n_dims) != family.n_stats(1, n_dims):
        raise ValueError(f"family {family.name!r}: the EM driver needs log densities linear "
                         "in the sufficient statistics (Family.linear_logdens)")
    M = n_components
    D = n_dims
    NS = family.n_stats(M, D)
    S = NS // M
    logdens_f = jit(family.logdens)
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

    def complete(stats, tot):
        if FIRST == 0:
            return  # summed directly
        for k in range(S):
            s = tot[k]
            for m in range(1, M):
                s -= stats[S * m + k]
            stats[k] = s

    return Pass(jit(totals), jit(shift), jit(estep), jit(complete), FIRST)
