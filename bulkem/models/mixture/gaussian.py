"""Finite mixtures of Gaussians with diagonal covariance matrices.

Component ``l`` has weight ``w_l``, mean vector ``mu_l`` and per-dimension
variances ``var_l`` (the model of the CUDA EM paper of Kumar et al.):

    log(w p(x)) = [log w - 1/2 sum_d log var_d] - 1/2 sum_d (x_d - mu_d)^2 / var_d
                  - D/2 log(2 pi).

The last term is shared by all components and added once per dataset
(``obs_const``).  Expanding the square, as scikit-learn does,

    log(w p(x)) + D/2 log(2 pi) = c0 + sum_d (mu_d / var_d) x_d - 1/(2 var_d) x_d^2,
    c0 = log w - 1/2 sum_d (log var_d + mu_d^2 / var_d),

is linear in the statistics ``(1, x, x^2)`` that the M-step sums, with the
coefficients laid out like the statistics (``linear_logdens``): each
dimension costs two multiply-adds per observation and component, and the
one-large-dataset CUDA engine computes all log densities of a tile as one
matrix product.  The expanded terms can be far larger than the log
density they add up to (a component on one point far from the others:
``mu^2 / var ~ 1e18``), so the exact pass (:mod:`.fused`) evaluates
``log w - 1/2 sum_d log var_d - sum_d z_d^2`` with ``z = (x - mean) /
sqrt(2 var)`` instead, centred on each component, wherever the expanded
form's rounding could show.  The features are the ``D`` coordinates
themselves (``feat[d * stride + i]``).

Layouts, ``P = 1 + 2 D`` values per component in each of them:

* params: ``weight, mean_1..mean_D, var_1..var_D``;
* coef: ``c0, mu_1/var_1..mu_D/var_D, -1/(2 var_1)..-1/(2 var_D)``;
* stats: ``sum r, sum r x_1..sum r x_D, sum r x_1^2..sum r x_D^2``.

The M-step is scikit-learn's for ``covariance_type="diag"``
(``sklearn.mixture._gaussian_mixture._estimate_gaussian_parameters``), with
``n_k = sum r + 10 eps`` and the *new* mean,

    mean = S1 / n_k,    var = S2 / n_k - mean^2 + reg_covar,

so that fits from the same starting values agree with scikit-learn's
``GaussianMixture(covariance_type="diag")``.  ``reg_covar`` floors the
variances so that a component cannot shrink onto a single point.  A
component left with (almost) no mass (``MIN_COMPONENT_MASS``), or
whose variance in some dimension is no longer distinguishable from zero in
float64 (below ``GAUSS_VAR_RTOL`` times the mean square: possible
when ``reg_covar`` is 0 or tiny for the data's scale), ends the start as
degenerate.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...data import basic_problems
from ...tuning import (
    DEGENERATE_COLLAPSE,
    DEGENERATE_PARAM,
    GAUSS_VAR_RTOL,
    LOG_2PI,
    MIN_COMPONENT_MASS,
)
from ..base import Axis, Block
from .family import Family

_EPS10 = 10.0 * float(np.finfo(np.float64).eps)  # scikit-learn's guard on n_k


def coef(params, M, D, c):
    P = 1 + 2 * D
    for m in range(M):
        b = P * m
        c0 = math.log(params[b])
        for d in range(D):
            mu = params[b + 1 + d]
            prec = 1.0 / params[b + 1 + D + d]
            c0 -= 0.5 * (mu * mu * prec - math.log(prec))
            c[b + 1 + d] = mu * prec
            c[b + 1 + D + d] = -0.5 * prec
        c[b] = c0


def logdens(c, m, D, feat, stride, i):
    b = (1 + 2 * D) * m
    v = c[b]
    o = i  # feature d of observation i: feat[i + d * stride] (o keeps i's integer type)
    for d in range(D):
        x = feat[o]
        v += x * (c[b + 1 + d] + c[b + 1 + D + d] * x)
        o += stride
    return v


def exact_coef(params, M, D, c):
    """``log w - 1/2 sum_d log var_d``, the means and ``1 / sqrt(2 var_d)`` per component."""
    P = 1 + 2 * D
    for m in range(M):
        b = P * m
        a = math.log(params[b])
        for d in range(D):
            var = params[b + 1 + D + d]
            a -= 0.5 * math.log(var)
            c[b + 1 + d] = params[b + 1 + d]
            c[b + 1 + D + d] = math.sqrt(0.5 / var)
        c[b] = a


def exact_logdens(c, m, D, feat, stride, i):
    b = (1 + 2 * D) * m
    v = c[b]
    o = i
    for d in range(D):
        z = (feat[o] - c[b + 1 + d]) * c[b + 1 + D + d]  # (x - mean) / sqrt(2 var)
        v -= z * z
        o += stride
    return v


def logdens_tile(c, m, D, X, T, n, v):
    """``logdens`` of the tile's observations ``t < n`` (``X[d T + t]``) into ``v[m T + t]``.

    The same operations in the same order for each observation, the loop over
    the observations inside the loop over the dimensions (so that it vectorises),
    two dimensions per load and store of ``v``.
    """
    b = (1 + 2 * D) * m
    vm = v[m * T:(m + 1) * T]
    c0 = c[b]
    for t in range(n):
        vm[t] = c0
    for d in range(0, D - 1, 2):
        c1 = c[b + 1 + d]
        c2 = c[b + 1 + D + d]
        e1 = c[b + 2 + d]
        e2 = c[b + 2 + D + d]
        xd = X[d * T:(d + 1) * T]
        xe = X[(d + 1) * T:(d + 2) * T]
        for t in range(n):
            x = xd[t]
            y = xe[t]
            vm[t] = (vm[t] + x * (c1 + c2 * x)) + y * (e1 + e2 * y)
    if D % 2:
        c1 = c[b + D]
        c2 = c[b + 2 * D]
        xd = X[(D - 1) * T:D * T]
        for t in range(n):
            x = xd[t]
            vm[t] += x * (c1 + c2 * x)


def exact_logdens_tile(c, m, D, X, T, n, v):
    """``exact_logdens`` of a tile, as :func:`logdens_tile`."""
    b = (1 + 2 * D) * m
    vm = v[m * T:(m + 1) * T]
    c0 = c[b]
    for t in range(n):
        vm[t] = c0
    for d in range(0, D - 1, 2):
        mean = c[b + 1 + d]
        s = c[b + 1 + D + d]
        mean2 = c[b + 2 + d]
        s2 = c[b + 2 + D + d]
        xd = X[d * T:(d + 1) * T]
        xe = X[(d + 1) * T:(d + 2) * T]
        for t in range(n):
            z = (xd[t] - mean) * s
            y = (xe[t] - mean2) * s2
            vm[t] = (vm[t] - z * z) - y * y
    if D % 2:
        mean = c[b + D]
        s = c[b + 2 * D]
        xd = X[(D - 1) * T:D * T]
        for t in range(n):
            z = (xd[t] - mean) * s
            vm[t] -= z * z


def coef_bound(c, tot, m, D):
    # sum_i |x| <= sqrt(n sum_i x^2) (Cauchy-Schwarz); 1 and x^2 are positive
    b = (1 + 2 * D) * m
    n = tot[0]
    w = abs(c[b]) * n
    for d in range(D):
        s2 = tot[1 + D + d]
        w += abs(c[b + 1 + d]) * math.sqrt(n * s2) + abs(c[b + 1 + D + d]) * s2
    return w


def accum(stats, m, r, D, feat, stride, i):
    b = (1 + 2 * D) * m
    stats[b] += r
    o = i
    for d in range(D):
        x = feat[o]
        rx = r * x
        stats[b + 1 + d] += rx
        stats[b + 1 + D + d] += rx * x
        o += stride


def accum_tile(P, R, M, D, X, T, t0, t1):
    """``accum`` of a tile's observations ``t0 <= t < t1`` (``X[d T + t]``), weights ``R[t M + m]``.

    Every component ``m < M``, into ``P`` laid out by statistic (``P[k M + m]``):
    each sum takes the observations in order, with ``accum``'s operations, so the
    same bits; the loop over the components is innermost and vectorises (indexed
    from 0 in slices), and two observations share each load and store of a sum.
    """
    p0 = P[:M]
    t = t0
    while t + 1 < t1:
        r0 = R[t * M:(t + 1) * M]
        r1 = R[(t + 1) * M:(t + 2) * M]
        for m in range(M):
            p0[m] = (p0[m] + r0[m]) + r1[m]
        for d in range(D):
            x0 = X[d * T + t]
            x1 = X[d * T + t + 1]
            pa = P[(1 + d) * M:(2 + d) * M]  # sum of r x_d
            pb = P[(1 + D + d) * M:(2 + D + d) * M]  # sum of r x_d^2
            for m in range(M):
                rx0 = r0[m] * x0
                rx1 = r1[m] * x1
                pa[m] = (pa[m] + rx0) + rx1
                pb[m] = (pb[m] + rx0 * x0) + rx1 * x1
        t += 2
    if t < t1:
        r0 = R[t * M:(t + 1) * M]
        for m in range(M):
            p0[m] += r0[m]
        for d in range(D):
            x0 = X[d * T + t]
            pa = P[(1 + d) * M:(2 + d) * M]
            pb = P[(1 + D + d) * M:(2 + D + d) * M]
            for m in range(M):
                rx0 = r0[m] * x0
                pa[m] += rx0
                pb[m] += rx0 * x0


def mstep(stats, params, M, D, n, reg):
    P = 1 + 2 * D
    for m in range(M):
        b = P * m
        s0 = stats[b]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        nk = s0 + _EPS10
        params[b] = s0 / n
        for d in range(D):
            mean = stats[b + 1 + d] / nk
            mean2 = stats[b + 1 + D + d] / nk
            var = mean2 - mean * mean + reg
            if not (math.isfinite(mean) and math.isfinite(var)):
                return DEGENERATE_PARAM
            if not var > GAUSS_VAR_RTOL * mean2:
                return DEGENERATE_COLLAPSE  # no spread left, in float64 terms
            params[b + 1 + d] = mean
            params[b + 1 + D + d] = var
    return 0


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score``: per component ``S0 / w``, ``(S1_d - S0 mu_d) / var_d`` and
    ``(sum r (x_d - mu_d)^2 / var_d - S0) / (2 var_d)`` (the derivatives of ``coef``'s
    ``c . S``; ``sum r (x_d - mu_d)^2 = S2_d - 2 mu_d S1_d + S0 mu_d^2``)."""
    n, D = len(params), n_dims
    p = params.reshape(n, n_components, 1 + 2 * D)
    S = stats.reshape(n, n_components, 1 + 2 * D)
    mu, var = p[..., 1:1 + D], p[..., 1 + D:]
    s0, s1, s2 = S[..., :1], S[..., 1:1 + D], S[..., 1 + D:]
    out = np.empty_like(p)
    out[..., 0] = S[..., 0] / p[..., 0]
    out[..., 1:1 + D] = (s1 - s0 * mu) / var
    out[..., 1 + D:] = ((s2 - 2.0 * mu * s1 + s0 * mu * mu) / var - s0) / (2.0 * var)
    return out.reshape(n, -1)


