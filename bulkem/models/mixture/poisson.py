"""Finite mixtures of Poisson distributions (counts: reads per gene, events per subject).

Component ``l`` has weight ``w_l`` and rate ``rate_l``:
``p(x | rate) = rate^x exp(-rate) / x!`` for ``x = 0, 1, 2, ...``.  Written as

    log(w p(x)) = [log w - rate] + (log(rate) + 1) x - x log x
                  + (x log x - x - log x!),

it is linear in the features ``(x, x log x)`` (both >= 0 for counts; ``0 log 0 = 0``) with
the coefficients ``(log w - rate, log(rate) + 1, -1)``; the last bracket is shared by all
components and added once per dataset (``obs_const``; by Stirling it is about
``-log(2 pi x) / 2``, small, where ``log x!`` alone is not).  The sufficient statistics are
``S0 = sum r``, ``S1 = sum r x`` (and ``sum r x log x``, unused) per component; the
M-step is ``w = S0 / n``, ``rate = S1 / S0``.

A component whose values are all 0 has the maximum ``rate = 0``, where ``log(rate)`` is
``-inf``: the M-step floors rates at ``MIN_POISSON_RATE`` (1e-8, under which the component
puts probability ``1 - 1e-8`` on 0), so zero-inflated counts fit, and standard errors
report such a fit as on its boundary.

The exact pass (:mod:`.fused`) evaluates ``log w - rate + x log(rate / x) + x`` centred,
as ``log w + x (log1p(u) - u)`` with ``u = (rate - x) / x`` (``log w - rate`` at ``x = 0``):
accurate to rounding of its own size where the expanded terms (``x log(rate)`` against
``rate``) cancel.
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

_P = 2  # parameters per component: weight, rate
_S = 3  # coefficients and statistics per component: (1, x, x log x)

MIN_POISSON_RATE = 1e-8  # a component's smallest rate (its values all 0)


def coef(params, M, D, c):
    for m in range(M):
        w = params[_P * m]
        rate = params[_P * m + 1]
        c[_S * m] = math.log(w) - rate
        c[_S * m + 1] = math.log(rate) + 1.0
        c[_S * m + 2] = -1.0


def logdens(c, m, D, feat, stride, i):
    return c[_S * m] + c[_S * m + 1] * feat[i] + c[_S * m + 2] * feat[stride + i]


def exact_coef(params, M, D, c):
    """``log w`` and the rate per component (and an unused 0)."""
    for m in range(M):
        c[_S * m] = math.log(params[_P * m])
        c[_S * m + 1] = params[_P * m + 1]
        c[_S * m + 2] = 0.0


def exact_logdens(c, m, D, feat, stride, i):
    x = feat[i]
    rate = c[_S * m + 1]
    if x > 0.0:
        u = (rate - x) / x
        return c[_S * m] + x * (math.log1p(u) - u)
    return c[_S * m] - rate


def coef_bound(c, tot, m, D):
    # the features 1, x, x log x are >= 0 for counts: sum_i |g_k| = tot[k]
    return (abs(c[_S * m]) * tot[0] + abs(c[_S * m + 1]) * tot[1]
            + abs(c[_S * m + 2]) * tot[2])


def accum(stats, m, r, D, feat, stride, i):
    stats[_S * m] += r
    stats[_S * m + 1] += r * feat[i]
    stats[_S * m + 2] += r * feat[stride + i]


# (a 1 and two features per observation: the inverse Gaussian's tile hook, the same sums)
accum_tile = invgauss.accum_tile


def mstep(stats, params, M, D, n, reg):
    for m in range(M):
        s0 = stats[_S * m]
        s1 = stats[_S * m + 1]
        if not s0 >= MIN_COMPONENT_MASS:
            return DEGENERATE_COLLAPSE
        rate = s1 / s0
        if not (rate >= 0.0 and math.isfinite(rate)):
            return DEGENERATE_PARAM
        params[_P * m] = s0 / n
        params[_P * m + 1] = max(rate, MIN_POISSON_RATE)
    return 0


@njit(inline="always")
def subset_init(x, idx, out):
    n_comp, k = idx.shape
    for m in range(n_comp):
        s = 0.0
        for j in range(k):
            s += x[idx[m, j]]
        out[_P * m] = 1.0 / n_comp
        out[_P * m + 1] = max(s, 0.5) / k  # (a subset of zeros: half a count)


def min_obs(n_components: int, n_dims: int = 1) -> int:
    return 3 * n_components  # one random-subset start per component, without overlap


def check(values: np.ndarray, n_components: int, name: str = "Poisson") -> str | None:
    """Why ``values`` are not counts of the ``name`` family, or too few, or None."""
    problems = [basic_problems(values, min_obs(n_components))]
    finite = values[np.isfinite(values)]
    neg = int(np.count_nonzero(finite < 0))
    if neg:
        problems.append(f"{neg} of {len(values)} values {'is' if neg == 1 else 'are'} negative "
                        f"(the {name} family needs counts: 0, 1, 2, ...)")
    frac = int(np.count_nonzero((finite >= 0) & (finite != np.floor(finite))))
    if frac:
        problems.append(f"{frac} of {len(values)} values "
                        f"{'is not a whole number' if frac == 1 else 'are not whole numbers'} "
                        f"(the {name} family needs counts: 0, 1, 2, ...)")
    return "; ".join(p for p in problems if p) or None


def _xlogx(x: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x * np.log(np.where(x > 0, x, 1.0)), 0.0)


def features(values: np.ndarray) -> np.ndarray:
    return np.stack([values, _xlogx(values)])


def obs_const(values: np.ndarray) -> np.ndarray:
    from scipy.special import gammaln

    return _xlogx(values) - values - gammaln(values + 1.0)


def log_terms(values: np.ndarray, params: np.ndarray, n_components: int):
    """``log(w_l p_l(x_i)) = base - exp(logq)``, both of shape (n_obs, M): ``base = log w +
    x log x - x - log x!`` and ``q = rate - x + x log(x / rate) >= 0`` (centred, as the
    exact pass); a value that is not a count has probability 0.  ``params`` is one fit's
    (M P,) or one row per value (n_obs, M P)."""
    from scipy.special import gammaln

    x = np.asarray(values, dtype=np.float64)[:, None]
    p = np.asarray(params, dtype=np.float64)
    p = p.reshape(len(p) if p.ndim == 2 else 1, n_components, _P)
    w, rate = p[:, :, 0], p[:, :, 1]
    count = (x >= 0) & (x == np.floor(x))  # (elsewhere: probability 0)
    x = np.where(count, x, 0.0)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        base = np.log(w) + _xlogx(x) - x - gammaln(x + 1.0)
        safe = np.where(x > 0, x, 1.0)
        u = (rate - x) / safe
        q = np.where(x > 0, safe * (u - np.log1p(u)), rate)
        logq = np.log(np.maximum(q, 0.0))
    return np.where(count, base, -np.inf), np.where(count, logq, -np.inf)


def draw(records: np.ndarray, comp: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One count of each given component (``records`` rows weight, rate)."""
    return rng.poisson(records[comp, 1]).astype(np.float64)


