"""Many float64 arrays copied into one on every core (imported on first use: it needs Numba).

:func:`gather` is ``np.concatenate`` of a list of 1-D or ``(n_i, width)`` float64 arrays
without a Python step per array: one compiled pass reads each array's type, dtype, shape
and flags from the array object itself (NumPy's public ABI, ``PyArrayObject_fields``), and
the values are copied in blocks on every core.  A list it cannot prove to be plain
C-contiguous float64 arrays of one shape gives None, and the caller concatenates as before.

The fields' offsets are found for this interpreter and this NumPy by :func:`_probe_abi`, and
checked on known arrays against what NumPy's own attributes say; where they do not agree (or
on an interpreter without the GIL, whose threads could change an array during a copy) there
is no fast path.  The arrays are held by a list of :func:`gather`'s own, and the kernel holds
the GIL while it runs: none can be freed, reshaped or given other data during a pass.
"""

from __future__ import annotations

import ctypes
import sys
import sysconfig

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

# Arrays; fewer are concatenated by NumPy.  The parallel pass has a fixed cost that NumPy's
# loop does not: on the H200 machine (32 threads) two passes over 500 arrays of 2,000 values
# took 39 ms of a 329 ms two-GPU fit (np.concatenate: ~1 ms); 100,000 arrays gain 5.6x.
GATHER_MIN = 8192
GATHER_BLOCK = 1 << 15  # values per copy task (256 KiB): large arrays on several cores too
_DESCR_TRIES = 4  # float64 dtypes equal to NumPy's own but other objects (unpickled arrays)

_C_CONTIGUOUS = 0x0001  # NPY_ARRAY_C_CONTIGUOUS
# Positions in the ABI vector the kernel takes (addresses and offsets, int64): the offsets
# in an array object of its type, data pointer, ndim, dimensions pointer, descr and flags;
# the address of ``np.ndarray``; then the accepted descrs (the float64 dtype objects).
_TYPE, _DATA, _ND, _DIMS, _DESCR, _FLAGS, _NDARRAY, _DESCRS = range(8)


@intrinsic
def _word(typingctx, addr):
    """The int64 at address ``addr``."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        return builder.load(builder.inttoptr(args[0], ir.IntType(64).as_pointer()))
    return types.int64(addr), codegen


@intrinsic
def _int(typingctx, addr):
    """The C ``int`` (32 bits) at address ``addr``, as an int64."""
    if not isinstance(addr, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = builder.load(builder.inttoptr(args[0], ir.IntType(32).as_pointer()))
        return builder.sext(value, ir.IntType(64))
    return types.int64(addr), codegen


@intrinsic
def _copy(typingctx, out, at, src, count):
    """Copy ``count`` values from address ``src`` to ``out[at:at + count]`` (a memcpy)."""
    if not (isinstance(out, types.Array) and all(isinstance(t, types.Integer)
                                                 for t in (at, src, count))):
        return None

    def codegen(context, builder, signature, args):
        arr = context.make_array(signature.args[0])(context, builder, args[0])
        dst = builder.gep(arr.data, [args[1]])
        size = context.get_abi_sizeof(context.get_data_type(out.dtype))
        cgutils.raw_memcpy(builder, dst, builder.inttoptr(args[2], dst.type), args[3], size)
        return context.get_dummy_value()
    return types.none(out, at, src, count), codegen


@njit(parallel=True, cache=True)
def _gather(addrs, abi, nd, width, block, out):
    """Copy the arrays at ``addrs`` (object addresses) one after the other into ``out``
    (flat), if each is a plain ``ndarray`` (not a subclass), C-contiguous, of a dtype in
    ``abi[_DESCRS:]``, with ``nd`` dimensions and (``nd == 2``) ``width`` columns.

    Returns ``(status, lengths)``: every array's rows and -1 (copied); -2 if ``out`` does
    not have their size (nothing copied: allocate it, and call again); or the first array
    that is not such an array (``lengths`` -1 from there).
    """
    n = len(addrs)
    lengths = np.empty(n, np.int64)
    for i in prange(n):
        a = addrs[i]
        rows = -1
        if _word(a + abi[_TYPE]) == abi[_NDARRAY]:  # (any object has its type there)
            descr = _word(a + abi[_DESCR])
            known = False
            for k in range(_DESCRS, len(abi)):
                known |= descr == abi[k]
            if known and _int(a + abi[_ND]) == nd and \
                    (_int(a + abi[_FLAGS]) & _C_CONTIGUOUS) != 0:
                dims = _word(a + abi[_DIMS])
                if nd == 1 or _word(dims + 8) == width:
                    rows = _word(dims)
        lengths[i] = rows
    starts = np.empty(n + 1, np.int64)
    starts[0] = 0
    n_tasks = 0
    for i in range(n):
        if lengths[i] < 0:
            return i, lengths
        starts[i + 1] = starts[i] + lengths[i] * width
        n_tasks += (lengths[i] * width + block - 1) // block
    if starts[n] != len(out):
        return -2, lengths
    owner = np.empty(n_tasks, np.int64)
    first = np.empty(n_tasks, np.int64)
    j = 0
    for i in range(n):
        for s in range(starts[i], starts[i + 1], block):
            owner[j] = i
            first[j] = s
            j += 1
    for j in prange(n_tasks):
        i, s = owner[j], first[j]
        _copy(out, s, _word(addrs[i] + abi[_DATA]) + 8 * (s - starts[i]),
              min(block, starts[i + 1] - s))
    return -1, lengths


def _probe_abi() -> np.ndarray | None:
    """The ABI vector :func:`_gather` takes, its offsets checked on known arrays against
    NumPy's attributes; None where they disagree or the fast path would be unsafe."""
    if (sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED")
            or ctypes.sizeof(ctypes.c_void_p) != 8 or sys.byteorder != "little"):
        return None
    p = 8
    head = object.__basicsize__  # PyObject_HEAD, its last field the type
    off = {_TYPE: head - p, _DATA: head, _ND: head + p, _DIMS: head + 2 * p,
           _DESCR: head + 5 * p, _FLAGS: head + 6 * p}
    if off[_FLAGS] + 4 > np.ndarray.__basicsize__:
        return None

    def word(addr: int) -> int:
        return ctypes.c_int64.from_address(addr).value

    def cint(addr: int) -> int:
        return ctypes.c_int32.from_address(addr).value

    base = np.arange(24.0).reshape(4, 6)
    probes = [base, base[1], base[:, 2], base.T, base[:, :1], np.empty(0), np.empty((0, 3)),
              np.arange(5, dtype=np.float32), base.reshape(2, 3, 4), np.asarray(2.0),
              base.view(np.recarray)]
    for a in probes:
        x = id(a)
        if (word(x + off[_TYPE]) != id(type(a))
                or word(x + off[_DATA]) != a.__array_interface__["data"][0]
                or cint(x + off[_ND]) != a.ndim or word(x + off[_DESCR]) != id(a.dtype)
                or bool(cint(x + off[_FLAGS]) & _C_CONTIGUOUS) != a.flags.c_contiguous):
            return None
        dims = word(x + off[_DIMS])
        if tuple(word(dims + 8 * k) for k in range(a.ndim)) != a.shape:
            return None
    abi = [off[k] for k in range(_NDARRAY)] + [id(np.ndarray), id(np.dtype(np.float64))]
    return np.array(abi, dtype=np.int64)


