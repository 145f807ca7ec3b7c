"""Finite mixtures of Gaussians with full covariance matrices (``covariance_type="full"``).

Component ``l`` has weight ``w_l``, mean vector ``mu_l`` and covariance matrix ``S_l``,
stored as its lower triangle row by row (``cov_1_1, cov_2_1, cov_2_2, cov_3_1...``; ``T =
D (D + 1) / 2`` entries).  With the precision ``L = S^-1``,

    log(w p(x)) + D/2 log(2 pi) = c0 + sum_i (L mu)_i x_i - sum_{j < i} L_ij x_i x_j
                                  - 1/2 sum_i L_ii x_i^2,
    c0 = log w - 1/2 log|S| - 1/2 mu^T L mu,

is linear in the statistics ``(1, x, x_i x_j for j <= i)`` (``linear_logdens``; the
products are formed from the stored coordinates, so the features are the ``D``
coordinates, as for the diagonal family).  The exact pass evaluates ``log w - 1/2 log|S| -
1/2 |C^-1 (x - mu)|^2`` with ``C`` the Cholesky factor of ``S`` (its inverse in the exact
coefficients).  Both come from a Cholesky factorisation in place in the fit's coefficient
array (no scratch: the hooks compile for the GPU too); a covariance that is not positive
definite gives NaN coefficients, so the E-step ends the start as degenerate.

The M-step is scikit-learn's for ``covariance_type="full"``: ``n_k = sum r + 10 eps``,
``mean = S1 / n_k``, ``cov = S2 / n_k - mean mean^T + reg_covar I`` (S2 the
responsibility-weighted products).  Starts: a random subset's means and per-dimension
variances (off-diagonal 0), or k-means++ centres (the diagonal family's starts).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from ...data import basic_problems
from ...tuning import (
    DEGENERATE_COLLAPSE,
    DEGENERATE_PARAM,
    GAUSS_VAR_RTOL,
    LOG_2PI,
    MIN_COMPONENT_MASS,
)
from ..base import Axis, Block
from . import gaussian
from .family import Family

_EPS10 = 10.0 * float(np.finfo(np.float64).eps)  # scikit-learn's guard on n_k


def _per(D):
    return 1 + D + D * (D + 1) // 2


@register_jitable  # (callable from the hooks, compiled for the CPU and the GPU)
def _chol_inv(c, t, D):
    """The packed lower triangle ``c[t:]`` (a covariance) -> its Cholesky factor's inverse,
    in place; returns ``log|S|`` (NaN if ``S`` is not positive definite)."""
    logdet = 0.0
    for i in range(D):  # Cholesky, row by row
        ri = t + i * (i + 1) // 2
        for j in range(i + 1):
            rj = t + j * (j + 1) // 2
            s = c[ri + j]
            for k in range(j):
                s -= c[ri + k] * c[rj + k]
            if i == j:
                if not s > 0.0:
                    return math.nan
                c[ri + i] = math.sqrt(s)
                logdet += 2.0 * math.log(c[ri + i])
            else:
                c[ri + j] = s / c[rj + j]
    for j in range(D):  # the inverse of the factor, column by column
        rj = t + j * (j + 1) // 2
        c[rj + j] = 1.0 / c[rj + j]
        for i in range(j + 1, D):
            ri = t + i * (i + 1) // 2
            s = 0.0
            for k in range(j, i):
                s += c[ri + k] * c[t + k * (k + 1) // 2 + j]
            c[ri + j] = -s / c[ri + i]
    return logdet


def coef(params, M, D, c):
    P = 1 + D + D * (D + 1) // 2
    for m in range(M):
        b = P * m
        t = b + 1 + D
        for q in range(D * (D + 1) // 2):
            c[t + q] = params[t + q]
        logdet = _chol_inv(c, t, D)
        for i in range(D):  # the precision L = C^-T C^-1, row by row, in place
            ri = t + i * (i + 1) // 2
            for j in range(i + 1):
                s = 0.0
                for k in range(i, D):
                    rk = t + k * (k + 1) // 2
                    s += c[rk + i] * c[rk + j]
                c[ri + j] = s
        quad = 0.0
        for i in range(D):  # L mu and mu^T L mu
            s = 0.0
            for j in range(D):
                lij = c[t + i * (i + 1) // 2 + j] if j <= i else c[t + j * (j + 1) // 2 + i]
                s += lij * params[b + 1 + j]
            c[b + 1 + i] = s
            quad += s * params[b + 1 + i]
        for i in range(D):
            ri = t + i * (i + 1) // 2
            for j in range(i):
                c[ri + j] = -c[ri + j]
            c[ri + i] = -0.5 * c[ri + i]
        c[b] = math.log(params[b]) - 0.5 * logdet - 0.5 * quad


def logdens(c, m, D, feat, stride, i):
    P = 1 + D + D * (D + 1) // 2
    b = P * m
    t = b + 1 + D
    v = c[b]
    oi = i
    for p in range(D):
        x = feat[oi]
        s = c[b + 1 + p]
        oj = i
        for q in range(p + 1):
            s += c[t + p * (p + 1) // 2 + q] * feat[oj]
            oj += stride
        v += x * s
        oi += stride
    return v


def exact_coef(params, M, D, c):
    """``log w - 1/2 log|S|``, the mean and the inverse Cholesky factor of each component."""
    P = 1 + D + D * (D + 1) // 2
    for m in range(M):
        b = P * m
        t = b + 1 + D
        for q in range(D * (D + 1) // 2):
            c[t + q] = params[t + q]
        for i in range(D):
            c[b + 1 + i] = params[b + 1 + i]
        c[b] = math.log(params[b]) - 0.5 * _chol_inv(c, t, D)


def exact_logdens(c, m, D, feat, stride, i):
    P = 1 + D + D * (D + 1) // 2
    b = P * m
    t = b + 1 + D
    v = c[b]
    for p in range(D):  # z = C^-1 (x - mu)
        z = 0.0
        o = i
        for q in range(p + 1):
            z += c[t + p * (p + 1) // 2 + q] * (feat[o] - c[b + 1 + q])
            o += stride
        v -= 0.5 * z * z
    return v


def coef_bound(c, tot, m, D):
    # sum_i |x_p| <= sqrt(n sum_i x_p^2); |x_p x_q| <= (x_p^2 + x_q^2) / 2
    P = 1 + D + D * (D + 1) // 2
    b = P * m
    t = 1 + D
    n = tot[0]
    w = abs(c[b]) * n
    for p in range(D):
        sp = tot[t + p * (p + 1) // 2 + p]
        w += abs(c[b + 1 + p]) * math.sqrt(n * sp)
        for q in range(p + 1):
            sq = tot[t + q * (q + 1) // 2 + q]
            w += abs(c[b + t + p * (p + 1) // 2 + q]) * 0.5 * (sp + sq)
    return w


def accum(stats, m, r, D, feat, stride, i):
    P = 1 + D + D * (D + 1) // 2
    b = P * m
    t = b + 1 + D
    stats[b] += r
    op = i
    for p in range(D):
        x = feat[op]
        rx = r * x
        stats[b + 1 + p] += rx
        oq = i
        for q in range(p + 1):
            stats[t + p * (p + 1) // 2 + q] += rx * feat[oq]
            oq += stride
        op += stride


def mstep(stats, params, M, D, n, reg):
    P = 1 + D + D * (D + 1) // 2
    for m in range(M):
        b = P * m
        t = b + 1 + D
        s0 = stats[b]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        nk = s0 + _EPS10
        params[b] = s0 / n
        for p in range(D):
            params[b + 1 + p] = stats[b + 1 + p] / nk
        for p in range(D):
            mp = params[b + 1 + p]
            for q in range(p + 1):
                k = t + p * (p + 1) // 2 + q
                mean2 = stats[k] / nk
                v = mean2 - mp * params[b + 1 + q]
                if p == q:
                    v += reg
                    if not (math.isfinite(v) and math.isfinite(mp)):
                        return DEGENERATE_PARAM
                    if not v > GAUSS_VAR_RTOL * mean2:
                        return DEGENERATE_COLLAPSE  # no spread left, in float64 terms
                params[k] = v
    return 0


@njit(inline="always")
def _from_diagonal(tmp, D, M, out):
    """The diagonal family's start (weight, means, variances per component) -> this
    layout, the off-diagonal covariances 0."""
    Pd, P = 1 + 2 * D, 1 + D + D * (D + 1) // 2
    for m in range(M):
        out[P * m] = tmp[Pd * m]
        for p in range(D):
            out[P * m + 1 + p] = tmp[Pd * m + 1 + p]
            for q in range(p + 1):
                out[P * m + 1 + D + p * (p + 1) // 2 + q] = (
                    tmp[Pd * m + 1 + D + p] if p == q else 0.0)


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


def _split(params: np.ndarray, n_components: int):
    """Weights (k, M), means (k, M, D), covariances (k, M, D, D) of ``params``."""
    p = np.asarray(params, dtype=np.float64)
    p = p.reshape(len(p) if p.ndim == 2 else 1, n_components, -1)
    D = int((math.isqrt(8 * p.shape[2] + 1) - 3) // 2)  # P = 1 + D + D (D + 1) / 2
    lo = np.tril_indices(D)
    cov = np.zeros(p.shape[:2] + (D, D))
    cov[:, :, lo[0], lo[1]] = p[:, :, 1 + D:]
    cov = cov + np.swapaxes(np.tril(cov, -1), 2, 3)
    return p[:, :, 0], p[:, :, 1:1 + D], cov


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)``, both (n_obs, M): ``base = log w - 1/2
    log|2 pi S|``, ``q = 1/2 |C^-1 (x - mu)|^2`` (NaN where ``S`` is not positive definite)."""
    w, mu, cov = _split(params, n_components)
    x = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    D = x.shape[1]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        try:
            C = np.linalg.cholesky(cov)
        except np.linalg.LinAlgError:
            nan = np.full((len(x), n_components), np.nan)
            return nan, nan
        logdet = 2.0 * np.log(np.diagonal(C, axis1=2, axis2=3)).sum(axis=2)
        base = np.log(w) - 0.5 * (logdet + D * LOG_2PI)
        diff = x[:, None, :] - mu  # (n, M, D)
        z = np.linalg.solve(np.broadcast_to(C, diff.shape[:2] + (D, D)), diff[..., None])
        logq = np.log(0.5 * np.sum(z[..., 0] ** 2, axis=2))
    return np.broadcast_to(base, (len(x), n_components)), logq


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value (n, D) of each given component (``records`` rows weight, mean, packed cov)."""
    w, mu, cov = _split(records.reshape(1, -1), len(records))
    C = np.linalg.cholesky(cov[0])
    z = rng.standard_normal(mu[0][comp].shape)
    return mu[0][comp] + np.einsum("nij,nj->ni", C[comp], z)


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp, dim = Axis("component", n_components), Axis("dim", n_dims)
    tri = tuple(f"{p + 1}_{q + 1}" for p in range(n_dims) for q in range(p + 1))
    return (Block("weight", (comp,), "simplex"), Block("mean", (comp, dim), "real"),
            Block("cov", (comp, Axis("entry", len(tri), labels=tri)), "real"))


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score``: per component ``S0 / w``, ``S^-1 (S1 - S0 mu)`` and, with ``C = sum
    r (x - mu)(x - mu)^T`` and ``G = (S^-1 C S^-1 - S0 S^-1) / 2``, ``G_pp`` for a diagonal
    entry and ``2 G_pq`` for an off-diagonal one (each stored once: the derivatives of
    ``coef``'s ``c . S`` with the lower triangle's entries as the parameters)."""
    n, D, M = len(params), n_dims, n_components
    P = _per(D)
    p = params.reshape(n, M, P)
    S = stats.reshape(n, M, P)
    rows, cols = np.tril_indices(D)
    cov = np.zeros((n, M, D, D))
    cov[..., rows, cols] = p[..., 1 + D:]
    cov[..., cols, rows] = p[..., 1 + D:]
    s2 = np.zeros((n, M, D, D))
    s2[..., rows, cols] = S[..., 1 + D:]
    s2[..., cols, rows] = S[..., 1 + D:]
    s0, s1, mu = S[..., 0], S[..., 1:1 + D], p[..., 1:1 + D]
    prec = np.linalg.inv(cov)
    c = (s2 - mu[..., :, None] * s1[..., None, :] - s1[..., :, None] * mu[..., None, :]
         + s0[..., None, None] * mu[..., :, None] * mu[..., None, :])
    g = 0.5 * (prec @ c @ prec - s0[..., None, None] * prec)
    out = np.empty_like(p)
    out[..., 0] = s0 / p[..., 0]
    out[..., 1:1 + D] = (prec @ (s1 - s0[..., None] * mu)[..., None])[..., 0]
    out[..., 1 + D:] = np.where(rows == cols, 1.0, 2.0) * g[..., rows, cols]
    return out.reshape(n, -1)


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, _per(n_dims))[:, :, 1]


def check(values: np.ndarray, n_components: int) -> str | None:
    return basic_problems(values, gaussian.min_obs(n_components))


FAMILY = Family(
    name="gaussian_full",
    ndim=2,
    per_component=lambda D: 1 + D + D * (D + 1) // 2,
    n_coef=lambda M, D: (1 + D + D * (D + 1) // 2) * M,
    n_stats=lambda M, D: (1 + D + D * (D + 1) // 2) * M,
    n_features=lambda D: D,
    subset_size=lambda D: 3,
    min_obs=gaussian.min_obs,
    check=check,
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
    linear_logdens=True,
)
