"""Finite mixtures of negative binomial distributions (overdispersed counts: reads per gene,
visits per user, events per subject).

Component ``l`` has weight ``w_l``, size ``r_l`` and mean ``mu_l`` (R's ``dnbinom(x, size,
mu)``; scipy's ``nbinom(r, r / (r + mu))``): variance ``mu + mu^2 / r``, the Poisson as
``r -> inf``.  Its log probability, less ``-log x!`` (``obs_const``), is

    log w - r log1p(mu / r) + x log(r mu / (r + mu)) + L(x, r),
    L(x, r) = lgamma(x + r) - lgamma(r) - x log r = sum_{j < x} log1p(j / r),

``L`` is a table for ``x < NB_SUM_BELOW`` (per component and iteration: the term by term
sums); above, ``lgamma(x + r) - lgamma(r) - x log r`` where ``r < 10`` (``lgamma(x + r)``
by Stirling's series, ``lgamma(r)`` in the coefficients), else Stirling's
series of the difference, whose leading terms cancel analytically: accurate to rounding of
``L``'s own size however large ``r`` grows (two ``lgamma`` are not: ~1e-16 ``r log r`` per
value, enough to make a Poisson-like component's likelihood seem to fall).  Not linear in
any fixed features, so every E-step is the exact pass.

EM after Adamidis (1999, Statistics & Probability Letters 45, 1-7): a count ``x`` of the
component is a sum of ``Y ~ Poisson(lambda)`` logarithmic-series counts with parameter
``theta = mu / (r + mu)``, ``lambda = r u``, ``u = log1p(mu / r)``.  The E-step adds,
beside the responsibilities ``S0 = sum t`` and ``S1 = sum t x``, the latent count's
expectation ``S2 = sum t E[Y | x] = sum t r (digamma(r + x) - digamma(r))``, which needs the
current ``r`` (``accum_at`` reads it from the coefficients).  The M-step is then in closed
form but for one scalar equation: ``mu = S1 / S0``, ``u`` solves
``expm1(u) / u = S1 / S2`` (Newton's method from above, monotone: the left side is convex),
``r = (S2 / S0) / u``.  A genuine EM, so the log-likelihood never falls.

Counts no more spread than a Poisson's (``S1 <= S2``: all 0 or 1) push ``r`` to infinity:
it stops at ``MAX_NB_SIZE``.  A component of zeros gets ``mu = MIN_NB_MEAN`` and that size,
a Poisson with probability ``1 - 1e-8`` at 0 (left to EM, its size would fall towards 0
with the last values of other components it holds, and underflow), a fit on its boundary
for standard errors.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...tuning import DEGENERATE_COLLAPSE, DEGENERATE_PARAM, MIN_COMPONENT_MASS
from ..base import Axis, Block
from . import poisson
from .family import Family

_P = 3  # parameters and statistics per component: weight, size, mean; S0, S1, S2

MIN_NB_MEAN = 1e-8  # a component's smallest mean (its values all 0)
MAX_NB_SIZE = 1e8  # the largest size: beyond, a Poisson to ~mu / 1e8
NB_SUM_BELOW = 16  # counts below: L and the digamma difference summed term by term
NB_STIRLING_FROM = 10.0  # sizes from: Stirling's series (truncation error < 3e-14)
_NT = int(NB_SUM_BELOW)
HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)
_K = 6  # coefficients per component before the tables (see coef)
_C = _K + 2 * _NT  # and the tables of L(x, r) and E[Y | x] / r for x < 16


def coef(params, M, D, c):
    """Per component ``log w - r log1p(mu / r)``, ``log(r mu / (r + mu))``, ``r``,
    ``lgamma(r)``, ``log r`` and ``digamma(r)``, then the tables of ``L(x, r)`` and
    ``digamma(r + x) - digamma(r)`` for the counts ``x < 16`` (each entry the sum of the one
    before and its term: the bits of a sum per value, taken once per iteration)."""
    for m in range(M):
        r = params[_P * m + 1]
        mu = params[_P * m + 2]
        o = _C * m
        c[o] = math.log(params[_P * m]) - r * math.log1p(mu / r)
        c[o + 1] = math.log(mu) - math.log1p(mu / r)
        c[o + 2] = r
        c[o + 3] = math.lgamma(r)
        c[o + 4] = math.log(r)
        # digamma(r): the recurrence up to 10, then the asymptotic series
        y = r
        dg = 0.0
        while y < NB_STIRLING_FROM:
            dg -= 1.0 / y
            y += 1.0
        q = 1.0 / (y * y)
        c[o + 5] = dg + math.log(y) - 0.5 / y - q * (
            1.0 / 12 - q * (1.0 / 120 - q * (1.0 / 252 - q * (1.0 / 240 - q / 132))))
        s = 0.0
        d = 0.0
        c[o + _K] = 0.0
        c[o + _K + _NT] = 0.0
        for j in range(1, _NT):
            if j > 1:
                s += math.log1p((j - 1.0) / r)
            d += 1.0 / (r + (j - 1.0))
            c[o + _K + j] = s
            c[o + _K + _NT + j] = d


def logdens(c, m, D, feat, stride, i):
    x = feat[i]
    o = _C * m
    r = c[o + 2]
    if x < NB_SUM_BELOW:  # L = sum_{j < x} log1p(j / r), from the table
        s = c[o + _K + int(x)]
    elif r < NB_STIRLING_FROM:
        # lgamma(x + r) - lgamma(r) - x log r (no cancellation), lgamma(z) at z = x + r >= 16
        # by Stirling's series (truncation error < 1e-16; libm's lgamma writes the global
        # signgam at every call, which 16 threads calling it per value make a bottleneck)
        z = x + r
        q = 1.0 / (z * z)
        s = (z - 0.5) * math.log(z) - z + HALF_LOG_2PI + (
            1.0 / 12 - q * (1.0 / 360 - q * (1.0 / 1260 - q * (1.0 / 1680 - q / 1188)))) / z \
            - c[o + 3] - x * c[o + 4]
    else:
        # Stirling's series of lgamma at x + r and r, its leading terms taken together:
        # L = (x + r - 1/2) log1p(x / r) - x + S(x + r) - S(r), accurate to rounding of
        # L's own size however large r (lgamma's difference: ~1e-16 r log r)
        s = (x + r - 0.5) * math.log1p(x / r) - x
        for k in range(2):
            z = 1.0 / (x + r if k == 0 else r)
            q = z * z
            s += (1.0 if k == 0 else -1.0) * z * (
                1.0 / 12 - q * (1.0 / 360 - q * (1.0 / 1260 - q * (1.0 / 1680 - q / 1188))))
    return c[o] + c[o + 1] * x + s


def accum(stats, m, r, D, feat, stride, i):
    # (the totals only: S2 needs the parameters, accum_at)
    stats[_P * m] += r
    stats[_P * m + 1] += r * feat[i]


def accum_at(stats, m, r, D, feat, stride, i, c):
    """``accum`` and ``r E[Y | x]``, ``E[Y | x] = size (digamma(size + x) - digamma(size))``
    (``size``, ``digamma(size)`` and the table of the counts below 16 from the
    coefficients, :func:`coef`)."""
    x = feat[i]
    o = _C * m
    a = c[o + 2]
    if x < NB_SUM_BELOW:  # sum_{j < x} 1 / (a + j), from the table
        d = c[o + _K + _NT + int(x)]
    else:
        y = x + a  # >= 16: the asymptotic series (truncation error < 1e-16)
        if a < NB_STIRLING_FROM:  # digamma(y) - digamma(a): no cancellation
            q = 1.0 / (y * y)
            d = math.log(y) - 0.5 / y - q * (
                1.0 / 12 - q * (1.0 / 120 - q * (1.0 / 252 - q * (1.0 / 240 - q / 132)))) \
                - c[o + 5]
        else:  # both by the series, the leading terms together
            d = math.log1p(x / a) + 0.5 / a - 0.5 / y
            for k in range(2):
                z = 1.0 / (a if k == 0 else y)
                q = z * z
                d += (1.0 if k == 0 else -1.0) * q * (
                    1.0 / 12 - q * (1.0 / 120 - q * (1.0 / 252 - q * (1.0 / 240 - q / 132))))
    stats[_P * m] += r
    stats[_P * m + 1] += r * x
    stats[_P * m + 2] += r * (a * d)


def coef_bound(c, tot, m, D):
    return math.inf  # (no linear form: the exact pass always)


def mstep(stats, params, M, D, n, reg):
    for m in range(M):
        s0 = stats[_P * m]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        s1 = stats[_P * m + 1]
        s2 = stats[_P * m + 2]
        mean = s1 / s0
        if not (mean >= 0.0 and math.isfinite(mean) and s2 >= 0.0 and math.isfinite(s2)):
            return DEGENERATE_PARAM
        size = MAX_NB_SIZE
        k = s1 / s2 if s2 > 0.0 else 0.0  # expm1(u) / u = k, k > 1 where overdispersed
        if mean > MIN_NB_MEAN and k > 1.0 + 1e-12:  # (else a Poisson: zeros, or 0s and 1s)
            # Newton's method on f(u) = expm1(u) - k u (convex, f(0) = 0) from a u above
            # the root: 2 (k - 1) (as expm1(u) / u >= 1 + u / 2) or 2 log k + 1
            u = min(2.0 * (k - 1.0), 2.0 * math.log(k) + 1.0)
            for _ in range(200):
                e = math.expm1(u)
                step = (e - k * u) / (e + 1.0 - k)
                u -= step
                if not step > 1e-15 * u:
                    break
            if u > 0.0 and math.isfinite(u):
                size = min(s2 / s0 / u, MAX_NB_SIZE)
        if not size > 0.0:
            return DEGENERATE_PARAM
        params[_P * m] = s0 / n
        params[_P * m + 1] = size
        params[_P * m + 2] = max(mean, MIN_NB_MEAN)
    return 0


@njit(inline="always")
def subset_init(x, idx, out):
    """Each component's mean from its drawn values (half a count for a subset of zeros), and
    one size for all from the dataset's moments (``mean^2 / (var - mean)``; 10 where the
    counts are no more spread than a Poisson's)."""
    n_comp, k = idx.shape
    n = len(x)
    xm = 0.0
    for i in range(n):
        xm += x[i]
    xm /= n
    v = 0.0
    for i in range(n):
        v += (x[i] - xm) * (x[i] - xm)
    v /= n
    size = xm * xm / (v - xm) if v > xm * (1.0 + 1e-9) and xm > 0.0 else 10.0
    size = min(max(size, 1e-3), 1e6)
    for m in range(n_comp):
        s = 0.0
        for j in range(k):
            s += x[idx[m, j]]
        out[_P * m] = 1.0 / n_comp
        out[_P * m + 1] = size
        out[_P * m + 2] = max(s, 0.5) / k


