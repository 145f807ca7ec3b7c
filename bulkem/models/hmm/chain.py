"""A hidden chain's E-step and M-step: scaled forward-backward over each unit of a dataset.

One layout serves every latent-chain model: the hidden Markov model (a
stochastic transition matrix) and the transient Markovian arrival process (a
sub-stochastic one, ``terminating=True``: after each observation the chain
moves on with probability ``sum_j A_ij`` and ends with ``d_i = 1 - sum_j A_ij``).
``N`` states; the emission (:mod:`.emissions`) supplies the per-state
densities, statistics and M-step.

Layouts of one fit (``E``, ``C``, ``S`` the emission's parameters,
coefficients and statistics per state):

* params: ``startprob (N), transmat (N x N, row = from), emission (N x E)``;
* work (compute dtype): ``startprob (N), transmat (N x N), exit (N), emission (N x C)``;
* stats (float64): two blocks of ``start (N), transitions (N x N), occupancy (N),
  emission (N x S)``: the first (``P`` values, before ``first_stat``) sums a block of units,
  the second (``stats[P:]``) the fit's totals;
* scratch (compute dtype): four vectors of ``N``;
* buf (float64): the unit's forward vectors, ``N`` per observation.

The forward and backward vectors are kept in normal form
(:mod:`bulkem.kernels.scaled`): after every step they are scaled by a power
of two so that their sum lies in ``[0.5, 1)``, exactly, and the exponents
are summed as integers (the log-likelihood takes one log per unit), so
neither underflows whatever the length of the unit or the scale of the
data; the emission densities come shifted by their largest log value
(``dens``'s ``m``).  Posterior probabilities are normalised per step by
``Z = sum_i alpha_t(i) beta_t(i)``.

Sums over units are taken in fixed blocks of ``Tuning.wide_cpu_chunk_units``
units (a run-time value, the batch tuple's third item) from the dataset's
first (a lane's, on the GPU): each block's statistics and log-likelihood are
summed from zero, and the blocks' sums are added to the totals in block order.
The wide regime's CPU engine (:mod:`bulkem.engines.cpu.wide`) gives each thread
whole blocks of that many units and adds their sums in the same order, so a
dataset's fit has the same bits on the CPU whatever its batch, regime or thread
count (issue 30, bug 9).

An M-step leaves a transition row as it was when no transition out of its
state is expected (a state occupied only at the sequences' last steps): every
row then maximises the expected log-likelihood, and the row kept is a
probability vector (a row of zeros would make later scores -inf and
posteriors NaN; issue 30, bug 7).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from ...kernels.scaled import LN2, exponent, pow2
from ...tuning import DEGENERATE_COLLAPSE, MIN_COMPONENT_MASS, PROB_RTOL
from ..base import Pieces, Sizes


class ChainLayout(NamedTuple):
    """Offsets of the blocks of one fit's arrays (see the module docstring); those of the
    parameters come from the model's named blocks (``HMMModel.params_layout``)."""

    N: int
    K: int
    E: int  # emission parameters per state
    C: int  # emission coefficients per state
    S: int  # emission statistics per state
    p_trans: int  # where the transition matrix starts in params
    p_emit: int  # where the emission's records start
    n_params: int

    @property
    def w_exit(self) -> int:
        return self.N + self.N * self.N

    @property
    def w_emit(self) -> int:
        return self.w_exit + self.N

    @property
    def n_work(self) -> int:
        return self.w_emit + self.N * self.C

    @property
    def s_occ(self) -> int:
        return self.N + self.N * self.N

    @property
    def s_emit(self) -> int:
        return self.s_occ + self.N

    @property
    def s_part(self) -> int:
        """Statistics of one block (``P``): the totals follow at ``stats[P:]``."""
        return self.s_emit + self.N * self.S

    @property
    def n_stats(self) -> int:
        return 2 * self.s_part

    def sizes(self) -> Sizes:
        return Sizes(params=self.n_params, stats=self.n_stats, totals=0, coef=0,
                     work=self.n_work, scratch=4 * self.N, buf_per_len=self.N)


