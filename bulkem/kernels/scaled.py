"""Scaled numbers in normal form: a mantissa vector and an integer power-of-two exponent.

Forward and backward vectors of a chain are multiplied by small numbers at
every step and would underflow over long sequences.  After each step they
are scaled by ``2**-e``, ``e`` the exponent of their sum, so that the sum
lies in ``[0.5, 1)``: a power-of-two scaling is exact (no rounding), and the
exponents add up as integers; the log of the total scale is ``E log 2``,
taken once (as in the TMAP EM paper's normal form, its equations 24-26).

The exponent is read from the sum's bits and the scaling is a multiplication
by ``2**-e`` made from bits (:func:`pow2`), not calls of ``frexp`` and
``ldexp`` (a third of a TMAP E-step's time on the CPU); both are exact, so
the results are those of ``frexp`` and ``ldexp`` to the bit.
"""

from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
_BIAS = 1022  # s = m 2**e with m in [0.5, 1): e = (exponent field) - 1022


def exponent(s):
    """The integer ``e`` with ``s * 2**-e`` in ``[0.5, 1)`` (``s > 0`` and finite)."""
    field = (np.float64(s).view(np.int64) >> 52) & 0x7FF
    if field == 0:  # a subnormal sum: rare, so the library call
        return math.frexp(s)[1]
    return field - _BIAS


def pow2(k):
    """``2.0**k`` as a float64, exactly, for ``-1022 <= k <= 1023`` (from its bits)."""
    return np.int64((k + 1023) << 52).view(np.float64)
