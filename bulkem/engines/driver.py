"""The one EM driver, written once and compiled for the CPU and the GPU.

:func:`make_em` builds the EM loop of a single fit from a family's hooks.
The same Python source is compiled with ``numba.njit`` (CPU engine: one
thread runs a fit, ``lane = 0``, ``step = 1``) and as a CUDA device
function (GPU engine: the 32 lanes of a warp share a fit, lane ``j`` takes
observations ``j, j + 32, ...``, and ``allreduce`` sums across the warp with
shuffles).  The number of components and dimensions are compile-time
constants, so the per-component loops unroll and small arrays stay in
registers.

The families' log densities are linear in their sufficient statistics
(``Family.linear_logdens``): ``log w_m p_m(x) = sum_k c[m, k] g_k(x)``, where
``g(x)`` is the vector that ``accum`` adds.  The driver uses that three ways:

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
Sums are float64; with ``dtype=float32`` the per-observation math and each
block's partial sums are float32.  The returned log-likelihood is that of the
returned parameters:

* E-step on the current parameters -> log-likelihood ``L``;
* stop if ``L`` is not finite (degenerate), fell by more than rounding since
  the previous iteration (degenerate), changed by less than ``tol``
  (converged) or ``max_iter`` M-steps are done (max_iter);
* otherwise M-step, and repeat.

``n_iter`` counts the M-steps.

The pieces (:func:`make_pass`, :func:`make_stop`) are separate so that the
one-large-dataset engine (:mod:`bulkem.engines.large`), which spreads one
fit's pass over many threads, runs exactly the same per-observation math and
rules.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import config

# exp(-a) in float64 (a >= 0): a = n ln2 - r with |r| <= ln2 / 2 (n an integer),
# exp(-a) = 2^-n exp(r), exp(r) by a degree-10 polynomial fitted on the range
# (relative error 4e-16 before rounding).  ln2 is split so that n * LN2_HI is
# exact; 2^-n is added to the result's exponent bits.  The constants reach the
# code as an argument, EXP_CONSTS: (log2 e, LN2_HI, LN2_LO, the polynomial from
# the highest power).  As kernel parameters they sit in the GPU's constant
# bank, which the FMAs read directly; written as literals, each 64-bit
# constant costs two moves per use inside the loop.
EXP_CONSTS = (1.4426950408889634, 0.6931471803691238, 1.9082149292705877e-10,
              2.750658474872563e-07, 2.7639724687538896e-06, 2.4801855300154606e-05,
              0.00019841171501755255, 0.001388888857773806, 0.00833333338456015,
              0.04166666666798856, 0.16666666666558091, 0.49999999999998296,
              1.0000000000000064)
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer
_EXP_CLAMP = 708.0  # exp(-708) is still a normal float64


class Pass(NamedTuple):
    """The compiled pieces of an E-step over a fit's observations (see :func:`make_pass`)."""

    totals: object
    shift: object
    estep: object
    complete: object
    first: int  # the first component the pass sums (1: component 0 from the totals)


def _exp_neg64(a, xc):
    a = a if a < _EXP_CLAMP else _EXP_CLAMP
    t = _SHIFTER - a * xc[0]  # t - _SHIFTER = -n, an integer
    n = _SHIFTER - t
    r = n * xc[1] - a  # exact
    r = r + n * xc[2]  # -a + n ln2 = r: exp(-a) = 2^-n exp(r)
    p = xc[3]
    p = p * r + xc[4]
    p = p * r + xc[5]
    p = p * r + xc[6]
    p = p * r + xc[7]
    p = p * r + xc[8]
    p = p * r + xc[9]
    p = p * r + xc[10]
    p = p * r + xc[11]
    p = p * r + xc[12]
    p = p * r + 1.0
    bits = np.float64(p).view(np.int64) + (np.float64(t).view(np.int64) << 52)
    return np.int64(bits).view(np.float64)


