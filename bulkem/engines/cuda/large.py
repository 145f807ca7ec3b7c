"""The one-large-dataset regime on the GPU: each mixture fit over the whole GPU.

CUDA: two launches per iteration and no host round trip.  The sums are
taken in another order than on the CPU.

1. A tiled E-step.  A block copies the family's coefficients ``Theta``
   (``M x S``) into shared memory once (or reads them from global memory, where
   they leave no room for a tile: :func:`plan`), then walks its share of tiles of
   ``T`` observations.  For each tile it stages every observation's
   statistics vector ``g`` (the family's ``accum`` with ``r = 1``; for the
   Gaussian family ``[1, x, x^2]``) as ``G`` (``T x S``) in shared memory.
   Both families' log densities are linear in ``g`` (``linear_logdens``),
   so the tile's log densities are the matrix product ``G Theta^T``
   (``T x M``; warp ``w`` owns a few components, lanes own observations: for a tile
   of fewer than 32 observations, groups of lanes own components too);
   one thread per observation turns its row into responsibilities ``R``;
   and the partial statistics are the matrix product ``R^T G`` (``M x S``:
   ``R^T X`` and ``R^T X^2`` for the Gaussian family), in which each thread
   owns a few (component, statistic) outputs, kept in registers across the
   block's tiles.  Each block writes one row of partials.
2. A reduction: blocks sum columns of the partials in a fixed order; the
   last block to finish (atomic counter) runs the stopping rule, the M-step
   (one thread per component) and the next iteration's coefficients.  A
   done flag on the device makes later launches return at once, and the
   host reads it every ``Tuning.large_cuda_check_every`` iterations.

The log densities of the linear form (``G Theta^T``) cancel where a
component is sharp far from the origin (:mod:`bulkem.models.mixture.fused`); as the
bulk pieces do, the reduction picks each next E-step's form from the fit's numbers
(:func:`bulkem.models.mixture.fused.make_bound`): the linear product, or the exact centred form
(each (component, observation) evaluated on its own), which also takes
every fit's first E-step.  float32 fits end as in the bulk engines (see
:func:`run_fits`).
"""

from __future__ import annotations

import math
import time
import warnings

import numba
import numpy as np
from numba import float32, float64, int64, njit, prange, uint64

from ...fitting.driver import make_stop
from ...kernels.cache import njit_cached
from ...tuning import DEGENERATE_NONFINITE, WARP_SIZE
from .compat import cuda, device, prepared_launch


def plan(family, M: int, D: int, dtype, tuning) -> dict | None:
    """Sizes of the CUDA kernels for this model, or None if they do not fit.

    The family must have ``linear_logdens``, and an M-step that treats components
    independently (not ``coupled_mstep``: the reduction runs it a component per thread);
    a family without them runs in the bulk regime.  The tile is the largest power
    of two up to ``tuning.large_cuda_tile`` whose shared arrays (coefficients,
    statistics vectors and responsibilities of a tile) fit
    ``tuning.large_cuda_shared_bytes``.  A model whose coefficients leave no room for a
    tile of a warp's observations (full covariances at D = 32: 17,952 coefficients)
    reads them from global memory instead (``coef_shared=False``; every lane of a warp
    reads the same one, a broadcast through the L1 cache), and a reduction whose
    statistics do not fit shared memory runs the M-step on them in global memory
    (``stats_shared=False``).  The plan holds every number the kernels compile in.
    """
    isz = np.dtype(dtype).itemsize
    nc = family.n_coef(M, D)
    ns = family.n_stats(M, D)
    if not family.linear_logdens or family.coupled_mstep or nc != ns:
        return None
    s = ns // M
    gs = s if s % 2 else s + 1
    limit = tuning.large_cuda_shared_bytes
    red = 8 * (tuning.large_cuda_reduce_threads + M) + 8 * (M + 1)  # the reduction's own
    if red > limit:
        return None
    stats_shared = 8 * (ns + 1) + red <= limit

    def largest_tile(coef_bytes):
        tile = tuning.large_cuda_tile
        while tile >= 1 and coef_bytes + isz * tile * (gs + M) + 8 * tile > limit:
            tile //= 2
        return tile

    tile, coef_shared = largest_tile(isz * nc), True
    if tile < min(WARP_SIZE, tuning.large_cuda_tile):
        tile, coef_shared = largest_tile(0), False
    if tile < 1:
        return None
    threads = (tuning.large_cuda_threads if coef_shared
               else tuning.large_cuda_threads_global[np.dtype(dtype).name])
    return dict(tile=tile, threads=threads,
                reduce_cols=tuning.large_cuda_reduce_cols,
                reduce_threads=tuning.large_cuda_reduce_threads,
                tau=tuning.exact_rtol[np.dtype(dtype).name],
                coef_shared=coef_shared, stats_shared=stats_shared)


