"""Finite mixtures of Gaussians sharing one full covariance matrix (``covariance_type="tied"``).

Component ``l`` has weight ``w_l`` and mean vector ``mu_l``; every component has the same
covariance matrix ``S``.  The layout is the full family's (:mod:`.gaussian_full`): a record
per component of weight, mean and the packed lower triangle of ``S`` (``cov_1_1, cov_2_1,
cov_2_2, cov_3_1...``), the shared matrix repeated in every record.  So the per-observation
hooks (``coef``, ``logdens``, ``accum``, the exact pass's, the bound) and the host helpers
(densities, sampling, the score) are the full family's, unchanged, and the tables'
``cov_i_j`` columns and ``FitResult.params["cov"]`` (M, T) read as for ``"full"``, each
component's row holding the shared matrix.  The repetition costs a Cholesky factorisation
per component and iteration where one would do; the hooks stay one code path.

The covariance block is ``shared`` (:class:`bulkem.models.base.Block`): the free-parameter
count (AIC, BIC, ICL) is ``M - 1 + M D + D (D + 1) / 2``, standard errors take one set of
coordinates for the matrix (the score's gradients of its ``M`` copies are summed,
:meth:`~bulkem.models.base.Layout.free_gradient`), and user starting values
(``init["cov"]``, shape (M, T)) must repeat one matrix.

The M-step is scikit-learn's for ``covariance_type="tied"``
(``_estimate_gaussian_covariances_tied``): ``n_k = sum r + 10 eps``, ``mean = S1 / n_k``,

    cov = (sum_k S2_k - sum_k n_k mean_k mean_k^T) / sum_k n_k + reg_covar I,

``S2_k`` the responsibility-weighted products (their sum is ``X^T X`` up to rounding).
It pools every component's statistics (``Family.coupled_mstep``): it runs on the whole
fit, so the one-large-dataset CUDA engine, which runs the M-step a component per thread,
fits this family in the bulk regime (the CPU's one-large-dataset regime runs the whole
M-step and takes it).  It checks every variance before it writes, so the copies of the
matrix stay equal whatever it returns.  Starts: the diagonal family's (random subset or
k-means++), each dimension's variance averaged over the components, off-diagonal 0.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit
from numba.extending import register_jitable

from ...tuning import (
    DEGENERATE_COLLAPSE,
    DEGENERATE_PARAM,
    GAUSS_VAR_RTOL,
    MIN_COMPONENT_MASS,
)
from ..base import Block
from . import gaussian, gaussian_full
from .family import Family

_EPS10 = 10.0 * float(np.finfo(np.float64).eps)  # scikit-learn's guard on n_k


@register_jitable  # (callable from the hooks, compiled for the CPU and the GPU)
def _pooled(stats, P, M, k, p, q, ntot):
    """Entry ``k`` (row ``p``, column ``q``) of the pooled covariance, before ``reg``:
    ``(sum_m S2_m[k] - sum_m n_m mean_mp mean_mq) / sum_m n_m``."""
    s2 = 0.0
    mm = 0.0
    for m in range(M):
        b = P * m
        nk = stats[b] + _EPS10
        s2 += stats[b + k]
        mm += nk * (stats[b + 1 + p] / nk) * (stats[b + 1 + q] / nk)
    return (s2 - mm) / ntot


@register_jitable
def _pooled_square(stats, P, M, k, ntot):
    """``sum_m S2_m[k] / sum_m n_m``: the pooled mean square of a diagonal entry ``k``."""
    s2 = 0.0
    for m in range(M):
        s2 += stats[P * m + k]
    return s2 / ntot


def mstep(stats, params, M, D, n, reg):
    P = 1 + D + D * (D + 1) // 2
    t = 1 + D
    ntot = 0.0
    for m in range(M):
        s0 = stats[P * m]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        ntot += s0 + _EPS10
    for p in range(D):  # every check before any write: the matrix's copies stay equal
        k = t + p * (p + 1) // 2 + p
        v = _pooled(stats, P, M, k, p, p, ntot) + reg
        if not math.isfinite(v):
            return DEGENERATE_PARAM
        if not v > GAUSS_VAR_RTOL * _pooled_square(stats, P, M, k, ntot):
            return DEGENERATE_COLLAPSE  # no spread left, in float64 terms
    for m in range(M):
        b = P * m
        s0 = stats[b]
        nk = s0 + _EPS10
        params[b] = s0 / n
        for p in range(D):
            params[b + 1 + p] = stats[b + 1 + p] / nk
    for p in range(D):
        for q in range(p + 1):
            k = t + p * (p + 1) // 2 + q
            v = _pooled(stats, P, M, k, p, q, ntot)
            if p == q:
                v += reg
            for m in range(M):
                params[P * m + k] = v
    return 0


@njit(inline="always")
def _from_diagonal(tmp, D, M, out):
    """The diagonal family's start -> this layout: each dimension's variance averaged over
    the components, the off-diagonal covariances 0, in every record."""
    Pd, P = 1 + 2 * D, 1 + D + D * (D + 1) // 2
    for m in range(M):
        out[P * m] = tmp[Pd * m]
        for p in range(D):
            out[P * m + 1 + p] = tmp[Pd * m + 1 + p]
    for p in range(D):
        v = 0.0
        for m in range(M):
            v += tmp[Pd * m + 1 + D + p]
        v /= M
        for q in range(p + 1):
            for m in range(M):
                out[P * m + 1 + D + p * (p + 1) // 2 + q] = v if p == q else 0.0


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


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    """The full family's blocks, the covariance ``shared`` by the components."""
    weight, mean, cov = gaussian_full.blocks(n_components, n_dims)
    return weight, mean, cov._replace(shared=True)


FAMILY = Family(
    name="gaussian_tied",
    ndim=2,
    per_component=lambda D: 1 + D + D * (D + 1) // 2,
    n_coef=lambda M, D: (1 + D + D * (D + 1) // 2) * M,
    n_stats=lambda M, D: (1 + D + D * (D + 1) // 2) * M,
    n_features=lambda D: D,
    subset_size=lambda D: 3,
    min_obs=gaussian.min_obs,
    check=gaussian_full.check,
    features=gaussian.features,
    obs_const=gaussian.obs_const,
    coef=gaussian_full.coef,
    logdens=gaussian_full.logdens,
    accum=gaussian_full.accum,
    score=gaussian_full.score,
    mstep=mstep,
    exact_coef=gaussian_full.exact_coef,
    exact_logdens=gaussian_full.exact_logdens,
    coef_bound=gaussian_full.coef_bound,
    subset_init=subset_init,
    log_terms=gaussian_full.log_terms,
    draw=gaussian_full.draw,
    order_key=gaussian_full.order_key,
    blocks=blocks,
    centre_init=centre_init,
    default_init="kmeans++",
    linear_logdens=True,
    coupled_mstep=True,
)
