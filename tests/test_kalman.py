"""Kalman marginal likelihoods: engines against the NumPy oracle, statsmodels, and bad input.

The models are kept to three compiled shapes (AR(3): companion, 3 states,
1 observation; a 2-D random walk: identity, 2 x 2; a local linear trend:
dense, 2 x 1) so that the CPU engine compiles few programs.  CUDA tests run
under the simulator with 4 threads per block and scan chunks of 3 steps and
2 elements, so several blocks and every scan level run on tiny series.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
from kalman_reference import (
    kalman_filter,
    rts_smoother,
    scan_combine,
    scan_element,
    scan_loglik,
    splash_loglik,
)

import bulkem
from bulkem import StateSpace
from bulkem.models.ssm.kalman import make_kalman
from bulkem.models.ssm.plan import plan_levels
from bulkem.models.ssm.scan import make_scan
from bulkem.models.ssm.statespace import COMPANION, DENSE, IDENTITY
from bulkem.tuning import Tuning

RTOL = 1e-9


def ar3(obs_var=0.3):
    return StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=obs_var)


def rw2():
    return StateSpace.random_walk(2, q=0.5, r=1.0, p0=2.0)


def trend(level_var=0.1, slope_var=0.01, obs_var=1.0):
    """Local linear trend: level and slope, dense F = [[1, 1], [0, 1]]."""
    return StateSpace([[1.0, 1.0], [0.0, 1.0]], [[1.0, 0.0]], np.diag([level_var, slope_var]),
                      [[obs_var]], [0.5, 0.0], np.diag([4.0, 1.0]))


def ref_loglik(y, m):
    return kalman_filter(y, m.F, m.H, m.Q, m.R, m.m0, m.P0)["loglik"]


def assert_rel(got, want, rtol=RTOL):
    got, want = np.asarray(got, float), np.asarray(want, float)
    assert np.all(np.abs(got - want) <= rtol * np.abs(want)), (got, want, got - want)


@pytest.fixture(params=["cpu", pytest.param("cuda", marks=pytest.mark.cuda)])
def kbackend(request) -> str:
    """Every engine (with the tuning ``kt``)."""
    return request.param


@pytest.fixture
def kt() -> Tuning:
    """Small blocks and scan chunks, so that all the levels run on tiny inputs."""
    return KT


KT = Tuning(kalman_cuda_threads=4, kalman_cuda_scan_chunk0=3, kalman_cuda_scan_chunk=2,
            kalman_cpu_scan_chunk0=4, kalman_cpu_scan_chunk=3, kalman_cuda_steady_chunk0=3,
            kalman_cuda_steady_chunk=2)


def _data(seed):
    """Series of the three models, some with missing rows (NaN)."""
    rng = np.random.default_rng(seed)
    a = [ar3().simulate(n, rng)[:, 0] for n in (1, 7, 30, 30)]
    a[2][[0, 4, 5, 17]] = np.nan  # a missing first step too
    r = [rw2().simulate(n, rng) for n in (9, 25)]
    r[1][[3, 10, 11]] = np.nan
    trends = [trend(0.1 * (k + 1), 0.01, 1.0 + k) for k in range(3)]
    t = [m.simulate(n, rng)[:, 0] for m, n in zip(trends, (12, 20, 5), strict=True)]
    t[1][7] = np.nan
    return a, r, t, trends


# --- the oracle itself ---------------------------------------------------------------


def test_oracle_scan_and_smoother_agree_with_its_filter(seed):
    a, r, _, _ = _data(seed)
    for y, m in ((a[2], ar3()), (r[1], rw2())):
        assert_rel(scan_loglik(y, m.F, m.H, m.Q, m.R, m.m0, m.P0), ref_loglik(y, m))
    m = trend()
    y = m.simulate(15, seed)[:, 0]
    s = rts_smoother(y, m.F, m.H, m.Q, m.R, m.m0, m.P0)
    f = kalman_filter(y, m.F, m.H, m.Q, m.R, m.m0, m.P0)
    # the lag-one covariances of Shumway-Stoffer's recursion equal Ps_{t+1} G_t^T
    for t in range(len(y) - 1):
        G = f["Pf"][t] @ m.F.T @ np.linalg.inv(f["Pp"][t + 1])
        np.testing.assert_allclose(s["lag"][t], s["cov"][t + 1] @ G.T, rtol=1e-9, atol=1e-12)


# --- the per-step math, as plain Python, against the oracle -----------------------------


def test_scan_pieces_match_oracle_elements(seed):
    """chunk_element (the conditional filter) and combine equal the oracle's elements."""
    m = trend()
    y = m.simulate(6, seed)[:, 0]
    y[3] = np.nan
    nx = m.dim_state
    steps = make_kalman(nx, 1, DENSE, np.float64, lambda f: f)
    sc = make_scan(nx, 1, DENSE, np.float64, lambda f: f, steps)
    flat = [np.ascontiguousarray(a.reshape(-1)) for a in (m.F, m.H, m.Q, m.R, m.m0, m.P0)]
    scratch = [np.empty(nx * nx), np.empty(nx), np.empty(nx * nx), np.empty(nx),
               np.empty(nx * nx), np.empty(nx * nx), np.empty(nx), np.empty(1), np.empty(1),
               np.empty(nx)]
    for lo, n, first in ((0, 4, True), (2, 4, False), (1, 1, False)):
        A, b, C, eta, J, T, U, L, e, G = scratch
        assert sc.chunk_element(*flat, y, lo, n, first, A, b, C, eta, J, T, U, L, e, G) == -1
        want = None
        for k in range(lo, lo + n):
            el = scan_element(y[k], m.F, m.H, m.Q, m.R, first=(first and k == lo), m0=m.m0,
                              P0=m.P0)
            want = el if want is None else scan_combine(want, el)
        for got, w in zip((A, b, C, eta, J), want, strict=True):
            np.testing.assert_allclose(got, np.reshape(w, -1), rtol=1e-10, atol=1e-12)
    e1 = scan_element(y[1], m.F, m.H, m.Q, m.R)
    e2 = scan_element(y[2], m.F, m.H, m.Q, m.R)
    want = scan_combine(e1, e2)
    got1 = [np.array(np.reshape(x, -1), float) for x in e1]
    got2 = [np.array(np.reshape(x, -1), float) for x in e2]
    sc.combine(*got1, *got2, *(np.empty(nx * nx) for _ in range(3)), np.empty(nx), np.empty(nx),
               np.empty(nx * nx))
    for got, w in zip(got1, want, strict=True):
        np.testing.assert_allclose(got, np.reshape(w, -1), rtol=1e-10, atol=1e-12)


