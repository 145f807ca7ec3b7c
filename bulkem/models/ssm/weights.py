"""Series weights of the state-space families (``fit(weights=...)``): read in the datasets'
own form, one weight per series, checked against the datasets, and carried with the series.

A weighted dataset is a :class:`SeriesList`: its series, and their weights as an attribute.
A weighted batch is a :class:`WeightedRagged`: a :class:`~bulkem.data.Ragged` with one weight
per unit (series) that its :meth:`~WeightedRagged.take` keeps, so the weights follow the
datasets into every chunk; the kernels read them as the batch tuple's third array.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from ...data import Ragged
from ...data.units import Words, counts, read_units

WORDS = Words("dataset", "series", "series_col")


class SeriesList(list):
    """A dataset's series of weight other than 0 (a list of 1-D arrays).

    Attributes
    ----------
    weights : ndarray of shape (n_series,), float64
        One per series.
    numbers : ndarray of shape (n_series,), int64
        Each series' position among the dataset's series as given (for the messages).
    """

    def __init__(self, series: list, weights: np.ndarray, numbers: np.ndarray) -> None:
        super().__init__(series)
        self.weights = weights
        self.numbers = numbers


@dataclass
class WeightedRagged(Ragged):
    """A :class:`~bulkem.data.Ragged` batch of series with one weight per series.

    Attributes
    ----------
    weights : ndarray of shape (n_units,), float64
        Series ``k``'s weight (``units[k]:units[k + 1]`` its values).
    """

    weights: np.ndarray = field(default_factory=lambda: np.empty(0))

    def take(self, datasets: np.ndarray) -> WeightedRagged:
        """:meth:`Ragged.take`, the series' weights taken with them."""
        datasets = np.asarray(datasets, dtype=np.int64)
        part = Ragged.take(self, datasets)
        n_units = self.groups[datasets + 1] - self.groups[datasets]
        first = np.repeat(self.groups[datasets] - part.groups[:-1], n_units)
        return WeightedRagged(part.values, part.units, part.groups,
                              weights=self.weights[first + np.arange(part.groups[-1])])

    def units_in_order(self, d: int, order: np.ndarray) -> WeightedRagged:
        """:meth:`Ragged.units_in_order`, the series' weights in that order."""
        part = Ragged.units_in_order(self, d, order)
        return WeightedRagged(part.values, part.units, part.groups,
                              weights=self.weights[self.groups[d] + np.asarray(order)])


def weight_problems(w: np.ndarray, numbers) -> str | None:
    """Why a dataset's series weights ``w`` cannot be used (NaN, infinite or negative ones,
    the series named by their ``numbers``), or None."""
    problems = []
    finite = np.isfinite(w)
    for what, bad in (("NaN or infinite", ~finite), ("negative", finite & (w < 0.0))):
        where = np.asarray(numbers)[bad]
        if len(where):
            shown = ", ".join(map(str, where[:5].tolist())) + (", ..." if len(where) > 5 else "")
            problems.append(f"{len(where)} {what} series weight(s) (series {shown})")
    if not problems:
        return None
    return "; ".join(problems) + (" (weights must be finite and >= 0; a weight of 0 leaves the "
                                  "series out)")


def weight_sums(data: WeightedRagged) -> np.ndarray:
    """Per dataset: the sum over its series of weight times observed (not NaN) steps."""
    lengths = np.diff(data.units)
    observed = lengths - counts(np.isnan(data.values), lengths)
    unit_ds = np.repeat(np.arange(data.n_datasets), np.diff(data.groups))
    return np.bincount(unit_ds, weights=data.weights * observed, minlength=data.n_datasets)


