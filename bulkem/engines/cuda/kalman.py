"""CUDA engine of the Kalman likelihoods: one thread per series, chunk or time step.

The per-step math is :mod:`bulkem.models.ssm.kalman` (and ``scan``,
``splash``) compiled as CUDA device functions (force-inlined on hardware);
this module holds the kernels that loop and the host side.

* ``exact``: a thread per series filters it from start to end, its state
  and covariance in local arrays of compile-time size (registers where
  they fit), as cuML's batched Kalman kernel.  Series of one model without
  missing values share the covariance recursion, computed once on the host
  (it does not depend on the data); each thread then runs the mean
  recursion only, reading its series where it lies (a time-major copy
  first, for neighbouring addresses across a warp, was no faster on an
  H200 and cost a copy).
* ``scan``: the blocked scan of :mod:`bulkem.models.ssm.plan`, a kernel
  launch per level up and down.  A prefix's ``A, eta, J`` are 0, so the
  down sweep computes and stores its ``(b, C)`` alone (``combine_prefix``).
  Few states (below ``Tuning.kalman_cuda_scan_warp_min_nx``): a thread per
  chunk, the elements in global memory field by field.  More: above level 0
  a warp per chunk (:mod:`bulkem.engines.cuda.scan_warp`), level 0 a thread
  per chunk with its largest matrices in shared memory.  As for ``splash``,
  the levels, chunk tables, buffers and prepared launches are made once per
  device batch; a call is the launches and one copy back of the level-0
  chunks' results, three rows (``scan_final`` keeps ``scan_up0``'s failing
  step where it has none), which the host adds in chunk order (the same
  bits).  A batch of one model without missing rows runs the steady-state
  scan instead (``scan.py``): a thread per chunk at every level, elements of
  ``nx`` values field by field, one matrix per level (one series of 10^6
  steps on an H100, full scan -> steady-state scan: RW 2-D 0.45 -> 0.23 ms,
  AR(10) 4.51 -> 0.33 ms).
* ``splash``: a thread per time step, in one kernel launch: a block per
  chunk (or a few) of ``Tuning.kalman_splash_sum_chunk`` steps adds its
  chunk's terms in step order from shared memory, and only the chunk sums
  come back.  What does not change between calls on a device batch (chunk
  table, buffers, the shared covariance recursion, the marshalled launch) is
  made once, since the host side is most of a call's cost otherwise (one
  series of 10^6 steps on an H100: 61 driver calls, 2.1 ms): a call is one
  launch and one copy back.

Importing this module never fails for lack of a GPU (the CUDA engine's
module sets up numba.cuda, with its numpy shim and simulator shims).
"""

from __future__ import annotations

import threading
from typing import NamedTuple

import numpy as np
from numba import float32, float64, int8, njit

from ...models.ssm.kalman import make_kalman
from ...models.ssm.plan import (
    LoglikOut,
    SeriesBatch,
    chunk0_for,
    plan_levels,
    shared_series,
    steady_matrices,
    subset,
)
from ...models.ssm.scan import element_size, make_scan, make_steady_scan
from ...models.ssm.splash import make_splash
from ...tuning import DEFAULT, Tuning
from . import available, cuda  # numba.cuda, after the CUDA engine's shims
from .buffers import upload
from .compat import device

__all__ = ["available", "exact", "scan", "splash", "to_device"]

# The simulator's jit takes no forceinline; on hardware, inlining lets small
# local arrays live in registers.


