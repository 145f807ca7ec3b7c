"""Scaled numbers in normal form: a mantissa vector and an integer power-of-two exponent.

Forward and backward vectors of a chain are multiplied by small numbers at
every step and would underflow over long sequences.  After each step they
are scaled by ``2**-e``, ``e`` the exponent of their sum, so that the sum
lies in ``[0.5, 1)``: a power-of-two scaling is exact (no rounding), and the
exponents add up as integers; the log of the total scale is ``E log 2``,
taken once (as in the TMAP EM paper's normal form, its equations 24-26).
"""

from __future__ import annotations

import math

import numpy as np

LN2 = math.log(2.0)
_MASK = np.int64(0x7FF)
_SHIFT = np.int64(52)


def exponent(s):
    """The integer ``e`` with ``s * 2**-e`` in ``[0.5, 1)`` (``s > 0`` and finite).

    Read off the float64 bits (``math.frexp`` is a library call on the CPU,
    twice as slow for the whole chain E-step); zero and subnormal sums go to
    ``frexp``.
    """
    biased = (np.float64(s).view(np.int64) >> _SHIFT) & _MASK
    if biased == 0:
        return math.frexp(s)[1]
    return biased - 1022


def pow2(e):
    """``2.0 ** e`` in float64, exactly (``|e| < 1022``), from its bits."""
    return np.int64((e + 1023) << 52).view(np.float64)
