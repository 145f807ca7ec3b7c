"""Bad arguments raise at once; bad datasets get their own status; the rest is fitted."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pandas as pd
import pytest
from conftest import demo

import bulkem
from bulkem.data import Ragged
from bulkem.engines import cuda as cuda_engine

GOOD = demo(1, 60, 5)[0]


@pytest.mark.parametrize(
    ("kwargs", "exc", "words"),
    [
        (dict(n_components=0), ValueError, "n_components must be >= 1"),
        (dict(n_components=1.5), TypeError, "n_components must be an integer"),
        (dict(n_starts=0), ValueError, "n_starts must be >= 1"),
        (dict(max_iter=-1), ValueError, "max_iter must be >= 0"),
        (dict(tol=-1.0), ValueError, "tol must be a number >= 0"),
        (dict(family="weibull"), ValueError, "unknown family 'weibull'"),
        (dict(backend="tpu"), ValueError, "unknown backend 'tpu'"),
        (dict(dtype="float16"), ValueError, "unknown dtype 'float16'"),
        (dict(seed=-3), ValueError, "seed must be >= 0"),
        (dict(init={"mu": [1, 2]}), ValueError, "init has keys"),
        (dict(init={"weight": [1, 1], "mu": [1, 2, 3], "lambda": [1, 1]}), ValueError,
         "init['mu'] has shape (3,)"),
        (dict(init={"weight": [[1, 1]] * 3, "mu": [[1, 2]] * 3, "lambda": [[1, 1]] * 3},
              n_starts=2), ValueError, "init gives 3 starts but n_starts = 2"),
    ],
)
def test_bad_arguments_raise_at_once(kwargs, exc, words):
    with pytest.raises(exc, match=re.escape(words)):
        bulkem.fit([GOOD], **{"backend": "cpu", **kwargs})


def test_non_numeric_data_raises():
    with pytest.raises(TypeError, match="non-numeric"):
        bulkem.fit([GOOD, ["a", "b", "c"]], backend="cpu")
    with pytest.raises(TypeError, match="expected a list of arrays"):
        bulkem.fit(42, backend="cpu")


def test_cuda_without_gpu_says_what_was_found(monkeypatch):
    monkeypatch.setattr(cuda_engine, "available", lambda: (False, "no CUDA driver found"))
    with pytest.raises(ValueError, match="no CUDA driver found.*backend='cpu'"):
        bulkem.fit([GOOD], backend="cuda")
    assert bulkem.fit([GOOD], backend="auto", n_starts=1).backend == "cpu"


def test_bad_datasets_get_their_own_status(backend, tuning):
    data = {
        "ok1": GOOD,
        "empty": [],
        "short": [1.0, 2.0, 3.0],
        "nan": np.r_[GOOD[:20], np.nan],
        "inf": np.r_[GOOD[:20], np.inf],
        "negative": np.r_[GOOD[:20], -1.0, 0.0],
        "ok2": GOOD[::-1] * 2,
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = bulkem.fit(data, n_starts=2, max_iter=5, seed=1, backend=backend, tuning=tuning)
    msgs = [str(w.message) for w in caught if "invalid" in str(w.message)]
    assert msgs == ["5 of 7 datasets are invalid and were not fitted; see summary.status "
                    "and summary.message."]
    s = res.summary.set_index("dataset")
    assert s.loc["ok1", "status"] in ("converged", "max_iter")
    assert s.loc["ok2", "status"] in ("converged", "max_iter")
    assert s.loc["empty", "message"] == "empty dataset (0 values)"
    assert "too short: 3 values, at least 6" in s.loc["short", "message"]
    assert s.loc["nan", "message"] == "1 of 21 values is NaN or infinite"
    assert s.loc["inf", "message"] == "1 of 21 values is NaN or infinite"
    assert s.loc["negative", "message"].startswith("2 of 22 values are <= 0")
    bad = s.drop(index=["ok1", "ok2"])
    assert (bad.status == "invalid_data").all() and bad.loglik.isna().all()
    assert set(res.components.dataset) == {"ok1", "ok2"}
    with pytest.raises(ValueError, match="5 invalid dataset"):
        bulkem.fit(data, strict=True, backend=backend, tuning=tuning)


def test_every_problem_of_a_dataset_is_reported():
    ig, gauss = bulkem.FAMILIES["invgauss"], bulkem.FAMILIES["gaussian"]
    assert ig.check(np.array([1.0, np.nan]), 2) == (
        "too short: 2 values, at least 6 needed for this number of components; "
        "1 of 2 values is NaN or infinite")
    assert ig.check(np.array([-1.0, -np.inf, 0.0]), 2) == (
        "too short: 3 values, at least 6 needed for this number of components; "
        "1 of 3 values is NaN or infinite; 2 of 3 values are <= 0 (the inverse-Gaussian "
        "family needs positive values)")
    assert ig.check(np.array([2.0]), 2).startswith("too short: 1 value, ")
    assert ig.check(np.array([]), 2) == "empty dataset (0 values)"
    assert ig.check(GOOD, 2) is None
    x = np.ones((4, 2))
    x[0, 1] = np.nan
    assert gauss.check(x, 2) == (
        "too short: 4 values, at least 6 needed for this number of components; "
        "1 of 4 observations has NaN or infinite coordinates")


def test_failed_start_is_recorded_never_best(backend, tuning):
    init = {"weight": [[0.5, 0.5], [0.5, 0.5]], "mu": [[1.0, 3.0], [1000.0, 2.0]],
            "lambda": [[30.0, 0.2], [1e6, 1.0]]}
    res = bulkem.fit([GOOD], n_starts=2, init=init, max_iter=10, backend=backend, tuning=tuning)
    st = res.starts.set_index("start")
    assert st.loc[1, "status"] == "degenerate"
    assert "collapsed" in st.loc[1, "message"]
    assert res.summary.best_start[0] == 0
    assert res.summary.message[0] == "1 of 2 starts degenerate"


def test_every_start_degenerate_is_failed(backend, tuning):
    with pytest.warns(UserWarning, match="1 of 2 datasets have no usable start"):
        res = bulkem.fit([GOOD, np.full(30, 2.0)], n_starts=3, max_iter=5, seed=2,
                         backend=backend, tuning=tuning)
    assert list(res.summary.status) [1] == "failed"
    assert res.summary.message[1].startswith("all 3 starts degenerate (the first: ")
    assert (res.starts[res.starts.dataset == 1].status == "degenerate").all()
    assert 1 not in set(res.components.dataset)


def test_input_forms_agree():
    a, b = demo(2, 50, 9)
    kw = dict(n_starts=2, max_iter=20, seed=4, backend="cpu")
    from_list = bulkem.fit([a, b], **kw)
    from_dict = bulkem.fit({"a": a, "b": b}, **kw)
    long = pd.DataFrame({"dataset": ["a"] * len(a) + ["b"] * len(b), "value": np.r_[a, b]})
    from_frame = bulkem.fit(long, **kw)
    renamed = bulkem.fit(long.rename(columns={"dataset": "g", "value": "x"}), dataset_col="g",
                         value_col="x", **kw)
    one = bulkem.fit(a, **kw)
    assert list(from_dict.summary.dataset) == ["a", "b"]
    for r in (from_dict, from_frame, renamed):
        assert np.array_equal(r.summary.loglik, from_list.summary.loglik)
    assert one.summary.loglik[0] == from_list.summary.loglik[0]
    with pytest.raises(ValueError, match="expected a 'dataset' column"):
        bulkem.fit(long.rename(columns={"dataset": "g"}), backend="cpu")
    # read-only values (an Arrow column, a memory map, a checkpoint's data read back): the
    # same fits, from the kernels of writable ones (Numba would type them apart and compile
    # every kernel again, 15-70 s each: the batch copies them once)
    ro = [v.copy() for v in (a, b)]
    for v in ro:
        v.flags.writeable = False
    assert bulkem.fit(ro, **kw).starts.equals(from_list.starts)
    values = np.concatenate(ro)
    values.flags.writeable = False
    packed = Ragged.flat(values, np.array([0, len(a), len(values)]))
    assert packed.values.flags.writeable and np.array_equal(packed.values, values)
    column = long["value"].to_numpy()  # (read-only under pandas' copy-on-write, not copied)
    packed = Ragged.flat(column, np.array([0, len(column)]))
    assert packed.values.flags.writeable and np.shares_memory(packed.values, column)


def test_batch_of_only_invalid_datasets_returns_their_rows(backend, tuning):
    with pytest.warns(UserWarning, match="2 of 2 datasets are invalid"):
        res = bulkem.fit([[1, 2, np.inf, 4, 5, 6], [1, 2, -3, 4, 5, 6]], n_starts=1,
                         backend=backend, tuning=tuning)
    assert list(res.summary.status) == ["invalid_data", "invalid_data"]
    assert res.components.empty and res.starts.empty and res.start_values.empty


def test_large_datasets_keys_by_blocks_depend_on_values_alone():
    """Keys of datasets past Tuning.hash_blocked_min_words (hashed by blocks, in parallel)."""
    from bulkem.fitting.starts import dataset_keys

    rng = np.random.default_rng(3)
    big, small = rng.normal(size=(50, 2)), rng.normal(size=(5, 2))  # 100 words: by blocks

    def keys(*ds, blocked_min=64):
        return dataset_keys(np.concatenate(ds), np.r_[0, np.cumsum([len(d) for d in ds])],
                            blocked_min, 16)

    alone, = keys(big)
    assert list(keys(small, big, small)) == [keys(small)[0], alone, keys(small)[0]]
    changed = big.copy()
    changed[49, 1] = np.nextafter(changed[49, 1], 1.0)
    assert keys(changed)[0] != alone and keys(big[:40])[0] != alone
    # one chain: another key, also of the values alone
    assert keys(big, blocked_min=1 << 20)[0] != alone


@pytest.mark.parametrize("parallel", [False, True])
def test_the_finite_check_finds_every_problem_and_stays_quiet(parallel):
    """The sum shortcut (small datasets) and the count on every core (large ones)."""
    from functools import partial

    from bulkem.data import inputs

    basic_problems = partial(inputs.basic_problems, parallel_min=1 if parallel else 1 << 60)
    r_na = np.frombuffer(np.uint64(0x7FF00000000007A2).tobytes())[0]  # R's NA: a signalling NaN
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from the sum
        assert basic_problems(np.array([1e308, 1e308, 1.0]), 2) is None  # the sum overflows
        assert "1 of 3 values is NaN" in basic_problems(np.array([1.0, np.nan, 2.0]), 2)
        assert "NaN or infinite" in basic_problems(np.array([np.inf, -np.inf, 2.0]), 2)
        assert "1 of 3 values is NaN" in basic_problems(np.array([1.0, r_na, 2.0]), 2)
        x = np.ones((70_000, 2))
        assert basic_problems(x, 2) is None
        x[69_999, 1] = np.nan  # in the last block
        assert basic_problems(x, 2) == "1 of 70000 observations has NaN or infinite coordinates"


def test_large_vector_features_copied_in_parallel_equal_numpys():
    from bulkem.models.mixture.model import _contiguous

    x = np.random.default_rng(4).normal(size=(1100, 3))
    assert np.array_equal(_contiguous(x.T, 1), np.ascontiguousarray(x.T))


@pytest.mark.parametrize("scale, dtype", [(1e-292, "float64"), (1e-200, "float64"),
                                          (1e300, "float32")])
def test_overflow_inside_a_cpu_kernel_is_a_degenerate_start(scale, dtype):
    """Issue 30, bug 2: values whose powers overflow the compute dtype made a CPU kernel divide
    by zero: SystemError alone, and beside a good dataset a fit left 'converged' at its
    starting values (n_iter 0, loglik 0).  Now each start is recorded degenerate, the dataset
    failed with a message, and the good dataset fitted as alone."""
    tiny = np.array([9.34, 15.9, 8.61, 9.06, 7.10, 18.4]) * scale
    kw = dict(n_components=2, n_starts=2, max_iter=5, seed=1, backend="cpu", dtype=dtype,
              progress=False)
    with pytest.warns(UserWarning, match="no usable start"):
        res = bulkem.fit([GOOD, tiny], **kw)
    assert list(res.summary.status) == ["max_iter", "failed"]
    assert res.summary.message[1].startswith("all 2 starts degenerate (the first: ")
    assert (res.starts[res.starts.dataset == 1].status == "degenerate").all()
    alone = bulkem.fit([GOOD], **kw)
    assert res.summary.loglik[0] == alone.summary.loglik[0]
    with pytest.warns(UserWarning, match="no usable start"):
        assert bulkem.fit([tiny], **kw).summary.status[0] == "failed"


@pytest.mark.parametrize("kw, error, match", [
    (dict(seed=2**64), ValueError, r"seed must be at most 18446744073709551615; got seed = "),
    (dict(dtype=None), ValueError, r"unknown dtype None; expected one of \['float64'"),
    (dict(n_starts=10**12), MemoryError, r"1,000,000,000,000 fits .* need .* GiB, but .* GiB of "
                                          r"memory is available; use fewer starts"),
])
def test_arguments_beyond_their_limits_say_so(kw, error, match):
    """Issue 30, arguments: these were accepted silently (seed=2**64 fitted as seed=0,
    dtype=None as float64) or ended in a bare MemoryError."""
    with pytest.raises(error, match=match):
        bulkem.fit([GOOD], backend="cpu", progress=False, **kw)


def test_buffers_beyond_memory_say_how_much_and_what_to_do(monkeypatch):
    """Issue 30: one long HMM sequence allocated a buffer per parallel fit inside the kernel
    and ended in SystemError when memory ran out; now a MemoryError before any fit."""
    from bulkem.fitting import memory

    monkeypatch.setattr(memory, "available_bytes", lambda: 1e6)
    seq = np.random.default_rng(0).normal(size=100_000)
    with pytest.raises(MemoryError, match=r"work buffers of .* longest sequence or series: "
                                          r"100,000 steps.*split the longest"):
        bulkem.fit([[seq]], family="hmm", n_starts=2, backend="cpu", progress=False)


@pytest.mark.parametrize("family", ["invgauss", "gaussian", "gaussian_full", "poisson",
                                    "lognormal", "gamma"])
def test_the_mixtures_vectorised_screen_finds_every_dataset_the_check_faults(family, seed):
    """``MixtureModel.pack`` runs ``check`` only where one pass over all values flags a
    dataset (too short, NaN or infinite, ``Family.outside``): its messages must be exactly
    the per-dataset checks', and the valid datasets' values packed in order."""
    from bulkem.models.mixture import GAUSSIAN_FULL, MIXTURE_FAMILIES
    from bulkem.models.mixture.model import MixtureModel

    rng = np.random.default_rng(seed)
    fam = GAUSSIAN_FULL if family == "gaussian_full" else MIXTURE_FAMILIES[family]
    D = 2 if fam.ndim == 2 else 1
    model = MixtureModel(fam, 2, D)

    def good(n):
        x = rng.integers(1, 9, (n, D)).astype(float)
        return x if fam.ndim == 2 else x[:, 0]

    pairs = [(0, good(12)), (1, good(0)), (2, good(3))]
    for k, v in enumerate([np.nan, np.inf, -np.inf, -1.0, 0.0, 2.5]):
        x = good(12)
        x[int(rng.integers(0, 12))] = v
        pairs.append((3 + k, x))
    pairs.append((99, good(15)))
    packed = model.pack(pairs)
    assert packed.messages == [model.check(v) for _, v in pairs]
    assert packed.messages[0] is None and packed.messages[-1] is None
    ok = [v for (_, v), m in zip(pairs, packed.messages, strict=True) if m is None]
    np.testing.assert_array_equal(packed.values, np.concatenate(ok))


def test_arrow_lists_and_long_frames_are_read_by_column():
    """A ``pyarrow`` list array (plain, large, chunked, sliced; a null list is an empty
    dataset) and a long frame in any row order give the fits of the same list of arrays; a
    frame's datasets keep their order of first appearance, rows without one left out."""
    pa = pytest.importorskip("pyarrow")
    a, b, c = demo(3, 40, 5)
    kw = dict(n_starts=2, max_iter=10, seed=4, backend="cpu")
    ref = bulkem.fit([a, b, c], **kw).summary.loglik.to_numpy()
    lists = [a.tolist(), b.tolist(), c.tolist()]
    for arr in (pa.array(lists), pa.array(lists, type=pa.large_list(pa.float64())),
                pa.chunked_array([pa.array(lists[:1]), pa.array(lists[1:])]),
                pa.array([[1.0]] + lists)[1:]):
        np.testing.assert_array_equal(bulkem.fit(arr, **kw).summary.loglik, ref)
    with pytest.warns(UserWarning, match="1 of 4 datasets are invalid"):
        res = bulkem.fit(pa.array(lists[:1] + [None] + lists[1:]), **kw)
    assert res.summary.status[1] == "invalid_data" and "empty" in res.summary.message[1]
    long = pd.DataFrame({"dataset": np.repeat(["z", "y", "x"], [len(a), len(b), len(c)]),
                         "value": np.r_[a, b, c]})
    shuffled = long.sample(frac=1.0, random_state=1)
    shuffled.loc[shuffled.index[0], "dataset"] = None  # no dataset: left out
    for frame in (long, pa.Table.from_pandas(long)):
        res = bulkem.fit(frame, **kw)
        assert list(res.summary.dataset) == ["z", "y", "x"]
        np.testing.assert_array_equal(res.summary.loglik, ref)
    res = bulkem.fit(shuffled, **kw)
    want = bulkem.fit({k: g.value.to_numpy()
                       for k, g in shuffled.groupby("dataset", sort=False)}, **kw)
    assert list(res.summary.dataset) == list(want.summary.dataset)
    np.testing.assert_array_equal(res.summary.loglik, want.summary.loglik)