def make_chain(emission, layout: ChainLayout, dtype, jit, terminating: bool = False,
               update: str = "ste", *, jit_outer=None) -> Pieces:
    """The driver pieces of a chain with this emission.

    Parameters
    ----------
    emission : Emission
    layout : ChainLayout
    dtype : numpy scalar type
        Compute dtype of the per-step math.
    jit : callable
        The target's device-function decorator.
    terminating : bool
        A sub-stochastic transition matrix whose row deficits are exit
        probabilities (TMAP); else a stochastic one.
    update : str
        Which parameters the M-step updates: ``s`` startprob, ``t`` transmat,
        ``e`` the emission's.
    jit_outer : callable, optional
        Compiles the E-step and the M-step (the big pieces) when given: on the CPU each is
        compiled once and called, not inlined into every caller of the driver, which
        halves the compile time and runs faster too (measured: a Poisson HMM, 3 states,
        first fit 25.7 -> 13.6 s, 200 datasets x 10 starts 8.4 -> 6.5 s; the same bits).
    """
    N, K = layout.N, layout.K
    PT, PE = layout.p_trans, layout.p_emit
    WX, WE = layout.w_exit, layout.w_emit
    SO, SE = layout.s_occ, layout.s_emit
    P = layout.s_part  # a block's statistics at stats[:P], the totals at stats[P:]
    TERM = terminating
    UP_START, UP_TRANS, UP_EMIT = "s" in update, "t" in update, "e" in update
    dens = jit(emission.dens)
    expo = jit(exponent)
    p2 = jit(pow2)
    # |exponents| up to this are scaled by one multiplication in the compute dtype
    # (2**-e a normal number of it); beyond, by ldexp (same result, to the bit)
    LIM = 1000 if dtype == np.float64 else 120
    accum = jit(emission.accum)
    prep_e = jit(emission.prep)
    mstep_e = jit(emission.mstep)
    ZERO = dtype(0.0)
    ONE = dtype(1.0)
    CAST = dtype  # the forward vectors come back from the float64 buffer in the compute dtype
    MIN_MASS = MIN_COMPONENT_MASS
    ONE_PLUS = 1.0 + PROB_RTOL
    COLLAPSE = DEGENERATE_COLLAPSE

    def setup(data, lo, hi, step, tot):
        pass

    def prepare(data, params, tot, coef, work):
        ok = True
        for i in range(N):
            p = params[i]
            ok = ok and p >= 0.0 and p <= ONE_PLUS  # (an M-step may round a sum to 1 + 1 ulp)
            work[i] = p
            row = 0.0
            for j in range(N):
                a = params[PT + i * N + j]
                ok = ok and a >= 0.0
                row += a
                work[PT + i * N + j] = a
            ok = ok and row <= ONE_PLUS
            work[WX + i] = max(1.0 - row, 0.0)
        ok = prep_e(params, PE, N, K, work, WE) and ok
        return 0.0 if ok else math.nan

    def unit(x, a0, T, work, stats, a, e, b, nb, buf):
        # forward: alpha_t in normal form, stored in buf[t N:(t + 1) N]
        shift = np.float64(dens(work, WE, N, K, x, a0, e))
        s = ZERO
        for j in range(N):
            v = work[j] * e[j]
            nb[j] = v
            s += v
        ex = expo(s)
        scale = ex
        sc = CAST(p2(-ex)) if -LIM <= ex <= LIM else ZERO
        for j in range(N):
            a[j] = nb[j] * sc if -LIM <= ex <= LIM else math.ldexp(nb[j], -ex)
            buf[j] = a[j]
        for t in range(1, T):
            shift += np.float64(dens(work, WE, N, K, x, a0 + t, e))
            s = ZERO
            for j in range(N):
                acc = ZERO
                for i in range(N):
                    acc += a[i] * work[PT + i * N + j]
                v = acc * e[j]
                nb[j] = v
                s += v
            ex = expo(s)
            scale += ex
            sc = CAST(p2(-ex)) if -LIM <= ex <= LIM else ZERO
            for j in range(N):
                a[j] = nb[j] * sc if -LIM <= ex <= LIM else math.ldexp(nb[j], -ex)
                buf[t * N + j] = a[j]
        s = ZERO
        for j in range(N):
            s += a[j] * work[WX + j] if TERM else a[j]
        ll = shift + scale * LN2 + math.log(np.float64(s))
        # backward: beta_t normalised; gamma and xi normalised per step by Z
        t = T - 1
        z = ZERO
        for i in range(N):
            b[i] = work[WX + i] if TERM else ONE
            z += CAST(buf[t * N + i]) * b[i]
        inv = ONE / z
        for i in range(N):
            g = np.float64(CAST(buf[t * N + i]) * b[i] * inv)
            stats[SO + i] += g
            accum(stats, SE, N, K, g, i, x, a0 + t)
            if t == 0:
                stats[i] += g
        while t > 0:
            t -= 1
            dens(work, WE, N, K, x, a0 + t + 1, e)
            for j in range(N):
                e[j] *= b[j]  # w_j = b_j(x_{t+1}) beta_{t+1}(j)
            z = ZERO
            for i in range(N):
                acc = ZERO
                for j in range(N):
                    acc += work[PT + i * N + j] * e[j]
                nb[i] = acc
                z += CAST(buf[t * N + i]) * acc
            inv = ONE / z
            sb = ZERO
            for i in range(N):
                ai = CAST(buf[t * N + i]) * inv
                for j in range(N):
                    stats[PT + i * N + j] += np.float64(ai * work[PT + i * N + j] * e[j])
                g = np.float64(ai * nb[i])
                stats[SO + i] += g
                accum(stats, SE, N, K, g, i, x, a0 + t)
                if t == 0:
                    stats[i] += g
                sb += nb[i]
            ex = expo(sb)
            sc = CAST(p2(-ex)) if -LIM <= ex <= LIM else ZERO
            for i in range(N):
                b[i] = nb[i] * sc if -LIM <= ex <= LIM else math.ldexp(nb[i], -ex)
        return ll

    unit_f = jit(unit)

    def estep(data, lo, hi, step, work, stats, scratch, buf, xc):
        x, units, block = data  # block: Tuning.wide_cpu_chunk_units
        a = scratch[0:N]
        e = scratch[N:2 * N]
        b = scratch[2 * N:3 * N]
        nb = scratch[3 * N:4 * N]
        ll = 0.0
        part = 0.0
        n = 0
        u = lo
        while u < hi:
            a0 = units[u]
            part += unit_f(x, a0, units[u + 1] - a0, work, stats, a, e, b, nb, buf)
            u += step
            n += 1
            if n == block or u >= hi:  # the block's sums into the totals, in block order
                for k in range(P):
                    stats[P + k] += stats[k]
                    stats[k] = 0.0
                ll += part
                part = 0.0
                n = 0
        return ll

    def complete(data, stats, tot):
        pass

    def mstep(data, stats, params, n, reg):
        for i in range(N):
            if not stats[P + SO + i] >= MIN_MASS:
                return COLLAPSE
        if UP_START:
            for i in range(N):
                params[i] = stats[P + i] / n
        if UP_TRANS:
            for i in range(N):
                den = stats[P + SO + i]
                if not TERM:
                    den = 0.0
                    for j in range(N):
                        den += stats[P + PT + i * N + j]
                if den > 0.0:  # else no transition out of state i is expected: the row stays
                    inv = 1.0 / den
                    for j in range(N):
                        params[PT + i * N + j] = stats[P + PT + i * N + j] * inv
        if UP_EMIT:
            return mstep_e(stats, P + SE, stats, P + SO, params, PE, N, K, reg)
        return 0

    outer = jit_outer or jit
    return Pieces(jit(setup), jit(prepare), outer(estep), jit(complete), outer(mstep), P)