_ABI = _probe_abi()


def _plain_float64(a, ndim: int, width: int) -> bool:
    """Whether ``a`` is an array the kernel may copy but for its dtype object's identity."""
    return (type(a) is np.ndarray and a.dtype == np.float64 and a.dtype.isnative
            and a.ndim == ndim and a.flags.c_contiguous and (ndim == 1 or a.shape[1] == width))


def gather(arrays: list, ndim: int, width: int = 1,
           min_arrays: int = GATHER_MIN) -> tuple[np.ndarray, np.ndarray] | None:
    """The float64 arrays one after the other, copied on every core, or None.

    Parameters
    ----------
    arrays : list of ndarray
        Each of shape ``(n_i,)`` (``ndim = 1``) or ``(n_i, width)`` (``ndim = 2``).
    ndim : {1, 2}
    width : int
        The number of columns, for ``ndim = 2``.
    min_arrays : int
        Fewer arrays: None (``np.concatenate`` is as quick).

    Returns
    -------
    values : ndarray of shape (sum n_i,) or (sum n_i, width), float64
        The bits of ``np.concatenate(arrays)``.
    lengths : ndarray of shape (len(arrays),), int64
        Every array's ``n_i``.

    Or None where the arrays are fewer than ``min_arrays`` or not all plain, C-contiguous
    float64 ``ndarray`` objects (no subclass) of this shape: the caller concatenates.
    """
    return _run(arrays, ndim, width, min_arrays, copy=True)


def plain_lengths(arrays: list, ndim: int, width: int = 1,
                  min_arrays: int = GATHER_MIN) -> np.ndarray | None:
    """Every array's length, if :func:`gather` can copy them all; else None.

    One compiled pass over the arrays, no copy: a list of plain float64 arrays
    passes without a Python step per array.

    Parameters
    ----------
    arrays : list of ndarray
    ndim : {1, 2}
    width : int
        The number of columns, for ``ndim = 2``.
    min_arrays : int
        Fewer arrays: None.

    Returns
    -------
    ndarray of shape (len(arrays),), int64, or None
    """
    got = _run(arrays, ndim, width, min_arrays, copy=False)
    return None if got is None else got[1]


def _run(arrays: list, ndim: int, width: int, min_arrays: int,
         copy: bool) -> tuple[np.ndarray | None, np.ndarray] | None:
    """:func:`gather` (``copy``) or :func:`plain_lengths` (``(None, lengths)``)."""
    if _ABI is None or len(arrays) < max(min_arrays, 1) or ndim not in (1, 2) or width < 0:
        return None
    width = 1 if ndim == 1 else int(width)
    arrays = list(arrays)  # (ours: every object alive, whatever is done to the caller's)
    addrs = np.fromiter(map(id, arrays), dtype=np.int64, count=len(arrays))
    abi, out = _ABI, np.empty(0)
    for _ in range(_DESCR_TRIES + 2):
        status, lengths = _gather(addrs, abi, ndim, width, GATHER_BLOCK, out)
        if status == -1:
            return (out if ndim == 1 else out.reshape(int(lengths.sum()), width)), lengths
        if status == -2 and not copy:
            return None, lengths
        if status == -2:  # (NumPy allocates: large blocks on huge pages, faulted in faster)
            out = np.empty(int(lengths.sum()) * width)
            continue
        a = arrays[status]
        if not _plain_float64(a, ndim, width):
            return None
        abi = np.append(abi, np.int64(id(a.dtype)))  # (alive while the list holds ``a``)
    return None
