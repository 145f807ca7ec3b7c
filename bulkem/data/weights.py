"""Observation weights (``fit(weights=...)``): read in the datasets' own form, checked against
them, and attached to the values as their last column."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from .inputs import Flat, as_datasets


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
