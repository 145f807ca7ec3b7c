"""Input forms of datasets made of units (sequences of a hidden Markov model, runs of a TMAP,
series of a state-space model).

Every sequence family reads its input here: a batch is a list or a dict of
datasets, each one unit or a list of units (ragged lengths), one array (one
dataset of one unit), or a long DataFrame with a dataset column, a unit
column and the value column(s), rows in order within a unit.  The words in
the messages (``dataset``/``sequence``, ``trace``/``run`` or
``dataset``/``series``) are the family's.  :func:`pack_units` checks each
dataset of unit arrays and packs the valid ones in the two offset levels of
:class:`bulkem.data.Ragged`.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd

from .inputs import Packed
from .ragged import Ragged


class Words(NamedTuple):
    """What a family calls its datasets and units, and its unit-column option."""

    dataset: str = "dataset"
    unit: str = "sequence"
    unit_col: str = "sequence_col"

    @property
    def units(self) -> str:
        """The plural of ``unit`` ("series" stays "series")."""
        return self.unit if self.unit.endswith("s") else self.unit + "s"


HMM_WORDS = Words()

class UnitArrays(NamedTuple):
    """A dataset's units packed: unit ``k`` is ``values[offsets[k]:offsets[k + 1]]``.

    Attributes
    ----------
    values : ndarray of shape (n_values,) or (n_values, n_dims)
    lengths : ndarray of shape (n_units,), int64
    """

    values: np.ndarray
    lengths: np.ndarray


_SCALARS = (numbers.Number, np.generic, str, bytes)  # what np.isscalar calls a scalar


def is_unit_list(ds: Any) -> bool:
    """A dataset given as a list of units (not one unit of numbers)."""
    return (isinstance(ds, (list, tuple)) and len(ds) > 0
            and not any(issubclass(t, _SCALARS) for t in set(map(type, ds))))


def _units(ds: Any, ident: Any, multi: bool, words: Words) -> list[np.ndarray]:
    seqs = list(ds) if is_unit_list(ds) else [ds]
    want = 2 if multi else 1
    out = []
    for k, s in enumerate(seqs):
        try:
            a = np.asarray(s, dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise TypeError(f"{words.dataset} {ident!r}, {words.unit} {k} holds non-numeric "
                            f"values ({err}); expected numbers.") from None
        if a.ndim != want:
            if multi and a.ndim == 1:
                a = a[:, None]
            else:
                shape = "(n_obs, n_dims)" if multi else "(n_obs,)"
                raise ValueError(f"{words.dataset} {ident!r}, {words.unit} {k} has shape "
                                 f"{a.shape}; expected {shape}. A {words.dataset} is one "
                                 f"{words.unit} or a list of {words.units}.")
        out.append(a)
    return out


def _blocks(ds: pd.Series, un: pd.Series):
    """Where each unit's rows start, when every unit's rows are consecutive.

    The common layout (a frame sorted by dataset and unit, or written unit by
    unit) is recognised from where the keys change, without grouping every
    row.  Returns ``(starts, block_codes, labels)``: the first row of each
    unit (units in frame order) and its dataset's code and the datasets, as
    :func:`pd.factorize` gives them; or None for another layout.
    """
    dv, uv = ds.to_numpy(), un.to_numpy()
    if len(dv) == 0 or any(np.isnan(v).any() if v.dtype.kind == "f" else
                           v.dtype.kind not in "iub" and pd.isna(v).any() for v in (dv, uv)):
        return None
    if dv.dtype.kind in "iuf" and uv.dtype.kind in "iuf":  # (numbers: on every core)
        from ._checks import key_starts

        starts = key_starts(dv, uv)
    else:
        starts = np.flatnonzero(np.concatenate([[True], (dv[1:] != dv[:-1])
                                                | (uv[1:] != uv[:-1])]))
    d, u = dv[starts], uv[starts]
    if d.dtype.kind in "iuf" and u.dtype.kind in "iuf":  # numbers: a sorted frame at once
        up = d[1:] > d[:-1]
        if np.all(up | ((d[1:] == d[:-1]) & (u[1:] > u[:-1]))):  # keys increase: unique
            first = np.concatenate([[True], up])
            return starts, np.cumsum(first) - 1, d[first]
    if not pd.MultiIndex.from_arrays([d, u]).is_unique:
        return None  # a unit's rows are apart
    block_codes, labels = pd.factorize(d, sort=False)
    return starts, block_codes, labels


def _split_frame(df: pd.DataFrame, dataset_col: str, unit_col: str, cols, packed: bool,
                 words: Words) -> list[tuple[Any, Any]]:
    """A long DataFrame -> ``(dataset, units)`` pairs, without a loop over groups.

    Datasets in order of first appearance, each one's units in order of first
    appearance, rows in frame order within a unit (what nested
    ``groupby(sort=False)`` gives, rows with a missing key dropped as there),
    but by sorting: a trace of 10^6 runs is split in about a second.
    """
    vals = df[cols].to_numpy()
    blocks = _blocks(df[dataset_col], df[unit_col])
    if blocks is not None:  # units are blocks of rows, in frame order
        starts, unit_ds, labels = blocks
        lengths = np.diff(np.append(starts, len(vals)))
        if np.any(unit_ds[1:] < unit_ds[:-1]):  # a dataset's units are apart: gather them
            by_ds = np.argsort(unit_ds, kind="stable")
            unit_ds, lengths, starts = unit_ds[by_ds], lengths[by_ds], starts[by_ds]
            first = np.repeat(starts - np.concatenate([[0], np.cumsum(lengths)[:-1]]), lengths)
            vals = vals[first + np.arange(len(first))]
    else:
        codes, labels = pd.factorize(df[dataset_col], sort=False)
        unit = df.groupby([dataset_col, unit_col], sort=False).ngroup()
        unit = unit.fillna(-1).to_numpy(dtype=np.int64)  # (-1 or NaN: a missing key)
        keep = (codes >= 0) & (unit >= 0)
        n_units = int(unit.max()) + 1 if keep.any() else 0
        unit_ds = np.zeros(n_units, dtype=np.int64)
        unit_ds[unit[keep]] = codes[keep]
        rank = np.empty(n_units, dtype=np.int64)  # units renumbered dataset by dataset
        rank[np.argsort(unit_ds, kind="stable")] = np.arange(n_units)
        unit_ds = np.sort(unit_ds, kind="stable")
        rows = np.flatnonzero(keep)
        rows = rows[np.argsort(rank[unit[rows]], kind="stable")]  # by unit, frame order within
        lengths = np.bincount(rank[unit[rows]], minlength=n_units)
        vals = vals[rows]
    n_per = np.bincount(unit_ds, minlength=len(labels))
    ucut = np.concatenate([[0], np.cumsum(n_per)])  # dataset k: units ucut[k]:ucut[k + 1]
    vcut = np.concatenate([[0], np.cumsum(lengths)])  # unit u: rows vcut[u]:vcut[u + 1]
    out = []
    for k in range(len(labels)):
        u0, u1 = ucut[k], ucut[k + 1]
        if u0 == u1:
            continue
        if packed:
            v = vals[vcut[u0]:vcut[u1]]
            try:
                v = v.astype(np.float64, copy=False)  # (a view where it is float64)
            except (TypeError, ValueError) as err:
                raise TypeError(f"{words.dataset} {labels[k]!r} holds non-numeric values "
                                f"({err}); expected numbers.") from None
            out.append((labels[k], UnitArrays(v, lengths[u0:u1])))
        else:
            out.append((labels[k], [vals[vcut[u]:vcut[u + 1]] for u in range(u0, u1)]))
    return out


def read_units(datasets: Any, dataset_col: str, unit_col: str, value_col: str | Sequence[str],
               multi: bool, words: Words = HMM_WORDS, packed: bool = False,
               unit_optional: bool = False) -> list[tuple[Any, Any]]:
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
    packed : bool
        DataFrame input: each dataset's units as one :class:`UnitArrays`
        (no array per unit) instead of a list of arrays.
    unit_optional : bool
        A DataFrame without ``unit_col`` is one unit per dataset (else an error).

    Returns
    -------
    list of (identifier, list of ndarray or UnitArrays)
    """
    if isinstance(datasets, pd.DataFrame):
        if unit_optional and unit_col not in datasets.columns:
            unit_col = dataset_col  # one unit per dataset
        for c in (dataset_col, unit_col):
            if c not in datasets.columns:
                raise ValueError(
                    f"DataFrame input has columns {list(datasets.columns)}; expected a {c!r} "
                    f"column (set dataset_col= / {words.unit_col}= to name another).")
        cols = [value_col] if isinstance(value_col, str) else list(value_col)
        if multi and value_col == "value" and "value" not in datasets.columns:
            cols = [c for c in datasets.columns if c not in (dataset_col, unit_col)]
        missing = [c for c in cols if c not in datasets.columns]
        if missing or not cols:
            raise ValueError(f"DataFrame input lacks value column(s) {missing or cols}; it "
                             f"has {list(datasets.columns)}. Pass value_col= to name them.")
        pairs = _split_frame(datasets, dataset_col, unit_col, cols if multi else cols[0],
                             packed, words)
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
            f"{words.dataset}s (each one {words.unit} or a list of {words.units}), one array, "
            "or a long DataFrame.")
    if not pairs:
        raise ValueError(f"datasets is empty; expected at least one {words.dataset}.")
    out = [(k, v if isinstance(v, UnitArrays) else _units(v, k, multi, words))
           for k, v in pairs]
    if multi:
        dims = {u.shape[1] for _, units in out for u in units if len(u)}  # (never packed)
        if len(dims) > 1:
            raise ValueError(f"{words.units} have different numbers of dimensions "
                             f"{sorted(dims)}; every observation of a batch needs the same "
                             "dimensions.")
    return out


