"""The rpy2 bridge: conversions both ways, tables to R, R data sets, and the
fitted density checked against R's statmod::dinvgauss."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import bulkem
from bulkem.interop import rbridge


def _r_or_skip():
    try:
        rp = rbridge._rpy2()
    except ImportError as err:
        pytest.skip(f"rpy2/R not usable: {err}")
    return rp


@pytest.fixture(scope="module")
def ro():
    return _r_or_skip().ro


@pytest.fixture(scope="module")
def small_fit():
    data = bulkem.datasets.simulate_demo(2, 300, seed=3)
    return data, bulkem.fit(data, n_starts=3, seed=11, backend="cpu", progress=False)


def r_eval(ro, code):
    """Evaluate R code with rpy2's plain conversion; the result stays an R object."""
    from rpy2.robjects import default_converter
    from rpy2.robjects.conversion import localconverter

    with localconverter(default_converter):
        return ro.r(code)


def r_values(ro, obj):
    """An R atomic vector -> list of Python values (NA -> None)."""
    from rpy2.robjects import default_converter
    from rpy2.robjects.conversion import localconverter

    with localconverter(default_converter):
        na = list(ro.r["is.na"](obj))
        return [None if m else v for v, m in zip(obj, na, strict=True)]


def test_import_without_rpy2_then_calls_say_how_to_get_it(monkeypatch):
    # Hide rpy2 (None in sys.modules makes its import fail), then load a fresh
    # copy of the module: importing works, calling says how to get rpy2.
    for name in [m for m in sys.modules if m == "rpy2" or m.startswith("rpy2.")] + ["rpy2"]:
        monkeypatch.setitem(sys.modules, name, None)
    spec = importlib.util.spec_from_file_location("rbridge_without_rpy2", rbridge.__file__)
    fresh = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fresh)
    for call in (lambda: fresh.r_to_datasets(None), lambda: fresh.load_r_dataset("bmi", "mixsmsn"),
                 lambda: fresh.table_to_r(pd.DataFrame({"a": [1]}))):
        with pytest.raises(ImportError, match=r"needs rpy2.*pip install \"bulkem\[r\]\""):
            call()


def test_numeric_vectors_round_trip_with_na(ro):
    x = rbridge.r_to_datasets(r_eval(ro, "c(1.5, NA, 3, NaN)"))
    assert isinstance(x, np.ndarray) and x.dtype == np.float64
    np.testing.assert_array_equal(x, [1.5, np.nan, 3.0, np.nan])
    # integer NA must not become -2147483648
    np.testing.assert_array_equal(rbridge.r_to_numpy(r_eval(ro, "c(1L, NA, 3L)")),
                                  [1.0, np.nan, 3.0])
    np.testing.assert_array_equal(rbridge.r_to_numpy(r_eval(ro, "c(TRUE, NA)")),
                                  [1.0, np.nan])
    back = rbridge.datasets_to_r(x)
    assert list(ro.r["class"](back)) == ["numeric"]
    assert r_values(ro, ro.r["is.na"](back)) == [False, True, False, True]
    np.testing.assert_array_equal(rbridge.r_to_numpy(back), x)
    with pytest.raises(TypeError, match="expected a numeric vector"):
        rbridge.r_to_numpy(r_eval(ro, 'c("a", "b")'))
    with pytest.raises(TypeError, match="expected an R vector"):
        rbridge.r_to_numpy([1.0, 2.0])


def test_lists_round_trip(ro):
    unnamed = rbridge.r_to_datasets(r_eval(ro, "list(c(1, 2, 3), 4:6)"))
    assert isinstance(unnamed, list) and len(unnamed) == 2
    np.testing.assert_array_equal(unnamed[1], [4.0, 5.0, 6.0])
    named = rbridge.r_to_datasets(r_eval(ro, "list(a = c(1, NA), b = 7)"))
    assert list(named) == ["a", "b"]
    np.testing.assert_array_equal(named["a"], [1.0, np.nan])
    np.testing.assert_array_equal(named["b"], [7.0])

    back = rbridge.datasets_to_r(named)
    assert list(ro.r["names"](back)) == ["a", "b"]
    again = rbridge.r_to_datasets(back)
    np.testing.assert_array_equal(again["a"], named["a"])
    back = rbridge.datasets_to_r(unnamed)
    assert ro.r["names"](back) is ro.NULL or len(ro.r["names"](back)) == 0
    assert all(np.array_equal(a, b) for a, b in
               zip(rbridge.r_to_datasets(back), unnamed, strict=True))

    with pytest.raises(ValueError, match="some names empty"):
        rbridge.r_to_datasets(r_eval(ro, "list(a = 1, 2)"))
    with pytest.raises(TypeError, match="expected a numeric vector"):
        rbridge.r_to_datasets(r_eval(ro, 'list(a = 1, b = "x")'))


