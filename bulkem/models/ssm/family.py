"""``family="ar"`` and ``family="local_level"``: read series data, build :class:`SSMModel` s."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from ...data.units import Words, read_units
from .em import AR, LOCAL_LEVEL
from .model import FITTED, PRIORS, SSMModel

WORDS = Words("dataset", "series", "series_col")
# The largest AR order fit() takes.  Each fit's lane holds about 28 P^2
# float64 numbers (the model's matrices, the M-step's and the filter's
# scratch), in local memory on the GPU, which the device reserves for every
# resident thread: about 230 KB at P = 32.
MAX_ORDER = 32


class SSMFamily:
    """A state-space family of :func:`bulkem.fit`: AR(p) plus noise, or the local level.

    A dataset is one series (a 1-D array, NaN for a missing step) or a list
    of series that share the parameters (ragged lengths); a batch is a list
    or a dict of datasets, one 1-D array (one dataset of one series), one 2-D array
    ``(n_datasets, n_steps)`` (a dataset of one series per row), or a long
    DataFrame with columns ``dataset_col``, ``series_col`` (default
    "series"; without it, one series per dataset) and the value column, rows
    in time order within a series.

    The local level takes ``prior="fitted"`` (default: the first level ``N(level0,
    state_var)``, ``level0`` fitted) or ``prior="diffuse"`` (a flat prior: the exact
    diffuse likelihood, no ``level0``; see :mod:`.em`).

    A dataset gets status ``invalid_data`` (and a message saying why) when a
    series is shorter than the order, has infinite values or no observed
    step (with the diffuse prior: when no series has a step after its first
    observed one), when it has no variance to fit (every value 0, or for the AR
    family every series constant; for the local level every value equal),
    or when its values are out of the fits' range: a largest ``|y|`` above
    ``model.SCALE_MAX`` (1e100) or a scale (AR: largest ``|y|``; local level:
    ``max - min``) below ``model.SCALE_MIN`` (1e-100); rescale such data.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.options = ("order", "series_col") if name == AR else ("series_col", "prior")

    def read(self, datasets: Any, dataset_col: str, value_col, options: dict) -> list:
        """Any accepted input form -> ``(identifier, list of series)`` pairs."""
        unknown = sorted(set(options) - set(self.options))
        if self.name == AR and "prior" in unknown:
            raise ValueError(f"prior={options['prior']!r}: the AR family's prior is the "
                             "stationary law, nothing to choose; prior='diffuse' (a flat "
                             "prior) is for family='local_level'. Leave prior out.")
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {unknown} for family="
                            f"{self.name!r}; it takes {list(self.options)} beyond bulkem.fit's "
                            "own.")
        if self.name == AR:
            _order(options)  # before reading the data
        else:
            _prior(options)
        if not isinstance(value_col, str):
            raise ValueError(f"value_col={value_col!r}: family={self.name!r} takes one value "
                             "column.")
        if isinstance(datasets, np.ndarray) and datasets.ndim == 2:
            datasets = list(datasets)  # equal-length series: one dataset per row (views)
        elif isinstance(datasets, np.ndarray) and datasets.ndim > 2:
            raise ValueError(f"datasets is an array of shape {datasets.shape}; expected one "
                             "series (n_steps,) or one dataset per row (n_datasets, n_steps).")
        return read_units(datasets, dataset_col, options.get("series_col", "series"),
                          value_col, multi=False, words=WORDS, unit_optional=True)

    def model(self, pairs: list, n_components: int, options: dict) -> SSMModel:
        """The :class:`SSMModel` for these options (``n_components`` is not used)."""
        series_col = options.get("series_col", "series")
        if self.name == AR:
            return SSMModel(self.name, _order(options), series_col=series_col)
        return SSMModel(self.name, 1, prior=_prior(options), series_col=series_col)


def _prior(options: dict) -> str:
    prior = options.get("prior", FITTED)
    if not isinstance(prior, str) or prior not in PRIORS:
        raise ValueError(f"unknown prior {prior!r}; expected one of {list(PRIORS)}: "
                         "'fitted', the first level N(level0, state_var) with level0 fitted, "
                         "or 'diffuse', a flat prior (Durbin and Koopman's exact diffuse "
                         "likelihood, statsmodels' use_exact_diffuse=True).")
    return prior


def _order(options: dict) -> int:
    p = options.get("order")
    if p is None:
        raise TypeError("family='ar' needs order=p, the number of AR coefficients "
                        "(bulkem.fit(series, family='ar', order=3)).")
    if isinstance(p, bool) or not isinstance(p, numbers.Integral) or p < 1:
        raise ValueError(f"order must be an integer >= 1; got order = {p!r}.")
    if p > MAX_ORDER:
        raise ValueError(f"order = {p!r} is above the limit of {MAX_ORDER}: the kernels are "
                         "compiled for each order, every fit keeps about 28 order^2 numbers "
                         "per lane (GPU local memory) and order + order^2 per time step. "
                         f"Pass an order from 1 to {MAX_ORDER}.")
    return int(p)


AR_FAMILY = SSMFamily(AR)
LOCAL_LEVEL_FAMILY = SSMFamily(LOCAL_LEVEL)
