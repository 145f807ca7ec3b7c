"""Many arrays copied into one on every core (issue 37): the bits of ``np.concatenate``,
and None (the caller concatenates) for anything the kernel cannot prove it may copy."""

from __future__ import annotations

import pickle

import numba
import numpy as np
import pytest
from conftest import SEED

from bulkem.data import gather as gather_mod
from bulkem.data.gather import GATHER_BLOCK, GATHER_MIN, gather
from bulkem.data.inputs import _concatenate, as_datasets, pack
from bulkem.models.ssm.linear import LinearGaussian

pytestmark = pytest.mark.skipif(gather_mod._ABI is None,
                                reason="no fast path on this interpreter (gather returns None)")


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(np.uint64)


def _same(got, arrays):
    """``got`` is ``(values, lengths)`` with the bits and shape of ``np.concatenate``."""
    assert got is not None
    values, lengths = got
    want = np.concatenate(arrays)
    assert values.dtype == np.float64 and values.shape == want.shape
    assert values.flags.c_contiguous and values.flags.writeable
    np.testing.assert_array_equal(_bits(values), _bits(want))
    np.testing.assert_array_equal(lengths, [len(a) for a in arrays])


def _ragged(rng, n, width=None, longest=40):
    """``n`` float64 arrays of random lengths (0 included), odd bits among the values."""
    out = []
    for k in rng.integers(0, longest, n):
        a = rng.normal(size=(k,) if width is None else (k, width))
        flat = a.reshape(-1)
        if flat.size:
            flat[rng.integers(0, flat.size)] = rng.choice([np.nan, -0.0, np.inf, -np.inf, 5e-324])
        out.append(a)
    return out


@pytest.mark.parametrize("width", [None, 1, 3])
@pytest.mark.parametrize("n", [1, 2, 7, 300])
def test_bits_of_concatenate(n, width):
    rng = np.random.default_rng(SEED + n)
    arrays = _ragged(rng, n, width)
    _same(gather(arrays, 1 if width is None else 2, width or 1, min_arrays=1), arrays)


def test_views_and_large_arrays():
    """Contiguous views (rows of a stack, a (T, 1) reshape, offset slices), a NaN payload,
    and arrays larger than a copy task (split across tasks)."""
    rng = np.random.default_rng(SEED)
    stack = rng.normal(size=(5, 2 * GATHER_BLOCK + 3))
    payload = np.array([0x7FF8_0000_0000_1234], dtype=np.uint64).view(np.float64)
    ones = [stack[0], stack[1, 3:], payload, stack[2, :GATHER_BLOCK], np.empty(0),
            np.arange(3 * GATHER_BLOCK, dtype=np.float64), stack[4, 7:9]]
    _same(gather(ones, 1, min_arrays=1), ones)
    cols = [a[:, None] for a in ones] + [stack[3].reshape(-1, 1)]
    _same(gather(cols, 2, 1, min_arrays=1), cols)
    wide = [stack.reshape(-1, 5)[:GATHER_BLOCK + 1], np.empty((0, 5)), rng.normal(size=(9, 5))]
    _same(gather(wide, 2, 5, min_arrays=1), wide)
    none = [np.empty((0, 0))] * 3  # (no columns: no values)
    values, lengths = gather(none, 2, 0, min_arrays=1)
    assert values.shape == (0, 0) and lengths.tolist() == [0, 0, 0]


class _Sub(np.ndarray):
    pass


def _fallbacks():
    base = np.arange(40.0)
    two = base.reshape(20, 2)
    swapped = base.astype(base.dtype.newbyteorder())
    return {
        "subclass": [base, base.view(_Sub)],
        "masked": [base, np.ma.masked_array(base, mask=base > 30)],
        "recarray": [base, base.view(np.recarray)],
        "every other value": [base, base[::2]],
        "reversed": [base, base[::-1]],
        "column of a 2-D array": [base, two[:, 1]],
        "float32": [base, base.astype(np.float32)],
        "int64": [base, np.arange(4)],
        "byte-swapped float64": [base, swapped],
        "a list": [base, [1.0, 2.0]],
        "None": [base, None],
        "a float": [base, 1.5],
        "a 0-d array": [base, np.asarray(1.5)],
        "a 2-D array among 1-D": [base, two],
    }


@pytest.mark.parametrize("case", list(_fallbacks()))
def test_cannot_prove_returns_none(case):
    arrays = _fallbacks()[case]
    assert gather(arrays, 1, min_arrays=1) is None
    assert gather(arrays[::-1], 1, min_arrays=1) is None  # (first or later)


def test_two_dimensional_fallbacks():
    rng = np.random.default_rng(SEED)
    c = rng.normal(size=(30, 3))
    for arrays in ([c, np.asfortranarray(c)],  # (not C-contiguous)
                   [c, c[:, :2]],  # (another width, and a strided view)
                   [c, c[::2]],
                   [c, c.reshape(-1)]):  # (1-D among 2-D)
        assert gather(arrays, 2, 3, min_arrays=1) is None
    assert gather([c, c], 2, 2, min_arrays=1) is None  # (not the width asked for)
    col, row = rng.normal(size=(30, 1)), rng.normal(size=(1, 30))
    _same(gather([col, row.T], 2, 1, min_arrays=1), [col, row.T])  # (contiguous still)


def test_few_arrays_or_none_left_to_numpy():
    arrays = [np.arange(3.0)] * 4
    assert gather(arrays, 1, min_arrays=5) is None
    assert gather([], 1, min_arrays=0) is None
    assert gather(arrays, 3, min_arrays=1) is None