min_obs = poisson.min_obs  # (3 M: one random-subset start per component, no overlap)


def check(values: np.ndarray, n_components: int) -> str | None:
    return poisson.check(values, n_components, "negative binomial")


def features(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64)[None, :]


def obs_const(values: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return -gammaln(values + 1.0)


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)`` (n_obs, M): the whole log probability in
    ``base``, in the kernels' form (``L(x, r)`` by Stirling's series from ``r = 10``: scipy's
    ``nbinom.logpmf`` rounds ``p = r / (r + mu)`` to 1 for a Poisson-like component),
    ``logq = -inf``; a value that is not a count has probability 0.  ``params`` is one fit's
    (M P,) or a row per value (n_obs, M P)."""
    from scipy.special import gammaln

    x = np.asarray(values, dtype=np.float64).reshape(-1)[:, None]
    p = np.asarray(params, dtype=np.float64)
    p = p.reshape(len(p) if p.ndim == 2 else 1, n_components, _P)
    w, r, mu = p[:, :, 0], p[:, :, 1], p[:, :, 2]
    count = (x >= 0) & (x == np.floor(x))
    x = np.where(count, x, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        big = np.maximum(r, NB_STIRLING_FROM)  # (the series where it is taken)
        zs, z = 1.0 / (x + big), 1.0 / big

        def series(z):
            q = z * z
            return z * (1 / 12 - q * (1 / 360 - q * (1 / 1260 - q * (1 / 1680 - q / 1188))))

        stirling = (x + big - 0.5) * np.log1p(x / big) - x + series(zs) - series(z)
        L = np.where(r >= NB_STIRLING_FROM, stirling,
                     gammaln(x + r) - gammaln(r) - x * np.log(r))
        base = (np.log(w) - r * np.log1p(mu / r) + x * (np.log(mu) - np.log1p(mu / r)) + L
                - gammaln(x + 1.0))
    return np.where(count, base, -np.inf), np.full(base.shape, -np.inf)


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One count of each given component (``records`` rows weight, size, mean)."""
    r, mu = records[comp, 1], records[comp, 2]
    return rng.negative_binomial(r, r / (r + mu)).astype(np.float64)


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp = (Axis("component", n_components),)
    return (Block("weight", comp, "simplex"), Block("size", comp, "positive"),
            Block("mu", comp, "positive"))


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, _P)[:, :, 2]  # the means


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score`` by Fisher's identity: per component ``S0 / w``, ``S2 / r + S0 (log(r
    / (r + mu)) + 1) - (S0 r + S1) / (r + mu)`` and ``S1 / mu - (S0 r + S1) / (r + mu)``
    (``sum_i t_i d log p(x_i) / d theta``; ``S2 / r = sum t (digamma(r + x) -
    digamma(r))``)."""
    n = len(params)
    p = params.reshape(n, n_components, _P)
    S = stats.reshape(n, n_components, _P)
    r, mu = p[..., 1], p[..., 2]
    s0, s1, s2 = S[..., 0], S[..., 1], S[..., 2]
    both = (s0 * r + s1) / (r + mu)
    out = np.empty_like(p)
    out[..., 0] = s0 / p[..., 0]
    out[..., 1] = s2 / r - s0 * np.log1p(mu / r) + s0 - both
    out[..., 2] = s1 / mu - both
    return out.reshape(n, -1)


FAMILY = Family(
    name="negbinom",
    ndim=1,
    per_component=lambda D: _P,
    n_coef=lambda M, D: _C * M,
    n_stats=lambda M, D: _P * M,
    n_features=lambda D: 1,
    subset_size=lambda D: 3,
    min_obs=min_obs,
    check=check,
    features=features,
    obs_const=obs_const,
    coef=coef,
    logdens=logdens,
    accum=accum,
    accum_at=accum_at,
    score=score,
    outside=poisson.FAMILY.outside,
    mstep=mstep,
    exact_coef=coef,
    exact_logdens=logdens,
    coef_bound=coef_bound,
    subset_init=subset_init,
    log_terms=log_terms,
    draw=draw,
    order_key=order_key,
    blocks=blocks,
    floors=(("mu", MIN_NB_MEAN),),
    discrete=True,
)
