"""Data sets: the BMI data of the R package mixsmsn, and the demo mixture."""

from __future__ import annotations

import os
from pathlib import Path

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


def _default_bmi_paths() -> list[Path]:
    paths = []
    if os.environ.get("BULKEM_BMI_CSV"):
        paths.append(Path(os.environ["BULKEM_BMI_CSV"]))
    here = Path(__file__).resolve().parent
    for up in (here.parent, Path.cwd()):
        paths.append(up.parent / "shared" / "data" / "bmi.csv")
    return paths


def load_bmi(path: str | os.PathLike | None = None) -> np.ndarray:
    """The BMI data set (2107 values) shipped by the R package mixsmsn.

    Read, in this order, from ``path`` when given; from R's mixsmsn when it
    and rpy2 are installed; from ``$BULKEM_BMI_CSV``; from
    ``../shared/data/bmi.csv`` beside the repository.

    Parameters
    ----------
    path : path-like, optional
        A CSV file with a column ``bmi``.

    Returns
    -------
    ndarray of shape (2107,)
    """
    if path is not None:
        return pd.read_csv(path)["bmi"].to_numpy(dtype=np.float64)
    try:
        from .rbridge import load_r_dataset

        df = load_r_dataset("bmi", "mixsmsn")
        if df is not None:
            return df["bmi"].to_numpy(dtype=np.float64)
    except (ImportError, LookupError):
        pass
    for p in _default_bmi_paths():
        if p.is_file():
            return pd.read_csv(p)["bmi"].to_numpy(dtype=np.float64)
    raise FileNotFoundError(
        "BMI data not found: R package mixsmsn is not installed (or rpy2 is missing) and no "
        "bmi.csv was found; pass load_bmi(path=...) or set BULKEM_BMI_CSV."
    )
