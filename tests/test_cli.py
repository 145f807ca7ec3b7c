"""The command line: tables out, and bad input stopped before fitting, in one line."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest
from conftest import demo

import bulkem
from bulkem.interop import cli
from bulkem.interop.cli import main

FIT = ["--starts", "2", "--max-iter", "20", "--backend", "cpu", "--quiet"]


def _long_csv(path, n_datasets=2, n_obs=60):
    data = demo(n_datasets, n_obs, 1)
    ids = np.repeat([f"d{k}" for k in range(n_datasets)], n_obs)
    pd.DataFrame({"dataset": ids, "value": np.concatenate(data)}).to_csv(path, index=False)
    return path


@pytest.fixture
def no_fit(monkeypatch):
    """Fails the test if the command gets as far as fitting."""

    def refuse(*args, **kwargs):
        raise AssertionError("fit was called")

    monkeypatch.setattr(cli, "fit", refuse)


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


def test_fit_with_a_weight_column(tmp_path, capsys):
    """``--weight-col`` is ``bulkem.fit(weights=...)``, in memory and streamed."""
    a, b = demo(2, 80, 1)
    w = np.r_[np.ones(80), np.full(80, 2.0)]
    frame = pd.DataFrame({"dataset": ["a"] * 80 + ["b"] * 80, "value": np.r_[a, b], "w": w})
    src = tmp_path / "long.csv"
    frame.to_csv(src, index=False)
    out = tmp_path / "fits.csv"
    assert main(["fit", str(src), "--starts", "2", "--out", str(out), "--backend", "cpu",
                 "--quiet", "--weight-col", "w"]) == 0
    summary = pd.read_csv(out)
    assert summary.sum_weights.tolist() == [80.0, 160.0]
    ref = bulkem.fit(frame, n_starts=2, seed=1, backend="cpu", weights="w")
    np.testing.assert_allclose(summary.loglik, ref.summary.loglik, rtol=1e-12)
    streamed = tmp_path / "s.csv"
    assert main(["fit", str(src), "--starts", "2", "--weight-col", "w", "--chunk-datasets", "1",
                 "--out", str(streamed), "--backend", "cpu", "--quiet"]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(streamed), summary)


def test_fit_parquet_and_errors(tmp_path, capsys):
    src = tmp_path / "long.parquet"
    pd.DataFrame({"dataset": [1] * 50, "value": demo(1, 50, 2)[0]}).to_parquet(src)
    assert main(["fit", str(src), "--starts", "2", "--out", str(tmp_path / "f.csv"),
                 "--backend", "cpu", "--quiet"]) == 0
    assert main(["fit", str(src), "--starts", "0", "--backend", "cpu"]) == 2
    assert "argument --starts: must be >= 1, got 0" in capsys.readouterr().err


def test_demo_reports_speed_and_accuracy(capsys):
    assert main(["demo", "--datasets", "5", "--obs", "300", "--starts", "2", "--backend", "cpu",
                 "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "fits/s" in out and "median relative error" in out


def test_fit_gaussian_long_table(tmp_path):
    # (D = 3 and M = 2: the sizes the other tests compile)
    rng = np.random.default_rng(0)
    x = np.r_[rng.normal(0, 1, (40, 3)), rng.normal(6, 1, (40, 3))]
    src = tmp_path / "g.csv"
    pd.DataFrame({"dataset": "g", "x1": x[:, 0], "x2": x[:, 1], "x3": x[:, 2]}).to_csv(
        src, index=False)
    out = tmp_path / "g_fits.csv"
    assert main(["fit", str(src), "--family", "gaussian", "--covariance-type", "full",
                 "--components", "2", "--starts", "2", "--out", str(out), "--backend", "cpu",
                 "--quiet"]) == 0
    comp = pd.read_csv(tmp_path / "g_fits.components.csv")
    assert list(comp.columns)[:6] == ["dataset", "component", "weight", "mean_1", "mean_2",
                                      "mean_3"]
    assert list(comp.columns)[-3:] == ["cov_3_1", "cov_3_2", "cov_3_3"]
    assert np.allclose(sorted(comp.mean_1), [0, 6], atol=0.6)
    src1 = tmp_path / "g1.csv"  # one column: D = 1
    pd.DataFrame({"dataset": "g", "x1": x[:, 0]}).to_csv(src1, index=False)
    assert main(["fit", str(src1), "--family", "gaussian", "--components", "2", "--starts", "2",
                 "--out", str(out), "--backend", "cpu", "--quiet"]) == 0
    comp = pd.read_csv(tmp_path / "g_fits.components.csv")
    assert list(comp.columns) == ["dataset", "component", "weight", "mean_1", "var_1"]
    assert np.allclose(sorted(comp.mean_1), [0, 6], atol=0.6)


def test_parquet_out_writes_parquet_for_every_table(tmp_path, capsys):
    src = _long_csv(tmp_path / "long.csv")
    assert main(["fit", str(src), "--out", str(tmp_path / "fits.parquet"), *FIT]) == 0
    names = ["fits.parquet", "fits.components.parquet", "fits.starts.parquet",
             "fits.start_values.parquet"]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["long.csv", *names])
    for name in names:
        assert (tmp_path / name).read_bytes()[:4] == b"PAR1"
    summary = pd.read_parquet(tmp_path / "fits.parquet")
    assert list(summary.dataset) == ["d0", "d1"]
    assert len(pd.read_parquet(tmp_path / "fits.starts.parquet")) == 4
    out = capsys.readouterr().out
    assert "2 datasets fitted on cpu" in out and "fits.start_values.parquet" in out


@pytest.mark.parametrize(
    ("out", "words"),
    [
        ("missing/fits.csv", "the folder {tmp}/missing does not exist; create it first."),
        ("fits.txt", "unknown format '.txt'; expected a file name ending in .csv, .parquet, .pq"),
        ("fits", "unknown format '(no suffix)'"),
        ("long.csv", "would overwrite the input"),
        ("folder.csv", "folder.csv is a folder; expected a file name"),
    ],
)
def test_bad_outputs_stop_before_fitting(tmp_path, capsys, no_fit, out, words):
    src = _long_csv(tmp_path / "long.csv")
    (tmp_path / "folder.csv").mkdir()
    before = sorted(tmp_path.iterdir())
    assert main(["fit", str(src), "--out", str(tmp_path / out), *FIT]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bulkem: error: --out ")
    assert words.format(tmp=tmp_path) in err
    assert sorted(tmp_path.iterdir()) == before


def test_read_only_folder_and_no_parquet_engine_stop_before_fitting(tmp_path, capsys, no_fit,
                                                                     monkeypatch):
    src = _long_csv(tmp_path / "long.csv")
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if str(p) == str(tmp_path)
                        else real_access(p, mode))  # chmod does not bind root
    assert main(["fit", str(src), "--out", str(tmp_path / "f.csv"), *FIT]) == 2
    assert f"the folder {tmp_path} is not writable" in capsys.readouterr().err
    monkeypatch.setattr(os, "access", real_access)
    monkeypatch.setattr(cli.importlib.util, "find_spec", lambda name: None)
    assert main(["fit", str(src), "--out", str(tmp_path / "f.parquet"), *FIT]) == 2
    assert "writing Parquet needs pyarrow" in capsys.readouterr().err


def test_an_error_while_writing_leaves_nothing_half_written(tmp_path, capsys, monkeypatch):
    src = _long_csv(tmp_path / "long.csv")
    (tmp_path / "fits.csv").write_text("old summary\n")
    real = pd.DataFrame.to_csv
    calls = []

    def fail_third(self, path, **kwargs):
        calls.append(path)
        if len(calls) == 3:
            raise OSError("No space left on device")
        return real(self, path, **kwargs)

    monkeypatch.setattr(pd.DataFrame, "to_csv", fail_third)
    assert main(["fit", str(src), "--out", str(tmp_path / "fits.csv"), *FIT]) == 2
    assert capsys.readouterr().err == "bulkem: error: No space left on device\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fits.csv", "long.csv"]
    assert (tmp_path / "fits.csv").read_text() == "old summary\n"


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("", "input {src} is empty; expected a table with a header line"),
        ("dataset,value\n", "input {src} has columns ['dataset', 'value'] but no rows."),
        ("id,value\na,1.5\n", "input {src} has columns ['id', 'value']; expected a 'dataset' "
         "column naming the dataset of each row. Pass --dataset-col to name another."),
        ("dataset,value\na,1.5\na,x\n", "dataset 'a' holds non-numeric values"),
    ],
)
def test_bad_input_files_say_which_file_in_one_line(tmp_path, capsys, content, words):
    src = tmp_path / "in.csv"
    src.write_text(content)
    assert main(["fit", str(src), "--out", str(tmp_path / "f.csv"), *FIT]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words.format(src=src) in err
    assert "pandas" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_missing_input_is_named(tmp_path, capsys, no_fit):
    assert main(["fit", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "f.csv")]) == 2
    assert capsys.readouterr().err == (f"bulkem: error: input {tmp_path / 'nope.csv'} does not "
                                       "exist; expected a CSV or Parquet file.\n")


def test_warnings_are_one_line_and_every_problem_is_reported(tmp_path, capsys):
    good = demo(1, 60, 3)[0]
    src = tmp_path / "long.csv"
    pd.DataFrame({"dataset": ["ok"] * 60 + ["bad"] * 2, "value": np.r_[good, 1.0, np.nan]}
                 ).to_csv(src, index=False)
    assert main(["fit", str(src), "--out", str(tmp_path / "f.csv"), *FIT]) == 0
    captured = capsys.readouterr()
    assert captured.err == ("bulkem: warning: 1 of 2 datasets are invalid and were not fitted; "
                            "see the status and message columns of the summary.\n")
    assert "2 datasets fitted" in captured.out
    summary = pd.read_csv(tmp_path / "f.csv").set_index("dataset")
    assert summary.message["bad"] == ("too short: 2 values, at least 6 needed for this number "
                                      "of components; 1 of 2 values is NaN or infinite")


def test_one_dataset_is_singular(tmp_path, capsys):
    src = _long_csv(tmp_path / "long.csv", n_datasets=1)
    assert main(["fit", str(src), "--out", str(tmp_path / "f.csv"), *FIT]) == 0
    assert "1 dataset fitted on cpu" in capsys.readouterr().out


def test_help_is_plain_and_complete(capsys):
    assert main(["--help"]) == 0
    top = capsys.readouterr().out
    assert "``" not in top and "bulkem demo" in top
    assert main(["fit", "--help"]) == 0
    text = capsys.readouterr().out
    assert "``" not in text
    assert "{" + ",".join(bulkem.FAMILIES) + "}" in text
    parser = cli.build_parser()
    subs = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    for name, sub in subs.choices.items():
        for action in sub._actions:
            assert action.help, f"bulkem {name} {action.option_strings or action.dest}: no help"
    family = next(a for a in subs.choices["fit"]._actions if a.dest == "family")
    assert list(family.choices) == list(bulkem.FAMILIES)


def test_cpu_fits_never_import_numba_cuda():
    """Start-up: importing numba.cuda costs ~0.6 s, so CPU fits leave it alone.

    ``backend="auto"`` too, where no NVIDIA driver can be present (Linux
    without its device files, as on CI).
    """
    code = (
        "import sys, numpy as np, bulkem\n"
        "from bulkem import api\n"
        "x = [np.random.default_rng(1).wald(1.0, 2.0, 100)]\n"
        "kw = dict(n_starts=2, max_iter=3, progress=False)\n"
        "bulkem.fit(x, backend='cpu', **kw)\n"
        "if not api._may_have_gpu():\n"
        "    assert bulkem.fit(x, backend='auto', **kw).backend == 'cpu'\n"
        "print('numba.cuda' in sys.modules)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                         check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.parametrize("streamed", [False, True])
def test_out_of_memory_is_one_line_not_a_traceback(tmp_path, capsys, monkeypatch, streamed):
    src = _long_csv(tmp_path / "long.csv")

    def oom(*args, **kwargs):
        np.empty(2**40)  # 8 TiB: numpy's _ArrayMemoryError, a MemoryError

    monkeypatch.setattr(cli, "fit", oom)
    monkeypatch.setattr(bulkem.scale.stream.api, "fit", oom)
    argv = ["fit", str(src), "--out", str(tmp_path / "f.csv"), "--backend", "cpu", "--quiet"]
    assert main(argv + (["--chunk-datasets", "1"] if streamed else [])) == 1
    err = capsys.readouterr().err
    assert err.startswith("bulkem: error: out of memory (Unable to allocate")
    assert "--chunk-datasets N" in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("f*")) and not list(tmp_path.glob(".f*"))


def test_family_options_of_another_family_or_missing_are_refused(tmp_path, capsys, no_fit):
    src = _long_csv(tmp_path / "long.csv")
    argv = ["fit", str(src), "--out", str(tmp_path / "f.csv"), "--quiet"]
    assert main([*argv, "--family", "ar"]) == 2
    assert "--family ar needs --order P" in capsys.readouterr().err
    assert main([*argv, "--order", "2"]) == 2
    assert ("--order is an option of --family ar, not of --family invgauss"
            in capsys.readouterr().err)
    assert main([*argv, "--covariance-type", "full"]) == 2
    assert "--covariance-type is an option of --family gaussian" in capsys.readouterr().err
    assert main([*argv, "--family", "hmm", "--orders", "1", "2", "--chunk-datasets", "1"]) == 2
    assert "--orders is an option of --family tmap" in capsys.readouterr().err
