"""Finite mixtures of log-normal distributions (positive values: reaction times, incomes, sizes).

Component ``l`` has weight ``w_l`` and the mean ``meanlog_l`` and variance ``varlog_l`` of
``log x`` (R's ``dlnorm(x, meanlog, sqrt(varlog))``):

    log(w p(x)) = log w + log N(log x; meanlog, varlog) - log x,

a Gaussian mixture in ``y = log x`` with the Jacobian ``-log x`` shared by all components.
So the compiled hooks are the one-dimensional Gaussian family's (:mod:`.gaussian`: the
same linear form in ``(1, y, y^2)``, the same exact pass and M-step, ``reg_covar`` the
floor of ``varlog``), fed the feature ``y``; what is the log-normal's own is on the host:
the data check (values > 0), the feature and the shared term (``-log(2 pi)/2 - log x``),
the starts (from ``log x``), the densities and the sampler.  A fit of ``log x`` with
``family="gaussian"`` has the same parameters, and a log-likelihood ``sum log x`` higher.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ...data import basic_problems
from ...tuning import LOG_2PI
from ..base import Axis, Block
from . import gaussian
from .family import Family

_P = 3  # parameters per component: weight, meanlog, varlog


@njit(inline="always")
def _log_var(x):
    """Variance of ``log x`` over the dataset (1 if constant)."""
    n = len(x)
    s = 0.0
    for i in range(n):
        s += math.log(x[i])
    mean = s / n
    v = 0.0
    for i in range(n):
        z = math.log(x[i]) - mean
        v += z * z
    v /= n
    return v if v > 0.0 else 1.0


@njit(inline="always")
def subset_init(x, idx, out):
    """Mean and variance of ``log x`` over each component's drawn values (a subset of equal
    values starts at the dataset's variance)."""
    n_comp, k = idx.shape
    for m in range(n_comp):
        mu = 0.0
        for j in range(k):
            mu += math.log(x[idx[m, j]])
        mu /= k
        v = 0.0
        for j in range(k):
            z = math.log(x[idx[m, j]]) - mu
            v += z * z
        v /= k
        out[_P * m] = 1.0 / n_comp
        out[_P * m + 1] = mu
        out[_P * m + 2] = v if v > 0.0 else _log_var(x)


def min_obs(n_components: int, n_dims: int = 1) -> int:
    return 3 * n_components  # one random-subset start per component, without overlap


def check(values: np.ndarray, n_components: int) -> str | None:
    problems = [basic_problems(values, min_obs(n_components))]
    bad = int(np.count_nonzero((values <= 0) & np.isfinite(values)))
    if bad:
        problems.append(f"{bad} of {len(values)} values {'is' if bad == 1 else 'are'} <= 0 "
                        "(the log-normal family needs positive values)")
    return "; ".join(p for p in problems if p) or None


def features(values: np.ndarray) -> np.ndarray:
    return np.log(np.asarray(values, dtype=np.float64))[None]


def obs_const(values: np.ndarray) -> np.ndarray:
    return -0.5 * LOG_2PI - np.log(values)


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)`` (n_obs, M): the Gaussian's of ``log x``, less
    ``log x`` in ``base``; ``x <= 0`` has density 0."""
    x = np.asarray(values, dtype=np.float64).reshape(-1)
    pos = x > 0
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(np.where(pos, x, 1.0))
    base, logq = gaussian.log_terms(y[:, None], params, n_components)
    base = np.where(pos[:, None], base - y[:, None], -np.inf)
    return base, np.where(pos[:, None], logq, -np.inf)


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One value of each given component (``records`` rows weight, meanlog, varlog)."""
    return np.exp(records[comp, 1] + np.sqrt(records[comp, 2]) * rng.standard_normal(len(comp)))


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp = (Axis("component", n_components),)
    return (Block("weight", comp, "simplex"), Block("meanlog", comp, "real"),
            Block("varlog", comp, "positive"))


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, _P)[:, :, 1]


FAMILY = Family(
    name="lognormal",
    ndim=1,
    per_component=gaussian.FAMILY.per_component,
    n_coef=gaussian.FAMILY.n_coef,
    n_stats=gaussian.FAMILY.n_stats,
    n_features=gaussian.FAMILY.n_features,
    subset_size=lambda D: 3,
    min_obs=min_obs,
    check=check,
    features=features,
    obs_const=obs_const,
    coef=gaussian.coef,
    logdens=gaussian.logdens,
    accum=gaussian.accum,
    mstep=gaussian.mstep,
    accum_tile=gaussian.accum_tile,
    score=gaussian.score,  # (the statistics of log x)
    outside=lambda v: v <= 0,
    exact_coef=gaussian.exact_coef,
    exact_logdens=gaussian.exact_logdens,
    logdens_tile=gaussian.logdens_tile,
    exact_logdens_tile=gaussian.exact_logdens_tile,
    coef_bound=gaussian.coef_bound,
    subset_init=subset_init,
    log_terms=log_terms,
    draw=draw,
    order_key=order_key,
    blocks=blocks,
    reg_floored="varlog",
    linear_logdens=True,  # the Gaussian's, in log x
)
