"""``family="state_space"``: a linear-Gaussian state-space model of given matrices.

The model whose log-likelihood :func:`bulkem.loglik` (``family="state_space"``) and
:func:`bulkem.kalman_loglik` evaluate: its parameters are the named blocks ``F, H, Q, R,
m0, P0`` of a :class:`~.statespace.StateSpace` (which is such a dict of blocks), a dataset
is one series, and the engines run the Kalman filter over every series of a batch with
the strategy the model names (``method``: the exact sequential filter, the time-parallel
scan or the splash approximation).  It is evaluated only: EM fits of state-space models
are the AR and local-level families (:mod:`.model`).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar

import numpy as np
import pandas as pd

from ...data import Packed, Ragged
from ...data.inputs import as_datasets
from ...tuning import DEFAULT, DEGENERATE_NONFINITE, NOT_POSITIVE_DEFINITE, Tuning
from ..base import Axis, Block, Layout, Likelihood
from .plan import SeriesBatch, series_counts
from .statespace import BLOCKS, DENSE, ModelArrays, StateSpace, transition_kind

METHODS = ("exact", "scan", "splash")


class SeriesStack(Sequence):
    """Equal-length series given as one array, read without a Python object per series.

    ``values`` has shape ``(n_series, T, dim_obs)``; item ``i`` is the pair ``(i,
    values[i])`` that a list of series would give (``pack`` packs the whole array at once).
    """

    def __init__(self, values: np.ndarray) -> None:
        self.values = values

    def __len__(self) -> int:
        return len(self.values)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return (int(i) if i >= 0 else len(self) + int(i), self.values[i])


@dataclass(frozen=True)
class LinearGaussian(Likelihood):
    """A linear-Gaussian state-space model evaluated by the Kalman filter.

    Attributes
    ----------
    dim_state, dim_obs : int
        State and observation dimensions.
    method : {"exact", "scan", "splash"}
        The engines' strategy (``bulkem.engines.select``).
    window : int, optional
        Steps of each splash predictive density (``method="splash"`` only).
    splash_var : float, optional
        Variance of the splash windows' broad prior (default
        ``tuning.kalman_splash_broad_var``).
    range_dtype : str
        The compute dtype whose range the data must fit (``pack`` checks it).
    """

    dim_state: int
    dim_obs: int = 1
    method: str = "exact"
    window: int | None = None
    splash_var: float | None = None
    range_dtype: str = "float64"
    tuning: Tuning = DEFAULT

    name: ClassVar[str] = "state_space"
    component_label: ClassVar[str] = "parameter"
    status_reasons: ClassVar[Mapping[int, str]] = MappingProxyType({
        NOT_POSITIVE_DEFINITE: "the innovation covariance H P H^T + R is not positive "
                               "definite; is R singular where the state is known exactly?",
        DEGENERATE_NONFINITE: "the log-likelihood is not a finite number: the series lies "
                              "far outside the model's scale",
    })

    @property
    def key(self) -> tuple:
        return ("state_space", self.dim_state, self.dim_obs, self.method, self.window,
                self.tuning.key())

    @property
    def n_components(self) -> int:
        return self.dim_state

    @property
    def params_layout(self) -> Layout:
        """``F, H, Q, R, m0, P0``, each a block of its own, row-major."""
        s, o = Axis("state", self.dim_state, 0), Axis("obs", self.dim_obs, 0)
        shapes = {"F": (s, s), "H": (o, s), "Q": (s, s), "R": (o, o), "m0": (s,),
                  "P0": (s, s)}
        return Layout([(Block(name, shapes[name]),) for name in BLOCKS])

    @property
    def broad_var(self) -> float:
        """The splash windows' prior variance."""
        return (self.tuning.kalman_splash_broad_var if self.splash_var is None
                else float(self.splash_var))

    # --- parameters -----------------------------------------------------------------------

    def rows(self, models: Sequence[StateSpace]) -> np.ndarray:
        """Models of this model's dimensions as parameter rows, shape (n_models, n_params)."""
        return np.concatenate([np.stack([getattr(m, b).reshape(-1) for m in models])
                               for b in BLOCKS], axis=1)

    def user_starts(self, init: Mapping) -> np.ndarray:
        """Parameter sets given as blocks (a :class:`StateSpace`, or a dict of ``F, H, Q, R``
        and optionally ``m0, P0``, each with an optional leading axis of sets), checked as
        ``StateSpace`` checks them -> rows of shape (k, n_params)."""
        if isinstance(init, StateSpace) and init.is_diffuse:
            raise ValueError("params is a StateSpace with diffuse states; bulkem.loglik("
                             "family='state_space') evaluates proper priors (m0, P0) only. Use "
                             "bulkem.kalman_loglik(series, model) for the exact diffuse "
                             "log-likelihood.")
        if isinstance(init, StateSpace):
            models = [init]
        else:
            if not isinstance(init, Mapping):
                raise TypeError(f"params is a {type(init).__name__}; expected a StateSpace "
                                "or a dict with keys F, H, Q, R (and m0, P0).")
            unknown = sorted(set(init) - set(BLOCKS))
            if unknown or not {"F", "H", "Q", "R"} <= set(init):
                raise ValueError(f"params has keys {list(init)}; expected F, H, Q, R and "
                                 "optionally m0, P0 (a StateSpace's blocks).")
            F = np.asarray(init["F"], dtype=np.float64)
            if F.ndim == 3:  # a leading axis of parameter sets
                models = [StateSpace(*[None if init.get(b) is None else np.asarray(init[b])[k]
                                       for b in BLOCKS]) for k in range(len(F))]
            else:
                models = [StateSpace(*[init.get(b) for b in BLOCKS])]
        got = {(m.dim_state, m.dim_obs) for m in models}
        if got != {(self.dim_state, self.dim_obs)}:
            raise ValueError(f"params has (dim_state, dim_obs) {sorted(got)}; the data have "
                             f"dim_obs = {self.dim_obs} and the model dim_state = "
                             f"{self.dim_state}.")
        return self.rows(models)

    def arrays(self, rows: np.ndarray, dtype) -> ModelArrays:
        """Parameter rows as the engines' :class:`ModelArrays` in ``dtype``; ``kind`` is the
        structure of ``F`` common to every row (``DENSE`` if they differ)."""
        parts = self.params_layout.split(np.asarray(rows, dtype=np.float64))
        n = len(rows)
        flat = [np.ascontiguousarray(parts[b].reshape(n, -1), dtype=dtype) for b in BLOCKS]
        F = parts["F"]
        kind = transition_kind(F[0])
        if n > 1 and not (F == F[0]).all():
            kinds = {transition_kind(f) for f in F}
            kind = kinds.pop() if len(kinds) == 1 else DENSE
        return ModelArrays(*flat, self.dim_state, self.dim_obs, kind)

    # --- data -----------------------------------------------------------------------------

    def pack(self, pairs: list[tuple[Any, np.ndarray]]) -> Packed:
        """Check every series (``(identifier, array of shape (T, dim_obs))`` pairs) and pack
        the valid ones, one series per dataset; ``n_obs`` counts the observed steps.

        A series is invalid with no step, an infinite value, no observed step (NaN marks a
        missing one), or a value beyond ``range_dtype``'s range.  One pass over the values
        (not a few NumPy calls per series: 100,000 series).
        """
        ny = self.dim_obs
        if isinstance(pairs, SeriesStack):  # one array: a view, no copy per series
            n, T = pairs.values.shape[:2]
            lengths = np.full(n, T, dtype=np.int64)
            values = np.ascontiguousarray(pairs.values, dtype=np.float64).reshape(n * T, ny)
            ids = range(n)  # (a Sequence: no Python object per series)
        else:
            from ...data.gather import gather

            arrays = list(map(operator.itemgetter(1), pairs))
            got = gather(arrays, 2, ny) if len(arrays) > 1 else None  # (on every core)
            if got is not None:
                values, lengths = got
            else:  # (a few series, or ones gather cannot copy as they are)
                lengths = np.array([len(v) for v in arrays], dtype=np.int64)
                if len(arrays) > 1:  # (into a ready array: 20x faster for 50,000 series)
                    values = np.empty((int(lengths.sum()), ny))
                    np.concatenate(arrays, out=values)
                else:
                    values = np.asarray(arrays[0], dtype=np.float64).reshape(-1, ny)
            ids = list(map(operator.itemgetter(0), pairs))
        offsets = np.zeros(len(lengths) + 1, dtype=np.int64)
        np.cumsum(lengths, out=offsets[1:])
        n_missing, n_inf = series_counts(values, offsets)
        messages: list = [None] * len(lengths)
        bad = (lengths == 0) | (n_inf > 0) | (n_missing == lengths)
        for i in np.flatnonzero(bad):
            n, n_i = int(lengths[i]), int(n_inf[i])
            if n == 0:
                messages[i] = "too short: 0 time steps (at least 1 needed)"
            elif n_i:
                messages[i] = (f"{n_i} of {n * ny} values are infinite; expected finite "
                               "numbers, or NaN for a missing observation")
            else:
                messages[i] = f"all {n} time steps are missing (NaN)"
        dtype = np.dtype(self.range_dtype)
        if dtype != np.float64:  # finite values that the compute dtype cannot hold
            lim = float(np.finfo(dtype).max)
            with np.errstate(invalid="ignore"):
                over = np.abs(values).max(axis=1) > lim
            if over.any():
                counts = np.bincount(np.repeat(np.arange(len(lengths)), lengths)[over],
                                     minlength=len(lengths))
                for i in np.flatnonzero(counts):
                    if messages[i] is None:
                        bad[i] = True
                        messages[i] = (f"{counts[i]} of {lengths[i]} time steps hold values "
                                       f"beyond {dtype.name}'s range (|y| > {lim:.3g}); use "
                                       "dtype='float64', or rescale the series and the model")
        ok = ~bad
        valid = np.flatnonzero(ok).astype(np.int64)
        if len(valid) < len(lengths):
            values = values[np.repeat(ok, lengths)]
        sub = np.zeros(len(valid) + 1, dtype=np.int64)
        np.cumsum(lengths[valid], out=sub[1:])
        return Packed(ids, lengths - n_missing, messages, valid, Ragged.flat(values, sub))

    def batch(self, data: Ragged, fit_ds: np.ndarray, params: np.ndarray, dtype,
              n_obs: np.ndarray | None = None) -> SeriesBatch:
        """The engines' batch of the fits ``(fit_ds[j], params[j])``: the series of each
        fit's dataset under its parameters, in ``dtype``.  Fits that all have one parameter
        set share one model (and may share its covariance recursion).  ``n_obs``, the
        observed steps of each dataset (``Packed.n_obs``), saves a pass over the values."""
        if len(fit_ds) != data.n_datasets or not np.array_equal(
                fit_ds, np.arange(data.n_datasets)):
            data = data.take(fit_ds)
            n_obs = None if n_obs is None else n_obs[fit_ds]
        params = np.asarray(params, dtype=np.float64)
        one = len(params) <= 1 or bool((params == params[0]).all())
        md = self.arrays(params[:1] if one else params, dtype)
        model_idx = (np.zeros(len(fit_ds), dtype=np.int64) if one
                     else np.arange(len(fit_ds), dtype=np.int64))
        y = np.ascontiguousarray(data.values, dtype=dtype).reshape(-1)
        if n_obs is None:
            has_missing = series_counts(data.values.reshape(len(data.values), -1),
                                        data.units)[0] > 0
        else:
            has_missing = np.asarray(n_obs) < np.diff(data.units)
        return SeriesBatch(y, data.units, model_idx, md, has_missing)


