"""The TMAP with Erlang branches as a model of the EM driver: the terminating chain + Erlang.

Its E-step and M-step are the hidden-Markov chain's
(:func:`bulkem.models.hmm.chain.make_chain` with ``terminating=True``: a
sub-stochastic transition matrix whose row deficits are exit probabilities,
``pi_ij = xi_ij / occupancy_i`` with the occupancy summed over every value
of a run, the paper's eq. 22) and the Erlang emission (:mod:`.erlang`).  The
paper's ``alpha`` is the chain's startprob, ``Pi`` its transmat, and the
runs of a trace are its units.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np
from numba import njit, prange

from ...data import Packed, Ragged
from ...data.units import UnitArrays, Words
from ...fitting import starts
from ...tuning import DEGENERATE_COLLAPSE, DEGENERATE_PARAM
from ..base import init_blocks
from ..hmm.model import HMMModel
from ..hmm.weights import unit_weights, weight_problems
from . import draws
from .erlang import erlang

# Rows of a user's Pi may sum to 1 plus this much (rounding).
ROW_SUM_SLACK = 1e-9
MAX_LISTED = 3  # bad runs named in a trace's message (then how many in all)


class WeightedRuns(NamedTuple):
    """A trace's runs with one weight per run (``fit(weights=...)``), as
    :meth:`TMAPModel.attach_weights` gives them to the weighted model's ``pack``."""

    values: np.ndarray
    lengths: np.ndarray
    weights: np.ndarray


def _as_arrays(runs) -> tuple[np.ndarray, np.ndarray]:
    """A trace's runs (a list of 1-D arrays, :class:`UnitArrays` or :class:`WeightedRuns`)
    -> (values, lengths)."""
    if isinstance(runs, (UnitArrays, WeightedRuns)):
        return np.asarray(runs.values, np.float64), np.asarray(runs.lengths, np.int64)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
    values = np.concatenate(runs) if len(runs) else np.empty(0)
    return values.astype(np.float64, copy=False), lengths


@njit(cache=True, nogil=True, parallel=True)
def _bad_run_mask(values, ends, lengths, out):
    for k in prange(len(lengths)):
        bad = lengths[k] == 0
        for i in range(ends[k] - lengths[k], ends[k]):
            v = values[i]
            if not (v > 0.0 and v < np.inf):  # (NaN fails both)
                bad = True
                break
        out[k] = bad


