"""Weights of units (``fit(weights=...)``): one per sequence of a hidden Markov model, one per
run of a TMAP, read by :func:`bulkem.data.weights.unit_weights`.

Each unit of positive weight gets its weight as a last column, repeated on each of its rows,
so that it travels with the unit wherever the engines split, chunk or reorder the datasets;
units of weight 0 are left out (:class:`Weighted` keeps the others' input numbers for the
messages).
"""

from __future__ import annotations

import numpy as np

from ...data.weights import unit_weight_problems as weight_problems
from ...data.weights import unit_weights

__all__ = ["Weighted", "unit_weights", "weight_problems", "with_column"]


class Weighted(list):
    """A dataset's units of positive weight, each with its weight as its last column.

    Attributes
    ----------
    numbers : ndarray of int
        Each unit's position among the dataset's units as given (for messages).
    """

    def __init__(self, units: list, numbers: np.ndarray) -> None:
        super().__init__(units)
        self.numbers = numbers


def with_column(units: list, w: np.ndarray) -> Weighted:
    """A dataset's units (arrays of ``(n,)`` or ``(n, d)``) of positive weight, each with its
    weight as a last column: ``(n, 2)`` or ``(n, d + 1)``."""
    keep = np.flatnonzero(w != 0.0)  # (NaN kept: the check names it)
    out = []
    for k in keep:
        u = np.asarray(units[k], dtype=np.float64)
        u = u[:, None] if u.ndim == 1 else u
        out.append(np.column_stack([u, np.full(len(u), w[k])]))
    return Weighted(out, keep)
