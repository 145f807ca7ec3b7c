"""Pictures of fits: a dataset's histogram, its fitted mixture density and the components.

matplotlib is an optional dependency (``pip install 'bulkem[plot]'``), imported
only when a figure is drawn.  :func:`dataset_values` and
:func:`component_densities` need no matplotlib; the R package draws its
``plot()`` from them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .base import FitResult


def dataset_values(result: FitResult, dataset: Any) -> np.ndarray:
    """The values of a fitted dataset, as they were fitted.

    Parameters
    ----------
    result : FitResult
    dataset : identifier
        As in ``result.summary["dataset"]``.

    Returns
    -------
    ndarray of shape (n_obs,) or (n_obs, n_dims)

    Raises
    ------
    KeyError
        The dataset has no fit (unknown, or its status is ``invalid_data``).
    """
    result._get(dataset)  # raises KeyError, saying why, for a dataset without a fit
    packed = result._packed
    if packed is None:
        raise ValueError("this result holds no data; it was not made by bulkem.fit.")
    pos = next(i for i, k in enumerate(packed.ids) if k == dataset)
    k = int(np.searchsorted(packed.valid, pos))
    return packed.values[packed.offsets[k]:packed.offsets[k + 1]]


def component_densities(result: FitResult, dataset: Any, x: Any, dim: int = 0) -> np.ndarray:
    """Each fitted component's weighted density, ``weight_l * f_l(x)``, at points x.

    Their sum over components is the fitted mixture density.  For vector
    data (the Gaussian family) these are the densities of coordinate
    ``dim`` alone (the marginals; with a diagonal covariance each component's
    marginal is a normal density).

    Parameters
    ----------
    result : FitResult
    dataset : identifier
        As in ``result.summary["dataset"]``.
    x : array-like of shape (n,)
        Points (values of coordinate ``dim`` for vector data).
    dim : int, default 0
        Coordinate of vector data, from 0.

    Returns
    -------
    ndarray of shape (n, n_components)
        Column ``l`` is component ``l + 1`` of the ``components`` table; 0
        where a density is undefined (e.g. x <= 0 for the inverse-Gaussian).
    """
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    fam, M = result._model.family, result.n_components
    if fam.ndim == 1:
        logc = fam.log_components(x, result._get(dataset)[0], M)
    else:
        p = result.params(dataset)
        if not {"weight", "mean"} <= set(p) or not {"var", "cov"} & set(p):
            raise NotImplementedError(f"no marginal densities for the {result.family!r} family.")
        if not 0 <= dim < result.n_dims:
            raise ValueError(f"dim = {dim}; expected 0 <= dim < {result.n_dims} (n_dims).")
        mean = p["mean"][:, dim]  # (a full covariance: its packed lower triangle's (dim, dim))
        if "var" in p:  # (per dimension, or one per component: spherical)
            var = p["var"][:, dim] if p["var"].ndim == 2 else p["var"]
        else:
            var = p["cov"][:, dim * (dim + 3) // 2]
        logc = (np.log(p["weight"]) - 0.5 * np.log(2 * np.pi * var)
                - 0.5 * (x[:, None] - mean) ** 2 / var)
    with np.errstate(over="ignore"):
        dens = np.exp(logc)
    return np.where(np.isfinite(dens), dens, 0.0)


def _view(v: np.ndarray, tail: float) -> tuple[float, float]:
    """The x range drawn: the values but a fraction ``tail`` at each end, with a margin."""
    lo, hi = (float(q) for q in np.quantile(v, [tail, 1 - tail]))
    pad = 0.05 * (hi - lo) if hi > lo else max(abs(lo), 1.0) * 0.5
    start = lo - pad
    if lo > 0 >= start:  # positive data: stay on its side of 0
        start = lo / 2
    return start, hi + pad


def plot_fit(result: FitResult, dataset: Any, ax: Any = None, bins: Any = "auto",
             dim: int = 0, xlim: tuple[float, float] | None = None, tail: float = 0.01,
             points: int = 1000) -> Any:
    """Histogram of a dataset with its fitted mixture density and weighted components
    (for counts, a bar per integer and the probabilities at the integers).

    Parameters
    ----------
    result : FitResult
    dataset : identifier
        As in ``result.summary["dataset"]``.
    ax : matplotlib Axes, optional
        Where to draw; a new figure when None.
    bins : int, sequence or str, default "auto"
        Histogram bins, as ``numpy.histogram`` takes them (a rule such as
        "auto" is applied to the values inside the drawn range).
    dim : int, default 0
        Coordinate to draw for vector data (Gaussian family), from 0.
    xlim : (float, float), optional
        The x range drawn.  By default the values but the fraction ``tail``
        at each end (long tails would squeeze the picture into one bar); the
        legend says how many values lie outside.
    tail : float, default 0.01
        See ``xlim``; 0 draws every value.
    points : int, default 1000
        Points of the density curves.

    Returns
    -------
    matplotlib Axes

    Raises
    ------
    ImportError
        matplotlib is not installed.
    KeyError
        The dataset has no fit.
    """
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(
            "FitResult.plot needs matplotlib, which is not installed; install it with "
            "pip install 'bulkem[plot]' (or pip install matplotlib)."
        ) from None
    values = dataset_values(result, dataset)
    if values.ndim == 2:
        values = values[:, dim]
    lo, hi = _view(values, tail) if xlim is None else xlim
    discrete = getattr(result._model.family, "discrete", False)  # counts: at the integers
    if discrete:
        lo, hi = max(np.floor(lo), 0.0), max(np.ceil(hi), 1.0)
        grid = np.arange(lo, hi + 1.0)
        lo, hi = lo - 0.5, hi + 0.5
    else:
        grid = np.linspace(lo, hi, points)
    comp = component_densities(result, dataset, grid, dim)
    if ax is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    # Densities over all the values, so that the bars match the fitted curve
    # even when some values lie outside the drawn range.
    shown = values[(values >= lo) & (values <= hi)]
    edges = (np.append(grid - 0.5, grid[-1] + 0.5) if discrete and isinstance(bins, str)
             else np.histogram_bin_edges(shown, bins=bins, range=(lo, hi)))
    counts, _ = np.histogram(values, bins=edges)
    n = len(values)
    outside = n - int(counts.sum())
    label = f"data ({n} values" + (f"; {outside} outside the plot)" if outside else ")")
    ax.stairs(counts / (n * np.diff(edges)), edges, fill=True, color="0.85", label=label)
    ax.stairs(counts / (n * np.diff(edges)), edges, color="0.6")
    mark = dict(marker="o", ms=3) if discrete else {}
    ax.plot(grid, comp.sum(axis=1), color="navy", lw=2, label="fitted mixture", **mark)
    weights = result.params(dataset)["weight"]
    for j in range(comp.shape[1]):
        ax.plot(grid, comp[:, j], "--", lw=1.3,
                label=f"component {j + 1} (weight {weights[j]:.2f})", **mark)
    ax.set_xlim(lo, hi)
    xlabel = "value" if result.n_dims == 1 else f"coordinate {dim + 1}"
    ax.set(xlabel=xlabel, ylabel="probability" if discrete else "density",
           title=f"dataset {dataset}: {result.n_components}-component {result.family} mixture")
    ax.legend(frameon=False)
    return ax
