"""Random starts of the state-space families, each determined by (seed, dataset, start) alone.

Every draw is :func:`bulkem.fitting.starts.uniform` of (seed, dataset key,
start, counter), scaled by moments of the dataset's observed values:

* AR(p): from the dataset's sample autocovariances ``c_0..c_p`` (pooled
  over its series, pairs of observed steps).  A share ``w`` of ``c_0``
  (counter 0) goes to the AR process, the rest to the observation noise
  (which adds to lag 0 only); the Durbin-Levinson recursion on ``(w c_0,
  c_1, ..., c_p)`` gives partial autocorrelations ``k_1..k_p`` (``w`` moved
  halfway to 1 while they are not all inside ``(-AR_PACF_MAX,
  AR_PACF_MAX)``; at ``w = 1`` they are), each then moved by up to
  ``AR_PACF_JITTER`` (counters ``1..p``) and clipped; the Levinson step-up
  turns them into coefficients, so every start is stationary, and
  ``state_var = w c_0 prod(1 - k_m^2)``, ``obs_var = (1 - w) c_0``.
* local level: ``E[(y_{t+1} - y_t)^2] = state_var + 2 obs_var`` (consecutive
  observed steps) is split by a share ``w`` (counter 0); ``level0`` is the
  mean of the series' first observed values plus ``u sqrt(state_var)``,
  ``u`` uniform in (-1, 1) (counter 1).  With the diffuse prior, the same
  variances and no ``level0``.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...fitting.starts import seed_key, uniform

AR_PACF_MAX = 0.95
AR_PACF_JITTER = 0.2
SHARE_LO, SHARE_HI = 0.2, 0.8  # the share w of the variance given to the state
MIN_SHARE_GAP = 1e-3  # the share given to the observation noise is at least this


@njit(parallel=True, cache=True)
def moments(y, units, groups):
    """Per dataset: mean square, mean squared step, mean of the first observed values, variance.

    Missing (NaN) steps are skipped; a step counts where both ends are observed.
    """
    n = len(groups) - 1
    out = np.zeros((n, 4))
    for d in prange(n):
        s2 = 0.0
        s1 = 0.0
        cnt = 0
        ds = 0.0
        nd = 0
        first = 0.0
        nf = 0
        for u in range(groups[d], groups[d + 1]):
            seen = False
            prev = np.nan
            for t in range(units[u], units[u + 1]):
                v = y[t]
                if v != v:
                    prev = np.nan
                    continue
                if not seen:
                    first += v
                    nf += 1
                    seen = True
                s1 += v
                s2 += v * v
                cnt += 1
                if prev == prev:
                    ds += (v - prev) * (v - prev)
                    nd += 1
                prev = v
        mean = s1 / max(cnt, 1)
        out[d, 0] = s2 / max(cnt, 1)
        out[d, 1] = ds / nd if nd else np.nan
        out[d, 2] = first / max(nf, 1)
        out[d, 3] = max(s2 / max(cnt, 1) - mean * mean, 0.0)
    return out


@njit(parallel=True, cache=True)
def autocovariances(y, units, groups, p):
    """Per dataset, ``c_k = sum y_t y_{t+k} / n_k`` for k = 0..p over pairs of observed steps."""
    n = len(groups) - 1
    out = np.zeros((n, p + 1))
    for d in prange(n):
        cnt = np.zeros(p + 1)
        for u in range(groups[d], groups[d + 1]):
            lo, hi = units[u], units[u + 1]
            for t in range(lo, hi):
                if y[t] != y[t]:
                    continue
                for k in range(min(p, hi - 1 - t) + 1):
                    v = y[t + k]
                    if v == v:
                        out[d, k] += y[t] * v
                        cnt[k] += 1.0
        for k in range(p + 1):
            out[d, k] = out[d, k] / cnt[k] if cnt[k] > 0 else 0.0
    return out


@njit(inline="always")
def _pacf(c, w, p, a, tmp, k):
    """Durbin-Levinson on (w c_0, c_1, ..., c_p): partial autocorrelations into k; all inside?"""
    v = w * c[0]
    ok = v > 0.0
    for m in range(1, p + 1):
        if not ok:
            k[m - 1] = 0.0
            continue
        s = c[m]
        for i in range(m - 1):
            s -= a[i] * c[m - 1 - i]
        km = s / v
        k[m - 1] = km
        ok = abs(km) < AR_PACF_MAX
        for i in range(m - 1):
            tmp[i] = a[i] - km * a[m - 2 - i]
        for i in range(m - 1):
            a[i] = tmp[i]
        a[m - 1] = km
        v *= 1.0 - km * km
    return ok


@njit(parallel=True, cache=True)
def _draw_ar(acov, fit_ds, fit_start, keys, seed, p, out):
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        key, start = keys[d], fit_start[f]
        c = acov[d]
        a = np.zeros(p)
        tmp = np.zeros(p)
        k = np.zeros(p)
        w = SHARE_LO + (SHARE_HI - SHARE_LO) * uniform(seed, key, start, 0)
        for _ in range(60):
            if _pacf(c, w, p, a, tmp, k):
                break
            w = 0.5 * (w + 1.0)
        w = min(w, 1.0 - MIN_SHARE_GAP)
        scale = 1.0
        for m in range(1, p + 1):  # jitter, then step-up: AR(m) from AR(m - 1) and k_m
            km = k[m - 1] + AR_PACF_JITTER * (2.0 * uniform(seed, key, start, m) - 1.0)
            km = min(max(km, -AR_PACF_MAX), AR_PACF_MAX)
            for i in range(m - 1):
                tmp[i] = a[i] - km * a[m - 2 - i]
            for i in range(m - 1):
                a[i] = tmp[i]
            a[m - 1] = km
            scale *= 1.0 - km * km
        for i in range(p):
            out[f, i] = a[i]
        out[f, p] = w * c[0] * scale
        out[f, p + 1] = (1.0 - w) * c[0]


@njit(parallel=True, cache=True)
def _draw_level(mom, fit_ds, fit_start, keys, seed, out):
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        key, start = keys[d], fit_start[f]
        vd = mom[d, 1]
        if not vd > 0.0:  # no two consecutive observed steps (or no movement): the variance
            vd = 2.0 * mom[d, 3]
        w = SHARE_LO + (SHARE_HI - SHARE_LO) * uniform(seed, key, start, 0)
        u = 2.0 * uniform(seed, key, start, 1) - 1.0
        q = w * vd
        out[f, 0] = mom[d, 2] + u * np.sqrt(q)
        out[f, 1] = q
        out[f, 2] = (1.0 - w) * vd / 2.0


def dataset_moments(model, data) -> np.ndarray:
    """What the draws need of every dataset: autocovariances (AR) or :func:`moments`."""
    if model.family == "ar":
        return autocovariances(data.values, data.units, data.groups, model.order)
    return moments(data.values, data.units, data.groups)


def draw(model, data, keys, seed, fit_ds, fit_start, out, mom=None) -> None:
    """Random starts of fits (valid-dataset index, start number) into ``out`` (n, n_params).

    ``mom``: :func:`dataset_moments` of the batch, if computed already.
    """
    if mom is None:
        mom = dataset_moments(model, data)
    sk = seed_key(seed)
    if model.family == "ar":
        _draw_ar(mom, fit_ds, fit_start, keys, sk, model.order, out)
    elif model.diffuse:  # the same variances as the fitted prior's starts, no level0
        full = np.empty((len(fit_ds), 3))
        _draw_level(mom, fit_ds, fit_start, keys, sk, full)
        out[:] = full[:, 1:]
    else:
        _draw_level(mom, fit_ds, fit_start, keys, sk, out)
