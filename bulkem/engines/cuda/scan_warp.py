"""The GPU scan's kernels with a warp per chunk: the lanes share each element's matrices.

The thread-per-chunk kernels of :mod:`bulkem.engines.cuda.kalman` keep a
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
every lane alike, each row's factor is divided once (a lane per row), the
rows below the pivot are updated column by column, and the back
substitution runs in each lane's own columns.

Kernels (``warp_programs``), a chunk per warp, ``WPB`` warps per block:

* ``up``: the combine of each chunk's elements at a level above 0;
* ``down``: each element's exclusive prefix.  A prefix starts at a series'
  first element, whose ``A``, ``eta`` and ``J`` are 0, and so are those of
  every prefix: only ``(b, C)`` is computed and stored (``NP = NX + NX^2``
  values), by :func:`combine_prefix`'s half of the combine.

Level 0 (``level0_programs``) keeps a thread per chunk, the one-thread
functions of ``scan.py`` and ``kalman.py`` with the largest matrices in
shared memory: ``up0``, the element of each level-0 chunk (the conditional
filter), and ``final``, the Kalman filter of each level-0 chunk from its
prefix, with the log-likelihood terms.  (A warp per level-0 chunk was
measured slower on an H100: its lanes wait on each step's short products.)

Elements are stored element by element (shape (n, NE), a warp reads one
element's values side by side), prefixes likewise (shape (n, NP)).

These functions loop over a warp's lanes, so they are written for the GPU
alone (the CPU engine runs the one-thread functions of ``scan.py``); the
tests compare them with those, bit for bit, under the simulator.
"""

from __future__ import annotations

import numpy as np
from numba import float32, float64

from .compat import SIMULATED, cuda, device

WARP = 32
SHARED_BYTES = 48 * 1024  # static shared memory per block



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


def shared_sizes(nx: int) -> dict:
    """Shared-memory values per warp of the ``up`` and ``down`` kernels (dtype-sized)."""
    nxx = nx * nx
    ne = 3 * nxx + 2 * nx
    return {
        "up": 2 * ne + nx * (3 * nx + 1) + nx + nxx + nx,
        "down": (nx + nxx) + ne + nx * (2 * nx + 1) + nx + nxx,
    }