def test_plan_levels_cover_every_series():
    offsets = np.array([0, 1, 8, 8 + 30, 8 + 30 + 3])
    levels = plan_levels(offsets, 3, 2)
    assert np.all(np.diff(np.concatenate([[0], np.cumsum(np.bincount(
        levels[-1].series, minlength=4))])) == 1)  # the top: one chunk per series
    lev0 = levels[0]
    assert lev0.lo[0] == 0 and lev0.hi[-1] == offsets[-1]
    assert np.all(lev0.lo[1:] == lev0.hi[:-1])
    assert len(levels) >= 3


# --- engines against the oracle -----------------------------------------------------------


@pytest.mark.parametrize("method", ["exact", "scan"])
def test_engines_match_oracle(kbackend, kt, method, seed):
    a, r, t, trends = _data(seed)
    got = bulkem.kalman_loglik(a, ar3(), method=method, backend=kbackend, tuning=kt)
    assert list(got.status) == ["ok"] * 4
    assert_rel(got.loglik, [ref_loglik(y, ar3()) for y in a])
    assert list(got.n_obs) == [1, 7, 26, 30]
    got = bulkem.kalman_loglik(r, rw2(), method=method, backend=kbackend, tuning=kt)
    assert_rel(got.loglik, [ref_loglik(y, rw2()) for y in r])
    # a model per series
    got = bulkem.kalman_loglik(t, trends, method=method, backend=kbackend, tuning=kt)
    assert_rel(got.loglik, [ref_loglik(y, m) for y, m in zip(t, trends, strict=True)])


