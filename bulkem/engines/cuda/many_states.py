"""Hidden Markov models with many states on the GPU: each step a small matrix product.

The bulk kernel gives a sequence to a lane and keeps its state vectors in
registers; with hundreds of states (the source paper's 64-512) that vector,
and the lane's N x N statistics, no longer fit.  Here one fit runs at a time
over the whole GPU, and every time step of the forward and backward passes is
a tiled matrix product over all sequences at once,

    alpha_t = (alpha_{t-1} A) * B[:, x_t],    beta_t = A (B[:, x_{t+1}] * beta_{t+1}),

16 x 16 tiles of (sequence, state) in a block, the rows kept in normal form
(scaled by the power of two of the previous row's sum, exactly; the
exponents give the log-likelihood).  The expected transition counts are one
more matrix product, ``C = U^T W`` over all (step, sequence) rows
(``U = alpha_t / Z_t``, ``W = B[:, x_{t+1}] * beta_{t+1}``; split over blocks,
the partial sums reduced in a fixed order), and ``xi = A * C``; posteriors
give the start, occupancy and symbol counts.  The M-step and the stopping
rule run on the device; the host reads one log-likelihood per iteration.

Categorical emissions, float64 (a float32 request computes in float64
here).  Sequences may have different lengths.  Chosen by
``engines.select.use_many_states`` (``Tuning.hmm_many_states``).
"""

from __future__ import annotations

import math

import numpy as np
from numba import float64, int64

from ...tuning import (
    CONVERGED,
    DEGENERATE_COLLAPSE,
    DEGENERATE_DECREASE,
    DEGENERATE_NONFINITE,
    MAX_ITER,
    MIN_COMPONENT_MASS,
)
from .compat import Launcher, cuda

TS = 16  # tile edge: a block is TS x TS threads
KS = 32  # split of the (step, sequence) rows of the transition counts' sum over blocks
KSG = 128  # ... of the start, occupancy and symbol counts' sum
RB = 4  # the transition counts' product: outputs per thread in each direction,
XT = TS * RB  # a block's tile edge,
RB2 = RB * RB  # (array sizes must be single named constants for the real compiler)
KT = 16  # and rows of U and W in shared memory at a time
LOADS = KT * XT // (TS * TS)  # shared values each thread loads per step
NT = 128  # threads per block of the per-state kernels
MAX_SYMBOLS = 64  # the per-state symbol counts live in a thread's local array


@cuda.jit(device=True)
def _exponent(s):
    return math.frexp(s)[1] if s > 0.0 else 0


@cuda.jit
def _fwd0(x, off, start, B, V, alpha, M, N):
    s, j = cuda.grid(2)
    if s < M and j < N:
        alpha[0, s, j] = start[j] * B[j * V + x[off[s]]]