def test_data_frames_round_trip(ro):
    r_df = r_eval(ro, 'data.frame(dataset = factor(c("u", "u", "v")), value = c(1, NA, 2),'
                      " n = c(1L, NA, 3L))")
    df = rbridge.r_to_datasets(r_df)
    assert isinstance(df, pd.DataFrame)
    assert list(df.columns) == ["dataset", "value", "n"]
    assert list(df["dataset"]) == ["u", "u", "v"]
    np.testing.assert_array_equal(df["value"], [1.0, np.nan, 2.0])
    np.testing.assert_array_equal(df["n"], [1.0, np.nan, 3.0])
    back = rbridge.datasets_to_r(df)
    assert list(ro.r["names"](back)) == ["dataset", "value", "n"]
    assert r_values(ro, back.rx2("dataset")) == ["u", "u", "v"]
    assert r_values(ro, back.rx2("value")) == [1.0, None, 2.0]


def test_fit_r_equals_fit_on_the_same_data(ro, small_fit):
    data, expected = small_fit
    r_list = rbridge.datasets_to_r({"a": data[0], "b": data[1]})
    got = rbridge.fit_r(r_list, n_starts=3, seed=11, backend="cpu", progress=False)
    assert list(got.summary["dataset"]) == ["a", "b"]
    np.testing.assert_array_equal(got.summary["loglik"], expected.summary["loglik"])
    np.testing.assert_array_equal(got.components[["weight", "mu", "lambda"]],
                                  expected.components[["weight", "mu", "lambda"]])
    # R NA -> NaN -> invalid_data for that dataset only
    r_bad = r_eval(ro, "list(c(1, NA, 3, 4, 5, 6, 7))")
    with pytest.warns(UserWarning, match="invalid"):
        bad = rbridge.fit_r(r_eval(ro, "list(c(1, NA, 3, 4, 5, 6, 7), c(1, 2, 3, 4, 5, 6, 9))"),
                            n_starts=1, seed=1, backend="cpu", progress=False)
    assert list(bad.summary["status"])[0] == "invalid_data"
    assert rbridge.r_to_datasets(r_bad)[0].shape == (7,)


def test_tables_to_r_data_frames(ro, small_fit):
    _, fit = small_fit
    r_summary = rbridge.table_to_r(fit.summary)
    assert list(ro.r["class"](r_summary)) == ["data.frame"]
    assert list(ro.r["names"](r_summary)) == list(fit.summary.columns)
    assert ro.r["nrow"](r_summary)[0] == len(fit.summary)
    assert r_values(ro, r_summary.rx2("status")) == list(fit.summary["status"])
    assert list(ro.r["class"](r_summary.rx2("n_obs"))) == ["integer"]
    assert list(ro.r["class"](r_summary.rx2("converged"))) == ["logical"]
    np.testing.assert_allclose(r_values(ro, r_summary.rx2("loglik")), fit.summary["loglik"])

    tables = rbridge.result_to_r(fit, dataset_offset=1)
    assert list(ro.r["names"](tables)) == ["summary", "components", "starts", "start_values"]
    starts = tables.rx2("starts")
    assert r_values(ro, starts.rx2("start")) == list(fit.starts["start"] + 1)
    assert r_values(ro, starts.rx2("dataset")) == list(fit.starts["dataset"] + 1)
    comp = tables.rx2("components")
    np.testing.assert_array_equal(r_values(ro, comp.rx2("mu")), fit.components["mu"])

    # object columns: mixed ids and None messages
    mixed = pd.DataFrame({"dataset": pd.Series(["a", 3], dtype=object),
                          "message": pd.Series([None, "x"], dtype=object)})
    r_mixed = rbridge.table_to_r(mixed)
    assert r_values(ro, r_mixed.rx2("dataset")) == ["a", "3"]
    assert r_values(ro, r_mixed.rx2("message")) == [None, "x"]


def test_density_matches_statmod_dinvgauss_mixture(ro, small_fit):
    from rpy2.robjects import default_converter
    from rpy2.robjects.conversion import localconverter

    with localconverter(default_converter):
        if not ro.r["requireNamespace"]("statmod", quietly=True)[0]:
            pytest.skip("R package statmod is not installed")
    _, fit = small_fit
    x = np.array([0.01, 0.2, 0.9, 1.0, 1.1, 2.5, 3.0, 8.0, 20.0])
    for ds in fit.summary["dataset"]:
        p = fit.params(ds)
        with localconverter(default_converter):
            f = ro.r(
                "function(x, w, mu, lambda) rowSums(sapply(seq_along(w), function(j)"
                " w[j] * statmod::dinvgauss(x, mean = mu[j], shape = lambda[j])))"
            )
            r_dens = np.array(f(ro.FloatVector(x), ro.FloatVector(p["weight"]),
                                ro.FloatVector(p["mu"]), ro.FloatVector(p["lambda"])))
        np.testing.assert_allclose(fit.density(ds, x), r_dens, rtol=1e-10, atol=1e-300)


