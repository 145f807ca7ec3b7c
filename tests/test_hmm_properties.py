"""Properties of HMM fits on generated batches (hypothesis).

A bounded number of examples in CI; ``BULKEM_HYPOTHESIS_EXAMPLES=2000`` runs more.  The
model shapes are fixed (2 states; 3 symbols or 1 dimension) so that no example compiles new
kernels; the data vary: the number of datasets, of sequences and their lengths, the values,
and (every emission) bad datasets among the good ones: NaN, values out of the emission's
domain, too short, empty sequences, huge values.
"""

from __future__ import annotations

import os
import warnings

import numpy as np
import pytest

import bulkem

hypothesis = pytest.importorskip("hypothesis")
st = hypothesis.strategies

EXAMPLES = int(os.environ.get("BULKEM_HYPOTHESIS_EXAMPLES", "12"))
STATUSES = {"converged", "max_iter", "failed", "invalid_data"}

sequence = st.lists(st.integers(0, 2), min_size=1, max_size=25).map(
    lambda v: np.array(v, dtype=float))
dataset = st.lists(sequence, min_size=1, max_size=4)
batch = st.lists(dataset, min_size=1, max_size=5)
KW = dict(family="hmm", emission="categorical", n_symbols=3, n_components=2, n_starts=3,
          max_iter=15, seed=5, backend="cpu", progress=False)


def fit(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid (too short) or failed datasets warn
        return bulkem.fit(data, **KW)


@hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                     suppress_health_check=list(hypothesis.HealthCheck))
@hypothesis.given(batch, st.randoms(use_true_random=False))
def test_hmm_tables_are_consistent(data, rnd):
    copies = [[s.copy() for s in ds] for ds in data]
    res = fit(data)
    # inputs untouched; one row per dataset, in input order; documented statuses only
    assert all(np.array_equal(a, b) for ds, cs in zip(data, copies, strict=True)
               for a, b in zip(ds, cs, strict=True))
    assert list(res.summary.dataset) == list(range(len(data)))
    assert set(res.summary.status) <= STATUSES
    assert set(res.starts.status) <= {"converged", "max_iter", "degenerate"}
    fitted = res.summary[res.summary.status.isin(["converged", "max_iter"])]
    for d in fitted.dataset:
        p = res.params(d)
        assert np.allclose(p["startprob"].sum(), 1.0)
        assert np.allclose(p["transmat"].sum(axis=1), 1.0)
        assert np.allclose(p["emissionprob"].sum(axis=1), 1.0)
        # the summary's log-likelihood is that of the returned parameters
        ll = res.score(d, data[d])
        assert np.isclose(res.summary.loglik[d], ll, rtol=1e-9, atol=1e-9)
    # a dataset's fit is the same alone and in a shuffled batch
    order = list(range(len(data)))
    rnd.shuffle(order)
    again = fit([data[k] for k in order])
    for pos, d in enumerate(order):
        a, b = res.summary.loglik[d], again.summary.loglik[pos]
        assert (np.isnan(a) and np.isnan(b)) or a == b
    d = rnd.randrange(len(data))
    alone = fit([data[d]])
    a, b = res.summary.loglik[d], alone.summary.loglik[0]
    assert (np.isnan(a) and np.isnan(b)) or a == b


# --- batches with bad datasets, every emission (issue 30) ---------------------------------------
# Fixed shapes (2 states; 3 symbols, 1 dimension) so that the examples share their kernels.
# A categorical batch without n_symbols infers its alphabet; every generated batch holds an
# anchor dataset with symbol 2, so it is always 3 symbols (no new kernels) while the bad
# datasets' symbols (7.5, -1, 1e300) must not change it.

EMISSIONS = {
    "categorical": dict(emission="categorical", n_symbols=3),
    "categorical-inferred": dict(emission="categorical"),
    "gaussian": dict(emission="gaussian"),
    "poisson": dict(emission="poisson"),
}
BAD = {  # kind -> (emission -> a bad dataset); every one is invalid_data but "huge" Gaussian
    "inf": lambda em: [np.array([0.0, np.inf, 1.0]), np.array([1.0, 2.0])],
    "domain": lambda em: [{"categorical": np.array([0.0, 7.5, -1.0, 1.0]),
                           "poisson": np.array([0.0, -1.0, 2.5]),
                           "gaussian": np.array([0.0, np.inf, 1.0])}[em]],
    "short": lambda em: [np.array([1.0])],
    "empty": lambda em: [np.array([1.0, 0.0]), np.array([])],
    "huge": lambda em: [np.array([1e300, 0.0, 1.0, 2.0])],
}
P_KW = dict(family="hmm", n_components=2, n_starts=3, max_iter=12, seed=9, backend="cpu",
            progress=False)


def _good_sequence(em):
    if em.startswith("categorical"):
        return st.lists(st.integers(0, 2), min_size=1, max_size=12).map(
            lambda v: np.array(v, dtype=float))
    if em == "poisson":
        return st.lists(st.integers(0, 30), min_size=1, max_size=12).map(
            lambda v: np.array(v, dtype=float))
    return st.lists(st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False),
                    min_size=1, max_size=12).map(lambda v: np.array(v, dtype=float))


