"""rpy2 bridge: R vectors, lists and data.frames in; bulkem's tables out as R data.frames.

For Python code that holds R objects (through rpy2).  R users call the R
package in ``r_wrapper/`` instead, which reaches bulkem through reticulate.

rpy2 is an optional dependency (``pip install "bulkem[r]"``; rpy2 3.5.x for
R 4.2).  This module imports without it; its functions then raise
ImportError saying how to get it.  Every conversion runs inside a
``localconverter`` block: the global conversion rules are never changed
(no ``pandas2ri.activate()``), so importing bulkem cannot alter how other
rpy2 code converts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

_INSTALL_HINT = (
    'Install it with `pip install "bulkem[r]"` (or `pip install "rpy2>=3.5,<3.6"` for R 4.2); '
    "rpy2 also needs R itself (e.g. apt-get install r-base-core)."
)

# R-side helpers, defined once per session: they normalise values in R, where
# NA is known, before numpy/pandas see them (rpy2 turns an integer NA into
# -2147483648, not NaN).
_R_HELPERS = r"""
list(
  as_numbers = function(x) as.double(unlist(x, use.names = FALSE)),
  is_numbers = function(x) is.null(x) || (is.atomic(x) && (is.numeric(x) || is.logical(x))),
  clean_frame = function(df) {
    for (n in names(df)) {
      col <- df[[n]]
      if (is.factor(col)) {
        df[[n]] <- as.character(col)
      } else if ((is.integer(col) || is.logical(col)) && anyNA(col)) {
        df[[n]] <- as.double(col)
      }
    }
    df
  },
  load_data = function(name, package) {
    if (!requireNamespace(package, quietly = TRUE)) return(list(status = "no_package"))
    env <- new.env()
    suppressWarnings(utils::data(list = name, package = package, envir = env))
    if (!exists(name, envir = env, inherits = FALSE)) return(list(status = "no_data"))
    list(status = "ok", value = get(name, envir = env))
  }
)
"""

_helpers: Any = None


def _rpy2() -> Any:
    """The rpy2 pieces this module uses, or ImportError saying how to get them."""
    if "rpytools" in sys.modules:
        # reticulate's helper module: this Python runs inside an R process, and
        # rpy2 cannot start a second R there.
        raise ImportError(
            "bulkem.interop.rbridge cannot start R: this Python runs inside R (through "
            "reticulate). Use R objects from the R side (the bulkem R package) instead."
        )
    # Starting R sets LD_LIBRARY_PATH in os.environ to R's library folders; a
    # Python subprocess started later would then load the system libpython
    # instead of its own (seen with pyenv builds).  R is loaded by then, so
    # the old value is put back.
    old_ld = os.environ.get("LD_LIBRARY_PATH")
    try:
        import rpy2.robjects as ro
        from rpy2.robjects import default_converter, numpy2ri, pandas2ri
        from rpy2.robjects.conversion import localconverter
    except ImportError as err:
        raise ImportError(f"bulkem.interop.rbridge needs rpy2, which is missing ({err}). "
                          f"{_INSTALL_HINT}") from err
    except Exception as err:  # rpy2 present but R cannot be found or started
        raise ImportError(f"bulkem.interop.rbridge could not start R through rpy2: {err}. "
                          f"{_INSTALL_HINT}") from err
    finally:
        if old_ld is None:
            os.environ.pop("LD_LIBRARY_PATH", None)
        else:
            os.environ["LD_LIBRARY_PATH"] = old_ld

    class _Rpy2:
        pass

    mod = _Rpy2()
    mod.ro = ro
    mod.localconverter = localconverter
    mod.plain = default_converter
    mod.numpy = default_converter + numpy2ri.converter
    mod.pandas = default_converter + numpy2ri.converter + pandas2ri.converter
    return mod


def _r_helpers(rp: Any) -> Any:
    global _helpers
    if _helpers is None:
        with rp.localconverter(rp.plain):
            _helpers = rp.ro.r(_R_HELPERS)
    return _helpers


def _rcall(rp: Any, name: str, *args: Any) -> Any:
    """Call an R helper on R objects; the answer stays an R object."""
    with rp.localconverter(rp.plain):
        return _r_helpers(rp).rx2(name)(*args)


def _r_class(rp: Any, obj: Any) -> list[str]:
    with rp.localconverter(rp.plain):
        return list(rp.ro.r["class"](obj))


def _r_names(rp: Any, obj: Any) -> list[str] | None:
    with rp.localconverter(rp.plain):
        names = rp.ro.r["names"](obj)
        if names is rp.ro.NULL or isinstance(names, type(rp.ro.NULL)):
            return None
        na = list(rp.ro.r["is.na"](names))
        return [None if m else str(s) for s, m in zip(names, na, strict=True)]


def _is_r_object(rp: Any, obj: Any) -> bool:
    from rpy2.rinterface_lib.sexp import Sexp

    return isinstance(obj, Sexp)


def _vector_to_numpy(rp: Any, obj: Any) -> np.ndarray:
    numbers = _rcall(rp, "as_numbers", obj)
    with rp.localconverter(rp.numpy):
        return np.array(rp.ro.conversion.get_conversion().rpy2py(numbers), dtype=np.float64)


def r_to_numpy(obj: Any) -> np.ndarray:
    """An R numeric (or logical) vector -> a float64 array, NA -> NaN.

    Parameters
    ----------
    obj : rpy2 R vector
        Double, integer or logical.

    Returns
    -------
    ndarray of shape (n,), float64
    """
    rp = _rpy2()
    if not _is_r_object(rp, obj):
        raise TypeError(f"expected an R vector (an rpy2 object), got {type(obj).__name__}.")
    with rp.localconverter(rp.plain):
        numeric = bool(_r_helpers(rp).rx2("is_numbers")(obj)[0])
    if not numeric:
        raise TypeError(
            f"the R object has class {_r_class(rp, obj)}; expected a numeric vector. "
            "Convert it in R with as.numeric()."
        )
    return _vector_to_numpy(rp, obj)


def r_to_pandas(obj: Any) -> pd.DataFrame:
    """An R data.frame -> a pandas DataFrame (factors become strings, NA -> NaN/None).

    Parameters
    ----------
    obj : rpy2 R data.frame

    Returns
    -------
    pandas.DataFrame
        Same column names; a plain RangeIndex.
    """
    rp = _rpy2()
    if "data.frame" not in _r_class(rp, obj):
        raise TypeError(f"expected an R data.frame, got an R object of class {_r_class(rp, obj)}.")
    clean = _rcall(rp, "clean_frame", obj)
    with rp.localconverter(rp.pandas):
        df = rp.ro.conversion.get_conversion().rpy2py(clean)
    return df.reset_index(drop=True)


def r_to_datasets(obj: Any) -> np.ndarray | list | dict | pd.DataFrame:
    """An R object holding datasets -> the Python object :func:`bulkem.fit` takes.

    Parameters
    ----------
    obj : rpy2 R object
        A numeric vector (one dataset); a list of numeric vectors (a named
        list gives a dict, an unnamed one a list); or a long data.frame with
        columns ``dataset`` and ``value``.  R ``NA`` becomes NaN, which
        bulkem reports as ``invalid_data`` for that dataset alone.

    Returns
    -------
    ndarray of shape (n,), list of ndarray, dict of str -> ndarray, or pandas.DataFrame
    """
    rp = _rpy2()
    if not _is_r_object(rp, obj):
        raise TypeError(f"expected an R object (rpy2), got {type(obj).__name__}; "
                        "Python data can go to bulkem.fit directly.")
    classes = _r_class(rp, obj)
    if "data.frame" in classes:
        return r_to_pandas(obj)
    with rp.localconverter(rp.plain):
        is_list = bool(rp.ro.r["is.list"](obj)[0])
    if not is_list:
        return r_to_numpy(obj)
    names = _r_names(rp, obj)
    with rp.localconverter(rp.plain):
        items = [obj[i] for i in range(len(obj))]
    arrays = []
    for k, item in enumerate(items):
        label = names[k] if names else k
        if "data.frame" in _r_class(rp, item) or not bool(_rcall(rp, "is_numbers", item)[0]):
            raise TypeError(
                f"dataset {label!r} of the R list has class {_r_class(rp, item)}; "
                "expected a numeric vector."
            )
        arrays.append(_vector_to_numpy(rp, item))
    if names is None:
        return arrays
    if any(n is None or n == "" for n in names):
        raise ValueError("the R list has some names empty; name every dataset or none.")
    if len(set(names)) != len(names):
        raise ValueError(f"the R list has duplicated names {sorted(names)}; "
                         "every dataset needs its own name.")
    return dict(zip(names, arrays, strict=True))


def datasets_to_r(datasets: Any) -> Any:
    """Python datasets -> R: an array -> numeric vector, list -> list, dict ->
    named list, DataFrame -> data.frame.

    Parameters
    ----------
    datasets : array-like, list of array-like, dict or pandas.DataFrame

    Returns
    -------
    rpy2 R object
    """
    rp = _rpy2()
    if isinstance(datasets, pd.DataFrame):
        return table_to_r(datasets)
    if isinstance(datasets, Mapping):
        vectors = {str(k): _numpy_to_r(rp, v) for k, v in datasets.items()}
        with rp.localconverter(rp.plain):
            return rp.ro.vectors.ListVector(vectors)
    if isinstance(datasets, (list, tuple)) and not all(np.isscalar(v) for v in datasets):
        vectors = [_numpy_to_r(rp, v) for v in datasets]
        with rp.localconverter(rp.plain):
            return rp.ro.r["list"](*vectors)
    return _numpy_to_r(rp, datasets)


def _numpy_to_r(rp: Any, values: Any) -> Any:
    arr = np.asarray(values, dtype=np.float64).reshape(-1)
    with rp.localconverter(rp.plain):
        return rp.ro.vectors.FloatVector(arr)


def table_to_r(df: pd.DataFrame) -> Any:
    """A pandas table (e.g. ``FitResult.summary``) -> an R data.frame.

    Integer, float, bool and string columns keep their types; object columns
    of numbers become numeric, others character; None/NaN become NA.

    Parameters
    ----------
    df : pandas.DataFrame

    Returns
    -------
    rpy2 R data.frame
        Same column names, rows 1..n.
    """
    rp = _rpy2()
    df = df.reset_index(drop=True).copy()
    for col in df.columns:
        s = df[col]
        if s.dtype == object or isinstance(s.dtype, pd.CategoricalDtype):
            present = s.dropna()
            if len(present) and all(isinstance(v, (int, float, np.number)) and
                                    not isinstance(v, (bool, np.bool_)) for v in present):
                df[col] = pd.to_numeric(s)
            else:
                df[col] = s.astype("object").where(s.notna(), None).map(
                    lambda v: v if v is None else str(v))
    with rp.localconverter(rp.pandas):
        return rp.ro.conversion.get_conversion().py2rpy(df)


def _ids_are_positions(result: Any, key: str) -> bool:
    """Whether a result's dataset ids are list positions (0, 1, ...), not labels.

    Known for a result of :func:`fit_r` (an unnamed R list or a vector);
    otherwise ids that are exactly ``0, 1, ..., n - 1`` in order (what a
    Python list or a single array gives) are taken for positions.
    """
    how = getattr(result, "r_ids", None)
    if how is not None:
        return how == "position"
    ids = result.summary[key]
    return (pd.api.types.is_integer_dtype(ids)
            and np.array_equal(ids.to_numpy(), np.arange(len(ids))))


def result_to_r(result: Any, dataset_offset: int | None = None) -> Any:
    """Every table of a :class:`bulkem.FitResult` -> a named R list of data.frames.

    The tables of the R package's fits: ``summary, components, starts,
    start_values`` and the family's own (``transitions`` and
    ``start_transitions`` of a hidden Markov model, ``transitions`` of a
    TMAP), with R's numbering: datasets given by position count from 1, as
    do start numbers, and the -1 placeholders (``best_start``, ``n_iter`` of
    datasets without a fit) become NA.

    Parameters
    ----------
    result : FitResult
    dataset_offset : int, optional
        Added to integer dataset ids.  By default 1 when the ids are list
        positions (a result of :func:`fit_r` on an unnamed R list or a
        vector, or ids exactly ``0, ..., n - 1``), else 0 (labels and
        names stay as they are).

    Returns
    -------
    rpy2 R list with elements summary, components, starts, start_values
    and the family's further tables
    """
    rp = _rpy2()
    key = "trace" if "trace" in result.summary.columns else "dataset"
    if dataset_offset is None:
        dataset_offset = 1 if _ids_are_positions(result, key) else 0
    names = ["summary", "components", "starts", "start_values"]
    names += [n for n in getattr(result, "tables", {}) if n not in names]
    tables = {}
    for name in names:
        df = (getattr(result, name) if name in names[:4] else result.tables[name]).copy()
        if not isinstance(df, pd.DataFrame):
            continue
        if (dataset_offset and key in df.columns
                and pd.api.types.is_integer_dtype(df[key])):
            df[key] = df[key] + dataset_offset
        if "start" in df.columns:
            df["start"] = df["start"] + 1
        if name == "summary":
            df["best_start"] = df["best_start"].where(df["best_start"] >= 0) + 1
            df["n_iter"] = df["n_iter"].where(df["n_iter"] >= 0)
        tables[name] = table_to_r(df)
    with rp.localconverter(rp.plain):
        return rp.ro.vectors.ListVector(tables)


def load_r_dataset(name: str, package: str) -> pd.DataFrame:
    """A data set shipped by an installed R package, as a pandas DataFrame.

    Parameters
    ----------
    name : str
        Data set name, e.g. ``"bmi"``.
    package : str
        R package, e.g. ``"mixsmsn"``.

    Returns
    -------
    pandas.DataFrame
        The data.frame's columns; a vector becomes one column named ``name``.

    Raises
    ------
    ImportError
        rpy2 (or R) is missing.
    LookupError
        The R package is not installed, or has no such data set.
    """
    rp = _rpy2()
    with rp.localconverter(rp.plain):
        answer = _r_helpers(rp).rx2("load_data")(name, package)
        status = answer.rx2("status")[0]
        if status == "no_package":
            lib = list(rp.ro.r[".libPaths"]())
            raise LookupError(
                f"R package {package!r} is not installed (R libraries: {lib}); install it in "
                f"R with install.packages({package!r}) to load its data set {name!r}."
            )
        if status == "no_data":
            raise LookupError(f"R package {package!r} has no data set named {name!r}.")
        obj = answer.rx2("value")
    if "data.frame" in _r_class(rp, obj):
        return r_to_pandas(obj)
    return pd.DataFrame({name: r_to_numpy(obj)})


def fit_r(datasets: Any, **kwargs: Any) -> Any:
    """:func:`bulkem.fit` on datasets held in R.

    Parameters
    ----------
    datasets : rpy2 R object
        As for :func:`r_to_datasets`.
    **kwargs
        Passed to :func:`bulkem.fit`.

    Returns
    -------
    FitResult
        With ``r_ids`` set ("position", "name" or "label"): how
        :func:`result_to_r` numbers the datasets.
    """
    from ..api import fit

    data = r_to_datasets(datasets)
    result = fit(data, **kwargs)
    # how the ids map back to R, for result_to_r: list positions, names or labels
    result.r_ids = ("label" if isinstance(data, pd.DataFrame)
                    else "name" if isinstance(data, dict) else "position")
    return result