_cuda_kernels: dict = {}


def _kernels(family, M, D, dtype, plan):
    key = (family.name, M, D, np.dtype(dtype).name, tuple(sorted(plan.items())))
    if key not in _cuda_kernels:
        _cuda_kernels[key] = _make_cuda_kernels(family, M, D, np.dtype(dtype), **plan)
    return _cuda_kernels[key]


def _make_cuda_kernels(family, M, D, dtype, tile, threads, reduce_cols, reduce_threads, tau,
                       coef_shared, stats_shared):
    WARP = WARP_SIZE
    cdt = float32 if dtype == np.float32 else float64
    accum_f = device(family.accum)
    coef_f = device(family.coef)
    ecoef_f = device(family.exact_coef)
    exact_f = device(family.exact_logdens)
    term_f = device(family.coef_bound)
    mstep_f = device(family.mstep)
    stop_f = make_stop(device)
    EPS4 = 4.0 * float(np.finfo(dtype).eps)  # rounding of the linear form: see fused.make_bound
    TAU = tau

    # Compile-time sizes; every shared or local array size is one named
    # constant.  Index arithmetic in the hot loops is unsigned (np.uint64
    # constants, while loops): signed indices make numba add a negative-index
    # fix-up to every shared-memory load, which costs more than the math.
    T = tile
    NT = threads
    NWARP = NT // WARP
    NC = family.n_coef(M, D)
    P = family.per_component(D)
    NS = family.n_stats(M, D)
    S = NS // M  # statistics (and coefficients) per component
    NSX = NS + 1  # the statistics and the log-likelihood
    COEF_SHARED, STATS_SHARED = coef_shared, stats_shared
    NC_SH = NC if coef_shared else 1  # (shared arrays of an unused branch: one element)
    NSX_SH = NSX if stats_shared else 1
    GS = S if S % 2 else S + 1  # row stride of the G tile: odd, so a column read is conflict-free
    SH_G = GS * T
    SH_R = M * T
    # The log-density product: a warp's lanes are CL groups of OL lanes (OL = 32 unless the
    # tile is smaller, so that no lane idles), a group owns ML components, a lane TB of the
    # tile's observations.  The statistics product: warp w owns MW components, a lane KL
    # statistics of each.
    OL = min(T, WARP)
    CL = WARP // OL
    ML = -(-M // (NWARP * CL))
    TB = -(-T // OL)
    MW = -(-M // NWARP)
    KL = -(-S // WARP)
    NE = ML * TB
    NACC = MW * KL
    RC = reduce_cols
    NTR = reduce_threads
    RG = NTR // RC
    MP1 = M + 1
    ONE = dtype.type(1.0)
    ZERO = dtype.type(0.0)
    U0, U1 = np.uint64(0), np.uint64(1)
    UWARP, UM1, UT, UT1 = np.uint64(WARP), np.uint64(M - 1), np.uint64(T), np.uint64(T - 1)
    US, US1, UGS, UMW = np.uint64(S), np.uint64(S - 1), np.uint64(GS), np.uint64(MW)
    UOL, UCL, UML = np.uint64(OL), np.uint64(CL), np.uint64(ML)

    @cuda.jit
    def estep(feat, stride, lo, hi, coef_g, part, istate):
        if istate[0] != 0:
            return  # the fit has stopped
        tid = cuda.threadIdx.x
        ut = uint64(tid)
        w = ut // UWARP
        lane = ut % UWARP
        cs = cuda.shared.array(NC_SH, cdt)  # coefficients, component-major (M x S)
        if COEF_SHARED:
            for q in range(tid, NC, NT):
                cs[q] = coef_g[q]
        else:
            cs = coef_g
        gt = cuda.shared.array(SH_G, cdt)  # statistics vectors of the tile (T x GS)
        rt = cuda.shared.array(SH_R, cdt)  # log densities, then responsibilities (M x T)
        lls = cuda.shared.array(T, float64)
        acc = cuda.local.array(NACC, float64)  # this thread's statistics, over all tiles
        tmp = cuda.local.array(NACC, cdt)  # ... over one tile
        te = cuda.local.array(NE, cdt)
        gv = cuda.local.array(TB, cdt)
        hv = cuda.local.array(KL, cdt)
        crow = cuda.local.array(ML, uint64)  # offsets of this lane's components in cs
        rrow = cuda.local.array(MW, uint64)  # ... and of this warp's in rt
        jrow = cuda.local.array(TB, uint64)  # offsets of this lane's observations in gt
        kcol = cuda.local.array(KL, uint64)  # this lane's statistics
        mlo = (w * UCL + lane // UOL) * UML  # this lane's first component, log densities
        jlo = lane % UOL  # ... and first observation
        for a in range(ML):
            m = min(mlo + uint64(a), UM1)  # clamped: spare outputs are computed, not kept
            crow[a] = m * US
        for a in range(MW):
            rrow[a] = min(w * UMW + uint64(a), UM1) * UT
        for q in range(TB):
            jrow[q] = min(jlo + UOL * uint64(q), UT1) * UGS
        for c in range(KL):
            kcol[c] = min(lane + UWARP * uint64(c), US1)
        for q in range(NACC):
            acc[q] = 0.0
        exact = istate[4] != 0  # this iteration's coefficients are the exact pass's
        ll = 0.0
        n_tiles = (hi - lo + T - 1) // T
        for tl in range(cuda.blockIdx.x, n_tiles, cuda.gridDim.x):
            base = lo + tl * T
            cnt = min(T, hi - base)
            cuda.syncthreads()  # the previous tile is used up
            if tid < T:  # statistics vector g of observation tid: accum with r = 1
                row = gt[tid * GS : tid * GS + S]
                for k in range(S):
                    row[k] = ZERO
                if tid < cnt:
                    accum_f(row, 0, ONE, D, feat, stride, base + tid)
            cuda.syncthreads()
            # log densities: this thread's ML components x TB observations, G Theta^T
            if exact:  # centred, scaled (fused.py): each its own sum
                for a in range(ML):
                    m = min(mlo + uint64(a), UM1)
                    for q in range(TB):
                        row = gt[jrow[q] + U1 : jrow[q] + US]  # the features
                        te[a * TB + q] = exact_f(cs, m, D, row, 1, 0)
            else:
                for q in range(NE):
                    te[q] = ZERO
                k = U0
                while k < US:
                    for q in range(TB):
                        gv[q] = gt[jrow[q] + k]
                    for a in range(ML):
                        th = cs[crow[a] + k]
                        for q in range(TB):
                            te[a * TB + q] += th * gv[q]
                    k += U1
            for a in range(ML):
                m = mlo + uint64(a)
                for q in range(TB):
                    j = jlo + UOL * uint64(q)
                    if m <= UM1 and j <= UT1:
                        rt[m * UT + j] = te[a * TB + q]
            cuda.syncthreads()
            if tid < T:  # responsibilities of observation tid
                j = ut
                if tid < cnt:
                    top = rt[j]
                    r = UT + j
                    while r < SH_R:
                        top = max(top, rt[r])
                        r += UT
                    s = ZERO
                    r = j
                    while r < SH_R:
                        e = math.exp(rt[r] - top)
                        rt[r] = e
                        s += e
                        r += UT
                    ll += top + math.log(s)
                    inv = ONE / s
                    r = j
                    while r < SH_R:
                        rt[r] *= inv
                        r += UT
                else:
                    r = j
                    while r < SH_R:
                        rt[r] = ZERO
                        r += UT
            cuda.syncthreads()
            # partial statistics R^T G: this thread's MW components x KL statistics
            for q in range(NACC):
                tmp[q] = ZERO
            j = U0
            jg = U0
            ucnt = uint64(cnt)
            while j < ucnt:
                for c in range(KL):
                    hv[c] = gt[jg + kcol[c]]
                for a in range(MW):
                    r = rt[rrow[a] + j]
                    for c in range(KL):
                        tmp[a * KL + c] += r * hv[c]
                j += U1
                jg += UGS
            for q in range(NACC):
                acc[q] += tmp[q]
        b = cuda.blockIdx.x
        for a in range(MW):
            m = w * UMW + uint64(a)
            for c in range(KL):
                k = lane + UWARP * uint64(c)
                if m <= UM1 and k <= US1:
                    part[b, m * US + k] = acc[a * KL + c]
        if tid < T:
            lls[tid] = ll
        cuda.syncthreads()
        if tid == 0:
            tot = 0.0
            for j in range(T):
                tot += lls[j]
            part[b, NS] = tot

    @cuda.jit
    def reduce(part, nb, istate, fstate, stats_g, params_g, coef_g, totals_g, n, const,
               max_iter, tol, drop_rtol, reg, trace):
        if istate[0] != 0:
            return
        tid = cuda.threadIdx.x
        c = tid % RC
        g = tid // RC
        col = cuda.blockIdx.x * RC + c
        red = cuda.shared.array(NTR, float64)
        st = cuda.shared.array(NSX_SH, float64)
        dec = cuda.shared.array(MP1, int64)
        wm = cuda.shared.array(M, float64)  # the linear form's largest terms, per component
        s0 = s1 = s2 = s3 = 0.0  # four independent sums keep four loads in flight
        if col < NSX:
            bb = g
            while bb + 3 * RG < nb:
                s0 += part[bb, col]
                s1 += part[bb + RG, col]
                s2 += part[bb + 2 * RG, col]
                s3 += part[bb + 3 * RG, col]
                bb += 4 * RG
            while bb < nb:
                s0 += part[bb, col]
                bb += RG
        red[tid] = (s0 + s1) + (s2 + s3)
        cuda.syncthreads()
        if g == 0 and col < NSX:
            tot = 0.0
            for h in range(RG):
                tot += red[h * RC + c]
            stats_g[col] = tot
        cuda.threadfence()
        cuda.syncthreads()
        if tid == 0:
            dec[0] = cuda.atomic.add(istate, 3, 1)
        cuda.syncthreads()
        if dec[0] != cuda.gridDim.x - 1:
            return  # not the last block to finish
        # Every block wrote its sums and fenced before counting itself in, and this
        # block has not read them before, so plain loads see them (no stale L1 line).
        if STATS_SHARED:
            for q in range(tid, NSX, NTR):
                st[q] = stats_g[q]
        else:
            st = stats_g
        cuda.syncthreads()
        if tid == 0:
            istate[3] = 0  # counter, for the next iteration
            ll = st[NS] + const
            fstate[1] = ll
            if istate[1] < len(trace):  # the log-likelihood after istate[1] M-steps
                trace[istate[1]] = ll
            dec[0] = stop_f(ll, fstate[0], istate[1], max_iter, tol, drop_rtol)
            if dec[0] >= 0:
                istate[2] = dec[0]
                istate[0] = 1
        cuda.syncthreads()
        if dec[0] >= 0:
            return
        for m in range(tid, M, NTR):  # M-step, one thread per component
            dec[1 + m] = mstep_f(st[m * S : (m + 1) * S], params_g[m * P : (m + 1) * P],
                                 1, D, n, reg)
        cuda.syncthreads()
        if tid == 0:
            code = 0
            for m in range(M):
                if code == 0:
                    code = dec[1 + m]
            dec[0] = code
            if code != 0:
                istate[2] = code
                istate[0] = 1
            else:
                fstate[0] = fstate[1]
                istate[1] += 1
        cuda.syncthreads()
        if dec[0] != 0:
            return
        # the next iteration's pass (as fused.py's pieces choose it): the linear
        # form where its rounding is small beside this log-likelihood, else exact
        for m in range(tid, M, NTR):
            coef_f(params_g[m * P : (m + 1) * P], 1, D, coef_g[m * S : (m + 1) * S])
            wm[m] = term_f(coef_g, totals_g, m, D)
        cuda.syncthreads()
        if tid == 0:
            worst = 0.0
            for m in range(M):
                worst = max(worst, wm[m])
            istate[4] = 0 if EPS4 * worst <= TAU * abs(fstate[1]) else 1
        cuda.syncthreads()
        if istate[4] != 0:
            for m in range(tid, M, NTR):
                ecoef_f(params_g[m * P : (m + 1) * P], 1, D, coef_g[m * S : (m + 1) * S])

    return estep, reduce, NSX


_host_coef: dict = {}


def _grid_blocks(estep, dtype, threads: int, per_sm: int | None) -> int:
    """E-step blocks: ``per_sm`` (``Tuning.large_cuda_blocks_per_sm``) per multiprocessor,
    or as many as can be resident at once (one wave; each block walks its share of
    tiles) when that is None."""
    if numba.config.ENABLE_CUDASIM:
        return 2 * (per_sm or 1)
    n_sm = cuda.get_current_device().MULTIPROCESSOR_COUNT
    if per_sm is not None:
        return per_sm * n_sm
    cdt = float32 if dtype == np.float32 else float64
    try:
        kernel = estep.compile((cdt[::1], int64, int64, int64, cdt[::1], float64[:, ::1],
                                int64[::1]))
        return max(1, kernel.max_cooperative_grid_blocks(threads))
    except Exception:  # pragma: no cover - an occupancy query this numba-cuda lacks
        return 2 * n_sm


# Wall time of the last CUDA fit's iteration loop (launches, flag reads and
# the device work, synchronised at both ends) and its iterations, for
# benchmarks/bench_gaussian.py.
last_cuda_loop = {"seconds": 0.0, "iterations": 0, "blocks": 0}


class _CudaFits:
    """The kernels, device buffers and launch shapes of a batch's large CUDA fits, per dtype."""

    def __init__(self, job, stream, dtype, feat64=None):
        fam, M, D = job.model.family, job.model.n_components, job.model.n_dims
        (feat, self.stride, *_), offsets, const = job.kernel_data()
        self.dtype = np.dtype(dtype)
        tuning = self.tuning = job.tuning
        self.plan = plan(fam, M, D, self.dtype, tuning)
        self.estep, self.reduce, self.nsx = _kernels(fam, M, D, self.dtype, self.plan)
        ecoef = _host_coef.get(fam.name)
        if ecoef is None:
            ecoef = _host_coef[fam.name] = njit_cached(("large-exact-coef", fam.name),
                                                       error_model="python")(fam.exact_coef)
        self.ecoef = ecoef
        self.n_coef = fam.n_coef(M, D)
        self.tile, self.threads = self.plan["tile"], self.plan["threads"]
        self.max_blocks = tuning.large_cuda_max_blocks
        if self.max_blocks is None:
            self.max_blocks = _grid_blocks(self.estep, self.dtype, self.threads,
                                           tuning.large_cuda_blocks_per_sm)
        self.n_red = -(-self.nsx // self.plan["reduce_cols"])
        self.stream = stream
        if feat64 is not None and self.dtype != np.float64:  # cast there: no second copy over
            self.feat = _device_cast(feat64, self.dtype, stream)
        else:
            self.feat = cuda.to_device(feat.astype(self.dtype, copy=False), stream=stream)
        self.part = cuda.device_array((self.max_blocks, self.nsx), np.float64, stream=stream)
        self.stats = cuda.device_array(self.nsx, np.float64, stream=stream)
        # the reduction's trace without fit(trace=True): a run-time argument, zero-length
        # (the same compiled kernel either way)
        self.no_trace = cuda.device_array(0, np.float64, stream=stream)
        self.fam, self.M, self.D = fam, M, D

    def fit(self, lo, hi, tot, const, params, max_iter, tol, drop_rtol, reg, trace=None):
        """One fit from ``params`` (updated in place) -> (status, n_iter, loglik).

        The first E-step is the exact pass (coefficients from the host);
        each reduction picks the next one's.  ``trace`` (host float64, ``max_iter + 1``
        long, or None) gets the log-likelihood after each number of M-steps,
        ``trace[it]``, up to the fit's last.
        """
        stream = self.stream
        nb = min(self.max_blocks, -(-(hi - lo) // self.tile))
        coef = np.empty(self.n_coef, self.dtype)
        self.ecoef(params, self.M, self.D, coef)
        params_g = cuda.to_device(params, stream=stream)
        coef_g = cuda.to_device(coef, stream=stream)
        tot_g = cuda.to_device(tot, stream=stream)
        istate = cuda.to_device(np.array([0, 0, 0, 0, 1], np.int64), stream=stream)
        fstate = cuda.to_device(np.zeros(2, np.float64), stream=stream)
        trace_g = self.no_trace if trace is None else cuda.to_device(trace, stream=stream)
        istate_h = np.zeros(5, np.int64)
        fstate_h = np.zeros(2, np.float64)
        every = max(1, self.tuning.large_cuda_check_every)
        prepared = self.tuning.cuda_prepared_launch
        with warnings.catch_warnings():  # the reduction's grid is small by design
            warnings.filterwarnings("ignore", message="Grid size")
            est = prepared_launch(self.estep[nb, self.threads, stream],
                                  (self.feat, self.stride, lo, hi, coef_g, self.part, istate),
                                  prepared)
            red = prepared_launch(self.reduce[self.n_red, self.plan["reduce_threads"], stream],
                                  (self.part, nb, istate, fstate, self.stats, params_g, coef_g,
                                   tot_g, hi - lo, float(const), max_iter, tol, drop_rtol, reg,
                                   trace_g),
                                  prepared)
        stream.synchronize()
        t0 = time.perf_counter()
        for it in range(max_iter + 1):
            est()
            red()
            if (it + 1) % every == 0 or it == max_iter:
                istate.copy_to_host(istate_h, stream=stream)
                stream.synchronize()
                if istate_h[0]:
                    break
        if max_iter > 0:  # (not a float32 fit's float64 log-likelihood at its end)
            last_cuda_loop.update(seconds=time.perf_counter() - t0,
                                  iterations=int(istate_h[1]) + 1, blocks=nb)
        params_g.copy_to_host(params, stream=stream)
        fstate.copy_to_host(fstate_h, stream=stream)
        if trace is not None:
            trace_g.copy_to_host(trace, stream=stream)
        stream.synchronize()
        return int(istate_h[2]), int(istate_h[1]), float(fstate_h[1])


def run_fits(job, progress) -> None:
    """Each fit in turn over the whole GPU.

    With float32, as in the bulk engines (:func:`bulkem.fitting.driver.make_em`):
    the returned log-likelihood is a float64 E-step at the returned
    parameters, and a fit that float32 stops as degenerate is fitted again in
    float64 from its start (float32 statistics cannot resolve a component
    shrinking onto one point: its variance comes out <= 0).
    """
    fam = job.model.family
    (feat, *_), offsets, const = job.kernel_data()
    S = fam.n_stats(1, job.model.n_dims)
    stream = cuda.stream()
    narrow = np.dtype(job.dtype) != np.float64
    # float32 fits need float64 too (the log-likelihood at the end): the data goes over
    # once, in float64, and is cast on the GPU
    fits = {"float64": _CudaFits(job, stream, np.float64)}
    if narrow:
        fits[job.dtype.name] = _CudaFits(job, stream, job.dtype, feat64=fits["float64"].feat)

    drop64 = job.drop_rtol64
    trace = job.trace
    totals: dict = {}
    for f in range(len(job.fit_ds)):
        d = job.fit_ds[f]
        lo, hi = int(offsets[d]), int(offsets[d + 1])
        if d not in totals:
            totals[d] = _totals(fam, feat, lo, hi, job.model.n_dims, S)
        tot = totals[d]
        args = (lo, hi, tot, const[d])
        row = trace[f] if trace is not None else None  # (a float64 refit writes it again)
        st, it, ll = fits[job.dtype.name].fit(
            *args, job.params[f], job.max_iter, job.tol, job.drop_rtol, job.reg, row)
        if narrow and st >= DEGENERATE_NONFINITE:  # again in float64, from the start
            job.params[f] = job.init[f]
            st, it, ll = fits["float64"].fit(*args, job.params[f], job.max_iter, job.tol,
                                             drop64, job.reg, row)
        elif narrow:  # the log-likelihood in float64 at the returned parameters
            ll = fits["float64"].fit(*args, job.params[f].copy(), 0, job.tol, drop64, job.reg)[2]
            if row is not None:
                row[it] = ll  # the trace's last: the returned log-likelihood
        job.status[f] = st
        job.n_iter[f] = it
        job.loglik[f] = ll
        progress(1)


_cast_kernel: dict = {}


def _device_cast(src, dtype, stream):
    """A new device array: ``src`` (a device array) cast to ``dtype`` on the GPU.

    (The conversion rounds to nearest, as numpy's ``astype`` does on the host.)
    """
    if "k" not in _cast_kernel:
        @cuda.jit
        def cast(a, b):
            i = cuda.grid(1)
            if i < a.size:
                b[i] = a[i]

        _cast_kernel["k"] = cast
    out = cuda.device_array(src.shape, dtype, stream=stream)
    _cast_kernel["k"][(src.size + 255) // 256, 256, stream](src, out)
    return out


def _totals(fam, feat, lo, hi, n_dims, S) -> np.ndarray:
    """``sum_i g(x_i)`` of a dataset (for the rounding bound of the linear form)."""
    stride = len(feat) // fam.n_features(n_dims)
    f = feat.reshape(-1, stride)[:, lo:hi]
    tot = np.zeros(S)
    g = _host_accum.get(fam.name)
    if g is None:
        g = _host_accum[fam.name] = njit_cached(("large-totals", fam.name), parallel=True,
                                                error_model="python")(_make_totals(fam.accum))
    g(np.ascontiguousarray(f).reshape(-1), hi - lo, n_dims, tot)
    return tot


_host_accum: dict = {}


def _make_totals(accum):
    acc = njit(inline="always")(accum)

    block = 4096

    def totals(feat, n, D, tot):  # blocks on every core, their sums added in block order
        nb = (n + block - 1) // block
        part = np.zeros((nb, len(tot)))
        for b in prange(nb):
            row = part[b]
            for i in range(b * block, min(n, (b + 1) * block)):
                acc(row, 0, 1.0, D, feat, n, i)
        for b in range(nb):
            for s in range(len(tot)):
                tot[s] += part[b, s]

    return totals
