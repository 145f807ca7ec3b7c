"""Input forms -> validated batches of datasets in values + offsets form.

Every input form that :func:`bulkem.fit` accepts is turned into a
:class:`Packed` batch: the values of all *valid* datasets concatenated in one
array and an ``offsets`` array so that dataset ``k`` is
``values[offsets[k]:offsets[k + 1]]`` (the layout hmmlearn uses for many
sequences, and the one a GPU kernel wants).  Invalid datasets keep their
identifier and a message; they are never fitted and never abort the batch.
"""

from __future__ import annotations

import operator
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


class Flat(Sequence):
    """Datasets given as one array of values and offsets (a long DataFrame, an Arrow list
    array): the sequence of ``(identifier, values)`` pairs :func:`as_datasets` returns, each
    dataset's values a view, and :func:`pack` packs without a Python step per dataset.

    Attributes
    ----------
    ids : list
        Every dataset's identifier.
    values : ndarray of shape (n_values,) or (n_values, n_dims), float64
    offsets : ndarray of shape (n_datasets + 1,), int64
        Dataset ``k`` is ``values[offsets[k]:offsets[k + 1]]``.
    """

    def __init__(self, ids: list, values: np.ndarray, offsets: np.ndarray) -> None:
        self.ids, self.values, self.offsets = ids, values, offsets

    def __len__(self) -> int:
        return len(self.offsets) - 1

    def __getitem__(self, i):
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                return [self[k] for k in range(a, b, step)]
            b = max(a, b)
            off = self.offsets[a:b + 1]
            return Flat(self.ids[a:b], self.values[off[0]:off[-1]], off - off[0])
        i = operator.index(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"dataset {i} of {len(self)}")
        return self.ids[i], self.values[self.offsets[i]:self.offsets[i + 1]]


