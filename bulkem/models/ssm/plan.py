"""A batch of series as the engines take it, how the scan cuts it into chunks, and the totals.

The time-parallel filter (:mod:`.scan`) runs as a blocked scan with levels:

* level 0 cuts each series into chunks of ``chunk0`` steps; a thread (or CPU
  task) builds the element of its chunk by the conditional filter;
* level ``l >= 1`` cuts the elements of each series at level ``l`` (one per
  chunk of level ``l - 1``) into chunks of ``chunk`` elements and combines
  each chunk's elements in order, until every series has one chunk (the top);
* down the levels, each chunk gets its exclusive prefix (the element of
  everything before it in its series; the first chunk of a series: none)
  and hands each of its elements theirs;
* at level 0, each chunk runs the ordinary Kalman filter over its steps,
  started from the filtered law that its prefix holds (or the prior), and
  sums its log-likelihood terms; a series' log-likelihood is the sum of its
  chunks', in chunk order.

The element of the last chunk of a series is never needed (nothing comes
after it), so it is never computed, at any level.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from .statespace import ModelArrays


class LoglikOut(NamedTuple):
    """Per valid series: log-likelihood, observed steps, and the failing step or -1."""

    loglik: np.ndarray
    n_obs: np.ndarray
    fail: np.ndarray


@dataclass
class SeriesBatch:
    """Valid series packed for the engines.

    Attributes
    ----------
    y : ndarray of shape (n_steps * ny,)
        The observations of every series, row after row, in the compute
        dtype; NaN marks a missing row.
    offsets : ndarray of shape (n_series + 1,)
        Series ``s`` holds rows ``offsets[s] .. offsets[s + 1] - 1``.
    model_idx : ndarray of shape (n_series,)
        Row of ``models`` that each series uses.
    models : ModelArrays
        In the compute dtype.
    has_missing : ndarray of shape (n_series,)
        Whether a series has a missing row.
    """

    y: np.ndarray
    offsets: np.ndarray
    model_idx: np.ndarray
    models: ModelArrays
    has_missing: np.ndarray

    @property
    def n_series(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)


@dataclass
class Level:
    """The chunks of one level of the scan.

    Attributes
    ----------
    lo, hi : ndarray of shape (n_chunks,)
        Chunk ``c`` covers elements (level 0: rows) ``lo[c] .. hi[c] - 1``.
    first, last : ndarray of shape (n_chunks,), int8
        Whether the chunk is the first / last of its series.
    series : ndarray of shape (n_chunks,)
        The chunk's series.
    """

    lo: np.ndarray
    hi: np.ndarray
    first: np.ndarray
    last: np.ndarray
    series: np.ndarray

    @property
    def n_chunks(self) -> int:
        return len(self.lo)


def _chunks(offsets: np.ndarray, size: int, first: int = 0) -> tuple[Level, np.ndarray]:
    """Cut each series' range of ``offsets`` into chunks of ``size`` (the first of a series:
    ``max(first, size)``); also the next offsets."""
    first = max(int(first), size)
    lengths = np.diff(offsets)
    # chunks per series (0 for an empty one)
    per = np.where(lengths > 0, 1 + -(-np.maximum(lengths - first, 0) // size), 0)
    nxt = np.zeros(len(per) + 1, dtype=np.int64)
    np.cumsum(per, out=nxt[1:])
    series = np.repeat(np.arange(len(per), dtype=np.int64), per)
    k = np.arange(nxt[-1], dtype=np.int64) - nxt[series]  # chunk's position in its series
    lo = offsets[series] + np.where(k > 0, first + (k - 1) * size, 0)
    hi = np.minimum(offsets[series] + first + k * size, offsets[series + 1])
    is_first = (k == 0).astype(np.int8)
    last = (k == per[series] - 1).astype(np.int8)
    return Level(lo, hi, is_first, last, series), nxt


def plan_levels(offsets: np.ndarray, chunk0: int, chunk: int, first0: int = 0) -> list[Level]:
    """The levels of the blocked scan of the series at ``offsets`` (see the module docstring).

    Parameters
    ----------
    offsets : ndarray of shape (n_series + 1,)
    chunk0 : int
        Time steps per chunk at level 0 (>= 1).
    chunk : int
        Elements per chunk at the higher levels (>= 2).
    first0 : int, optional
        Time steps of each series' first level-0 chunk, if more than
        ``chunk0`` (the steady-state scan's transient steps).

    Returns
    -------
    list of Level
        Level 0 first; the last level has one chunk per series.  Level
        ``l + 1``'s element ``c`` is chunk ``c`` of level ``l``.
    """
    if chunk0 < 1 or chunk < 2:
        raise ValueError(f"scan chunks of {chunk0} steps and {chunk} elements; expected >= 1 "
                         "and >= 2.")
    levels = []
    size = chunk0
    offsets = np.asarray(offsets, dtype=np.int64)
    while True:
        level, offsets = _chunks(offsets, size, first0 if not levels else 0)
        levels.append(level)
        if np.all(np.diff(offsets) <= 1):
            return levels
        size = chunk


def chunk0_for(total_steps: int, minimum: int, target_chunks: int) -> int:
    """Level-0 chunk length: at least ``minimum``, and about ``target_chunks`` chunks in all."""
    return max(int(minimum), -(-int(total_steps) // max(int(target_chunks), 1)))


# Values from which series_counts runs over the series on every core instead of first
# summing them in one thread (100,000 series x 1,000 steps: the sum alone ~50 ms).
PARALLEL_COUNT_MIN = 1 << 20


@njit(cache=True, nogil=True, parallel=True, fastmath={"reassoc"})
def _series_counts(values, offsets, n_missing, n_inf):
    flat = values.reshape(-1)
    ny = values.shape[1]
    for s in prange(len(offsets) - 1):
        acc = 0.0  # a finite sum: no NaN, no infinity (a vectorised pass; "reassoc" only)
        for i in range(offsets[s] * ny, offsets[s + 1] * ny):
            acc += flat[i]
        if acc - acc == 0.0:
            continue
        miss = 0
        inf = 0
        for t in range(offsets[s], offsets[s + 1]):
            row_nan = False
            for a in range(ny):
                v = values[t, a]
                if v != v:
                    row_nan = True
                elif v == np.inf or v == -np.inf:
                    inf += 1
            if row_nan:
                miss += 1
        n_missing[s] = miss
        n_inf[s] = inf


def series_counts(values: np.ndarray, offsets: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per series: rows holding a NaN (missing), and infinite values; one pass over ``values``.

    ``values`` has shape (n_rows, dim_obs); series ``s`` is rows ``offsets[s] .. offsets[s+1]-1``.
    """
    n = len(offsets) - 1
    n_missing = np.zeros(n, dtype=np.int64)
    n_inf = np.zeros(n, dtype=np.int64)
    if n < 2 or values.size < PARALLEL_COUNT_MIN:  # else the series in parallel, one pass
        with np.errstate(invalid="ignore", over="ignore"):  # (R's NA is a signalling NaN)
            if np.isfinite(values.sum()):  # one vectorised pass: no NaN, no infinity anywhere
                return n_missing, n_inf
    values = np.ascontiguousarray(values)
    _series_counts(values, np.asarray(offsets, dtype=np.int64), n_missing, n_inf)
    return n_missing, n_inf


@njit(cache=True, nogil=True)
def _segment_sums(x, offsets, out):
    for s in range(len(out)):
        acc = 0.0
        for i in range(offsets[s], offsets[s + 1]):
            acc += x[i]
        out[s] = acc


def segment_sums(x: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """Sums of ``x`` over consecutive segments, each added left to right (a fixed order)."""
    out = np.zeros(len(offsets) - 1)
    _segment_sums(np.asarray(x, dtype=np.float64), np.asarray(offsets, dtype=np.int64), out)
    return out


def shared_series(batch: SeriesBatch, shared: bool | None, min_series: int) -> np.ndarray:
    """The series that may share one covariance recursion (one model, no missing rows)."""
    if shared is False or len(batch.models.F) != 1:
        return np.zeros(0, dtype=np.int64)
    sel = np.flatnonzero(~batch.has_missing & (batch.lengths > 0))
    if shared is None and len(sel) < min_series:
        return np.zeros(0, dtype=np.int64)
    return sel.astype(np.int64)


def subset(batch: SeriesBatch, rows: np.ndarray) -> SeriesBatch:
    """The series ``rows`` of a batch, packed anew."""
    ny = batch.models.ny
    lengths = batch.lengths[rows]
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    pieces = [batch.y[batch.offsets[s] * ny:batch.offsets[s + 1] * ny] for s in rows]
    y = np.concatenate(pieces) if pieces else batch.y[:0]
    return SeriesBatch(np.ascontiguousarray(y), offsets, batch.model_idx[rows], batch.models,
                       batch.has_missing[rows])


def gather(batch: SeriesBatch, lev, ll_c, n_c, fail_c) -> LoglikOut:
    """Per-series totals of per-chunk results, in chunk order; the first failing step."""
    starts = np.zeros(batch.n_series + 1, dtype=np.int64)
    np.cumsum(np.bincount(lev.series, minlength=batch.n_series), out=starts[1:])
    ll = segment_sums(ll_c, starts)
    nobs = np.bincount(lev.series, weights=n_c, minlength=batch.n_series)
    fail = np.full(batch.n_series, -1, dtype=np.int64)
    bad = np.flatnonzero(fail_c >= 0)
    for c in bad[::-1]:  # the earliest failing chunk of a series wins
        s = lev.series[c]
        fail[s] = fail_c[c] - batch.offsets[s]
    return LoglikOut(ll, np.rint(nobs).astype(np.int64), fail)


def step_chunks(offsets: np.ndarray, size: int) -> Level:
    """Each series' steps cut into chunks of ``size``: the order in which step terms are summed."""
    return _chunks(np.asarray(offsets, dtype=np.int64), size)[0]


@njit(cache=True, nogil=True)
def _chunk_sums(ll_t, obs_t, fail_t, lo, hi, ll_c, n_c, fail_c):
    for c in range(len(lo)):
        acc = 0.0
        n = 0
        f = -1
        for t in range(lo[c], hi[c]):
            acc += ll_t[t]
            n += obs_t[t]
            if f < 0 and fail_t[t]:
                f = t
        ll_c[c] = acc
        n_c[c] = n
        fail_c[c] = f


def chunk_sums(lev: Level, ll_t, obs_t, fail_t) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per chunk of ``lev``: the sum of the step terms in step order, observed steps, first
    failing step (or -1); what the GPU engine computes on the device."""
    n = lev.n_chunks
    ll_c, n_c, fail_c = np.zeros(n), np.zeros(n, np.int64), np.full(n, -1, np.int64)
    _chunk_sums(np.asarray(ll_t, np.float64), np.asarray(obs_t, np.int64),
                np.asarray(fail_t, np.int8), lev.lo, lev.hi, ll_c, n_c, fail_c)
    return ll_c, n_c, fail_c


def steady_matrices(A: np.ndarray, chunk0: int, chunk: int, n_levels: int, dtype) -> np.ndarray:
    """The matrix of the steady-state scan's elements, level by level (see ``scan.py``).

    Row ``l`` (``l >= 1``, row-major ``nx * nx``) is the matrix of every element of
    level ``l`` but a series' first: ``A`` to the power of the steps of a level-0
    chunk (``chunk0``), times ``chunk`` per level above.  Powers are taken in
    float64 by repeated squaring, then cast to ``dtype``; row 0 is unused.
    """
    A = np.asarray(A, dtype=np.float64)
    out = np.zeros((max(n_levels, 1), A.size))
    M = np.linalg.matrix_power(A, int(chunk0))
    for li in range(1, n_levels):
        out[li] = M.reshape(-1)
        M = np.linalg.matrix_power(M, int(chunk))
    return np.ascontiguousarray(out, dtype=dtype)


def not_finite(loglik: float, y: np.ndarray, dtype: str) -> str:
    """Why a series' log-likelihood came out -inf, +inf or NaN, and what to do."""
    big = float(np.nanmax(np.abs(y)))
    head = ("the filter's arithmetic overflowed (the log-likelihood is NaN)" if np.isnan(loglik)
            else f"the log-likelihood is {loglik}: beyond the range of {dtype} numbers")
    hint = ", or use dtype='float64'" if dtype != "float64" else ""
    return (f"{head}; the series (largest |y| = {big:.3g}) lies far outside the model's scale "
            "(its squared innovations overflow). Rescale the series and the model together "
            "(y / c with m0 / c and every covariance / c^2: the log-likelihood is then that "
            f"of y plus n_obs * dim_obs * log(c)){hint}.")


def not_positive_definite(step: int) -> str:
    """Why the filter stopped at a step: the innovation covariance was not positive definite."""
    return (f"the innovation covariance H P H^T + R is not positive definite at time step "
            f"{step} (0-based); is R singular where the state is known exactly?")
