"""CUDA engine: the whole EM loop of every fit runs inside one kernel launch.

G lanes of a warp (an aligned group; :func:`lanes_per_fit`) own one
(dataset, start) fit; a block has ``config.CUDA_WARPS_PER_BLOCK`` warps.
Each lane takes every G-th observation of its dataset, so a group reads
neighbouring addresses; after the fused pass the lanes sum their sufficient
statistics and log-likelihood with butterfly shuffles, which leaves the same
total in every lane, and every lane runs the M-step itself.  The M-step and
the per-iteration bookkeeping cost a group the same whatever G, so smaller
groups spend a larger share of their time on observations.  No shared
memory, no block barriers, no host round trip per iteration: each fit checks
its own convergence on the device.

Importing this module never fails for lack of a GPU; :func:`available`
says whether one can be used and, if not, why.
"""

from __future__ import annotations

import time
from typing import NamedTuple

import numpy as np

# numba-cuda 0.30 still reads numpy.row_stack, which numpy 2.5 removed (seen on
# the GPU image: "module 'numpy' has no attribute 'row_stack'").  Restore the
# alias before numba.cuda is imported; drop this once numba-cuda no longer
# needs it.
# (setattr, so that linters' numpy-2 autofixes cannot rewrite the alias away.)
if not hasattr(np, "row_stack"):
    setattr(np, "row_stack", np.vstack)  # noqa: B010

from numba import config as numba_config  # noqa: E402
from numba import cuda, float32, float64  # noqa: E402

if not numba_config.ENABLE_CUDASIM:
    from numba.cuda import libdevice

from .. import config  # noqa: E402
from .driver import EXP_CONSTS, make_em  # noqa: E402

if numba_config.ENABLE_CUDASIM:
    from . import _cudasim

    _cudasim.install()

_FULL_MASK = 0xFFFFFFFF
_WARP = config.WARP_SIZE


def available() -> tuple[bool, str]:
    """Whether a usable CUDA GPU is present, and what was found."""
    try:
        if cuda.is_available():
            name = getattr(cuda.get_current_device(), "name", b"CUDA simulator")
            return True, name.decode() if isinstance(name, bytes) else str(name)
        return False, "numba.cuda.is_available() is False (no CUDA driver or no GPU found)"
    except Exception as err:  # pragma: no cover - depends on the machine
        return False, f"CUDA could not be initialised: {err}"


# The simulator's jit takes no forceinline; on hardware, inlining keeps the
# per-fit arrays in registers.
_INLINE = {} if numba_config.ENABLE_CUDASIM else {"forceinline": True}


def _device(fn):
    return cuda.jit(device=True, **_INLINE)(fn)


