"""Finite mixtures of gamma distributions (positive values: waiting times, sizes, intensities).

Component ``l`` has weight ``w_l``, shape ``a_l`` and rate ``b_l`` (R's ``dgamma(x, shape,
rate)``): ``p(x) = b^a x^(a - 1) exp(-b x) / Gamma(a)``.  Written as

    log(w p(x)) = [log w + a log b - lgamma(a)] + a log x - b x - log x,

it is linear in the features ``(log x, x)``; ``-log x`` is shared by all components and added
once per dataset (``obs_const``).  The sufficient statistics are ``S0 = sum r``,
``S1 = sum r log x`` and ``S2 = sum r x`` per component.  The M-step is the maximum
likelihood of a weighted gamma sample: with ``s = log(S2 / S0) - S1 / S0`` (> 0 unless the
component's values are all equal), the shape solves ``log a - digamma(a) = s`` (Newton's
method on ``log a`` from Minka's closed-form start, to rounding), and ``b = a S0 / S2``.

The linear form's terms ``a log x`` and ``b x`` may cancel, and ``log x`` changes sign, so
no bound from the totals holds: every E-step is the exact pass, centred at each
component's mean, ``log w - lgamma(a) + a log a - a + a (log u - u + 1)`` with ``u = b x / a``
(the last term is <= 0, small near the mean; ``log1p(u - 1) - (u - 1)`` from ``u = 1/2``
up, ``log u - u + 1`` below, where ``u - 1`` would round ``u`` away).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...data import basic_problems
from ...tuning import DEGENERATE_COLLAPSE, DEGENERATE_PARAM, MIN_COMPONENT_MASS
from ..base import Axis, Block
from . import invgauss
from .family import Family

_P = 3  # parameters, coefficients and statistics per component: weight, shape, rate

MIN_GAMMA_SPREAD = 1e-13  # s = log(mean x) - mean(log x) below this: a collapsed component


def coef(params, M, D, c):
    for m in range(M):
        a = params[_P * m + 1]
        b = params[_P * m + 2]
        c[_P * m] = math.log(params[_P * m]) + a * math.log(b) - math.lgamma(a)
        c[_P * m + 1] = a
        c[_P * m + 2] = -b


def logdens(c, m, D, feat, stride, i):
    return c[_P * m] + c[_P * m + 1] * feat[i] + c[_P * m + 2] * feat[stride + i]


def exact_coef(params, M, D, c):
    """``log w - lgamma(a) + a log a - a``, ``b / a`` and ``a`` per component."""
    for m in range(M):
        a = params[_P * m + 1]
        b = params[_P * m + 2]
        c[_P * m] = math.log(params[_P * m]) - math.lgamma(a) + a * math.log(a) - a
        c[_P * m + 1] = b / a
        c[_P * m + 2] = a


def exact_logdens(c, m, D, feat, stride, i):
    u = feat[stride + i] * c[_P * m + 1]  # x / mean
    if u >= 0.5:
        d = u - 1.0
        return c[_P * m] + c[_P * m + 2] * (math.log1p(d) - d)
    if not u > 0.0:  # x = 0: a padded observation of a tile (data are > 0)
        return -math.inf
    # log u from log x (exact where x b / a is subnormal)
    return c[_P * m] + c[_P * m + 2] * (feat[i] + math.log(c[_P * m + 1]) - u + 1.0)


def coef_bound(c, tot, m, D):
    return math.inf  # (log x changes sign: the totals bound nothing; the exact pass always)


def accum(stats, m, r, D, feat, stride, i):
    stats[_P * m] += r
    stats[_P * m + 1] += r * feat[i]
    stats[_P * m + 2] += r * feat[stride + i]


# (a 1 and two features per observation: the inverse Gaussian's tile hook, the same sums)
accum_tile = invgauss.accum_tile


def mstep(stats, params, M, D, n, reg):
    for m in range(M):
        s0 = stats[_P * m]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        mean = stats[_P * m + 2] / s0
        s = math.log(mean) - stats[_P * m + 1] / s0
        if not (mean > 0.0 and math.isfinite(mean) and math.isfinite(s)):
            return DEGENERATE_PARAM
        if not s > MIN_GAMMA_SPREAD:
            return DEGENERATE_COLLAPSE  # the component's values all (nearly) equal
        # shape: log a - digamma(a) = s, by Newton's method on t = log a (the left side falls
        # from +inf to 0 as a grows); digamma and trigamma by recurrence up to 6, then their
        # asymptotic series (error < 1e-15)
        a = (3.0 - s + math.sqrt((s - 3.0) ** 2 + 24.0 * s)) / (12.0 * s)  # Minka (2002)
        for _ in range(50):
            y = a
            dg = 0.0
            tg = 0.0
            while y < 6.0:
                dg -= 1.0 / y
                tg += 1.0 / (y * y)
                y += 1.0
            z = 1.0 / (y * y)
            dg += (math.log(y) - 0.5 / y
                   - z * (1.0 / 12 - z * (1.0 / 120 - z * (1.0 / 252 - z * (1.0 / 240
                                                                         - z / 132)))))
            tg += (1.0 / y + 0.5 * z
                   + z / y * (1.0 / 6 - z * (1.0 / 30 - z * (1.0 / 42 - z / 30))))
            g = math.log(a) - dg - s
            step = g / (1.0 - a * tg)  # g / (dg/dt), dg/dt = 1 - a trigamma(a) < 0
            a_new = a * math.exp(-step)
            done = abs(step) < 1e-15
            a = a_new
            if done:
                break
        if not (a > 0.0 and math.isfinite(a)):
            return DEGENERATE_PARAM
        params[_P * m] = s0 / n
        params[_P * m + 1] = a
        params[_P * m + 2] = a / mean
    return 0


@njit(inline="always")
def subset_init(x, idx, out):
    """Moments of each component's drawn values: ``shape = mean^2 / var``, ``rate = mean /
    var`` (the dataset's variance where the drawn values are all equal)."""
    n_comp, k = idx.shape
    for m in range(n_comp):
        mu = 0.0
        for j in range(k):
            mu += x[idx[m, j]]
        mu /= k
        v = 0.0
        for j in range(k):
            z = x[idx[m, j]] - mu
            v += z * z
        v /= k
        if not v > 0.0:
            n = len(x)
            xm = 0.0
            for i in range(n):
                xm += x[i]
            xm /= n
            for i in range(n):
                v += (x[i] - xm) * (x[i] - xm)
            v = v / n if v > 0.0 else mu * mu
        out[_P * m] = 1.0 / n_comp
        out[_P * m + 1] = mu * mu / v
        out[_P * m + 2] = mu / v


def min_obs(n_components: int, n_dims: int = 1) -> int:
    return 3 * n_components  # one random-subset start per component, without overlap


def check(values: np.ndarray, n_components: int) -> str | None:
    problems = [basic_problems(values, min_obs(n_components))]
    bad = int(np.count_nonzero((values <= 0) & np.isfinite(values)))
    if bad:
        problems.append(f"{bad} of {len(values)} values {'is' if bad == 1 else 'are'} <= 0 "
                        "(the gamma family needs positive values)")
    return "; ".join(p for p in problems if p) or None


def features(values: np.ndarray) -> np.ndarray:
    x = np.asarray(values, dtype=np.float64)
    return np.stack([np.log(x), x])


def obs_const(values: np.ndarray) -> np.ndarray:
    return -np.log(values)


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)`` (n_obs, M): ``base = log w - lgamma(a) + a log
    a - a - log x`` and ``q = a (u - 1 - log u) >= 0``, ``u = b x / a`` (centred, as the
    exact pass); ``x <= 0`` has density 0."""
    from scipy.special import gammaln

    x = np.asarray(values, dtype=np.float64).reshape(-1)[:, None]
    p = np.asarray(params, dtype=np.float64)
    p = p.reshape(len(p) if p.ndim == 2 else 1, n_components, _P)
    w, a, b = p[:, :, 0], p[:, :, 1], p[:, :, 2]
    pos = x > 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = np.log(w) - gammaln(a) + a * np.log(a) - a - np.log(np.where(pos, x, 1.0))
        u = b * x / a
        logu = np.log(b / a) + np.log(np.where(pos, x, 1.0))
        q = a * np.where(u >= 0.5, (u - 1.0) - np.log1p(u - 1.0), u - 1.0 - logu)
        logq = np.log(np.maximum(q, 0.0))
    return np.where(pos, base, -np.inf), np.where(pos, logq, -np.inf)


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value of each given component (``records`` rows weight, shape, rate)."""
    return rng.gamma(records[comp, 1], 1.0 / records[comp, 2])


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp = (Axis("component", n_components),)
    return (Block("weight", comp, "simplex"), Block("shape", comp, "positive"),
            Block("rate", comp, "positive"))


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    p = params.reshape(len(params), n_components, _P)
    return p[:, :, 1] / p[:, :, 2]  # the components' means


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score``: per component ``S0 / w``, ``S0 (log b - digamma(a)) + S_log x`` and
    ``S0 a / b - S_x`` (the derivatives of ``coef``'s ``c . S``)."""
    from scipy.special import digamma

    n = len(params)
    p = params.reshape(n, n_components, _P)
    S = stats.reshape(n, n_components, _P)
    a, b = p[..., 1], p[..., 2]
    out = np.empty_like(p)
    out[..., 0] = S[..., 0] / p[..., 0]
    out[..., 1] = S[..., 0] * (np.log(b) - digamma(a)) + S[..., 1]
    out[..., 2] = S[..., 0] * a / b - S[..., 2]
    return out.reshape(n, -1)


FAMILY = Family(
    name="gamma",
    ndim=1,
    per_component=lambda D: _P,
    n_coef=lambda M, D: _P * M,
    n_stats=lambda M, D: _P * M,
    n_features=lambda D: 2,
    subset_size=lambda D: 3,
    min_obs=min_obs,
    check=check,
    features=features,
    obs_const=obs_const,
    coef=coef,
    logdens=logdens,
    accum=accum,
    score=score,
    outside=lambda v: v <= 0,
    mstep=mstep,
    accum_tile=accum_tile,
    exact_coef=exact_coef,
    exact_logdens=exact_logdens,
    coef_bound=coef_bound,
    subset_init=subset_init,
    log_terms=log_terms,
    draw=draw,
    order_key=order_key,
    blocks=blocks,
    linear_logdens=True,  # c0 + c1 log x + c2 x: linear in the statistics (1, log x, x)
)
