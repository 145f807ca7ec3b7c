"""Model choice over a grid of sizes: the ``selection`` table and the chosen size's tables.

``bulkem.fit(n_components=[1, 2, 3])`` (or ``order=[...]`` for AR models, ``orders=[...]``
for TMAPs) fits every size from the same seed; :func:`choose` builds one row per (dataset,
size) with its information criteria, picks each dataset's size by the criterion, and makes
the usual tables of the chosen sizes' fits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pandas as pd

from ..tuning import REACHED_RTOL
from .base import FitResult

FITTED = ("converged", "max_iter")


def n_reached(result: FitResult) -> np.ndarray:
    """Per dataset of ``result.summary``: how many usable starts are within
    ``REACHED_RTOL`` (relative) of the best start's log-likelihood (0 where none is)."""
    summary, starts = result.summary, result.starts
    out = np.zeros(len(summary), dtype=np.int64)
    if not len(starts):
        return out
    ids = pd.Index(summary.iloc[:, 0])  # the datasets (traces for a TMAP)
    pos = ids.get_indexer(starts.iloc[:, 0])
    best = summary["loglik"].to_numpy()[pos]
    ll = starts["loglik"].to_numpy()
    ok = starts["status"].isin(FITTED).to_numpy() & np.isfinite(best)
    near = ok & (ll >= best - REACHED_RTOL * np.abs(best))
    np.add.at(out, pos[near], 1)
    return out


def _n_params(result: FitResult) -> np.ndarray:
    """Free parameters per dataset: the AIC's count (an HMM with its own alphabet counts
    each dataset's symbols), the model's where the log-likelihood is not finite."""
    s = result.summary
    k = np.rint((s["aic"].to_numpy() + 2 * s["loglik"].to_numpy()) / 2)
    return np.where(np.isfinite(k), k, result._model.n_free).astype(np.int64)


def _rows(table: pd.DataFrame, ids: pd.Index, pick: np.ndarray, j: int) -> tuple:
    """The rows of ``table`` whose dataset (first column) has size index ``j`` in ``pick``,
    and their datasets' positions."""
    pos = ids.get_indexer(table.iloc[:, 0])
    keep = pick[pos] == j
    return table[keep], pos[keep]


def _merge(tables: list[pd.DataFrame], ids: pd.Index, pick: np.ndarray) -> pd.DataFrame:
    """One table of each dataset's rows from the table of its size, in dataset order."""
    parts, where = zip(*(_rows(t, ids, pick, j) for j, t in enumerate(tables)), strict=True)
    parts = [p for p in parts if len(p)] or [tables[0].iloc[:0]]
    out = pd.concat(parts, ignore_index=True) if len(parts) > 1 else \
        parts[0].reset_index(drop=True)
    order = np.argsort(np.concatenate(where), kind="stable")
    return out.take(order).reset_index(drop=True)


def _size_dtype(label: str) -> str:
    """A size column's type: tuples of orders, else integers (missing where none is chosen)."""
    return "object" if label == "orders" else "Int64"


def choose(results: dict[Any, FitResult], label: str, criterion: str,
           elapsed: float) -> FitResult:
    """The result of a grid fit, from one result per size (same datasets, same order).

    Parameters
    ----------
    results : dict size -> FitResult
        In the grid's order.
    label : str
        The size's name: ``n_components``, ``order`` or ``orders``.
    criterion : {"bic", "aic", "icl"}
        Chooses each dataset's size (smallest value; the first size on a tie).
    elapsed : float
        Wall time of the whole call.

    Returns
    -------
    FitResult
        The chosen size's rows of every table, a ``selection`` table, ``for_size(size)``.
    """
    sizes = list(results)
    first = results[sizes[0]]
    key = first.summary.columns[0]  # "dataset" ("trace" for a TMAP)
    ids = pd.Index(first.summary[key])
    n = len(ids)
    parts, scores, fitted = [], [], []
    for size, res in results.items():
        s = res.summary
        k = _n_params(res)
        cols = {key: s[key].to_numpy(),
                label: pd.Series([size] * n, dtype=_size_dtype(label)),
                "status": s["status"].to_numpy(), "loglik": s["loglik"].to_numpy(),
                "n_params": k, "aic": s["aic"].to_numpy(), "bic": s["bic"].to_numpy()}
        if res.has_icl and criterion == "icl":
            cols["icl"] = cols["bic"] + 2 * res.entropy()
        cols.update({"n_iter": s["n_iter"].to_numpy(), "n_best": n_reached(res)})
        parts.append(pd.DataFrame(cols))
        ok = s["status"].isin(FITTED).to_numpy()
        fitted.append(ok)
        scores.append(np.where(ok & np.isfinite(cols[criterion]), cols[criterion], np.inf))
    scores_ = np.array(scores)  # (sizes, datasets)
    has = np.isfinite(scores_).any(axis=0)
    pick = np.where(has, np.argmin(scores_, axis=0), 0)
    selection = pd.concat(parts, ignore_index=True)
    selection["chosen"] = (np.repeat(np.arange(len(sizes)), n) == np.tile(pick, len(sizes))) \
        & np.tile(has, len(sizes))
    order = np.argsort(np.tile(np.arange(n), len(sizes)), kind="stable")
    selection = selection.take(order).reset_index(drop=True)

    every = [results[s] for s in sizes]
    names = list(dict.fromkeys(name for r in every for name in r.tables))
    tables = {name: _merge([r.tables[name] for r in every if name in r.tables], ids, pick)
              for name in names if all(name in r.tables for r in every)}
    tables["selection"] = selection
    chosen = {d: (sizes[j] if h else None) for d, j, h in zip(ids, pick, has, strict=True)}
    best = {d: results[c]._best[d] for d, c in chosen.items()
            if c is not None and d in results[c]._best}
    summary = _merge([r.summary for r in every], ids, pick)
    summary.insert(summary.columns.get_loc("loglik"), label,
                   pd.Series([chosen[d] for d in ids], dtype=_size_dtype(label)))
    return dataclasses.replace(
        first, summary=summary,
        components=_merge([r.components for r in every], ids, pick),
        starts=_merge([r.starts for r in every], ids, pick),
        start_values=_merge([r.start_values for r in every], ids, pick),
        n_components=tuple(sizes) if label == "n_components" else first.n_components,
        elapsed=elapsed, tables=tables, _best=best, _sizes=dict(results), _chosen=chosen,
        _size_label=label)