def warps_per_block(nx: int, ny: int, dtype, wanted: int) -> int:
    """Warps per block (at most ``wanted``) whose shared memory fits one block, or 0 if one
    warp's does not (then the thread-per-chunk kernels run)."""
    per = max(shared_sizes(nx).values()) * np.dtype(dtype).itemsize
    return max(0, min(int(wanted), SHARED_BYTES // per))


def level0_threads(nx: int, dtype, wanted: int, matrices: int = 3) -> int:
    """Threads per block of ``up0`` (at most ``wanted``): ``matrices`` NX x NX matrices per
    thread in one block's shared memory."""
    per = matrices * nx * nx * np.dtype(dtype).itemsize
    return max(1, min(int(wanted), SHARED_BYTES // per))


def final_threads(nx: int, dtype, wanted: int) -> int:
    """Threads per block of ``final`` (at most ``wanted``): one NX x NX matrix per thread in
    shared memory, whole warps where one fits (AR(10): 32 rather than ``up0``'s 20; H100,
    10^6 steps, 0.566 -> 0.501 ms)."""
    n = level0_threads(nx, dtype, wanted, 1)
    return n - n % WARP if n >= WARP else n


def level0_programs(nx: int, ny: int, dtype, tpb: int, tpb_final: int, steps, sc) -> dict:
    """Level 0 of the scan with a thread per chunk, its largest matrices in shared memory.

    The functions of ``scan.py`` (``chunk_element``) and ``kalman.py``
    (``filter_range``) run as in the thread-per-chunk kernels of
    :mod:`bulkem.engines.cuda.kalman` (the same operations), but ``A, C, J``
    (``up0``) and ``P`` (``final``) lie in shared memory, entry ``k`` of thread
    ``t`` at ``[k, t]`` (neighbouring threads, neighbouring banks), rather
    than in local memory: for AR(10) that was ~4 KB of local memory per thread
    spilling to the GPU's DRAM.  Elements and prefixes are stored element by
    element, as the warp kernels read them.

    Parameters
    ----------
    nx, ny, dtype
        As for :func:`bulkem.models.ssm.kalman.make_kalman`.
    tpb, tpb_final : int
        Threads per block of ``up0`` (:func:`level0_threads`) and of ``final``
        (:func:`final_threads`).
    steps, sc : KalmanSteps, ScanSteps
        The CUDA device functions of ``make_kalman`` and ``make_scan``.

    Returns
    -------
    dict
        ``up0`` and ``final`` (kernels, a thread per chunk; ``final`` also takes
        ``up0``'s failing steps and keeps them where it has none), ``tpb``,
        ``tpb_final``.
    """
    dt = np.dtype(dtype).type
    cdt = float32 if dt == np.float32 else float64
    NX, NY, NXX, NXY, NYY = nx, ny, nx * nx, nx * ny, ny * ny
    OB, OC, OE, OJ = NXX, NXX + NX, 2 * NXX + NX, 2 * NXX + 2 * NX
    TPB, TPB_F = int(tpb), int(tpb_final)
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
    def final(y, lo, hi, first, series, midx, F, H, Q, R, m0, P0, prefix, ll, nobs, fail,
              fail0):
        shP = cuda.shared.array((NXX, TPB_F), cdt)
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
        fail[c] = lo[c] + f if f >= 0 else fail0[c]  # (up0's, or -1)

    return dict(up0=up0, final=final, tpb=TPB, tpb_final=TPB_F)


def warp_programs(nx: int, dtype, wpb: int) -> dict:
    """The warp-per-chunk scan kernels for one (dimensions, structure, dtype, warps per block).

    Parameters
    ----------
    nx : int
        States.
    dtype
        float32 or float64.
    wpb : int
        Warps (chunks) per block (:func:`warps_per_block`).

    Returns
    -------
    dict
        ``up, down`` (kernels, launched with ``32 * wpb`` threads
        per block, a chunk per warp), ``combine`` and ``combine_prefix``
        (device functions, for the tests), ``ne``, ``np`` (values per element
        and per prefix), ``wpb``.
    """
    dt = np.dtype(dtype).type
    cdt = float32 if dt == np.float32 else float64
    NX = nx
    NXX = nx * nx
    ZERO, ONE = dt(0.0), dt(1.0)
    W = WARP
    OB, OC, OE, OJ = NXX, NXX + NX, 2 * NXX + NX, 2 * NXX + 2 * NX
    NE = 3 * NXX + 2 * NX
    NP = NX + NXX
    NC3 = 3 * NX + 1  # columns of [D | Z1 | Z2 | z]
    NC2 = 2 * NX + 1  # columns of [D | Z2 | z]
    sizes = shared_sizes(nx)
    WPB = int(wpb)
    PW_UP, PW_DOWN = sizes["up"], sizes["down"]
    SH_UP, SH_DOWN = WPB * PW_UP, WPB * PW_DOWN

    def make_solve(NC):
        def solve(M, lane):
            """``M = [D | rhs]`` (NX x NC, row-major, then NX values of scratch) <-
            ``[* | D^-1 rhs]``: scan.py's solve, a lane per column."""
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
                # each row's factor divided once, by one lane, into M's last NX values
                # (the quotient that every lane divided before: H100, AR(10), 10^6 steps,
                # up + down sweeps 2.25 -> 2.08 ms)
                for r in range(c + 1 + lane, NX, W):
                    M[NX * NC + r] = M[r * NC + c] / piv
                cuda.syncwarp()
                for col in range(lane, NC, W):
                    if col > c:
                        for r in range(c + 1, NX):
                            f = M[NX * NC + r]
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

        return device(solve)

    solve3, solve2 = make_solve(NC3), make_solve(NC2)

    def combine(E1, E2, M, T, w, lane):
        """``E1 <- E1 (x) E2`` (elements in the layout of ``scan.py``, in shared memory);
        scratch ``M`` NX x (3 NX + 1) + NX, ``T`` NX*NX, ``w`` NX."""
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
        of :func:`combine`, the same operations; scratch ``M`` NX x (2 NX + 1) + NX, ``T``."""
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

    combine_f, combine_prefix_f = device(combine), device(combine_prefix)

    @cuda.jit
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
        M = sh[o:o + NX * NC3 + NX]
        o += NX * NC3 + NX
        T = sh[o:o + NXX]
        w = sh[o + NXX:o + NXX + NX]
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

    @cuda.jit
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
        M = sh[o:o + NX * NC2 + NX]
        T = sh[o + NX * NC2 + NX:o + NX * NC2 + NX + NXX]
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

    return dict(up=up, down=down, combine=combine_f, combine_prefix=combine_prefix_f, ne=NE,
                np=NP, wpb=WPB)
