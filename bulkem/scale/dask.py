"""Fit a Dask DataFrame where its partitions live: ``bulkem.dask.fit(ddf, ...)``.

Every (dataset, start) fit is independent, so the work partitions by dataset:
the rows are first regrouped so that each dataset lies in one partition (a
Dask shuffle on the dataset column, keeping each dataset's rows in their input
order), then each partition is fitted by :func:`bulkem.fit` on the worker that
holds it (on its GPU when it has one and ``backend="auto"``), and the tables
come back as Dask DataFrames.  A fit depends on the seed, the dataset's values
and the start number alone, so the tables are those of one ``bulkem.fit`` call
on all the data, whatever the partitioning and the number of workers, and a
worker that dies loses nothing: Dask fits its partitions again elsewhere.

Needs the optional extra: ``pip install 'bulkem[dask]'``.

Example
-------
>>> import dask.dataframe as dd
>>> from dask.distributed import Client
>>> client = Client()                                   # or a cluster's address
>>> ddf = dd.read_parquet("values/")                    # columns dataset, value
>>> res = bulkem.dask.fit(ddf, family="invgauss", n_components=2, n_starts=100, seed=1)
>>> res.summary.to_parquet("fits/summary/")
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

try:
    import dask
    import dask.dataframe as dd
    import distributed
except ImportError as err:  # the optional extra is missing
    raise ImportError(
        "bulkem.dask needs dask (with its DataFrame) and distributed: "
        "pip install 'bulkem[dask]' (or pip install 'dask[dataframe]' distributed)."
    ) from err
import numpy as np
import pandas as pd

from .. import api
from ..result import FitResult
from . import combine
from .checkpoint import draw_seed

# Columns added to the input so that a dataset's rows keep their input order
# through the shuffle (a shuffle may deliver pieces in any order).
PART_COL = "_bulkem_partition"
ROW_COL = "_bulkem_row"


def _number_rows(df: pd.DataFrame, part: int) -> pd.DataFrame:
    return df.assign(**{PART_COL: np.int64(part), ROW_COL: np.arange(len(df), dtype=np.int64)})


def _fit_partition(df: pd.DataFrame, kwargs: dict, numbered: bool) -> combine.Parts | None:
    """Fit one partition's datasets on the worker; None for an empty partition."""
    if numbered:
        df = df.sort_values([PART_COL, ROW_COL], kind="stable").drop(columns=[PART_COL, ROW_COL])
    if len(df) == 0:
        return None
    data = combine.split_long(df, kwargs["dataset_col"], kwargs["value_col"], kwargs["family"])
    parts = combine.split(api.fit(df if data is None else data, progress=False, **kwargs))
    ids = df[kwargs["dataset_col"]]
    first = ids[ids.notna()].iloc[0]
    parts.model, parts.sample = None, df[ids == first]  # a model does not pickle: its recipe
    return parts


def _heads(parts: combine.Parts | None) -> dict | None:
    """Each table's columns and dtypes (an empty frame), and whether it had rows."""
    if parts is None:
        return None
    return {name: (len(t) > 0, t.iloc[:0]) for name, t in parts.tables.items()}


def _table(parts: combine.Parts | None, name: str, meta: pd.DataFrame) -> pd.DataFrame:
    """One partition's table, in the dtypes of ``meta``.

    An empty table (every dataset of the partition invalid, say) may carry
    other dtypes; a partition without rows gives ``meta`` itself.
    """
    if parts is None:
        return meta
    t = parts.tables[name]
    cast = {c: meta[c].dtype for c in meta.columns if t[c].dtype != meta[c].dtype}
    return t.astype(cast) if cast else t


# dask.config "scheduler" values that run on this machine even when a client exists
_LOCAL_SCHEDULERS = ("sync", "synchronous", "single-threaded", "threads", "threading",
                     "processes", "multiprocessing")


