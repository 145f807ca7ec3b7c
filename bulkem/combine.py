"""FitResults taken apart and put together: the glue of chunked, resumed and distributed fits.

A :class:`bulkem.FitResult` is a few tables (every dataclass field that holds a
DataFrame: ``summary``, ``components``, ``starts``, ``start_values`` today, and
whatever tables new families add), the best fit of each dataset (``_best``,
for ``density``/``predict``) and a few scalars (``family``, ``seed``, ...).
:class:`Parts` holds exactly that in plain pandas/NumPy form, which pickles
between Dask workers and writes to Parquet; :func:`join` concatenates parts of
disjoint sets of datasets into one FitResult.  Nothing here knows the tables'
columns, so tables added later come along.  :func:`split_long` cuts the plain
long layout (a dataset column and one value column) into datasets fast, for the
chunks and partitions these fits pass to :func:`bulkem.fit`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from . import families
from .result import FitResult

# Scalars that every part of one run must share; the others (backend, elapsed)
# may differ between parts.
SHARED_SCALARS = ("seed", "family", "n_components", "dtype", "n_dims")


@dataclasses.dataclass
class Parts:
    """One FitResult as plain data.

    Attributes
    ----------
    tables : dict of str -> pandas.DataFrame
        Every table of the result, by attribute name, in declaration order.
    best : dict
        Dataset identifier -> the result's best-fit record (``FitResult._best``).
    scalars : dict of str -> scalar
        The result's other public fields (``backend``, ``seed``, ``family``,
        ``n_components``, ``dtype``, ``elapsed``, ``n_dims``, ...).
    """

    tables: dict[str, pd.DataFrame]
    best: dict
    scalars: dict[str, Any]


def _is_table(value: Any) -> bool:
    return isinstance(value, pd.DataFrame)


def table_names(result: FitResult) -> list[str]:
    """Names of the result's tables (its DataFrame fields), in declaration order."""
    return [f.name for f in dataclasses.fields(result)
            if not f.name.startswith("_") and _is_table(getattr(result, f.name))]


def split(result: FitResult) -> Parts:
    """Take a FitResult apart into :class:`Parts`."""
    tables, scalars = {}, {}
    for f in dataclasses.fields(result):
        if f.name.startswith("_"):
            continue
        value = getattr(result, f.name)
        (tables if _is_table(value) else scalars)[f.name] = value
    return Parts(tables, dict(result._best), scalars)


def _concat_tables(frames: list[pd.DataFrame]) -> pd.DataFrame:
    # An empty piece (a chunk whose datasets were all invalid) may carry other
    # dtypes (object for an empty id column): leave it out unless all are empty.
    full = [f for f in frames if len(f)] or frames[:1]
    return pd.concat(full, ignore_index=True)


def join(parts: Iterable[Parts], elapsed: float | None = None) -> FitResult:
    """Concatenate the parts of disjoint sets of datasets into one FitResult.

    Parameters
    ----------
    parts : iterable of Parts
        In the order their rows should appear.  Each holds other datasets.
    elapsed : float, optional
        The result's ``elapsed``; default the sum of the parts'.

    Returns
    -------
    FitResult
        Tables concatenated (index 0..n-1), the best fits merged; ``backend``
        is the one backend of the parts, or their names joined by "+".

    Raises
    ------
    ValueError
        When there are no parts, or they disagree on a scalar of
        :data:`SHARED_SCALARS` (fits of different runs).
    """
    parts = list(parts)
    if not parts:
        raise ValueError("no results to join; expected at least one.")
    first = parts[0].scalars
    for p in parts[1:]:
        for key in SHARED_SCALARS:
            if key in first and p.scalars.get(key) != first[key]:
                raise ValueError(
                    f"cannot join fits with different {key}: {first[key]!r} and "
                    f"{p.scalars.get(key)!r}; they come from different runs."
                )
    names = list(parts[0].tables)
    tables = {name: _concat_tables([p.tables[name] for p in parts]) for name in names}
    best: dict = {}
    for p in parts:
        best.update(p.best)
    scalars = dict(first)
    backends = list(dict.fromkeys(p.scalars.get("backend") for p in parts))
    if "backend" in scalars:
        scalars["backend"] = "+".join(str(b) for b in backends)
    if "elapsed" in scalars:
        scalars["elapsed"] = (float(sum(p.scalars.get("elapsed", 0.0) for p in parts))
                              if elapsed is None else float(elapsed))
    return FitResult(**tables, **scalars, _family=families.get(scalars["family"]), _best=best)


def concat(results: Iterable[FitResult], elapsed: float | None = None) -> FitResult:
    """Concatenate FitResults of disjoint sets of datasets (see :func:`join`)."""
    return join((split(r) for r in results), elapsed)


def split_long(frame: pd.DataFrame, dataset_col: str, value_col: Any) -> dict | None:
    """``{dataset: values}`` of a long frame, as :func:`bulkem.fit` would split it, fast.

    Only for a frame of exactly a dataset column (not categorical) and one
    value column ``value_col``; None for any other layout (more value
    columns, a family's extra columns), which ``bulkem.fit`` then splits
    itself.  Datasets in order of first appearance, each dataset's values in
    row order, rows without a dataset left out: the pairs bulkem.fit's
    ``groupby(sort=False)`` gives, in ~1 us a dataset instead of ~30 us.
    """
    if (not isinstance(value_col, str) or dataset_col == value_col
            or len(frame.columns) != 2 or set(frame.columns) != {dataset_col, value_col}):
        return None
    ids = frame[dataset_col]
    if isinstance(ids.dtype, pd.CategoricalDtype):
        return None
    codes, uniques = pd.factorize(ids)  # first appearance; no dataset: -1
    keep = codes >= 0
    codes = codes[keep]
    values = frame[value_col].to_numpy()[keep][np.argsort(codes, kind="stable")]
    ends = np.r_[0, np.cumsum(np.bincount(codes, minlength=len(uniques)))]
    return {u: values[ends[j]:ends[j + 1]] for j, u in enumerate(uniques)}
