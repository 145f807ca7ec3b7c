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
  block (``Tuning.estep_block_obs``), instead of one log per observation.

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

Order of the sums: each lane's observations go in blocks of ``block``
(:func:`block_obs`, a run-time argument) consecutive observations of its own; a
block's sums are taken in the compute dtype, then added, block after block,
to the float64 totals.  One CPU thread fitting a dataset (the bulk engine)
and the one-large-dataset regime, which computes the blocks in parallel
(:func:`make_blocked`) and adds them in the same order, give the same bits.

The one-large-dataset regime on the CPU (:mod:`bulkem.engines.cpu.large`), which
spreads one fit's pass over many threads, runs the same pieces.

On the CPU the passes take a lane's observations a tile at a time
(``Tuning.cpu_tile_obs``, :func:`_make_tiled`): the per-observation work
of a whole tile in loops that the compiler vectorises across observations,
each observation's operations and the order of the sums unchanged, so the
bits are the same as one observation at a time.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...kernels.fastmath import make_math
from ...kernels.target import CPU_WIDE, kernel


class Pass(NamedTuple):
    """The compiled pieces of an E-step over a fit's observations (see :func:`make_pass`)."""

    totals: object
    shift: object
    estep: object
    complete: object
    first: int  # the first component the pass sums (1: component 0 from the totals)
    exact: object  # the exact pass (centred, scaled log densities)


def block_obs(dtype, n_components: int, block: int) -> int:
    """``block`` observations per lane (``Tuning.estep_block_obs``), fewer where their sums
    ``s <= M`` could not be multiplied without overflow: the passes' ``block`` argument."""
    if n_components > 1:
        block = min(block, int(math.log(np.finfo(dtype).max) / math.log(n_components)) - 1)
    return max(block, 1)


def _log_prod(p):
    """``log(p)``, ``-inf`` at 0 as on the GPU and the CPU; the CUDA simulator runs Python's
    ``math.log``, which raises there (a start whose block of densities all underflow)."""
    return -math.inf if p == 0.0 else math.log(p)


def _make_shares(family, dtype, jit, exp_neg):
    """``shares(M, D, ecoef, feat, ust, j, t, xc) -> (top, s)``: observation ``j``'s exact
    log densities (``Family.exact_logdens``), ``top`` the largest; ``t[m] = exp(v_m - top)``
    and ``s`` their sum (the exact passes' per-observation work, weighted or not)."""
    exact_f = jit(family.exact_logdens)
    ZERO = dtype(0.0)

    def shares(M, D, ecoef, feat, ust, j, t, xc):
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
        return top, s

    return jit(shares)


def _exact_accum(family, jit):
    """``acc(stats, m, r, D, feat, stride, i, ecoef)``: the exact passes' statistics, the
    family's ``accum_at`` (statistics that depend on the current parameters, through the
    exact coefficients ``ecoef``), else its ``accum``, ``ecoef`` unread."""
    if family.accum_at is not None:
        return jit(family.accum_at)
    accum_f = jit(family.accum)

    def acc(stats, m, r, D, feat, stride, i, ecoef):
        accum_f(stats, m, r, D, feat, stride, i)

    return jit(acc)


def first_component(family, dtype) -> int:
    """The first component a pass sums (:attr:`Pass.first`): 0 in float64, and for a family
    whose statistics depend on each component's parameters (``accum_at``: component 0's
    cannot be the totals less the others'); 1 otherwise (see the module docstring)."""
    return 0 if dtype == np.float64 or family.accum_at is not None else 1


