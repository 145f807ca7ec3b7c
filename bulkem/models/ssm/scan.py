"""Elements of the exact time-parallel Kalman filter (Saerkkae and Garcia-Fernandez 2021).

S. Saerkkae and A. F. Garcia-Fernandez, "Temporal parallelization of Bayesian
smoothers", IEEE Trans. Automatic Control 66(1), 2021; the element layout
follows dynamax's ``linear_gaussian_ssm/parallel_inference.py``.

An element ``(A, b, C, eta, J)`` of the steps ``s .. e`` of a series stands
for two things given the state before them, ``x = x_{s-1}``:

* ``p(x_e | x, y_s .. y_e) = N(A x + b, C)``, and
* ``p(y_s .. y_e | x)``, proportional to ``exp(eta^T x - x^T J x / 2)``.

The element of the first steps of a series starts from the prior and has
``A = 0, eta = 0, J = 0``: its ``(b, C)`` is then the filtered law of
``x_e``.  Elements compose associatively (:func:`make_scan`'s ``combine``)::

    (A1, b1, C1, eta1, J1) (x) (A2, b2, C2, eta2, J2), with D = I + C1 J2:
    A   = A2 D^{-1} A1
    b   = A2 D^{-1} (b1 + C1 eta2) + b2
    C   = A2 D^{-1} C1 A2^T + C2
    eta = A1^T D^{-T} (eta2 - J2 b1) + eta1
    J   = A1^T D^{-T} J2 A1 + J1

so the filtered law at every step is a prefix "sum" computed in parallel.
Every prefix starts at a series' first element, so its ``A, eta, J`` are 0
and stay 0: combining onto a prefix needs its ``(b, C)`` alone
(``combine_prefix``, about half the work of ``combine``).
The one-step element (from ``x_{k-1}``: predict, then update with ``y_k``) is
``A = (I - K H) F``, ``b = K y_k``, ``C = (I - K H) Q``, ``eta = F^T H^T S^{-1}
y_k``, ``J = F^T H^T S^{-1} H F`` with ``S = H Q H^T + R``, ``K = Q H^T S^{-1}``.

An engine builds the element of a chunk of consecutive steps by extending
a running element one step at a time (``cond_predict``, ``cond_update``):
the Kalman filter run conditionally on the unknown ``x``, with ``A`` and
the information ``(eta, J)`` carried along.  That equals combining the
one-step elements in order (tested), at about a third of the cost.

Elements of ``NX`` states are five 1-D arrays: ``A`` (NX*NX, row-major), ``b``
(NX), ``C`` (NX*NX), ``eta`` (NX), ``J`` (NX*NX).  A batch of ``n`` elements
is stored field by field in a 2-D array ``E`` of shape (NE, n),
``NE = 3 NX^2 + 2 NX`` (:func:`element_size`), so that neighbouring GPU
threads read neighbouring addresses.
"""

from __future__ import annotations

from typing import NamedTuple

from .kalman import KalmanSteps
from .statespace import COMPANION, IDENTITY


def element_size(nx: int) -> int:
    """Values of one element: ``A, C, J`` (NX*NX each) and ``b, eta`` (NX each)."""
    return 3 * nx * nx + 2 * nx


class ScanSteps(NamedTuple):
    """The compiled scan functions (see :func:`make_scan`)."""

    set_identity: object
    set_first: object
    cond_predict: object
    cond_update: object
    chunk_element: object
    combine: object
    load: object
    store: object
    combine_prefix: object