def _client() -> distributed.Client | None:
    """The distributed client that will run the graph, or None for a local scheduler."""
    if dask.config.get("scheduler", None) in _LOCAL_SCHEDULERS:
        return None
    try:
        return distributed.default_client()
    except ValueError:  # no client: dask's local scheduler
        return None


def _metas(fits: list, as_they_finish: bool) -> dict[str, pd.DataFrame]:
    """Each table's meta, from the first partitions to finish that have its rows."""
    heads = [dask.delayed(_heads)(f) for f in fits]
    client = _client() if as_they_finish else None
    if client is not None:
        futures = client.compute(heads)
        stream = (f.result() for f in distributed.as_completed(futures))
    else:
        futures = []
        stream = (dask.compute(h)[0] for h in heads)
    found: dict[str, tuple[bool, pd.DataFrame]] = {}
    try:
        for h in stream:
            if h is None:
                continue
            for name, (full, head) in h.items():
                if name not in found or (full and not found[name][0]):
                    found[name] = (full, head)
            if all(full for full, _ in found.values()):
                break
    finally:
        if futures:
            client.cancel(futures)
    if not found:
        raise ValueError("the dask DataFrame has no rows; expected at least one dataset.")
    return {name: head for name, (_, head) in found.items()}


@dataclass
class DaskFitResult:
    """Result of :func:`bulkem.dask.fit`: the tables of :class:`bulkem.FitResult` as Dask
    DataFrames.

    Each table is an attribute (``summary``, ``components``, ``starts``,
    ``start_values``, and any table a family adds) and an entry of ``tables``.
    Within a partition, rows come in the order one ``bulkem.fit`` call gives
    them (datasets in order of first appearance in the input); partitions hold
    datasets by a hash of their identifier, so across partitions the order is
    arbitrary: sort by ``dataset`` (then ``start``, ``component``) for a stable
    order.  The index is the row's position within its partition.

    Attributes
    ----------
    tables : dict of str -> dask.dataframe.DataFrame
    seed : int
        The seed of every partition's starts (drawn once when none was given).
    family : str
    n_components : int
    parts : list
        One Dask object per partition, holding its fit (None for an empty partition).
    fit_kwargs : dict
        The arguments of every partition's :func:`bulkem.fit`.
    """

    tables: dict[str, dd.DataFrame]
    seed: int
    family: str
    n_components: int
    parts: list = field(repr=False, default_factory=list)
    fit_kwargs: dict = field(repr=False, default_factory=dict)

    def __getattr__(self, name: str) -> dd.DataFrame:
        tables = self.__dict__.get("tables", {})
        if name in tables:
            return tables[name]
        raise AttributeError(f"{type(self).__name__} has no attribute or table {name!r}; "
                             f"its tables are {list(tables)}.")

    def __repr__(self) -> str:
        n = next(iter(self.tables.values())).npartitions if self.tables else 0
        return (f"DaskFitResult(family={self.family!r}, n_components={self.n_components}, "
                f"seed={self.seed}, tables={list(self.tables)}, npartitions={n})")

    def compute(self) -> FitResult:
        """Gather every partition's fit into one in-memory :class:`bulkem.FitResult`.

        Partitions in order, each as :func:`bulkem.fit` returned it;
        ``elapsed`` is the sum of the partitions' fit times.
        """
        parts = [p for p in dask.compute(*self.parts) if p is not None]
        result = combine.join(parts)
        result._model = combine.model_for(self.fit_kwargs, parts[0].sample)
        return result


