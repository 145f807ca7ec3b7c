"""CPU engine of the Kalman likelihoods: Numba ``prange`` loops over series, chunks or steps.

The per-step math is :mod:`bulkem.models.ssm.kalman` (and ``scan``,
``splash``): the per-step functions compiled with
``numba.njit(inline="always")`` into the functions that loop over steps,
which are compiled once each with ``numba.njit(error_model="numpy")``; this
module only runs them over the batch.  Each series, chunk or block of steps
is one parallel task that allocates its own small state arrays once.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from ...kernels.cache import njit_cached
from ...models.ssm.kalman import make_kalman
from ...models.ssm.plan import (
    LoglikOut,
    SeriesBatch,
    chunk0_for,
    chunk_sums,
    gather,
    plan_levels,
    shared_series,
    steady_matrices,
    step_chunks,
    subset,
)
from ...models.ssm.scan import element_size, make_scan, make_steady_scan
from ...models.ssm.splash import make_splash
from ...tuning import DEFAULT, Tuning

_compiled: dict = {}


def _programs(nx: int, ny: int, kind: int, dtype) -> dict:
    """The parallel loops for one (dimensions, structure, dtype), compiled once per process."""
    key = (nx, ny, kind, np.dtype(dtype).name)
    if key in _compiled:
        return _compiled[key]
    dt = np.dtype(dtype).type
    cached = ("kalman",) + key  # kept on disk (bulkem.kernels.cache), as the EM kernels
    # Per-step functions are inlined into the functions that loop over steps,
    # which compile once each (see kalman.make_kalman's jit_outer).
    jit = njit(inline="always")
    outer = njit(error_model="numpy")
    steps = make_kalman(nx, ny, kind, dt, jit, outer)
    sc = make_scan(nx, ny, kind, dt, jit, steps, outer)
    sp = make_splash(nx, ny, dt, outer, steps)
    splash_point, splash_shared = sp.point, sp.point_shared
    NX, NXX, NXY, NYY, NY = nx, nx * nx, nx * ny, ny * ny, ny
    is_missing, predict, set_prior, filter_range = (
        steps.is_missing, steps.predict, steps.set_prior, steps.filter_range)
    gains_range, filter_mean_range = steps.gains_range, steps.filter_mean_range
    update, smooth_step = steps.update, steps.smooth_step
    set_identity, combine, load, store, chunk_element = (
        sc.set_identity, sc.combine, sc.load, sc.store, sc.chunk_element)

    @njit_cached(cached, parallel=True, error_model="python")
    def exact(y, offsets, midx, F, H, Q, R, m0, P0, ll, nobs, fail):
        for s in prange(len(offsets) - 1):
            k = midx[s]
            m = np.empty(NX, dt)
            P = np.empty(NXX, dt)
            T = np.empty(NXX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            set_prior(m0[k], P0[k], m, P)
            a, n, f = filter_range(F[k], H[k], Q[k], R[k], y, offsets[s],
                                   offsets[s + 1] - offsets[s], 1, m, P, T, U, L, e)
            ll[s] = a
            nobs[s] = n
            fail[s] = f

    @njit_cached(cached, error_model="python")
    def gains(F, H, Q, R, m0, P0, n_steps, Ws, Ls, logdets):
        m = np.empty(NX, dt)
        P = np.empty(NXX, dt)
        T = np.empty(NXX, dt)
        U = np.empty(NXY, dt)
        L = np.empty(NYY, dt)
        set_prior(m0, P0, m, P)
        return gains_range(F, H, Q, R, n_steps, m, P, T, U, L, Ws, Ls, logdets)

    @njit_cached(cached, parallel=True, error_model="python")
    def exact_shared(y, offsets, sel, F, H, m0, Ws, Ls, logdets, ll, nobs):
        for j in prange(len(sel)):
            s = sel[j]
            m = np.empty(NX, dt)
            t = np.empty(NX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            for i in range(NX):
                m[i] = m0[i]
            n_s = offsets[s + 1] - offsets[s]
            a, n = filter_mean_range(F, H, y, offsets[s], n_s, 1, 0, n_s, m, t, U, L, e, Ws, Ls,
                                     logdets)
            ll[s] = a
            nobs[s] = n

    @njit_cached(cached, parallel=True, error_model="python")
    def scan_up0(y, lo, hi, first, last, series, midx, F, H, Q, R, m0, P0, E, fail):
        for c in prange(len(lo)):
            fail[c] = -1
            if last[c]:
                continue
            k = midx[series[c]]
            A = np.empty(NXX, dt)
            b = np.empty(NX, dt)
            C = np.empty(NXX, dt)
            eta = np.empty(NX, dt)
            J = np.empty(NXX, dt)
            T = np.empty(NXX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            G = np.empty(NXY, dt)
            f = chunk_element(F[k], H[k], Q[k], R[k], m0[k], P0[k], y, lo[c], hi[c] - lo[c],
                              first[c] != 0, A, b, C, eta, J, T, U, L, e, G)
            if f >= 0:
                fail[c] = lo[c] + f
            store(E, c, A, b, C, eta, J)

    @njit_cached(cached, parallel=True, error_model="python")
    def scan_up(E, lo, hi, last, E_next):
        for c in prange(len(lo)):
            if last[c]:
                continue
            A1, b1, C1, eta1, J1 = (np.empty(NXX, dt), np.empty(NX, dt), np.empty(NXX, dt),
                                    np.empty(NX, dt), np.empty(NXX, dt))
            A2, b2, C2, eta2, J2 = (np.empty(NXX, dt), np.empty(NX, dt), np.empty(NXX, dt),
                                    np.empty(NX, dt), np.empty(NXX, dt))
            D, Z1, Z2, T = (np.empty(NXX, dt), np.empty(NXX, dt), np.empty(NXX, dt),
                            np.empty(NXX, dt))
            z = np.empty(NX, dt)
            w = np.empty(NX, dt)
            load(E, lo[c], A1, b1, C1, eta1, J1)
            for i in range(lo[c] + 1, hi[c]):
                load(E, i, A2, b2, C2, eta2, J2)
                combine(A1, b1, C1, eta1, J1, A2, b2, C2, eta2, J2, D, Z1, Z2, z, w, T)
            store(E_next, c, A1, b1, C1, eta1, J1)

    @njit_cached(cached, parallel=True, error_model="python")
    def scan_down(E, prefix_next, lo, hi, first, prefix):
        for c in prange(len(lo)):
            A1, b1, C1, eta1, J1 = (np.empty(NXX, dt), np.empty(NX, dt), np.empty(NXX, dt),
                                    np.empty(NX, dt), np.empty(NXX, dt))
            A2, b2, C2, eta2, J2 = (np.empty(NXX, dt), np.empty(NX, dt), np.empty(NXX, dt),
                                    np.empty(NX, dt), np.empty(NXX, dt))
            D, Z1, Z2, T = (np.empty(NXX, dt), np.empty(NXX, dt), np.empty(NXX, dt),
                            np.empty(NXX, dt))
            z = np.empty(NX, dt)
            w = np.empty(NX, dt)
            if first[c]:
                set_identity(A1, b1, C1, eta1, J1)
            else:
                load(prefix_next, c, A1, b1, C1, eta1, J1)
            for i in range(lo[c], hi[c]):
                store(prefix, i, A1, b1, C1, eta1, J1)
                if i + 1 < hi[c]:
                    load(E, i, A2, b2, C2, eta2, J2)
                    combine(A1, b1, C1, eta1, J1, A2, b2, C2, eta2, J2, D, Z1, Z2, z, w, T)

    @njit_cached(cached, parallel=True, error_model="python")
    def scan_final(y, lo, hi, first, series, midx, F, H, Q, R, m0, P0, prefix, ll, nobs, fail):
        for c in prange(len(lo)):
            k = midx[series[c]]
            A = np.empty(NXX, dt)
            eta = np.empty(NX, dt)
            J = np.empty(NXX, dt)
            m = np.empty(NX, dt)
            P = np.empty(NXX, dt)
            T = np.empty(NXX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            if first[c]:
                set_prior(m0[k], P0[k], m, P)
            else:  # the prefix holds the filtered law of the step before the chunk (A = 0)
                load(prefix, c, A, m, P, eta, J)
                predict(F[k], Q[k], m, P, T)
            a, n, f = filter_range(F[k], H[k], Q[k], R[k], y, lo[c], hi[c] - lo[c], 1, m, P, T,
                                   U, L, e)
            ll[c] = a
            nobs[c] = n
            fail[c] = lo[c] + f if f >= 0 else -1

    @njit_cached(cached, parallel=True, error_model="python")
    def splash(y, offsets, midx, F, H, Q, R, m0, P0, window, broad, block, shared, Ws, Ls,
               logdets, ll, obs, fail):
        n_total = offsets[-1]
        for blk in prange((n_total + block - 1) // block):
            m = np.empty(NX, dt)
            P = np.empty(NXX, dt)
            T = np.empty(NXX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            s = np.searchsorted(offsets, blk * block, side="right") - 1
            for t in range(blk * block, min(n_total, (blk + 1) * block)):
                while t >= offsets[s + 1]:
                    s += 1
                k = midx[s]
                done = False
                ok = True
                if shared:
                    a, o, done = splash_shared(F[k], H[k], y, offsets[s], t, window, m, T, U, L,
                                               e, Ws, Ls, logdets)
                if not done:
                    a, o, ok = splash_point(F[k], H[k], Q[k], R[k], m0[k], P0[k], y, offsets[s],
                                            t, window, broad, m, P, T, U, L, e)
                ll[t] = a
                obs[t] = 1 if o else 0
                fail[t] = 0 if ok else 1

    @njit_cached(cached, error_model="python")
    def smooth(y, F, H, Q, R, m0, P0, ms, Ps, lag, ll_out):
        """One series, for tests and the EM to come: filter, then RTS back (see kalman.py)."""
        n = len(y) // NY
        mp = np.empty((n, NX), dt)  # predicted
        Pp = np.empty((n, NXX), dt)
        mf = np.empty((n, NX), dt)  # filtered
        Pf = np.empty((n, NXX), dt)
        m = np.empty(NX, dt)
        P = np.empty(NXX, dt)
        T = np.empty(NXX, dt)
        T2 = np.empty(NXX, dt)
        U = np.empty(NXY, dt)
        L = np.empty(NYY, dt)
        e = np.empty(NY, dt)
        G = np.empty(NXX, dt)
        set_prior(m0, P0, m, P)
        ll = 0.0
        for t in range(n):
            mp[t] = m
            Pp[t] = P
            if not is_missing(y, t * NY):
                a, ok = update(H, R, y, t * NY, m, P, U, L, e)
                if not ok:
                    return False
                ll += a
            mf[t] = m
            Pf[t] = P
            predict(F, Q, m, P, T)
        ll_out[0] = ll
        ms[n - 1] = mf[n - 1]
        Ps[n - 1] = Pf[n - 1]
        for t in range(n - 2, -1, -1):
            m[:] = ms[t + 1]
            P[:] = Ps[t + 1]
            if not smooth_step(F, mf[t], Pf[t], mp[t + 1], Pp[t + 1], m, P, lag[t], G, T,
                                     T2):
                return False
            ms[t] = m
            Ps[t] = P
        return True

    s_chunk, s_up, s_down = make_steady_scan(nx, dt, jit, steps)

    @njit_cached(cached, error_model="python")
    def steady_gains(F, H, Q, R, m0, P0, max_steps, tol, Ws, Ls, logdets):
        """``gains`` until the predicted covariance of step ``t + 1`` differs from step
        ``t``'s by at most ``tol`` times its largest entry (a fixed point: every later
        step has step ``t``'s gains): returns ``(n, fail)``, ``n = t + 1`` the entries
        stored, the last one the steady gain, or -1 if none within ``max_steps``."""
        m = np.empty(NX, dt)
        P = np.empty(NXX, dt)
        Pold = np.empty(NXX, dt)
        T = np.empty(NXX, dt)
        U = np.empty(NXY, dt)
        L = np.empty(NYY, dt)
        set_prior(m0, P0, m, P)
        for t in range(max_steps):
            for k in range(NXX):
                Pold[k] = P[k]
            bad = gains_range(F, H, Q, R, 1, m, P, T, U, L, Ws[t * NXY:], Ls[t * NYY:],
                              logdets[t:])
            if bad >= 0:
                return -1, t
            dp, pmax = 0.0, 0.0
            for k in range(NXX):
                dp = max(dp, abs(P[k] - Pold[k]))
                pmax = max(pmax, abs(P[k]))
            if dp <= tol * pmax:
                return t + 1, -1
        return -1, -1

    @njit_cached(cached, parallel=True, error_model="python")
    def steady_up0(y, offsets, lo, hi, first, last, series, F, H, m0, Ws, Ls, logdets, kmax,
                   E):
        for c in prange(len(lo)):
            if last[c]:
                continue
            m = np.zeros(NX, dt)
            t = np.empty(NX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            s_chunk(F, H, y, lo[c], hi[c] - lo[c], lo[c] - offsets[series[c]], kmax,
                    first[c] != 0, m0, m, t, U, L, e, Ws, Ls, logdets)
            for i in range(NX):
                E[i, c] = m[i]

    @njit_cached(cached, parallel=True, error_model="python")
    def steady_up(E, lo, hi, last, M, E_next):
        for c in prange(len(lo)):
            if last[c]:
                continue
            b = np.empty(NX, dt)
            z = np.empty(NX, dt)
            s_up(E, lo[c], hi[c], M, b, z)
            for i in range(NX):
                E_next[i, c] = b[i]

    @njit_cached(cached, parallel=True, error_model="python")
    def steady_down(E, prefix_next, lo, hi, first, M, prefix):
        for c in prange(len(lo)):
            b = np.empty(NX, dt)
            z = np.empty(NX, dt)
            for i in range(NX):  # a series' first element: the prefix after it is its b
                b[i] = E[i, lo[c]] if first[c] else prefix_next[i, c]
            s_down(E, lo[c], hi[c], lo[c] + first[c], M, b, prefix, z)

    @njit_cached(cached, parallel=True, error_model="python")
    def steady_final(y, offsets, lo, hi, first, series, F, H, m0, Ws, Ls, logdets, kmax,
                     prefix, ll, nobs):
        for c in prange(len(lo)):
            m = np.empty(NX, dt)
            t = np.empty(NX, dt)
            U = np.empty(NXY, dt)
            L = np.empty(NYY, dt)
            e = np.empty(NY, dt)
            if not first[c]:
                for i in range(NX):
                    m[i] = prefix[i, c]
            a, n = s_chunk(F, H, y, lo[c], hi[c] - lo[c], lo[c] - offsets[series[c]], kmax,
                           first[c] != 0, m0, m, t, U, L, e, Ws, Ls, logdets)
            ll[c] = a
            nobs[c] = n

    progs = dict(exact=exact, gains=gains, exact_shared=exact_shared, scan_up0=scan_up0,
                 scan_up=scan_up, scan_down=scan_down, scan_final=scan_final, splash=splash,
                 smooth=smooth, ne=element_size(nx), steady_gains=steady_gains,
                 steady_up0=steady_up0, steady_up=steady_up, steady_down=steady_down,
                 steady_final=steady_final)
    _compiled[key] = progs
    return progs


def _models(batch: SeriesBatch):
    md = batch.models
    return md.F, md.H, md.Q, md.R, md.m0, md.P0


def exact(batch: SeriesBatch, shared: bool | None = None, tuning: Tuning = DEFAULT) -> LoglikOut:
    """The sequential Kalman filter of every series, series in parallel.

    ``shared`` (None: when worth it) lets the series of a one-model batch
    without missing rows share the covariance recursion (see
    ``Tuning.kalman_shared_gains_min_series``); False forces the full
    filter for every series.
    """
    md = batch.models
    p = _programs(md.nx, md.ny, md.kind, batch.y.dtype)
    n = batch.n_series
    ll = np.zeros(n)
    nobs = np.zeros(n, dtype=np.int64)
    fail = np.full(n, -1, dtype=np.int64)
    rest = np.ones(n, dtype=bool)  # (a mask: np.setdiff1d took 23 ms for 20,000 series)
    sel = shared_series(batch, shared, tuning.kalman_shared_gains_min_series)
    if len(sel):
        n_steps = int(batch.lengths[sel].max())
        Ws = np.empty(n_steps * md.nx * md.ny, batch.y.dtype)
        Ls = np.empty(n_steps * md.ny * md.ny, batch.y.dtype)
        logdets = np.empty(n_steps)
        bad = gains(batch, n_steps, Ws, Ls, logdets)
        if bad >= 0:  # the series that reach a failing step go the full way and report it
            sel = sel[batch.lengths[sel] <= bad]
        if len(sel):
            p["exact_shared"](batch.y, batch.offsets, sel, md.F[0], md.H[0], md.m0[0], Ws, Ls,
                              logdets, ll, nobs)
            rest[sel] = False
    rest = np.flatnonzero(rest)
    if len(rest):
        if len(rest) == n:
            p["exact"](batch.y, batch.offsets, batch.model_idx, *_models(batch), ll, nobs, fail)
        else:
            sub = subset(batch, rest)
            o = LoglikOut(np.zeros(len(rest)), np.zeros(len(rest), np.int64),
                          np.full(len(rest), -1, np.int64))
            p["exact"](sub.y, sub.offsets, sub.model_idx, *_models(sub), *o)
            ll[rest], nobs[rest], fail[rest] = o
    return LoglikOut(ll, nobs, fail)


def gains(batch: SeriesBatch, n_steps: int, Ws: np.ndarray, Ls: np.ndarray,
          logdets: np.ndarray) -> int:
    """The covariance recursion of the batch's one model, for ``n_steps`` fully observed steps.

    Fills ``Ws`` (n_steps * nx * ny), ``Ls`` (n_steps * ny * ny) and ``logdets``
    (see ``kalman.make_kalman``'s ``gains_range``); returns the first step
    whose innovation covariance is not positive definite, or -1.
    """
    md = batch.models
    p = _programs(md.nx, md.ny, md.kind, batch.y.dtype)
    return p["gains"](md.F[0], md.H[0], md.Q[0], md.R[0], md.m0[0], md.P0[0], n_steps, Ws, Ls,
                      logdets)


class Steady(NamedTuple):
    """The covariance recursion shared by every series of a batch, up to its steady state."""

    n: int  # entries; step k of a series uses entry min(k, n - 1)
    Ws: np.ndarray
    Ls: np.ndarray
    logdets: np.ndarray
    A: np.ndarray  # (nx, nx), float64: x_t = A x_{t-1} + W L^{-1} y_t from entry n - 1 on


def steady(batch: SeriesBatch, shared: bool | None = None, tuning: Tuning = DEFAULT
           ) -> Steady | None:
    """The steady-state gains of a batch, if the steady-state scan can take it.

    It can when every series has one model and no missing row (``shared`` not
    False) and the covariance recursion settles within
    ``Tuning.kalman_scan_steady_max_steps`` steps and the longest series: the
    predicted covariance of step ``t + 1`` differs from step ``t``'s by at most
    ``Tuning.kalman_scan_steady_ulps`` units in the last place of its largest
    entry (the covariance, not the gain: a gain can stay put while the
    covariance still moves where the observation does not see it yet).
    Returns None otherwise (then the full scan runs).
    """
    md = batch.models
    if shared is False or batch.n_series == 0 or len(md.F) != 1 or batch.has_missing.any():
        return None
    dt = batch.y.dtype
    max_steps = min(int(batch.lengths.max()), tuning.kalman_scan_steady_max_steps)
    nxy, nyy = md.nx * md.ny, md.ny * md.ny
    Ws = np.empty(max_steps * nxy, dt)  # (valid series have at least one step)
    Ls = np.empty(max_steps * nyy, dt)
    logdets = np.empty(max_steps)
    p = _programs(md.nx, md.ny, md.kind, dt)
    tol = tuning.kalman_scan_steady_ulps * float(np.finfo(dt).eps)
    n, _ = p["steady_gains"](md.F[0], md.H[0], md.Q[0], md.R[0], md.m0[0], md.P0[0],
                             max_steps, dt.type(tol), Ws, Ls, logdets)
    if n < 0:
        return None
    W = Ws[(n - 1) * nxy:n * nxy].reshape(md.nx, md.ny).astype(np.float64)
    L = np.tril(Ls[(n - 1) * nyy:n * nyy].reshape(md.ny, md.ny).astype(np.float64))
    K = np.linalg.solve(L.T, W.T).T  # the gain W L^{-1}
    F = md.F[0].reshape(md.nx, md.nx).astype(np.float64)
    H = md.H[0].reshape(md.ny, md.nx).astype(np.float64)
    A = (np.eye(md.nx) - K @ H) @ F
    return Steady(int(n), Ws[:n * nxy], Ls[:n * nyy], logdets[:n], A)


def scan(batch: SeriesBatch, chunk0: int | None = None, chunk: int | None = None,
         shared: bool | None = None, tuning: Tuning = DEFAULT) -> LoglikOut:
    """The exact filter by a blocked associative scan over time (see ``models/ssm/plan.py``).

    ``shared`` (None: when possible) lets a batch whose series share one model
    and have no missing rows run the steady-state scan (:func:`steady`,
    ``models/ssm/scan.py``), which carries means alone; False forces the full
    scan.
    """
    md = batch.models
    p = _programs(md.nx, md.ny, md.kind, batch.y.dtype)
    if chunk0 is None:
        chunk0 = chunk0_for(batch.offsets[-1], tuning.kalman_cpu_scan_chunk0,
                            numba.get_num_threads() * tuning.kalman_cpu_scan_chunks_per_thread)
    chunk = chunk or tuning.kalman_cpu_scan_chunk
    st = steady(batch, shared, tuning)
    if st is not None:
        return _steady_scan(batch, st, chunk0, chunk)
    levels = plan_levels(batch.offsets, chunk0, chunk)
    dt = batch.y.dtype
    ne = p["ne"]
    # up: the element of every chunk (but a series' last) of each level
    elems = [None]  # elems[l]: elements of level l (level 0: the time steps themselves)
    fail0 = np.full(levels[0].n_chunks, -1, dtype=np.int64)
    for li, lev in enumerate(levels[:-1]):
        E = np.empty((ne, lev.n_chunks), dt)
        if li == 0:
            p["scan_up0"](batch.y, lev.lo, lev.hi, lev.first, lev.last, lev.series,
                          batch.model_idx, *_models(batch), E, fail0)
        else:
            p["scan_up"](elems[li], lev.lo, lev.hi, lev.last, E)
        elems.append(E)
    # down: the exclusive prefix of every chunk, level by level
    prefix_next = np.empty((ne, 0), dt)
    for li in range(len(levels) - 1, 0, -1):
        lev = levels[li]
        prefix = np.empty((ne, levels[li - 1].n_chunks), dt)
        p["scan_down"](elems[li], prefix_next, lev.lo, lev.hi, lev.first, prefix)
        prefix_next = prefix
    lev = levels[0]
    ll_c = np.zeros(lev.n_chunks)
    n_c = np.zeros(lev.n_chunks, dtype=np.int64)
    fail_c = np.full(lev.n_chunks, -1, dtype=np.int64)
    p["scan_final"](batch.y, lev.lo, lev.hi, lev.first, lev.series, batch.model_idx,
                    *_models(batch), prefix_next, ll_c, n_c, fail_c)
    return gather(batch, lev, ll_c, n_c, np.where(fail_c >= 0, fail_c, fail0))


def _steady_scan(batch: SeriesBatch, st: Steady, chunk0: int, chunk: int) -> LoglikOut:
    """The steady-state scan: the levels of ``scan``, elements of ``nx`` values."""
    md = batch.models
    dt = batch.y.dtype
    p = _programs(md.nx, md.ny, md.kind, dt)
    levels = plan_levels(batch.offsets, chunk0, chunk, first0=st.n)
    mats = steady_matrices(st.A, chunk0, chunk, len(levels), dt)
    one = (md.F[0], md.H[0], md.m0[0], st.Ws, st.Ls, st.logdets, st.n - 1)
    elems = [None]  # elems[l]: elements of level l (one per chunk of level l - 1)
    for li, lev in enumerate(levels[:-1]):
        E = np.empty((md.nx, lev.n_chunks), dt)
        if li == 0:
            p["steady_up0"](batch.y, batch.offsets, lev.lo, lev.hi, lev.first, lev.last,
                            lev.series, *one, E)
        else:
            p["steady_up"](elems[li], lev.lo, lev.hi, lev.last, mats[li], E)
        elems.append(E)
    prefix_next = np.empty((md.nx, 0), dt)  # (the top's chunks are all first: never read)
    for li in range(len(levels) - 1, 0, -1):
        lev = levels[li]
        prefix = np.empty((md.nx, levels[li - 1].n_chunks), dt)
        p["steady_down"](elems[li], prefix_next, lev.lo, lev.hi, lev.first, mats[li], prefix)
        prefix_next = prefix
    lev = levels[0]
    ll_c = np.zeros(lev.n_chunks)
    n_c = np.zeros(lev.n_chunks, dtype=np.int64)
    p["steady_final"](batch.y, batch.offsets, lev.lo, lev.hi, lev.first, lev.series, *one,
                      prefix_next, ll_c, n_c)
    return gather(batch, lev, ll_c, n_c, np.full(lev.n_chunks, -1, dtype=np.int64))


def splash_gains(batch: SeriesBatch, window: int, broad: float, shared: bool | None
                 ) -> tuple[bool, np.ndarray, np.ndarray, np.ndarray]:
    """The covariance recursion shared by every splash window from the broad prior.

    Returns ``(use, Ws, Ls, logdets)``; ``use`` False (and unused arrays) with
    one model per series, when ``shared`` is False, or if the recursion fails.
    """
    md = batch.models
    dt = batch.y.dtype
    Ws = np.zeros(window * md.nx * md.ny, dt)
    Ls = np.zeros(window * md.ny * md.ny, dt)
    logdets = np.zeros(window)
    if shared is False or len(md.F) != 1:  # (dummies of length 1: no empty GPU arrays)
        return False, Ws[:1], Ls[:1], logdets[:1]
    p = _programs(md.nx, md.ny, md.kind, dt)
    prior = (np.eye(md.nx) * broad).reshape(-1).astype(dt)
    bad = p["gains"](md.F[0], md.H[0], md.Q[0], md.R[0], np.zeros(md.nx, dt), prior, window,
                     Ws, Ls, logdets)
    if bad >= 0:
        return False, Ws[:1], Ls[:1], logdets[:1]
    return True, Ws, Ls, logdets


def splash(batch: SeriesBatch, window: int, broad: float, shared: bool | None = None,
           tuning: Tuning = DEFAULT) -> LoglikOut:
    """The paper's windowed approximation, every time step in parallel.

    ``shared`` (None: when possible) lets the windows without missing values
    share one covariance recursion (see ``models/ssm/splash.py``).
    """
    md = batch.models
    p = _programs(md.nx, md.ny, md.kind, batch.y.dtype)
    n_total = int(batch.offsets[-1])
    ll_t = np.zeros(n_total)
    obs_t = np.zeros(n_total, dtype=np.int64)
    fail_t = np.zeros(n_total, dtype=np.int8)
    use, Ws, Ls, logdets = splash_gains(batch, window, broad, shared)
    p["splash"](batch.y, batch.offsets, batch.model_idx, *_models(batch), window,
                batch.y.dtype.type(broad), tuning.kalman_cpu_splash_block, use, Ws, Ls, logdets,
                ll_t, obs_t, fail_t)
    # the GPU engine's order of sums
    lev = step_chunks(batch.offsets, tuning.kalman_splash_sum_chunk)
    return gather(batch, lev, *chunk_sums(lev, ll_t, obs_t, fail_t))


def smooth(y: np.ndarray, model) -> dict:
    """Filter and RTS-smooth one series under one model (float64; for tests and the EM to come).

    Returns
    -------
    dict with ``mean`` (T, nx), ``cov`` (T, nx, nx), ``lag`` (T - 1, nx, nx) with
    ``lag[t] = Cov(x_{t+1}, x_t | y)``, and ``loglik``; None if a step failed.
    """
    nx = model.dim_state
    p = _programs(nx, model.dim_obs, model.kind, np.float64)
    y = np.ascontiguousarray(np.asarray(y, dtype=np.float64).reshape(-1))
    n = len(y) // model.dim_obs
    ms = np.empty((n, nx))
    Ps = np.empty((n, nx * nx))
    lag = np.empty((max(n - 1, 1), nx * nx))  # (a one-step series: a row the kernel may touch)
    ll = np.zeros(1)
    ok = p["smooth"](y, *(np.ascontiguousarray(a.reshape(-1)) for a in (
        model.F, model.H, model.Q, model.R, model.m0, model.P0)), ms, Ps, lag, ll)
    if not ok:
        return None
    return dict(mean=ms, cov=Ps.reshape(n, nx, nx), lag=lag[:n - 1].reshape(-1, nx, nx),
                loglik=ll[0])
