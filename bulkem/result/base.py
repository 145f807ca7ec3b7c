"""FitResult: the tidy tables of a batch fit, whatever the model.

The tables every model shares (``summary``, ``starts``, ``start_values``,
``components``) are built here from the model's hooks (``param_columns``,
``canonical``, ``n_free``, ``extra_tables``); what can be computed from a
fit (densities, decoding) lives in each model's result class.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

import numpy as np
import pandas as pd

from ..tuning import (
    BEST_TIE_RTOL,
    CONVERGED,
    DEGENERATE_COLLAPSE,
    DEGENERATE_DECREASE,
    DEGENERATE_NONFINITE,
    DEGENERATE_PARAM,
    MAX_ITER,
)

STATUS_NAMES = {
    CONVERGED: "converged",
    MAX_ITER: "max_iter",
    DEGENERATE_NONFINITE: "degenerate",
    DEGENERATE_PARAM: "degenerate",
    DEGENERATE_COLLAPSE: "degenerate",
    DEGENERATE_DECREASE: "degenerate",
}
# Why a start is degenerate, by status code; a model's ``status_reasons`` replaces the
# entries its M-step means otherwise (an HMM's state, a TMAP's branch, an AR variance).
STATUS_MESSAGES = {
    CONVERGED: "",
    MAX_ITER: "",
    DEGENERATE_NONFINITE: "log-likelihood became NaN or infinite",
    DEGENERATE_PARAM: "a parameter became non-positive or non-finite",
    DEGENERATE_COLLAPSE: "a component collapsed (no mass left, or zero spread)",
    DEGENERATE_DECREASE: "log-likelihood fell by more than rounding",
}


def status_messages(model) -> dict:
    """The reason text of each status code for this model's fits."""
    return {**STATUS_MESSAGES, **model.status_reasons}


def _lookup(table: dict, codes: np.ndarray) -> np.ndarray:
    names = np.empty(max(table) + 1, dtype=object)
    for k, v in table.items():
        names[k] = v
    return names[codes]


def best_starts(loglik: np.ndarray) -> np.ndarray:
    """Index of each row's best start: the first within ``BEST_TIE_RTOL`` of the largest.

    ``loglik`` is (datasets, starts), ``-inf`` for failed starts; a row with
    none finite gets 0 (the caller marks it failed).
    """
    top = loglik.max(axis=1, keepdims=True)  # -inf - inf is -inf: every start of such a row
    return np.argmax(loglik >= top - BEST_TIE_RTOL * np.abs(top), axis=1)


def _weight_sums(model, packed) -> np.ndarray | None:
    """Each input dataset's sum of weights (its model's ``weight_sums``; NaN for an invalid
    dataset), or None for an unweighted model."""
    if not getattr(model, "weighted", False):
        return None
    out = np.full(len(packed.ids), np.nan)
    out[packed.valid] = model.weight_sums(packed)
    return out


def _frame(columns: dict) -> pd.DataFrame:
    """A table over freshly built arrays, kept as they are.

    ``copy=False`` also skips pandas' consolidation of same-dtype columns
    into 2-D blocks, a copy of every column (most of the tables' time for a
    batch of 100,000 fits); pandas consolidates later if an operation needs it.
    """
    return pd.DataFrame(columns, copy=False)


def _coder(table: dict) -> tuple[pd.CategoricalDtype, np.ndarray]:
    """The categorical type of a table's labels, and each code's position in it."""
    cats = list(dict.fromkeys(table.values()))
    index = np.array([cats.index(table[k]) if k in table else -1 for k in range(max(table) + 1)],
                     dtype=np.int8)
    return pd.CategoricalDtype(cats), index


_STATUS_CODER = _coder(STATUS_NAMES)


def _categorical(coder: tuple[pd.CategoricalDtype, np.ndarray], codes: np.ndarray
                 ) -> pd.Categorical:
    """Per-fit labels as a categorical: fast to build for millions of fits.

    ``codes`` come from the engines, so each is a key of the coder's table.
    """
    dtype, index = coder
    return pd.Categorical.from_codes(index.take(codes), dtype=dtype, validate=False)