def test_equal_dtype_objects_of_unpickled_arrays():
    """An unpickled array's float64 dtype is equal to NumPy's but another object: copied
    (a few such objects), or None (more), never different bits."""
    rng = np.random.default_rng(SEED)
    shared = pickle.loads(pickle.dumps(_ragged(rng, 50)))  # (one dtype object for all)
    arrays = _ragged(rng, 30) + shared
    _same(gather(arrays, 1, min_arrays=1), arrays)
    apart = [pickle.loads(pickle.dumps(a)) for a in _ragged(rng, 12)]
    got = gather(apart, 1, min_arrays=1)
    if len({id(a.dtype) for a in apart} - {id(np.dtype(np.float64))}) > \
            gather_mod._DESCR_TRIES:
        assert got is None
    else:
        _same(got, apart)
    meta = np.arange(5.0).astype(np.dtype(np.float64, metadata={"unit": "s"}))
    _same(gather([np.arange(3.0), meta], 1, min_arrays=1), [np.arange(3.0), meta])


def test_same_bits_on_any_number_of_threads():
    rng = np.random.default_rng(SEED)
    arrays = _ragged(rng, 500, longest=GATHER_BLOCK // 30) + [rng.normal(size=3 * GATHER_BLOCK)]
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = gather(arrays, 1, min_arrays=1)
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        every = gather(arrays, 1, min_arrays=1)
    finally:
        numba.set_num_threads(before)
    _same(one, arrays)
    np.testing.assert_array_equal(_bits(one[0]), _bits(every[0]))


def test_mixture_pack_same_values_either_way():
    """``pack`` of a list: gathered (many plain arrays) or concatenated by NumPy (a strided
    view among them), the same values; a float32 list is float64 before it gets here."""
    rng = np.random.default_rng(SEED)
    arrays = [a + 5.0 for a in _ragged(rng, GATHER_MIN + 100)]  # (enough for the fast path)
    check = lambda v: None if len(v) else "empty"  # noqa: E731
    want = np.concatenate(arrays)
    for data in (arrays, arrays[:-1] + [arrays[-1][::2]],
                 [a.astype(np.float32) for a in arrays]):
        packed = pack(as_datasets(data), check, lambda v, n: np.zeros(len(n), bool))
        ref = np.concatenate([np.asarray(a, np.float64) for a in data])
        np.testing.assert_array_equal(_bits(packed.values), _bits(ref))
    two = [a.reshape(-1, 2) for a in _ragged(rng, 2 * GATHER_MIN + 600) if len(a) % 2 == 0]
    got = _concatenate(two, two[0])[0]
    np.testing.assert_array_equal(_bits(got), _bits(np.concatenate(two)))
    assert _concatenate(arrays[:1], arrays[0])[0] is arrays[0]  # (one dataset: no copy)
    np.testing.assert_array_equal(_bits(_concatenate(arrays, arrays[0])[0]), _bits(want))
    sub = arrays[:-1] + [arrays[-1].view(_Sub)]
    assert gather(sub, 1) is None
    np.testing.assert_array_equal(_bits(_concatenate(sub, arrays[0])[0]), _bits(want))


def test_state_space_pack_same_either_way():
    """The state-space model's ``pack``: the same values, lengths and messages gathered and
    concatenated (a strided series among them), invalid series left out."""
    rng = np.random.default_rng(SEED)
    series = [rng.normal(size=(k, 1)) for k in rng.integers(0, 30, GATHER_MIN + 100)]
    series[3][:] = np.nan  # (all missing)
    series[5] = np.array([[0.5], [np.inf]])
    series[7] = rng.normal(size=(10, 1))
    m = LinearGaussian(2, 1)
    fast = m.pack(list(enumerate(series)))
    strided = np.repeat(series[7], 2, axis=1)[:, :1]
    slow = m.pack(list(enumerate(series[:7] + [strided] + series[8:])))
    assert gather(series[:7] + [strided], 2, 1, min_arrays=1) is None
    np.testing.assert_array_equal(_bits(fast.values), _bits(slow.values))
    np.testing.assert_array_equal(fast.offsets, slow.offsets)
    np.testing.assert_array_equal(fast.n_obs, slow.n_obs)
    assert fast.messages == slow.messages and fast.messages[3] and fast.messages[5]
    ok = [s for s, msg in zip(series, fast.messages, strict=True) if msg is None]
    np.testing.assert_array_equal(_bits(fast.values), _bits(np.concatenate(ok)))


@pytest.mark.parametrize(("form", "ndim"), [("1-D", 1), ("1-D", 2), ("2-D", 2), ("dict", 1),
                                            ("strided", 1), ("float32", 2)])
def test_as_datasets_same_pairs_either_way(form, ndim):
    """``as_datasets`` of many plain float64 arrays checks them in one compiled pass: the
    pairs (identifiers, shapes, values) it gave with a Python step per array."""
    from bulkem.data.inputs import _as_float, _same_dims

    rng = np.random.default_rng(SEED)
    arrays = _ragged(rng, GATHER_MIN + 100, 3 if form == "2-D" else None)
    if form == "strided":
        arrays[-1] = arrays[-1][::2]
    if form == "float32":
        arrays = [a.astype(np.float32) for a in arrays]
    data = {f"d{k}": a for k, a in enumerate(arrays)} if form == "dict" else arrays
    got = as_datasets(data, ndim)
    keyed = data.items() if form == "dict" else enumerate(data)
    want = [(k, _as_float(v, k, ndim)) for k, v in keyed]
    want = _same_dims(want) if ndim == 2 else want
    assert [k for k, _ in got] == [k for k, _ in want]
    for (_, g), (_, w) in zip(got, want, strict=True):
        assert type(g) is np.ndarray and g.dtype == np.float64 and g.shape == w.shape
        np.testing.assert_array_equal(_bits(g), _bits(w))
