"""The command line."""

from __future__ import annotations

import numpy as np
import pandas as pd
from conftest import demo

from bulkem.cli import main


def test_fit_writes_the_tables(tmp_path, capsys):
    a, b = demo(2, 80, 1)
    src = tmp_path / "long.csv"
    pd.DataFrame({"dataset": ["a"] * 80 + ["b"] * 80, "value": np.r_[a, b]}).to_csv(src,
                                                                                   index=False)
    out = tmp_path / "fits.csv"
    assert main(["fit", str(src), "--components", "2", "--starts", "3", "--out", str(out),
                 "--backend", "cpu", "--quiet"]) == 0
    summary = pd.read_csv(out)
    assert list(summary.dataset) == ["a", "b"]
    assert len(pd.read_csv(tmp_path / "fits.components.csv")) == 4
    assert len(pd.read_csv(tmp_path / "fits.starts.csv")) == 6
    assert "2 datasets fitted on cpu" in capsys.readouterr().out


def test_fit_parquet_and_errors(tmp_path, capsys):
    src = tmp_path / "long.parquet"
    pd.DataFrame({"dataset": [1] * 50, "value": demo(1, 50, 2)[0]}).to_parquet(src)
    assert main(["fit", str(src), "--starts", "2", "--out", str(tmp_path / "f.csv"),
                 "--backend", "cpu", "--quiet"]) == 0
    assert main(["fit", str(src), "--starts", "0", "--backend", "cpu"]) == 2
    assert "n_starts must be >= 1" in capsys.readouterr().err


def test_demo_reports_speed_and_accuracy(capsys):
    assert main(["demo", "--datasets", "5", "--obs", "300", "--starts", "2", "--backend", "cpu",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "fits/s" in out and "median relative error" in out


def test_fit_gaussian_long_table(tmp_path):
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, (40, 2)), rng.normal(6, 1, (40, 2))]
    src = tmp_path / "g.csv"
    pd.DataFrame({"dataset": "g", "x1": x[:, 0], "x2": x[:, 1]}).to_csv(src, index=False)
    out = tmp_path / "g_fits.csv"
    assert main(["fit", str(src), "--family", "gaussian", "--components", "2", "--starts", "2",
                 "--out", str(out), "--backend", "cpu", "--quiet"]) == 0
    comp = pd.read_csv(tmp_path / "g_fits.components.csv")
    assert list(comp.columns) == ["dataset", "component", "weight", "mean_1", "mean_2", "var_1",
                                  "var_2"]
    assert np.allclose(sorted(comp.mean_1), [0, 6], atol=0.6)
