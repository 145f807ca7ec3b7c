"""Property-based checks of the TMAP family (hypothesis, a bounded number of examples).

Random small TMAPs and traces: one EM iteration of the CPU engine equals the
oracle's, leaves a valid TMAP (alpha a distribution, Pi sub-stochastic,
rates positive), never lowers the likelihood, and the likelihood is the
matrix form's.  Orders are drawn from a few tuples so that the examples
share their compiled kernels.
"""

from __future__ import annotations

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
