"""The GPU scan's kernels with a warp per chunk: the lanes share each element's matrices.

The thread-per-chunk kernels of :mod:`bulkem.engines.kalman_cuda` keep a
chunk's matrices in local arrays: for ten states (AR(10)) that is ten 10 x 10
float64 matrices per thread, 255 registers and ~9.6 KB of local memory, and
at the upper levels of the scan few threads: each combine waits on local
memory.  Here a warp takes a chunk: the matrices live in shared memory (one
region per warp), and the lanes compute their entries, each entry's dot
product summed in the order of :mod:`bulkem.models.ssm.scan` and
:mod:`bulkem.models.ssm.kalman` (the same operations on the same values, so
the same numbers), with ``cuda.syncwarp`` between the stages that read what
another lane wrote.  The Gaussian elimination of the combine gives a lane
each column of ``[D | D^-1 A1 | D^-1 C1 | z]``: the pivot row is found by
every lane alike, the rows below it are updated column by column, and the
back substitution runs in each lane's own columns.

Kernels (``warp_programs``), a chunk per warp, ``WPB`` warps per block:

* ``up0``: the element of each level-0 chunk (the conditional filter);
* ``up``: the combine of each chunk's elements at a level above 0;
* ``down``: each element's exclusive prefix.  A prefix starts at a series'
  first element, whose ``A``, ``eta`` and ``J`` are 0, and so are those of
  every prefix: only ``(b, C)`` is computed and stored (``NP = NX + NX^2``
  values), by :func:`combine_prefix`'s half of the combine;
* ``final``: the Kalman filter of each level-0 chunk from its prefix, with
  the log-likelihood terms.

Elements are stored element by element (shape (n, NE), a warp reads one
element's values side by side), prefixes likewise (shape (n, NP)).

These functions loop over a warp's lanes, so they are written for the GPU
alone (the CPU engine runs the one-thread functions of ``scan.py``); the
tests compare them with those, bit for bit, under the simulator.
"""

from __future__ import annotations

import math

import numpy as np
from numba import config as numba_config
from numba import float32, float64

from ...models.ssm.statespace import COMPANION, IDENTITY
from .compat import SIMULATED, cuda

WARP = 32
SHARED_BYTES = 48 * 1024  # static shared memory per block

_INLINE = {} if numba_config.ENABLE_CUDASIM else {"forceinline": True}


def _device(fn):
    return cuda.jit(device=True, **_INLINE)(fn)