def make_pass(family, dtype, jit, approx=None, tile: int = 0, by_stat: bool = False,
              sizes: tuple | None = None) -> Pass:
    """Build the E-step pieces of the driver.

    Every piece takes the number of components ``M`` and of dimensions ``D``
    as its first two arguments: run-time values on the CPU (one compiled pass
    for every ``M`` and ``D``), constants on the GPU, whose callers pass
    compile-time constants into these inlined device functions.

    Parameters
    ----------
    family : Family
        Must have ``linear_logdens``.
    dtype : numpy scalar type
        Compute dtype of the per-observation math.
    jit : callable
        Compiles a hook: the target's ``jit`` (:class:`bulkem.kernels.target.Target`).
    approx : tuple, optional
        ``(exp_neg, recip)`` compiled by the engine (see
        :func:`bulkem.kernels.fastmath.make_math`).
    tile : int, optional
        With ``tile > 0`` (the CPU), ``estep`` and ``exact`` take the
        observations ``tile`` at a time (:func:`_make_tiled`): the same
        arithmetic in the same order, so the same bits, with the inner loops
        over a tile's observations, which the compiler vectorises.
    sizes : tuple, optional
        ``(M, D)`` to compile into the passes that are compiled on their own
        (the tiled ones), whose ``M`` and ``D`` arguments are then ignored; the
        inlined pieces get constants from their callers.  None: run-time values.
    by_stat : bool, optional
        With ``tile`` (and a family with ``accum_tile``): ``estep`` and
        ``exact`` add to ``stats`` laid out by statistic, ``stats[k M + m]``,
        and leave the entries of components below ``first`` alone (for
        :func:`make_blocked`); else by component, ``stats[S m + k]``, as
        without ``tile``.

    A family with ``accum_at`` (statistics that depend on the current parameters) has no
    linear form: only its ``exact`` pass runs (its ``estep`` must not be called), and it sums
    every component in every dtype (``first = 0``).

    Returns
    -------
    Pass
        * ``totals(D, feat, stride, start, hi, step, tot)``: adds ``g(x_i)`` of
          observations ``start, start + step, ... < hi`` to ``tot[:S]``;
        * ``shift(M, D, coef, tot, dcoef) -> base``: fills ``dcoef`` (compute
          dtype) with ``c[m] - c[0]`` and returns the part of the
          log-likelihood that follows from the totals, ``sum_k c[0, k]
          tot[k]`` (with M = 2 also half of ``sum_i v_i``), NaN if a
          coefficient is not finite;
        * ``estep(M, D, dcoef, feat, stride, start, hi, step, block, stats, part,
          t, xc) -> ll`` (``xc``: pass ``EXP_CONSTS``; ``block``: observations a
          lane takes per block, :func:`block_obs`): adds the
          responsibility-weighted statistics of components ``first ... M-1``
          over those observations to ``stats`` (earlier blocks untouched) and
          returns the rest of their log mixture density; ``part`` (length
          ``NS``) and ``t`` (length ``M``) are compute-dtype scratch;
        * ``complete(M, D, stats, tot)``: with ``first = 1``, component 0's
          statistics, ``tot`` minus the other components' (else nothing);
        * ``first``: 0 in float64, 1 otherwise (see the module docstring);
        * ``exact(M, D, ecoef, feat, stride, start, hi, step, block, stats, part,
          t, xc) -> ll``: as ``estep``, from the family's exact coefficients
          (``Family.exact_coef``), and ``ll`` is the whole log mixture
          density of the observations (no part from the totals).
    """
    if family.accum_at is None and (not family.linear_logdens
                                    or family.n_coef(1, 1) != family.n_stats(1, 1)):
        raise ValueError(f"family {family.name!r}: the EM driver needs log densities linear "
                         "in the sufficient statistics (Family.linear_logdens)")
    per_f = jit(family.n_stats)  # per_f(1, D): statistics (and coefficients) per component
    logdens_f = jit(family.logdens)
    accum_f = jit(family.accum)
    acc_f = _exact_accum(family, jit)
    exp_neg, recip = make_math(dtype, jit, approx)
    shares = _make_shares(family, dtype, jit, exp_neg)
    log_prod = jit(_log_prod)
    ONE = dtype(1.0)
    ZERO = dtype(0.0)
    # The first component the pass sums.  float64 sums every component; with
    # float32, component 0 is the totals minus the others (its float32 sums
    # would carry more rounding than that subtraction).  In float64 the
    # subtraction would amplify rounding for a vanishing component 0 (n / mass)
    # and CPU and GPU fits could part ways.
    FIRST = first_component(family, dtype)

    def totals(D, feat, stride, start, hi, step, tot):
        ust = np.uint64(stride)
        for i in range(np.uint64(start), np.uint64(hi), np.uint64(step)):
            accum_f(tot, 0, 1.0, D, feat, ust, i)

    def shift(M, D, coef, tot, dcoef):
        S = per_f(1, D)
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

    def estep(M, D, dcoef, feat, stride, start, hi, step, block, stats, part, t, xc):
        S = per_f(1, D)
        NS = S * M
        K0 = S * FIRST
        ust = np.uint64(stride)
        ustep = np.uint64(step)
        uhi = np.uint64(hi)
        ublock = np.uint64(block)
        i = np.uint64(start)
        ll = 0.0
        while i < uhi:
            end = min(uhi, i + ublock * ustep)
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
            ll += log_prod(np.float64(prod)) + (0.5 if M == 2 else 1.0) * np.float64(top_sum)
            for k in range(K0, NS):
                stats[k] += part[k]
            i = end
        return ll

    def exact(M, D, ecoef, feat, stride, start, hi, step, block, stats, part, t, xc):
        S = per_f(1, D)
        NS = S * M
        K0 = S * FIRST
        ust = np.uint64(stride)
        ustep = np.uint64(step)
        uhi = np.uint64(hi)
        ublock = np.uint64(block)
        i = np.uint64(start)
        ll = 0.0
        while i < uhi:
            end = min(uhi, i + ublock * ustep)
            for k in range(K0, NS):
                part[k] = ZERO
            prod = ONE  # product of the block's sums s, each in [1, M]
            top_sum = ZERO  # sum of the largest log density of each observation
            j = i
            while j < end:
                top, s = shares(M, D, ecoef, feat, ust, j, t, xc)
                prod *= s
                top_sum += top
                q = recip(s)
                for m in range(FIRST, M):
                    acc_f(part, m, t[m] * q, D, feat, ust, j, ecoef)
                j += ustep
            ll += log_prod(np.float64(prod)) + np.float64(top_sum)
            for k in range(K0, NS):
                stats[k] += part[k]
            i = end
        return ll

    def complete(M, D, stats, tot):
        if FIRST == 0:
            return  # summed directly
        S = per_f(1, D)
        for k in range(S):
            s = tot[k]
            for m in range(1, M):
                s -= stats[S * m + k]
            stats[k] = s

    if tile and family.accum_tile is not None:  # compiled on their own (see _make_tiled)
        pass_fast, pass_exact = _make_tiled(family, dtype, jit, (exp_neg, recip), FIRST, tile,
                                            by_stat, sizes)
    else:
        pass_fast, pass_exact = jit(estep), jit(exact)
    return Pass(jit(totals), jit(shift), pass_fast, jit(complete), FIRST, pass_exact)


