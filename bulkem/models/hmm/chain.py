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
  the second (``stats[P:]``) the fit's totals; a block's transitions are the sums of
  ``xi_t(i, j) / A_ij``, multiplied by ``A_ij`` once, when the block is added to the totals;
* scratch (compute dtype): four vectors of ``N`` (the GPU's; the CPU's E-step keeps its
  vectors, and each unit's sums before they join the block's, on its stack);
* buf (float64): the unit's forward vectors, ``N`` per observation; on the CPU, whose
  buffers hold ``2 N`` per observation, each step's emission factors follow them, so that
  the backward pass reads them instead of taking them again.

The forward and backward vectors are scaled by powers of two (exact, as in the
normal form of :mod:`bulkem.kernels.scaled`), their exponents summed as
integers (the log-likelihood takes one log per unit), so neither underflows
whatever the length of the unit or the scale of the data; the emission
densities come shifted by their largest log value (``dens``'s ``m``).  A
vector is rescaled when the exponent of its sum leaves ``[-64, 0]`` (forward;
float32 ``[-16, 0]``) or ``[-64, 64]`` (backward), not at every step: the
recursion then does not wait for the sum and its exponent, and as scaling by
a power of two commutes with the arithmetic, the values are those of a
normalisation at every step, to the bit (barring subnormal numbers).  The last
forward vector is taken to normal form (sum in ``[0.5, 1)``) for the
log-likelihood.  Posterior probabilities are normalised per step by ``Z =
sum_i alpha_t(i) beta_t(i)``, in which the scales cancel.  The sums of
products of a step are taken with fused multiply-adds (written out on the CPU,
contracted by the GPU's compiler).

Sums over units are taken in fixed blocks of ``Tuning.wide_cpu_chunk_units``
units (a run-time value, the batch tuple's third item) from the dataset's
first (a lane's, on the GPU): each block's statistics and log-likelihood are
summed from zero, and the blocks' sums are added to the totals in block order.
The wide regime's CPU engine (:mod:`bulkem.engines.cpu.wide`) gives each thread
whole blocks of that many units and adds their sums in the same order, so a
dataset's fit has the same bits on the CPU whatever its batch, regime or thread
count (issue 30, bug 9).

Weighted units (``make_chain(weighted=True)``, ``fit(weights=...)``): the batch tuple has a
fourth item, one weight ``w`` per unit; a unit's posteriors are normalised by ``Z / w``
(so each of its statistics, on the stack or straight into ``stats``, counts ``w`` times)
and its log-likelihood is multiplied by ``w``.  Unweighted, ``w`` is 1 exactly: the same
bits.

An M-step leaves a transition row as it was when no transition out of its
state is expected (a state occupied only at the sequences' last steps): every
row then maximises the expected log-likelihood, and the row kept is a
probability vector (a row of zeros would make later scores -inf and
posteriors NaN; issue 30, bug 7).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np

from ...kernels.fastmath import make_math
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


def stack_vector(n: int, dtype):
    """A CPU device function ``f() -> array of n dtype`` on the caller's stack.

    The chain's vectors and its per-unit sums as stack arrays of a compiled CPU
    E-step: LLVM keeps them in registers (N = 4: the forward, backward and
    transition sums of a step never touch memory), where arrays of the heap it
    must store and load again after every write to ``stats``, which it cannot
    tell apart from them.  (The GPU's are local arrays already.)
    """
    from numba import carray, njit, types
    from numba.core import cgutils
    from numba.extending import intrinsic

    @intrinsic
    def _alloca(typingctx, dt):
        def codegen(context, builder, signature, args):
            return cgutils.alloca_once(builder, context.get_value_type(dt.dtype), size=n)
        return types.CPointer(dt.dtype)(dt), codegen

    @njit(inline="always")
    def vector():
        return carray(_alloca(dtype), (n,))

    return vector


def fused_multiply_add():
    """A CPU device function ``fma(a, b, c) -> a * b + c`` rounded once (LLVM's ``fma``).

    Written out, not left to the compiler's contraction (``fastmath={"contract"}``),
    which fuses or not as the code around it allows: the wide regime's E-step, compiled
    into another loop, then gave other bits than the bulk one.  (The GPU's compiler
    contracts ``a * b + c`` by default.)
    """
    from llvmlite import ir
    from numba import njit, types
    from numba.extending import intrinsic

    @intrinsic
    def _fma(typingctx, a, b, c):
        if not (isinstance(a, types.Float) and a == b == c):
            return None

        def codegen(context, builder, signature, args):
            ty = args[0].type
            fn = builder.module.declare_intrinsic("llvm.fma", [ty],
                                                  ir.FunctionType(ty, [ty, ty, ty]))
            return builder.call(fn, args)
        return a(a, b, c), codegen

    @njit(inline="always")
    def fma(a, b, c):
        return _fma(a, b, c)

    return fma


# The largest sizes the CPU keeps on the stack (values): the chain's four vectors of N,
# and its per-unit sums (transitions N x N, occupancies, starts, the emission's N x S).
STACK_VECTOR_MAX = 256
STACK_SUMS_MAX = 4096


def update_flags(update: str) -> int:
    """``update`` (``s`` startprob, ``t`` transmat, ``e`` the emission's) as the M-step's bits:
    1, 2 and 4."""
    return 1 * ("s" in update) + 2 * ("t" in update) + 4 * ("e" in update)


def make_dens(emission, dtype, jit) -> tuple[Callable, Callable, Callable]:
    """An emission's factors on any target, and its exponents' function.

    Returns
    -------
    dens : callable
        ``dens(work, wo, N, K, x, xi, e, xc) -> m``: ``e[i] = b_i(x) exp(-m)`` (the hook
        ``dens``, then ``exp(-e[i])`` for an emission with ``log_dens``; ``xc``:
        ``EXP_CONSTS``).
    raw : callable
        The hook ``dens`` itself (``e`` the exponents, with ``log_dens``).
    exp_neg : callable
        ``exp_neg(a, xc) = exp(-a)`` in ``dtype`` (:func:`bulkem.kernels.fastmath.make_math`:
        a polynomial in float64, 0 from ``a = 690``).
    """
    raw = jit(emission.dens)
    exp_neg = make_math(dtype, jit)[0]
    if emission.log_dens:
        def dens(work, wo, N, K, x, xi, e, xc):
            m = raw(work, wo, N, K, x, xi, e)
            for i in range(N):
                e[i] = exp_neg(e[i], xc)
            return m
    else:
        def dens(work, wo, N, K, x, xi, e, xc):
            return raw(work, wo, N, K, x, xi, e)
    return jit(dens), raw, exp_neg


def make_chain(emission, layout: ChainLayout, dtype, jit, terminating: bool = False,
               update: str = "ste", *, jit_outer=None, local=None,
               local_max: tuple[int, int] = (STACK_VECTOR_MAX, STACK_SUMS_MAX),
               keep_emission: bool = False, fma=None, weighted: bool = False,
               update_item: int | None = None) -> Pieces:
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
    local : callable, optional
        ``local(n, dtype) -> f``, ``f()`` an array of ``n`` of the thread's own (the CPU's
        stack, :func:`stack_vector`; a GPU thread's local array): the E-step's vectors and
        its copy of the transition matrix (up to ``local_max[0]`` values each), and each
        unit's sums (up to ``local_max[1]`` values; added to the block's after the unit),
        go there, where the compiler can keep them in registers (their indices are
        constants once the loops over states are unrolled); else the vectors are
        ``scratch``, the transitions are read from ``work`` and the sums go straight to
        ``stats`` (the vectors and transitions give the same bits either way; the per-unit
        sums add in another order).
    local_max : (int, int)
        The largest vectors (and transition matrix) and per-unit sums given ``local``
        arrays.
    keep_emission : bool
        Each step's emission factors are kept after the forward vectors (``2 N`` values
        per observation: the CPU engines' buffers, sized for their longest unit; a unit
        that finds its buffer shorter gets a NaN log-likelihood), for the backward pass to
        read instead of taking them again.  An emission with ``log_dens`` has a unit's
        exponents taken first, then their ``exp(-a)`` in one loop (SIMD lanes).
    fma : callable, optional
        ``fma(a, b, c)``, ``a * b + c`` rounded once, for operands of one float type
        (:func:`fused_multiply_add`, the CPU); else ``a * b + c`` as written (which the
        GPU's compiler contracts to the same).
    weighted : bool
        Each unit has a weight ``w`` (the batch tuple's fourth item, one per unit,
        ``HMMModel.weighted``): its posteriors are scaled by ``w`` where they are normalised
        (so its statistics count ``w`` times), its log-likelihood is multiplied by ``w``,
        and the M-step's start probabilities divide by the summed weights, not the number
        of units.  Unweighted, the scale is 1 exactly: the same bits.
    update_item : int, optional
        Where the M-step reads ``update`` at run time: the batch tuple's item of that
        index, ``1 * s + 2 * t + 4 * e`` (:func:`update_flags`; the CPU engines: one
        kernel for every ``update``); None: ``update``, compiled in.
    """
    N, K = layout.N, layout.K
    PT, PE = layout.p_trans, layout.p_emit
    WX, WE = layout.w_exit, layout.w_emit
    SO, SE = layout.s_occ, layout.s_emit
    NSE = N * layout.S  # the emission's statistics
    P = layout.s_part  # a block's statistics at stats[:P], the totals at stats[P:]
    TERM = terminating
    FLAGS = update_flags(update)
    UI = update_item

    if UI is None:
        def flags_py(data):
            return FLAGS
    else:
        def flags_py(data):
            return data[UI]

    flags_of = jit(flags_py)
    dens, raw_dens, exp_neg = make_dens(emission, dtype, jit)
    PRE = keep_emission and emission.log_dens
    expo = jit(exponent)
    p2 = jit(pow2)
    # |exponents| up to this are scaled by one multiplication in the compute dtype
    # (2**-e a normal number of it); beyond, by ldexp (same result, to the bit)
    LIM = 1000 if dtype == np.float64 else 120
    # a vector is rescaled when its sum's exponent leaves [-TH, 0] (forward) or [-TH, TH]
    # (backward): rarely, so the scaling is off the recursion's critical path
    TH = 64 if dtype == np.float64 else 16
    if emission.accum_all is not None:
        accum_all = jit(emission.accum_all)
    else:
        accum = jit(emission.accum)

        def each(stats, so, N, K, g, x, xi):
            for i in range(N):
                accum(stats, so, N, K, g[i], i, x, xi)

        accum_all = jit(each)
    prep_e = jit(emission.prep)
    if fma is None:
        def fma(a, b, c):
            return a * b + c

        fma = jit(fma)
    F64 = np.float64
    mstep_e = jit(emission.mstep)
    ZERO = dtype(0.0)
    ONE = dtype(1.0)
    CAST = dtype  # the forward vectors come back from the float64 buffer in the compute dtype
    MIN_MASS = MIN_COMPONENT_MASS
    ONE_PLUS = 1.0 + PROB_RTOL
    COLLAPSE = DEGENERATE_COLLAPSE
    STACK_VEC = local is not None and N <= local_max[0]
    STACK_TRANS = local is not None and N * N <= local_max[0]
    KEEP_E = keep_emission
    STACK_SUMS = local is not None and N * N + 2 * N + NSE <= local_max[1]
    if STACK_VEC:
        vector = local(N, dtype)
    if STACK_TRANS:  # the E-step's copy of the transitions
        trans_v = local(N * N, dtype)
        TO = 0

        def take_trans(work, tr):
            for k in range(N * N):
                tr[k] = work[PT + k]
            return tr
    else:  # read from work
        TO = PT

        def no_trans():
            return 0

        def take_trans(work, tr):
            return work

        trans_v = jit(no_trans)
    take_trans_f = jit(take_trans)
    if STACK_SUMS:
        sums_nn, sums_n, sums_e = local(N * N, np.float64), local(N, np.float64), \
            local(max(NSE, 1), np.float64)

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

    def settle(v, lo, hi):
        # v rescaled by 2^-e if the exponent e of its sum is outside [lo, hi]; returns that e
        # (or 0).  Exact: a power of two.
        s = v[0]
        for j in range(1, N):
            s += v[j]
        ex = expo(s)
        if lo <= ex <= hi:
            return 0
        sc = CAST(p2(-ex)) if -LIM <= ex <= LIM else ZERO
        for j in range(N):
            v[j] = v[j] * sc if -LIM <= ex <= LIM else math.ldexp(v[j], -ex)
        return ex

    settle_f = jit(settle)

    if weighted:
        def unit_weight(data, u):
            return np.float64(data[3][u])

        def start_mass(stats, n):  # the units' summed weights: sum_i gamma_0(i) w
            m = 0.0
            for i in range(N):
                m += stats[P + i]
            return m
    else:
        def unit_weight(data, u):
            return 1.0

        def start_mass(stats, n):
            return n

    weight_f, start_mass_f = jit(unit_weight), jit(start_mass)

    def unit(x, a0, T, work, tr, to, xs, xo, oc, oo, st, so, es, eo, a, e, b, nb, buf, wt, xc):
        # The unit's statistics (the posteriors, normalised by wt / Z) count wt times.
        # forward: a = alpha_t 2^-R (R the exponents taken out so far), stored in
        # buf[t N:(t + 1) N]; the normalisation of a step is not waited for by the next
        NT = N * T
        if KEEP_E and len(buf) < 2 * NT:
            return math.nan  # (the CPU engines size every buffer for their longest unit)
        if PRE:
            # every step's exponents first (buf[NT + t N:]), then exp(-a) of them all in one
            # loop, which the compiler runs in SIMD lanes
            shift = 0.0
            for t in range(T):
                shift += np.float64(raw_dens(work, WE, N, K, x, a0 + t, e))
                for j in range(N):
                    buf[NT + t * N + j] = e[j]
            for k in range(NT):  # (as NT + k: a range from NT is not vectorised)
                buf[NT + k] = exp_neg(CAST(buf[NT + k]), xc)
            for j in range(N):
                e[j] = CAST(buf[NT + j])
        else:
            shift = np.float64(dens(work, WE, N, K, x, a0, e, xc))
        for j in range(N):
            a[j] = work[j] * e[j]
        R = settle_f(a, -TH, 0)
        for j in range(N):
            buf[j] = a[j]
        for t in range(1, T):
            if PRE:
                for j in range(N):
                    e[j] = CAST(buf[NT + t * N + j])
            else:
                shift += np.float64(dens(work, WE, N, K, x, a0 + t, e, xc))
                if KEEP_E:
                    for j in range(N):
                        buf[NT + t * N + j] = e[j]
            ai = a[0]
            for j in range(N):
                nb[j] = ai * tr[to + j]
            for i in range(1, N):
                ai = a[i]
                for j in range(N):
                    nb[j] = fma(ai, tr[to + i * N + j], nb[j])
            for j in range(N):
                a[j] = nb[j] * e[j]
            R += settle_f(a, -TH, 0)
            for j in range(N):
                buf[t * N + j] = a[j]
        # the last vector in normal form, its sum (or exit mass) in one log
        R += settle_f(a, 1, 0)
        s = a[0] * work[WX] if TERM else a[0]
        for j in range(1, N):
            s += a[j] * work[WX + j] if TERM else a[j]
        ll = shift + R * LN2 + math.log(np.float64(s))
        # backward: b = beta_t 2^-k; gamma and xi normalised per step by
        # Z = sum_i alpha_t(i) beta_t(i) (the scales cancel)
        t = T - 1
        for i in range(N):
            b[i] = work[WX + i] if TERM else ONE
        z = CAST(buf[t * N]) * b[0]
        for i in range(1, N):
            z = fma(CAST(buf[t * N + i]), b[i], z)
        inv = wt / z
        for i in range(N):
            g = np.float64(CAST(buf[t * N + i]) * b[i] * inv)
            oc[oo + i] += g
            nb[i] = g
        accum_all(es, eo, N, K, nb, x, a0 + t)
        while t > 0:
            t -= 1
            if KEEP_E:
                for j in range(N):
                    e[j] = CAST(buf[NT + (t + 1) * N + j]) * b[j]
            else:
                dens(work, WE, N, K, x, a0 + t + 1, e, xc)
                for j in range(N):
                    e[j] *= b[j]
            # e_j = w_j = b_j(x_{t+1}) beta_{t+1}(j)
            for i in range(N):
                acc = tr[to + i * N] * e[0]
                for j in range(1, N):
                    acc = fma(tr[to + i * N + j], e[j], acc)
                b[i] = acc
            z = CAST(buf[t * N]) * b[0]
            for i in range(1, N):
                z = fma(CAST(buf[t * N + i]), b[i], z)
            inv = wt / z
            for i in range(N):
                ai = CAST(buf[t * N + i]) * inv
                for j in range(N):  # xi_t(i, j) / A_ij (A_ij is applied once per block)
                    xs[xo + i * N + j] = fma(F64(ai), F64(e[j]), xs[xo + i * N + j])
                g = np.float64(ai * b[i])
                oc[oo + i] += g
                nb[i] = g
            accum_all(es, eo, N, K, nb, x, a0 + t)
            settle_f(b, -TH, TH)
        for i in range(N):
            st[so + i] += nb[i]  # gamma_0
        return ll

    unit_f = jit(unit)

    def block_done(work, stats):
        # the block's sums into the totals (the transitions times A_ij), in block order
        for k in range(P):
            v = stats[k]
            if PT <= k < SO:
                v *= np.float64(work[k])
            stats[P + k] += v
            stats[k] = 0.0

    block_f = jit(block_done)

    if STACK_VEC and STACK_SUMS:
        def estep(data, lo, hi, step, work, stats, scratch, buf, xc):
            x, units, block = data[0], data[1], data[2]  # block: Tuning.wide_cpu_chunk_units
            a, e, b, nb = vector(), vector(), vector(), vector()
            tr = take_trans_f(work, trans_v())
            xs, oc, st, es = sums_nn(), sums_n(), sums_n(), sums_e()
            for k in range(N * N):
                xs[k] = 0.0
            for k in range(N):
                oc[k] = 0.0
                st[k] = 0.0
            for k in range(NSE):
                es[k] = 0.0
            ll = 0.0
            part = 0.0
            n = 0
            u = lo
            while u < hi:
                a0 = units[u]
                w = weight_f(data, u)
                part += w * unit_f(x, a0, units[u + 1] - a0, work, tr, TO, xs, 0, oc, 0, st,
                                   0, es, 0, a, e, b, nb, buf, CAST(w), xc)
                for k in range(N):  # the unit's sums into the block's
                    stats[k] += st[k]
                    st[k] = 0.0
                    stats[SO + k] += oc[k]
                    oc[k] = 0.0
                for k in range(N * N):
                    stats[PT + k] += xs[k]
                    xs[k] = 0.0
                for k in range(NSE):
                    stats[SE + k] += es[k]
                    es[k] = 0.0
                u += step
                n += 1
                if n == block or u >= hi:
                    block_f(work, stats)
                    ll += part
                    part = 0.0
                    n = 0
            return ll
    else:
        def estep(data, lo, hi, step, work, stats, scratch, buf, xc):
            x, units, block = data[0], data[1], data[2]  # block: Tuning.wide_cpu_chunk_units
            if STACK_VEC:
                a, e, b, nb = vector(), vector(), vector(), vector()
            else:
                a = scratch[0:N]
                e = scratch[N:2 * N]
                b = scratch[2 * N:3 * N]
                nb = scratch[3 * N:4 * N]
            tr = take_trans_f(work, trans_v())
            ll = 0.0
            part = 0.0
            n = 0
            u = lo
            while u < hi:
                a0 = units[u]
                w = weight_f(data, u)
                part += w * unit_f(x, a0, units[u + 1] - a0, work, tr, TO, stats, PT, stats, SO,
                                   stats, 0, stats, SE, a, e, b, nb, buf, CAST(w), xc)
                u += step
                n += 1
                if n == block or u >= hi:
                    block_f(work, stats)
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
        flags = flags_of(data)
        if flags & 1:
            m = start_mass_f(stats, n)
            for i in range(N):
                params[i] = stats[P + i] / m
        if flags & 2:
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
        if flags & 4:
            return mstep_e(stats, P + SE, stats, P + SO, params, PE, N, K, reg)
        return 0

    outer = jit_outer or jit
    return Pieces(jit(setup), jit(prepare), outer(estep), jit(complete), outer(mstep), P)