def pack_series(pairs: list[tuple[Any, np.ndarray]], models: list[StateSpace], one: bool,
                dtype) -> tuple[SeriesBatch, list, np.ndarray]:
    """Check and pack series for the Kalman engines directly (tests, benchmarks): the
    batch of the valid ones under ``models`` (one for all if ``one``, else one per series),
    why each series is invalid (None: valid), and the observed steps of every series."""
    m = LinearGaussian(models[0].dim_state, models[0].dim_obs,
                       range_dtype=np.dtype(dtype).name)
    packed = m.pack(pairs)
    rows = m.rows(models)
    params = rows[np.zeros(len(packed.valid), np.int64) if one else packed.valid]
    batch = m.batch(packed.data, np.arange(len(packed.valid)), params, dtype,
                    packed.n_obs[packed.valid])
    return batch, packed.messages, packed.n_obs


def outcome(loglik: np.ndarray, fail: np.ndarray, done: int) -> np.ndarray:
    """Status codes of evaluated series: ``done`` (finite log-likelihood),
    ``NOT_POSITIVE_DEFINITE`` (the filter stopped at step ``fail >= 0``) or
    ``DEGENERATE_NONFINITE``."""
    status = np.full(len(loglik), done, dtype=np.int32)
    status[~np.isfinite(loglik)] = DEGENERATE_NONFINITE
    status[fail >= 0] = NOT_POSITIVE_DEFINITE
    return status


