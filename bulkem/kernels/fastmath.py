"""``exp(-a)`` and ``1 / s`` for the E-step's inner loops, in float64 and float32."""

from __future__ import annotations

import math

import numpy as np

# exp(-a) in float64 (a >= 0): a = n ln2 - r with |r| <= ln2 / 2 (n an integer),
# exp(-a) = 2^-n exp(r), exp(r) by a degree-10 polynomial fitted on the range
# (relative error 4e-16 before rounding).  ln2 is split so that n * LN2_HI is
# exact; 2^-n is added to the result's exponent bits.  The constants reach the
# code as an argument, EXP_CONSTS: (log2 e, LN2_HI, LN2_LO, the polynomial from
# the highest power).  As kernel parameters they sit in the GPU's constant
# bank, which the FMAs read directly; written as literals, each 64-bit
# constant costs two moves per use inside the loop.
EXP_CONSTS = (1.4426950408889634, 0.6931471803691238, 1.9082149292705877e-10,
              2.750658474872563e-07, 2.7639724687538896e-06, 2.4801855300154606e-05,
              0.00019841171501755255, 0.001388888857773806, 0.00833333338456015,
              0.04166666666798856, 0.16666666666558091, 0.49999999999998296,
              1.0000000000000064)
_SHIFTER = 6755399441055744.0  # 1.5 * 2**52: adding it rounds to an integer
# exp(-a) is taken as 0 from a = 690 (exp(-690) = 2e-300) in float64 and a = 80
# (1.8e-35) in float32.  Every sum s of the E-step holds a term 1 (its largest),
# beside which such terms vanish, so s is the same; the responsibilities they
# give (and their products with the data) would otherwise be numbers near the
# bottom of the range, many of them subnormal, which cost Intel CPUs a
# microcode assist (~100 cycles) per operation.  Clamped at exp(-708) as they
# were, they took a third of a float64 iteration of the one-large-dataset
# benchmark on the H100 machine's CPU (benchmarks/HISTORY.md).
_EXP_ZERO64 = 690.0
_EXP_ZERO32 = 80.0


def _exp_neg64(a, xc):
    zero = a >= _EXP_ZERO64
    a = a if a < _EXP_ZERO64 else _EXP_ZERO64
    t = _SHIFTER - a * xc[0]  # t - _SHIFTER = -n, an integer
    n = _SHIFTER - t
    r = n * xc[1] - a  # exact
    r = r + n * xc[2]  # -a + n ln2 = r: exp(-a) = 2^-n exp(r)
    p = xc[3]
    p = p * r + xc[4]
    p = p * r + xc[5]
    p = p * r + xc[6]
    p = p * r + xc[7]
    p = p * r + xc[8]
    p = p * r + xc[9]
    p = p * r + xc[10]
    p = p * r + xc[11]
    p = p * r + xc[12]
    p = p * r + 1.0
    bits = np.float64(p).view(np.int64) + (np.float64(t).view(np.int64) << 52)
    return 0.0 if zero else np.int64(bits).view(np.float64)


def make_math(dtype, jit, approx=None):
    """``exp_neg(a, xc) = exp(-a)`` (``a >= 0``, ``xc = EXP_CONSTS``) and ``recip(s) = 1 / s``.

    ``approx`` replaces both with a target's own (the CUDA target's hardware
    approximations for float32).
    """
    if approx is not None:
        return approx
    ONE = dtype(1.0)

    def recip(s):
        return ONE / s

    if dtype == np.float64:
        return jit(_exp_neg64), jit(recip)

    CUT = dtype(_EXP_ZERO32)
    ZERO = dtype(0.0)

    def exp_neg(a, xc):
        return math.exp(-a) if a < CUT else ZERO

    return jit(exp_neg), jit(recip)
