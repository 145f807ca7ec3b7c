"""Compiled checks of large datasets (imported on first use: Numba is not needed before)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange


@njit(parallel=True, cache=True)
def count_nonfinite(flat):
    """How many of the values of the 1-D array ``flat`` are NaN or infinite."""
    block = 1 << 16
    n = len(flat)
    bad = 0
    for b in prange((n + block - 1) // block):
        k = 0
        for i in range(b * block, min(n, (b + 1) * block)):
            k += 0 if math.isfinite(flat[i]) else 1
        bad += k
    return bad


@njit(parallel=True, cache=True)
def nonfinite_datasets(flat, starts):
    """Per dataset ``d``: whether any of ``flat[starts[d]:starts[d + 1]]`` is NaN or
    infinite (the datasets on every core; each scan stops at its first)."""
    n = len(starts) - 1
    out = np.zeros(n, np.bool_)
    for d in prange(n):
        for i in range(starts[d], starts[d + 1]):
            if not math.isfinite(flat[i]):
                out[d] = True
                break
    return out