def make_math(dtype, jit, approx=None):
    """``exp_neg(a, xc) = exp(-a)`` (``a >= 0``, ``xc = EXP_CONSTS``) and ``recip(s) = 1 / s``.

    ``approx`` replaces both with an engine's own (the CUDA engine's
    hardware approximations for float32).
    """
    if approx is not None:
        return approx
    ONE = dtype(1.0)

    def recip(s):
        return ONE / s

    if dtype == np.float64:
        return jit(_exp_neg64), jit(recip)

    def exp_neg(a, xc):
        return math.exp(-a)

    return jit(exp_neg), jit(recip)


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


def make_em(family, n_components, n_dims, dtype, jit, allreduce, allreduce_vec, approx=None,
            redo_here=True):
    """Build the single-fit EM loop.

    Parameters
    ----------
    family : Family
    n_components, n_dims : int
        Baked in as compile-time constants.
    dtype : numpy scalar type
        Compute dtype of the per-observation math (float32 or float64);
        sums and the M-step are always float64.
    jit : callable
        Compiles a hook: ``numba.njit(inline="always")`` or a CUDA
        device-function decorator.
    allreduce : callable
        ``allreduce(x) -> x`` summed over the lanes sharing a fit.
    allreduce_vec : callable
        ``allreduce_vec(a, lo, hi)``: the same, in place, for ``a[lo:hi]``.
    approx : tuple, optional
        See :func:`make_pass`.
    redo_here : bool
        What a float32 fit that gives up does (see below): fit again in
        float64 at once (True), or return status ``config.REDO_FLOAT64`` for
        the engine to refit it in float64 (False: the GPU engine, where the
        float64 iterations of one fit would hold up the float32 fits sharing
        its warp).

    Returns
    -------
    callable
        ``em(feat, feat64, stride, lo, hi, lane, step, const, params, coef,
        dcoef, stats, part, tot, t, dcoef64, part64, t64, back, xc, max_iter,
        tol, drop_rtol, reg) -> (status, n_iter, loglik)`` (``xc``: pass
        ``EXP_CONSTS``), where ``feat`` holds the features in the compute
        dtype and ``feat64`` in float64 (the same array when the compute
        dtype is float64), ``params`` (float64) is updated in place and the
        rest are scratch: ``coef`` and ``stats`` float64 of the family's
        sizes, ``tot`` float64 of one component's statistics, ``dcoef``,
        ``part`` and ``t`` (length M) in the compute dtype, ``dcoef64``,
        ``part64``, ``t64`` the same in float64 and ``back`` float64 of the
        parameters' size.

    With a float32 compute dtype the iterations run in float32 on ``feat``,
    with two exceptions that read ``feat64``:

    * the dataset's totals and the returned log-likelihood (one more pass in
      float64 at the returned parameters): the figure users compare across
      starts and models is then accurate to float64 rounding of the data,
      not to float32 sums;
    * a fit that float32 would stop as degenerate (a failed M-step, a
      log-likelihood that fell or is not finite) gives up and is fitted again
      in float64 from its start (see ``redo_here``): it is then the float64
      fit from that start.  Such fits are mostly starts heading for a
      collapsing component, whose statistics float32 cannot resolve (on the
      CPU, issue-4 batch, 5,000 starts: misses beyond 1e-6 of float64 went
      from 18 to 1; with the float32 features in the float64 passes, 11).
    """
    M = n_components
    D = n_dims
    S = family.n_stats(M, D) // M
    NP = family.n_params(M, D)
    NARROW = dtype != np.float64
    REDO_HERE = redo_here
    REDO = config.REDO_FLOAT64
    wide = make_pass(family, M, D, np.float64, jit)
    loop64 = _make_loop(family, M, D, jit, allreduce, allreduce_vec, wide, give_up=False)
    loop = loop64  # (not called in float64)
    if NARROW:
        loop = _make_loop(family, M, D, jit, allreduce, allreduce_vec,
                          make_pass(family, M, D, dtype, jit, approx), give_up=True)
    totals64_f, shift64_f, estep64_f = wide.totals, wide.shift, wide.estep
    DROP64 = config.DECREASE_RTOL["float64"]

    def em(feat, feat64, stride, lo, hi, lane, step, const, params, coef, dcoef, stats, part, tot,
           t, dcoef64, part64, t64, back, xc, max_iter, tol, drop_rtol, reg):
        for k in range(S):
            tot[k] = 0.0
        totals64_f(feat64, stride, lo + lane, hi, step, tot)
        allreduce_vec(tot, 0, S)
        if not NARROW:
            return loop64(feat64, stride, lo, hi, lane, step, const, params, coef, dcoef64, stats,
                          part64, tot, t64, xc, max_iter, tol, drop_rtol, reg)
        if REDO_HERE:
            for k in range(NP):
                back[k] = params[k]
        status, it, ll = loop(feat, stride, lo, hi, lane, step, const, params, coef, dcoef,
                              stats, part, tot, t, xc, max_iter, tol, drop_rtol, reg)
        if status >= 0:  # the returned log-likelihood, in float64 at the same parameters
            base = shift64_f(coef, tot, dcoef64)  # (coef: the loop's last, of these parameters)
            ll = estep64_f(dcoef64, feat64, stride, lo + lane, hi, step, stats, part64, t64, xc)
            return status, it, allreduce(ll) + base + const
        if not REDO_HERE:
            return REDO, it, ll
        for k in range(NP):  # float32 gave up: the fit again, in float64, from its start
            params[k] = back[k]
        return loop64(feat64, stride, lo, hi, lane, step, const, params, coef, dcoef64, stats,
                      part64, tot, t64, xc, max_iter, tol, DROP64, reg)

    return jit(em)


