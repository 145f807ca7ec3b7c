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


SEGMENT_BLOCK = 1 << 14  # values per task of segment_stats (fixed: the sums' order with it)


@njit(parallel=True, cache=True)
def _block_stats(x, lo, hi, out):
    for b in prange(len(lo)):
        s = 0.0
        top = -math.inf
        logs = 0.0
        for i in range(lo[b], hi[b]):
            v = x[i]
            s += v
            top = max(top, v)
            logs += math.log(v)
        out[b, 0] = s
        out[b, 1] = top
        out[b, 2] = logs


def segment_stats(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Per segment ``d`` of ``x[offsets[d]:offsets[d + 1]]``: the sum, the largest value and the
    sum of the logs, ``(n_segments, 3)``, in one pass on every core.

    Each segment is summed in blocks of :data:`SEGMENT_BLOCK` values, then block by block
    in order: the same bits whatever the number of threads.  Values must be positive (the
    logs; a TMAP trace's inter-arrival times).
    """
    offsets = np.asarray(offsets, dtype=np.int64)
    n_seg = len(offsets) - 1
    n_blocks = -(-np.diff(offsets) // SEGMENT_BLOCK)
    first = np.zeros(n_seg + 1, dtype=np.int64)
    np.cumsum(n_blocks, out=first[1:])
    seg = np.repeat(np.arange(n_seg), n_blocks)
    lo = offsets[seg] + (np.arange(first[-1]) - first[seg]) * SEGMENT_BLOCK
    hi = np.minimum(lo + SEGMENT_BLOCK, offsets[seg + 1])
    blocks = np.empty((len(lo), 3))
    _block_stats(np.ascontiguousarray(x, dtype=np.float64).reshape(-1), lo, hi, blocks)
    out = np.empty((n_seg, 3))
    out[:] = (0.0, -np.inf, 0.0)  # (an empty segment)
    full = n_blocks > 0
    if full.any():
        at = first[:-1][full]
        out[full, 0] = np.add.reduceat(blocks[:, 0], at)
        out[full, 1] = np.maximum.reduceat(blocks[:, 1], at)
        out[full, 2] = np.add.reduceat(blocks[:, 2], at)
    return out


@njit(parallel=True, cache=True)
def key_starts(a, b):
    """The rows where ``(a, b)`` differs from the row before, row 0 first (two passes on every
    core: count per block, then write): where the units of a long frame start."""
    n = len(a)
    block = 1 << 16
    nb = (n + block - 1) // block
    cnt = np.zeros(nb + 1, np.int64)
    for k in prange(nb):
        c = 0
        for i in range(max(k * block, 1), min(n, (k + 1) * block)):
            c += (a[i] != a[i - 1]) | (b[i] != b[i - 1])  # (no branch: vectorised)
        cnt[k + 1] = c
    cnt[0] = 1 if n else 0
    for k in range(nb):
        cnt[k + 1] += cnt[k]
    out = np.empty(cnt[nb], np.int64)
    if n:
        out[0] = 0
    for k in prange(nb):
        j = cnt[k]
        for i in range(max(k * block, 1), min(n, (k + 1) * block)):
            if (a[i] != a[i - 1]) | (b[i] != b[i - 1]):
                out[j] = i
                j += 1
    return out