@cuda.jit
def _fwd_step(t, x, off, A, B, V, alpha, ea, M, N):
    """alpha_t of every sequence still running at step t; ea[t-1, s] the scale applied."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    j = cuda.blockIdx.x * TS + tx
    s = cuda.blockIdx.y * TS + ty
    at = cuda.shared.array((TS, TS), float64)
    ct = cuda.shared.array((TS, TS), float64)
    rs = cuda.shared.array((TS, TS), float64)
    live = False
    if s < M:
        live = off[s] + t < off[s + 1]
    acc = 0.0
    rsum = 0.0
    for i0 in range(0, N, TS):
        i = i0 + tx
        v = alpha[t - 1, s, i] if live and i < N else 0.0
        at[ty, tx] = v
        rsum += v
        r = i0 + ty
        ct[ty, tx] = A[r * N + j] if r < N and j < N else 0.0
        cuda.syncthreads()
        for k in range(TS):
            acc += at[ty, k] * ct[k, tx]
        cuda.syncthreads()
    rs[ty, tx] = rsum
    cuda.syncthreads()
    tot = 0.0
    for k in range(TS):
        tot += rs[ty, k]
    e = _exponent(tot)
    if live and j < N:
        alpha[t, s, j] = math.ldexp(acc * B[j * V + x[off[s] + t]], -e)
        if cuda.blockIdx.x == 0 and tx == 0:
            ea[t - 1, s] = e


@cuda.jit
def _bwd_last(off, beta, M, N):
    s, i = cuda.grid(2)
    if s < M and i < N:
        beta[off[s + 1] - off[s] - 1, s, i] = 1.0


@cuda.jit
def _bwd_step(t, x, off, AT, B, V, beta, eb, M, N):
    """beta_t of every sequence with a step t + 1; eb[t + 1, s] the scale applied."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    i = cuda.blockIdx.x * TS + tx
    s = cuda.blockIdx.y * TS + ty
    wt = cuda.shared.array((TS, TS), float64)
    ct = cuda.shared.array((TS, TS), float64)
    rs = cuda.shared.array((TS, TS), float64)
    live = False
    if s < M:
        live = off[s] + t + 1 < off[s + 1]
    acc = 0.0
    rsum = 0.0
    for j0 in range(0, N, TS):
        j = j0 + tx
        w = 0.0
        if live and j < N:
            b = beta[t + 1, s, j]
            rsum += b
            w = B[j * V + x[off[s] + t + 1]] * b
        wt[ty, tx] = w
        r = j0 + ty
        ct[ty, tx] = AT[r * N + i] if r < N and i < N else 0.0
        cuda.syncthreads()
        for k in range(TS):
            acc += wt[ty, k] * ct[k, tx]
        cuda.syncthreads()
    rs[ty, tx] = rsum
    cuda.syncthreads()
    tot = 0.0
    for k in range(TS):
        tot += rs[ty, k]
    e = _exponent(tot)
    if live and i < N:
        beta[t, s, i] = math.ldexp(acc, -e)
        if cuda.blockIdx.x == 0 and tx == 0:
            eb[t + 1, s] = e


@cuda.jit
def _norms(off, alpha, beta, ea, z, ll, M, N):
    """Z[t, s] = alpha_t . beta_t of every step; ll[s] the sequence's log-likelihood."""
    t, s = cuda.grid(2)
    if s >= M or off[s] + t >= off[s + 1]:
        return
    acc = 0.0
    for i in range(N):
        acc += alpha[t, s, i] * beta[t, s, i]
    z[t, s] = acc
    T = off[s + 1] - off[s]
    if t == T - 1:
        tot = 0.0
        for i in range(N):
            tot += alpha[t, s, i]
        scale = 0
        for k in range(T - 1):
            scale += ea[k, s]
        ll[s] = scale * math.log(2.0) + math.log(tot)


@cuda.jit
def _xi_partial(x, off, B, V, alpha, beta, eb, z, M, N, rows, part):
    """part[kz, i, j] = sum over this block's rows (t, s), t + 1 < T_s, of U[i] W[j].

    A block computes a 64 x 64 tile of C = U^T W, each thread 4 x 4 of it in registers,
    from 16 rows of U and W at a time in shared memory.
    """
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    tid = ty * TS + tx
    ib = cuda.blockIdx.y * XT
    jb = cuda.blockIdx.x * XT
    kz = cuda.blockIdx.z
    ut = cuda.shared.array((KT, XT), float64)
    wt = cuda.shared.array((KT, XT), float64)
    acc = cuda.local.array(RB2, float64)
    for q in range(RB2):
        acc[q] = 0.0
    per = (rows + cuda.gridDim.z - 1) // cuda.gridDim.z
    lo = kz * per
    hi = min(rows, lo + per)
    for k0 in range(lo, hi, KT):
        for q in range(LOADS):
            idx = tid + q * TS * TS
            kk = idx // XT
            c = idx - kk * XT
            k = k0 + kk
            u = 0.0
            w = 0.0
            if k < hi:
                t = k // M
                s = k - t * M
                if off[s] + t + 1 < off[s + 1]:
                    if ib + c < N:
                        u = math.ldexp(alpha[t, s, ib + c], -int(eb[t + 1, s])) / z[t, s]
                    if jb + c < N:
                        w = B[(jb + c) * V + x[off[s] + t + 1]] * beta[t + 1, s, jb + c]
            ut[kk, c] = u
            wt[kk, c] = w
        cuda.syncthreads()
        for kk in range(KT):
            for a in range(RB):
                ua = ut[kk, ty + TS * a]
                for b in range(RB):
                    acc[a * RB + b] += ua * wt[kk, tx + TS * b]
        cuda.syncthreads()
    for a in range(RB):
        i = ib + ty + TS * a
        for b in range(RB):
            j = jb + tx + TS * b
            if i < N and j < N:
                part[kz, i, j] = acc[a * RB + b]


