"""Property-based checks of the TMAP family (hypothesis, a bounded number of examples).

Random small TMAPs and traces: one EM iteration of the CPU engine equals the
oracle's, leaves a valid TMAP (alpha a distribution, Pi sub-stochastic,
rates positive), never lowers the likelihood, and the likelihood is the
matrix form's.  Orders are drawn from a few tuples so that the examples
share their compiled kernels.  Batches with bad traces among good ones (NaN,
values not positive, too short, empty runs, huge values): each bad trace is
``invalid_data`` with a message and changes no other trace's fit.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from reference_tmap import em, matrix_loglik

import bulkem

ORDER_SETS = [(1, 2, 3), (1, 1, 2)]


@st.composite
def problems(draw):
    orders = draw(st.sampled_from(ORDER_SETS))
    R = len(orders)
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    scale = 10.0 ** draw(st.integers(-4, 4))
    n_runs = draw(st.integers(R, 12))
    lengths = draw(st.lists(st.integers(1, 6), min_size=n_runs, max_size=n_runs))
    runs = [scale * rng.gamma(draw(st.sampled_from([0.5, 1.0, 3.0])), 1.0, n)
            for n in lengths]
    alpha = rng.dirichlet(np.ones(R))
    pi = rng.dirichlet(np.ones(R), R) * rng.uniform(0.2, 0.95, (R, 1))
    rates = np.asarray(orders) / scale * rng.uniform(0.2, 5.0, R)
    return orders, runs, dict(alpha=alpha, pi=pi, rates=rates)


def _listed(p, orders):
    """The tables' branch order: branches of equal order by decreasing rate."""
    perm = np.arange(len(orders))
    orders = np.asarray(orders)
    for r in np.unique(orders):
        pos = np.flatnonzero(orders == r)
        perm[pos] = pos[np.argsort(-p["rates"][pos], kind="stable")]
    return dict(alpha=p["alpha"][perm], pi=p["pi"][np.ix_(perm, perm)], rates=p["rates"][perm])


