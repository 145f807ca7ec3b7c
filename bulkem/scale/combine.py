"""FitResults taken apart and put together: the glue of chunked, resumed and distributed fits.

A :class:`bulkem.FitResult` is a few tables (every dataclass field that holds a
DataFrame, ``summary``, ``components``, ``starts``, ``start_values``, and the
entries of its ``tables`` mapping, ``transitions`` for hidden Markov models),
the best fit of each dataset (``_best``, for ``density``/``predict``), the model
that made it (``_model``) and a few scalars (``family``, ``seed``, ...).
:class:`Parts` holds exactly that, the tables and best fits in plain
pandas/NumPy form that pickles between Dask workers and writes to Parquet;
:func:`join` concatenates parts of disjoint sets of datasets into one result of
the same class.  Nothing here knows the tables' columns, so tables added later
come along.  :func:`split_long` cuts the plain long layout (a dataset column and
one value column) into datasets fast, for the chunks and partitions these fits
pass to :func:`bulkem.fit`.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
from collections.abc import Iterable
from typing import Any

import numpy as np
import pandas as pd

from .. import api, models
from ..api import fit as _fit
from ..result import FitResult

# Scalars that every part of one run must share; the others (backend, elapsed)
# may differ between parts.
SHARED_SCALARS = ("seed", "family", "n_components", "dtype", "n_dims")
# The FitResult field that maps the names of a model's further tables to them.
EXTRA_TABLES = "tables"


@dataclasses.dataclass
class Parts:
    """One FitResult as plain data.

    Attributes
    ----------
    tables : dict of str -> pandas.DataFrame
        Every table of the result by name: its DataFrame fields in declaration
        order, then the entries of its ``tables`` mapping.
    best : dict
        Dataset identifier -> the result's best-fit record (``FitResult._best``).
    scalars : dict of str -> scalar
        The result's other public fields (``backend``, ``seed``, ``family``,
        ``n_components``, ``dtype``, ``elapsed``, ``n_dims``, ...).
    result_class : str
        ``module:qualname`` of the result's class (a model's subclass of FitResult).
    model : object or None
        The result's ``_model`` (what ``density``, ``predict``, ``decode``
        use); models do not pickle, so parts that travel or are stored leave
        it out and :func:`model_for` builds it again.
    sample : pandas.DataFrame or None
        A few input rows (one dataset) for :func:`model_for`, where the data
        are not at hand (a Dask partition's fit, back on the client).
    """

    tables: dict[str, pd.DataFrame]
    best: dict
    scalars: dict[str, Any]
    result_class: str = "bulkem.result:FitResult"
    model: Any = None
    sample: Any = None


def _is_table(value: Any) -> bool:
    return isinstance(value, pd.DataFrame)


def _tables(result: FitResult) -> dict[str, pd.DataFrame]:
    out = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
           if not f.name.startswith("_") and _is_table(getattr(result, f.name))}
    out.update(getattr(result, EXTRA_TABLES, None) or {})
    return out


def table_names(result: FitResult) -> list[str]:
    """Names of the result's tables (DataFrame fields, then its ``tables`` mapping's)."""
    return list(_tables(result))


def class_name(cls: type) -> str:
    """``module:qualname`` of a class, for :func:`load_class`."""
    return f"{cls.__module__}:{cls.__qualname__}"


def load_class(name: str) -> type:
    """The class named by :func:`class_name`."""
    module, _, qualname = name.partition(":")
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    return obj


def split(result: FitResult) -> Parts:
    """Take a FitResult apart into :class:`Parts`."""
    scalars = {f.name: getattr(result, f.name) for f in dataclasses.fields(result)
               if not f.name.startswith("_") and f.name != EXTRA_TABLES
               and not _is_table(getattr(result, f.name))}
    return Parts(_tables(result), dict(result._best), scalars, class_name(type(result)),
                 getattr(result, "_model", None))


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
        Of the parts' class: tables concatenated (index 0..n-1), the best fits
        merged, the first model found; ``backend`` is the one backend of the
        parts, or their names joined by "+".

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
    cls = load_class(parts[0].result_class)
    fields = {f.name for f in dataclasses.fields(cls)}
    direct, extra = {}, {}
    for name in parts[0].tables:
        table = _concat_tables([p.tables[name] for p in parts])
        (direct if name in fields else extra)[name] = table
    if EXTRA_TABLES in fields:
        direct[EXTRA_TABLES] = extra
    best: dict = {}
    for p in parts:
        best.update(p.best)
    scalars = {k: v for k, v in first.items() if k in fields}
    if "backend" in scalars:
        scalars["backend"] = "+".join(dict.fromkeys(str(p.scalars.get("backend"))
                                                    for p in parts))
    if "elapsed" in scalars:
        scalars["elapsed"] = (float(sum(p.scalars.get("elapsed", 0.0) for p in parts))
                              if elapsed is None else float(elapsed))
    model = next((p.model for p in parts if p.model is not None), None)
    return cls(**direct, **scalars, _model=model, _best=best)


def concat(results: Iterable[FitResult], elapsed: float | None = None) -> FitResult:
    """Concatenate FitResults of disjoint sets of datasets (see :func:`join`)."""
    return join((split(r) for r in results), elapsed)


def _options(kwargs: dict) -> dict:
    """The family options among :func:`bulkem.fit` keyword arguments (``emission=``, ...)."""
    named = set(inspect.signature(_fit).parameters)
    return {k: v for k, v in kwargs.items() if k not in named}


def model_for(kwargs: dict, data: Any) -> Any:
    """The model :func:`bulkem.fit` builds for these arguments and (a sample of the) data.

    For a result joined from parts that carry no model (read from a
    checkpoint, or fitted on a Dask worker): ``density``, ``predict`` and the
    like need it.  The model depends on the arguments and on the data's shape
    only (dimensions), once :func:`check_splittable` has passed.
    """
    from .. import models

    fam = models.get(kwargs.get("family", "invgauss"))
    options = _options(kwargs)
    pairs = fam.read(data, kwargs.get("dataset_col", "dataset"), kwargs.get("value_col", "value"),
                     options)
    return fam.model(pairs, kwargs.get("n_components", 2), options)


def check_splittable(kwargs: dict, weights_by_dataset: bool = False) -> None:
    """Raise if fits of parts of the data would build different models than one fit, or
    for a grid of sizes or a bootstrap (made over the whole call), or for weights the parts
    cannot carry: a weight column (``weights="name"``) goes with its rows into every
    chunk, partition or piece of a file; weights given per dataset (a list, a dict, an
    array) only where ``weights_by_dataset`` (the checkpointed fit hands each chunk its
    datasets' weights).

    A categorical hidden Markov model counts its symbols over all the data it
    is given (``n_symbols`` left out), so each chunk or partition could count
    differently.
    """
    if api.grid_sizes(models.get(kwargs.get("family", "invgauss")), kwargs.get("n_components"),
                 kwargs):
        raise ValueError("a grid of sizes (n_components=[...], order=[...] or orders=[...]) "
                         "is fitted in memory by bulkem.fit without checkpoint= or Dask: run "
                         "one checkpointed or distributed fit per size.")
    if kwargs.get("bootstrap"):
        raise ValueError("bootstrap= is fitted in memory by bulkem.fit without checkpoint= or "
                         "Dask; run the bootstrap on the datasets that need it without them.")
    weights = kwargs.get("weights")
    if weights is not None and not isinstance(weights, str) and not weights_by_dataset:
        raise ValueError(
            f"weights= is a {type(weights).__name__} here; a Dask or streamed fit reads the "
            "weights from a column of its long frame or file: pass the column's name "
            "(weights='weight'), or fit in memory or with checkpoint= for weights per dataset.")
    if (kwargs.get("family") == "hmm" and kwargs.get("emission", "gaussian") == "categorical"
            and kwargs.get("n_symbols") is None):
        raise ValueError(
            "family='hmm' with emission='categorical' counts its symbols over the data it is "
            "given; fitted in chunks or partitions, each part could count differently. Pass "
            "n_symbols= (the number of distinct symbols) so that every part fits the same model.")


def split_long(frame: pd.DataFrame, dataset_col: str, value_col: Any,
               family: str = "invgauss") -> dict | None:
    """``{dataset: values}`` of a long frame, as :func:`bulkem.fit` would split it, fast.

    Only for a mixture family and a frame of exactly a dataset column (not
    categorical) and one value column ``value_col``; None for any other
    family or layout (more value columns, a family's extra columns), which
    ``bulkem.fit`` then splits itself.  Datasets in order of first
    appearance, each dataset's values in row order, rows without a dataset
    left out: the pairs bulkem.fit's ``groupby(sort=False)`` gives, in ~1 us
    a dataset instead of ~30 us.
    """
    from .. import models

    if (not isinstance(value_col, str) or dataset_col == value_col
            or len(frame.columns) != 2 or set(frame.columns) != {dataset_col, value_col}
            or not isinstance(models.FAMILIES.get(family), models.Family)):
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