def test_exact_paths_and_layouts_agree(kbackend, kt, seed):
    """Shared gains and per-series covariances, alone and side by side: the oracle's numbers."""
    if kbackend == "cuda":
        from bulkem.engines.cuda import kalman as engine
    else:
        from bulkem.engines.cpu import kalman as engine
    from bulkem.models.ssm.linear import pack_series

    rng = np.random.default_rng(seed)
    full = [ar3().simulate(11, rng)[:, 0] for _ in range(6)]
    gap = [y.copy() for y in full]
    gap[2][4] = np.nan  # one series with a missing value: the others still share
    for ys in (full, gap):
        want = [ref_loglik(y, ar3()) for y in ys]
        batch, _, _ = pack_series([(k, y[:, None]) for k, y in enumerate(ys)], [ar3()], True,
                                  np.dtype("float64"))
        for shared in (None, False):
            out = engine.exact(batch, shared=shared, tuning=kt)
            assert_rel(out.loglik, want)
            assert np.all(out.fail == -1)
            assert list(out.n_obs) == [11 - np.isnan(y).sum() for y in ys]
    out = engine.scan(batch, chunk0=2, chunk=2, tuning=kt)
    assert_rel(out.loglik, want)


def test_plan_levels_longer_first_chunk():
    """The steady-state scan's level 0: each series' first chunk holds ``first0`` steps."""
    offsets = np.array([0, 10, 10, 11, 40, 100])
    levels = plan_levels(offsets, 4, 2, first0=7)
    lev0 = levels[0]
    assert lev0.lo[0] == 0 and lev0.hi[-1] == offsets[-1]
    assert np.all(lev0.lo[1:] == lev0.hi[:-1])
    starts = offsets[lev0.series]
    assert np.all((lev0.hi - lev0.lo)[lev0.first == 1]
                  == np.minimum(7, offsets[lev0.series + 1] - starts)[lev0.first == 1])
    inner = (lev0.first == 0) & (lev0.last == 0)
    assert np.all(lev0.hi[inner] - lev0.lo[inner] == 4)
    assert np.all(np.bincount(levels[-1].series, minlength=5)[[0, 2, 3, 4]] == 1)


