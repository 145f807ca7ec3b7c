"""Emission distributions of a hidden chain: per-state densities, statistics and M-steps.

Each emission is a small set of hooks written once and compiled twice (CPU
and GPU), like the mixture families' (:mod:`bulkem.models.mixture.family`).
``N`` states and ``K`` (symbols ``V`` of a categorical emission, dimensions
``D`` of a Gaussian one, else 1) are compile-time constants.  Offsets into
the fit's arrays are passed in, so the hooks never know the layout around
them:

* ``prep(params, po, N, K, work, wo) -> ok``: per-iteration coefficients of
  every state from its parameters ``params[po:]`` into ``work[wo:]`` (compute
  dtype); False if a parameter is not usable;
* ``dens(work, wo, N, K, x, xi, e) -> m``: ``e[i] = b_i(x) exp(-m)`` for
  every state ``i`` at observation ``xi`` of the values ``x``, with ``m`` chosen
  so that no ``e[i]`` overflows and the largest is 1 (0 for emissions that
  give probabilities directly); or, for an emission with ``log_dens``, the
  exponents ``e[i] = m - log b_i(x) >= 0`` (the smallest 0), which the chain
  takes ``exp(-e[i])`` of (:func:`bulkem.models.hmm.chain.make_dens`: the
  CPU's E-step takes a whole sequence's at once, in SIMD lanes);
* ``accum(stats, so, N, K, g, i, x, xi)``: adds ``g`` times observation
  ``xi``'s statistics to state ``i``'s block at ``stats[so:]``;
* ``accum_all(stats, so, N, K, g, x, xi)`` (optional): ``accum`` of every state ``i``
  with ``g[i]``, in that order, reading the observation once (the chain's E-step
  takes it where given);
* ``mstep(stats, so, occ, oo, params, po, N, K, reg) -> status``: the
  states' parameters from their statistics and occupancies
  ``occ[oo:oo + N]`` (summed posterior probabilities).

Missing observations (NaN; for a Gaussian emission, NaN in any dimension) are
marginalised: ``dens`` gives ``e[i] = 1`` there (the step's emission factor is
1; ``e[i] = 0`` and ``m = 0`` with ``log_dens``) and ``accum`` adds nothing.  So the
emissions' M-steps divide by their own occupancies, the posterior probabilities summed
over the observed steps only (the last ``N`` statistics of the block; the chain's ``occ``
also counts the missing steps); with nothing missing, the same sums in the same order, the
same bits.

Observations are stored as float values, ``K`` per observation for a
Gaussian emission (row-major), one otherwise (a categorical symbol as a
float).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ...tuning import DEGENERATE_COLLAPSE, DEGENERATE_PARAM, GAUSS_VAR_RTOL, LOG_2PI, PROB_RTOL
from ..base import Axis, Block


@dataclass(frozen=True)
class Emission:
    """An emission distribution: its sizes per state and its compiled-twice hooks.

    Attributes
    ----------
    name : str
    n_work, n_stats : callable
        ``f(K) -> int``: coefficients and statistics per state.
    values_per_obs : callable
        ``f(K) -> int``: stored values per observation.
    prep, dens, accum, mstep : callable
        The hooks (see the module docstring).
    letters : str
        hmmlearn's ``params`` letters of the emission's parameters.
    blocks : callable
        ``blocks(state, K) -> tuple of Block``: the parameter blocks of the states
        (:class:`bulkem.models.base.Block`, first axis ``state``, an
        :class:`~bulkem.models.base.Axis`), in the order of a state's record.
    location : callable
        ``location(blocks) -> ndarray (n_fits, N)``: where each state's emission lies
        (expected symbol, first mean, rate), from the blocks as ``Layout.split`` gives
        them: the tables list states in increasing location.
    score : callable
        Host NumPy ``score(records (n, N E), stats (n, N S), N, K) -> (n, N E)``: the
        gradient at ``records`` of the emission's part of the expected complete-data
        log-likelihood, from its E-step statistics there (``Model.score``).
    accum_all : callable or None
        The hook ``accum_all`` (see the module docstring), or None: ``accum`` state by state.
    log_dens : bool
        ``dens`` gives exponents, not factors (see the module docstring).
    """

    name: str
    n_work: Callable
    n_stats: Callable
    values_per_obs: Callable
    prep: Callable
    dens: Callable
    accum: Callable
    mstep: Callable
    letters: str
    blocks: Callable
    location: Callable
    score: Callable | None = None
    accum_all: Callable | None = None
    log_dens: bool = False

    def n_params(self, K: int) -> int:
        """Parameters per state (the length of a state's record of :attr:`blocks`)."""
        return sum(b.size for b in self.blocks(Axis("state", 1), K))


# --- categorical: symbols 0 .. V-1 -----------------------------------------------------------
# The largest alphabet (n_symbols): the kernels keep N x V emission probabilities per fit, and
# their statistics, in every lane.
MAX_SYMBOLS = 4096


def _cat_prep(params, po, N, K, work, wo):
    ok = True
    for q in range(N * K):
        p = params[po + q]
        ok = ok and p >= 0.0 and p <= 1.0 + PROB_RTOL  # (rounding in the M-step)
        work[wo + q] = p
    return ok


def _cat_dens(work, wo, N, K, x, xi, e):
    if math.isnan(x[xi]):  # missing: marginalised
        for i in range(N):
            e[i] = 1.0
        return 0.0
    v = int(x[xi])
    for i in range(N):
        e[i] = work[wo + i * K + v]
    return 0.0


def _cat_accum(stats, so, N, K, g, i, x, xi):
    if not math.isnan(x[xi]):
        stats[so + i * K + int(x[xi])] += g
        stats[so + N * K + i] += g


def _cat_accum_all(stats, so, N, K, g, x, xi):
    if not math.isnan(x[xi]):
        v = max(int(x[xi]), 0)  # (a symbol; telling the compiler so spares index checks)
        for i in range(N):
            stats[so + i * K + v] += g[i]
            stats[so + N * K + i] += g[i]


def _cat_mstep(stats, so, occ, oo, params, po, N, K, reg):
    for i in range(N):
        inv = 1.0 / stats[so + N * K + i]
        for v in range(K):
            params[po + i * K + v] = stats[so + i * K + v] * inv
    return 0


def _cat_score(records, stats, N, K):
    # sum_iv c_iv log B_iv: c_iv / B_iv (a symbol of probability 0 has no count)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(records > 0.0, stats[:, :N * K] / records, 0.0)


CATEGORICAL = Emission(
    "categorical", lambda K: K, lambda K: K + 1, lambda K: 1, _cat_prep, _cat_dens, _cat_accum,
    _cat_mstep, "e",
    blocks=lambda s, K: (Block("emissionprob", (s, Axis("symbol", K, 0)), "simplex", "prob"),),
    location=lambda b: b["emissionprob"] @ np.arange(b["emissionprob"].shape[-1], dtype=float),
    score=_cat_score, accum_all=_cat_accum_all)


# --- Gaussian with a diagonal covariance: D dimensions ---------------------------------------
# params per state: means (D), variances (D); work, by dimension across the states (so that
# dens takes the states side by side, in SIMD lanes): the means of dimension d at
# [d N, (d + 1) N), their -1/(2 var) at N D + [d N, (d + 1) N), the states' log
# normalisers at 2 N D + [0, N); stats per state: sum g x (D), sum g x^2 (D), then the
# occupancies of the observed steps (N).  The log density is evaluated centred,
# -1/2 sum (x - mu)^2 / var, never expanded.


def _gauss_prep(params, po, N, K, work, wo):
    ok = True
    for i in range(N):
        c = -0.5 * K * LOG_2PI
        for d in range(K):
            mu = params[po + i * 2 * K + d]
            var = params[po + i * 2 * K + K + d]
            ok = ok and var > 0.0 and math.isfinite(mu) and math.isfinite(var)
            work[wo + d * N + i] = mu
            work[wo + N * K + d * N + i] = -0.5 / var
            c -= 0.5 * math.log(var)
        work[wo + 2 * N * K + i] = c
    return ok


def _gauss_dens(work, wo, N, K, x, xi, e):
    missing = False
    for d in range(K):
        missing = missing or math.isnan(x[xi * K + d])
    if missing:  # marginalised
        for i in range(N):
            e[i] = 0.0
        return 0.0
    for i in range(N):
        e[i] = work[wo + 2 * N * K + i]
    for d in range(K):
        v = x[xi * K + d]
        for i in range(N):
            z = v - work[wo + d * N + i]
            e[i] += work[wo + N * K + d * N + i] * z * z
    top = e[0]
    for i in range(1, N):
        top = max(top, e[i])
    for i in range(N):
        e[i] = top - e[i]
    return top


def _gauss_accum(stats, so, N, K, g, i, x, xi):
    missing = False
    for d in range(K):
        missing = missing or math.isnan(x[xi * K + d])
    if missing:
        return
    stats[so + N * 2 * K + i] += g
    b = so + i * 2 * K
    for d in range(K):
        v = x[xi * K + d]
        gv = g * v
        stats[b + d] += gv
        stats[b + K + d] += gv * v


def _gauss_accum_all(stats, so, N, K, g, x, xi):
    missing = False
    for d in range(K):
        missing = missing or math.isnan(x[xi * K + d])
    if missing:
        return
    for i in range(N):
        gi = g[i]
        stats[so + N * 2 * K + i] += gi
        b = so + i * 2 * K
        for d in range(K):
            v = x[xi * K + d]
            gv = gi * v
            stats[b + d] += gv
            stats[b + K + d] += gv * v


def _gauss_mstep(stats, so, occ, oo, params, po, N, K, reg):
    for i in range(N):
        n = stats[so + N * 2 * K + i]
        b = so + i * 2 * K
        for d in range(K):
            mean = stats[b + d] / n
            mean2 = stats[b + K + d] / n
            var = mean2 - mean * mean + reg
            if not (math.isfinite(mean) and math.isfinite(var)):
                return DEGENERATE_PARAM
            if not var > GAUSS_VAR_RTOL * mean2:
                return DEGENERATE_COLLAPSE  # no spread left, in float64 terms
            params[po + i * 2 * K + d] = mean
            params[po + i * 2 * K + K + d] = var
    return 0


def _gauss_score(records, stats, N, K):
    # -1/2 sum_id [n_i log var_id + (S2 - 2 mu S1 + n_i mu^2) / var_id]: its derivatives
    n = len(records)
    p = records.reshape(n, N, 2 * K)
    mu, var = p[..., :K], p[..., K:]
    s = stats[:, :N * 2 * K].reshape(n, N, 2 * K)
    s1, s2 = s[..., :K], s[..., K:]
    occ = stats[:, N * 2 * K:N * 2 * K + N][..., None]
    out = np.empty_like(p)
    out[..., :K] = (s1 - occ * mu) / var
    out[..., K:] = ((s2 - 2.0 * mu * s1 + occ * mu * mu) / var - occ) / (2.0 * var)
    return out.reshape(n, -1)


GAUSSIAN = Emission(
    "gaussian", lambda K: 2 * K + 1, lambda K: 2 * K + 1, lambda K: K, _gauss_prep, _gauss_dens,
    _gauss_accum, _gauss_mstep, "mc",
    blocks=lambda s, K: (Block("means", (s, Axis("dim", K)), "real", "mean"),
                         Block("vars", (s, Axis("dim", K)), "positive", "var")),
    location=lambda b: b["means"][:, :, 0],
    score=_gauss_score, accum_all=_gauss_accum_all, log_dens=True)


# --- Poisson counts ----------------------------------------------------------------------------
# log b_i(x) = x log(lam_i) - lam_i - log(x!).  Up to POISSON_EXACT_COUNT, dens gives
# x log(lam_i) - lam_i and the dataset's constant (the model's, summed on the host) takes
# -log(x!): the terms cancel to within a few ulps of x log x, below 1e-10 relative of the
# log-likelihood.  Beyond, the two would cancel to nothing (a count of 1e15: terms of 3e16,
# a log-likelihood of -21), so the density is taken in the saddle-point form
# log b_i(x) = [x log(lam_i / x) + x - lam_i] - [log(x!) - x log x + x], whose first part
# dens gives (about -(x - lam_i)^2 / (2 x), computed without cancellation) and whose second,
# 0.5 log(2 pi x) + 1 / (12 x) - ..., the constant takes (poisson_const).  Counts above
# MAX_COUNT (2**53) are not integers that float64 can hold apart: such a dataset is invalid.
POISSON_EXACT_COUNT = 65536.0
MAX_COUNT = 2.0**53


def poisson_const(x: np.ndarray) -> np.ndarray:
    """The per-observation terms that no Poisson rate changes (see above), float64.

    Parameters
    ----------
    x : ndarray of shape (n_obs,)
        Counts, at most ``MAX_COUNT``.

    Returns
    -------
    ndarray of shape (n_obs,)
        ``-log(x!)`` for ``x <= POISSON_EXACT_COUNT``, else ``-(log(x!) - x log x + x)``
        (Stirling's series, exact to rounding there).
    """
    from scipy.special import gammaln

    x = np.asarray(x, dtype=np.float64)
    big = x > POISSON_EXACT_COUNT
    out = -gammaln(x + 1.0)
    if big.any():
        y = x[big]
        out[big] = -(0.5 * np.log(2.0 * np.pi * y) + 1.0 / (12.0 * y) - 1.0 / (360.0 * y**3))
    return out


def _pois_prep(params, po, N, K, work, wo):
    ok = True
    for i in range(N):
        lam = params[po + i]
        ok = ok and lam > 0.0 and math.isfinite(lam)
        work[wo + 2 * i] = math.log(lam) if lam > 0.0 else 0.0
        work[wo + 2 * i + 1] = lam
    return ok


def _pois_dens(work, wo, N, K, x, xi, e):
    v = x[xi]
    if math.isnan(v):  # missing: marginalised
        for i in range(N):
            e[i] = 0.0
        return 0.0
    if v > POISSON_EXACT_COUNT:  # the saddle-point form (see above)
        for i in range(N):
            lam = work[wo + 2 * i + 1]
            e[i] = v * math.log(lam / v) + (v - lam)
    else:
        for i in range(N):
            e[i] = v * work[wo + 2 * i] - work[wo + 2 * i + 1]
    top = e[0]
    for i in range(1, N):
        top = max(top, e[i])
    for i in range(N):
        e[i] = top - e[i]
    return top


def _pois_accum(stats, so, N, K, g, i, x, xi):
    if not math.isnan(x[xi]):
        stats[so + i] += g * x[xi]
        stats[so + N + i] += g


def _pois_accum_all(stats, so, N, K, g, x, xi):
    v = x[xi]
    if not math.isnan(v):
        for i in range(N):
            stats[so + i] += g[i] * v
            stats[so + N + i] += g[i]


def _pois_mstep(stats, so, occ, oo, params, po, N, K, reg):
    for i in range(N):
        lam = stats[so + i] / stats[so + N + i]
        if not (lam > 0.0 and math.isfinite(lam)):
            return DEGENERATE_PARAM
        params[po + i] = lam
    return 0


def _pois_score(records, stats, N, K):
    # sum_i [S_x,i log lam_i - n_i lam_i]: S_x,i / lam_i - n_i
    return stats[:, :N] / records - stats[:, N:2 * N]


POISSON = Emission(
    "poisson", lambda K: 2, lambda K: 2, lambda K: 1, _pois_prep, _pois_dens, _pois_accum,
    _pois_mstep, "l",
    blocks=lambda s, K: (Block("lambdas", (s,), "positive", "lambda"),),
    location=lambda b: b["lambdas"],
    score=_pois_score, accum_all=_pois_accum_all, log_dens=True)

EMISSIONS = {e.name: e for e in (CATEGORICAL, GAUSSIAN, POISSON)}