class StateSpaceFamily:
    """``family="state_space"`` of :func:`bulkem.loglik`: read series, build the model.

    A dataset is one series: a 1-D array of ``T`` values (``dim_obs = 1``) or an array of
    shape ``(T, dim_obs)``; NaN marks a missing observation.  Equal-length series may come
    as one array, read without a Python object per series: ``(n_series, T)`` for
    ``dim_obs = 1`` (a ``(T, 1)`` array is one series), ``(n_series, T, dim_obs)``.
    ``n_components`` is the state's dimension (``F``'s).  Options: ``method`` ("exact",
    "scan", "splash"), ``window`` and ``splash_var`` (splash), ``dim_obs`` (read a 2-D array
    as ``(n_series, T)`` with ``dim_obs=1``).
    """

    name = "state_space"
    options = ("method", "window", "splash_var", "dim_obs")

    def read(self, series: Any, dataset_col: str, value_col: str | Sequence[str] | None,
             options: dict) -> Sequence[tuple[Any, np.ndarray]]:
        """Any accepted input form -> ``(identifier, array of shape (T, dim_obs))`` pairs
        (a :class:`SeriesStack` for one array of equal-length series)."""
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {unknown} for family="
                            f"'state_space'; it takes {list(self.options)}.")
        check_method(options.get("method", "exact"), options.get("window"),
                     options.get("splash_var"))
        ny = options.get("dim_obs")
        if isinstance(series, pd.DataFrame) and dataset_col not in series.columns:
            raise ValueError(
                f"DataFrame input has columns {list(series.columns)}; expected a "
                f"{dataset_col!r} column naming the series of each row. Pass series_col= "
                "(dataset_col= for bulkem.loglik) to name another.")
        if (ny is None and isinstance(series, np.ndarray) and series.ndim == 2
                and series.shape[1] != 1):
            raise ValueError(
                f"series is a 2-D array of shape {series.shape}: {series.shape[0]} series of "
                f"{series.shape[1]} steps, or one series of {series.shape[1]} values per step? "
                "Pass dim_obs=1 for the former, a 3-D array (1, n_steps, dim_obs) for the "
                "latter.")
        if isinstance(series, np.ndarray) and series.dtype.kind in "biuf" and (
                series.ndim == 3 or (series.ndim == 2 and series.shape[1] != 1 and ny == 1)):
            stack = series if series.ndim == 3 else series[:, :, None]
            if ny is not None and stack.shape[2] != ny:
                raise ValueError(
                    f"series is an array of shape {series.shape}: {stack.shape[2]} values per "
                    f"time step, but the model observes dim_obs = {ny}; pass an array of "
                    f"shape (n_series, n_steps, {ny}).")
            if not stack.shape[0]:
                raise ValueError("series is an array with 0 series; expected at least one.")
            return SeriesStack(stack)
        pairs = as_datasets(series, ndim=1 if ny == 1 else 2, dataset_col=dataset_col,
                            value_col=value_col)
        out = []
        for k, v in pairs:
            v = v.reshape(-1, 1) if v.ndim == 1 else v
            if ny is not None and v.shape[1] != ny:
                raise ValueError(
                    f"series {k!r} has {v.shape[1]} values per time step but the model "
                    f"observes dim_obs = {ny}; pass arrays of shape (n_steps, {ny}), or a "
                    f"model with dim_obs = {v.shape[1]}.")
            out.append((k, v))
        return out

    def model(self, pairs: Sequence, n_components: int, options: dict) -> LinearGaussian:
        """The :class:`LinearGaussian` model of ``n_components`` states for these series."""
        dim_obs = (pairs.values.shape[2] if isinstance(pairs, SeriesStack)
                   else pairs[0][1].shape[1])
        return LinearGaussian(int(n_components), int(dim_obs),
                              options.get("method", "exact"), options.get("window"),
                              options.get("splash_var"))


def check_method(method: Any, window: Any, splash_var: Any) -> None:
    """Raise for an unknown method, or a window or splash prior that does not fit it."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; expected one of {list(METHODS)}.")
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
    if splash_var is not None and (isinstance(splash_var, bool)
                                   or not isinstance(splash_var, numbers.Real)
                                   or not np.isfinite(splash_var) or splash_var <= 0):
        raise ValueError(f"splash_var must be a finite number > 0; got {splash_var!r}.")


STATE_SPACE_FAMILY = StateSpaceFamily()
