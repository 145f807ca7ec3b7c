"""Finite mixtures of inverse-Gaussian distributions.

Density ``p(x | mu, lambda) = sqrt(lambda / (2 pi x^3)) exp(-lambda (x - mu)^2 / (2 mu^2 x))``
for ``x > 0``.  Expanding the square,

    log(w p(x)) = [log w + log(lambda)/2 + lambda/mu] - lambda/(2 mu^2) x - lambda/2 (1/x)
                  - log(2 pi)/2 - 3/2 log x,

so with the features ``(x, 1/x)`` stored once, each component costs two
fused multiply-adds per observation; the last term is shared by all
components and is added once per dataset (``obs_const``).  The sufficient
statistics are ``S0 = sum r``, ``S1 = sum r x``, ``S2 = sum r / x`` per
component, and the M-step of the source design,

    lambda = S0 / sum r (x - mu_old)^2 / (mu_old^2 x)
           = S0 / (S1 / mu_old^2 - 2 S0 / mu_old + S2),

uses the *old* mean, as the original bulkem did.

The expanded form cancels for a sharp component (``lambda / mu`` large)
near its mean; the exact pass (:mod:`.fused`) evaluates
``log w + log(lambda)/2 - u (u / x)`` with ``u = (x - mu) sqrt(lambda/2) / mu``
instead, centred on each component.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...data import basic_problems
from ...tuning import (
    DEGENERATE_COLLAPSE,
    DEGENERATE_PARAM,
    LOG_2PI,
    MAX_IG_SHAPE,
    MIN_COMPONENT_MASS,
)
from ..base import Axis, Block
from .family import Family

_P = 3  # parameters per component: weight, mu, lambda


def coef(params, M, D, c):
    for m in range(M):
        w = params[_P * m]
        mu = params[_P * m + 1]
        lam = params[_P * m + 2]
        c[_P * m] = math.log(w) + 0.5 * math.log(lam) + lam / mu
        c[_P * m + 1] = -0.5 * lam / (mu * mu)
        c[_P * m + 2] = -0.5 * lam


def logdens(c, m, D, feat, stride, i):
    return c[_P * m] + c[_P * m + 1] * feat[i] + c[_P * m + 2] * feat[stride + i]


def exact_coef(params, M, D, c):
    """``log w + log(lambda)/2``, ``mu`` and ``sqrt(lambda/2) / mu`` per component."""
    for m in range(M):
        w = params[_P * m]
        mu = params[_P * m + 1]
        lam = params[_P * m + 2]
        c[_P * m] = math.log(w) + 0.5 * math.log(lam)
        c[_P * m + 1] = mu
        c[_P * m + 2] = math.sqrt(0.5 * lam) / mu


def exact_logdens(c, m, D, feat, stride, i):
    # lambda (x - mu)^2 / (2 mu^2 x) = u (u / x), u = (x - mu) sqrt(lambda/2) / mu
    u = (feat[i] - c[_P * m + 1]) * c[_P * m + 2]
    return c[_P * m] - u * (u * feat[stride + i])


def coef_bound(c, tot, m, D):
    # the features 1, x, 1/x are positive: sum_i |g_k| = tot[k]
    return (abs(c[_P * m]) * tot[0] + abs(c[_P * m + 1]) * tot[1]
            + abs(c[_P * m + 2]) * tot[2])


def accum(stats, m, r, D, feat, stride, i):
    stats[_P * m] += r
    stats[_P * m + 1] += r * feat[i]
    stats[_P * m + 2] += r * feat[stride + i]


def accum_tile(P, R, M, D, X, T, t0, t1):
    """``accum`` of a tile's observations ``t0 <= t < t1``, as ``gaussian.accum_tile``."""
    for t in range(t0, t1):
        x = X[t]
        y = X[T + t]
        r0 = t * M
        for m in range(M):
            r = R[r0 + m]
            P[m] += r
            P[M + m] += r * x
            P[2 * M + m] += r * y