def blocks(n_components: int, n_dims: int) -> tuple[Block, ...]:
    comp = (Axis("component", n_components),)
    return Block("weight", comp, "simplex"), Block("rate", comp, "positive")


def order_key(params: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    return params.reshape(len(params), n_components, _P)[:, :, 1]


def score(params: np.ndarray, stats: np.ndarray, n_components: int, n_dims: int) -> np.ndarray:
    """``Family.score``: per component ``S0 / w`` and ``S_x / rate - S0`` (the derivatives of
    ``coef``'s ``c . S``)."""
    n = len(params)
    p = params.reshape(n, n_components, _P)
    S = stats.reshape(n, n_components, _S)
    out = np.empty_like(p)
    out[..., 0] = S[..., 0] / p[..., 0]
    out[..., 1] = S[..., 1] / p[..., 1] - S[..., 0]
    return out.reshape(n, -1)


FAMILY = Family(
    name="poisson",
    ndim=1,
    per_component=lambda D: _P,
    n_coef=lambda M, D: _S * M,
    n_stats=lambda M, D: _S * M,
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
    outside=lambda v: (v < 0) | (v != np.floor(v)),
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
    floors=(("rate", MIN_POISSON_RATE),),
    discrete=True,
    linear_logdens=True,  # c0 + c1 x + c2 x log x: linear in the statistics (1, x, x log x)
)