@cuda.jit
def _gamma_partial(x, off, V, alpha, beta, z, M, N, rows, part):
    """part[kz, i, :] = (start, occupancy, symbol counts) of state i over this block's rows."""
    i = cuda.blockIdx.x * NT + cuda.threadIdx.x
    kz = cuda.blockIdx.y
    if i >= N:
        return
    cnt = cuda.local.array(MAX_SYMBOLS, float64)
    for v in range(V):
        cnt[v] = 0.0
    per = (rows + cuda.gridDim.y - 1) // cuda.gridDim.y
    lo = kz * per
    hi = min(rows, lo + per)
    st = 0.0
    occ = 0.0
    for k in range(lo, hi):
        t = k // M
        s = k - t * M
        if off[s] + t < off[s + 1]:
            g = alpha[t, s, i] * beta[t, s, i] / z[t, s]
            occ += g
            if t == 0:
                st += g
            cnt[x[off[s] + t]] += g
    part[kz, i, 0] = st
    part[kz, i, 1] = occ
    for v in range(V):
        part[kz, i, 2 + v] = cnt[v]


@cuda.jit
def _sum_parts(part, out):
    """out[e] = sum over kz of part[kz, e] (in order), for every element e of a partial sum."""
    e = cuda.grid(1)
    if e < out.shape[0]:
        acc = 0.0
        for kz in range(part.shape[0]):
            acc += part[kz, e]
        out[e] = acc


@cuda.jit
def _mstep(xi_sum, g_sum, ll, A, AT, B, start, V, M, N, state, fstate, max_iter, tol,
           drop_rtol, min_mass, update, trace):
    """One block: the stopping rule, then the M-step from the summed statistics (a thread a row).

    ``state``: [done, n_iter, status, n_seq]; ``fstate``: [ll_prev, ll]; ``trace[it]``:
    the log-likelihood after ``it`` M-steps, as far as ``trace`` is long (zero-length
    without ``fit(trace=True)``).
    """
    tid = cuda.threadIdx.x
    dec = cuda.shared.array(2, int64)
    red = cuda.shared.array(NT, float64)
    acc = 0.0
    for s in range(tid, M, NT):
        acc += ll[s]
    red[tid] = acc
    cuda.syncthreads()
    if tid == 0:
        tot = 0.0
        for k in range(NT):
            tot += red[k]
        fstate[1] = tot
        it = state[1]
        if it < len(trace):
            trace[it] = tot
        code = -1
        if not math.isfinite(tot):
            code = DEGENERATE_NONFINITE
        elif it > 0 and tot < fstate[0] - drop_rtol * abs(fstate[0]):
            code = DEGENERATE_DECREASE
        elif it > 0 and abs(tot - fstate[0]) < (tol if tol >= 0.0 else -tol * abs(fstate[0])):
            code = CONVERGED
        elif it == max_iter:
            code = MAX_ITER
        dec[0] = code
        dec[1] = 0
    cuda.syncthreads()
    if dec[0] >= 0:
        if tid == 0:
            state[0] = 1
            state[2] = dec[0]
        return
    for i in range(tid, N, NT):
        occ = g_sum[i * (2 + V) + 1]
        if not occ >= min_mass:
            dec[1] = 1
        if update[0]:
            start[i] = g_sum[i * (2 + V)] / M
        if update[1]:
            row = 0.0
            for j in range(N):
                c = xi_sum[i * N + j] * A[i * N + j]
                xi_sum[i * N + j] = c
                row += c
            if row > 0.0:  # else no transition out of state i is expected: the row stays
                inv = 1.0 / row  # (as the bulk kernels' chain M-step, bulkem.models.hmm.chain)
                for j in range(N):
                    a = xi_sum[i * N + j] * inv
                    A[i * N + j] = a
                    AT[j * N + i] = a
        if update[2]:
            for v in range(V):
                B[i * V + v] = g_sum[i * (2 + V) + 2 + v] / occ
    cuda.syncthreads()
    if tid == 0:
        if dec[1]:
            state[0] = 1
            state[2] = DEGENERATE_COLLAPSE
        else:
            fstate[0] = fstate[1]
            state[1] += 1


