"""Checkpoints of every family: damaged chunks are found and named; kill -9, then resume.

Each family is fitted on a tiny long table (5 datasets, 2 a chunk, 2 starts, 5
iterations), once per family for the module, so that its kernels compile once.
"""

from __future__ import annotations

import re
import shutil
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import assert_same_tables, run_and_kill

import bulkem
from bulkem import api
from bulkem.interop.cli import main
from bulkem.scale import checkpoint, combine
from bulkem.tuning import Tuning

pytest.importorskip("pyarrow")

FAMILIES = ("invgauss", "gaussian", "hmm", "tmap", "ar", "local_level")
N_DATASETS, PER_CHUNK, N_STARTS = 5, 2, 2
COMMON = dict(n_starts=N_STARTS, max_iter=5, seed=7, backend="cpu", progress=False,
              tuning=Tuning(checkpoint_chunk_fits=PER_CHUNK * N_STARTS))  # chunks of 2 datasets
# bulkem.fit's family options, and the same on the command line.
OPTIONS = {"invgauss": ({"n_components": 2}, ["--components", "2"]),
           "gaussian": ({"n_components": 2}, ["--components", "2"]),
           "hmm": ({"n_components": 2, "emission": "categorical", "n_symbols": 4},
                   ["--components", "2", "--emission", "categorical", "--symbols", "4"]),
           "tmap": ({"orders": (1, 2, 3)}, ["--components", "3", "--orders", "1", "2", "3"]),
           "ar": ({"order": 2}, ["--order", "2"]),
           "local_level": ({}, [])}


def family_frame(family: str, n: int = N_DATASETS, seed: int = 0) -> pd.DataFrame:
    """A long table of ``n`` tiny datasets of the family (columns dataset[, unit], value)."""
    rng = np.random.default_rng(seed)
    rows = []
    for d in range(n):
        name = f"d{d}"
        if family in ("invgauss", "gaussian"):
            v = np.where(rng.random(40) < 0.4, rng.wald(1.0, 20.0, 40), rng.wald(3.0, 5.0, 40))
            rows += [(name, 0, x) for x in v]
        elif family == "hmm":  # two sequences of symbols 0..3
            rows += [(name, s, float(x)) for s in range(2) for x in rng.integers(0, 4, 12 + s)]
        elif family == "tmap":  # six runs of 2-4 inter-arrival times
            rows += [(name, r, x) for r in range(6)
                     for x in rng.exponential(rng.choice([0.5, 2.0]), rng.integers(2, 5))]
        else:  # ar, local_level: one series of 30 steps
            x = np.zeros(30)
            for t in range(2, 30):
                x[t] = 0.5 * x[t - 1] - 0.2 * x[t - 2] + rng.normal()
            if family == "local_level":
                x = np.cumsum(rng.normal(size=30)) + rng.normal(size=30)
            rows += [(name, 0, v) for v in x]
    unit = {"hmm": "sequence", "tmap": "run"}.get(family, "unit")
    df = pd.DataFrame(rows, columns=["dataset", unit, "value"])
    return df if unit != "unit" else df.drop(columns="unit")


def fit_kwargs(family: str) -> dict:
    return {"family": family, **COMMON, **OPTIONS[family][0]}


_MADE: dict = {}


@pytest.fixture
def made(tmp_path_factory):
    """``made(family)``: (frame, kwargs, the in-memory fit, a fresh copy of a complete
    checkpoint of 3 chunks); each family fitted once for the module."""

    def make(family: str):
        if family not in _MADE:
            df, kw = family_frame(family), fit_kwargs(family)
            run = tmp_path_factory.mktemp(f"made-{family}") / "run"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ref = api.fit(df, **kw)
                bulkem.fit(df, checkpoint=run, **kw)
            assert checkpoint.RunDir(run).finished() == {0, 1, 2}
            _MADE[family] = (df, kw, ref, run)
        df, kw, ref, run = _MADE[family]
        copy = tmp_path_factory.mktemp(f"copy-{family}") / "run"
        shutil.copytree(run, copy)
        return df, kw, ref, copy

    return make


# --- damaged checkpoints -----------------------------------------------------------