def test_steady_scan_matches_oracle(kbackend, kt, seed):
    """One model, no missing rows: the steady-state scan (means alone once the covariance settles)
    equals the oracle, over several levels, with series shorter than the transient too; it
    steps aside for missing rows, several models, or ``shared=False``."""
    from bulkem.engines.cpu import kalman as kalman_cpu
    from bulkem.models.ssm.linear import pack_series

    if kbackend == "cuda":
        from bulkem.engines.cuda import kalman as engine
    else:
        engine = kalman_cpu
    rng = np.random.default_rng(seed)
    # a delay line observed at its end, from a known state: the gain is 0 for the first
    # steps while the covariance moves (a gain that stays put is not yet a steady state)
    delay = StateSpace([[0.5, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], [[0.0, 0.0, 1.0]],
                       np.diag([1.0, 0.0, 0.0]), [[1.0]], np.zeros(3), np.zeros((3, 3)))
    for m in (ar3(), rw2(), delay):
        ys = [m.simulate(n, rng).reshape(n, -1) for n in (150, 1, 12, 90)]
        batch = pack_series(list(enumerate(ys)), [m], True, np.dtype("float64"))[0]
        st = kalman_cpu.steady(batch)
        assert st is not None and 2 < st.n < 60
        want = [ref_loglik(y, m) for y in ys]
        for c0, c in ((3, 2), (5, 3), (None, None)):
            got = engine.scan(batch, chunk0=c0, chunk=c, tuning=kt)
            assert_rel(got.loglik, want)
            assert list(got.n_obs) == [150, 1, 12, 90] and list(got.fail) == [-1] * 4
        assert len(plan_levels(batch.offsets, 3, 2, first0=st.n)) >= 4
        full = engine.scan(batch, chunk0=3, chunk=2, shared=False, tuning=kt)
        assert_rel(full.loglik, want)
        if kbackend == "cuda":
            assert_rel(got.loglik, kalman_cpu.scan(batch, tuning=kt).loglik, 1e-12)
    gap = [y.copy() for y in ys]
    gap[0][5] = np.nan
    assert kalman_cpu.steady(pack_series(list(enumerate(gap)), [m], True,
                                         np.dtype("float64"))[0]) is None
    two = pack_series(list(enumerate(ys[:2])), [m, ar3()], False, np.dtype("float64"))[0]
    assert kalman_cpu.steady(two) is None
    assert kalman_cpu.steady(batch, shared=False) is None
    if kbackend == "cuda":  # (float32 on the simulator: no more CPU programs to compile)
        f32 = pack_series(list(enumerate(ys)), [m], True, np.dtype("float32"))[0]
        assert kalman_cpu.steady(f32) is not None
        assert_rel(engine.scan(f32, chunk0=3, chunk=2, tuning=kt).loglik, want, 1e-4)


def test_scan_long_series_many_levels(seed):
    """One long series, cut small: four levels of the CPU scan."""
    from bulkem.engines.cpu import kalman as kalman_cpu
    from bulkem.models.ssm.linear import pack_series

    m = rw2()
    y = m.simulate(400, seed)
    y[::20] = np.nan  # the paper's "missing every 20 steps"
    batch, _, _ = pack_series([(0, y)], [m], True, np.dtype("float64"))
    assert len(plan_levels(batch.offsets, 4, 3)) >= 4
    out = kalman_cpu.scan(batch, chunk0=4, chunk=3)
    assert_rel(out.loglik, [ref_loglik(y, m)])
    assert out.n_obs[0] == 380


def test_scan_kept_plan_and_one_level(kbackend, kt, seed):
    """A ragged batch (missing rows, a one-step series, a failing first step): the scan
    equals the oracle; on the GPU a call again on the same device batch (its kept plan)
    gives the same bits, and new chunk settings a new plan with the oracle's numbers; one
    level alone (every series in one chunk) reports no failure where there is none."""
    from bulkem.engines.cpu import kalman as kalman_cpu
    from bulkem.models.ssm.linear import pack_series

    if kbackend == "cuda":
        from bulkem.engines.cuda import kalman as engine
    else:
        engine = kalman_cpu
    rng = np.random.default_rng(seed)
    m = ar3()
    exact_state = StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=0.0, P0=np.zeros((3, 3)))
    a = [m.simulate(n, rng)[:, 0] for n in (9, 1, 30, 13)]
    a[2][[0, 4, 5, 17]] = np.nan
    a[3][6] = np.nan
    batch = pack_series([(k, y[:, None]) for k, y in enumerate(a + [a[0]])],
                        [m] * 4 + [exact_state], False, np.dtype("float64"))[0]
    want = [ref_loglik(y, m) for y in a]

    def check(got):
        assert_rel(got.loglik[:4], want)
        assert list(got.n_obs[:4]) == [9, 1, 26, 12]
        assert list(got.fail) == [-1] * 4 + [0]  # S = 0 at the first step, only there

    check(engine.scan(batch, chunk0=40, chunk=2, tuning=kt))  # one level
    if kbackend == "cpu":
        check(engine.scan(batch, tuning=kt))
        return
    dev = engine.to_device(batch)
    seen = {}
    for c0, c in ((3, 2), (3, 2), (5, 3), (40, 2), (3, 2)):
        got = engine.scan(batch, dev=dev, tuning=kt.replace(kalman_cuda_scan_chunk0=c0,
                                                            kalman_cuda_scan_chunk=c))
        check(got)
        if (c0, c) in seen:  # the kept plan: the same bits
            assert got.loglik.tobytes() == seen[c0, c].loglik.tobytes()
        seen[c0, c] = got
    assert len([k for k in dev.scratch if k[0] == "scan"]) == 3  # (and the steady gains: None)
    # a fresh device batch
    assert engine.scan(batch, tuning=kt).loglik.tobytes() == got.loglik.tobytes()
    assert_rel(got.loglik, kalman_cpu.scan(batch, chunk0=3, chunk=2, tuning=kt).loglik)


def test_float32_close_to_float64(kbackend, kt, seed):
    a, _, _, _ = _data(seed)
    m = ar3()
    f64 = bulkem.kalman_loglik(a, m, backend=kbackend, tuning=kt)
    f32 = bulkem.kalman_loglik(a, m, backend=kbackend, dtype="float32", tuning=kt)
    assert_rel(f32.loglik, f64.loglik, rtol=1e-4)


def test_smoother_matches_oracle(seed):
    from bulkem.engines.cpu import kalman as kalman_cpu

    y = ar3().simulate(25, seed)[:, 0]
    y[[3, 4, 24]] = np.nan
    for m in (ar3(), ar3(obs_var=0.0)):  # with noise, and a pure AR (singular P_{t+1|t})
        got = kalman_cpu.smooth(y, m)
        want = rts_smoother(y, m.F, m.H, m.Q, m.R, m.m0, m.P0)
        for key in ("mean", "cov", "lag"):
            np.testing.assert_allclose(got[key], want[key], rtol=1e-8, atol=1e-9, err_msg=key)
        assert_rel(got["loglik"], want["loglik"])