class WeightedPass(NamedTuple):
    """The E-step pieces of a weighted fit (see :func:`make_weighted_pass`)."""

    totals: object
    exact: object


def make_weighted_pass(family, dtype, jit, approx=None, tile: int = 0, by_stat: bool = False,
                       sizes: tuple | None = None) -> WeightedPass:
    """The E-step pieces of a fit with observation weights (``fit(weights=...)``).

    Observation ``i``'s weight ``w_i`` is stored after the family's features, at
    ``feat[n_features(D) * stride + i]`` (:meth:`MixtureModel.kernel_data`).  Every
    E-step is the exact pass (centred, scaled log densities), each observation's
    log mixture density and responsibilities multiplied by its weight: one log per
    observation, as a weighted sum of logs is not the log of a product of sums.

    With ``tile`` (the CPU; ``by_stat`` and ``sizes`` as for :func:`make_pass`), ``exact``
    takes the observations a tile at a time (:func:`_make_tiled`), with the same operations
    in the same order.

    Returns
    -------
    WeightedPass
        * ``totals(D, feat, stride, start, hi, step, tot)``: adds ``w_i g(x_i)`` of
          observations ``start, start + step, ... < hi`` to ``tot[:S]`` and ``w_i`` to
          ``tot[S + 4]`` (the weights' sum: the M-step's number of observations);
        * ``exact``: as :func:`make_pass`'s ``exact`` (the same signature and order of
          sums: blocks of ``block`` observations summed in the compute dtype, then added
          to the float64 totals), weighted.
    """
    per_f = jit(family.n_stats)
    nfeat_f = jit(family.n_features)
    accum_f = jit(family.accum)
    acc_f = _exact_accum(family, jit)
    exp_neg, recip = make_math(dtype, jit, approx)
    shares = _make_shares(family, dtype, jit, exp_neg)
    ZERO = dtype(0.0)
    FIRST = first_component(family, dtype)  # (as make_pass: component 0 from the totals)

    def totals(D, feat, stride, start, hi, step, tot):
        ust = np.uint64(stride)
        wo = np.uint64(nfeat_f(D)) * ust
        S = per_f(1, D)
        for i in range(np.uint64(start), np.uint64(hi), np.uint64(step)):
            w = feat[wo + i]
            accum_f(tot, 0, w, D, feat, ust, i)
            tot[S + 4] += w

    def exact(M, D, ecoef, feat, stride, start, hi, step, block, stats, part, t, xc):
        S = per_f(1, D)
        NS = S * M
        K0 = S * FIRST
        ust = np.uint64(stride)
        wo = np.uint64(nfeat_f(D)) * ust
        ustep = np.uint64(step)
        uhi = np.uint64(hi)
        ublock = np.uint64(block)
        i = np.uint64(start)
        ll = 0.0
        while i < uhi:
            end = min(uhi, i + ublock * ustep)
            for k in range(K0, NS):
                part[k] = ZERO
            lsum = ZERO  # the block's weighted log mixture densities
            j = i
            while j < end:
                w = dtype(feat[wo + j])
                top, s = shares(M, D, ecoef, feat, ust, j, t, xc)
                lsum += w * (dtype(math.log(s)) + top)
                wq = w * recip(s)
                for m in range(FIRST, M):
                    acc_f(part, m, t[m] * wq, D, feat, ust, j, ecoef)
                j += ustep
            ll += np.float64(lsum)
            for k in range(K0, NS):
                stats[k] += part[k]
            i = end
        return ll

    if tile and family.accum_tile is not None:
        pass_f = _make_tiled(family, dtype, jit, (exp_neg, recip), FIRST, tile, by_stat, sizes,
                             weighted=True)[1]
    else:
        pass_f = jit(exact)
    return WeightedPass(jit(totals), pass_f)


