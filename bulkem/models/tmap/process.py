"""What follows from a TMAP's parameters: its moments (the paper's eqs 1-7) and samples.

A TMAP with Erlang branches is ``(alpha, Pi, rates, orders)``: ``alpha`` the
initial branch distribution, ``Pi`` the sub-stochastic branch-switching
matrix (row deficits are exit probabilities), branch ``i`` an Erlang
distribution of order ``r_i`` and rate ``lambda_i``.  Inter-arrival times
are independent of the next branch given the current one, so the phase-level
formulas of the paper reduce to branch-level ones with the Erlang moments
``m1_i = r_i / lambda_i`` and ``m2_i = r_i (r_i + 1) / lambda_i^2``:

* ``E(K) = alpha (I - Pi)^-1 1`` (eq. 1);
* ``E(X) = alpha (I - Pi)^-1 m1 / alpha (I - Pi)^-1 1`` (eq. 5);
* the correlation of ``X_1`` and ``X_2`` given that a second arrival
  happens (eqs 6-7 with k = 1): ``E(X_1 X_2 | K >= 2) = sum_ij alpha_i m1_i
  Pi_ij m1_j / alpha Pi 1``, ``E(X_1) = alpha m1``, ``E(X_1^2) = alpha m2``,
  ``E(X_2^j | K >= 2) = alpha Pi m_j / alpha Pi 1``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def moments(alpha, pi, rates, orders) -> dict:
    """Mean run length, mean inter-arrival time and lag-1 correlation of a TMAP.

    Parameters
    ----------
    alpha : array-like of shape (R,)
    pi : array-like of shape (R, R)
    rates : array-like of shape (R,)
    orders : array-like of shape (R,)

    Returns
    -------
    dict
        ``mean_run_length`` E(K), ``mean_interarrival`` E(X), ``corr_x1_x2``
        Corr(X_1, X_2 | K >= 2) (NaN when no run has a second arrival).
    """
    a = np.asarray(alpha, np.float64)
    P = np.asarray(pi, np.float64)
    lam = np.asarray(rates, np.float64)
    r = np.asarray(orders, np.float64)
    m1, m2 = r / lam, r * (r + 1.0) / lam**2
    n = np.linalg.solve((np.eye(len(a)) - P).T, a)  # alpha (I - Pi)^-1
    ek = n.sum()
    ex = n @ m1 / ek
    second = a @ P.sum(axis=1)  # P(K >= 2)
    with np.errstate(invalid="ignore", divide="ignore"):
        e1, e11 = a @ m1, a @ m2
        e2 = a @ P @ m1 / second
        e22 = a @ P @ m2 / second
        e12 = (a * m1) @ P @ m1 / second
        corr = (e12 - e1 * e2) / np.sqrt((e11 - e1**2) * (e22 - e2**2))
    return {"mean_run_length": float(ek), "mean_interarrival": float(ex),
            "corr_x1_x2": float(corr)}


def empirical_moments(runs: Sequence) -> dict:
    """The same moments as :func:`moments`, estimated from runs (a list of 1-D arrays).

    ``corr_x1_x2`` follows eq. 7: ``E(X_1)`` and ``Var(X_1)`` over every run,
    ``E(X_2)``, ``Var(X_2)`` and ``E(X_1 X_2)`` over the runs with a second value.
    """
    lens = np.array([len(u) for u in runs])
    vals = np.concatenate([np.asarray(u, np.float64) for u in runs])
    x1 = np.array([u[0] for u in runs], np.float64)
    two = [u for u in runs if len(u) >= 2]
    y1 = np.array([u[0] for u in two], np.float64)
    y2 = np.array([u[1] for u in two], np.float64)
    if len(two):
        corr = ((np.mean(y1 * y2) - x1.mean() * y2.mean())
                / np.sqrt(x1.var() * y2.var()))
    else:
        corr = np.nan
    return {"mean_run_length": float(lens.mean()), "mean_interarrival": float(vals.mean()),
            "corr_x1_x2": float(corr)}


def simulate(alpha, pi, rates, orders, n_runs: int, rng: np.random.Generator
             ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Runs drawn from a TMAP, all runs stepped together (vectorised over runs).

    Returns
    -------
    values : ndarray of shape (n_values,)
        The runs' inter-arrival times, run after run.
    lengths : ndarray of shape (n_runs,)
    branches : ndarray of shape (n_values,)
        The branch (0-based) that generated each value.
    """
    a = np.asarray(alpha, np.float64)
    P = np.asarray(pi, np.float64)
    lam = np.asarray(rates, np.float64)
    r = np.asarray(orders, np.float64)
    R = len(a)
    # next state per branch: j < R a branch, R the end of the run
    nxt = np.cumsum(np.concatenate([P, 1.0 - P.sum(axis=1, keepdims=True)], axis=1), axis=1)
    nxt[:, -1] = 1.0
    first = np.cumsum(a)
    first[-1] = 1.0
    state = np.searchsorted(first, rng.random(n_runs), side="right")
    alive = np.arange(n_runs)
    steps_v, steps_b, steps_run = [], [], []
    while len(alive):
        b = state[alive]
        steps_v.append(rng.gamma(r[b], 1.0 / lam[b]))
        steps_b.append(b)
        steps_run.append(alive)
        u = rng.random(len(alive))
        new = (u[:, None] >= nxt[b]).sum(axis=1)
        new = np.minimum(new, R)
        state[alive] = new
        alive = alive[new < R]
    run = np.concatenate(steps_run) if steps_run else np.empty(0, np.int64)
    order = np.argsort(run, kind="stable")  # run after run, each in time order
    values = np.concatenate(steps_v)[order] if steps_v else np.empty(0)
    branches = np.concatenate(steps_b)[order] if steps_b else np.empty(0, np.int64)
    lengths = np.bincount(run, minlength=n_runs)
    return values, lengths, branches
