"""Weights of units (``fit(weights=...)``): one per sequence of a hidden Markov model, one per
run of a TMAP.

The weights come in the datasets' own form with one weight per unit instead of one array per
unit (a list with an entry per dataset, a dict with the datasets' keys, a number for a
dataset of one unit), or as the name of a column of a long DataFrame, constant within each
unit.  Each unit of positive weight gets its weight as a last column, repeated on each of
its rows, so that it travels with the unit wherever the engines split, chunk or reorder
the datasets; units of weight 0 are left out (:class:`Weighted` keeps the others' input
numbers for the messages).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from ...data.units import UnitArrays, Words, read_units


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


def _n_units(units: Any) -> int:
    return len(units.lengths) if isinstance(units, UnitArrays) else len(units)


def unit_weights(pairs: list, weights: Any, datasets: Any, dataset_col: str, unit_col: str,
                 words: Words) -> list[np.ndarray]:
    """One float64 array per dataset of ``pairs``: its units' weights, in their order.

    Parameters
    ----------
    pairs : list of (identifier, units)
        The datasets as the family read them (a list of arrays or a ``UnitArrays`` each).
    weights : str, list, dict, number or array-like
        The name of a column of ``datasets`` (a long DataFrame), constant within each unit;
        or one entry per dataset (a dict: by the datasets' keys; a number: one dataset),
        each a number or a 1-D array of one weight per unit.
    datasets : Any
        The datasets as the caller gave them (to read a weight column).
    dataset_col, unit_col : str
        The DataFrame's dataset and unit columns.
    words : Words
        The family's names for datasets and units, for the messages.

    Raises
    ------
    ValueError
        When the weights do not line up with the datasets, or a weight column is not
        constant within a unit.  NaN, infinite or negative weights are returned as they
        are, for the model's check to make their dataset invalid.
    """
    ids = [k for k, _ in pairs]
    sizes = [_n_units(units) for _, units in pairs]
    unit = words.unit
    if isinstance(weights, str):
        entries = _column(weights, datasets, dataset_col, unit_col, words)
        got = [k for k, _ in entries]
        if got != ids:
            raise ValueError(f"weights={weights!r}: the column splits into {len(got)} "
                             f"{words.dataset}(s), the values into {len(ids)}; expected the "
                             f"same {words.dataset}s (rows with a missing key?).")
        entries = [w for _, w in entries]
    elif isinstance(weights, Mapping):
        missing = [k for k in ids if k not in weights]
        if missing:
            raise ValueError(f"weights has no entry for {words.dataset}(s) {missing[:5]}; its "
                             f"keys must be the {words.dataset}s' keys.")
        entries = [weights[k] for k in ids]
    else:
        if np.isscalar(weights) or (isinstance(weights, np.ndarray) and weights.ndim == 0):
            weights = [weights]  # one number: one dataset
        entries = list(weights)
        if len(entries) != len(ids):
            raise ValueError(f"weights holds {len(entries)} entries for {len(ids)} "
                             f"{words.dataset}(s); give one per {words.dataset} (a 1-D array "
                             f"of one weight per {unit}, or a number for a {words.dataset} of "
                             f"one {unit}), in the {words.dataset}s' form.")
    out = []
    for ident, n, e in zip(ids, sizes, entries, strict=True):
        try:
            w = np.atleast_1d(np.asarray(e, dtype=np.float64))
        except (TypeError, ValueError) as err:
            raise ValueError(f"weights of {words.dataset} {ident!r} are not numbers ({err}); "
                             f"expected one number per {unit}.") from None
        if w.ndim != 1 or len(w) != n:
            raise ValueError(f"{words.dataset} {ident!r} has {n} {words.units} but its weights "
                             f"have shape {w.shape}; expected ({n},): one weight per {unit}.")
        out.append(w)
    return out


def _column(name: str, datasets: Any, dataset_col: str, unit_col: str, words: Words
            ) -> list[tuple[Any, np.ndarray]]:
    """A DataFrame's weight column as ``(dataset, one weight per unit)`` pairs, checked
    constant within each unit."""
    if not isinstance(datasets, pd.DataFrame):
        raise ValueError(f"weights={name!r} names a column, but datasets is a "
                         f"{type(datasets).__name__}, not a DataFrame; pass the weights in "
                         f"the datasets' form (a list with a 1-D array of one weight per "
                         f"{words.unit} for each {words.dataset}).")
    if name not in datasets.columns:
        raise ValueError(f"weights={name!r}: no such column; the DataFrame has "
                         f"{list(datasets.columns)}.")
    cols = list(dict.fromkeys([dataset_col, unit_col, name]))
    out = []
    for ident, ua in read_units(datasets[cols], dataset_col, unit_col, name, multi=False,
                                words=words, packed=True):
        v, lengths = np.asarray(ua.values, np.float64), np.asarray(ua.lengths, np.int64)
        first = v[np.cumsum(lengths) - lengths]  # (a frame's units have rows)
        rep = np.repeat(first, lengths)
        differs = ~((v == rep) | (np.isnan(v) & np.isnan(rep)))
        if differs.any():
            i = int(np.flatnonzero(differs)[0])
            k = int(np.searchsorted(np.cumsum(lengths), i, side="right"))
            raise ValueError(f"weights={name!r} is not constant within {words.dataset} "
                             f"{ident!r}, {words.unit} {k} (values {rep[i]:g} and {v[i]:g}); "
                             f"the column holds one weight per {words.unit}, repeated on each "
                             "of its rows.")
        out.append((ident, first))
    return out


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


def weight_problems(w: np.ndarray, numbers: np.ndarray, unit: str) -> str | None:
    """Why the units' weights ``w`` cannot be used (NaN, infinite or negative ones, each
    named by its unit's input number ``numbers[k]``), or None."""
    bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
    if not len(bad):
        return None
    named = "; ".join(f"{unit} {int(numbers[k])}: weight {w[k]:g}" for k in bad[:5])
    more = f"; {len(bad) - 5} more bad weights" if len(bad) > 5 else ""
    return (f"{named}{more} (weights must be finite and >= 0; a weight of 0 leaves its "
            f"{unit} out)")