# --- statsmodels --------------------------------------------------------------------------


def test_statsmodels_agrees(seed):
    sm = pytest.importorskip("statsmodels.api")
    from statsmodels.tsa.statespace.mlemodel import MLEModel
    from statsmodels.tsa.statespace.sarimax import SARIMAX

    rng = np.random.default_rng(seed)
    m = ar3()
    ys = [m.simulate(n, rng)[:, 0] for n in (50, 120)]
    ys[1][[10, 11, 60]] = np.nan
    got = bulkem.kalman_loglik(ys, m, backend="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for y, ll in zip(ys, got.loglik, strict=True):
            # both use the stationary prior (statsmodels' state layout differs from ours)
            mod = SARIMAX(y, order=(3, 0, 0), trend="n", measurement_error=True)
            assert_rel(ll, mod.loglike([0.5, -0.3, 0.1, 0.3, 1.3]), rtol=1e-8)
        level = StateSpace(1.0, 1.0, 0.7, 0.4, [1.0], [[3.0]])
        y = level.simulate(80, rng)[:, 0]
        y[40] = np.nan
        uc = sm.tsa.UnobservedComponents(y, level="llevel")
        uc.ssm.initialize_known(level.m0, level.P0)
        uc.loglikelihood_burn = 0
        assert_rel(bulkem.kalman_loglik([y], level, backend="cpu").loglik[0],
                   uc.loglike([0.4, 0.7]), rtol=1e-8)
        for m in (rw2(), trend()):  # any model: statsmodels' generic state-space model
            y = m.simulate(60, rng)
            y[[5, 30]] = np.nan
            mod = MLEModel(y, k_states=m.dim_state)
            mod["design"], mod["obs_cov"], mod["transition"] = m.H, m.R, m.F
            mod["selection"], mod["state_cov"] = np.eye(m.dim_state), m.Q
            mod.ssm.initialize_known(m.m0, m.P0)
            series = y if m.dim_obs > 1 else y[:, 0]
            assert_rel(bulkem.kalman_loglik([series], m, backend="cpu").loglik[0],
                       mod.ssm.loglike(), rtol=1e-8)


# --- splash -------------------------------------------------------------------------------


def test_splash_converges_to_exact(seed):
    m = StateSpace.ar([0.6, -0.2, 0.05], sigma2=1.0, obs_var=0.5)
    y = m.simulate(60, seed)[:, 0]
    windows = [1, 2, 4, 8, 16, 32]
    errs = []
    for w in windows:
        out = bulkem.kalman_loglik([y], m, method="splash", window=w, backend="cpu",
                                   report_error=True)
        assert out.status[0] == "ok"
        assert out.exact_loglik[0] == pytest.approx(ref_loglik(y, m), rel=RTOL)
        errs.append(abs(out.error[0]))
    assert errs[0] > 1.0  # one step from a broad prior: far off
    assert all(b <= a for a, b in zip(errs, errs[1:], strict=False)), errs
    assert errs[-1] < 1e-6 * abs(ref_loglik(y, m))
    full = bulkem.kalman_loglik([y], m, method="splash", window=len(y), backend="cpu")
    assert_rel(full.loglik, [ref_loglik(y, m)])  # a window as long as the series is exact


def test_splash_matches_oracle(kbackend, kt, seed):
    """Both paths (shared covariance recursion, and per window) equal a literal splash."""
    if kbackend == "cuda":
        from bulkem.engines.cuda import kalman as engine
    else:
        from bulkem.engines.cpu import kalman as engine
    from bulkem.models.ssm.linear import pack_series

    a, _, _, _ = _data(seed)
    m = ar3()
    want = [splash_loglik(y, m.F, m.H, m.Q, m.R, m.m0, m.P0, 4, 1e3) for y in a]
    got = bulkem.kalman_loglik(a, m, method="splash", window=4, backend=kbackend,
                               report_error=True, splash_var=1e3, tuning=kt)
    assert_rel(got.loglik, want)
    assert_rel(got.exact_loglik, [ref_loglik(y, m) for y in a])
    np.testing.assert_allclose(got.error, got.loglik - got.exact_loglik)
    batch, _, _ = pack_series([(k, y[:, None]) for k, y in enumerate(a)], [m], True,
                              np.dtype("float64"))
    assert_rel(engine.splash(batch, 4, 1e3, shared=False, tuning=kt).loglik, want)
    models = [ar3(0.3 + 0.1 * k) for k in range(len(a))]  # a model per series: per window
    got = bulkem.kalman_loglik(a, models, method="splash", window=3, backend=kbackend,
                               splash_var=1e3, tuning=kt)
    assert_rel(got.loglik, [splash_loglik(y, md.F, md.H, md.Q, md.R, md.m0, md.P0, 3, 1e3)
                            for y, md in zip(a, models, strict=True)])


def test_splash_sum_chunks_inside_series(kbackend, kt, seed):
    """Sum chunks of 4 steps, two to a GPU block, cut a ragged batch inside its series
    (missing rows, a one-step series): every path equals the oracle, the CUDA engine
    equals the CPU engine, and a failing first step is reported where it is."""
    from bulkem.engines.cpu import kalman as kalman_cpu
    from bulkem.models.ssm.linear import pack_series

    kt = kt.replace(kalman_splash_sum_chunk=4, kalman_cuda_threads=8)
    if kbackend == "cuda":
        from bulkem.engines.cuda import kalman as engine
    else:
        engine = kalman_cpu
    rng = np.random.default_rng(seed)
    m = ar3()
    a = [m.simulate(n, rng)[:, 0] for n in (9, 1, 30, 13)]
    a[2][[0, 4, 5, 17]] = np.nan
    a[3][6] = np.nan

    def batch_of(ys, models):
        return pack_series([(k, y[:, None]) for k, y in enumerate(ys)], models,
                           len(models) == 1, np.dtype("float64"))[0]

    batch = batch_of(a, [m])
    want = [splash_loglik(y, m.F, m.H, m.Q, m.R, m.m0, m.P0, 3, 1e3) for y in a]
    for shared in (None, False):
        got = engine.splash(batch, 3, 1e3, shared=shared, tuning=kt)
        assert_rel(got.loglik, want)
        assert list(got.n_obs) == [9, 1, 26, 12]
        assert list(got.fail) == [-1] * 4
        cpu = kalman_cpu.splash(batch, 3, 1e3, shared=shared, tuning=kt)
        assert_rel(got.loglik, cpu.loglik)
    if kbackend == "cuda":  # the same device batch again: its kept plan, then a new chunk
        dev = engine.to_device(batch)
        for chunk in (4, 4, 5):
            got = engine.splash(batch, 3, 1e3, dev=dev,
                                tuning=kt.replace(kalman_splash_sum_chunk=chunk))
            assert_rel(got.loglik, want)
            assert list(got.n_obs) == [9, 1, 26, 12]
        assert len(dev.scratch) == 2
    # a known state observed without noise: S = 0 at the first step, only there
    exact_state = StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=0.0, P0=np.zeros((3, 3)))
    got = engine.splash(batch_of([a[0], a[3]], [m, exact_state]), 3, 1e3, tuning=kt)
    assert list(got.fail) == [-1, 0]
    assert_rel(got.loglik[:1], want[:1])