_Method = TypeVar("_Method", bound=Callable[..., Any])


def entropy_sum(p: np.ndarray, axis: int | None = None) -> np.ndarray:
    """``-sum p log p`` of probabilities (``0 log 0 = 0``), over ``axis`` (all: None)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return -np.sum(np.where(p > 0, p * np.log(p), 0.0), axis=axis)


def seeded_draws(draw: Callable[[Any, np.random.Generator], list], items: Iterable,
                 seed: int) -> list:
    """``draw(item, rng)`` for the ``j``-th item with a generator seeded by ``(seed, j)``,
    the items on as many threads as numba's (``numba.set_num_threads``; NumPy's samplers
    release the GIL), their lists joined in order: what :meth:`FitResult.replicates`
    returns, the same whatever the number of threads."""
    import numba

    def one(job: tuple[int, Any]) -> list:
        j, item = job
        return draw(item, np.random.default_rng(np.random.SeedSequence([seed, j])))

    jobs = list(enumerate(items))
    with ThreadPoolExecutor(max(1, min(len(jobs), numba.get_num_threads()))) as pool:
        return [x for part in pool.map(one, jobs) for x in part]


def per_dataset(method: _Method) -> _Method:
    """A result method of one dataset: on a grid fit, run by the result of the size chosen
    for that dataset (``FitResult.for_size``)."""

    @functools.wraps(method)
    def run(self: FitResult, dataset: Any, *args: Any, **kwargs: Any) -> Any:
        return method(self._for(dataset), dataset, *args, **kwargs)

    return run  # type: ignore[return-value]


@dataclass
class FitResult:
    """Result of :func:`bulkem.fit`.

    Attributes
    ----------
    summary : pandas.DataFrame
        One row per dataset, in input order: ``dataset, n_obs, status, loglik,
        n_iter, converged, best_start, aic, bic, message``.  ``best_start`` is
        the start of the largest log-likelihood (the first, where several are
        within ``BEST_TIE_RTOL`` of it: rounding never chooses).  ``status`` is
        ``converged`` or ``max_iter`` (of the best start), ``failed`` (every
        start degenerate) or ``invalid_data`` (never fitted; ``message`` says
        why).
    components : pandas.DataFrame
        One row per (dataset, component) of the best start, components
        numbered from 1 in increasing order of their location (``mu`` for the
        inverse-Gaussian family, ``mean_1`` for the Gaussian family):
        ``dataset, component, weight`` and the family's parameters,
        ``mu, lambda`` (inverse-Gaussian) or ``mean_1, ..., mean_D, var_1,
        ..., var_D`` (Gaussian with diagonal covariance: one column per
        dimension, the means first, then the variances, so the table stays
        one row per component whatever ``D``).
    starts : pandas.DataFrame
        One row per (dataset, start): ``dataset, start, status, loglik,
        n_iter, message``; ``status`` is ``converged``, ``max_iter`` or
        ``degenerate`` (``message`` says how).  The log-likelihood is that of
        the start's final parameters.
    start_values : pandas.DataFrame
        The starting values, one row per (dataset, start, component), in the
        components' draw order: ``dataset, start, component`` and the same
        parameter columns as ``components``.  Join it to ``starts`` on
        ``(dataset, start)``.
    backend : str
        The engine that ran: "cpu" or "cuda".
    seed : int
        The seed of the random starts (drawn when none was given).
    family : str
    n_components : int
    dtype : str
    n_dims : int
        Dimensions ``D`` of an observation (1 for the inverse-Gaussian family).
    elapsed : float
        Wall time of the whole call, seconds.
    """

    summary: pd.DataFrame
    components: pd.DataFrame
    starts: pd.DataFrame
    start_values: pd.DataFrame
    backend: str
    seed: int
    family: str
    n_components: int
    dtype: str
    elapsed: float
    n_dims: int = 1
    tables: dict = field(default_factory=dict)
    _model: Any = field(repr=False, default=None)
    _best: dict = field(repr=False, default_factory=dict)
    _packed: Any = field(repr=False, default=None)  # the fitted values, for plot()
    # A grid fit (bulkem.result.selection): the result of every size, the size chosen for
    # each dataset (None: none fitted) and the size's name.
    _sizes: dict = field(repr=False, default_factory=dict)
    _chosen: dict = field(repr=False, default_factory=dict)
    _size_label: str | None = field(repr=False, default=None)
    # Whether ``entropy`` is defined (posterior probabilities of components or states),
    # and so the ICL of a grid fit; whether ``replicates`` is (fit(bootstrap=B)).
    has_icl: ClassVar[bool] = False
    can_resample: ClassVar[bool] = False

    @staticmethod
    def before_fits(model, packed, job, n_starts) -> dict:
        """The parts of the tables that need the job's starts only, not its fits.

        The ``start_values`` table, the ``starts`` table's key columns and
        the dataset identifiers; the GPU engine builds them while the fits run.
        """
        M = model.n_components
        n_valid = len(packed.valid)
        ids = pd.Series(packed.ids)
        vids = ids.iloc[packed.valid].to_numpy()
        start_values = _frame({
            "dataset": np.repeat(vids, n_starts * M),
            "start": np.tile(np.repeat(np.arange(n_starts), M), n_valid),
            model.component_label: np.tile(np.arange(1, M + 1), n_valid * n_starts),
            **model.param_columns(job.init),
        })
        dataset, start = np.repeat(vids, n_starts), np.tile(np.arange(n_starts), n_valid)
        return {"start_values": start_values, "dataset": dataset, "start": start, "ids": ids,
                "vids": vids, "tables": model.start_tables(dataset, start, job.init)}

    @classmethod
    def assemble(cls, model, packed, job, n_starts, seed, backend, dtype, elapsed,
                 early: dict | None = None) -> FitResult:
        """Build the tables from a finished :class:`bulkem.api.Job`.

        ``early``, if given, is :meth:`before_fits`, built earlier (the GPU
        engine builds it while the fits run).
        """
        if early is None:
            early = cls.before_fits(model, packed, job, n_starts)
        M = model.n_components
        n_all, n_valid = len(packed.ids), len(packed.valid)
        ids, vids = early["ids"], early["vids"]
        code = job.status.reshape(n_valid, n_starts)
        ll = job.loglik.reshape(n_valid, n_starts)
        ok = code <= MAX_ITER
        best = best_starts(np.where(ok, ll, -np.inf))
        has = ok.any(axis=1)
        rows = np.arange(n_valid)
        best_ll = np.where(has, ll[rows, best], np.nan)
        best_code = code[rows, best]
        n_obs = packed.n_obs
        sum_w = _weight_sums(model, packed)  # (weighted fits: BIC's number of observations)
        n_bic = n_obs if sum_w is None else sum_w

        status = np.full(n_all, "invalid_data", dtype=object)
        status[packed.valid] = np.where(has, _lookup(STATUS_NAMES, best_code), "failed")
        message = np.array([m or "" for m in packed.messages], dtype=object)
        n_bad = (~ok).sum(axis=1)
        reasons = status_messages(model)
        first_why = _lookup(reasons, code[:, 0])
        message[packed.valid] = [
            (f"all {n_starts} starts degenerate (the first: {w})" if not h
             else f"{b} of {n_starts} starts degenerate" if b else "")
            for h, b, w in zip(has, n_bad, first_why, strict=True)
        ]
        loglik = np.full(n_all, np.nan)
        loglik[packed.valid] = best_ll
        n_iter = np.full(n_all, -1, dtype=np.int64)
        n_iter[packed.valid] = np.where(has, job.n_iter.reshape(n_valid, n_starts)[rows, best], -1)
        best_start = np.full(n_all, -1, dtype=np.int64)
        best_start[packed.valid] = np.where(has, best, -1)
        k = model.n_free
        summary = _frame({
            "dataset": ids,
            "n_obs": n_obs,
            **({} if sum_w is None else {"sum_weights": sum_w}),
            "status": status,
            "loglik": loglik,
            "n_iter": n_iter,
            "converged": status == "converged",
            "best_start": best_start,
            "aic": -2 * loglik + 2 * k,
            "bic": -2 * loglik + k * np.log(np.clip(n_bic, 1, None)),
            "message": message,
        })

        fitted = rows[has]
        NP = job.params.shape[1]
        bp = job.params.reshape(n_valid, n_starts, NP)[fitted, best[fitted]]
        if job.reorder:
            bp = model.canonical(bp)
        components = _frame({
            "dataset": np.repeat(vids[fitted], M),
            model.component_label: np.tile(np.arange(1, M + 1), len(fitted)),
            **model.param_columns(bp),
        })
        extra = {**model.extra_tables(vids[fitted], bp), **early["tables"]}

        scode = job.status
        starts = _frame({
            "dataset": early["dataset"],
            "start": early["start"],
            "status": _categorical(_STATUS_CODER, scode),
            "loglik": job.loglik,
            "n_iter": job.n_iter.astype(np.int64),
            "message": _categorical(_coder(reasons), scode),
        })
        init_best = job.init.reshape(n_valid, n_starts, NP)[fitted, best[fitted]]
        best_map = {vids[r]: (bp[j], init_best[j]) for j, r in enumerate(fitted)}
        return cls(summary, components, starts, early["start_values"], backend, seed, model.name,
                   M, dtype, elapsed, n_dims=model.n_dims, tables=extra, _model=model,
                   _best=best_map, _packed=packed)

    @property
    def selection(self) -> pd.DataFrame:
        """A grid fit's model choice: one row per (dataset, size), in input order.

        Columns ``dataset``, the size (``n_components``, ``order`` or ``orders``),
        ``status``, ``loglik``, ``n_params``, ``aic``, ``bic``, ``icl`` (mixtures and
        HMMs: computed here on first use, a pass over every value at every size, more than
        the GPU's fits of a small model take: 2.7 s of one core for 1,000 datasets x 2,000
        values and K = 1..6; at once with ``criterion="icl"``),
        ``n_iter`` of the best start, ``n_best`` (usable starts within
        ``bulkem.tuning.REACHED_RTOL``, relative, of the best start's log-likelihood: how
        often the random starts found it) and ``chosen`` (the size of the smallest
        criterion among the fitted sizes; the first on a tie).
        """
        if "selection" not in self.tables:
            raise ValueError("no selection table: fit a grid of sizes to get one "
                             "(n_components=[1, 2, 3], order=[1, 2] or orders=[...]).")
        table = self.tables["selection"]
        first = self._sizes[next(iter(self._sizes))]
        if "icl" not in table and first.has_icl:  # on first use: a pass over every value
            label = self._size_label
            icl = np.empty(len(table))
            for size, res in self._sizes.items():  # a size's rows, in dataset order
                rows = np.flatnonzero((table[label] == size).to_numpy())
                icl[rows] = table["bic"].to_numpy()[rows] + 2 * res.entropy()
            table.insert(table.columns.get_loc("bic") + 1, "icl", icl)
        return table

    @property
    def trace(self) -> pd.DataFrame:
        """Every start's log-likelihood by iteration (``fit(trace=True)``): one row per
        (dataset, start, iteration), ``iteration`` the M-steps done (0: at the start) and
        ``loglik``; a start's last row is its ``starts.loglik``."""
        if "trace" not in self.tables:
            raise ValueError("no trace table: fit with trace=True to keep one.")
        return self.tables["trace"]

    @property
    def intervals(self) -> pd.DataFrame:
        """Parametric-bootstrap percentile intervals (``fit(bootstrap=B)``): one row per
        (dataset, parameter): ``parameter`` (``weight_1``, ``mu_2``, ``mean_1_2``...),
        ``estimate``, ``lower``, ``upper`` and ``n_boot`` (refits with a usable start)."""
        if "intervals" not in self.tables:
            raise ValueError("no intervals table: fit with bootstrap=B (e.g. 200) to get one.")
        return self.tables["intervals"]

    def for_size(self, size: Any) -> FitResult:
        """The fits of every dataset at one size of a grid fit (its own tables and methods).

        Parameters
        ----------
        size : int or tuple
            An entry of the grid: ``n_components``, AR ``order`` or TMAP ``orders``.
        """
        if not self._sizes:
            if size == self.n_components:
                return self
            raise ValueError(f"this fit has one size, n_components = {self.n_components}; "
                             f"got size {size!r}.")
        key = tuple(size) if self._size_label == "orders" else size
        if key not in self._sizes:
            raise ValueError(f"{self._size_label} = {size!r} is not in the grid; fitted "
                             f"sizes: {list(self._sizes)}.")
        return self._sizes[key]

    def _for(self, dataset: Any) -> FitResult:
        """The result whose fit of ``dataset`` the tables show: the chosen size's in a grid."""
        size = self._chosen.get(dataset)
        return self if size is None else self._sizes[size]

    def entropy(self) -> np.ndarray:
        """Per dataset of ``summary``, the entropy of the posterior probabilities of the best
        fit's components (or states) over the dataset's observations: ICL = BIC + 2 x
        entropy.  NaN where a dataset has no fit."""
        raise NotImplementedError(f"no posterior probabilities for the {self.family!r} family")

    def replicates(self, B: int, seed: int) -> list:
        """``B`` datasets drawn from each fitted dataset's best fit, the same size as it (the
        same number of values, sequences of the same lengths, as many runs), in the form the
        family reads: replicate ``b`` of the ``j``-th dataset of ``_best`` is entry ``j B +
        b``; dataset ``j``'s draws are seeded by ``(seed, j)``."""
        raise NotImplementedError(f"no sampler for the {self.family!r} family")

    def _valid_index(self) -> dict:
        """Each fitted dataset's position among the packed (valid) datasets."""
        packed = self._packed
        pos = {v: k for k, v in enumerate(packed.ids)}
        where = {p: k for k, p in enumerate(packed.valid)}
        return {v: where[pos[v]] for v in self._best}

    def _get(self, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._best[dataset]
        except KeyError:
            row = self.summary[self.summary["dataset"] == dataset]
            why = f"its status is {row['status'].iloc[0]!r}" if len(row) else "no such dataset"
            raise KeyError(f"dataset {dataset!r} has no fit: {why}.") from None

    def _as_dict(self, params: np.ndarray) -> dict:
        return self._model.as_dict(params)

    @per_dataset
    def params(self, dataset: Any) -> dict:
        """Fitted parameters of a dataset's best start, components in table order.

        Returns
        -------
        dict of str -> ndarray of shape (n_components, ...)
            In the form ``fit(init=...)`` takes: ``weight, mu, lambda`` of
            shape (M,) for the inverse-Gaussian family; ``weight`` (M,),
            ``mean`` and ``var`` (M, D) for the Gaussian family.
        """
        return self._as_dict(self._get(dataset)[0])

    @per_dataset
    def cov(self, dataset: Any) -> pd.DataFrame:
        """Covariance of a dataset's best parameters (``fit(se=True)``), rows and columns
        named by parameter (``weight_1``, ``mean_2_1``...; NaN where the standard errors
        are): the dataset's rows of the ``covariances`` table."""
        self._get(dataset)
        table = self.tables.get("covariances")
        if table is None:
            raise ValueError("no covariances: fit with se=True to compute them.")
        rows = table[table.iloc[:, 0] == dataset]
        names = list(dict.fromkeys(rows["row"]))
        return pd.DataFrame(rows["cov"].to_numpy().reshape(len(names), len(names)),
                            index=names, columns=names)

    @per_dataset
    def init_params(self, dataset: Any) -> dict:
        """Starting values of a dataset's best start, in draw order."""
        return self._as_dict(self._get(dataset)[1])

    def __repr__(self) -> str:
        counts = self.summary["status"].value_counts().to_dict()
        return (f"FitResult(family={self.family!r}, n_components={self.n_components}, "
                f"datasets={len(self.summary)}, backend={self.backend!r}, status={counts}, "
                f"elapsed={self.elapsed:.3g}s)")
