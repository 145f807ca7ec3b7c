"""What can be computed from a TMAP fit: moments, samples, scores."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from .base import FitResult, per_dataset, seeded_draws

_RENAME = {"dataset": "trace", "component": "branch"}


class TMAPResult(FitResult):
    """Result of :func:`bulkem.fit` with ``family="tmap"``.

    The tables of :class:`FitResult` with the trace in a ``trace`` column
    (where the other families say ``dataset``):

    * ``components``: one row per (trace, branch): ``order, rate, alpha,
      exit`` (the exit probability ``1 - sum_j pi_ij``).  Branches keep the
      order of ``orders`` (numbered from 1), since each branch's order is
      fixed; only branches of equal order are exchangeable, and those are
      listed by increasing mean ``order / rate``;
    * ``transitions``: one row per (trace, from_branch, to_branch): ``pi``;
    * ``start_values``: one row per (trace, start, branch);
    * ``start_transitions``: each start's ``pi``, one row per (trace, start, from_branch,
      to_branch).

    With ``drop_bad_runs=True``, a trace that lost runs says how many in
    ``summary.message``.
    """

    @classmethod
    def assemble(cls, model, packed, job, n_starts, seed, backend, dtype, elapsed,
                 early: dict | None = None) -> TMAPResult:
        res = super().assemble(model, packed, job, n_starts, seed, backend, dtype, elapsed, early)
        notes = getattr(packed, "notes", {})
        if notes:
            msg = res.summary["message"].to_numpy(dtype=object).copy()
            for k, note in notes.items():
                if packed.messages[k] is None:  # (an invalid trace's message has it already)
                    msg[k] = f"{note}; {msg[k]}" if msg[k] else note
            res.summary["message"] = msg
        for name in ("summary", "components", "starts", "start_values"):
            setattr(res, name, getattr(res, name).rename(columns=_RENAME))
        return res

    can_resample = True

    def replicates(self, B: int, seed: int) -> list:
        """:meth:`FitResult.replicates`: ``B`` traces of each fitted trace's number of runs."""
        from ..models.tmap import simulate

        groups = self._packed.data.groups

        def draw(item, rng):
            v, k = item
            p = self._model.as_dict(self._best[v][0])
            n_runs = int(groups[k + 1] - groups[k])
            values, lengths, _ = simulate(p["alpha"], p["pi"], p["rates"], self._model.orders,
                                          B * n_runs, rng)
            runs = np.split(values, np.cumsum(lengths)[:-1])
            return [runs[b * n_runs:(b + 1) * n_runs] for b in range(B)]

        return seeded_draws(draw, self._valid_index().items(), seed)

    @property
    def transitions(self) -> pd.DataFrame:
        """One row per (trace, from_branch, to_branch): the fitted switching probability ``pi``."""
        return self.tables["transitions"]

    @property
    def start_transitions(self) -> pd.DataFrame:
        """Each start's switching probabilities: one row per (trace, start, from_branch,
        to_branch), ``pi`` (join ``start_values`` on ``trace, start``)."""
        return self.tables["start_transitions"]

    def _get(self, dataset: Any) -> tuple[np.ndarray, np.ndarray]:
        try:
            return self._best[dataset]
        except KeyError:
            row = self.summary[self.summary["trace"] == dataset]
            why = f"its status is {row['status'].iloc[0]!r}" if len(row) else "no such trace"
            raise KeyError(f"trace {dataset!r} has no fit: {why}.") from None

    @per_dataset
    def moments(self, trace: Any) -> dict:
        """Moments of a trace's fitted TMAP (the paper's eqs 1-7).

        Returns
        -------
        dict
            ``mean_run_length`` E(K), ``mean_interarrival`` E(X) and
            ``corr_x1_x2``, the correlation of the first two inter-arrival
            times of a run given that it has two (eq. 7, k = 1).  Compare with
            :func:`bulkem.models.tmap.empirical_moments` of the data.
        """
        from ..models.tmap import moments

        p = self.params(trace)
        return moments(p["alpha"], p["pi"], p["rates"], self._model.orders)

    @per_dataset
    def sample(self, trace: Any, n_runs: int = 1, seed: int | None = None,
               return_branches: bool = False):
        """Runs drawn from a trace's fitted TMAP.

        Parameters
        ----------
        trace : identifier
            As in ``summary["trace"]``.
        n_runs : int
        seed : int or None
        return_branches : bool
            Also return the branch (numbered from 1) of every value.

        Returns
        -------
        runs : list of ndarray
            ``n_runs`` runs of inter-arrival times (each at least one value).
        branches : list of ndarray
            Only with ``return_branches``.
        """
        from ..models.tmap import simulate

        p = self.params(trace)
        values, lengths, branches = simulate(p["alpha"], p["pi"], p["rates"],
                                             self._model.orders, int(n_runs),
                                             np.random.default_rng(seed))
        cut = np.cumsum(lengths)[:-1]
        runs = np.split(values, cut)
        if return_branches:
            return runs, [b + 1 for b in np.split(branches, cut)]
        return runs

    @per_dataset
    def score(self, trace: Any, runs: Any) -> float:
        """Log-likelihood of runs (one array or a list of arrays) under a trace's fitted TMAP."""
        from ..data.units import is_unit_list
        from ..engines import infer

        model = self._model.unweighted  # (new runs: no weights)
        runs = [np.asarray(u, np.float64) for u in (runs if is_unit_list(runs) else [runs])]
        for k, u in enumerate(runs):
            problem = u.ndim != 1 and f"run {k} has shape {u.shape}; expected (n,)"
            problem = problem or model.run_problem(k, u)
            if problem:
                raise ValueError(problem)
        p = self._get(trace)[0][None]
        ll = infer.score(model, p, np.zeros(len(runs), np.int64), runs)
        return float(np.sum(ll) - sum(np.log(u).sum() for u in runs))