# --- input forms and bad input ------------------------------------------------------------


def test_input_forms(seed):
    rng = np.random.default_rng(seed)
    m = ar3()
    ys = {"a": m.simulate(10, rng)[:, 0], "b": m.simulate(6, rng)[:, 0]}
    want = [ref_loglik(y, m) for y in ys.values()]
    by_dict = bulkem.kalman_loglik(ys, m, backend="cpu")
    assert list(by_dict.series) == ["a", "b"]
    assert_rel(by_dict.loglik, want)
    long = pd.DataFrame({"series": np.repeat(["a", "b"], [10, 6]),
                         "value": np.concatenate(list(ys.values()))})
    assert_rel(bulkem.kalman_loglik(long, m, backend="cpu").loglik, want)
    with pytest.raises(ValueError, match="expected a 'id' column naming the series.*series_col="):
        bulkem.kalman_loglik(long, m, series_col="id", backend="cpu")
    one = bulkem.kalman_loglik(ys["a"], m, backend="cpu")
    assert len(one) == 1 and one.series[0] == 0
    assert_rel(one.loglik, want[:1])
    r = rw2()
    stack = np.stack([r.simulate(8, rng) for _ in range(3)])  # (n_series, T, dim_obs)
    got = bulkem.kalman_loglik(stack, r, backend="cpu")
    assert_rel(got.loglik, [ref_loglik(y, r) for y in stack])
    wide = pd.DataFrame({"series": np.repeat([0, 1, 2], 8), "x1": stack[:, :, 0].ravel(),
                         "x2": stack[:, :, 1].ravel()})
    assert_rel(bulkem.kalman_loglik(wide, r, backend="cpu", value_col=None).loglik, got.loglik)


