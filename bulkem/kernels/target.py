"""Where device functions are compiled, and how the lanes that share a fit combine."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from numba import njit


@dataclass(frozen=True)
class Target:
    """A compile target for the model pieces and the EM driver.

    Attributes
    ----------
    name : str
        "cpu", "cpu-wide" (one fit over every core) or "cuda".
    jit : callable
        Compiles a device function: ``numba.njit(inline="always")`` or a CUDA
        device-function decorator.
    allreduce : callable
        ``allreduce(x) -> x`` summed over the lanes that share a fit (the
        identity on the CPU, where one thread runs a fit).
    allreduce_vec : callable
        ``allreduce_vec(a, lo, hi)``: the same, in place, for ``a[lo:hi]``.
    approx32 : tuple or None
        ``(exp_neg, recip)`` compiled for float32 by the target (the GPU's
        hardware approximations), or None for the portable ones.
    redo_here : bool
        What a float32 fit that gives up does: fit again in float64 at once
        (True), or return ``REDO_FLOAT64`` for the engine to refit it
        (False: the GPU, where one fit's float64 iterations would hold up the
        float32 fits sharing its warp).
    local : callable or None
        ``local(n, dtype) -> f``, ``f()`` a new array of ``n`` of the calling thread's own
        (a GPU thread's local array, which the compiler keeps in registers where its
        indices are constants), for a model's small per-thread arrays; None: the model's
        own (the CPU's stack, :func:`bulkem.models.hmm.chain.stack_vector`).
    """

    name: str
    jit: Callable
    allreduce: Callable
    allreduce_vec: Callable
    approx32: tuple | None = None
    redo_here: bool = True
    local: Callable | None = None


def kernel(**options):
    """``numba.njit(**options)`` with the GPU's floating-point rules: ``error_model="numpy"``.

    A division by zero gives inf or NaN, as on the GPU, which the driver records as a
    degenerate start; numba's default raises ZeroDivisionError, which inside a
    ``prange`` loop stops the whole batch or leaves a fit untouched (issue 30).  The
    same bits as numba's default wherever no divisor is zero.  Every compiled CPU entry point
    (not the inlined device functions, which take their caller's rules) uses it.
    """
    return njit(error_model="numpy", **options)


@njit(inline="always")
def _same(x):
    return x


@njit(inline="always")
def _nothing(a, lo, hi):
    pass


CPU = Target("cpu", njit(inline="always"), _same, _nothing)

# One fit over every core (the one-large-dataset regime): the pieces run their
# blocks of observations in parallel and add them in order, so a fit gives the
# bits it gives on one CPU thread (bulkem.models.mixture.fused.make_blocked).
CPU_WIDE = Target("cpu-wide", njit(inline="always"), _same, _nothing)
