"""Data sets: the BMI data of the R package mixsmsn, the demo mixture, a TMAP trace."""

from __future__ import annotations

import os
from importlib import resources

import numpy as np
import pandas as pd

# The demo mixture of the original bulkem: weights, means and shapes.
DEMO_WEIGHTS = (0.3, 0.7)
DEMO_MU = (1.0, 3.0)
DEMO_LAMBDA = (30.0, 0.2)


def simulate_demo(n_datasets: int = 1000, n_obs: int = 2000, seed: int = 0) -> list[np.ndarray]:
    """Datasets drawn from the demo inverse-Gaussian mixture.

    Weights 0.3/0.7, mu 1/3, lambda 30/0.2 (the original bulkem demo).

    Parameters
    ----------
    n_datasets, n_obs : int
    seed : int

    Returns
    -------
    list of ndarray of shape (n_obs,)
    """
    rng = np.random.default_rng(seed)
    comp = rng.random((n_datasets, n_obs)) < DEMO_WEIGHTS[0]
    mu = np.where(comp, DEMO_MU[0], DEMO_MU[1])
    lam = np.where(comp, DEMO_LAMBDA[0], DEMO_LAMBDA[1])
    return list(rng.wald(mu, lam))


def load_bmi(path: str | os.PathLike | None = None) -> np.ndarray:
    """The BMI data set: body mass index of 2107 people, shipped with bulkem.

    The ``bmi`` data of the R package mixsmsn (Prates, Cabral and Lachos
    2013, J. Stat. Softw. 54(12)); originally from Basso, Lachos, Cabral and
    Ghosh (2010), Comput. Stat. Data Anal. 54(12).  Bimodal: the classic test
    of a two-component inverse-Gaussian mixture fitted from random starts.
    The same values are the R package's data set ``bmi``.

    Parameters
    ----------
    path : path-like, optional
        Another CSV file with a column ``bmi`` to read instead.

    Returns
    -------
    ndarray of shape (2107,)
    """
    if path is None:
        with resources.files(__package__).joinpath("datasets_data", "bmi.csv").open("rb") as f:
            return pd.read_csv(f)["bmi"].to_numpy(dtype=np.float64)
    return pd.read_csv(path)["bmi"].to_numpy(dtype=np.float64)


# A TMAP of three Erlang branches of orders 1, 2, 3 (the paper's structure): the initial
# branch distribution, the switching pattern (rows scaled to 1 - exit), the rates.
TMAP_ORDERS = (1, 2, 3)
TMAP_ALPHA = (0.4, 0.35, 0.25)
TMAP_SWITCH = ((0.7, 0.2, 0.1), (0.25, 0.6, 0.15), (0.1, 0.3, 0.6))
TMAP_RATES = (2.0, 1.0, 0.6)
# Mean run lengths of the paper's two traces: 8,824,586 values in 1,000,000 runs and
# 14,503,248 in 2,000,000.
PAPER_MEAN_RUNS = {1_000_000: 8.824586, 2_000_000: 7.251624}


def tmap_truth(mean_run_length: float = 8.824586) -> dict:
    """The TMAP :func:`simulate_tmap` draws from: ``alpha, pi, rates, orders``.

    Every branch exits with probability ``1 / mean_run_length``, so the runs'
    lengths are geometric with that mean.
    """
    exit_p = 1.0 / mean_run_length
    pi = np.asarray(TMAP_SWITCH) * (1.0 - exit_p)
    return {"alpha": np.asarray(TMAP_ALPHA), "pi": pi, "rates": np.asarray(TMAP_RATES),
            "orders": TMAP_ORDERS}


def simulate_tmap(n_runs: int = 1_000_000, mean_run_length: float | None = None,
                  seed: int = 0, as_frame: bool = True):
    """A synthetic trace like the TMAP paper's (Table 1): runs of a known TMAP, orders 1, 2, 3.

    Parameters
    ----------
    n_runs : int
    mean_run_length : float, optional
        Expected values per run; by default the paper's trace of that many
        runs has (8.82 for 10^6 runs, 7.25 for 2 x 10^6), else 8.82.
    seed : int
    as_frame : bool
        A long DataFrame (``trace, run, value``; one trace, ``trace = 0``), or
        a list of runs (1-D arrays).

    Returns
    -------
    pandas.DataFrame or list of ndarray
    """
    from ..models.tmap import simulate

    if mean_run_length is None:
        mean_run_length = PAPER_MEAN_RUNS.get(int(n_runs), 8.824586)
    t = tmap_truth(mean_run_length)
    values, lengths, _ = simulate(t["alpha"], t["pi"], t["rates"], t["orders"], int(n_runs),
                                  np.random.default_rng(seed))
    if not as_frame:
        return np.split(values, np.cumsum(lengths)[:-1])
    return pd.DataFrame({"trace": np.zeros(len(values), np.int64),
                         "run": np.repeat(np.arange(int(n_runs)), lengths), "value": values})