def _install_simulated_syncwarp() -> None:
    """Under the simulator (which has no ``syncwarp``): the warp's threads meet at a barrier."""
    import threading

    from numba.cuda.simulator import kernelapi

    from ._cudasim import _WARP, _warp_slot

    if hasattr(kernelapi.FakeCUDAModule, "syncwarp"):
        return

    def syncwarp(self, mask=0xFFFFFFFF):
        tid = threading.current_thread().thread_id
        _warp_slot(tid // _WARP, int(mask) & 0xFFFFFFFF)[0].wait()

    kernelapi.FakeCUDAModule.syncwarp = syncwarp


if SIMULATED:
    _install_simulated_syncwarp()


def shared_sizes(nx: int, ny: int) -> dict:
    """Shared-memory values per warp of each kernel (dtype-sized), by kernel name."""
    nxx, nxy, nyy = nx * nx, nx * ny, ny * ny
    ne = 3 * nxx + 2 * nx
    model = 2 * nxx + nxy + nyy  # F, Q, H, R
    return {
        "up0": ne + nxx + nx + nxx + nxx + 2 * nxy + nyy + model,
        "up": 2 * ne + nx * (3 * nx + 1) + nxx + nx,
        "down": (nx + nxx) + ne + nx * (2 * nx + 1) + nxx,
        "final": 2 * (nx + nxx) + nxx + nxy + nyy + model,
    }


def warps_per_block(nx: int, ny: int, dtype, wanted: int) -> int:
    """Warps per block (at most ``wanted``) whose shared memory fits one block, or 0 if one
    warp's does not (then the thread-per-chunk kernels run)."""
    per = max(shared_sizes(nx, ny).values()) * np.dtype(dtype).itemsize
    return max(0, min(int(wanted), SHARED_BYTES // per))


def level0_threads(nx: int, dtype, wanted: int) -> int:
    """Threads per block of :func:`level0_programs` (at most ``wanted``): three NX x NX
    matrices per thread in one block's shared memory."""
    return max(1, min(int(wanted), SHARED_BYTES // (3 * nx * nx * np.dtype(dtype).itemsize)))


def level0_programs(nx: int, ny: int, kind: int, dtype, tpb: int, steps, sc) -> dict:
    """Level 0 of the scan with a thread per chunk, its largest matrices in shared memory.

    The functions of ``scan.py`` (``chunk_element``) and ``kalman.py``
    (``filter_range``) run as in the thread-per-chunk kernels of
    :mod:`bulkem.engines.kalman_cuda` (the same operations), but ``A, C, J``
    (``up0``) and ``P`` (``final``) lie in shared memory, entry ``k`` of thread
    ``t`` at ``[k, t]`` (neighbouring threads, neighbouring banks), rather
    than in local memory: for AR(10) that was ~4 KB of local memory per thread
    spilling to the GPU's DRAM.  ``tpb`` threads per block
    (:func:`level0_threads`).  Elements and prefixes are stored element by
    element, as the warp kernels read them.

    Returns
    -------
    dict
        ``up0`` and ``final``, with the arguments of the warp kernels.
    """
    dt = np.dtype(dtype).type
    cdt = float32 if dt == np.float32 else float64
    NX, NY, NXX, NXY, NYY = nx, ny, nx * nx, nx * ny, ny * ny
    OB, OC, OE, OJ = NXX, NXX + NX, 2 * NXX + NX, 2 * NXX + 2 * NX
    TPB = int(tpb)
    chunk_element, set_prior, predict, filter_range = (
        sc.chunk_element, steps.set_prior, steps.predict, steps.filter_range)

    @cuda.jit
    def up0(y, lo, hi, first, last, series, midx, F, H, Q, R, m0, P0, E, fail):
        shA = cuda.shared.array((NXX, TPB), cdt)
        shC = cuda.shared.array((NXX, TPB), cdt)
        shJ = cuda.shared.array((NXX, TPB), cdt)
        c = cuda.grid(1)
        if c >= lo.shape[0]:
            return
        fail[c] = -1
        if last[c]:
            return
        t = cuda.threadIdx.x
        A = shA[:, t]
        C = shC[:, t]
        J = shJ[:, t]
        k = midx[series[c]]
        b = cuda.local.array(NX, cdt)
        eta = cuda.local.array(NX, cdt)
        T = cuda.local.array(NXX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        G = cuda.local.array(NXY, cdt)
        f = chunk_element(F[k], H[k], Q[k], R[k], m0[k], P0[k], y, lo[c], hi[c] - lo[c],
                          first[c] != 0, A, b, C, eta, J, T, U, L, e, G)
        if f >= 0:
            fail[c] = lo[c] + f
        for q in range(NXX):
            E[c, q] = A[q]
            E[c, OC + q] = C[q]
            E[c, OJ + q] = J[q]
        for q in range(NX):
            E[c, OB + q] = b[q]
            E[c, OE + q] = eta[q]

    @cuda.jit
    def final(y, lo, hi, first, series, midx, F, H, Q, R, m0, P0, prefix, ll, nobs, fail):
        shP = cuda.shared.array((NXX, TPB), cdt)
        c = cuda.grid(1)
        if c >= lo.shape[0]:
            return
        P = shP[:, cuda.threadIdx.x]
        k = midx[series[c]]
        m = cuda.local.array(NX, cdt)
        T = cuda.local.array(NXX, cdt)
        U = cuda.local.array(NXY, cdt)
        L = cuda.local.array(NYY, cdt)
        e = cuda.local.array(NY, cdt)
        if first[c]:
            set_prior(m0[k], P0[k], m, P)
        else:  # the prefix holds the filtered law of the step before the chunk
            for q in range(NX):
                m[q] = prefix[c, q]
            for q in range(NXX):
                P[q] = prefix[c, NX + q]
            predict(F[k], Q[k], m, P, T)
        a, n, f = filter_range(F[k], H[k], Q[k], R[k], y, lo[c], hi[c] - lo[c], 1, m, P, T,
                               U, L, e)
        ll[c] = a
        nobs[c] = n
        fail[c] = lo[c] + f if f >= 0 else -1

    return dict(up0=up0, final=final, tpb=TPB)


def warp_programs(nx: int, ny: int, kind: int, dtype, wpb: int, steps,
                  max_registers: int = 0) -> dict:
    """The warp-per-chunk scan kernels for one (dimensions, structure, dtype, warps per block).

    Parameters
    ----------
    nx, ny, kind, dtype
        As for :func:`bulkem.models.ssm.kalman.make_kalman`.
    wpb : int
        Warps (chunks) per block (:func:`warps_per_block`).
    steps : KalmanSteps
        The CUDA device functions of ``make_kalman`` (``is_missing``, ``loglik_term``).
    max_registers : int, default 0
        Registers per thread at most of ``up`` and ``down`` (0: the compiler's choice).

    Returns
    -------
    dict
        ``up0, up, down, final`` (kernels, launched with ``32 * wpb`` threads
        per block, a chunk per warp), ``combine`` and ``combine_prefix``
        (device functions, for the tests), ``ne``, ``np`` (values per element
        and per prefix), ``wpb``.
    """
    dt = np.dtype(dtype).type
    cdt = float32 if dt == np.float32 else float64
    NX, NY = nx, ny
    NXX, NXY, NYY = nx * nx, nx * ny, ny * ny
    KIND = kind
    ZERO, ONE = dt(0.0), dt(1.0)
    W = WARP
    OB, OC, OE, OJ = NXX, NXX + NX, 2 * NXX + NX, 2 * NXX + 2 * NX
    NE = 3 * NXX + 2 * NX
    NP = NX + NXX
    NC3 = 3 * NX + 1  # columns of [D | Z1 | Z2 | z]
    NC2 = 2 * NX + 1  # columns of [D | Z2 | z]
    sizes = shared_sizes(nx, ny)
    WPB = int(wpb)
    SH_UP0, SH_UP, SH_DOWN, SH_FINAL = (WPB * sizes[k] for k in ("up0", "up", "down", "final"))
    PW_UP0, PW_UP, PW_DOWN, PW_FINAL = (sizes[k] for k in ("up0", "up", "down", "final"))
    is_missing, loglik_term = steps.is_missing, steps.loglik_term

    def make_solve(NC):
        def solve(M, lane):
            """``M = [D | rhs]`` (NX x NC, row-major) <- ``[* | D^-1 rhs]``: scan.py's solve,
            a lane per column."""
            for c in range(NX):
                p = c
                big = abs(M[c * NC + c])
                for r in range(c + 1, NX):
                    v = abs(M[r * NC + c])
                    if v > big:
                        big = v
                        p = r
                cuda.syncwarp()
                if p != c:
                    for col in range(lane, NC, W):
                        v = M[c * NC + col]
                        M[c * NC + col] = M[p * NC + col]
                        M[p * NC + col] = v
                    cuda.syncwarp()
                piv = M[c * NC + c]
                for col in range(lane, NC, W):
                    if col > c:
                        for r in range(c + 1, NX):
                            f = M[r * NC + c] / piv
                            if f != ZERO:
                                M[r * NC + col] -= f * M[c * NC + col]
                cuda.syncwarp()
            for col in range(NX + lane, NC, W):  # back substitution, each lane its columns
                for c in range(NX - 1, -1, -1):
                    piv = M[c * NC + c]
                    s = M[c * NC + col]
                    for k in range(c + 1, NX):
                        s -= M[c * NC + k] * M[k * NC + col]
                    M[c * NC + col] = s / piv
            cuda.syncwarp()

        return _device(solve)

    solve3, solve2 = make_solve(NC3), make_solve(NC2)

    def combine(E1, E2, M, T, w, lane):
        """``E1 <- E1 (x) E2`` (elements in the layout of ``scan.py``, in shared memory);
        scratch ``M`` NX x (3 NX + 1), ``T`` NX*NX, ``w`` NX."""
        for e in range(lane, NXX, W):  # D = I + C1 J2, Z1 = A1, Z2 = C1
            i = e // NX
            j = e - i * NX
            s = ONE if i == j else ZERO
            for k in range(NX):
                s += E1[OC + i * NX + k] * E2[OJ + k * NX + j]
            M[i * NC3 + j] = s
            M[i * NC3 + NX + j] = E1[e]
            M[i * NC3 + 2 * NX + j] = E1[OC + e]
        for i in range(lane, NX, W):
            s = E1[OB + i]  # z = b1 + C1 eta2
            for k in range(NX):
                s += E1[OC + i * NX + k] * E2[OE + k]
            M[i * NC3 + 3 * NX] = s
            s = E2[OE + i]  # w = eta2 - J2 b1
            for k in range(NX):
                s -= E2[OJ + i * NX + k] * E1[OB + k]
            w[i] = s
        cuda.syncwarp()
        solve3(M, lane)  # Z1 = D^-1 A1, Z2 = D^-1 C1, z = D^-1 (b1 + C1 eta2)
        for i in range(lane, NX, W):  # eta = Z1^T w + eta1
            s = E1[OE + i]
            for k in range(NX):
                s += M[k * NC3 + NX + i] * w[k]
            E1[OE + i] = s
        for e in range(lane, NXX, W):  # T = J2 A1
            i = e // NX
            j = e - i * NX
            s = ZERO
            for k in range(NX):
                s += E2[OJ + i * NX + k] * E1[k * NX + j]
            T[e] = s
        cuda.syncwarp()
        for e in range(lane, NXX, W):
            i = e // NX
            j = e - i * NX
            if j >= i:  # J = Z1^T T + J1 (upper triangle, mirrored)
                s = E1[OJ + e]
                for k in range(NX):
                    s += M[k * NC3 + NX + i] * T[k * NX + j]
                E1[OJ + e] = s
                E1[OJ + j * NX + i] = s
        for i in range(lane, NX, W):  # b = A2 z + b2
            s = E2[OB + i]
            for k in range(NX):
                s += E2[i * NX + k] * M[k * NC3 + 3 * NX]
            E1[OB + i] = s
        for e in range(lane, NXX, W):  # A = A2 Z1; A2 Z2 into D's columns (D is spent)
            i = e // NX
            j = e - i * NX
            s = ZERO
            r = ZERO
            for k in range(NX):
                s += E2[i * NX + k] * M[k * NC3 + NX + j]
                r += E2[i * NX + k] * M[k * NC3 + 2 * NX + j]
            E1[e] = s
            M[i * NC3 + j] = r
        cuda.syncwarp()
        for e in range(lane, NXX, W):
            i = e // NX
            j = e - i * NX
            if j >= i:  # C = (A2 Z2) A2^T + C2 (upper triangle, mirrored)
                s = E2[OC + e]
                for k in range(NX):
                    s += M[i * NC3 + k] * E2[j * NX + k]
                E1[OC + e] = s
                E1[OC + j * NX + i] = s
        cuda.syncwarp()

    def combine_prefix(P, E2, M, T, lane):
        """``P <- P (x) E2`` for a prefix ``P = (b, C)`` (its ``A, eta, J`` are 0): the ``b, C``
        of :func:`combine`, the same operations; scratch ``M`` NX x (2 NX + 1), ``T``."""
        for e in range(lane, NXX, W):  # D = I + C1 J2, Z2 = C1
            i = e // NX
            j = e - i * NX
            s = ONE if i == j else ZERO
            for k in range(NX):
                s += P[NX + i * NX + k] * E2[OJ + k * NX + j]
            M[i * NC2 + j] = s
            M[i * NC2 + NX + j] = P[NX + e]
        for i in range(lane, NX, W):
            s = P[i]  # z = b1 + C1 eta2
            for k in range(NX):
                s += P[NX + i * NX + k] * E2[OE + k]
            M[i * NC2 + 2 * NX] = s
        cuda.syncwarp()
        solve2(M, lane)
        for i in range(lane, NX, W):  # b = A2 z + b2
            s = E2[OB + i]
            for k in range(NX):
                s += E2[i * NX + k] * M[k * NC2 + 2 * NX]
            P[i] = s
        for e in range(lane, NXX, W):  # T = A2 Z2
            i = e // NX
            j = e - i * NX
            r = ZERO
            for k in range(NX):
                r += E2[i * NX + k] * M[k * NC2 + NX + j]
            T[e] = r
        cuda.syncwarp()
        for e in range(lane, NXX, W):
            i = e // NX
            j = e - i * NX
            if j >= i:
                s = E2[OC + e]
                for k in range(NX):
                    s += T[i * NX + k] * E2[j * NX + k]
                P[NX + e] = s
                P[NX + j * NX + i] = s
        cuda.syncwarp()

    combine_f, combine_prefix_f = _device(combine), _device(combine_prefix)

    def predict(F, Q, m, P, mn, Pn, X, A, An, with_a, lane):
        """``mn, Pn <- F m, F P F^T + Q`` (and ``An <- F A`` if ``with_a``), as kalman.predict
        and scan.cond_predict; the caller swaps the buffers.  For ``F = I``: in place."""
        if KIND == IDENTITY:
            for e in range(lane, NXX, W):
                P[e] += Q[e]
            cuda.syncwarp()
            return
        if KIND == COMPANION:
            for j in range(lane, NX, W):  # X[j] = (phi^T P)_j
                s = ZERO
                for k in range(NX):
                    s += F[k] * P[k * NX + j]
                X[j] = s
            for i in range(lane, NX, W):
                if i == 0:
                    s = ZERO
                    for k in range(NX):
                        s += F[k] * m[k]
                    mn[0] = s
                else:
                    mn[i] = m[i - 1]
            for e in range(lane, NXX, W):
                i = e // NX
                j = e - i * NX
                if i > 0 and j > 0:
                    Pn[e] = P[(i - 1) * NX + j - 1] + Q[e]
                if with_a:
                    if i == 0:
                        s = ZERO
                        for k in range(NX):
                            s += F[k] * A[k * NX + j]
                        An[j] = s
                    else:
                        An[e] = A[e - NX]
            cuda.syncwarp()
            for j in range(lane, NX, W):
                if j == 0:
                    s = ZERO
                    for k in range(NX):
                        s += X[k] * F[k]
                    Pn[0] = s + Q[0]
                else:
                    v = X[j - 1]
                    Pn[j] = v + Q[j]
                    Pn[j * NX] = v + Q[j * NX]
            cuda.syncwarp()
            return
        for e in range(lane, NXX, W):  # X = F P (and An = F A)
            i = e // NX
            j = e - i * NX
            s = ZERO
            for k in range(NX):
                s += F[i * NX + k] * P[k * NX + j]
            X[e] = s
            if with_a:
                s = ZERO
                for k in range(NX):
                    s += F[i * NX + k] * A[k * NX + j]
                An[e] = s
        for i in range(lane, NX, W):
            s = ZERO
            for k in range(NX):
                s += F[i * NX + k] * m[k]
            mn[i] = s
        cuda.syncwarp()
        for e in range(lane, NXX, W):  # Pn = X F^T + Q (upper triangle, mirrored)
            i = e // NX
            j = e - i * NX
            if j >= i:
                s = ZERO
                for k in range(NX):
                    s += X[i * NX + k] * F[j * NX + k]
                s += Q[e]
                Pn[e] = s
                Pn[j * NX + i] = s
        cuda.syncwarp()

    predict_f = _device(predict)

    def gain(H, R, P, U, S, L, lane):
        """``U <- W``, ``L`` (each lane's own copy) the Cholesky factor of ``S``, as
        kalman.gain; returns ``(logdet, ok)``, the same on every lane."""
        for e in range(lane, NXY, W):  # U = P H^T
            i = e // NY
            a = e - i * NY
            s = ZERO
            for k in range(NX):
                s += P[i * NX + k] * H[a * NX + k]
            U[e] = s
        cuda.syncwarp()
        for e in range(lane, NYY, W):  # S = H U + R, lower triangle
            a = e // NY
            b = e - a * NY
            if b <= a:
                s = R[e]
                for k in range(NX):
                    s += H[a * NX + k] * U[k * NY + b]
                S[e] = s
        cuda.syncwarp()
        for e in range(NYY):
            L[e] = S[e]
        logdet = 0.0
        ok = True
        for a in range(NY):  # Cholesky in place, every lane alike
            for b in range(a + 1):
                s = L[a * NY + b]
                for c in range(b):
                    s -= L[a * NY + c] * L[b * NY + c]
                if b == a:
                    if not s > ZERO:
                        ok = False
                        break
                    d = math.sqrt(s)
                    L[a * NY + a] = d
                    logdet += math.log(d)
                else:
                    L[a * NY + b] = s / L[b * NY + b]
            if not ok:
                break
        return logdet, ok

    def innovation(H, y, yo, m, L, e):
        """``e <- v``, returns ``v.v``: kalman.innovation, on every lane alike."""
        quad = ZERO
        for a in range(NY):
            s = y[yo + a]
            for k in range(NX):
                s -= H[a * NX + k] * m[k]
            for c in range(a):
                s -= L[a * NY + c] * e[c]
            s = s / L[a * NY + a]
            e[a] = s
            quad += s * s
        return quad

    def gain_rows(U, L, lane):
        """``U <- U L^{-T}`` (W), row by row."""
        for i in range(lane, NX, W):
            for a in range(NY):
                s = U[i * NY + a]
                for c in range(a):
                    s -= L[a * NY + c] * U[i * NY + c]
                U[i * NY + a] = s / L[a * NY + a]

    def correct(m, P, U, e, lane):
        """``m += W v``, ``P -= W W^T`` (upper triangle, mirrored)."""
        for i in range(lane, NX, W):
            s = m[i]
            for a in range(NY):
                s += U[i * NY + a] * e[a]
            m[i] = s
        for q in range(lane, NXX, W):
            i = q // NX
            j = q - i * NX
            if j >= i:
                s = P[q]
                for a in range(NY):
                    s -= U[i * NY + a] * U[j * NY + a]
                P[q] = s
                P[j * NX + i] = s

    gain_f, innovation_f, gain_rows_f, correct_f = (
        _device(gain), _device(innovation), _device(gain_rows), _device(correct))

    def cond_update(H, R, y, yo, A, b, C, eta, J, U, S, G, L, e, lane):
        """scan.cond_update by the warp; returns ok."""
        logdet, ok = gain_f(H, R, C, U, S, L, lane)
        if not ok:
            return False
        innovation_f(H, y, yo, b, L, e)
        gain_rows_f(U, L, lane)
        for j in range(lane, NX, W):  # G = L^{-1} H A (NY x NX)
            for a in range(NY):
                s = ZERO
                for k in range(NX):
                    s += H[a * NX + k] * A[k * NX + j]
                for c in range(a):
                    s -= L[a * NY + c] * G[c * NX + j]
                G[a * NX + j] = s / L[a * NY + a]
        cuda.syncwarp()
        for i in range(lane, NX, W):  # eta += G^T v
            s = eta[i]
            for a in range(NY):
                s += G[a * NX + i] * e[a]
            eta[i] = s
        for q in range(lane, NXX, W):
            i = q // NX
            j = q - i * NX
            if j >= i:  # J += G^T G (upper triangle, mirrored)
                s = J[q]
                for a in range(NY):
                    s += G[a * NX + i] * G[a * NX + j]
                J[q] = s
                J[j * NX + i] = s
            s = A[q]  # A -= W G
            for a in range(NY):
                s -= U[i * NY + a] * G[a * NX + j]
            A[q] = s
        correct_f(b, C, U, e, lane)
        cuda.syncwarp()
        return True

    cond_update_f = _device(cond_update)

    def load_model(F, H, Q, R, k, Fs, Hs, Qs, Rs, lane):
        for e in range(lane, NXX, W):
            Fs[e] = F[k, e]
            Qs[e] = Q[k, e]
        for e in range(lane, NXY, W):
            Hs[e] = H[k, e]
        for e in range(lane, NYY, W):
            Rs[e] = R[k, e]

    load_model_f = _device(load_model)

    @cuda.jit
    def up0(y, lo, hi, first, last, series, midx, F, H, Q, R, m0, P0, E, fail):
        sh = cuda.shared.array(SH_UP0, cdt)
        L = cuda.local.array(NYY, cdt)
        ev = cuda.local.array(NY, cdt)
        lane = cuda.threadIdx.x % W
        c = cuda.blockIdx.x * WPB + cuda.threadIdx.x // W
        if c >= lo.shape[0]:
            return
        if lane == 0:
            fail[c] = -1
        if last[c]:
            return
        base = (cuda.threadIdx.x // W) * PW_UP0
        el = sh[base:base + NE]
        A2 = sh[base + NE:base + NE + NXX]
        b2 = sh[base + NE + NXX:base + NE + NXX + NX]
        C2 = sh[base + NE + NXX + NX:base + NE + 2 * NXX + NX]
        o = base + NE + 2 * NXX + NX
        X = sh[o:o + NXX]
        U = sh[o + NXX:o + NXX + NXY]
        G = sh[o + NXX + NXY:o + NXX + 2 * NXY]
        S = sh[o + NXX + 2 * NXY:o + NXX + 2 * NXY + NYY]
        o = o + NXX + 2 * NXY + NYY
        Fs = sh[o:o + NXX]
        Qs = sh[o + NXX:o + 2 * NXX]
        Hs = sh[o + 2 * NXX:o + 2 * NXX + NXY]
        Rs = sh[o + 2 * NXX + NXY:o + 2 * NXX + NXY + NYY]
        A = el[0:NXX]
        b = el[OB:OB + NX]
        C = el[OC:OC + NXX]
        eta = el[OE:OE + NX]
        J = el[OJ:OJ + NXX]
        k = midx[series[c]]
        load_model_f(F, H, Q, R, k, Fs, Hs, Qs, Rs, lane)
        is_first = first[c] != 0
        for q in range(lane, NXX, W):  # scan.set_first / set_identity
            i = q // NX
            j = q - i * NX
            if is_first:
                A[q] = ZERO
                C[q] = P0[k, q]
            else:
                A[q] = ONE if i == j else ZERO
                C[q] = ZERO
            J[q] = ZERO
        for i in range(lane, NX, W):
            b[i] = m0[k, i] if is_first else ZERO
            eta[i] = ZERO
        cuda.syncwarp()
        f = -1
        c_lo = lo[c]
        n = hi[c] - c_lo
        for t in range(n):
            if t > 0 or not is_first:
                predict_f(Fs, Qs, b, C, b2, C2, X, A, A2, True, lane)
                if KIND != IDENTITY:
                    A, A2 = A2, A
                    b, b2 = b2, b
                    C, C2 = C2, C
            yo = (c_lo + t) * NY
            if not is_missing(y, yo):
                if not cond_update_f(Hs, Rs, y, yo, A, b, C, eta, J, U, S, G, L, ev, lane):
                    f = t
                    break
        for q in range(lane, NXX, W):  # store (whichever buffers hold A, b, C now)
            E[c, q] = A[q]
            E[c, OC + q] = C[q]
            E[c, OJ + q] = J[q]
        for i in range(lane, NX, W):
            E[c, OB + i] = b[i]
            E[c, OE + i] = eta[i]
        if lane == 0 and f >= 0:
            fail[c] = c_lo + f

    limit = {"max_registers": int(max_registers)} if max_registers and not SIMULATED else {}

    @cuda.jit(**limit)
    def up(E, lo, hi, last, E_next):
        sh = cuda.shared.array(SH_UP, cdt)
        lane = cuda.threadIdx.x % W
        c = cuda.blockIdx.x * WPB + cuda.threadIdx.x // W
        if c >= lo.shape[0] or last[c]:
            return
        base = (cuda.threadIdx.x // W) * PW_UP
        E1 = sh[base:base + NE]
        E2 = sh[base + NE:base + 2 * NE]
        o = base + 2 * NE
        M = sh[o:o + NX * NC3]
        T = sh[o + NX * NC3:o + NX * NC3 + NXX]
        w = sh[o + NX * NC3 + NXX:o + NX * NC3 + NXX + NX]
        c_lo = lo[c]
        for q in range(lane, NE, W):
            E1[q] = E[c_lo, q]
        for i in range(c_lo + 1, hi[c]):
            for q in range(lane, NE, W):
                E2[q] = E[i, q]
            cuda.syncwarp()
            combine_f(E1, E2, M, T, w, lane)
        for q in range(lane, NE, W):
            E_next[c, q] = E1[q]

    @cuda.jit(**limit)
    def down(E, prefix_next, lo, hi, first, prefix):
        sh = cuda.shared.array(SH_DOWN, cdt)
        lane = cuda.threadIdx.x % W
        c = cuda.blockIdx.x * WPB + cuda.threadIdx.x // W
        if c >= lo.shape[0]:
            return
        base = (cuda.threadIdx.x // W) * PW_DOWN
        P = sh[base:base + NP]
        E2 = sh[base + NP:base + NP + NE]
        o = base + NP + NE
        M = sh[o:o + NX * NC2]
        T = sh[o + NX * NC2:o + NX * NC2 + NXX]
        c_lo = lo[c]
        c_hi = hi[c]
        start = c_lo
        if first[c]:  # the identity's prefix is never read; the next one is E[lo]'s (b, C)
            start = c_lo + 1
            if start < c_hi:
                for q in range(lane, NP, W):
                    P[q] = E[c_lo, OB + q]  # (b, C are side by side in an element)
        else:
            for q in range(lane, NP, W):
                P[q] = prefix_next[c, q]
        if start < c_hi:
            for q in range(lane, NP, W):
                prefix[start, q] = P[q]
        for i in range(start, c_hi - 1):
            for q in range(lane, NE, W):
                E2[q] = E[i, q]
            cuda.syncwarp()
            combine_prefix_f(P, E2, M, T, lane)
            for q in range(lane, NP, W):
                prefix[i + 1, q] = P[q]

    @cuda.jit
    def final(y, lo, hi, first, series, midx, F, H, Q, R, m0, P0, prefix, ll, nobs, fail):
        sh = cuda.shared.array(SH_FINAL, cdt)
        L = cuda.local.array(NYY, cdt)
        ev = cuda.local.array(NY, cdt)
        lane = cuda.threadIdx.x % W
        c = cuda.blockIdx.x * WPB + cuda.threadIdx.x // W
        if c >= lo.shape[0]:
            return
        base = (cuda.threadIdx.x // W) * PW_FINAL
        m = sh[base:base + NX]
        P = sh[base + NX:base + NP]
        m2 = sh[base + NP:base + NP + NX]
        P2 = sh[base + NP + NX:base + 2 * NP]
        o = base + 2 * NP
        X = sh[o:o + NXX]
        U = sh[o + NXX:o + NXX + NXY]
        S = sh[o + NXX + NXY:o + NXX + NXY + NYY]
        o = o + NXX + NXY + NYY
        Fs = sh[o:o + NXX]
        Qs = sh[o + NXX:o + 2 * NXX]
        Hs = sh[o + 2 * NXX:o + 2 * NXX + NXY]
        Rs = sh[o + 2 * NXX + NXY:o + 2 * NXX + NXY + NYY]
        k = midx[series[c]]
        load_model_f(F, H, Q, R, k, Fs, Hs, Qs, Rs, lane)
        is_first = first[c] != 0
        for q in range(lane, NXX, W):
            P[q] = P0[k, q] if is_first else prefix[c, NX + q]
        for i in range(lane, NX, W):
            m[i] = m0[k, i] if is_first else prefix[c, i]
        cuda.syncwarp()
        if not is_first:  # the prefix holds the filtered law of the step before the chunk
            predict_f(Fs, Qs, m, P, m2, P2, X, X, X, False, lane)
            if KIND != IDENTITY:
                m, m2 = m2, m
                P, P2 = P2, P
        acc = 0.0
        n_obs = 0
        f = -1
        c_lo = lo[c]
        n = hi[c] - c_lo
        for t in range(n):
            yo = (c_lo + t) * NY
            if not is_missing(y, yo):
                logdet, ok = gain_f(Hs, Rs, P, U, S, L, lane)
                if not ok:
                    f = t
                    break
                quad = innovation_f(Hs, y, yo, m, L, ev)
                gain_rows_f(U, L, lane)
                cuda.syncwarp()
                correct_f(m, P, U, ev, lane)
                cuda.syncwarp()
                acc += loglik_term(logdet, quad)
                n_obs += 1
            if t + 1 < n:
                predict_f(Fs, Qs, m, P, m2, P2, X, X, X, False, lane)
                if KIND != IDENTITY:
                    m, m2 = m2, m
                    P, P2 = P2, P
        if lane == 0:
            ll[c] = acc
            nobs[c] = n_obs
            fail[c] = c_lo + f if f >= 0 else -1

    return dict(up0=up0, up=up, down=down, final=final, combine=combine_f,
                combine_prefix=combine_prefix_f, ne=NE, np=NP, wpb=WPB)