def test_bad_series_get_their_status(kbackend, kt, seed):
    rng = np.random.default_rng(seed)
    m = ar3()
    good = m.simulate(12, rng)[:, 0]
    ys = [good, np.array([]), np.full(5, np.nan), np.r_[good[:4], np.inf, good[5:]], good[:3]]
    out = bulkem.kalman_loglik(ys, m, backend=kbackend, tuning=kt)
    assert list(out.status) == ["ok", "invalid_data", "invalid_data", "invalid_data", "ok"]
    assert "too short" in out.message[1]
    assert "missing" in out.message[2]
    assert "infinite" in out.message[3]
    assert np.all(np.isnan(out.loglik[1:4]))
    assert_rel(out.loglik[[0, 4]], [ref_loglik(good, m), ref_loglik(good[:3], m)])
    # a known state observed without noise: S = 0 at the first step, that series fails
    exact_state = StateSpace.ar([0.5, -0.3, 0.1], sigma2=1.3, obs_var=0.0, P0=np.zeros((3, 3)))
    for method in ("exact", "scan"):
        out = bulkem.kalman_loglik([good, good[:5]], [m, exact_state], method=method,
                                   backend=kbackend, tuning=kt)
        assert list(out.status) == ["ok", "failed"]
        assert "time step 0" in out.message[1]
        assert np.isnan(out.loglik[1])


def test_bad_arguments_raise():
    m = ar3()
    y = m.simulate(10, 0)[:, 0]
    with pytest.raises(ValueError, match="unknown method"):
        bulkem.kalman_loglik([y], m, method="fast")
    with pytest.raises(ValueError, match="needs window"):
        bulkem.kalman_loglik([y], m, method="splash")
    with pytest.raises(ValueError, match="window must be"):
        bulkem.kalman_loglik([y], m, method="splash", window=0)
    with pytest.raises(ValueError, match="method=.splash. only"):
        bulkem.kalman_loglik([y], m, window=3)
    with pytest.raises(ValueError, match="report_error"):
        bulkem.kalman_loglik([y], m, report_error=True)
    with pytest.raises(ValueError, match="dtype"):
        bulkem.kalman_loglik([y], m, dtype="float16")
    with pytest.raises(ValueError, match="dim_obs = 2"):
        bulkem.kalman_loglik([np.ones((5, 3))], rw2())
    with pytest.raises(ValueError, match="2 models for 1 series"):
        bulkem.kalman_loglik([y], [m, m])
    with pytest.raises(ValueError, match="different"):
        bulkem.kalman_loglik([y, y], [m, rw2()])
    with pytest.raises(TypeError, match="StateSpace"):
        bulkem.kalman_loglik([y], "ar3")


def test_statespace_checks():
    with pytest.raises(ValueError, match="F has shape"):
        StateSpace(np.ones((2, 3)), [1, 0], np.eye(2), 1.0)
    with pytest.raises(ValueError, match="H has shape"):
        StateSpace(np.eye(2), [1, 0, 0], np.eye(2), 1.0, P0=np.eye(2))
    with pytest.raises(ValueError, match="Q is not symmetric"):
        StateSpace(np.eye(2) * 0.5, [1, 0], [[1, 0.5], [0, 1]], 1.0)
    with pytest.raises(ValueError, match="R is not positive semi-definite"):
        StateSpace(np.eye(2) * 0.5, np.eye(2), np.eye(2), [[1, 2], [2, 1]])
    with pytest.raises(ValueError, match="NaN or infinite"):
        StateSpace([[np.nan]], 1, 1, 1)
    with pytest.raises(ValueError, match="spectral radius"):
        StateSpace.random_walk(2, 1.0, 1.0).__class__(np.eye(2), np.eye(2), np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match="spectral radius"):
        StateSpace.ar([1.2], sigma2=1.0)
    with pytest.raises(ValueError, match="sigma2 must be"):
        StateSpace.ar([0.5], sigma2=0.0)
    with pytest.raises(ValueError, match="m0 has shape"):
        StateSpace(np.eye(2) * 0.5, [1, 0], np.eye(2), 1.0, m0=[1, 2, 3])
    assert ar3().kind == COMPANION and rw2().kind == IDENTITY and trend().kind == DENSE