def _bad_runs(values: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Indices of the runs that are empty or hold a value not positive and finite (the runs
    on every core, one pass over the values)."""
    lengths = np.asarray(lengths, dtype=np.int64)
    out = np.zeros(len(lengths), dtype=np.bool_)
    _bad_run_mask(np.asarray(values, dtype=np.float64), np.cumsum(lengths), lengths, out)
    return np.flatnonzero(out)


def _run_messages(values, lengths, which, numbers=None) -> list[str]:
    """What is wrong with each of the runs ``which`` of a trace (named by ``numbers[k]``, their
    input positions where runs were left out, else by ``k``)."""
    ends = np.cumsum(lengths)
    out = []
    for k in which:
        n = int(lengths[k])
        name = k if numbers is None else int(numbers[k])
        if n == 0:
            out.append(f"run {name} is empty")
            continue
        u = values[ends[k] - n:ends[k]]
        wrong = ~(np.isfinite(u) & (u > 0))
        out.append(f"run {name}: {int(wrong.sum())} of {n} values are not positive and "
                   f"finite (first: {u[wrong][0]:g})")
    return out


@dataclass
class TMAPPacked(Packed):
    """A packed batch of traces, with what ``drop_bad_runs`` dropped from each.

    Attributes
    ----------
    notes : dict
        Input position -> a note on the runs dropped from that trace.
    """

    notes: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TMAPModel(HMMModel):
    """A TMAP of ``R = len(orders)`` Erlang branches of fixed orders.

    The kernels' batch data is the chain's ``(x, units, block)``: every run's
    inter-arrival times, the runs' offsets and the units per block of the sums.  Parameters per fit:
    ``alpha (R), Pi (R x R, row = from branch), rates (R)``.

    Attributes
    ----------
    orders : tuple of int
        ``r_i >= 1`` per branch, in the order of the tables.
    drop_bad_runs : bool
        Drop runs with values that are not positive and finite (and empty
        runs) instead of making their trace ``invalid_data``.

    Weighted (``weighted``, ``fit(weights=...)``): one weight per run, the packed values'
    last column (as :class:`HMMModel`'s per sequence); runs of weight 0 are left out.
    """

    orders: tuple = (1, 2, 3)
    drop_bad_runs: bool = False

    name = "tmap"
    run_time_update = False  # (always "ste"; its batch tuple has no flags)
    component_label = "branch"
    transition_columns = ("trace", "from_branch", "to_branch", "pi")
    status_reasons = {
        DEGENERATE_COLLAPSE: "a branch collapsed (no mass left)",
        DEGENERATE_PARAM: "a rate became non-positive or non-finite, or a probability left "
                          "[0, 1]",
    }
    terminating = True
    keyed_starts = False  # keyed by the run lengths (draws.trace_keys)
    chain_blocks = (("alpha", "simplex"), ("pi", "substochastic"))
    state_axis = "branch"
    weight_unit = "run"
    words = Words("trace", "run", "run_col")

    @classmethod
    def of(cls, orders: tuple[int, ...], drop_bad_runs: bool = False,
           unit_col: str = "run") -> TMAPModel:
        """The model of these branch orders."""
        orders = tuple(int(r) for r in orders)
        return cls(erlang(orders), len(orders), 1, "ste", orders=orders,
                   drop_bad_runs=bool(drop_bad_runs), unit_col=unit_col)

    @property
    def key(self) -> tuple:
        return (self.name, self.orders, self.tuning.key()) + self._weighted_key

    @property
    def n_dims(self) -> int:
        return 1

    @property
    def init_methods(self) -> tuple[str, ...]:
        return ("random",)

    @property
    def default_init(self) -> str:
        return "random"

    # --- data -----------------------------------------------------------------------------

    def attach_weights(self, pairs: list, weights, datasets, dataset_col: str) -> list:
        """``(identifier, WeightedRuns)`` pairs: each trace's runs with one weight per run
        (:func:`bulkem.models.hmm.weights.unit_weights`); a ValueError where the weights do
        not line up with the traces."""
        if (dataset_col == "dataset" and hasattr(datasets, "columns")
                and "dataset" not in datasets.columns and "trace" in datasets.columns):
            dataset_col = "trace"  # (as TMAPFamily.read)
        if (len(pairs) == 1 and isinstance(weights, (list, tuple, np.ndarray))
                and len(weights) > 1 and all(np.isscalar(v) for v in weights)):
            weights = [weights]  # one trace's run weights (as its runs: a list of runs)
        ws = unit_weights(pairs, weights, datasets, dataset_col, self.unit_col, self.words)
        return [(ident, WeightedRuns(*_as_arrays(runs), w))
                for (ident, runs), w in zip(pairs, ws, strict=True)]

    def run_problem(self, k: int, u: np.ndarray) -> str | None:
        """What is wrong with run ``k`` (empty, or values not positive and finite), or None."""
        u = np.asarray(u, np.float64).reshape(-1)
        if len(_bad_runs(u, np.array([len(u)]))) == 0:
            return None
        return _run_messages(u, np.array([len(u)]), [0])[0].replace("run 0", f"run {k}", 1)

    def check(self, units) -> str | None:
        """Every problem of one trace (a list of runs, or its :class:`UnitArrays`), or None."""
        values, lengths = _as_arrays(units)
        return self._check(values, lengths, _bad_runs(values, lengths))

    def _check(self, values, lengths, bad, numbers=None) -> str | None:
        problems = []
        if len(bad):
            problems = _run_messages(values, lengths, bad[:MAX_LISTED], numbers)
            if len(bad) > MAX_LISTED:
                problems.append(f"{len(bad)} bad runs in all")
        if not len(lengths):
            problems.append("no runs")
        elif not problems and len(values) < self.n_states:
            problems.append(f"too short: {len(values)} values, at least {self.n_states} needed "
                            "for this number of branches")
        return "; ".join(problems) if problems else None

    def pack(self, pairs: list) -> TMAPPacked:
        """Validate ``(identifier, runs)`` pairs and pack the valid traces (vectorised).

        With ``drop_bad_runs``, bad runs are dropped first and each trace that
        lost some gets a note (how many, and the first one's problem).  Weighted: the
        runs of weight 0 are left out first, and a NaN, infinite or negative weight makes
        the trace invalid; each value gets its run's weight as a second column.
        """
        ids, n_obs, messages, notes, kept = [], [], [], {}, []
        for k, (ident, runs) in enumerate(pairs):
            values, lengths = _as_arrays(runs)
            numbers = w = None
            if self.weighted:
                keep = runs.weights != 0.0  # (NaN kept: named below)
                numbers, w = np.flatnonzero(keep), runs.weights[keep]
                values, lengths = values[np.repeat(keep, lengths)], lengths[keep]
            bad = _bad_runs(values, lengths)
            if self.drop_bad_runs and len(bad):
                first = _run_messages(values, lengths, bad[:1], numbers)[0]
                notes[k] = f"dropped {len(bad)} of {len(lengths)} runs (first: {first})"
                good = np.ones(len(lengths), bool)
                good[bad] = False
                values, lengths = values[np.repeat(good, lengths)], lengths[good]
                if w is not None:
                    numbers, w = numbers[good], w[good]
                bad = bad[:0]
            m = self._check(values, lengths, bad, numbers)
            if w is not None:
                m = "; ".join(p for p in (weight_problems(w, numbers, "run"), m) if p) or None
                values = np.column_stack([values, np.repeat(w, lengths)])
            if m is not None and k in notes:
                m = f"{notes.pop(k)}; {m}"
            ids.append(ident)
            n_obs.append(len(values))
            messages.append(m)
            if m is None:
                kept.append((values, lengths))
        valid = np.array([i for i, m in enumerate(messages) if m is None], dtype=np.int64)
        groups = np.zeros(len(kept) + 1, dtype=np.int64)
        np.cumsum([len(lg) for _, lg in kept], out=groups[1:])
        lens = np.concatenate([lg for _, lg in kept]) if kept else np.empty(0, np.int64)
        units = np.zeros(len(lens) + 1, dtype=np.int64)
        np.cumsum(lens, out=units[1:])
        values = (kept[0][0] if len(kept) == 1  # (one trace: its values as they are)
                  else np.concatenate([v for v, _ in kept]) if kept
                  else np.empty((0, 2) if self.weighted else 0))
        return TMAPPacked(ids, np.array(n_obs, dtype=np.int64), messages, valid,
                          Ragged(np.ascontiguousarray(values), units, groups), notes)

    def kernel_data(self, data: Ragged, constants: bool = True
                    ) -> tuple[tuple, np.ndarray, np.ndarray]:
        """The chain's ``(x, units, block)`` (weighted: ``(x, units, block, w)``, one weight
        per run), the run offsets, and each trace's ``-sum log x`` (weighted: ``-sum w log x``).

        ``-log x`` is the part of every branch's log density that the
        emission's ``dens`` leaves out (:mod:`.erlang`); summed on every core
        (:meth:`bulkem.data.Ragged.value_stats`), or left 0 with
        ``constants=False`` (for an engine that has them already).
        """
        values, w = self.split(data.values)
        x = np.ascontiguousarray(values, dtype=np.float64).reshape(-1)
        const = np.zeros(data.n_datasets)
        if constants and len(x) and w is not None:
            from ..mixture.model import segment_sums

            const = -segment_sums(np.log(x) * w, data.value_offsets)
        elif constants and len(x):
            const = -data.value_stats()[:, 2]
        batch = (x, data.units, self.tuning.wide_cpu_chunk_units)
        if w is not None:  # (a valid trace's runs are not empty: a row each)
            batch += (np.ascontiguousarray(w[data.units[:-1]]),)
        return batch, data.groups, const

    # --- starts ---------------------------------------------------------------------------

    def start_plan(self, data: Ragged, keys: np.ndarray, seed: int, method: str,
                   user: np.ndarray | None) -> starts.StartPlan:
        """The paper's random starts (:mod:`.draws`; keyed by run lengths, not ``keys``)."""
        def draw(fit_ds, fit_start, out):
            if out is None:
                out = np.empty((len(fit_ds), self.n_params))
            draws.draw(self.orders, plain, seed, fit_ds, fit_start, out)
            return out

        plain = self.unit_values(data)  # (weights: the starts as if unweighted)

        return starts.StartPlan(draw, user)

    def user_starts(self, init: Mapping) -> np.ndarray:
        """User starting values ``{"alpha", "pi" (or "transmat"), "rates"}`` -> (k, n_params)."""
        if isinstance(init, Mapping) and "transmat" in init and "pi" not in init:
            init = {("pi" if k == "transmat" else k): v for k, v in init.items()}
        shapes = self.init_shapes()
        blocks = dict(zip(shapes, init_blocks(init, shapes), strict=True))
        for key, b in blocks.items():
            if not np.all(np.isfinite(b)):
                raise ValueError(f"init[{key!r}] must be finite.")
            if np.any(b < 0):
                raise ValueError(f"init[{key!r}] must be non-negative.")
        if not np.allclose(blocks["alpha"].sum(axis=-1), 1.0, atol=1e-8):
            raise ValueError("init['alpha'] must sum to 1 (the initial branch probabilities).")
        rows = blocks["pi"].sum(axis=-1)
        if np.any(rows > 1.0 + ROW_SUM_SLACK):
            raise ValueError(f"init['pi'] rows must sum to at most 1 (the rest is the exit "
                             f"probability); found a row summing to {rows.max():.6g}.")
        if np.any(blocks["rates"] <= 0):
            raise ValueError("init['rates'] must be positive: the Erlang branches' rates.")
        return self.params_layout.join(blocks)

    # --- tables ---------------------------------------------------------------------------

    def param_columns(self, params: np.ndarray) -> dict:
        """Columns, one row per (fit, branch): order, rate, alpha, exit probability."""
        b = self.params_layout.split(params)
        alpha, pi, rates = b["alpha"], b["pi"], b["rates"]
        return {"order": np.tile(np.asarray(self.orders, np.int64), len(alpha)),
                "rate": rates.reshape(-1), "alpha": alpha.reshape(-1),
                # 1 - sum(pi) of a row that sums to 1 may round to -1.6e-15: an exit is >= 0
                # (sample() ends a run with the rest of the row's probability, moments() uses pi)
                "exit": np.maximum(0.0, 1.0 - pi.sum(axis=2)).reshape(-1)}

    def canonical(self, params: np.ndarray) -> np.ndarray:
        """Branches keep their given order; branches of equal order by increasing mean.

        A branch's order is fixed, so only branches of the same order are
        exchangeable: among them, the one of the largest rate comes first.
        """
        params = np.asarray(params, np.float64)
        rates = self.params_layout.split(params)["rates"]
        perm = np.tile(np.arange(self.n_states), (len(params), 1))
        orders = np.asarray(self.orders)
        for r in np.unique(orders):
            pos = np.flatnonzero(orders == r)
            if len(pos) > 1:
                within = np.argsort(-rates[:, pos], axis=1, kind="stable")
                perm[:, pos] = pos[within]
        if (perm == np.arange(self.n_states)).all():
            return params
        return self.permute(params, perm)
