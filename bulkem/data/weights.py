"""Weights (``fit(weights=...)``), read in the datasets' own form and checked against them:
one per value of a mixture (attached to the values as their last column,
:func:`attach_weights`), one per unit (sequence, run, series: :func:`unit_weights`, which the
families attach in their own way)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .inputs import Flat, as_datasets
from .units import UnitArrays, Words, read_units


def attach_weights(pairs: Any, weights: Any, datasets: Any, dataset_col: str) -> Flat:
    """The datasets with each value's weight as its last column, values of weight 0 left out.

    Parameters
    ----------
    pairs : list of (identifier, ndarray) or Flat
        The datasets as :func:`~bulkem.data.as_datasets` read them.
    weights : str, list, dict or array-like
        The name of a column of ``datasets`` (a long DataFrame or ``pyarrow.Table``), or the
        weights in the datasets' own form: a list of arrays (one per dataset), a dict with the
        same keys, one array for one dataset.
    datasets : Any
        The datasets as the caller gave them (to read a weight column).
    dataset_col : str
        The dataset column of a DataFrame.

    Returns
    -------
    Flat
        Values of shape ``(n, 2)`` (scalar observations) or ``(n, D + 1)`` (vectors).  NaN,
        infinite or negative weights are kept, for the model's check to name their dataset.

    Raises
    ------
    ValueError
        When the weights do not line up with the datasets (another number of datasets, other
        identifiers, or another number of values in a dataset).
    """
    if isinstance(weights, str):
        if not isinstance(datasets, pd.DataFrame) and not type(datasets).__module__.startswith(
                "pyarrow"):
            raise ValueError(f"weights={weights!r} names a column, but datasets is a "
                             f"{type(datasets).__name__}, not a DataFrame; pass the weights "
                             "in the datasets' form (a list of arrays, one per dataset).")
        frame = datasets if isinstance(datasets, pd.DataFrame) else datasets.to_pandas()
        if weights not in frame.columns:
            raise ValueError(f"weights={weights!r}: no such column; the DataFrame has "
                             f"{list(frame.columns)}.")
        wpairs = as_datasets(frame, 1, dataset_col, weights)
    else:
        wpairs = as_datasets(weights, 1, dataset_col, "weight")
    n = len(pairs)
    ids = [pairs[k][0] for k in range(n)] if not isinstance(pairs, Flat) else list(pairs.ids)
    if isinstance(weights, Mapping):  # by key, whatever the order
        by_id = {wpairs[k][0]: wpairs[k][1] for k in range(len(wpairs))}
        missing = [k for k in ids if k not in by_id]
        if missing:
            raise ValueError(f"weights has no entry for dataset(s) {missing[:5]}; its keys "
                             "must be the datasets' keys.")
        warrays = [np.asarray(by_id[k], dtype=np.float64) for k in ids]
    else:
        if len(wpairs) != n:
            raise ValueError(f"weights holds {len(wpairs)} dataset(s) for {n} dataset(s); give "
                             "one array of weights per dataset, in the datasets' form.")
        warrays = [np.asarray(wpairs[k][1], dtype=np.float64) for k in range(n)]
    if isinstance(pairs, Flat):
        values, offsets = pairs.values, pairs.offsets
    else:
        arrays = [pairs[k][1] for k in range(n)]
        offsets = np.zeros(n + 1, dtype=np.int64)
        np.cumsum([len(a) for a in arrays], out=offsets[1:])
        values = np.concatenate(arrays) if n else np.empty(0)
    lengths = np.diff(offsets)
    for k, w in enumerate(warrays):
        if w.ndim != 1 or len(w) != lengths[k]:
            raise ValueError(f"dataset {ids[k]!r} has {lengths[k]} values but "
                             f"{w.size if w.ndim == 1 else w.shape} weights; give one weight "
                             "per value.")
    w = np.concatenate(warrays) if n else np.empty(0)
    cols = values[:, None] if values.ndim == 1 else values
    both = np.column_stack([cols, w])
    keep = w != 0.0  # (NaN kept: the check names it)
    if not keep.all():
        running = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(keep, out=running[1:])
        offsets = running[offsets]
        both = both[keep]
    return Flat(ids, np.ascontiguousarray(both), offsets)


def _n_units(units: Any) -> int:
    return len(units.lengths) if isinstance(units, UnitArrays) else len(units)


def unit_weights(pairs: list, weights: Any, datasets: Any, dataset_col: str, unit_col: str,
                 words: Words, unit_optional: bool = False) -> list[np.ndarray]:
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
    unit_optional : bool
        A DataFrame without ``unit_col`` is one unit per dataset (as the family reads it).

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
        entries = _unit_column(weights, datasets, dataset_col, unit_col, words, unit_optional)
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


def _unit_column(name: str, datasets: Any, dataset_col: str, unit_col: str, words: Words,
                 unit_optional: bool) -> list[tuple[Any, np.ndarray]]:
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
    if unit_optional and unit_col not in datasets.columns:
        unit_col = dataset_col  # one unit per dataset
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


def unit_weight_problems(w: np.ndarray, numbers: np.ndarray, unit: str) -> str | None:
    """Why the units' weights ``w`` cannot be used (NaN, infinite or negative ones, each
    named by its unit's input number ``numbers[k]``), or None."""
    bad = np.flatnonzero(~(np.isfinite(w) & (w >= 0)))
    if not len(bad):
        return None
    named = "; ".join(f"{unit} {int(numbers[k])}: weight {w[k]:g}" for k in bad[:5])
    more = f"; {len(bad) - 5} more bad weights" if len(bad) > 5 else ""
    return (f"{named}{more} (weights must be finite and >= 0; a weight of 0 leaves its "
            f"{unit} out)")
