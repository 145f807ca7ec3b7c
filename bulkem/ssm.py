"""Marginal likelihoods of many series under linear-Gaussian state-space models.

:func:`kalman_loglik` packs the series (values + offsets, NaN rows missing),
checks them one by one, and runs one of three methods on the CPU cores or a
GPU:

* ``"exact"``: the sequential Kalman filter, many series at once (a series
  per CPU task or per GPU thread, as cuML's batched Kalman kernel).  Series
  of one model without missing values share the covariance recursion, which
  does not depend on the data: it runs once and each series then runs only
  the mean recursion (the same arithmetic, so the same numbers).
* ``"scan"``: the exact filter made parallel over time by an associative
  scan (Saerkkae and Garcia-Fernandez 2021), for long series; the
  log-likelihood is then summed from the filtered predictive densities.
  A batch of one model without missing rows runs the steady-state scan:
  the covariance recursion runs once until it settles (to a few units
  in the last place) and the scan carries the means alone
  (``models/ssm/scan.py``).
* ``"splash"``: the approximation of Lin, Moore and Russell, each step's
  predictive density from the last ``window`` observations only, started
  from a broad prior; every step in parallel.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from .data import as_datasets
from .models.ssm.plan import not_finite, not_positive_definite, pack_series
from .models.ssm.statespace import StateSpace, as_models
from .tuning import Tuning
from .tuning import check as check_tuning

METHODS = ("exact", "scan", "splash")
DTYPES = ("float64", "float32")
STATUSES = ("ok", "invalid_data", "failed")


def _as_series(series: Any, ny: int, series_col: str, value_col: str | Sequence[str] | None
               ) -> list[tuple[Any, np.ndarray]]:
    if isinstance(series, pd.DataFrame) and series_col not in series.columns:
        raise ValueError(
            f"DataFrame input has columns {list(series.columns)}; expected a {series_col!r} "
            "column naming the series of each row. Pass series_col= to name another.")
    pairs = as_datasets(series, ndim=1 if ny == 1 else 2, dataset_col=series_col,
                        value_col=value_col)
    out = []
    for k, v in pairs:
        v = v.reshape(-1, 1) if v.ndim == 1 else v
        if v.shape[1] != ny:
            raise ValueError(
                f"series {k!r} has {v.shape[1]} values per time step but the model observes "
                f"dim_obs = {ny}; pass arrays of shape (n_steps, {ny}), or a model with "
                f"dim_obs = {v.shape[1]}.")
        out.append((k, v))
    return out


def _check_args(method, window, dtype, report_error, splash_var):
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}.")
    if dtype not in DTYPES:
        raise ValueError(f"dtype is {dtype!r}; expected one of {list(DTYPES)}.")
    if method == "splash":
        if window is None:
            raise ValueError("method='splash' needs window=n, the number of steps each "
                             "predictive density looks at (the paper used 10 for random walks "
                             "and 11 for AR(10)).")
        if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
            raise ValueError(f"window must be an integer >= 1; got window = {window!r}.")
    elif window is not None:
        raise ValueError(f"window = {window!r} is used by method='splash' only; got "
                         f"method={method!r}. Leave window out, or use method='splash'.")
    if report_error and method != "splash":
        raise ValueError(f"report_error=True reports the error of method='splash'; got "
                         f"method={method!r}, which is exact.")
    if splash_var is not None and (isinstance(splash_var, bool)
                                   or not isinstance(splash_var, numbers.Real)
                                   or not np.isfinite(splash_var) or splash_var <= 0):
        raise ValueError(f"splash_var must be a finite number > 0; got {splash_var!r}.")


def kalman_loglik(
    series: Any,
    model: StateSpace | Sequence[StateSpace],
    method: str = "exact",
    window: int | None = None,
    backend: str = "auto",
    dtype: str = "float64",
    report_error: bool = False,
    *,
    splash_var: float | None = None,
    series_col: str = "series",
    value_col: str | Sequence[str] | None = "value",
    tuning: Tuning | None = None,
) -> pd.DataFrame:
    """Log marginal likelihood ``log p(y_1, ..., y_T)`` of every series under its model.

    Parameters
    ----------
    series : list of array-like, dict, array-like or pandas.DataFrame
        A list of arrays, a dict name -> array, one array (one series), or a
        long DataFrame with a ``series_col`` column and the value column(s).
        A series is a 1-D array of ``T`` values for a model with
        ``dim_obs = 1``, else an array of shape ``(T, dim_obs)`` (one 3-D
        array is a stack of equal-length series).  Series may have different
        lengths.  NaN marks a missing observation: its update is skipped.
        With ``dim_obs > 1`` a time step with any NaN is missing as a whole
        (its other values are ignored).
    model : StateSpace or sequence of StateSpace
        One model for every series, or one per series (same dimensions, in
        the order of ``series``).
    method : {"exact", "scan", "splash"}
        "exact": the sequential filter, series in parallel.  "scan": the
        exact filter parallel over time (for few long series).  "splash":
        the paper's approximation, each step's predictive density from the
        last ``window`` observations only.
    window : int, optional
        Steps each splash predictive density looks at (``y_{t-window+1} ..
        y_t``); required by, and only used with, ``method="splash"``.
    backend : {"auto", "cpu", "cuda"}
        "auto" uses a usable GPU when there is one, else the CPU.
    dtype : {"float64", "float32"}
        Precision of the filter's arithmetic; log-likelihood terms are summed
        in float64.  float32 loses digits in the covariance recursion: expect
        relative differences around 1e-5 or worse for long or badly scaled
        series.
    report_error : bool, default False
        With ``method="splash"``, also compute the exact log-likelihood and
        report both and their difference.
    splash_var : float, optional
        Variance of the broad prior ``N(0, splash_var * I)`` that starts each
        splash window (default ``Tuning.kalman_splash_broad_var`` = 1e6);
        pick it much larger than the state's variance.
    series_col, value_col : str
        Column names for DataFrame input (``value_col=None``: every column
        but ``series_col``).

    tuning : bulkem.tuning.Tuning, optional
        Chunk sizes, threads per block and the splash prior's default variance
        (:class:`bulkem.tuning.Tuning`; None: the defaults).

    Returns
    -------
    pandas.DataFrame
        One row per series, in input order: ``series``, ``loglik``, ``n_obs``
        (observed time steps), ``status`` (``ok``, ``invalid_data``: never
        evaluated, or ``failed``: an innovation covariance ``H P H^T + R``
        was not positive definite, or the log-likelihood is not a finite
        number: data far outside the model's scale, whose log-likelihood
        is below the range of float numbers, give ``failed`` and say so,
        never ``ok`` with ``-inf``), ``message`` (why, for the last two);
        with ``report_error=True`` also ``exact_loglik`` and ``error =
        loglik - exact_loglik``.

    Raises
    ------
    ValueError, TypeError
        For bad arguments (unknown method, a model of other dimensions than
        the data, ...); a bad series only gets its own status.

    Examples
    --------
    >>> import numpy as np, bulkem
    >>> model = bulkem.StateSpace.ar([0.6, -0.2], sigma2=1.0, obs_var=0.5)
    >>> ys = [model.simulate(200, rng=k)[:, 0] for k in range(3)]
    >>> bulkem.kalman_loglik(ys, model, backend="cpu").status.tolist()
    ['ok', 'ok', 'ok']
    """
    from .api import resolve_backend

    _check_args(method, window, dtype, report_error, splash_var)
    tuning = check_tuning(tuning)
    models, one = as_models(model)
    ny = models[0].dim_obs
    pairs = _as_series(series, ny, series_col, value_col)
    if not one and len(models) != len(pairs):
        raise ValueError(f"{len(models)} models for {len(pairs)} series; expected one model "
                         "for all series or one per series.")
    engine_name = resolve_backend(backend)
    batch, messages, n_obs = pack_series(pairs, models, one, np.dtype(dtype))
    valid = [i for i, m in enumerate(messages) if m is None]
    n = len(pairs)
    ll = np.full(n, np.nan)
    status = np.array(["ok" if m is None else "invalid_data" for m in messages], dtype=object)
    msg = np.array(["" if m is None else m for m in messages], dtype=object)
    exact_ll = np.full(n, np.nan)
    if valid:
        if engine_name == "cuda":
            from .engines.cuda import kalman as engine
        else:
            from .engines.cpu import kalman as engine
        if method == "exact":
            out = engine.exact(batch, tuning=tuning)
        elif method == "scan":
            out = engine.scan(batch, tuning=tuning)
        else:
            broad = tuning.kalman_splash_broad_var if splash_var is None else float(splash_var)
            out = engine.splash(batch, int(window), broad, tuning=tuning)
        ll[valid] = out.loglik
        for j in np.flatnonzero(out.fail >= 0):
            i = valid[j]
            ll[i] = np.nan
            status[i] = "failed"
            msg[i] = not_positive_definite(int(out.fail[j]))
            if method != "exact":
                msg[i] += " method='exact' may still evaluate it."
        for j in np.flatnonzero((out.fail < 0) & ~np.isfinite(out.loglik)):
            i = valid[j]
            status[i] = "failed"
            msg[i] = not_finite(out.loglik[j], pairs[i][1], dtype)
            ll[i] = np.nan
        if report_error:
            ref = engine.exact(batch, tuning=tuning)
            exact_ll[valid] = np.where((ref.fail >= 0) | ~np.isfinite(ref.loglik), np.nan,
                                       ref.loglik)
    ids = [k for k, _ in pairs]
    cols = {"series": ids, "loglik": ll, "n_obs": n_obs, "status": status, "message": msg}
    if report_error:
        cols["exact_loglik"] = exact_ll
        cols["error"] = ll - exact_ll
    return pd.DataFrame(cols)
