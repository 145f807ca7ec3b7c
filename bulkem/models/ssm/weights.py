"""Series weights of the state-space families (``fit(weights=...)``): one weight per series,
read by :func:`bulkem.data.weights.unit_weights`, and carried with the series.

A weighted dataset is a :class:`SeriesList`: its series, and their weights as an attribute.
A weighted batch is a :class:`WeightedRagged`: a :class:`~bulkem.data.Ragged` with one weight
per unit (series) that its :meth:`~WeightedRagged.take` keeps, so the weights follow the
datasets into every chunk; the kernels read them as the batch tuple's third array.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ...data import Ragged
from ...data.units import Words, counts
from ...data.weights import unit_weight_problems, unit_weights

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
    each named by its series' input number), or None."""
    return unit_weight_problems(w, np.asarray(numbers), "series")


def weight_sums(data: WeightedRagged) -> np.ndarray:
    """Per dataset: the sum over its series of weight times observed (not NaN) steps."""
    lengths = np.diff(data.units)
    observed = lengths - counts(np.isnan(data.values), lengths)
    unit_ds = np.repeat(np.arange(data.n_datasets), np.diff(data.groups))
    return np.bincount(unit_ds, weights=data.weights * observed, minlength=data.n_datasets)


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
    out = []
    ws = unit_weights(pairs, weights, datasets, dataset_col, series_col, WORDS,
                      unit_optional=True)
    for (ident, series), w in zip(pairs, ws, strict=True):
        keep = np.flatnonzero(w != 0.0)  # (NaN kept: the check names it)
        out.append((ident, SeriesList([series[k] for k in keep], w[keep], keep)))
    return out