@settings(max_examples=20, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(problems())
def test_one_iteration_is_the_oracles_and_a_valid_tmap(problem):
    orders, runs, start = problem
    for x in runs:
        x[x <= 0] = np.finfo(float).tiny  # (gamma draws of a tiny shape can round to 0)
    res = bulkem.fit([runs], family="tmap", orders=orders, init=start, n_starts=1, max_iter=1,
                     tol=0.0, backend="cpu")
    ref = em(runs, start, orders, max_iter=1, tol=0.0)
    status = res.summary.status[0]
    if ref["status"] == "degenerate":  # (a branch lost all its mass: both say so)
        assert status == "failed"
        return
    assert status == "max_iter"
    ll = res.summary.loglik[0]
    assert abs(ll / ref["loglik"] - 1) < 1e-9
    assert ll >= ref["trace"][0] - 1e-9 * abs(ref["trace"][0])  # EM never lowers it
    p = res.params(0)
    assert np.isclose(p["alpha"].sum(), 1.0) and (p["alpha"] >= 0).all()
    assert (p["pi"] >= 0).all() and (p["pi"].sum(axis=1) <= 1 + 1e-12).all()
    assert (p["rates"] > 0).all()
    ref = _listed(ref, orders)
    for key in ("alpha", "pi", "rates"):
        assert np.allclose(p[key], ref[key], rtol=1e-8, atol=1e-13)
    want = sum(matrix_loglik(x, p, orders) for x in runs[:3])
    assert abs(res.score(0, runs[:3]) / want - 1) < 1e-8


# --- batches with bad traces (issue 30) -----------------------------------------------------------
# One order set, so that the examples share their kernels.

EXAMPLES = int(os.environ.get("BULKEM_HYPOTHESIS_EXAMPLES", "12"))
STATUSES = {"converged", "max_iter", "failed", "invalid_data"}
BAD = {  # kind -> a bad trace; every one is invalid_data but "huge" (positive finite values)
    "nan": [np.array([1.0, np.nan, 2.0]), np.array([0.5, 1.5, 3.0])],
    "zero": [np.array([1.0, 0.0, 2.0]), np.array([0.5, 1.5])],
    "negative": [np.array([-1.0, 2.0, 3.0, 4.0])],
    "infinite": [np.array([1.0, np.inf, 2.0, 3.0])],
    "short": [np.array([1.0, 2.0])],
    "empty": [np.array([1.0, 2.0, 0.5]), np.array([])],
    "huge": [np.array([1e300, 1.0, 2.0]), np.array([1e-300, 3.0])],
}
KW = dict(family="tmap", orders=ORDER_SETS[0], n_starts=3, max_iter=15, seed=4, backend="cpu",
          progress=False)


@st.composite
def bad_batches(draw):
    def trace(seed):
        rng = np.random.default_rng(seed)
        n = int(rng.integers(2, 7))
        return [rng.gamma(rng.choice([0.5, 1.0, 3.0]), 1.0, int(k)) + 1e-3
                for k in rng.integers(1, 5, n)]

    good = [trace(s) for s in draw(st.lists(st.integers(0, 2**31 - 1), min_size=1,
                                            max_size=3))]
    kinds = draw(st.lists(st.sampled_from(sorted(BAD)), min_size=1, max_size=3))
    batch, where = list(good), []
    for kind in kinds:
        pos = draw(st.integers(0, len(batch)))
        batch.insert(pos, [u.copy() for u in BAD[kind]])
        where = [w + (w >= pos) for w in where] + [pos]
    return batch, dict(zip(where, kinds, strict=True))


def _fit_quiet(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bulkem.fit(data, **KW)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=list(HealthCheck))
@given(bad_batches())
def test_bad_traces_are_invalid_and_change_nothing(problem):
    data, kind_at = problem
    res = _fit_quiet(data)
    s = res.summary
    assert list(s.trace) == list(range(len(data)))
    assert set(s.status) <= STATUSES
    for pos, kind in kind_at.items():
        if kind != "huge":
            assert s.status[pos] == "invalid_data" and s.message[pos], (kind, s.message[pos])
    for d in s.trace:
        row = s.iloc[d]
        if row.status in ("converged", "max_iter"):
            starts = res.starts
            best = starts[(starts.trace == d) & (starts.start == row.best_start)]
            assert list(best.status) == [row.status]  # a failed start is never the best
            assert np.isfinite(row.loglik)
            p = res.params(d)
            assert np.isclose(p["alpha"].sum(), 1.0) and (p["alpha"] >= 0).all()
            assert (p["pi"] >= 0).all() and (p["pi"].sum(axis=1) <= 1 + 1e-9).all()
            assert np.all(np.isfinite(p["rates"])) and (p["rates"] > 0).all()
            assert np.isclose(res.score(d, data[d]), row.loglik, rtol=1e-9, atol=1e-9)
            runs = res.sample(d, 3, seed=1)
            assert len(runs) == 3 and all(np.all(u > 0) for u in runs)
            m = res.moments(d)  # corr_x1_x2 is NaN (as documented) when no run goes on
            assert np.isfinite(m["mean_run_length"]) and np.isfinite(m["mean_interarrival"])
            assert np.isfinite(m["corr_x1_x2"]) or p["pi"].sum() == 0
        elif row.status == "failed":
            assert row.best_start == -1 and row.message
        else:
            assert row.message
    # the batch without its bad traces: the same fits, to the bit
    keep = [d for d in range(len(data)) if d not in kind_at]
    clean = _fit_quiet([data[d] for d in keep])
    for pos, d in enumerate(keep):
        a, b = s.iloc[d], clean.summary.iloc[pos]
        assert a.status == b.status
        assert (np.isnan(a.loglik) and np.isnan(b.loglik)) or a.loglik == b.loglik