def _flat_frame(df: pd.DataFrame, dataset_col: str, cols: Any) -> Flat:
    """A long frame's datasets (rows of each ``dataset_col`` value, in order of first
    appearance; rows without one left out, as ``groupby`` does) by column: one factorise and
    one stable sort, none where the rows are already grouped."""
    codes, uniques = pd.factorize(df[dataset_col], sort=False)
    try:
        values = df[cols].to_numpy(dtype=np.float64)
    except (TypeError, ValueError) as err:
        ident = "?"
        for c in [cols] if isinstance(cols, str) else cols:  # the first dataset at fault
            bad = pd.to_numeric(df[c], errors="coerce").isna().to_numpy() & df[c].notna().to_numpy()
            if bad.any():
                ident = df[dataset_col].iloc[int(np.argmax(bad))]
                break
        raise TypeError(
            f"dataset {ident!r} holds non-numeric values ({err}); expected numbers. "
            "Convert the column to numbers (pandas.to_numeric) before fitting."
        ) from None
    if len(codes) and (codes[0] < 0 or np.any(np.diff(codes) < 0)):
        from ._checks import group_order

        order = group_order(codes.astype(np.int64, copy=False), len(uniques))
        codes, values = codes[order], values[order]
    keep = int(np.searchsorted(codes, 0))  # (code -1: no dataset)
    counts = np.bincount(codes[keep:], minlength=len(uniques))
    offsets = np.zeros(len(uniques) + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    return Flat(list(uniques), np.ascontiguousarray(values[keep:]), offsets)


def _flat_arrow(arr: Any, ndim: int) -> Flat:
    """A ``pyarrow`` list array (``ListArray``, ``LargeListArray`` or a chunked one): one
    dataset per list (a null list: an empty dataset), the values read once (nulls: NaN)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    lengths = pc.list_value_length(arr).fill_null(0).to_numpy(zero_copy_only=False)
    offsets = np.zeros(len(arr) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    inner = arr.flatten()  # (the values of this array's lists: a slice's, no null list's)
    if ndim == 2 and pa.types.is_fixed_size_list(inner.type):
        width = inner.type.list_size
        values = inner.flatten().to_numpy(zero_copy_only=False).astype(np.float64)
        values = values.reshape(-1, width)
    else:
        values = inner.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        if ndim == 2:
            values = values[:, None]
    return Flat(list(range(len(arr))), np.ascontiguousarray(values), offsets)


def _is_arrow_lists(x: Any) -> bool:
    """A ``pyarrow`` array (or chunked array) of lists."""
    mod = type(x).__module__
    if not mod.startswith("pyarrow"):
        return False
    import pyarrow as pa

    return isinstance(x, (pa.Array, pa.ChunkedArray)) and (
        pa.types.is_list(x.type) or pa.types.is_large_list(x.type))


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
) -> Flat:
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
    return _flat_frame(df, dataset_col, cols)


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
    if _is_arrow_lists(datasets):
        pairs = _flat_arrow(datasets, ndim)
    elif isinstance(datasets, pd.DataFrame) or type(datasets).__name__ == "Table" and \
            type(datasets).__module__.startswith("pyarrow"):
        if not isinstance(datasets, pd.DataFrame):  # a pyarrow Table: by column
            datasets = datasets.to_pandas()
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
    if not len(pairs):
        raise ValueError("datasets is empty; expected at least one dataset.")
    if isinstance(pairs, Flat):
        return pairs
    plain = _plain_pairs(pairs, ndim)
    if plain is not None:
        return plain
    out = [(k, _as_float(v, k, ndim)) for k, v in pairs]
    if ndim == 2:
        out = _same_dims(out)
    return out


def _plain_pairs(pairs: list, ndim: int) -> list | None:
    """The pairs ``_as_float`` and ``_same_dims`` would give for many plain, C-contiguous
    float64 arrays, the arrays checked in one compiled pass, not a Python step each; None
    where they are not all such arrays of one shape (or are few)."""
    from .gather import plain_lengths

    arrays = list(map(operator.itemgetter(1), pairs))
    first = arrays[0]
    if type(first) is not np.ndarray:
        return None
    if first.ndim == 1 and plain_lengths(arrays, 1) is not None:
        if ndim == 1:
            return pairs
        column = operator.itemgetter((slice(None), None))  # (``arr[:, None]``)
        return list(zip(map(operator.itemgetter(0), pairs), map(column, arrays), strict=True))
    if ndim == 2 and first.ndim == 2 and plain_lengths(arrays, 2, first.shape[1]) is not None:
        return pairs
    return None


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


def pack(pairs: list[tuple[Any, np.ndarray]], check, screen=None) -> Packed:
    """Validate datasets and concatenate the valid ones.

    Parameters
    ----------
    pairs : list of (identifier, ndarray)
        Output of :func:`as_datasets`.
    check : callable
        ``check(values) -> str | None``: the family's reason why a dataset
        cannot be fitted, or None.
    screen : callable, optional
        ``screen(values, n_obs) -> mask``: one vectorised pass over every dataset's values
        (concatenated; ``n_obs`` values each) that flags the datasets ``check`` must look
        at (every one it could fault); the others are valid without a Python call each.

    Returns
    -------
    Packed
    """
    everything = None
    if isinstance(pairs, Flat):  # values and offsets already: no step per dataset
        ids, n_obs, everything = list(pairs.ids), np.diff(pairs.offsets), pairs.values
    else:
        ids = list(map(operator.itemgetter(0), pairs))
        arrays = list(map(operator.itemgetter(1), pairs))
        n_obs = None
        if screen is not None:  # (the lengths too, when the values are gathered)
            everything, n_obs = _concatenate(arrays, pairs[0][1])
        if n_obs is None:
            n_obs = np.fromiter(map(len, arrays), dtype=np.int64, count=len(arrays))
    if screen is None:
        look = np.ones(len(pairs), dtype=bool)
    else:
        look = np.asarray(screen(everything, n_obs), dtype=bool)
    messages = [None] * len(pairs)
    ok = np.ones(len(pairs), dtype=bool)
    for i in np.flatnonzero(look):
        messages[i] = check(pairs[i][1])
        ok[i] = messages[i] is None
    valid = np.flatnonzero(ok).astype(np.int64)
    offsets = np.zeros(len(valid) + 1, dtype=np.int64)
    np.cumsum(n_obs[valid], out=offsets[1:])
    if everything is not None and len(valid) == len(pairs):
        values = everything
    elif everything is not None:
        values = everything[np.repeat(ok, n_obs)]
    else:
        values = _concatenate([pairs[i][1] for i in valid], pairs[0][1])[0]
    data = Ragged.flat(np.ascontiguousarray(values), offsets)
    return Packed(ids, n_obs, messages, valid, data)


def _concatenate(arrays: list, like: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
    """The arrays one after the other; one large dataset's own array (no copy: the engines
    never write to their data); none: an empty array shaped as ``like``.  Many plain
    float64 arrays are copied on every core, and their lengths come too (else None)."""
    if len(arrays) == 1 and arrays[0].flags.c_contiguous and arrays[0].flags.writeable:
        return arrays[0], None
    if arrays:
        from .gather import gather

        shape = np.shape(arrays[0])
        got = gather(arrays, len(shape), shape[-1] if len(shape) == 2 else 1)
        return got if got is not None else (np.concatenate(arrays), None)
    return np.empty((0,) + like.shape[1:]), None


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