def fixed_sizes(sizes: tuple | None, jit):
    """``fix(M, D) -> (M, D)``: the run-time sizes, or the constants ``sizes = (M, D)``
    compiled in (a function compiled on its own, called with the sizes as arguments, then
    has them as constants: its loops unroll and vectorise as they did when the sizes were
    compile-time constants everywhere)."""
    if sizes is None:

        def fix(M, D):
            return M, D
    else:
        M0, D0 = sizes

        def fix(M, D):
            return M0, D0

    return jit(fix)


def _tile_of(logdens_f, jit):
    """``tile(c, m, D, X, T, n, v)``: ``v[m T + t] = logdens_f(c, m, D, X, T, t)``, t < n."""

    def tile(c, m, D, X, T, n, v):
        o = m * T
        for t in range(n):
            v[o + t] = logdens_f(c, m, D, X, T, t)

    return jit(tile)


def _make_tiled(family, dtype, jit, math_f, first: int, tile: int, by_stat: bool,
                sizes: tuple | None = None, weighted: bool = False):
    """``estep`` and ``exact`` of :func:`make_pass`, ``tile`` observations at a time (CPU).

    Each tile's features are copied by feature (``X[f T + t]``).  Every
    per-observation quantity of the one-at-a-time passes is then computed
    for the whole tile, in loops over ``t`` that keep each observation's own
    order of operations (the compiler vectorises across observations, never
    within a sum), and the block's running sums (``prod``, ``top_sum``, the
    statistics) still take the observations one by one, in order.  The log
    densities of a tile come from the family's ``logdens_tile`` /
    ``exact_logdens_tile`` where it has them (a loop over the dimensions
    outside the loop over ``t``), else from its per-observation hooks; the
    statistics from its ``accum_tile``, into ``part`` laid out by statistic
    (``part[k M + m]``, the components innermost, so that the compiler
    vectorises across them), with the responsibilities of the tile laid
    out by observation (``R[t M + m]``).  Tiles and blocks are independent:
    a tile may hold the end of one block and the start of the next.  A full
    block's sums go to float64 sums laid out by statistic as well: ``stats``
    itself with ``by_stat``, else a copy of ``stats``'s entries, copied back
    at the end of the pass (the same additions in the same order, so the
    same bits; adding a block into ``stats`` laid out by component, a
    strided transpose per block, took as long as the block's statistics
    in float32, where a block is 24 observations).

    The two passes are compiled as functions of their own (``numba.njit``,
    their helpers inlined into them) that the EM loop calls once per E-step,
    not inlined into it: Numba inlining their IR into the EM loop took longer
    than compiling them apart (a Gaussian runner: ~42 s -> ~25 s on the dev
    VM), and a call per E-step costs nothing measurable.

    The sizes are the passes' first two arguments, ``M`` and ``D`` (or the
    constants ``sizes``, see :func:`fixed_sizes`): the scratch's layout is
    computed per pass and handed to the helpers as a tuple.

    With ``weighted`` (:func:`make_weighted_pass`; its exact pass only), the tile's weights
    (stored after the features) go to the scratch too, and a block adds each observation's
    ``w (log s + top)`` and responsibilities times ``w / s``, as the one-at-a-time pass.
    """
    fix = fixed_sizes(sizes, jit)
    T = tile
    FIRST = first
    BY_STAT = by_stat
    per_f = jit(family.n_stats)
    nfeat_f = jit(family.n_features)
    acc_f = jit(family.accum_tile)
    lin_f = (jit(family.logdens_tile) if family.logdens_tile is not None
             else _tile_of(jit(family.logdens), jit))
    ex_f = (jit(family.exact_logdens_tile) if family.exact_logdens_tile is not None
            else _tile_of(jit(family.exact_logdens), jit))
    exp_neg, recip = math_f
    ONE = dtype(1.0)
    ZERO = dtype(0.0)
    W = int(weighted)

    def layout(M, D):
        """``(M, D, S, NF, OV, OR, OTOP, OS, OQ, NBUF)``: the scratch holds X (NF T values,
        from 0), V and R (M T each), TOP, S and Q (T each), and with ``weighted`` the
        weights (T, from ``OQ + T``)."""
        NF = nfeat_f(D)
        OV = NF * T
        OR = OV + M * T
        OTOP = OR + M * T
        return (M, D, per_f(1, D), NF, OV, OR, OTOP, OTOP + T, OTOP + 2 * T,
                OTOP + (3 + W) * T)

    def load(lay, feat, stride, j, step, n, buf):
        NF = lay[3]
        for f in range(NF + W):  # (the weights after the features)
            src = f * stride + j
            o = f * T if f < NF else lay[8] + T
            for t in range(n):
                buf[o + t] = feat[src + t * step]

    def take(lay, part, out, buf, n, acc, half, block):
        """The tile's observations, in order, into the running block ``acc``.

        ``acc = (ll, prod, top_sum, count)``: a block (``block`` observations)
        multiplies its sums ``s`` and adds its largest log densities, and its
        statistics go to ``part`` (by statistic: ``part[k M + m]``); a full
        block is logged into ``ll`` and flushed into ``out`` (by statistic too).
        """
        M, D, OV, OR, OTOP, OS, OQ = lay[0], lay[1], lay[4], lay[5], lay[6], lay[7], lay[8]
        OW = OQ + T
        ll, prod, top_sum, count = acc
        V = buf[OV:OR]
        for t in range(n):  # the responsibilities, by observation
            q = buf[OW + t] * buf[OQ + t] if W else buf[OQ + t]
            rt = buf[OR + t * M:OR + (t + 1) * M]
            for m in range(FIRST):  # (summed, not used: zeros, never subnormal numbers)
                rt[m] = ZERO
            for m in range(FIRST, M):
                rt[m] = V[m * T + t] * q
        t0 = 0
        while t0 < n:
            t1 = min(n, t0 + (block - count))  # the rest of the tile or of the block
            if W:  # a weighted sum of logs (prod stays 1)
                for t in range(t0, t1):
                    top_sum += buf[OW + t] * (dtype(math.log(buf[OS + t])) + buf[OTOP + t])
            else:
                for t in range(t0, t1):
                    prod *= buf[OS + t]
                    top_sum += buf[OTOP + t]
            acc_f(part, buf[OR:OTOP], M, D, buf[0:OV], T, t0, t1)
            count += t1 - t0
            if count == block:
                ll = flush(lay, part, out, ll, prod, top_sum, half)
                prod, top_sum, count = ONE, ZERO, 0
            t0 = t1
        return ll, prod, top_sum, count

    def flush(lay, part, out, ll, prod, top_sum, half):
        """Log a block's product into ``ll``; add its statistics to ``out``, zero them."""
        M, S = lay[0], lay[2]
        ll += math.log(np.float64(prod)) + half * np.float64(top_sum)
        for k in range(S):
            o = k * M
            for m in range(FIRST, M):
                out[o + m] += part[o + m]
            for m in range(M):
                part[o + m] = ZERO
        return ll

    def normalise(lay, buf, n, first, xc):
        """Components ``first ..``: ``exp(v - top)`` in place, added to ``OS``; ``OQ = 1 / OS``."""
        M, OV, OTOP, OS, OQ = lay[0], lay[4], lay[6], lay[7], lay[8]
        for m in range(first, M):
            for t in range(n):
                e = exp_neg(buf[OTOP + t] - buf[OV + m * T + t], xc)
                buf[OV + m * T + t] = e
                buf[OS + t] += e
        for t in range(n):
            buf[OQ + t] = recip(buf[OS + t])

    def linear_tile(lay, dcoef, buf, n, xc):
        """``OS``, ``OTOP``, ``OQ`` and the responsibilities' numerators (``OV``) of a tile."""
        M, D, OV, OR, OTOP, OS, OQ = lay[0], lay[1], lay[4], lay[5], lay[6], lay[7], lay[8]
        V = buf[OV:OR]
        if M == 2:
            lin_f(dcoef, 1, D, buf[0:OV], T, n, V)
            for t in range(n):
                v = buf[OV + T + t]
                a = abs(v)
                e = exp_neg(a, xc)  # the smaller term relative to the larger
                s = ONE + e
                buf[OS + t] = s
                buf[OTOP + t] = a
                buf[OQ + t] = recip(s)
                buf[OV + T + t] = ONE if v > ZERO else e
                buf[OV + t] = e if v > ZERO else ONE
            return
        for t in range(n):
            buf[OTOP + t] = ZERO
        for m in range(1, M):
            lin_f(dcoef, m, D, buf[0:OV], T, n, V)
            for t in range(n):
                buf[OTOP + t] = max(buf[OTOP + t], buf[OV + m * T + t])
        for t in range(n):
            s = exp_neg(buf[OTOP + t], xc)  # component 0
            buf[OV + t] = s
            buf[OS + t] = s
        normalise(lay, buf, n, 1, xc)

    def exact_tile(lay, ecoef, buf, n, xc):
        """As :func:`linear_tile`, from the exact log densities of every component."""
        M, D, OV, OR, OTOP, OS = lay[0], lay[1], lay[4], lay[5], lay[6], lay[7]
        V = buf[OV:OR]
        ex_f(ecoef, 0, D, buf[0:OV], T, n, V)
        for t in range(n):
            buf[OTOP + t] = buf[OV + t]
        for m in range(1, M):
            ex_f(ecoef, m, D, buf[0:OV], T, n, V)
            for t in range(n):
                buf[OTOP + t] = max(buf[OTOP + t], buf[OV + m * T + t])
        for t in range(n):
            buf[OS + t] = ZERO
        normalise(lay, buf, n, 0, xc)

    def make_run(tile_f, linear: bool):
        """The pass over a lane's observations, a tile at a time."""
        LINEAR = linear

        def run(M, D, cf, feat, stride, start, hi, step, block, stats, part, t_, xc):
            stride, step, hi = np.int64(stride), np.int64(step), np.int64(hi)
            block = np.int64(block)
            M, D = fix(M, D)
            lay = layout(M, D)
            S = lay[2]
            NS = S * M
            half = 0.5 if LINEAR and M == 2 else 1.0
            buf = np.empty(lay[9], dtype)
            for k in range(NS):
                part[k] = ZERO
            if BY_STAT:
                out = stats
            else:  # stats by component: the sums go by statistic meanwhile (same bits)
                out = np.empty(NS)
                for m in range(FIRST, M):
                    for k in range(S):
                        out[k * M + m] = stats[S * m + k]
            acc = (0.0, ONE, ZERO, 0)
            j = np.int64(start)
            while j < hi:
                n = min(T, (hi - j + step - 1) // step)
                load(lay, feat, stride, j, step, n, buf)
                tile_f(lay, cf, buf, n, xc)
                acc = take(lay, part, out, buf, n, acc, half, block)
                j += n * step
            ll, prod, top_sum, count = acc
            if count > 0:
                ll = flush(lay, part, out, ll, prod, top_sum, half)
            if not BY_STAT:
                for m in range(FIRST, M):
                    for k in range(S):
                        stats[S * m + k] = out[k * M + m]
            return ll

        return run

    layout = jit(layout)
    load = jit(load)
    flush = jit(flush)
    take = jit(take)
    normalise = jit(normalise)
    linear_tile = jit(linear_tile)
    exact_tile = jit(exact_tile)
    return kernel()(make_run(linear_tile, True)), kernel()(make_run(exact_tile, False))


def make_blocked(pass_f, family, dtype, first: int, by_stat: bool = False, *, wave: int,
                 sizes: tuple | None = None):
    """A pass over one lane's observations, its blocks computed in parallel (CPU).

    ``run(M, D, cf, feat, stride, lo, hi, block, stats, xc) -> ll`` gives the bits of
    ``pass_f(M, D, cf, feat, stride, lo, hi, 1, block, stats, part, t, xc)`` (one lane,
    ``stats`` zero before): every block's sums are computed by ``pass_f`` on
    its own, in a ``prange`` loop, then added in block order, as the one lane
    adds them.  For the one-large-dataset regime on the CPU.

    The blocks go in waves of ``wave`` (``Tuning.cpu_wide_wave_blocks``): a wave's
    blocks in parallel, each into its own row (in the compute dtype, in which
    a block's sums are taken: a row starting at 0 holds them exactly), then
    the rows added to ``stats`` in block order, the statistics shared out
    among the threads.  The rows of a wave are reused by the next, so the
    memory is that of a wave, whatever the number of blocks (a row per block
    of a whole dataset was 160 MB per E-step for N = 230,400, M = D = 32 in
    float32, where blocks are 24 observations).  With ``by_stat``, ``pass_f``
    writes its rows laid out by statistic (:func:`make_pass`), and they are
    added to a copy of ``stats`` laid out so, copied back at the end.
    """
    from numba import prange

    per_f = CPU_WIDE.jit(family.n_stats)
    fix = fixed_sizes(sizes, CPU_WIDE.jit)  # (inlined: the sizes are constants in run)
    FIRST = first
    BY_STAT = by_stat
    cdt = dtype
    WAVE = max(1, wave)
    KCH = 64  # statistics per task of the merge

    @kernel(parallel=True)
    def run(M, D, cf, feat, stride, lo, hi, block, stats, xc):
        M, D = fix(M, D)
        S = per_f(1, D)
        NS = S * M
        K0 = 0 if BY_STAT else FIRST * S  # rows: the entries the pass writes (or zeros)
        B = block
        nb = (hi - lo + B - 1) // B
        nw = max(1, min(nb, WAVE))  # (at least 1: the waves' loop steps by it)
        rows = np.empty((nw, NS), cdt)
        lls = np.empty(nw)
        nk = (NS - K0 + KCH - 1) // KCH
        if BY_STAT:
            out = np.zeros(NS)
            for m in range(FIRST, M):
                for k in range(S):
                    out[k * M + m] = stats[S * m + k]
        else:
            out = stats
        ll = 0.0
        for w0 in range(0, nb, nw):
            n = min(nw, nb - w0)
            for j in prange(n):
                a = lo + (w0 + j) * B
                row = rows[j]
                for k in range(K0, NS):
                    row[k] = 0.0
                part = np.empty(NS, cdt)
                t = np.empty(M, cdt)
                lls[j] = pass_f(M, D, cf, feat, stride, a, min(hi, a + B), 1, B, row, part, t,
                                xc)
            for c in prange(nk):
                k1 = min(NS, K0 + (c + 1) * KCH)
                for j in range(n):
                    for k in range(K0 + c * KCH, k1):
                        out[k] += rows[j, k]
            for j in range(n):
                ll += lls[j]
        if BY_STAT:
            for m in range(FIRST, M):
                for k in range(S):
                    stats[S * m + k] = out[k * M + m]
        return ll

    return run


def make_bound(family, jit):
    """How far rounding may move the linear pass's log-likelihood, in units of eps.

    ``bound(M, D, coef, tot) -> float``.  The linear pass adds up terms
    ``c[m, k] g_k(x_i)`` whose magnitudes total at most ``W_m = sum_k
    |c[m, k]| sum_i |g_k(x_i)|`` for component ``m`` (``Family.coef_bound``
    bounds it from the totals); the log-likelihood follows from the terms of
    component 0 (through the totals) and from differences ``c[m] - c[0]``,
    so rounding moves it by at most a few eps times the largest ``W_m`` (4:
    one term of the base, one of the difference, their products and sums).
    """
    term_f = jit(family.coef_bound)

    def bound(M, D, coef, tot):
        worst = 0.0
        for m in range(M):
            worst = max(worst, term_f(coef, tot, m, D))
        return 4.0 * worst

    return jit(bound)