def _flip(path: Path, at: float = 0.5) -> None:
    data = bytearray(path.read_bytes())
    k = int(len(data) * at)
    data[k] ^= 0x10
    path.write_bytes(bytes(data))


def corrupt(run: Path, how: str) -> str:
    """Damage chunk 1 of ``run`` (or its manifest); the words the error must say."""
    c1, c0 = run / "chunk-000001", run / "chunk-000000"
    if how == "copied summary":
        shutil.copy(c0 / "summary.parquet", c1 / "summary.parquet")
    elif how == "copied chunk":  # the whole folder of another chunk
        shutil.rmtree(c1)
        shutil.copytree(c0, c1)
    elif how == "byte flip":
        _flip(c1 / "summary.parquet")
    elif how == "byte flip in best":
        _flip(c1 / "best.parquet", 0.3)
    elif how == "truncated":
        p = c1 / "summary.parquet"
        p.write_bytes(p.read_bytes()[: p.stat().st_size // 2])
    elif how == "missing file":
        (c1 / "components.parquet").unlink()
    elif how == "missing meta":
        (c1 / "meta.json").unlink()
    elif how == "garbage meta":
        (c1 / "meta.json").write_bytes(b"\x00\xffnot json")
    elif how == "edited meta":
        p = c1 / "meta.json"
        p.write_text(p.read_text().replace('"chunk": 1', '"chunk": 2'))
    elif how == "missing manifest":
        (run / "manifest.json").unlink()
        return "manifest.json"
    elif how == "garbage manifest":
        (run / "manifest.json").write_text('{"format": "bulkem-checkpoint-2", "argu')
        return "manifest.json"
    elif how == "edited manifest":
        p = run / "manifest.json"
        p.write_text(p.read_text().replace('"chunk_datasets": 2', '"chunk_datasets": 3'))
        return "manifest.json"
    else:
        raise AssertionError(how)
    return "chunk-000001"


DAMAGE = ("copied summary", "copied chunk", "byte flip", "byte flip in best", "truncated",
          "missing file", "missing meta", "garbage meta", "edited meta", "missing manifest",
          "garbage manifest", "edited manifest")


@pytest.mark.parametrize("how", DAMAGE)
def test_damaged_checkpoint_is_found_and_named(made, how):
    df, kw, ref, run = made("invgauss")
    words = corrupt(run, how)
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(words)) as err:
        bulkem.fit(df, checkpoint=run, **kw)
    assert "delete" in str(err.value).lower()
    if words == "chunk-000001":  # delete what the message says: that chunk is fitted again
        assert "chunk 1 is damaged" in str(err.value)
        shutil.rmtree(run / words)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            assert_same_tables(ref, bulkem.fit(df, checkpoint=run, **kw))


def test_every_byte_flip_is_found(made):
    """40 flips spread over each file of a chunk: each is found (one of 40 changed an aic
    silently before)."""
    _, _, _, run = made("invgauss")
    folder = run / "chunk-000001"
    for path in sorted(folder.iterdir()):
        clean = path.read_bytes()
        for k in np.linspace(0, len(clean) - 1, 40).astype(int):
            path.write_bytes(clean[:k] + bytes([clean[k] ^ 0x01]) + clean[k + 1:])
            with pytest.raises(checkpoint.CheckpointError, match="chunk 1 is damaged"):
                checkpoint.RunDir(run).read(1)
        path.write_bytes(clean)
    checkpoint.RunDir(run).read(1)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("how", ["copied summary", "byte flip", "truncated", "garbage meta",
                                 "garbage manifest"])
def test_damaged_checkpoint_of_every_family(made, family, how):
    df, kw, ref, run = made(family)
    words = corrupt(run, how)
    with pytest.raises(checkpoint.CheckpointError, match=re.escape(words)):
        bulkem.fit(df, checkpoint=run, **kw)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("how", ["copied summary", "byte flip", "missing meta"])
def test_damaged_streamed_checkpoint_is_named_by_the_cli(made, tmp_path, capsys, family, how):
    df, kw, ref, _ = made(family)
    src, out, kept = tmp_path / "in.csv", tmp_path / "fits.csv", tmp_path / "kept"
    df.to_csv(src, index=False)
    argv = ["fit", str(src), "--out", str(out), "--starts", str(N_STARTS), "--max-iter", "5",
            "--seed", "7", "--backend", "cpu", "--family", family, *OPTIONS[family][1],
            "--chunk-datasets", str(PER_CHUNK), "--checkpoint", str(kept), "--quiet"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main(argv) == 0
    whole = {p.name: p.read_bytes() for p in tmp_path.glob("fits.*")}
    words = corrupt(kept, how)
    assert main([*argv, "--resume"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("bulkem: error: ") and "Traceback" not in err
    assert "chunk 1 is damaged" in err and words in err
    shutil.rmtree(kept / words)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*argv, "--resume"]) == 0
    assert {p.name: p.read_bytes() for p in tmp_path.glob("fits.*")} == whole


# --- kill -9, then resume -------------------------------------------------------------

CHILD = """
import pathlib, sys, time, warnings
import pandas as pd
import bulkem
from bulkem.tuning import Tuning

warnings.simplefilter("ignore")
marker = pathlib.Path(sys.argv[2])

def progress(done, total):
    if done > {per_fits}:  # chunk 1 is being fitted: say so, and wait to be killed
        marker.write_text(str(done))
        time.sleep(600)

kw = {kw!r}
kw["progress"] = progress
kw["tuning"] = Tuning(checkpoint_chunk_fits={per_fits})
bulkem.fit(pd.read_pickle(sys.argv[3]), checkpoint=sys.argv[1], **kw)
"""

CLI_CHILD = """
import pathlib, sys, time, warnings
from bulkem import api
from bulkem.interop.cli import main

warnings.simplefilter("ignore")
marker = pathlib.Path(sys.argv[1])
plain, calls = api.fit, []

def fit(*a, **kw):  # chunks 0 and 1 are written: say so, and wait to be killed
    calls.append(1)
    if len(calls) == 3:
        marker.write_text("3")
        time.sleep(600)
    return plain(*a, **kw)

api.fit = fit
sys.exit(main(sys.argv[2:]))
"""


@pytest.mark.parametrize("family", FAMILIES)
def test_fit_killed_then_resumed_equals_an_uninterrupted_run(made, tmp_path, family):
    df, kw, ref, _ = made(family)  # (compiles the family's kernels for the child's cache)
    run, marker, data = tmp_path / "run", tmp_path / "in_chunk_1", tmp_path / "data.pkl"
    df.to_pickle(data)
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD.format(per_fits=PER_CHUNK * N_STARTS,
                                                   kw={k: v for k, v in kw.items()
                                                       if k not in ("progress", "tuning")})))
    run_and_kill([str(script), str(run), str(marker), str(data)], marker)
    assert checkpoint.RunDir(run).finished() in ({0}, {0, 1})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        resumed = bulkem.fit(df, checkpoint=run, **kw)
    assert checkpoint.RunDir(run).finished() == {0, 1, 2}
    assert_same_tables(ref, resumed)


@pytest.mark.parametrize("family", FAMILIES)
def test_cli_killed_leaves_readable_outputs_and_resume_completes(made, tmp_path, capsys,
                                                                 family):
    df, kw, ref, _ = made(family)
    src, out, marker = tmp_path / "in.parquet", tmp_path / "fits.parquet", tmp_path / "m"
    df.to_parquet(src)
    argv = ["fit", str(src), "--out", str(out), "--starts", str(N_STARTS), "--max-iter", "5",
            "--seed", "7", "--backend", "cpu", "--family", family, *OPTIONS[family][1],
            "--chunk-datasets", str(PER_CHUNK), "--quiet"]
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CLI_CHILD))
    run_and_kill([str(script), str(marker), *argv], marker)
    for p in tmp_path.glob("fits*.parquet"):  # what is there is readable
        pd.read_parquet(p)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert main([*argv, "--resume"]) == 0
    for name, table in combine.split(ref).tables.items():
        path = out if name == "summary" else tmp_path / f"fits.{name}.parquet"
        pd.testing.assert_frame_equal(table, pd.read_parquet(path), check_exact=True)
    assert not list(tmp_path.glob(".fits*"))  # no partial file left