def test_load_r_dataset(ro):
    faithful = rbridge.load_r_dataset("faithful", "datasets")
    assert list(faithful.columns) == ["eruptions", "waiting"]
    assert len(faithful) == 272
    precip = rbridge.load_r_dataset("precip", "datasets")
    assert list(precip.columns) == ["precip"]
    with pytest.raises(LookupError, match="no data set named"):
        rbridge.load_r_dataset("no_such_data", "datasets")
    with pytest.raises(LookupError, match="not installed"):
        rbridge.load_r_dataset("bmi", "no.such.package")


def test_bmi_shipped_in_both_packages(ro, tmp_path, monkeypatch):
    from rpy2.robjects import default_converter
    from rpy2.robjects.conversion import localconverter

    # Python's package data, read from any working directory (no ../shared, no mixsmsn) ...
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BULKEM_BMI_CSV", raising=False)
    values = bulkem.datasets.load_bmi()
    assert values.shape == (2107,) and values.dtype == np.float64
    assert np.all(values > 0)
    # ... equals the R package's data set bmi (r_wrapper/data/bmi.rda), value for value
    rda = Path(__file__).resolve().parent.parent / "r_wrapper" / "data" / "bmi.rda"
    env = r_eval(ro, "new.env()")
    with localconverter(default_converter):
        ro.r["load"](str(rda), envir=env)
        frame = env["bmi"]
    r_bmi = rbridge.r_to_pandas(frame)
    assert list(r_bmi.columns) == ["bmi"]
    np.testing.assert_array_equal(r_bmi["bmi"].to_numpy(), values)


def test_result_to_r_numbers_positions_from_1_and_keeps_hmm_transitions(ro, small_fit):
    _, fit = small_fit  # a Python list: ids are positions 0, 1
    tables = rbridge.result_to_r(fit)
    assert r_values(ro, tables.rx2("summary").rx2("dataset")) == [1, 2]
    assert r_values(ro, tables.rx2("starts").rx2("dataset")) == list(fit.starts["dataset"] + 1)
    kept = rbridge.result_to_r(fit, dataset_offset=0)
    assert r_values(ro, kept.rx2("summary").rx2("dataset")) == [0, 1]
    # fit_r records how R gave the datasets: positions of an unnamed list, names, labels
    r_list = r_eval(ro, "list(c(0.8, 1.2, 1, 3.1, 2.7, 3.3, 0.9, 3), c(1, 2, 3, 1.5, 2.5, 0.7))")
    res = rbridge.fit_r(r_list, n_starts=1, seed=1, backend="cpu", progress=False)
    assert res.r_ids == "position"
    assert r_values(ro, rbridge.result_to_r(res).rx2("summary").rx2("dataset")) == [1, 2]
    frame = r_eval(ro, "data.frame(dataset = rep(c(5L, 9L), each = 6), "
                       "value = c(0.8, 1.2, 1, 3.1, 2.7, 3.3, 1, 2, 3, 1.5, 2.5, 0.7))")
    res = rbridge.fit_r(frame, n_starts=1, seed=1, backend="cpu", progress=False)
    assert res.r_ids == "label"
    assert r_values(ro, rbridge.result_to_r(res).rx2("summary").rx2("dataset")) == [5, 9]
    # a hidden Markov model's transitions (and each start's) reach R
    seqs = [np.array([0, 1, 1, 0, 2, 2, 1, 0, 0, 1]), np.array([2, 2, 1, 0, 1, 1, 2, 0])]
    hmm = bulkem.fit(seqs, family="hmm", n_components=2, n_starts=2, seed=3, max_iter=5,
                     backend="cpu", progress=False)
    r_hmm = rbridge.result_to_r(hmm)
    names = list(ro.r["names"](r_hmm))
    assert names[:4] == ["summary", "components", "starts", "start_values"]
    assert "transitions" in names and "start_transitions" in names
    tr = r_hmm.rx2("transitions")
    assert r_values(ro, tr.rx2("dataset")) == list(hmm.transitions["dataset"] + 1)
    np.testing.assert_array_equal(r_values(ro, tr.rx2("prob")), hmm.transitions["prob"])
    st = r_hmm.rx2("start_transitions")
    assert r_values(ro, st.rx2("start")) == list(hmm.start_transitions["start"] + 1)
