"""Input forms of datasets made of units (sequences of a hidden Markov model, runs of a TMAP).

Every sequence family reads its input here: a batch is a list or a dict of
datasets, each one unit or a list of units (ragged lengths), one array (one
dataset of one unit), or a long DataFrame with a dataset column, a unit
column and the value column(s), rows in order within a unit.  The words in
the messages (``dataset``/``sequence`` or ``trace``/``run``) are the family's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd


class Words(NamedTuple):
    """What a family calls its datasets and units, and its unit-column option."""

    dataset: str = "dataset"
    unit: str = "sequence"
    unit_col: str = "sequence_col"


HMM_WORDS = Words()

def as_unit(x: Any, where: str) -> np.ndarray:
    """One unit as a float64 array; TypeError naming ``where`` if it is not numeric."""
    try:
        return np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(f"{where} holds non-numeric values ({err}); expected numbers.") from None


def is_unit_list(ds: Any) -> bool:
    """A dataset given as a list of units (not one unit of numbers)."""
    return (isinstance(ds, (list, tuple)) and len(ds) > 0
            and not any(np.isscalar(v) for v in ds))


def _units(ds: Any, ident: Any, multi: bool, words: Words) -> list[np.ndarray]:
    seqs = list(ds) if is_unit_list(ds) else [ds]
    out = []
    for k, s in enumerate(seqs):
        a = as_unit(s, f"{words.dataset} {ident!r}, {words.unit} {k}")
        if multi and a.ndim == 1:
            a = a[:, None]
        if a.ndim != (2 if multi else 1):
            want = "(n_obs, n_dims)" if multi else "(n_obs,)"
            raise ValueError(f"{words.dataset} {ident!r}, {words.unit} {k} has shape {a.shape}; "
                             f"expected {want}. A {words.dataset} is one {words.unit} or a list "
                             f"of {words.unit}s.")
        out.append(a)
    return out


def read_units(datasets: Any, dataset_col: str, unit_col: str, value_col: str | Sequence[str],
               multi: bool, words: Words = HMM_WORDS) -> list[tuple[Any, list[np.ndarray]]]:
    """Any accepted input form -> ``(identifier, list of units)`` pairs.

    Parameters
    ----------
    datasets : list, dict, array-like or pandas.DataFrame
        A list or a dict of datasets (each one unit or a list of units), one
        array (one dataset of one unit), or a long DataFrame with columns
        ``dataset_col``, ``unit_col`` and the value column(s).
    dataset_col, unit_col : str
        DataFrame columns naming each row's dataset and unit.
    value_col : str or list of str
        Value column(s); with ``multi`` and no column called "value", every
        other column.
    multi : bool
        Units of vectors, ``(n_obs, n_dims)`` (a 1-D unit is ``n_dims = 1``);
        else units of scalars.
    words : Words
        The family's names for datasets and units, for the messages.

    Returns
    -------
    list of (identifier, list of ndarray)
    """
    if isinstance(datasets, pd.DataFrame):
        for c, opt in ((dataset_col, "dataset_col"), (unit_col, words.unit_col)):
            if c not in datasets.columns:
                raise ValueError(
                    f"DataFrame input has columns {list(datasets.columns)}; expected a {c!r} "
                    f"column (set {opt}= to name another).")
        cols = [value_col] if isinstance(value_col, str) else list(value_col)
        if multi and value_col == "value" and "value" not in datasets.columns:
            cols = [c for c in datasets.columns if c not in (dataset_col, unit_col)]
        missing = [c for c in cols if c not in datasets.columns]
        if missing or not cols:
            raise ValueError(f"DataFrame input lacks value column(s) {missing or cols}; it "
                             f"has {list(datasets.columns)}. Pass value_col= to name them.")
        pairs = []
        for k, g in datasets.groupby(dataset_col, sort=False):
            seqs = [s[cols].to_numpy() if multi else s[cols[0]].to_numpy()
                    for _, s in g.groupby(unit_col, sort=False)]
            pairs.append((k, seqs))
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
            f"datasets is a {type(datasets).__name__}; expected a list or dict of "
            f"{words.dataset}s (each one {words.unit} or a list of {words.unit}s), one array, "
            "or a long DataFrame.")
    if not pairs:
        raise ValueError(f"datasets is empty; expected at least one {words.dataset}.")
    out = [(k, _units(v, k, multi, words)) for k, v in pairs]
    if multi:
        dims = {u.shape[1] for _, units in out for u in units if len(u)}
        if len(dims) > 1:
            raise ValueError(f"{words.unit}s have different numbers of dimensions "
                             f"{sorted(dims)}; every observation of a batch needs the same "
                             "dimensions.")
    return out
