"""Compiled checks of large datasets (imported on first use: Numba is not needed before)."""

from __future__ import annotations

import math

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
