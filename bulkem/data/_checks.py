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


@njit(cache=True)
def group_order(codes, n_groups):
    """The stable order that groups rows by ``codes`` (0 .. n_groups - 1; -1: left out, at
    the front): a counting sort, one pass to count and one to place (``np.argsort(codes,
    kind="stable")`` is a merge sort, 3 s for 20M rows)."""
    start = np.zeros(n_groups + 2, np.int64)
    for c in codes:
        start[c + 2] += 1
    for g in range(1, n_groups + 2):
        start[g] += start[g - 1]
    order = np.empty(len(codes), np.int64)
    for i in range(len(codes)):
        c = codes[i] + 1
        order[start[c]] = i
        start[c] += 1
    return order
