"""Transient Markovian arrival processes with Erlang branches (Bražėnas, Horváth and Telek).

A trace is a set of runs, each a short sequence of inter-arrival times; a
TMAP of ``R`` Erlang branches is a hidden chain over a run's values that may
end after any of them.  It is the hidden-Markov chain with a sub-stochastic
transition matrix and an Erlang emission, on the same engines:

* :mod:`.erlang`: the Erlang emission (orders fixed per branch);
* :mod:`.model`: the TMAP as a model of the EM driver (data, starts, tables);
* :mod:`.draws`: the paper's random starts;
* :mod:`.process`: moments (eqs 1-7) and sampling of a fitted TMAP.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Set
from typing import Any

import numpy as np

from ...data.units import UnitArrays, is_unit_list, read_units
from ..hmm import MAX_STATES as MAX_BRANCHES
from .model import TMAPModel
from .process import empirical_moments, moments, simulate

OPTIONS = ("orders", "run_col", "drop_bad_runs")
PAPER_ORDERS = (1, 2, 3)
# The largest Erlang order: a branch's log-density has terms of size ~ r log(rate x), so an
# order r costs about log10(r) of float64's 16 digits, which the EM's likelihood changes need
# (orders of 2^40 left no digit: every start fell by more than rounding).
MAX_ORDER = 10_000
WORDS = TMAPModel.words


class TMAPFamily:
    """``family="tmap"``: reads traces of runs and builds :class:`TMAPModel` s."""

    name = "tmap"
    # n_components=None (fit's default) means "as many branches as orders".
    default_n_components = None

    def read(self, datasets: Any, dataset_col: str, value_col, options: dict) -> list:
        """Any accepted input form -> ``(identifier, runs)`` pairs.

        A trace is a list of runs, each a 1-D array of inter-arrival times.
        A batch is a list or a dict of traces, or a long DataFrame with
        columns ``trace`` (or ``dataset_col``), ``run_col`` (default "run")
        and ``value_col``, rows in order within a run.  A list of runs (1-D
        arrays or lists of numbers) is one trace: many traces are a list of
        lists of runs, or a dict.
        """
        unknown = sorted(set(options) - set(OPTIONS))
        if unknown:
            raise TypeError(f"unexpected keyword argument(s) {unknown} for family='tmap'; "
                            f"it takes {list(OPTIONS)} beyond bulkem.fit's own.")
        if (dataset_col == "dataset" and hasattr(datasets, "columns")
                and "dataset" not in datasets.columns and "trace" in datasets.columns):
            dataset_col = "trace"
        if (isinstance(datasets, (list, tuple)) and len(datasets)
                and not any(is_unit_list(t) or isinstance(t, (Mapping, UnitArrays))
                            for t in datasets)
                and not all(np.isscalar(v) for v in datasets)):
            datasets = [datasets]  # a list of runs: one trace (many traces: a list of lists)
        if not isinstance(value_col, str):
            raise ValueError(f"value_col={value_col!r}: family='tmap' takes one value column "
                             "(the inter-arrival times).")
        return read_units(datasets, dataset_col, options.get("run_col", "run"), value_col,
                          multi=False, words=WORDS, packed=True)

    def model(self, pairs: list, n_components: int | None, options: dict) -> TMAPModel:
        """The :class:`TMAPModel` for these options.

        ``orders`` (default: the paper's ``(1, 2, 3)``, or ``(1, ..., R)`` for
        ``n_components=R``) fixes the branches; ``n_components``, if given,
        must equal ``len(orders)``.
        """
        orders = options.get("orders")
        if orders is None:
            orders = PAPER_ORDERS if n_components is None else tuple(range(1, n_components + 1))
        if (isinstance(orders, (str, bytes, Mapping, Set)) or not hasattr(orders, "__len__")
                or not len(orders)):
            raise ValueError(f"orders={orders!r}: expected a sequence (tuple, list or array) of "
                             "integers >= 1, one per Erlang branch, e.g. orders=(1, 2, 3).")
        bad = [r for r in orders if isinstance(r, (bool, np.bool_))
               or not isinstance(r, numbers.Integral) or not 1 <= r <= MAX_ORDER]
        if bad:
            raise ValueError(f"orders={tuple(orders)!r}: every order must be an integer from 1 "
                             f"to {MAX_ORDER} (found {bad[0]!r}).")
        if len(orders) > MAX_BRANCHES:
            raise ValueError(f"orders has {len(orders)} branches; at most {MAX_BRANCHES} "
                             "(a fit holds R x R switching probabilities).")
        if n_components is not None and n_components != len(orders):
            raise ValueError(f"n_components={n_components} but orders={tuple(orders)!r} has "
                             f"{len(orders)} branches; leave n_components out or make them "
                             "agree.")
        drop = options.get("drop_bad_runs", False)
        if not isinstance(drop, bool):
            raise TypeError(f"drop_bad_runs must be True or False; got {drop!r}.")
        return TMAPModel.of(tuple(orders), drop, options.get("run_col", "run"))


TMAP = TMAPFamily()

__all__ = ["TMAP", "TMAPFamily", "TMAPModel", "empirical_moments", "moments", "simulate"]