@st.composite
def bad_batches(draw, em):
    good = draw(st.lists(st.lists(_good_sequence(em), min_size=1, max_size=3),
                         min_size=1, max_size=3))
    if em == "categorical-inferred":
        good = [[np.array([2.0, 0.0, 1.0, 2.0])], *good]  # the anchor: 3 symbols
    kinds = draw(st.lists(st.sampled_from(sorted(BAD)), min_size=1, max_size=3))
    base = em.split("-")[0]
    batch = list(good)
    where = []
    for kind in kinds:
        pos = draw(st.integers(0, len(batch)))
        batch.insert(pos, BAD[kind](base))
        where = [w + (w >= pos) for w in where] + [pos]
    kind_at = dict(zip(where, kinds, strict=True))
    return batch, kind_at


def _fit_quiet(data, kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return bulkem.fit(data, **P_KW, **kw)


def _check_fits(res, data, em):
    """Statuses, best starts, valid probabilities and the result's methods on every fit."""
    s = res.summary
    assert list(s.dataset) == list(range(len(data)))
    assert set(s.status) <= STATUSES
    starts = res.starts
    for d in s.dataset:
        row = s.iloc[d]
        if row.status in ("converged", "max_iter"):
            best = starts[(starts.dataset == d) & (starts.start == row.best_start)]
            assert list(best.status) == [row.status]  # a failed start is never the best
            assert np.isfinite(row.loglik)
            p = res.params(d)
            for key in ("startprob", "transmat", "emissionprob"):
                if key in p:
                    v = p[key]
                    assert np.all(np.isfinite(v)) and np.all(v >= 0)
                    assert np.allclose(v.sum(axis=-1), 1.0, rtol=0, atol=1e-9), key
            for key in ("means", "vars", "lambdas"):
                if key in p:
                    assert np.all(np.isfinite(p[key]))
            ll = res.score(d, data[d])
            assert np.isclose(ll, row.loglik, rtol=1e-9, atol=1e-9)
            gam = res.predict_proba(d, data[d])
            assert all(np.all(np.isfinite(g)) and np.allclose(g.sum(axis=1), 1.0) for g in gam)
            lp, paths = res.decode(d, data[d])
            assert np.all(np.isfinite(lp)) and all(len(q) == len(x) for q, x in
                                                  zip(paths, data[d], strict=True))
            seqs, states = res.sample(d, 2, 4, seed=1)
            assert len(seqs) == 2 and all(len(q) == 4 for q in states)
        elif row.status == "failed":
            assert row.best_start == -1 and np.isnan(row.loglik) and row.message
        else:
            assert row.message


@pytest.mark.parametrize("em", sorted(EMISSIONS))
def test_bad_datasets_are_invalid_and_change_nothing(em):
    @hypothesis.settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(bad_batches(em))
    def run(problem):
        data, kind_at = problem
        res = _fit_quiet(data, EMISSIONS[em])
        _check_fits(res, data, em)
        s = res.summary
        for pos, kind in kind_at.items():
            if not (kind == "huge" and em == "gaussian"):  # (finite values: fitted, or failed)
                assert s.status[pos] == "invalid_data" and s.message[pos], (kind, s.message[pos])
        # the batch without its bad datasets: the same fits, to the bit
        keep = [d for d in range(len(data)) if d not in kind_at]
        clean = _fit_quiet([data[d] for d in keep], EMISSIONS[em])
        for pos, d in enumerate(keep):
            a, b = s.iloc[d], clean.summary.iloc[pos]
            assert a.status == b.status
            assert (np.isnan(a.loglik) and np.isnan(b.loglik)) or a.loglik == b.loglik
            assert (np.isnan(a.bic) and np.isnan(b.bic)) or a.bic == b.bic

    run()


@pytest.mark.cuda
def test_cuda_engine_fits_as_the_cpu_engine():
    """The CUDA engine (numba's simulator in CI: tiny batches) draws the CPU's starts and
    reaches its fits: the same statuses, log-likelihoods within 1e-9 (relative) where a
    start stopped at the same iteration on both."""
    @hypothesis.settings(max_examples=max(2, EXAMPLES // 4), deadline=None, derandomize=True,
                         suppress_health_check=list(hypothesis.HealthCheck))
    @hypothesis.given(st.lists(st.lists(sequence, min_size=1, max_size=2), min_size=1,
                               max_size=2))
    def check(data):
        kw = {**KW, "n_starts": 2, "max_iter": 6}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            cpu = bulkem.fit(data, **kw)
            gpu = bulkem.fit(data, **{**kw, "backend": "cuda"})
        assert list(cpu.summary.status) == list(gpu.summary.status)
        a, b = cpu.starts, gpu.starts
        same = (a.status == b.status) & (a.n_iter == b.n_iter) & (a.status != "degenerate")
        np.testing.assert_allclose(b.loglik[same], a.loglik[same], rtol=1e-9)

    check()
