"""Random starts of the state-space families, each determined by (seed, dataset, start) alone.

Every draw is :func:`bulkem.fitting.starts.uniform` of (seed, dataset key,
start, counter), scaled by moments of the dataset's observed values:

* AR(p): partial autocorrelations ``k_1..k_p`` uniform in
  ``(-AR_PACF_MAX, AR_PACF_MAX)`` (counters ``0..p-1``), turned into
  coefficients by the Levinson step-up recursion, so every start is
  stationary; a share ``w`` (counter ``p``) of the mean square ``E[y^2]`` goes
  to the AR process (``state_var = w E[y^2] prod(1 - k_m^2)``), the rest to
  the observation noise.
* local level: ``E[(y_{t+1} - y_t)^2] = state_var + 2 obs_var`` (consecutive
  observed steps) is split by a share ``w`` (counter 0); ``level0`` is the
  mean of the series' first observed values plus ``u sqrt(state_var)``,
  ``u`` uniform in (-1, 1) (counter 1).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...fitting.starts import seed_key, uniform

AR_PACF_MAX = 0.9
SHARE_LO, SHARE_HI = 0.2, 0.8  # the share w of the variance given to the state


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


@njit(parallel=True)
def _draw_ar(mom, fit_ds, fit_start, keys, seed, p, out):
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        key, start = keys[d], fit_start[f]
        a = np.zeros(p)
        tmp = np.zeros(p)
        scale = 1.0
        for m in range(1, p + 1):  # step-up: AR(m) from AR(m - 1) and k_m
            k = AR_PACF_MAX * (2.0 * uniform(seed, key, start, m - 1) - 1.0)
            for i in range(m - 1):
                tmp[i] = a[i] - k * a[m - 2 - i]
            for i in range(m - 1):
                a[i] = tmp[i]
            a[m - 1] = k
            scale *= 1.0 - k * k
        w = SHARE_LO + (SHARE_HI - SHARE_LO) * uniform(seed, key, start, p)
        for i in range(p):
            out[f, i] = a[i]
        out[f, p] = w * mom[d, 0] * scale
        out[f, p + 1] = (1.0 - w) * mom[d, 0]


@njit(parallel=True)
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


def draw(model, data, keys, seed, fit_ds, fit_start, out, mom=None) -> None:
    """Random starts of fits (valid-dataset index, start number) into ``out`` (n, n_params).

    ``mom``: :func:`moments` of the batch, if computed already.
    """
    if mom is None:
        mom = moments(data.values, data.units, data.groups)
    sk = seed_key(seed)
    if model.family == "ar":
        _draw_ar(mom, fit_ds, fit_start, keys, sk, model.order, out)
    else:
        _draw_level(mom, fit_ds, fit_start, keys, sk, out)