def test_ar_stationary_prior():
    """P0 solves the Lyapunov equation and holds the autocovariances gamma(|i - j|)."""
    from statsmodels.tsa.arima_process import arma_acovf

    phi = [0.5, -0.3, 0.1]
    m = StateSpace.ar(phi, sigma2=1.3)
    np.testing.assert_allclose(m.P0, m.F @ m.P0 @ m.F.T + m.Q, atol=1e-12)
    gamma = arma_acovf(np.r_[1, -np.array(phi)], [1.0], nobs=3, sigma2=1.3)
    np.testing.assert_allclose(m.P0, gamma[np.abs(np.subtract.outer(range(3), range(3)))],
                               rtol=1e-10)


def test_one_array_of_equal_length_series_is_read_whole(seed):
    """``(n_series, T)`` and ``(n_series, T, dim_obs)`` arrays: packed at once (no Python
    object per series), the same numbers and statuses as the list of their rows."""
    rng = np.random.default_rng(seed)
    m = ar3()
    arr = np.stack([m.simulate(9, rng)[:, 0] for _ in range(4)])
    arr[1, 3] = np.nan
    arr[2] = np.nan
    arr[3, 0] = np.inf
    as_list = bulkem.kalman_loglik(list(arr), m, backend="cpu")
    whole = bulkem.kalman_loglik(arr, m, backend="cpu")
    pd.testing.assert_frame_equal(whole, as_list)
    assert whole.status.tolist() == ["ok", "ok", "invalid_data", "invalid_data"]
    with pytest.warns(UserWarning, match="2 of 4 datasets are invalid"):
        gen = bulkem.loglik(arr, "state_space", m, dim_obs=1, backend="cpu")
    assert np.array_equal(gen.loglik, whole.loglik, equal_nan=True)
    with pytest.raises(ValueError, match="Pass dim_obs=1"):
        bulkem.loglik(arr, "state_space", m, backend="cpu")
    r = rw2()
    stack = np.stack([r.simulate(6, rng) for _ in range(3)])
    assert np.array_equal(bulkem.kalman_loglik(stack, r, backend="cpu").loglik,
                          bulkem.kalman_loglik(list(stack), r, backend="cpu").loglik)
    with pytest.raises(ValueError, match="dim_obs = 2"):
        bulkem.kalman_loglik(arr, r, backend="cpu")
    big = bulkem.kalman_loglik([arr[0], np.r_[arr[0, :4], 1e39]], m, dtype="float32",
                               backend="cpu")  # beyond float32: invalid, never inf
    assert big.status.tolist() == ["ok", "invalid_data"] and "float32's range" in big.message[1]


@pytest.mark.cuda
def test_large_batches_reach_the_gpu_in_chunks_through_page_locked_buffers(seed):
    """``buffers.upload``: the series in chunks of ``cuda_pinned_max_bytes`` through two
    page-locked buffers, several host threads per chunk: the numbers of one copy."""
    from bulkem.engines.cuda.buffers import upload

    rng = np.random.default_rng(seed)
    m = ar3()
    ys = [m.simulate(int(n), rng)[:, 0] for n in rng.integers(5, 30, 9)]
    want = bulkem.kalman_loglik(ys, m, backend="cpu")
    small = KT.replace(cuda_pinned_max_bytes=64, host_copy_threads=3)  # 8 values a chunk
    got = bulkem.kalman_loglik(ys, m, backend="cuda", tuning=small)
    assert_rel(got.loglik, want.loglik)
    x = rng.normal(size=(1 << 20) + 5)  # large enough for the threaded copy
    back = upload(x, Tuning(cuda_pinned_max_bytes=1 << 19, host_copy_threads=3)).copy_to_host()
    assert np.array_equal(back, x)