def _grid(n: int, threads: int) -> tuple[int, int]:
    """Blocks and threads per block (``Tuning.kalman_cuda_threads``) for ``n`` threads."""
    return max(1, -(-n // threads)), threads


_compiled: dict = {}


def _math(nx: int, ny: int, kind: int, dtype):
    """The per-step device functions of one (dimensions, structure, dtype): Kalman steps,
    scan elements, splash points and steady-state scan chunks, built once per process."""
    key = ("math", nx, ny, kind, np.dtype(dtype).name)
    if key not in _compiled:
        dt = np.dtype(dtype).type
        steps = make_kalman(nx, ny, kind, dt, device)
        _compiled[key] = (steps, make_scan(nx, ny, kind, dt, device, steps),
                          make_splash(nx, ny, dt, device, steps),
                          make_steady_scan(nx, dt, device, steps))
    return _compiled[key]


def _programs(nx: int, ny: int, kind: int, dtype) -> dict:
    """The kernels for one (dimensions, structure, dtype), compiled once per process."""
    key = (nx, ny, kind, np.dtype(dtype).name)
    if key in _compiled:
        return _compiled[key]
    dt = np.dtype(dtype).type
    cdt = float32 if dt == np.float32 else float64
    steps, sc, _, _ = _math(nx, ny, kind, dt)
    NX, NXX, NXY, NYY, NY = nx, nx * nx, nx * ny, ny * ny, ny
    set_prior, predict, filter_range, filter_mean_range = (
        steps.set_prior, steps.predict, steps.filter_range, steps.filter_mean_range)
    combine, combine_prefix, load, store, chunk_element = (
        sc.combine, sc.combine_prefix, sc.load, sc.store, sc.chunk_element)

    @cuda.jit
    def exact(y, offsets, midx, F, H, Q, R, m0, P0, ll, nobs, fail):
        s = cuda.grid(1)
        if s >= offsets.shape[0] - 1:
            return
        k = midx[s]
        m = cuda.local.array(NX, cdt)
        P = cuda.local.array(NXX, cdt)
        T = cuda.local.array(NXX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        set_prior(m0[k], P0[k], m, P)
        a, n, f = filter_range(F[k], H[k], Q[k], R[k], y, offsets[s], offsets[s + 1] - offsets[s],
                               1, m, P, T, U, L, e)
        ll[s] = a
        nobs[s] = n
        fail[s] = f

    @cuda.jit
    def exact_shared(y, start, length, stride, out, F, H, m0, Ws, Ls, logdets, ll, nobs):
        j = cuda.grid(1)
        if j >= start.shape[0]:
            return
        m = cuda.local.array(NX, cdt)
        t = cuda.local.array(NX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        for i in range(NX):
            m[i] = m0[i]
        a, n = filter_mean_range(F, H, y, start[j], length[j], stride, 0, length[j], m, t, U,
                                 L, e, Ws, Ls, logdets)
        ll[out[j]] = a
        nobs[out[j]] = n

    @cuda.jit
    def scan_up0(y, lo, hi, first, last, series, midx, F, H, Q, R, m0, P0, E, fail):
        c = cuda.grid(1)
        if c >= lo.shape[0]:
            return
        fail[c] = -1
        if last[c]:
            return
        k = midx[series[c]]
        A = cuda.local.array(NXX, cdt)
        b = cuda.local.array(NX, cdt)
        C = cuda.local.array(NXX, cdt)
        eta = cuda.local.array(NX, cdt)
        J = cuda.local.array(NXX, cdt)
        T = cuda.local.array(NXX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        G = cuda.local.array(NXY, cdt)
        f = chunk_element(F[k], H[k], Q[k], R[k], m0[k], P0[k], y, lo[c], hi[c] - lo[c],
                          first[c] != 0, A, b, C, eta, J, T, U, L, e, G)
        if f >= 0:
            fail[c] = lo[c] + f
        store(E, c, A, b, C, eta, J)

    @cuda.jit
    def scan_up(E, lo, hi, last, E_next):
        c = cuda.grid(1)
        if c >= lo.shape[0] or last[c]:
            return
        A1 = cuda.local.array(NXX, cdt)
        b1 = cuda.local.array(NX, cdt)
        C1 = cuda.local.array(NXX, cdt)
        eta1 = cuda.local.array(NX, cdt)
        J1 = cuda.local.array(NXX, cdt)
        A2 = cuda.local.array(NXX, cdt)
        b2 = cuda.local.array(NX, cdt)
        C2 = cuda.local.array(NXX, cdt)
        eta2 = cuda.local.array(NX, cdt)
        J2 = cuda.local.array(NXX, cdt)
        D = cuda.local.array(NXX, cdt)
        Z1 = cuda.local.array(NXX, cdt)
        Z2 = cuda.local.array(NXX, cdt)
        T = cuda.local.array(NXX, cdt)
        z = cuda.local.array(NX, cdt)
        w = cuda.local.array(NX, cdt)
        load(E, lo[c], A1, b1, C1, eta1, J1)
        for i in range(lo[c] + 1, hi[c]):
            load(E, i, A2, b2, C2, eta2, J2)
            combine(A1, b1, C1, eta1, J1, A2, b2, C2, eta2, J2, D, Z1, Z2, z, w, T)
        store(E_next, c, A1, b1, C1, eta1, J1)

    @cuda.jit
    def scan_down(E, prefix_next, lo, hi, first, prefix):
        c = cuda.grid(1)
        if c >= lo.shape[0]:
            return
        b1 = cuda.local.array(NX, cdt)
        C1 = cuda.local.array(NXX, cdt)
        A2 = cuda.local.array(NXX, cdt)
        b2 = cuda.local.array(NX, cdt)
        C2 = cuda.local.array(NXX, cdt)
        eta2 = cuda.local.array(NX, cdt)
        J2 = cuda.local.array(NXX, cdt)
        D = cuda.local.array(NXX, cdt)
        Z2 = cuda.local.array(NXX, cdt)
        T = cuda.local.array(NXX, cdt)
        z = cuda.local.array(NX, cdt)
        start = lo[c]
        if first[c]:  # the identity's prefix is never read; the next one is E[lo]'s (b, C)
            start += 1
            if start < hi[c]:
                for q in range(NX):
                    b1[q] = E[NXX + q, lo[c]]
                for q in range(NXX):
                    C1[q] = E[NXX + NX + q, lo[c]]
        else:
            for q in range(NX):
                b1[q] = prefix_next[q, c]
            for q in range(NXX):
                C1[q] = prefix_next[NX + q, c]
        for i in range(start, hi[c]):
            for q in range(NX):
                prefix[q, i] = b1[q]
            for q in range(NXX):
                prefix[NX + q, i] = C1[q]
            if i + 1 < hi[c]:
                load(E, i, A2, b2, C2, eta2, J2)
                combine_prefix(b1, C1, A2, b2, C2, eta2, J2, D, Z2, z, T)

    @cuda.jit
    def scan_final(y, lo, hi, first, series, midx, F, H, Q, R, m0, P0, prefix, ll, nobs, fail,
                   fail0):
        c = cuda.grid(1)
        if c >= lo.shape[0]:
            return
        k = midx[series[c]]
        m = cuda.local.array(NX, cdt)
        P = cuda.local.array(NXX, cdt)
        T = cuda.local.array(NXX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        if first[c]:
            set_prior(m0[k], P0[k], m, P)
        else:  # the prefix holds the filtered law of the step before the chunk
            for q in range(NX):
                m[q] = prefix[q, c]
            for q in range(NXX):
                P[q] = prefix[NX + q, c]
            predict(F[k], Q[k], m, P, T)
        a, n, f = filter_range(F[k], H[k], Q[k], R[k], y, lo[c], hi[c] - lo[c], 1, m, P, T,
                               U, L, e)
        ll[c] = a
        nobs[c] = n
        fail[c] = lo[c] + f if f >= 0 else fail0[c]  # (scan_up0's, or -1)

    s_chunk, s_up, s_down = _math(nx, ny, kind, dt)[3]

    # The steady-state scan's kernels take every level's chunk table in one array ``tab``
    # (rows lo, hi, first, last, series; level l from column ``tb``), every level's
    # elements in one array ``E`` and their prefixes in ``P`` (level l's from column
    # ``eo``), the level's matrix as a row of ``mats``: a plan slices no device array
    # (numba-cuda's slicing costs tens of microseconds a slice).
    @cuda.jit
    def steady_up0(y, offsets, tab, n, F, H, m0, Ws, Ls, logdets, kmax, E):
        c = cuda.grid(1)
        if c >= n or tab[3, c]:
            return
        m = cuda.local.array(NX, cdt)
        t = cuda.local.array(NX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        for i in range(NX):
            m[i] = 0
        lo = tab[0, c]
        s_chunk(F[0], H[0], y, lo, tab[1, c] - lo, lo - offsets[tab[4, c]], kmax, tab[2, c] != 0,
                m0[0], m, t, U, L, e, Ws, Ls, logdets)
        for i in range(NX):
            E[i, c] = m[i]

    @cuda.jit
    def steady_up(E, tab, tb, n, mats, li, eo, eo_next):
        c = cuda.grid(1)
        if c >= n or tab[3, tb + c]:
            return
        b = cuda.local.array(NX, cdt)
        z = cuda.local.array(NX, cdt)
        s_up(E, eo + tab[0, tb + c], eo + tab[1, tb + c], mats[li], b, z)
        for i in range(NX):
            E[i, eo_next + c] = b[i]

    @cuda.jit
    def steady_down(E, P, tab, tb, n, mats, li, eo, eo_next):
        c = cuda.grid(1)
        if c >= n:
            return
        b = cuda.local.array(NX, cdt)
        z = cuda.local.array(NX, cdt)
        lo = eo + tab[0, tb + c]
        start = lo
        if tab[2, tb + c]:  # a series' first element: the prefix after it is its b
            start += 1
            for i in range(NX):
                b[i] = E[i, lo]
        else:
            for i in range(NX):
                b[i] = P[i, eo_next + c]
        s_down(E, lo, eo + tab[1, tb + c], start, mats[li], b, P, z)

    @cuda.jit
    def steady_final(y, offsets, tab, n, F, H, m0, Ws, Ls, logdets, kmax, P, sums):
        c = cuda.grid(1)
        if c >= n:
            return
        m = cuda.local.array(NX, cdt)
        t = cuda.local.array(NX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        first = tab[2, c] != 0
        if not first:  # level 1's prefixes are P's first columns
            for i in range(NX):
                m[i] = P[i, c]
        lo = tab[0, c]
        a, k = s_chunk(F[0], H[0], y, lo, tab[1, c] - lo, lo - offsets[tab[4, c]], kmax, first,
                       m0[0], m, t, U, L, e, Ws, Ls, logdets)
        sums[0, c] = a
        sums[1, c] = k
        sums[2, c] = -1

    progs = dict(exact=exact, exact_shared=exact_shared, scan_up0=scan_up0, scan_up=scan_up,
                 scan_down=scan_down, scan_final=scan_final, steady_up0=steady_up0,
                 steady_up=steady_up, steady_down=steady_down, steady_final=steady_final,
                 ne=element_size(nx),
                 np=nx + nx * nx)
    _compiled[key] = progs
    return progs


def _splash_program(nx: int, ny: int, kind: int, dtype, chunk: int, per_block: int):
    """The fused splash kernel: a block holds ``per_block`` chunks of ``chunk`` steps.

    Each thread computes the term of one step; then the first thread of each
    chunk adds its chunk's terms from shared memory, in step order (as the
    CPU engine's ``plan.chunk_sums``: the same bits), and writes the chunk's
    sum, observed steps and first failing step (or -1) to column ``c`` of
    ``sums`` (float64, shape (3, n_chunks)).  ``starts[s]`` is the first chunk
    of series ``s`` (``starts[-1]``: the number of chunks).
    """
    key = ("splash", nx, ny, kind, np.dtype(dtype).name, chunk, per_block)
    if key in _compiled:
        return _compiled[key]
    dt = np.dtype(dtype).type
    cdt = float32 if dt == np.float32 else float64
    _, _, sp, _ = _math(nx, ny, kind, dt)
    point, point_shared = sp.point, sp.point_shared
    NX, NXX, NXY, NYY, NY = nx, nx * nx, nx * ny, ny * ny, ny
    CHUNK, PER_BLOCK, TPB = chunk, per_block, chunk * per_block
    chunk_bounds = device(_chunk_bounds)

    @cuda.jit
    def splash(y, offsets, midx, F, H, Q, R, m0, P0, window, broad, shared, Ws, Ls, logdets,
               starts, sums):
        terms = cuda.shared.array(TPB, float64)
        flags = cuda.shared.array(TPB, int8)  # 1: observed, 2: failed
        m = cuda.local.array(NX, cdt)
        P = cuda.local.array(NXX, cdt)
        T = cuda.local.array(NXX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        i = cuda.threadIdx.x
        j = i % CHUNK
        s, lo, hi = chunk_bounds(starts, offsets, cuda.blockIdx.x * PER_BLOCK + i // CHUNK,
                                  CHUNK)
        t = lo + j
        a = 0.0
        flag = 0
        if t < hi:
            k = midx[s]
            done = False
            ok = True
            o = False
            if shared:
                a, o, done = point_shared(F[k], H[k], y, offsets[s], t, window, m, T, U, L, e,
                                          Ws, Ls, logdets)
            if not done:
                a, o, ok = point(F[k], H[k], Q[k], R[k], m0[k], P0[k], y, offsets[s], t,
                                 window, broad, m, P, T, U, L, e)
            flag = (1 if o else 0) + (0 if ok else 2)
        terms[i] = a
        flags[i] = flag
        cuda.syncthreads()
        if j == 0 and lo < hi:
            acc = 0.0
            n = 0
            first = -1
            for q in range(hi - lo):
                acc += terms[i + q]
                n += flags[i + q] & 1
                if first < 0 and flags[i + q] & 2:
                    first = lo + q
            c = cuda.blockIdx.x * PER_BLOCK + i // CHUNK
            sums[0, c] = acc
            sums[1, c] = n
            sums[2, c] = first

    _compiled[key] = splash
    return splash


def _chunk_bounds(starts, offsets, c, chunk):
    """Series ``s`` of chunk ``c`` and the chunk's rows ``lo .. hi - 1`` (empty past the end)."""
    if c >= starts[starts.shape[0] - 1]:
        return 0, 0, 0
    lo_s = 0  # binary search: the last series s with starts[s] <= c (empty series skipped)
    hi_s = starts.shape[0] - 1
    while hi_s - lo_s > 1:
        mid = (lo_s + hi_s) // 2
        if starts[mid] <= c:
            lo_s = mid
        else:
            hi_s = mid
    lo = offsets[lo_s] + (c - starts[lo_s]) * chunk
    return lo_s, lo, min(lo + chunk, offsets[lo_s + 1])


class DeviceBatch(NamedTuple):
    """A :class:`SeriesBatch` copied to the GPU (arrays in the same order).

    ``scratch`` keeps what later calls on the same batch reuse (the splash
    kernel's chunk table, output buffers and prepared launch), and frees it
    with the batch.
    """

    y: object
    offsets: object
    model_idx: object
    F: object
    H: object
    Q: object
    R: object
    m0: object
    P0: object
    scratch: dict

    @property
    def arrays(self) -> tuple:
        """The device arrays, in the kernels' argument order (``scratch`` left out)."""
        return self[:9]


def to_device(batch: SeriesBatch, tuning: Tuning = DEFAULT) -> DeviceBatch:
    """Copy a batch to the current GPU (for repeated calls on the same data, and timings).

    Three copies: the observations (through page-locked buffers when large:
    ``buffers.upload``), the two integer arrays, the six model arrays (each a view of one
    device array; an allocation and a copy cost ~0.2 ms each).
    """
    md = batch.models
    return DeviceBatch(upload(batch.y, tuning),
                       *_packed(batch.offsets, batch.model_idx.astype(np.int64, copy=False)),
                       *_packed(md.F, md.H, md.Q, md.R, md.m0, md.P0), {})


def _packed(*arrays) -> list:
    """``arrays`` (one dtype) copied to the GPU in one piece; their shapes, as views."""
    flat = cuda.to_device(np.concatenate([a.reshape(-1) for a in arrays]))
    out, pos = [], 0
    for a in arrays:
        out.append(flat[pos:pos + a.size].reshape(a.shape))
        pos += a.size
    return out


def exact(batch: SeriesBatch, shared: bool | None = None,
          dev: DeviceBatch | None = None, tuning: Tuning = DEFAULT) -> LoglikOut:
    """The sequential Kalman filter of every series, a thread per series.

    Parameters
    ----------
    batch : SeriesBatch
    shared : bool, optional
        As for :func:`bulkem.engines.cpu.kalman.exact`.
    dev : DeviceBatch, optional
        The batch already on the GPU (``to_device(batch)``).
    tuning : Tuning, optional
        Threads per block (``kalman_cuda_threads``) and the shared recursion's threshold.

    Notes
    -----
    The series that share the covariance recursion read their observations
    where they lie, series after series: measured on an H200 (100,000 AR(10)
    series x 1,000 steps), as fast as a time-major copy made first
    (1.73 ms either way), without the copy's 1.1 ms.
    """
    from ..cpu import kalman as kalman_cpu

    md = batch.models
    p = _programs(md.nx, md.ny, md.kind, batch.y.dtype)
    dev = to_device(batch, tuning) if dev is None else dev
    n = batch.n_series
    ll = cuda.device_array(n)  # every entry is written by one of the two kernels
    nobs = cuda.device_array(n, np.int64)
    fail_h = np.full(n, -1, dtype=np.int64)
    rest = np.ones(n, dtype=bool)
    sel = shared_series(batch, shared, tuning.kalman_shared_gains_min_series)
    threads = tuning.kalman_cuda_threads
    if len(sel):
        lengths = batch.lengths[sel]
        n_steps = int(lengths.max())
        nw, nl = n_steps * md.nx * md.ny, n_steps * md.ny * md.ny
        gains = np.empty(nw + nl, batch.y.dtype)  # W then L of every step: one copy
        logdets = np.empty(n_steps)
        bad = kalman_cpu.gains(batch, n_steps, gains[:nw], gains[nw:], logdets)
        if bad >= 0:  # the series that reach a failing step go the full way and report it
            sel = sel[lengths <= bad]
            lengths = batch.lengths[sel]
        if len(sel):
            ints = cuda.to_device(np.stack([sel, batch.offsets[sel], lengths]))
            gains_d = cuda.to_device(gains)
            p["exact_shared"][_grid(len(sel), threads)](
                dev.y, ints[1], ints[2], 1, ints[0], dev.F[0], dev.H[0], dev.m0[0],
                gains_d[:nw], gains_d[nw:], cuda.to_device(logdets), ll, nobs)
            rest[sel] = False
    rest = np.flatnonzero(rest)  # (a mask: np.setdiff1d took 49 ms of 55 for 10^5 series)
    ll_h, nobs_h = ll.copy_to_host(), nobs.copy_to_host()
    if len(rest):
        sub = batch if len(rest) == n else subset(batch, rest)
        sub_dev = dev if len(rest) == n else to_device(sub, tuning)
        m = sub.n_series
        ll_r, nobs_r, fail_r = (cuda.device_array(m), cuda.device_array(m, np.int64),
                                cuda.device_array(m, np.int64))
        p["exact"][_grid(m, threads)](*sub_dev.arrays, ll_r, nobs_r, fail_r)
        ll_h[rest], nobs_h[rest], fail_h[rest] = (
            ll_r.copy_to_host(), nobs_r.copy_to_host(), fail_r.copy_to_host())
    return LoglikOut(ll_h, nobs_h, fail_h)


def scan(batch: SeriesBatch, chunk0: int | None = None, chunk: int | None = None,
         dev: DeviceBatch | None = None, shared: bool | None = None,
         tuning: Tuning = DEFAULT) -> LoglikOut:
    """The exact filter by a blocked associative scan over time, a thread per chunk.

    Parameters
    ----------
    batch : SeriesBatch
    chunk0 : int, optional
        Time steps per chunk at level 0 (default: at least
        ``tuning.kalman_cuda_scan_chunk0``, and about
        ``tuning.kalman_cuda_scan_target_chunks`` chunks in all).
    chunk : int, optional
        Elements per chunk at the higher levels (default
        ``tuning.kalman_cuda_scan_chunk``).
    dev : DeviceBatch, optional
        The batch already on the GPU (``to_device(batch)``); calls again with
        the same one (and the same chunks) reuse its plan: chunk tables,
        buffers and prepared launches (:func:`_scan_plan`).
    shared : bool, optional
        As for :func:`bulkem.engines.cpu.kalman.scan`: None runs the
        steady-state scan when the batch allows it (its level-0 chunks then at
        least ``tuning.kalman_cuda_steady_chunk0`` steps,
        ``tuning.kalman_cuda_steady_chunk`` elements per chunk above), False never.
    tuning : Tuning, optional
        The chunk sizes above, threads per block, the scan's warps.

    Returns
    -------
    LoglikOut
        Per series: log-likelihood, observed steps, first failing step or -1.

    Notes
    -----
    A call with a kept plan is the launches (one per level up, one per level
    down) and one copy back of the level-0 chunks' results; the host adds
    each series' chunks in chunk order (as ``plan.gather``): the same bits.
    """
    from ..cpu.kalman import steady

    reuse = dev is not None
    dev = to_device(batch, tuning) if dev is None else dev
    st_key = ("steady", shared)  # the batch's steady-state gains, or None
    if st_key not in dev.scratch:
        dev.scratch[st_key] = steady(batch, shared, tuning)
    st = dev.scratch[st_key]
    if st is not None:
        if chunk0 is None:
            chunk0 = chunk0_for(batch.offsets[-1], tuning.kalman_cuda_steady_chunk0,
                                tuning.kalman_cuda_scan_target_chunks)
        chunk0 = int(chunk0)
        chunk = int(chunk or tuning.kalman_cuda_steady_chunk)
        threads = tuning.kalman_cuda_threads
        key = ("steady_scan", threading.get_ident(), chunk0, chunk, threads)
        plan = dev.scratch.get(key)
        if plan is None:
            plan = dev.scratch[key] = _steady_plan(batch, dev, st, chunk0, chunk, reuse,
                                                   threads)
    else:
        if chunk0 is None:
            chunk0 = chunk0_for(batch.offsets[-1], tuning.kalman_cuda_scan_chunk0,
                                tuning.kalman_cuda_scan_target_chunks)
        chunk = int(chunk or tuning.kalman_cuda_scan_chunk)
        threads = tuning.kalman_cuda_threads
        wpb = _scan_warps(batch.models, batch.y.dtype, tuning)
        key = ("scan", threading.get_ident(), int(chunk0), chunk, wpb, threads)
        plan = dev.scratch.get(key)
        if plan is None:
            plan = _scan_plan(batch, dev, int(chunk0), chunk, reuse, wpb, threads)
            dev.scratch[key] = plan
    for _, launch in plan.launches:
        launch()
    if plan.sums is not None:
        plan.sums.copy_to_host(plan.host)
    return _series_totals(batch.offsets, plan.starts, plan.host)


def _launcher(kernel, grid: tuple[int, int], args, prepared: bool = True):
    """A :class:`compat.Launcher <bulkem.engines.cuda.compat.Launcher>` of ``kernel[grid]``
    with ``args``, kept for the launches of later calls (``prepared``: its arguments
    marshalled once, which costs more than one ordinary launch; pass False for a plan
    used once).

    The simulator's ``kernel[grid]`` sets the grid on the kernel itself (and
    returns the kernel), so that a kept launch would run with the grid of
    whichever launch was configured last; there the grid is set at each launch.
    """
    from .compat import SIMULATED, Launcher

    if SIMULATED:
        return Launcher(lambda *a: kernel[grid](*a), args)
    return Launcher(kernel[grid], args, prepared)


class _ScanPlan(NamedTuple):
    """What a scan call on a device batch needs, made once (see :func:`scan`)."""

    starts: np.ndarray  # first level-0 chunk of each series, then the number of chunks
    sums: object  # (3, n_chunks) on the GPU: ll, observed steps, failing step (final, up0)
    host: np.ndarray  # where ``sums`` comes back (page-locked when reused)
    launches: tuple  # (kernel name, compat.Launcher), in launch order
    n_levels: int
    kernels: dict  # the kernels by name (thread- or warp-per-chunk)


def _scan_warps(md, dtype, tuning: Tuning) -> int:
    """Warps per block of the warp-per-chunk scan kernels for these models, or 0 for the
    thread-per-chunk kernels (few states, or too much shared memory per warp)."""
    from .scan_warp import warps_per_block

    if md.nx < tuning.kalman_cuda_scan_warp_min_nx:
        return 0
    return warps_per_block(md.nx, md.ny, dtype, tuning.kalman_cuda_scan_warps)


def _warp_programs(nx: int, ny: int, kind: int, dtype, wpb: int, threads: int) -> dict:
    """The scan kernels of :mod:`bulkem.engines.cuda.scan_warp` (a warp per chunk above
    level 0, a thread per chunk at level 0), built once per process."""
    from . import scan_warp

    key = ("warp", nx, ny, kind, np.dtype(dtype).name, wpb, threads)
    if key not in _compiled:
        steps, sc, _, _ = _math(nx, ny, kind, np.dtype(dtype).type)
        tpb = scan_warp.level0_threads(nx, dtype, threads)
        tpb_f = scan_warp.final_threads(nx, dtype, threads)
        progs = dict(scan_warp.warp_programs(nx, dtype, wpb))
        progs.update(scan_warp.level0_programs(nx, ny, dtype, tpb, tpb_f, steps, sc))
        _compiled[key] = progs
    return _compiled[key]


def _scan_plan(batch, dev, chunk0: int, chunk: int, reuse: bool, wpb: int,
               threads: int) -> _ScanPlan:
    """Levels, chunk tables, buffers and prepared launches of the scan kernels for ``dev``.

    With ``wpb`` > 0 the warp-per-chunk kernels run (``wpb`` warps per block;
    :mod:`bulkem.engines.cuda.scan_warp`), their elements and prefixes stored
    element by element; else the thread-per-chunk kernels, field by field.
    A prefix is ``(b, C)`` alone (its ``A, eta, J`` are 0).  The level-0
    chunks' results go to the rows of one float64 array (counts and steps are
    exact in it), so that one copy brings them back: row 0 the log-likelihood
    terms, row 1 the observed steps, row 2 the failing step of ``scan_final``,
    else that of ``scan_up0`` (row 3, which ``scan_final`` reads; it stays -1
    where ``scan_up0`` does not run, as with a single level), else -1.  Rows
    0-2 come back.
    """
    md = batch.models
    levels = plan_levels(batch.offsets, chunk0, chunk)
    n0 = levels[0].n_chunks
    starts = _chunk_starts(batch.offsets, chunk0)
    if n0 == 0:
        return _ScanPlan(starts, None, np.zeros((3, 0)), (), len(levels), {})
    dt = batch.y.dtype
    if wpb:
        from .scan_warp import WARP

        w = _warp_programs(md.nx, md.ny, md.kind, dt, wpb, threads)
        kernels = dict(scan_up0=w["up0"], scan_up=w["up"], scan_down=w["down"],
                       scan_final=w["final"])
        level0 = {"scan_up0": w["tpb"], "scan_final": w["tpb_final"]}  # a thread per chunk

        def grid(n, name):
            if name in level0:
                return -(-n // level0[name]), level0[name]
            return -(-n // wpb), WARP * wpb

        def shaped(a, fields, n):  # element by element
            return a.reshape(n, fields)
    else:
        w = _programs(md.nx, md.ny, md.kind, dt)
        kernels = {k: w[k] for k in ("scan_up0", "scan_up", "scan_down", "scan_final")}

        def grid(n, name):
            return _grid(n, threads)

        def shaped(a, fields, n):  # field by field
            return a.reshape(fields, n)
    # every level's chunk table in one copy, every level's elements in one allocation
    host = [a.astype(np.int64, copy=False) for lev in levels
            for a in (lev.lo, lev.hi, lev.first, lev.last, lev.series)]
    flat = cuda.to_device(np.concatenate(host))
    tables, pos = [], 0
    for li in range(len(levels)):
        views = []
        for k in range(5):
            n = len(host[5 * li + k])
            views.append(flat[pos:pos + n])
            pos += n
        tables.append(tuple(views))
    ne, npx = w["ne"], w["np"]
    sizes = [lev.n_chunks for lev in levels[:-1]]  # elements (and prefixes) of levels 1..top
    buf = cuda.device_array(max(1, (ne + npx) * sum(sizes)), dt)
    elems, prefixes, pos = [None], [None], 0  # [l]: the elements (prefixes) of level l
    for n in sizes:
        elems.append(shaped(buf[pos:pos + ne * n], ne, n))
        pos += ne * n
    for n in sizes:
        prefixes.append(shaped(buf[pos:pos + npx * n], npx, n))
        pos += npx * n
    models = (dev.F, dev.H, dev.Q, dev.R, dev.m0, dev.P0)
    sums = cuda.to_device(np.full((4, n0), -1.0))
    ll_c, n_c, fail_c, fail0 = sums[0], sums[1], sums[2], sums[3]
    launches = []

    def launch(name, n, *args):
        launches.append((name, _launcher(kernels[name], grid(n, name), args, reuse)))

    for li, lev in enumerate(levels[:-1]):
        lo, hi, first, last, series = tables[li]
        if li == 0:
            launch("scan_up0", lev.n_chunks, dev.y, lo, hi, first, last, series,
                   dev.model_idx, *models, elems[1], fail0)
        else:
            launch("scan_up", lev.n_chunks, elems[li], lo, hi, last, elems[li + 1])
    # (prefix_next of the top level is never read: the top's chunks come first)
    prefix_next = shaped(cuda.device_array(npx, dt), npx, 1)
    for li in range(len(levels) - 1, 0, -1):
        lo, hi, first, last, series = tables[li]
        launch("scan_down", levels[li].n_chunks, elems[li], prefix_next, lo, hi, first,
               prefixes[li])
        prefix_next = prefixes[li]
    lo, hi, first, last, series = tables[0]
    launch("scan_final", n0, dev.y, lo, hi, first, series, dev.model_idx, *models,
           prefix_next, ll_c, n_c, fail_c, fail0)
    host_sums = cuda.pinned_array((3, n0), np.float64) if reuse else np.empty((3, n0))
    return _ScanPlan(starts, sums[:3], host_sums, tuple(launches), len(levels), kernels)


def _steady_plan(batch, dev, st, chunk0: int, chunk: int, reuse: bool,
                 threads: int) -> _ScanPlan:
    """:func:`_scan_plan` for the steady-state scan (as
    :func:`bulkem.engines.cpu.kalman.steady`): elements and prefixes of ``nx`` values,
    field by field, and a matrix per level, each kind in one device array (see the
    kernels in :func:`_programs`)."""
    md = batch.models
    dt = batch.y.dtype
    nx = md.nx
    levels = plan_levels(batch.offsets, chunk0, chunk, first0=st.n)
    n0 = levels[0].n_chunks
    starts = np.zeros(batch.n_series + 1, dtype=np.int64)
    np.cumsum(np.bincount(levels[0].series, minlength=batch.n_series), out=starts[1:])
    w = _programs(nx, md.ny, md.kind, dt)
    tab = cuda.to_device(np.stack([np.concatenate([getattr(lev, f) for lev in levels])
                                   .astype(np.int64) for f in ("lo", "hi", "first", "last",
                                                               "series")]))
    tb = np.concatenate([[0], np.cumsum([lev.n_chunks for lev in levels])])  # table columns
    eo = np.concatenate([[0, 0], np.cumsum([lev.n_chunks for lev in levels[:-1]])])
    # eo[l]: first column of level l's elements and prefixes (l >= 1), one per chunk of l - 1
    mats = cuda.to_device(steady_matrices(st.A, chunk0, chunk, len(levels), dt))
    E = cuda.device_array((nx, max(1, int(eo[-1]))), dt)
    P = cuda.device_array((nx, max(1, int(eo[-1]))), dt)
    sums = cuda.device_array((3, n0))
    gains = (cuda.to_device(st.Ws), cuda.to_device(st.Ls), cuda.to_device(st.logdets),
             st.n - 1)
    model = (dev.F, dev.H, dev.m0)
    launches = []

    def launch(name, n, *args):
        launches.append((name, _launcher(w[name], _grid(n, threads), (*args,), reuse)))

    for li, lev in enumerate(levels[:-1]):
        n = lev.n_chunks
        if li == 0:
            launch("steady_up0", n, dev.y, dev.offsets, tab, n, *model, *gains, E)
        else:
            launch("steady_up", n, E, tab, int(tb[li]), n, mats, li, int(eo[li]),
                   int(eo[li + 1]))
    for li in range(len(levels) - 1, 0, -1):
        n = levels[li].n_chunks
        launch("steady_down", n, E, P, tab, int(tb[li]), n, mats, li, int(eo[li]),
               int(eo[li + 1]))
    launch("steady_final", n0, dev.y, dev.offsets, tab, n0, *model, *gains, P, sums)
    host_sums = cuda.pinned_array((3, n0), np.float64) if reuse else np.empty((3, n0))
    return _ScanPlan(starts, sums, host_sums, tuple(launches), len(levels), w)


def splash(batch: SeriesBatch, window: int, broad: float, dev: DeviceBatch | None = None,
           shared: bool | None = None, tuning: Tuning = DEFAULT) -> LoglikOut:
    """The paper's windowed approximation, a thread per time step, in one kernel launch.

    Parameters
    ----------
    batch : SeriesBatch
    window : int
        Steps per window (see :mod:`bulkem.models.ssm.splash`).
    broad : float
        Variance of the broad prior that starts each window.
    dev : DeviceBatch, optional
        The batch already on the GPU (``to_device(batch)``); calls again with
        the same one reuse its chunk table, buffers and prepared launch.
    shared : bool, optional
        As for :func:`bulkem.engines.cpu.kalman.splash`; the shared covariance
        recursion of a window is computed on the host once per model, window
        and broad prior, and kept on the GPU (:func:`_device_gains`).
    tuning : Tuning, optional
        Threads per block and the steps per summed chunk (``kalman_splash_sum_chunk``).

    Notes
    -----
    The step terms are added in chunks of ``tuning.kalman_splash_sum_chunk``
    steps on the GPU, then the chunks of each series on the host, in the
    order of the CPU engine: the same bits.  Only the chunk sums come back.
    """
    chunk = int(tuning.kalman_splash_sum_chunk)
    per_block = max(1, tuning.kalman_cuda_threads // chunk)
    if chunk * per_block > _MAX_THREADS:
        raise ValueError(f"Tuning.kalman_splash_sum_chunk = {chunk}; the CUDA engine adds a "
                         f"chunk in one block, so it must be at most {_MAX_THREADS}.")
    reuse = dev is not None
    dev = to_device(batch, tuning) if dev is None else dev
    key = ("splash", threading.get_ident(), chunk, per_block, int(window), float(broad), shared)
    plan = dev.scratch.get(key)
    if plan is None:
        plan = _splash_plan(batch, dev, window, broad, shared, chunk, per_block, reuse)
        dev.scratch[key] = plan
    if plan.launch is not None:  # (None: no steps at all)
        plan.launch()
        plan.sums.copy_to_host(plan.host)
    return _series_totals(batch.offsets, plan.starts, plan.host)


class _SplashPlan(NamedTuple):
    """What a splash call on a device batch needs, made once (see :func:`splash`)."""

    starts: np.ndarray  # first chunk of each series, then the number of chunks
    sums: object  # (3, n_chunks) on the GPU: chunk sums, observed steps, first failure
    host: np.ndarray  # where ``sums`` comes back (page-locked when reused)
    launch: object  # the kernel with its arguments (compat.Launcher), or None


def _splash_plan(batch, dev, window, broad, shared, chunk, per_block, reuse) -> _SplashPlan:
    """Chunk table, buffers and prepared launch of the splash kernel for ``dev``."""
    md = batch.models
    starts = _chunk_starts(batch.offsets, chunk)
    n = int(starts[-1])
    if n == 0:
        return _SplashPlan(starts, None, np.zeros((3, 0)), None)
    kernel = _splash_program(md.nx, md.ny, md.kind, batch.y.dtype, chunk, per_block)
    use, Ws, Ls, logdets = _device_gains(batch, window, broad, shared)
    sums = cuda.device_array((3, n), np.float64)
    host = cuda.pinned_array((3, n), np.float64) if reuse else np.empty((3, n))
    args = (*dev.arrays, int(window), batch.y.dtype.type(broad), use, Ws, Ls, logdets,
            cuda.to_device(starts), sums)
    return _SplashPlan(starts, sums, host,
                       _launcher(kernel, (-(-n // per_block), chunk * per_block), args, reuse))


_MAX_THREADS = 1024  # threads per block on every CUDA device so far

# Shared splash covariance recursions on the GPU, by context, dtype, model, window and
# broad prior (a few: a benchmark or a fit calls again with the same ones).
_gains_cache: dict = {}
_GAINS_CACHE_SIZE = 8


def _device_gains(batch: SeriesBatch, window: int, broad: float, shared: bool | None):
    """:func:`bulkem.engines.cpu.kalman.splash_gains`, copied to the GPU once and kept.

    Returns ``(use, Ws, Ls, logdets)``, the arrays on the current GPU.  The key
    holds the bytes of the model's ``F, H, Q, R`` (the recursion starts from
    ``N(0, broad I)``, not from the model's prior), so a changed model is a new
    entry; the context in the entry keeps a reset device's arrays unused.
    """
    from ..cpu.kalman import splash_gains

    md = batch.models
    dt = batch.y.dtype
    one = shared is not False and len(md.F) == 1
    model = (int(window), float(broad), md.nx, md.ny, md.kind,
             *(a.tobytes() for a in (md.F, md.H, md.Q, md.R))) if one else None
    ctx = cuda.current_context()
    key = (id(ctx), dt.name, model)
    hit = _gains_cache.get(key)
    if hit is None or hit[0] is not ctx:  # (the entry keeps its context alive: its id too)
        use, Ws, Ls, logdets = splash_gains(batch, window, broad, shared)
        hit = (ctx, bool(use), cuda.to_device(Ws), cuda.to_device(Ls), cuda.to_device(logdets))
        while len(_gains_cache) >= _GAINS_CACHE_SIZE:
            del _gains_cache[next(iter(_gains_cache))]
        _gains_cache[key] = hit
    return hit[1:]


def _chunk_starts(offsets: np.ndarray, chunk: int) -> np.ndarray:
    """First chunk of each series when its steps are cut into chunks of ``chunk``
    (as ``plan.step_chunks``); the last entry is the number of chunks."""
    lengths = np.diff(offsets)
    starts = np.zeros(len(offsets), dtype=np.int64)
    np.cumsum((lengths + chunk - 1) // chunk, out=starts[1:])
    return starts


@njit(cache=True, nogil=True)
def _totals(offsets, starts, sums, ll, nobs, fail):
    # three loops, each short: the terms' sum in chunk order (a chain of additions), the
    # counts (exact integers: any order), the first failing chunk (a search that stops)
    for s in range(len(starts) - 1):
        c0, c1 = starts[s], starts[s + 1]
        acc = 0.0
        for c in range(c0, c1):
            acc += sums[0, c]
        n = 0
        for c in range(c0, c1):
            n += int(sums[1, c])
        f = -1
        for c in range(c0, c1):
            if sums[2, c] >= 0:
                f = int(sums[2, c]) - offsets[s]
                break
        ll[s] = acc
        nobs[s] = n
        fail[s] = f


def _series_totals(offsets: np.ndarray, starts: np.ndarray, sums: np.ndarray) -> LoglikOut:
    """Per series, from its chunks' results: the sum of their terms in chunk order (as
    ``plan.gather``), observed steps, first failing step (or -1).

    ``sums`` has shape (3, n_chunks): terms, observed steps, a chunk's
    failing step or -1.  The chunks of series ``s`` are ``starts[s] ..
    starts[s + 1] - 1``.
    """
    n = len(offsets) - 1
    out = LoglikOut(np.zeros(n), np.zeros(n, np.int64), np.full(n, -1, np.int64))
    _totals(np.asarray(offsets, np.int64), starts, sums, *out)
    return out
