"""Input forms -> validated batches of datasets in values + offsets form.

Every input form that :func:`bulkem.fit` accepts is turned into a
:class:`Packed` batch: the values of all *valid* datasets concatenated in one
array and an ``offsets`` array so that dataset ``k`` is
``values[offsets[k]:offsets[k + 1]]`` (the layout hmmlearn uses for many
sequences, and the one a GPU kernel wants).  Invalid datasets keep their
identifier and a message; they are never fitted and never abort the batch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..tuning import DEFAULT
from .ragged import Ragged


@dataclass
class Packed:
    """A batch of datasets, the valid ones packed.

    Attributes
    ----------
    ids : list
        Identifier of every input dataset, in input order.
    n_obs : ndarray of shape (n_datasets,)
        Number of values (observations) of every input dataset.
    messages : list of str or None
        Why a dataset cannot be fitted, or None for a valid one.
    valid : ndarray of shape (n_valid,)
        Input positions of the valid datasets.
    data : Ragged
        The valid datasets' units of values (float64), in that order.
    """

    ids: list
    n_obs: np.ndarray
    messages: list
    valid: np.ndarray
    data: Ragged

    @property
    def values(self) -> np.ndarray:
        """Values of the valid datasets, concatenated."""
        return self.data.values

    @property
    def offsets(self) -> np.ndarray:
        """Valid dataset ``k`` is ``values[offsets[k]:offsets[k + 1]]``."""
        return self.data.value_offsets


def _as_float(x: Any, ident: Any, ndim: int) -> np.ndarray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as err:
        raise TypeError(
            f"dataset {ident!r} holds non-numeric values ({err}); expected numbers. "
            "Convert the column to numbers (pandas.to_numeric) before fitting."
        ) from None
    if ndim == 1:
        if arr.ndim == 2 and arr.shape[1] == 1:
            arr = arr[:, 0]
        if arr.ndim != 1:
            raise ValueError(
                f"dataset {ident!r} has shape {arr.shape}; this family expects 1-D data. "
                "Pass a list of 1-D arrays for several datasets."
            )
    else:
        if arr.ndim == 1:
            arr = arr[:, None]
        if arr.ndim != 2:
            raise ValueError(
                f"dataset {ident!r} has shape {arr.shape}; expected 2-D (n_obs, n_dims)."
            )
    return arr


def _split_frame(
    df: pd.DataFrame, dataset_col: str, value_cols: Sequence[str] | None, ndim: int
) -> list[tuple[Any, Any]]:
    if dataset_col not in df.columns:
        raise ValueError(
            f"DataFrame input has columns {list(df.columns)}; expected a {dataset_col!r} "
            "column naming the dataset of each row. Pass dataset_col= to name another."
        )
    if value_cols is None:
        value_cols = [c for c in df.columns if c != dataset_col]
    missing = [c for c in value_cols if c not in df.columns]
    if missing or not value_cols:
        raise ValueError(
            f"DataFrame input lacks value column(s) {missing or value_cols}; it has "
            f"{list(df.columns)}. Pass value_col= to name the column(s) holding the values."
        )
    if ndim == 1 and len(value_cols) != 1:
        raise ValueError(
            f"this family takes one value column; the DataFrame gives {list(value_cols)}. "
            "Pass value_col= to pick one."
        )
    cols = value_cols[0] if ndim == 1 else list(value_cols)
    return [(k, g[cols].to_numpy()) for k, g in df.groupby(dataset_col, sort=False)]


def as_datasets(
    datasets: Any,
    ndim: int = 1,
    dataset_col: str = "dataset",
    value_col: str | Sequence[str] | None = "value",
) -> list[tuple[Any, np.ndarray]]:
    """Turn any accepted input form into a list of ``(identifier, array)`` pairs.

    Parameters
    ----------
    datasets : list, dict, array-like or pandas.DataFrame
        A list of arrays, a dict name -> array, one array (one dataset), or a
        long DataFrame with a dataset column and value column(s).
    ndim : {1, 2}
        1 for families of scalar observations, 2 for vector observations
        (each dataset of shape ``(n_obs, n_dims)``, a 1-D one read as
        ``n_dims = 1``; one 3-D array is a stack of datasets).
    dataset_col, value_col : str
        Column names for DataFrame input.

    Returns
    -------
    list of (identifier, ndarray)
    """
    if isinstance(datasets, pd.DataFrame):
        cols = [value_col] if isinstance(value_col, str) else value_col
        if ndim == 2 and value_col == "value" and "value" not in datasets.columns:
            cols = None
        pairs = _split_frame(datasets, dataset_col, cols, ndim)
    elif isinstance(datasets, Mapping):
        pairs = list(datasets.items())
    elif isinstance(datasets, (pd.Series, np.ndarray)) or (
        isinstance(datasets, Sequence)
        and len(datasets) > 0
        and all(np.isscalar(v) for v in datasets)
    ):
        arr = np.asarray(datasets)
        if ndim == 1 and arr.ndim == 2 and arr.shape[1] != 1:
            raise ValueError(
                f"a single array of shape {arr.shape} is ambiguous for a 1-D family; "
                "pass a list of 1-D arrays, one per dataset."
            )
        if ndim == 2 and arr.ndim == 3:  # (n_datasets, n_obs, n_dims): a stack of datasets
            pairs = list(enumerate(arr))
        else:
            pairs = [(0, datasets)]
    elif isinstance(datasets, Sequence) and not isinstance(datasets, (str, bytes)):
        pairs = list(enumerate(datasets))
    else:
        raise TypeError(
            f"datasets is a {type(datasets).__name__}; expected a list of arrays, a dict "
            "name -> array, one array, or a long pandas DataFrame."
        )
    if not pairs:
        raise ValueError("datasets is empty; expected at least one dataset.")
    out = [(k, _as_float(v, k, ndim)) for k, v in pairs]
    if ndim == 2:
        out = _same_dims(out)
    return out


def _same_dims(pairs: list[tuple[Any, np.ndarray]]) -> list[tuple[Any, np.ndarray]]:
    """Check that vector datasets agree on n_dims; give empty ones that shape."""
    sized = [(k, v) for k, v in pairs if len(v)]
    if not sized:
        return pairs
    k0, v0 = sized[0]
    n_dims = v0.shape[1]
    for k, v in sized:
        if v.shape[1] != n_dims:
            raise ValueError(
                f"dataset {k!r} has {v.shape[1]} dimensions but dataset {k0!r} has {n_dims}; "
                "every dataset of a batch needs the same dimensions (columns)."
            )
    return [(k, v if len(v) else v.reshape(0, n_dims)) for k, v in pairs]


def pack(pairs: list[tuple[Any, np.ndarray]], check) -> Packed:
    """Validate datasets and concatenate the valid ones.

    Parameters
    ----------
    pairs : list of (identifier, ndarray)
        Output of :func:`as_datasets`.
    check : callable
        ``check(values) -> str | None``: the family's reason why a dataset
        cannot be fitted, or None.

    Returns
    -------
    Packed
    """
    ids = [k for k, _ in pairs]
    n_obs = np.array([len(v) for _, v in pairs], dtype=np.int64)
    messages = [check(v) for _, v in pairs]
    valid = np.array([i for i, m in enumerate(messages) if m is None], dtype=np.int64)
    offsets = np.zeros(len(valid) + 1, dtype=np.int64)
    np.cumsum(n_obs[valid], out=offsets[1:])
    one = pairs[valid[0]][1] if len(valid) == 1 else None
    if one is not None and one.flags.c_contiguous and one.flags.writeable:
        values = one  # one large dataset: no copy (the engines never write to their data)
    elif len(valid):
        values = np.concatenate([pairs[i][1] for i in valid])
    else:
        values = np.empty((0,) + pairs[0][1].shape[1:])
    data = Ragged.flat(np.ascontiguousarray(values), offsets)
    return Packed(ids, n_obs, messages, valid, data)


def basic_problems(values: np.ndarray, min_obs: int,
                   parallel_min: int = DEFAULT.parallel_check_min) -> str | None:
    """Problems common to every family: empty, too short, NaN or infinite.

    Every problem found is reported, joined by "; ".  For vector data
    (2-D ``values``) the NaN count is of observations (rows).  A float64 dataset of
    ``parallel_min`` values or more is checked on every core.
    """
    n = len(values)
    if n == 0:
        return "empty dataset (0 values)"
    problems = []
    if n < min_obs:
        problems.append(f"too short: {_count(n, 'value')}, at least {min_obs} needed for this "
                        "number of components")
    if values.size >= parallel_min and values.dtype == np.float64 \
            and values.flags.c_contiguous:
        if _count_nonfinite(values.reshape(-1)) == 0:  # on every core
            return "; ".join(problems) or None
    else:
        with np.errstate(invalid="ignore", over="ignore"):  # (R's NA is a signalling NaN)
            total = np.add.reduce(values, axis=None)
        if np.isfinite(total):  # NaN and inf would carry through the sum
            return "; ".join(problems) or None
    finite = np.isfinite(values)
    if finite.ndim == 2:
        bad = int(np.count_nonzero(~np.all(finite, axis=1)))
        if bad:
            problems.append(f"{bad} of {_count(n, 'observation')} {_have(bad)} NaN or infinite "
                            "coordinates")
    else:
        bad = int(np.count_nonzero(~finite))
        if bad:
            problems.append(f"{bad} of {_count(n, 'value')} {_are(bad)} NaN or infinite")
    return "; ".join(problems) or None


def _count_nonfinite(flat: np.ndarray) -> int:
    """NaN and infinite values of a large 1-D float64 array, counted on every core."""
    from ._checks import count_nonfinite

    return int(count_nonfinite(flat))


def _count(n: int, noun: str) -> str:
    """``"1 value"``, ``"3 values"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _are(k: int) -> str:
    return "is" if k == 1 else "are"


def _have(k: int) -> str:
    return "has" if k == 1 else "have"