@njit(inline="always")
def _data_var(x, d):
    """Variance of column d of the dataset x (n, D); 1 for a constant column."""
    n = x.shape[0]
    s = 0.0
    for i in range(n):
        s += x[i, d]
    mean = s / n
    v = 0.0
    for i in range(n):
        z = x[i, d] - mean
        v += z * z
    v /= n
    return v if v > 0.0 else 1.0


@njit(inline="always")
def subset_init(x, idx, out):
    """Mean and per-dimension variance of each component's drawn observations.

    A dimension in which the drawn observations are all equal starts at the
    dataset's variance in that dimension (1 if the column is constant).
    """
    n_comp, k = idx.shape
    D = x.shape[1]
    P = 1 + 2 * D
    for m in range(n_comp):
        b = P * m
        out[b] = 1.0 / n_comp
        for d in range(D):
            mu = 0.0
            for j in range(k):
                mu += x[idx[m, j], d]
            mu /= k
            v = 0.0
            for j in range(k):
                z = x[idx[m, j], d] - mu
                v += z * z
            v /= k
            out[b + 1 + d] = mu
            out[b + 1 + D + d] = v if v > 0.0 else _data_var(x, d)


@njit(inline="always")
def centre_init(x, centres, out):
    """k-means++ start: means at the chosen observations ``x[centres]``.

    Every observation is assigned to its nearest centre (squared Euclidean
    distance, lowest index on ties); a component's variances are those of
    its assigned observations, or the dataset's where it has fewer than two
    or a dimension does not vary.  Weights start equal.
    """
    n, D = x.shape
    n_comp = len(centres)
    P = 1 + 2 * D
    cnt = np.zeros(n_comp)
    s1 = np.zeros((n_comp, D))
    s2 = np.zeros((n_comp, D))
    for i in range(n):
        best = 0
        best_d = math.inf
        for m in range(n_comp):
            dist = 0.0
            for d in range(D):
                z = x[i, d] - x[centres[m], d]
                dist += z * z
            if dist < best_d:
                best_d = dist
                best = m
        cnt[best] += 1.0
        for d in range(D):
            z = x[i, d] - x[centres[best], d]
            s1[best, d] += z
            s2[best, d] += z * z
    for m in range(n_comp):
        b = P * m
        out[b] = 1.0 / n_comp
        for d in range(D):
            out[b + 1 + d] = x[centres[m], d]
            v = 0.0
            if cnt[m] >= 2.0:
                mz = s1[m, d] / cnt[m]
                v = s2[m, d] / cnt[m] - mz * mz  # about the cluster's mean
            out[b + 1 + D + d] = v if v > 0.0 else _data_var(x, d)