def mstep(stats, params, M, D, n, reg):
    for m in range(M):
        s0 = stats[_P * m]
        s1 = stats[_P * m + 1]
        s2 = stats[_P * m + 2]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        mu_old = params[_P * m + 1]
        denom = s1 / (mu_old * mu_old) - 2.0 * s0 / mu_old + s2
        mu = s1 / s0
        if not (mu > 0.0 and math.isfinite(mu) and math.isfinite(denom)):
            return DEGENERATE_PARAM
        if not denom * MAX_IG_SHAPE > s0 / mu:
            return DEGENERATE_COLLAPSE  # shape lambda/mu beyond MAX_IG_SHAPE
        params[_P * m] = s0 / n
        params[_P * m + 1] = mu
        params[_P * m + 2] = s0 / denom
    return 0


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score``: per component ``S0 / w``, ``lambda (S1 / mu - S0) / mu^2`` and
    ``S0 (1 / (2 lambda) + 1 / mu) - S1 / (2 mu^2) - S2 / 2`` (the derivatives of ``coef``'s
    ``c . S``)."""
    n = len(params)
    p = params.reshape(n, n_components, _P)
    S = stats.reshape(n, n_components, _P)
    w, mu, lam = p[..., 0], p[..., 1], p[..., 2]
    s0, s1, s2 = S[..., 0], S[..., 1], S[..., 2]
    out = np.empty_like(p)
    out[..., 0] = s0 / w
    out[..., 1] = lam * (s1 / mu - s0) / (mu * mu)
    out[..., 2] = s0 * (0.5 / lam + 1.0 / mu) - 0.5 * s1 / (mu * mu) - 0.5 * s2
    return out.reshape(n, -1)


@njit(inline="always")
def subset_init(x, idx, out):
    n_comp, k = idx.shape
    for m in range(n_comp):
        mu = 0.0
        for j in range(k):
            mu += x[idx[m, j]]
        mu /= k
        inv = 0.0
        for j in range(k):
            inv += 1.0 / x[idx[m, j]] - 1.0 / mu
        out[_P * m] = 1.0 / n_comp
        out[_P * m + 1] = mu
        out[_P * m + 2] = k / inv if inv > 0.0 else math.inf


def min_obs(n_components: int, n_dims: int = 1) -> int:
    return 3 * n_components  # one random-subset start per component, without overlap


def check(values: np.ndarray, n_components: int) -> str | None:
    problems = [basic_problems(values, min_obs(n_components))]
    bad = int(np.count_nonzero((values <= 0) & np.isfinite(values)))  # -inf: counted above
    if bad:
        problems.append(f"{bad} of {len(values)} values {'is' if bad == 1 else 'are'} <= 0 "
                        "(the inverse-Gaussian family needs positive values)")
    return "; ".join(p for p in problems if p) or None


def features(values: np.ndarray) -> np.ndarray:
    return np.stack([values, 1.0 / values])


def obs_const(values: np.ndarray) -> np.ndarray:
    return -0.5 * LOG_2PI - 1.5 * np.log(values)


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)``, both of shape (n_obs, M), overflow-free.

    ``params`` is one fit's (M P,) or one row per value (n_obs, M P).
    ``q = lambda (x - mu)^2 / (2 mu^2 x) = lambda/2 a (a / x)`` with
    ``a = (x - mu) / mu``, evaluated as that product (accurate, centred) and,
    where the product overflows, from its logarithm.  ``x <= 0`` has density 0.
    """
    x = np.asarray(values, dtype=np.float64)[:, None]
    p = np.asarray(params, dtype=np.float64)  # one fit's (M P,) or a row per value (n, M P)
    p = p.reshape(len(p) if p.ndim == 2 else 1, n_components, _P)
    w, mu, lam = p[:, :, 0], p[:, :, 1], p[:, :, 2]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = np.log(w) + 0.5 * (np.log(lam) - LOG_2PI) - 1.5 * np.log(x)
        a = (x - mu) / mu
        q = 0.5 * lam * a * (a / x)
        logq = np.log(q)
        big = ~np.isfinite(logq) & (x > 0) & (x != mu)
        if big.any():  # the product overflowed (or underflowed to 0): its logarithm
            la = np.log(np.abs(x - mu)) - np.log(mu)
            la = np.where(np.isfinite(la), la, np.log(np.abs(0.5 * x - 0.5 * mu)) + np.log(2.0)
                          - np.log(mu))
            logq = np.where(big, np.log(0.5 * lam) + 2.0 * la - np.log(x), logq)
    pos = x > 0
    return np.where(pos, base, -np.inf), np.where(pos & (x != mu), logq, -np.inf)


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One inverse-Gaussian value of each given component (``records`` rows w, mu, lambda)."""
    return rng.wald(records[comp, 1], records[comp, 2])


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp = (Axis("component", n_components),)
    return (Block("weight", comp, "simplex"), Block("mu", comp, "positive"),
            Block("lambda", comp, "positive"))


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, _P)[:, :, 1]


FAMILY = Family(
    name="invgauss",
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
    mstep=mstep,
    accum_tile=accum_tile,
    score=score,
    outside=lambda v: v <= 0,
    exact_coef=exact_coef,
    exact_logdens=exact_logdens,
    coef_bound=coef_bound,
    subset_init=subset_init,
    log_terms=log_terms,
    draw=draw,
    order_key=order_key,
    blocks=blocks,
    linear_logdens=True,  # c0 + c1 x + c2 (1/x): linear in the statistics (1, x, 1/x)
)