def _make_loop(family, M, D, jit, allreduce, allreduce_vec, pieces: Pass, give_up: bool):
    """The EM iterations of :func:`make_em` with one pass (one compute dtype).

    ``loop(feat, stride, lo, hi, lane, step, const, params, coef, dcoef, stats,
    part, tot, t, xc, max_iter, tol, drop_rtol, reg) -> (status, n_iter,
    loglik)``.  With ``give_up``, a fit it would stop as degenerate returns
    status -1 instead.
    """
    NS = family.n_stats(M, D)
    S = NS // M
    P = family.per_component(D)  # parameters per component, the weight first
    coef_f = jit(family.coef)
    mstep_f = jit(family.mstep)
    stop_f = make_stop(jit)
    _, shift_f, estep_f, complete_f, first = pieces
    K0 = S * first  # statistics the pass sums
    LEAD = first == 1 and M > 1
    GIVE_UP = give_up
    NONFINITE = config.DEGENERATE_NONFINITE  # this and above: the degenerate statuses

    def lead_py(params):
        # The pass derives component 0 from the totals, which is accurate only
        # while component 0 is not small: keep the heaviest first.
        for m in range(1, M):
            if params[P * m] > params[0]:
                for k in range(P):
                    a = params[k]
                    params[k] = params[P * m + k]
                    params[P * m + k] = a

    lead = jit(lead_py)

    def loop(feat, stride, lo, hi, lane, step, const, params, coef, dcoef, stats, part, tot, t,
             xc, max_iter, tol, drop_rtol, reg):
        n = hi - lo
        it = 0
        ll_prev = 0.0
        while True:
            if LEAD:
                lead(params)
            coef_f(params, M, D, coef)
            base = shift_f(coef, tot, dcoef)
            for k in range(NS):
                stats[k] = 0.0
            ll = estep_f(dcoef, feat, stride, lo + lane, hi, step, stats, part, t, xc)
            ll = allreduce(ll) + base + const
            allreduce_vec(stats, K0, NS)
            complete_f(stats, tot)
            status = stop_f(ll, ll_prev, it, max_iter, tol, drop_rtol)
            if status >= 0:
                return -1 if GIVE_UP and status >= NONFINITE else status, it, ll
            status = mstep_f(stats, params, M, D, n, reg)
            if status != 0:
                return -1 if GIVE_UP else status, it, ll
            ll_prev = ll
            it += 1

    return jit(loop)