def test_the_compiled_passes_over_long_inputs_equal_numpys():
    """``key_starts`` (where a long frame's units start) and ``segment_stats`` (a TMAP
    trace's sums, largest values and sums of logs), against NumPy; ``segment_stats`` gives
    the same bits on any number of threads."""
    import numba

    from bulkem.data._checks import SEGMENT_BLOCK, key_starts, segment_stats

    rng = np.random.default_rng(5)
    for n in (0, 1, 2, 9, 70_000, 140_001):
        a = np.sort(rng.integers(0, 3, n))
        b = rng.integers(0, 2, n).astype(float)
        want = np.flatnonzero(np.r_[True, (a[1:] != a[:-1]) | (b[1:] != b[:-1])]) if n else []
        assert np.array_equal(key_starts(a, b), want), n
    x = rng.exponential(size=3 * SEGMENT_BLOCK + 7) + 0.01
    offsets = np.array([0, 0, 5, 5, SEGMENT_BLOCK + 9, len(x), len(x)])
    got = segment_stats(x, offsets)
    for d in range(len(offsets) - 1):
        seg = x[offsets[d]:offsets[d + 1]]
        want = (seg.sum(), seg.max(), np.log(seg).sum()) if len(seg) else (0.0, -np.inf, 0.0)
        assert np.allclose(got[d], want, rtol=1e-12), d
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        assert np.array_equal(segment_stats(x, offsets), got)
    finally:
        numba.set_num_threads(threads)