def make_scan(nx: int, ny: int, kind: int, dtype, jit, steps: KalmanSteps, jit_outer=None
              ) -> ScanSteps:
    """Build the scan-element functions.

    Parameters
    ----------
    nx, ny, kind, dtype, jit
        As for :func:`bulkem.models.ssm.kalman.make_kalman`.
    jit_outer : callable, optional
        Compiles ``chunk_element`` and ``combine``, which loop (``jit`` if
        None; see ``kalman.make_kalman``).
    steps : KalmanSteps
        The Kalman steps built with the same arguments.

    Returns
    -------
    ScanSteps
        For an element ``(A, b, C, eta, J)`` and scratch arrays as named:

        * ``set_identity(A, b, C, eta, J)``: the neutral element (``A = I``,
          the rest 0): the state ``x`` itself, before any step;
        * ``set_first(m0, P0, A, b, C, eta, J)``: the prior of step 1 of a
          series, as a predicted state (``A = 0``); the first step of a
          series then takes ``cond_update`` only;
        * ``cond_predict(F, Q, A, b, C, T)``: extend by a transition;
        * ``cond_update(H, R, y, yo, A, b, C, eta, J, U, L, e, G) -> ok``:
          extend by the observation at ``y[yo:]`` (``G``: NY*NX scratch);
        * ``chunk_element(F, H, Q, R, m0, P0, y, lo, n, first, A, b, C, eta, J, T, U, L,
          e, G) -> fail``: the element of the ``n`` rows from ``lo`` (``first``:
          the first rows of a series, from its prior ``m0, P0``), or the step
          ``k`` whose innovation covariance was not positive definite, ``fail
          = k``; -1 if none;
        * ``combine(A1, b1, C1, eta1, J1, A2, b2, C2, eta2, J2, D, Z1, Z2, z, w, T)``:
          element 1 <- element 1 (x) element 2 (element 1 the earlier steps);
          scratch ``D, Z1, Z2, T`` NX*NX, ``z, w`` NX;
        * ``load(E, i, A, b, C, eta, J)`` / ``store(...)``: element ``i`` of a
          batch ``E`` of shape (NE, n);
        * ``combine_prefix(b1, C1, A2, b2, C2, eta2, J2, D, Z2, z, T)``: ``combine`` for
          an element 1 whose ``A, eta, J`` are 0 (a prefix that starts at a series'
          first element: every prefix of the scan), which then stay 0: only
          ``b1, C1`` change, by the same operations as in ``combine`` (the same
          numbers, at about half the work); scratch ``D, Z2, T`` NX*NX, ``z`` NX.
    """
    jit_outer = jit if jit_outer is None else jit_outer
    NX = nx
    NXX = nx * nx
    KIND = kind
    ZERO = dtype(0.0)
    ONE = dtype(1.0)
    OB = NXX
    OC = NXX + nx
    OE = 2 * NXX + nx
    OJ = 2 * NXX + 2 * nx
    NY = ny
    predict_f, gain_f, innovation_f, correct_f = (
        steps.predict, steps.gain, steps.innovation, steps.correct)

    def set_identity(A, b, C, eta, J):
        for i in range(NX):
            b[i] = ZERO
            eta[i] = ZERO
            for j in range(NX):
                A[i * NX + j] = ONE if i == j else ZERO
                C[i * NX + j] = ZERO
                J[i * NX + j] = ZERO

    def set_first(m0, P0, A, b, C, eta, J):
        for i in range(NX):
            b[i] = m0[i]
            eta[i] = ZERO
        for k in range(NXX):
            A[k] = ZERO
            C[k] = P0[k]
            J[k] = ZERO

    def cond_predict(F, Q, A, b, C, T):
        predict_f(F, Q, b, C, T)  # b <- F b, C <- F C F^T + Q
        if KIND == IDENTITY:
            return
        if KIND == COMPANION:
            for j in range(NX):  # first row phi^T A, the others shift down
                s = ZERO
                for k in range(NX):
                    s += F[k] * A[k * NX + j]
                T[j] = s
            for i in range(NX - 1, 0, -1):
                for j in range(NX):
                    A[i * NX + j] = A[(i - 1) * NX + j]
            for j in range(NX):
                A[j] = T[j]
            return
        for i in range(NX):
            for j in range(NX):
                s = ZERO
                for k in range(NX):
                    s += F[i * NX + k] * A[k * NX + j]
                T[i * NX + j] = s
        for k in range(NXX):
            A[k] = T[k]

    def cond_update(H, R, y, yo, A, b, C, eta, J, U, L, e, G):
        logdet, ok = gain_f(H, R, C, U, L)  # U <- W, L <- chol(S)
        if not ok:
            return False
        innovation_f(H, y, yo, b, L, e)  # e <- v = L^{-1} (y - H b)
        for j in range(NX):  # G = L^{-1} H A (NY x NX)
            for a in range(NY):
                s = ZERO
                for k in range(NX):
                    s += H[a * NX + k] * A[k * NX + j]
                for c in range(a):
                    s -= L[a * NY + c] * G[c * NX + j]
                G[a * NX + j] = s / L[a * NY + a]
        for i in range(NX):  # eta += G^T v, J += G^T G
            s = eta[i]
            for a in range(NY):
                s += G[a * NX + i] * e[a]
            eta[i] = s
            for j in range(i, NX):
                s = J[i * NX + j]
                for a in range(NY):
                    s += G[a * NX + i] * G[a * NX + j]
                J[i * NX + j] = s
                J[j * NX + i] = s
        for i in range(NX):  # A -= W G
            for j in range(NX):
                s = A[i * NX + j]
                for a in range(NY):
                    s -= U[i * NY + a] * G[a * NX + j]
                A[i * NX + j] = s
        correct_f(b, C, U, e)  # b += W v, C -= W W^T
        return True

    def solve_rhs(D, Z1, Z2, z, two):
        """D^{-1} applied in place to Z1 (NX x NX), z and, if ``two``, Z2: Gaussian
        elimination with row pivots (each right-hand side's operations independent of
        the others', so that with ``two`` false Z1 and z get the same bits)."""
        for c in range(NX):
            p = c
            big = abs(D[c * NX + c])
            for r in range(c + 1, NX):
                v = abs(D[r * NX + c])
                if v > big:
                    big = v
                    p = r
            if p != c:
                for j in range(NX):
                    v = D[c * NX + j]
                    D[c * NX + j] = D[p * NX + j]
                    D[p * NX + j] = v
                    v = Z1[c * NX + j]
                    Z1[c * NX + j] = Z1[p * NX + j]
                    Z1[p * NX + j] = v
                    if two:
                        v = Z2[c * NX + j]
                        Z2[c * NX + j] = Z2[p * NX + j]
                        Z2[p * NX + j] = v
                v = z[c]
                z[c] = z[p]
                z[p] = v
            piv = D[c * NX + c]
            for r in range(c + 1, NX):
                f = D[r * NX + c] / piv
                if f != ZERO:
                    for j in range(c + 1, NX):
                        D[r * NX + j] -= f * D[c * NX + j]
                    for j in range(NX):
                        Z1[r * NX + j] -= f * Z1[c * NX + j]
                        if two:
                            Z2[r * NX + j] -= f * Z2[c * NX + j]
                    z[r] -= f * z[c]
        for c in range(NX - 1, -1, -1):  # back substitution
            piv = D[c * NX + c]
            for j in range(NX):
                s1 = Z1[c * NX + j]
                s2 = Z2[c * NX + j] if two else ZERO
                for k in range(c + 1, NX):
                    s1 -= D[c * NX + k] * Z1[k * NX + j]
                    if two:
                        s2 -= D[c * NX + k] * Z2[k * NX + j]
                Z1[c * NX + j] = s1 / piv
                if two:
                    Z2[c * NX + j] = s2 / piv
            s = z[c]
            for k in range(c + 1, NX):
                s -= D[c * NX + k] * z[k]
            z[c] = s / piv

    solve_rhs_f = jit(solve_rhs)

    def combine(A1, b1, C1, eta1, J1, A2, b2, C2, eta2, J2, D, Z1, Z2, z, w, T):
        for i in range(NX):
            s = b1[i]  # z = b1 + C1 eta2
            for k in range(NX):
                s += C1[i * NX + k] * eta2[k]
            z[i] = s
            s = eta2[i]  # w = eta2 - J2 b1
            for k in range(NX):
                s -= J2[i * NX + k] * b1[k]
            w[i] = s
            for j in range(NX):  # D = I + C1 J2
                s = ONE if i == j else ZERO
                for k in range(NX):
                    s += C1[i * NX + k] * J2[k * NX + j]
                D[i * NX + j] = s
        for k in range(NXX):
            Z1[k] = A1[k]
            Z2[k] = C1[k]
        solve_rhs_f(D, Z1, Z2, z, True)  # Z1 = D^-1 A1, Z2 = D^-1 C1, z = D^-1 (b1 + C1 eta2)
        for i in range(NX):  # eta = Z1^T w + eta1
            s = eta1[i]
            for k in range(NX):
                s += Z1[k * NX + i] * w[k]
            eta1[i] = s
        for i in range(NX):  # T = J2 A1
            for j in range(NX):
                s = ZERO
                for k in range(NX):
                    s += J2[i * NX + k] * A1[k * NX + j]
                T[i * NX + j] = s
        for i in range(NX):  # J = Z1^T T + J1 (symmetric: upper triangle, mirrored)
            for j in range(i, NX):
                s = J1[i * NX + j]
                for k in range(NX):
                    s += Z1[k * NX + i] * T[k * NX + j]
                J1[i * NX + j] = s
                J1[j * NX + i] = s
        for i in range(NX):  # A = A2 Z1, b = A2 z + b2, T = A2 Z2
            s = b2[i]
            for k in range(NX):
                s += A2[i * NX + k] * z[k]
            b1[i] = s
            for j in range(NX):
                s = ZERO
                r = ZERO
                for k in range(NX):
                    s += A2[i * NX + k] * Z1[k * NX + j]
                    r += A2[i * NX + k] * Z2[k * NX + j]
                A1[i * NX + j] = s
                T[i * NX + j] = r
        for i in range(NX):  # C = T A2^T + C2 (symmetric: upper triangle, mirrored)
            for j in range(i, NX):
                s = C2[i * NX + j]
                for k in range(NX):
                    s += T[i * NX + k] * A2[j * NX + k]
                C1[i * NX + j] = s
                C1[j * NX + i] = s

    def combine_prefix(b1, C1, A2, b2, C2, eta2, J2, D, Z2, z, T):
        for i in range(NX):
            s = b1[i]  # z = b1 + C1 eta2
            for k in range(NX):
                s += C1[i * NX + k] * eta2[k]
            z[i] = s
            for j in range(NX):  # D = I + C1 J2
                s = ONE if i == j else ZERO
                for k in range(NX):
                    s += C1[i * NX + k] * J2[k * NX + j]
                D[i * NX + j] = s
        for k in range(NXX):
            Z2[k] = C1[k]
        solve_rhs_f(D, Z2, Z2, z, False)  # Z2 = D^-1 C1, z = D^-1 (b1 + C1 eta2)
        for i in range(NX):  # b = A2 z + b2, T = A2 Z2
            s = b2[i]
            for k in range(NX):
                s += A2[i * NX + k] * z[k]
            b1[i] = s
            for j in range(NX):
                r = ZERO
                for k in range(NX):
                    r += A2[i * NX + k] * Z2[k * NX + j]
                T[i * NX + j] = r
        for i in range(NX):  # C = T A2^T + C2 (symmetric: upper triangle, mirrored)
            for j in range(i, NX):
                s = C2[i * NX + j]
                for k in range(NX):
                    s += T[i * NX + k] * A2[j * NX + k]
                C1[i * NX + j] = s
                C1[j * NX + i] = s

    set_identity_f, set_first_f, cond_predict_f, cond_update_f = (
        jit(set_identity), jit(set_first), jit(cond_predict), jit(cond_update))
    is_missing_f = steps.is_missing

    def chunk_element(F, H, Q, R, m0, P0, y, lo, n, first, A, b, C, eta, J, T, U, L, e, G):
        if first:
            set_first_f(m0, P0, A, b, C, eta, J)
        else:
            set_identity_f(A, b, C, eta, J)
        for k in range(n):
            if k > 0 or not first:
                cond_predict_f(F, Q, A, b, C, T)
            yo = (lo + k) * NY
            if not is_missing_f(y, yo):
                if not cond_update_f(H, R, y, yo, A, b, C, eta, J, U, L, e, G):
                    return k
        return -1

    def load(E, i, A, b, C, eta, J):
        for k in range(NXX):
            A[k] = E[k, i]
            C[k] = E[OC + k, i]
            J[k] = E[OJ + k, i]
        for k in range(NX):
            b[k] = E[OB + k, i]
            eta[k] = E[OE + k, i]

    def store(E, i, A, b, C, eta, J):
        for k in range(NXX):
            E[k, i] = A[k]
            E[OC + k, i] = C[k]
            E[OJ + k, i] = J[k]
        for k in range(NX):
            E[OB + k, i] = b[k]
            E[OE + k, i] = eta[k]

    return ScanSteps(set_identity_f, set_first_f, cond_predict_f, cond_update_f,
                     jit_outer(chunk_element), jit_outer(combine), jit(load), jit(store),
                     jit_outer(combine_prefix))


