"""Finite mixtures of Gaussians with spherical covariances (``covariance_type="spherical"``).

Component ``l`` has weight ``w_l``, mean vector ``mu_l`` and one variance ``var_l`` shared by
its ``D`` dimensions (covariance ``var_l I``):

    log(w p(x)) + D/2 log(2 pi) = c0 + sum_d (mu_d / var) x_d - 1/(2 var) |x|^2,
    c0 = log w - D/2 log var - |mu|^2 / (2 var),

linear in the statistics ``(1, x, |x|^2)`` (``|x|^2`` formed from the stored coordinates).
The exact pass evaluates ``log w - D/2 log var - |x - mu|^2 / (2 var)``.  The M-step is
scikit-learn's for ``covariance_type="spherical"``: the mean of the diagonal variances,
``var = (S2 / n_k - |mean|^2) / D + reg_covar``.  Starts: the diagonal family's, each
component's variances averaged.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...tuning import (
    DEGENERATE_COLLAPSE,
    DEGENERATE_PARAM,
    GAUSS_VAR_RTOL,
    MIN_COMPONENT_MASS,
)
from ..base import Axis, Block
from . import gaussian
from .family import Family

_EPS10 = 10.0 * float(np.finfo(np.float64).eps)  # scikit-learn's guard on n_k


def coef(params, M, D, c):
    P = D + 2
    for m in range(M):
        b = P * m
        var = params[b + 1 + D]
        c0 = math.log(params[b]) - 0.5 * D * math.log(var)
        for d in range(D):
            mu = params[b + 1 + d]
            c0 -= 0.5 * mu * mu / var
            c[b + 1 + d] = mu / var
        c[b + 1 + D] = -0.5 / var
        c[b] = c0


def logdens(c, m, D, feat, stride, i):
    b = (D + 2) * m
    v = c[b]
    o = i
    for d in range(D):
        x = feat[o]
        v += x * (c[b + 1 + d] + c[b + 1 + D] * x)
        o += stride
    return v


def exact_coef(params, M, D, c):
    """``log w - D/2 log var``, the mean and ``1 / (2 var)`` per component."""
    P = D + 2
    for m in range(M):
        b = P * m
        var = params[b + 1 + D]
        c[b] = math.log(params[b]) - 0.5 * D * math.log(var)
        for d in range(D):
            c[b + 1 + d] = params[b + 1 + d]
        c[b + 1 + D] = 0.5 / var


def exact_logdens(c, m, D, feat, stride, i):
    b = (D + 2) * m
    q = 0.0
    o = i
    for d in range(D):
        z = feat[o] - c[b + 1 + d]
        q += z * z
        o += stride
    return c[b] - c[b + 1 + D] * q


def coef_bound(c, tot, m, D):
    # sum_i |x_d| <= sqrt(n sum_i x_d^2); 1 and |x|^2 are positive
    b = (D + 2) * m
    n = tot[0]
    s2 = tot[1 + D]
    w = abs(c[b]) * n + abs(c[b + 1 + D]) * s2
    for d in range(D):
        w += abs(c[b + 1 + d]) * math.sqrt(n * s2)
    return w


def accum(stats, m, r, D, feat, stride, i):
    b = (D + 2) * m
    stats[b] += r
    sq = 0.0
    o = i
    for d in range(D):
        x = feat[o]
        stats[b + 1 + d] += r * x
        sq += x * x
        o += stride
    stats[b + 1 + D] += r * sq


def mstep(stats, params, M, D, n, reg):
    P = D + 2
    for m in range(M):
        b = P * m
        s0 = stats[b]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        nk = s0 + _EPS10
        params[b] = s0 / n
        mm = 0.0
        for d in range(D):
            mean = stats[b + 1 + d] / nk
            params[b + 1 + d] = mean
            mm += mean * mean
        mean2 = stats[b + 1 + D] / nk
        var = (mean2 - mm) / D + reg
        if not (math.isfinite(var) and math.isfinite(mm)):
            return DEGENERATE_PARAM
        if not var > GAUSS_VAR_RTOL * mean2 / D:
            return DEGENERATE_COLLAPSE  # no spread left, in float64 terms
        params[b + 1 + D] = var
    return 0


@njit(inline="always")
def _from_diagonal(tmp, D, M, out):
    """The diagonal family's start -> this layout, each component's variances averaged."""
    Pd, P = 1 + 2 * D, D + 2
    for m in range(M):
        out[P * m] = tmp[Pd * m]
        v = 0.0
        for d in range(D):
            out[P * m + 1 + d] = tmp[Pd * m + 1 + d]
            v += tmp[Pd * m + 1 + D + d]
        out[P * m + 1 + D] = v / D


@njit(inline="always")
def subset_init(x, idx, out):
    M, D = idx.shape[0], x.shape[1]
    tmp = np.empty(M * (1 + 2 * D))
    gaussian.subset_init(x, idx, tmp)
    _from_diagonal(tmp, D, M, out)


@njit(inline="always")
def centre_init(x, centres, out):
    M, D = len(centres), x.shape[1]
    tmp = np.empty(M * (1 + 2 * D))
    gaussian.centre_init(x, centres, tmp)
    _from_diagonal(tmp, D, M, out)


def _diagonal(params: np.ndarray, n_components: int) -> np.ndarray:
    """``params`` (M P,) or (k, M P) in the diagonal family's layout (the variance repeated)."""
    p = np.asarray(params, dtype=np.float64)
    k = len(p) if p.ndim == 2 else 1
    p = p.reshape(k, n_components, -1)
    D = p.shape[2] - 2
    out = np.concatenate([p[:, :, :1 + D], np.repeat(p[:, :, 1 + D:], D, axis=2)], axis=2)
    return out.reshape(k, -1) if np.ndim(params) == 2 else out.reshape(-1)


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """The diagonal family's, at the variance repeated over the dimensions."""
    return gaussian.log_terms(values, _diagonal(params, n_components), n_components)


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value (n, D) of each given component (``records`` rows weight, mean, var)."""
    return gaussian.draw(_diagonal(records.reshape(1, -1), len(records)).reshape(len(records),
                                                                                -1), comp, rng)


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp, dim = Axis("component", n_components), Axis("dim", n_dims)
    return (Block("weight", (comp,), "simplex"), Block("mean", (comp, dim), "real"),
            Block("var", (comp,), "positive"))


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, n_dims + 2)[:, :, 1]


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score``: per component ``S0 / w``, ``(S1_d - S0 mu_d) / var`` and
    ``(sum r |x - mu|^2 / var - D S0) / (2 var)`` (the derivatives of ``coef``'s ``c . S``;
    ``sum r |x - mu|^2 = S2 - 2 mu . S1 + S0 |mu|^2``)."""
    n, D = len(params), n_dims
    p = params.reshape(n, n_components, D + 2)
    S = stats.reshape(n, n_components, D + 2)
    mu, var = p[..., 1:1 + D], p[..., 1 + D]
    s0, s1, s2 = S[..., 0], S[..., 1:1 + D], S[..., 1 + D]
    out = np.empty_like(p)
    out[..., 0] = s0 / p[..., 0]
    out[..., 1:1 + D] = (s1 - s0[..., None] * mu) / var[..., None]
    sq = s2 - 2.0 * (mu * s1).sum(-1) + s0 * (mu * mu).sum(-1)
    out[..., 1 + D] = (sq / var - D * s0) / (2.0 * var)
    return out.reshape(n, -1)


FAMILY = Family(
    name="gaussian_spherical",
    ndim=2,
    per_component=lambda D: D + 2,
    n_coef=lambda M, D: (D + 2) * M,
    n_stats=lambda M, D: (D + 2) * M,
    n_features=lambda D: D,
    subset_size=lambda D: 3,
    min_obs=gaussian.min_obs,
    check=gaussian.check,
    features=gaussian.features,
    obs_const=gaussian.obs_const,
    coef=coef,
    logdens=logdens,
    accum=accum,
    score=score,
    mstep=mstep,
    exact_coef=exact_coef,
    exact_logdens=exact_logdens,
    coef_bound=coef_bound,
    subset_init=subset_init,
    log_terms=log_terms,
    draw=draw,
    order_key=order_key,
    blocks=blocks,
    centre_init=centre_init,
    default_init="kmeans++",
    reg_floored="var",
    linear_logdens=True,
)