def min_obs(n_components: int, n_dims: int = 1) -> int:
    return 3 * n_components  # one random-subset start per component, without overlap


def check(values: np.ndarray, n_components: int) -> str | None:
    return basic_problems(values, min_obs(n_components))  # counts observations with NaN


def features(values: np.ndarray) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).T


def obs_const(values: np.ndarray) -> np.ndarray:
    return np.full(len(values), -0.5 * values.shape[1] * LOG_2PI)


def _split(params: np.ndarray, n_components: int):
    """Weights (k, M), means and variances (k, M, D) of ``params`` (M P,) or (k, M P)."""
    p = np.asarray(params, dtype=np.float64)
    p = p.reshape(len(p) if p.ndim == 2 else 1, n_components, -1)
    D = (p.shape[2] - 1) // 2
    return p[:, :, 0], p[:, :, 1 : 1 + D], p[:, :, 1 + D :]


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)``, both of shape (n_obs, M), overflow-free.

    ``params`` is one fit's (M P,) or one row per value (n_obs, M P).
    ``q = 1/2 sum_d z_d^2`` with ``z = (x - mean) / sd`` (centred and scaled
    per component), its logarithm taken relative to the largest ``|z_d|`` so
    that points far beyond ~1e154 standard deviations still have a finite
    ``logq``.
    """
    w, mu, var = _split(params, n_components)
    x = np.asarray(values, dtype=np.float64).reshape(len(values), -1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = np.log(w) - 0.5 * np.sum(np.log(var) + LOG_2PI, axis=2)
        base = np.broadcast_to(base, (len(x), n_components))
        diff = x[:, None, :] - mu
        lz = np.log(np.abs(diff)) - 0.5 * np.log(var)  # log |z|
        over = ~np.isfinite(diff)
        if over.any():  # x - mean beyond the float range: halve both first
            half = np.log(np.abs(0.5 * x[:, None, :] - 0.5 * mu)) + np.log(2.0)
            lz = np.where(over, half - 0.5 * np.log(var), lz)
        top = np.max(lz, axis=2, keepdims=True)
        safe = np.where(np.isfinite(top), top, 0.0)
        logq = (np.log(0.5) + 2.0 * top[:, :, 0]
                + np.log(np.sum(np.exp(2.0 * (lz - safe)), axis=2)))
    return base, logq


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value (n, D) of each given component (``records`` rows w, means, variances)."""
    D = (records.shape[1] - 1) // 2
    mean, var = records[comp, 1 : 1 + D], records[comp, 1 + D :]
    return mean + np.sqrt(var) * rng.standard_normal(mean.shape)


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp, dim = Axis("component", n_components), Axis("dim", n_dims)
    return (Block("weight", (comp,), "simplex"), Block("mean", (comp, dim), "real"),
            Block("var", (comp, dim), "positive"))


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, 1 + 2 * n_dims)[:, :, 1]


FAMILY = Family(
    name="gaussian",
    ndim=2,
    per_component=lambda D: 1 + 2 * D,
    n_coef=lambda M, D: (1 + 2 * D) * M,
    n_stats=lambda M, D: (1 + 2 * D) * M,
    n_features=lambda D: D,
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
    exact_coef=exact_coef,
    exact_logdens=exact_logdens,
    logdens_tile=logdens_tile,
    exact_logdens_tile=exact_logdens_tile,
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