# --- the steady-state scan --------------------------------------------------------------
#
# Series of one model without missing rows share the covariance part of the
# filter, which does not depend on the data (``kalman.gains_range``).  It
# converges: after the first ``n`` steps the covariance, hence the gain ``W``
# and the factor ``L``, no longer change (to a few units in the last place, see
# ``bulkem.engines.cpu.kalman.steady``), and every later step maps the filtered mean
# the same way, ``x_t = A x_{t-1} + W L^{-1} y_t`` with ``A = (I - W L^{-1} H)
# F``.  The scan then carries means alone: the element of a chunk of ``c``
# later steps is ``(A^c, b)``, ``b`` its filtered mean from ``x = 0``, and every
# element of a level but a series' first has the same matrix (the first
# chunk, which holds the ``n`` transient steps, starts from the prior: its
# matrix is 0).  Elements combine as ``b <- M b1 + b2``: a matrix-vector
# product per element instead of ``combine``'s matrix products and solve.
# Elements of ``NX`` values are stored field by field, ``E[i, c]``.


class SteadySteps(NamedTuple):
    """The compiled steady-state scan functions (see :func:`make_steady_scan`)."""

    chunk: object
    up: object
    down: object


def make_steady_scan(nx: int, dtype, jit, steps: KalmanSteps) -> SteadySteps:
    """Build the chunk functions of the steady-state scan (above).

    Returns
    -------
    SteadySteps
        * ``chunk(F, H, y, lo, n, k0, kmax, first, m0, m, t, U, L, e, Ws, Ls, logdets)
          -> (loglik, n_obs)``: filter the means of the ``n`` rows from ``lo``,
          the ``k0``-th step of their series on (gains as in
          ``filter_mean_range``): from the prior mean ``m0`` if ``first``, else
          from the filtered mean ``m`` of the step before, which is predicted
          first; ``m`` ends as the filtered mean of the last row;
        * ``up(E, lo, hi, M, b, z)``: ``b`` <- the element of elements ``lo ..
          hi - 1`` of ``E``, each later one with matrix ``M`` (row-major);
        * ``down(E, lo, hi, start, M, b, prefix, z)``: hand elements ``start ..
          hi - 1`` their exclusive prefixes ``prefix[:, i]``, ``b`` holding the
          first one's; ``z`` NX scratch.
    """
    NX = nx
    ZERO = dtype(0.0)
    predict_mean, filter_mean_range = steps.predict_mean, steps.filter_mean_range

    def chunk(F, H, y, lo, n, k0, kmax, first, m0, m, t, U, L, e, Ws, Ls, logdets):
        if first:
            for i in range(NX):
                m[i] = m0[i]
        else:
            predict_mean(F, m, t)
        return filter_mean_range(F, H, y, lo, n, 1, k0, kmax, m, t, U, L, e, Ws, Ls, logdets)

    def times(M, b, E, i, z):  # b <- M b + E[:, i]
        for r in range(NX):
            s = ZERO
            for k in range(NX):
                s += M[r * NX + k] * b[k]
            z[r] = s
        for r in range(NX):
            b[r] = z[r] + E[r, i]

    times_f = jit(times)

    def up(E, lo, hi, M, b, z):
        for r in range(NX):
            b[r] = E[r, lo]
        for i in range(lo + 1, hi):
            times_f(M, b, E, i, z)

    def down(E, lo, hi, start, M, b, prefix, z):
        for i in range(start, hi):
            for r in range(NX):
                prefix[r, i] = b[r]
            if i + 1 < hi:
                times_f(M, b, E, i, z)

    return SteadySteps(jit(chunk), jit(up), jit(down))