def _per_series(weights: Any, frame: pd.DataFrame | None, dataset_col: str,
                series_col: str) -> tuple[list, list, bool]:
    """The weights as ``(identifiers, entries)``, each entry one weight or one per series,
    and whether they are matched to the datasets by key (a dict, a column) or by position."""
    if isinstance(weights, str):
        if frame is None:
            raise ValueError(f"weights={weights!r} names a column, but datasets is not a "
                             "DataFrame; pass the weights in the datasets' form: one weight per "
                             "series (a list with one array of weights per dataset, or a dict "
                             "keyed like the datasets).")
        if weights not in frame.columns:
            raise ValueError(f"weights={weights!r}: no such column; the DataFrame has "
                             f"{list(frame.columns)}.")
        ids, out = [], []
        for ident, cols in read_units(frame, dataset_col, series_col, weights, multi=False,
                                      words=WORDS, unit_optional=True):
            w = np.empty(len(cols))
            for k, c in enumerate(cols):
                if len(c) and not (np.all(c == c[0]) or np.all(np.isnan(c))):
                    raise ValueError(
                        f"weights={weights!r}: the column is not constant within series: "
                        f"dataset {ident!r}, series {k} has weights from {np.nanmin(c):g} to "
                        f"{np.nanmax(c):g}. A series has one weight: give every row of a "
                        "series the same.")
                w[k] = c[0] if len(c) else np.nan
            ids.append(ident)
            out.append(w)
        return ids, out, True
    if isinstance(weights, Mapping):
        return list(weights.keys()), list(weights.values()), True
    if isinstance(weights, numbers.Number) or (isinstance(weights, np.ndarray)
                                               and weights.ndim == 0):
        return [0], [weights], False  # one dataset of one series
    if isinstance(weights, (np.ndarray, pd.Series)) or (
            isinstance(weights, Sequence) and not isinstance(weights, (str, bytes))):
        entries = list(weights)
        return list(range(len(entries))), entries, False
    raise TypeError(f"weights is a {type(weights).__name__}; expected one weight per series in "
                    "the datasets' form (a list with one array per dataset, a dict keyed like "
                    "the datasets) or the name of a DataFrame column.")


def attach_weights(pairs: list, weights: Any, datasets: Any, dataset_col: str,
                   series_col: str) -> list:
    """The ``(identifier, list of series)`` pairs with each dataset's series weights attached
    (a :class:`SeriesList`), series of weight 0 left out.

    Parameters
    ----------
    pairs : list of (identifier, list of ndarray)
        The datasets as the family's ``read`` gives them.
    weights : str, list, dict, array-like or number
        One weight per series, in the datasets' form: a list with one entry per dataset
        (a 1-D array, one weight per series; a number for a dataset of one series), a
        dict with the datasets' keys, one number for one series; or the name of a column
        of a long DataFrame, constant within each series.
    datasets : Any
        The datasets as the caller gave them (to read a weight column).
    dataset_col, series_col : str
        The dataset and series columns of a DataFrame.

    Returns
    -------
    list of (identifier, SeriesList)
        NaN, infinite and negative weights are kept, for the model's check to name them.

    Raises
    ------
    ValueError
        When the weights do not line up with the datasets (another number of datasets, other
        keys, another number of series in a dataset), or a weight column varies within a
        series.
    """
    frame = datasets if isinstance(datasets, pd.DataFrame) else None
    wids, entries, keyed = _per_series(weights, frame, dataset_col, series_col)
    ids = [k for k, _ in pairs]
    if keyed:
        by_id = dict(zip(wids, entries, strict=True))
        known = set(ids)
        missing = [k for k in ids if k not in by_id]
        extra = [k for k in wids if k not in known]
        if missing or extra:
            found = ([f"no entry for dataset(s) {missing[:5]}"] if missing else []) + (
                [f"entries for unknown dataset(s) {extra[:5]}"] if extra else [])
            raise ValueError(f"weights has {' and '.join(found)}; its keys must be the "
                             f"datasets' keys ({len(ids)} datasets), each with one weight per "
                             "series.")
        entries = [by_id[k] for k in ids]
    elif len(entries) != len(pairs):
        raise ValueError(f"weights holds {len(entries)} entries for {len(pairs)} dataset(s); "
                         "give one entry per dataset, in the datasets' form: an array with one "
                         "weight per series (a number for a dataset of one series).")
    out = []
    for (ident, series), entry in zip(pairs, entries, strict=True):
        try:
            w = np.asarray(entry, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"weights of dataset {ident!r} hold non-numeric values ({err}); "
                            "expected numbers, one per series.") from None
        w = w.reshape(1) if w.ndim == 0 else w
        if w.ndim != 1 or len(w) != len(series):
            raise ValueError(f"dataset {ident!r} has {len(series)} series but weights of shape "
                             f"{w.shape}; give one weight per series (a 1-D array of "
                             f"{len(series)}).")
        keep = np.flatnonzero(w != 0.0)  # (NaN kept: the check names it)
        out.append((ident, SeriesList([series[k] for k in keep], w[keep], keep)))
    return out
