"""Datasets of units (sequences, series): the input forms of the sequence families, and packing.

A dataset of a sequence family is a set of *units* that share the model's
parameters: the sequences of a hidden Markov model, the series of a
state-space model.  :func:`read_units` turns every accepted input form into
``(identifier, list of unit arrays)`` pairs; :func:`pack_units` checks each
dataset and packs the valid ones in the two offset levels of
:class:`bulkem.data.Ragged` (the layout hmmlearn uses for many sequences,
one level up).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from .inputs import Packed
from .ragged import Ragged


def _as_unit(x: Any, where: str) -> np.ndarray:
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where} holds non-numeric values ({err}); expected numbers.") from None


def is_unit_list(ds: Any) -> bool:
    """A dataset given as a list of units (not one unit of numbers)."""
    return (isinstance(ds, (list, tuple)) and len(ds) > 0
            and not any(np.isscalar(v) for v in ds))


def _units(ds: Any, ident: Any, vector: bool, noun: str) -> list[np.ndarray]:
    seqs = list(ds) if is_unit_list(ds) else [ds]
    out = []
    for k, s in enumerate(seqs):
        a = _as_unit(s, f"dataset {ident!r}, {noun} {k}")
        if vector and a.ndim == 1:
            a = a[:, None]
        if a.ndim != (2 if vector else 1):
            want = "(n_obs, n_dims)" if vector else "(n_obs,)"
            hint = (" For one dataset per row of a 2-D array, pass list(array)."
                    if not vector and a.ndim == 2 else "")
            raise ValueError(f"dataset {ident!r}, {noun} {k} has shape {a.shape}; expected "
                             f"{want}. A dataset is one {noun} or a list of them.{hint}")
        out.append(a)
    return out


def read_units(datasets: Any, dataset_col: str, value_col: str | Sequence[str], *,
               unit_col: str, noun: str, vector: bool, unit_optional: bool = False
               ) -> list[tuple[Any, list[np.ndarray]]]:
    """Any accepted input form -> ``(identifier, list of units)`` pairs.

    Parameters
    ----------
    datasets : list, dict, array-like or pandas.DataFrame
        A list or a dict of datasets, each one unit (an array) or a list of
        units; one array (one dataset of one unit); or a long DataFrame with
        columns ``dataset_col``, ``unit_col`` and the value column(s), rows in
        order within a unit.
    dataset_col, value_col : str
        Column names for DataFrame input; with ``vector`` and no "value"
        column, every column but the dataset and unit columns is a value.
    unit_col : str
        Column naming the unit of each row, for DataFrame input.
    noun : str
        What a unit is called in messages ("sequence", "series").
    vector : bool
        Units are ``(n_obs, n_dims)`` arrays (a 1-D one is ``n_dims = 1``),
        else 1-D arrays.
    unit_optional : bool
        A DataFrame without ``unit_col`` is one unit per dataset (else an error).

    Returns
    -------
    list of (identifier, list of ndarray)
    """
    if isinstance(datasets, pd.DataFrame):
        has_units = unit_col in datasets.columns
        need = [dataset_col] if unit_optional else [dataset_col, unit_col]
        for c in need:
            if c not in datasets.columns:
                raise ValueError(
                    f"DataFrame input has columns {list(datasets.columns)}; expected a {c!r} "
                    f"column (set dataset_col= / {noun}_col= to name another).")
        keys = (dataset_col, unit_col)
        cols = [value_col] if isinstance(value_col, str) else list(value_col)
        if vector and value_col == "value" and "value" not in datasets.columns:
            cols = [c for c in datasets.columns if c not in keys]
        missing = [c for c in cols if c not in datasets.columns]
        if missing or not cols:
            raise ValueError(f"DataFrame input lacks value column(s) {missing or cols}; it "
                             f"has {list(datasets.columns)}. Pass value_col= to name them.")
        if not vector and len(cols) != 1:
            raise ValueError(f"this family takes one value column; value_col gives {cols}.")
        pairs = []
        for k, g in datasets.groupby(dataset_col, sort=False):
            parts = g.groupby(unit_col, sort=False) if has_units else [(None, g)]
            pairs.append((k, [s[cols].to_numpy() if vector else s[cols[0]].to_numpy()
                              for _, s in parts]))
    elif isinstance(datasets, Mapping):
        pairs = list(datasets.items())
    elif isinstance(datasets, (np.ndarray, pd.Series)):
        pairs = [(0, datasets)]
    elif isinstance(datasets, Sequence) and not isinstance(datasets, (str, bytes)):
        if len(datasets) and all(np.isscalar(v) for v in datasets):
            pairs = [(0, datasets)]  # one unit of numbers
        else:
            pairs = list(enumerate(datasets))
    else:
        raise TypeError(
            f"datasets is a {type(datasets).__name__}; expected a list or dict of datasets "
            f"(each one {noun} or a list of them), one array, or a long DataFrame.")
    if not pairs:
        raise ValueError("datasets is empty; expected at least one dataset.")
    out = [(k, _units(v, k, vector, noun)) for k, v in pairs]
    if vector:
        dims = {u.shape[1] for _, units in out for u in units if len(u)}
        if len(dims) > 1:
            raise ValueError(f"{noun} arrays have different numbers of dimensions "
                             f"{sorted(dims)}; every observation of a batch needs the same "
                             "dimensions.")
    return out


def pack_units(pairs: list, check: Callable[[list], str | None], width: int,
               count: Callable[[np.ndarray], int] | None = None) -> Packed:
    """Validate datasets of units and pack the valid ones (:class:`bulkem.data.Ragged`).

    Parameters
    ----------
    pairs : list of (identifier, list of ndarray)
        Each unit of shape ``(n,)`` or ``(n, width)``.
    check : callable
        ``check(units) -> str | None``: why a dataset cannot be fitted, or None.
    width : int
        Values per observation.
    count : callable, optional
        ``count(unit) -> int``: the observations of a unit that ``Packed.n_obs``
        counts (default: its length; a state-space series leaves out its
        missing steps).
    """
    ids = [k for k, _ in pairs]
    size = len if count is None else count
    n_obs = np.array([sum(size(u) for u in units) for _, units in pairs], dtype=np.int64)
    messages = [check(units) for _, units in pairs]
    valid = np.array([i for i, m in enumerate(messages) if m is None], dtype=np.int64)
    units = [u for i in valid for u in pairs[i][1]]
    n_units = np.array([len(pairs[i][1]) for i in valid], dtype=np.int64)
    groups = np.zeros(len(valid) + 1, dtype=np.int64)
    np.cumsum(n_units, out=groups[1:])
    lens = np.array([len(u) for u in units], dtype=np.int64)
    offsets = np.zeros(len(units) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    shape = (0,) if width == 1 else (0, width)
    values = (np.concatenate([np.asarray(u, dtype=np.float64) for u in units])
              if units else np.empty(shape))
    return Packed(ids, n_obs, messages, valid, Ragged(np.ascontiguousarray(values), offsets,
                                                      groups))
