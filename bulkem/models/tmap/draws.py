"""Random starts of TMAPs as in section 4.1 of the paper, each determined by (seed, trace, start).

* alpha: ``R`` uniform numbers divided by their sum;
* each row of Pi: ``R`` uniform numbers divided by their sum, times
  ``1 - 1/Kbar`` (``Kbar`` the trace's mean run length), so that every
  branch starts with the exit probability ``1/Kbar``;
* ``lambda_i = r_i / Tbar`` (``Tbar`` the mean inter-arrival time), scaled
  down by ``60 / (x_max lambda_max)`` when ``x_max lambda_max > 60``
  (``START_MAX_RATE_X``, the paper's margin from float32's
  ``exp`` underflow; the engines work in log space and do not need it, but
  the starts are the paper's).

Every draw is the counter-based generator of :mod:`bulkem.fitting.starts`
keyed by (seed, trace key, start, counter).  The trace key is a hash of
the trace's run lengths, not of its values: the random parts (alpha and Pi)
are scale-free, and the rates follow the data's scale, so a trace multiplied
by a constant gets the same starts with the rates divided by it (two traces
with the same run lengths share their alpha and Pi draws).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from ...fitting.starts import dataset_keys, seed_key, uniform

# Random starts (the paper's section 4.1): rates are scaled down so that x_max * lambda_max
# is at most this (the paper's margin from float32's exp underflow at about 88).
START_MAX_RATE_X = 60.0

def trace_keys(units: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """A 64-bit key per trace, hashed from its run lengths ``(n_traces,)``."""
    lengths = np.diff(units).astype(np.float64)
    return dataset_keys(lengths, groups)


@njit(parallel=True, cache=True)
def _draw(fit_ds, fit_start, keys, seed, orders, kbar, tbar, xmax, max_rx, out):
    R = len(orders)
    PT = R
    PE = R + R * R
    for f in prange(len(fit_ds)):
        d = fit_ds[f]
        key, start = keys[d], fit_start[f]
        s = 0.0
        for i in range(R):
            u = uniform(seed, key, start, i)
            out[f, i] = u
            s += u
        for i in range(R):
            out[f, i] /= s
        keep = 1.0 - 1.0 / kbar[d]
        for i in range(R):
            s = 0.0
            for j in range(R):
                u = uniform(seed, key, start, R * (i + 1) + j)
                out[f, PT + i * R + j] = u
                s += u
            for j in range(R):
                out[f, PT + i * R + j] *= keep / s
        top = 0.0
        for i in range(R):
            lam = orders[i] / tbar[d]
            out[f, PE + i] = lam
            top = max(top, lam)
        if xmax[d] * top > max_rx:
            scale = max_rx / (xmax[d] * top)
            for i in range(R):
                out[f, PE + i] *= scale


def draw(orders: tuple[int, ...], data, seed: int, fit_ds: np.ndarray, fit_start: np.ndarray,
         out: np.ndarray) -> None:
    """Random starts of fits (valid-trace index, start number) into ``out`` (n, n_params)."""
    groups, vo = data.groups, data.value_offsets
    n_runs = np.diff(groups)
    n_values = np.diff(vo)
    stats = data.value_stats()  # (every trace's values on every core, once a fit)
    sums, xmax = stats[:, 0], np.maximum(stats[:, 1], 0.0)
    keys = trace_keys(data.units, groups)
    _draw(fit_ds, fit_start, keys, seed_key(seed), np.asarray(orders, np.float64),
          n_values / n_runs, sums / n_values, xmax, START_MAX_RATE_X, out)