def pack_units(pairs: list, check: Callable[[list], str | None], width: int,
               observed: Callable[[np.ndarray], np.ndarray] | None = None,
               screen: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
               ) -> Packed:
    """Validate datasets of units and pack the valid ones (:class:`bulkem.data.Ragged`).

    Parameters
    ----------
    pairs : list of (identifier, list of ndarray)
        Each unit of shape ``(n,)`` or ``(n, width)``.
    check : callable
        ``check(units) -> str | None``: why a dataset cannot be fitted, or None.
    width : int
        Values per observation.
    observed : callable, optional
        ``observed(values) -> mask``: the values that ``Packed.n_obs`` counts (default:
        every one; a state-space series leaves out its missing steps).
    screen : callable, optional
        ``screen(values, unit_lengths, units_per_dataset) -> mask``: a vectorised pass over
        every dataset's values that flags the datasets ``check`` must look at (every one
        that ``check`` could fault); the others are valid without a Python call each.
    """
    ids = [k for k, _ in pairs]
    n_units = np.array([len(units) for _, units in pairs], dtype=np.int64)
    units = [u for _, us in pairs for u in us]
    lens = np.fromiter(map(len, units), dtype=np.int64, count=len(units))
    shape = (0,) if width == 1 else (0, width)
    values = (np.concatenate([np.asarray(u, dtype=np.float64) for u in units])
              if units else np.empty(shape))
    unit_obs = lens if observed is None else lens - counts(~observed(values), lens)
    n_obs = by_dataset(unit_obs, n_units)
    look = (np.ones(len(pairs), dtype=bool) if screen is None
            else np.asarray(screen(values, lens, n_units), dtype=bool))
    messages = [check(us) if look[i] else None for i, (_, us) in enumerate(pairs)]
    ok = np.array([m is None for m in messages], dtype=bool)
    valid = np.flatnonzero(ok).astype(np.int64)
    if len(valid) < len(pairs):
        unit_ok = np.repeat(ok, n_units)
        values, lens = values[np.repeat(unit_ok, lens)], lens[unit_ok]
    groups = np.zeros(len(valid) + 1, dtype=np.int64)
    np.cumsum(n_units[valid], out=groups[1:])
    offsets = np.zeros(len(lens) + 1, dtype=np.int64)
    np.cumsum(lens, out=offsets[1:])
    return Packed(ids, np.asarray(n_obs, dtype=np.int64), messages, valid,
                  Ragged(np.ascontiguousarray(values), offsets, groups))


def counts(flags: np.ndarray, unit_lengths: np.ndarray) -> np.ndarray:
    """Per unit: how many of its values ``flags`` marks (flags are few: no pass over the
    values beyond finding them)."""
    hits = np.flatnonzero(flags)
    if not len(hits):
        return np.zeros(len(unit_lengths), dtype=np.int64)
    return np.bincount(np.searchsorted(np.cumsum(unit_lengths), hits, side="right"),
                       minlength=len(unit_lengths))


def by_dataset(per_unit: np.ndarray, units_per_dataset: np.ndarray) -> np.ndarray:
    """Per dataset: the sum of a per-unit array over the dataset's units."""
    cuts = np.r_[0, np.cumsum(units_per_dataset)]
    return np.diff(np.concatenate([[0], np.cumsum(per_unit)])[cuts])


def flagged(bad: np.ndarray, unit_lengths: np.ndarray, units_per_dataset: np.ndarray
            ) -> np.ndarray:
    """Per dataset: whether any of its values (``bad``, one flag per value) is flagged."""
    return by_dataset(counts(bad, unit_lengths), units_per_dataset) > 0