class Pass:
    """Device arrays of one dataset's sequences under one model, and the launches over them.

    ``start``, ``A`` (and its transpose ``AT``) and ``B`` are the model's device
    arrays: write a fit's parameters with :meth:`set_params`.  The per-step
    kernels are launched through prepared launchers (only the step changes).
    """

    def __init__(self, x: np.ndarray, off: np.ndarray, N: int, V: int, stream=None):
        self.M = len(off) - 1
        self.N, self.V = N, V
        self.T = int(np.diff(off).max())
        self.stream = stream or cuda.stream()
        st, M = self.stream, self.M
        self.x = cuda.to_device(x.astype(np.int32), stream=st)
        self.off = cuda.to_device(off.astype(np.int64), stream=st)
        self.start = cuda.device_array(N, np.float64, stream=st)
        self.A = cuda.device_array(N * N, np.float64, stream=st)
        self.AT = cuda.device_array(N * N, np.float64, stream=st)
        self.B = cuda.device_array(N * V, np.float64, stream=st)
        self.alpha = cuda.device_array((self.T, M, N), np.float64, stream=st)
        self.beta = cuda.device_array((self.T, M, N), np.float64, stream=st)
        self.ea = cuda.device_array((self.T, M), np.int32, stream=st)
        self.eb = cuda.device_array((self.T, M), np.int32, stream=st)
        self.z = cuda.device_array((self.T, M), np.float64, stream=st)
        self.ll = cuda.device_array(M, np.float64, stream=st)
        self.rows = self.T * M
        self.xi_part = cuda.device_array((KS, N, N), np.float64, stream=st)
        self.g_part = cuda.device_array((KSG, N, 2 + V), np.float64, stream=st)
        self.xi_sum = cuda.device_array(N * N, np.float64, stream=st)
        self.g_sum = cuda.device_array(N * (2 + V), np.float64, stream=st)
        # the M-step kernel's trace without fit(trace=True): a run-time argument,
        # zero-length (the same compiled kernel either way)
        self.no_trace = cuda.device_array(0, np.float64, stream=st)
        sn = ((N + TS - 1) // TS, (M + TS - 1) // TS)
        ms = ((M + TS - 1) // TS, (N + TS - 1) // TS)
        self._fwd0 = Launcher(_fwd0[ms, (TS, TS), st],
                              (self.x, self.off, self.start, self.B, V, self.alpha, M, N))
        self._fwd = Launcher(_fwd_step[sn, (TS, TS), st],
                             (1, self.x, self.off, self.A, self.B, V, self.alpha, self.ea, M, N))
        self._bwd0 = Launcher(_bwd_last[ms, (TS, TS), st], (self.off, self.beta, M, N))
        self._bwd = Launcher(_bwd_step[sn, (TS, TS), st],
                             (0, self.x, self.off, self.AT, self.B, V, self.beta, self.eb, M, N))
        self._norms = Launcher(
            _norms[((self.T + TS - 1) // TS, (M + TS - 1) // TS), (TS, TS), st],
            (self.off, self.alpha, self.beta, self.ea, self.z, self.ll, M, N))
        self._xi = Launcher(
            _xi_partial[((N + XT - 1) // XT, (N + XT - 1) // XT, KS), (TS, TS), st],
            (self.x, self.off, self.B, V, self.alpha, self.beta, self.eb, self.z, M, N,
             self.rows, self.xi_part))
        n_g = N * (2 + V)
        self._xi_sum = Launcher(_sum_parts[(N * N + 255) // 256, 256, st],
                                (self.xi_part.reshape(KS, N * N), self.xi_sum))
        self._g_sum = Launcher(_sum_parts[(n_g + 255) // 256, 256, st],
                               (self.g_part.reshape(KSG, n_g), self.g_sum))
        self._gamma = Launcher(
            _gamma_partial[((N + NT - 1) // NT, KSG), NT, st],
            (self.x, self.off, V, self.alpha, self.beta, self.z, M, N, self.rows, self.g_part))

    def set_params(self, params: np.ndarray) -> None:
        """A fit's parameters (startprob, transmat, emissionprob) into the device arrays."""
        N, st = self.N, self.stream
        A = np.ascontiguousarray(params[N:N + N * N])
        self.start.copy_to_device(np.ascontiguousarray(params[:N]), stream=st)
        self.A.copy_to_device(A, stream=st)
        self.AT.copy_to_device(np.ascontiguousarray(A.reshape(N, N).T).reshape(-1), stream=st)
        self.B.copy_to_device(np.ascontiguousarray(params[N + N * N:]), stream=st)

    def forward(self) -> None:
        """alpha of every step and sequence (and the forward exponents)."""
        self._fwd0()
        for t in range(1, self.T):
            self._fwd.set(0, t)
            self._fwd()

    def backward(self) -> None:
        self._bwd0()
        for t in range(self.T - 2, -1, -1):
            self._bwd.set(0, t)
            self._bwd()

    def loglik(self) -> None:
        """Z of every step, and every sequence's log-likelihood (``self.ll``)."""
        self._norms()

    def iteration(self, max_iter: int, tol: float, drop_rtol: float, update: np.ndarray,
                  trace=None):
        """A Baum-Welch iteration's launches, and the state they keep on the device.

        Returns ``(state, fstate, iteration)``: ``state`` [done, n_iter, status, -],
        ``fstate`` [previous log-likelihood, log-likelihood] (device arrays), and
        ``iteration()``, which queues an E-step, the stopping rule and an M-step.
        ``trace`` (a float64 device array, ``max_iter + 1`` long, or None) gets the
        log-likelihood of each iteration, ``trace[n_iter]`` the fit's last.
        """
        st = self.stream
        if trace is None:
            trace = self.no_trace
        state = cuda.to_device(np.array([0, 0, 0, 0], np.int64), stream=st)
        fstate = cuda.to_device(np.zeros(2), stream=st)
        upd = cuda.to_device(np.asarray(update, np.int32), stream=st)
        mstep = Launcher(_mstep[1, NT, st], (self.xi_sum, self.g_sum, self.ll, self.A, self.AT,
                                             self.B, self.start, self.V, self.M, self.N, state,
                                             fstate, max_iter, tol, drop_rtol,
                                             MIN_COMPONENT_MASS, upd, trace))

        def iteration() -> None:
            self.forward()
            self.backward()
            self.loglik()
            self.statistics()
            mstep()

        return state, fstate, iteration

    def statistics(self) -> None:
        """The expected transition, start, occupancy and symbol counts (``xi_sum``, ``g_sum``)."""
        self._xi()
        self._gamma()
        self._xi_sum()
        self._g_sum()


def run_fits(job, progress) -> None:
    """Every fit of a job, one after another, each over the whole GPU (in place; starts drawn).

    A weighted model (``fit(weights=...)``) goes to the bulk kernel: the tiled kernels
    here have no weights."""
    if getattr(job.model, "weighted", False):
        from . import run_fits as bulk_fits

        bulk_fits(job, progress)
        return
    m = job.model
    N, V = m.n_states, m.K
    lay = m.layout
    data = job.data
    update = np.array(["s" in m.update, "t" in m.update, "e" in m.update], dtype=np.int32)
    passes: dict = {}
    for f in range(len(job.fit_ds)):
        d = int(job.fit_ds[f])
        if d not in passes:
            passes.clear()  # one dataset's arrays at a time
            u0, u1 = data.groups[d], data.groups[d + 1]
            off = data.units[u0:u1 + 1] - data.units[u0]
            x = data.values[data.units[u0]:data.units[u1]]
            passes[d] = Pass(x, off, N, V)
        p = passes[d]
        st = p.stream
        p.set_params(job.params[f])
        trace = None if job.trace is None else cuda.to_device(job.trace[f], stream=st)
        state, fstate, iteration = p.iteration(job.max_iter, job.tol, job.drop_rtol, update,
                                               trace)
        host = np.zeros(4, np.int64)
        while True:
            iteration()
            state.copy_to_host(host, stream=st)
            st.synchronize()
            if host[0]:
                break
        fs = fstate.copy_to_host(stream=st)
        if trace is not None:
            trace.copy_to_host(job.trace[f], stream=st)
        st.synchronize()
        job.params[f, :N] = p.start.copy_to_host()
        job.params[f, N:lay.p_emit] = p.A.copy_to_host()
        job.params[f, lay.p_emit:] = p.B.copy_to_host()
        job.status[f] = host[2]
        job.n_iter[f] = host[1]
        job.loglik[f] = fs[1]
        progress(1)


__all__ = ["run_fits", "Pass"]
