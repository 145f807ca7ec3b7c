"""FitResult.plot: histogram, fitted mixture and weighted components; matplotlib optional."""

from __future__ import annotations

import subprocess
import sys

import matplotlib
import numpy as np
import pytest
from conftest import demo

import bulkem
from bulkem.result import plotting

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(scope="module")
def ig_fit():
    data = demo(2, 300, 4)
    with pytest.warns(UserWarning, match="1 of 3 datasets are invalid"):
        res = bulkem.fit(data + [[1.0, np.nan]], n_starts=3, seed=2, backend="cpu",
                         progress=False)
    return res, data


def test_plot_draws_histogram_mixture_and_components(ig_fit, tmp_path):
    res, data = ig_fit
    ax = res.plot(1, bins=30, tail=0)
    lines = ax.get_lines()
    assert len(lines) == 1 + res.n_components
    grid, mixture = lines[0].get_data()
    assert np.allclose(mixture, res.density(1, grid), rtol=1e-12)
    assert np.allclose(sum(line.get_ydata() for line in lines[1:]), mixture, rtol=1e-12)
    assert len(ax.patches[0].get_data().values) == 30  # histogram bars
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:2] == ["data (300 values)", "fitted mixture"]
    assert labels[2].startswith("component 1 (weight")
    path = tmp_path / "fit.png"
    ax.figure.savefig(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    plt.close(ax.figure)
    assert np.array_equal(plotting.dataset_values(res, 1), data[1])


def test_plot_into_given_axes_and_errors(ig_fit):
    res, _ = ig_fit
    fig, axes = plt.subplots(1, 2)
    assert res.plot(0, ax=axes[1]) is axes[1]
    plt.close(fig)
    with pytest.raises(KeyError, match="dataset 2 has no fit: its status is 'invalid_data'"):
        res.plot(2)
    with pytest.raises(KeyError, match="no such dataset"):
        res.plot(7)


def test_gaussian_marginals(tmp_path):
    rng = np.random.default_rng(3)
    x = np.r_[rng.normal([0, 10], [1, 2], (150, 2)), rng.normal([5, 0], [1, 1], (150, 2))]
    res = bulkem.fit([x], family="gaussian", n_components=2, n_starts=3, seed=1,
                     backend="cpu", progress=False)
    grid = np.linspace(-30, 40, 20001)
    comp = plotting.component_densities(res, 0, grid, dim=1)
    mass = comp.sum(axis=0) * (grid[1] - grid[0])
    assert np.allclose(mass, res.params(0)["weight"], atol=1e-6)
    ax = res.plot(0, dim=1)
    assert ax.get_xlabel() == "coordinate 2"
    assert ax.get_legend().get_texts()[0].get_text().endswith("outside the plot)")
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="dim = 2"):
        plotting.component_densities(res, 0, grid, dim=2)


def test_without_matplotlib_the_error_says_what_to_install(ig_fit, monkeypatch):
    res, _ = ig_fit
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # import fails
    with pytest.raises(ImportError, match=r"pip install 'bulkem\[plot\]'"):
        res.plot(0)


def test_import_bulkem_does_not_import_matplotlib():
    code = "import sys, bulkem; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_counts_are_drawn_at_the_integers():
    """A Poisson fit: a bar per integer, the probabilities at the integers (the pmf)."""
    rng = np.random.default_rng(2)
    x = rng.poisson(np.r_[np.full(200, 2.0), np.full(100, 12.0)]).astype(float)
    res = bulkem.fit([x], family="poisson", n_components=2, n_starts=3, seed=1,
                     backend="cpu")
    ax = res.plot(0)
    mix = ax.get_lines()[0]
    assert np.array_equal(mix.get_xdata(), np.round(mix.get_xdata()))
    p = res.params(0)
    from scipy import stats
    want = (p["weight"] * stats.poisson.pmf(mix.get_xdata()[:, None], p["rate"])).sum(axis=1)
    assert np.allclose(mix.get_ydata(), want, rtol=1e-10)
    assert ax.get_ylabel() == "probability"
    plt.close(ax.figure)