def _group_sums(lanes: int):
    """Sums over the ``lanes`` lanes that share a fit (aligned groups of a warp).

    Butterfly shuffles leave the total in every lane of the group; the mask
    names the group only, so a fit may finish while its warp neighbours go on.
    """
    group = _FULL_MASK >> (_WARP - lanes)

    if lanes == _WARP:  # a constant mask: the code the whole-warp kernel was tuned with
        @_device
        def group_sum(v):
            off = _WARP // 2
            while off > 0:
                v += cuda.shfl_xor_sync(_FULL_MASK, v, off)
                off //= 2
            return v
    else:
        @_device
        def group_sum(v):
            mask = group << (cuda.threadIdx.x % _WARP // lanes * lanes)
            off = lanes // 2
            while off > 0:
                v += cuda.shfl_xor_sync(mask, v, off)
                off //= 2
            return v

    @_device
    def group_sum_vec(a, lo, hi):
        for k in range(lo, hi):
            a[k] = group_sum(a[k])

    return group_sum, group_sum_vec


_ONE32 = np.float32(1.0)


@_device
def _exp_neg32(a, xc):
    return libdevice.fast_expf(-a)  # ex2.approx: one multiply and one MUFU


@_device
def _recip32(s):
    return libdevice.fast_fdividef(_ONE32, s)  # rcp.approx: one MUFU


# float32 fits use the hardware's approximate exp2 and reciprocal (relative
# error ~1e-7, as float32 itself); the simulator has no libdevice.
_APPROX32 = None if numba_config.ENABLE_CUDASIM else (_exp_neg32, _recip32)


_kernels: dict = {}


def lanes_per_fit(tol: float) -> int:
    """Lanes that share a fit: fewer when every fit runs ``max_iter`` iterations (``tol=0``).

    The fits of a warp then finish together, so packing several into a warp
    costs no idle lanes; with ``tol > 0`` a warp would wait for its slowest fit.
    """
    return config.CUDA_LANES_PER_FIT_TOL0 if tol == 0 else config.CUDA_LANES_PER_FIT


def _fits_per_block(lanes: int) -> int:
    return config.CUDA_WARPS_PER_BLOCK * _WARP // lanes


def _kernel(family, n_components, n_dims, dtype, lanes: int = _WARP):
    G = lanes
    key = (family.name, n_components, n_dims, np.dtype(dtype).name, config.CUDA_WARPS_PER_BLOCK,
           config.CUDA_MAX_REGISTERS, G, config.ESTEP_BLOCK_OBS[np.dtype(dtype).name])
    if key in _kernels:
        return _kernels[key]
    if G not in (1, 2, 4, 8, 16, 32):
        raise ValueError(f"{G} lanes per fit (config.CUDA_LANES_PER_FIT*); expected a power "
                         "of 2 up to 32.")
    em = make_em(family, n_components, n_dims, dtype.type, _device, *_group_sums(G),
                 _APPROX32 if dtype == np.float32 else None)
    NP = family.n_params(n_components, n_dims)
    NC = family.n_coef(n_components, n_dims)
    NS = family.n_stats(n_components, n_dims)
    M = n_components
    S = NS // M
    FPB = _fits_per_block(G)
    cdt = float32 if dtype == np.float32 else float64
    opts = ({} if config.CUDA_MAX_REGISTERS is None or numba_config.ENABLE_CUDASIM  # no such option
            else {"max_registers": config.CUDA_MAX_REGISTERS})

    @cuda.jit(**opts)
    def kernel(feat, stride, offsets, fit_ds, const, params_io, status, n_iter, loglik,
               xc, max_iter, tol, drop_rtol, reg):
        tid = cuda.threadIdx.x
        f = cuda.blockIdx.x * FPB + tid // G
        lane = tid % G
        if f >= fit_ds.shape[0]:
            return  # the fit's lanes leave together
        params = cuda.local.array(NP, float64)
        coef = cuda.local.array(NC, float64)
        dcoef = cuda.local.array(NC, cdt)
        stats = cuda.local.array(NS, float64)
        part = cuda.local.array(NS, cdt)
        tot = cuda.local.array(S, float64)
        t = cuda.local.array(M, cdt)
        dcoef64 = cuda.local.array(NC, float64)  # (float32 fits' final float64 pass)
        part64 = cuda.local.array(NS, float64)
        t64 = cuda.local.array(M, float64)
        for k in range(NP):
            params[k] = params_io[f, k]
        d = fit_ds[f]
        st, it, ll = em(feat, stride, offsets[d], offsets[d + 1], lane, G, const[d], params,
                        coef, dcoef, stats, part, tot, t, dcoef64, part64, t64,
                        xc, max_iter, tol, drop_rtol, reg)
        if lane == 0:
            status[f] = st
            n_iter[f] = it
            loglik[f] = ll
            for k in range(NP):
                params_io[f, k] = params[k]

    _kernels[key] = kernel
    return kernel


class Running(NamedTuple):
    """A chunk whose fits were launched: its stream, device arrays and done event."""

    chunk: object
    stream: object
    done: object  # event recorded after the kernel (None under the simulator)
    inputs: tuple  # device copies of the inputs, kept alive until the kernel is done
    params: object
    status: object
    n_iter: object
    loglik: object


def launch(job, chunk, stream) -> Running:
    """Copy one chunk to the current GPU and start its fits; return without waiting.

    Parameters
    ----------
    job : bulkem.api.Job
        The chunk's starting values are read from ``job.init``.
    chunk : bulkem.engines.scheduler.Chunk
        The chunk's datasets, packed on the host.
    stream : numba.cuda.cudadrv.driver.Stream

    Returns
    -------
    Running
        Pass it to :func:`finish`.
    """
    lanes = lanes_per_fit(job.tol)
    kernel = _kernel(job.family, job.n_components, job.n_dims, job.dtype, lanes)
    inputs = tuple(cuda.to_device(a, stream=stream)
                   for a in (chunk.feat, chunk.offsets, chunk.const, chunk.fit_ds))
    feat, offsets, const, fit_ds = inputs
    params = cuda.to_device(job.init[chunk.fits], stream=stream)
    n = len(chunk.fits)
    status = cuda.to_device(np.full(n, -1, np.int32), stream=stream)  # -1: not finished
    n_iter = cuda.device_array(n, np.int32, stream=stream)
    loglik = cuda.device_array(n, np.float64, stream=stream)
    fpb = _fits_per_block(lanes)
    kernel[(n + fpb - 1) // fpb, config.CUDA_WARPS_PER_BLOCK * _WARP, stream](
        feat, chunk.stride, offsets, fit_ds, const, params, status, n_iter, loglik,
        EXP_CONSTS, job.max_iter, job.tol, job.drop_rtol, job.reg)
    done = None
    if not numba_config.ENABLE_CUDASIM:
        done = cuda.event()
        done.record(stream)
    return Running(chunk, stream, done, inputs, params, status, n_iter, loglik)


def finish(job, run: Running, watch=None) -> None:
    """Wait for a launched chunk and copy its results into the job.

    ``watch(done)``, if given, is called every ``config.PROGRESS_POLL_S``
    while the kernel runs with the number of the chunk's fits finished so
    far, read through a second stream; the kernel itself is untouched.
    """
    if run.done is not None:
        # Wait by asking, not by a blocking call: the driver's blocking waits
        # keep the GIL (measured: one thread's wait held the others' launches
        # back for tens of ms).  Finished fits are counted seldom.
        poll = cuda.stream() if watch is not None else None
        seen = np.empty(len(run.chunk.fits), np.int32)
        last = time.perf_counter()
        while not run.done.query():
            time.sleep(config.CUDA_WAIT_POLL_S)
            if poll is not None and time.perf_counter() - last >= config.PROGRESS_POLL_S:
                run.status.copy_to_host(seen, stream=poll)
                poll.synchronize()
                watch(int(np.count_nonzero(seen >= 0)))
                last = time.perf_counter()
    out = [a.copy_to_host(stream=run.stream) for a in (run.params, run.status, run.n_iter,
                                                       run.loglik)]
    run.stream.synchronize()
    fits = run.chunk.fits
    job.params[fits], job.status[fits], job.n_iter[fits], job.loglik[fits] = out


def run_fits(job, progress, on_starts=None) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the GPUs, in place.

    ``on_starts()``, if given, runs in the calling thread once every start is
    drawn, while the GPUs still work.
    """
    from . import scheduler

    scheduler.run_fits(job, progress, on_starts)