def fit(
    ddf: dd.DataFrame,
    family: str = "invgauss",
    *,
    dataset_col: str = "dataset",
    value_col: str | Sequence[str] = "value",
    seed: int | None = None,
    regroup: bool = True,
    npartitions: int | None = None,
    shuffle_method: str | None = None,
    persist: bool = True,
    **fit_kwargs: Any,
) -> DaskFitResult:
    """Fit every dataset of a long Dask DataFrame, each partition on its worker.

    Parameters
    ----------
    ddf : dask.dataframe.DataFrame
        Long form, in any family's layout: a dataset column and the value
        column(s) (and whatever other columns the family reads).  A dataset's
        rows may be spread over partitions; their order in the input is kept.
    family : str
        As :func:`bulkem.fit`.
    dataset_col, value_col
        As :func:`bulkem.fit`, passed to each partition's fit.
    seed : int or None
        Seed of the random starts; None draws one here, once, for every
        partition (recorded in the result's ``seed``).
    regroup : bool, default True
        Shuffle by dataset first.  ``False`` fits the partitions as they are:
        only for input whose every dataset already lies in one partition (a
        dataset split over partitions would be fitted in pieces).
    npartitions : int, optional
        Partitions after the shuffle; default as many as ``ddf`` has.
    shuffle_method : str, optional
        Dask's shuffle method ("tasks", "p2p", ...); default Dask's choice.
    persist : bool, default True
        Start fitting at once and keep each partition's fit in the cluster's
        memory, so the tables can be computed one after another without
        fitting again.  ``False`` leaves everything lazy: compute the tables
        together (``dask.compute(res.summary, res.components)``), since each
        compute fits the partitions it needs.
    **fit_kwargs
        Every other argument of :func:`bulkem.fit` (``n_components``,
        ``n_starts``, ``backend``, ``dtype``, ...), passed to each partition's
        fit.  ``backend="auto"`` (the default) uses each worker's GPU when it
        has one.

    Returns
    -------
    DaskFitResult
        The tables as Dask DataFrames.  This returns once each table's
        column types are known (from the first partitions fitted); with
        ``persist=True`` the other partitions go on fitting in the background.

    Raises
    ------
    ValueError, TypeError
        For input that is not a Dask DataFrame with the dataset column, for
        arguments ``bulkem.dask.fit`` does not take, and as :func:`bulkem.fit`
        (raised from the first partition fitted).
    """
    if not isinstance(ddf, dd.DataFrame):
        raise TypeError(f"ddf is a {type(ddf).__name__}; expected a dask DataFrame in long "
                        "form (dask.dataframe.from_pandas or read_parquet, say).")
    if dataset_col not in ddf.columns:
        raise ValueError(f"the dask DataFrame has columns {list(ddf.columns)}; expected a "
                         f"{dataset_col!r} column naming the dataset of each row. Pass "
                         "dataset_col= to name another.")
    for name, why in (("checkpoint", "Dask fits a lost partition again by itself"),
                      ("progress", "watch the Dask dashboard instead"),
                      ("datasets", "pass the data as ddf")):
        if name in fit_kwargs:
            raise TypeError(f"bulkem.dask.fit takes no {name}= argument: {why}.")
    seed = draw_seed() if seed is None else seed
    kwargs = {"family": family, "dataset_col": dataset_col, "value_col": value_col,
              "seed": seed, **fit_kwargs}
    combine.check_splittable(kwargs)

    if shuffle_method is None and _client() is None:
        shuffle_method = "tasks"  # dask picks "p2p" when a client exists, even if unused
    if regroup:
        numbered = dd.from_delayed(
            [dask.delayed(_number_rows)(p, i) for i, p in enumerate(ddf.to_delayed())],
            meta=_number_rows(ddf._meta, 0), verify_meta=False)
        grouped = numbered.shuffle(on=dataset_col, npartitions=npartitions or ddf.npartitions,
                                   shuffle_method=shuffle_method)
        pieces = grouped.to_delayed()
    else:
        pieces = ddf.to_delayed()
    fits = [dask.delayed(_fit_partition, pure=True)(p, kwargs, regroup) for p in pieces]
    if persist:
        fits = list(dask.persist(*fits))
    metas = _metas(fits, as_they_finish=persist)
    tables = {
        name: dd.from_delayed([dask.delayed(_table, pure=True)(f, name, meta) for f in fits],
                              meta=meta, verify_meta=False)
        for name, meta in metas.items()
    }
    n_components = fit_kwargs.get("n_components", 2)
    return DaskFitResult(tables, seed, family, n_components, fits, kwargs)
