"""CUDA engine: the whole EM loop of every fit runs inside one kernel launch.

One warp owns one (dataset, start) fit; ``config.CUDA_WARPS_PER_BLOCK`` fits
share a block.  Each lane takes every 32nd observation of its dataset, so a
warp reads neighbouring addresses; after the fused pass the lanes sum their
sufficient statistics and log-likelihood with butterfly shuffles, which
leaves the same total in every lane, and every lane runs the (cheap) M-step
itself.  No shared memory, no block barriers, no host round trip per
iteration: each fit checks its own convergence on the device.

Importing this module never fails for lack of a GPU; :func:`available`
says whether one can be used and, if not, why.
"""

from __future__ import annotations

import time

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


@_device
def _warp_sum(v):
    off = _WARP // 2
    while off > 0:
        v += cuda.shfl_xor_sync(_FULL_MASK, v, off)
        off //= 2
    return v


@_device
def _warp_sum_vec(a, lo, hi):
    for k in range(lo, hi):
        a[k] = _warp_sum(a[k])


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


def _kernel(family, n_components, n_dims, dtype):
    key = (family.name, n_components, n_dims, np.dtype(dtype).name, config.CUDA_WARPS_PER_BLOCK,
           config.CUDA_MAX_REGISTERS)
    if key in _kernels:
        return _kernels[key]
    em = make_em(family, n_components, n_dims, dtype.type, _device, _warp_sum, _warp_sum_vec,
                 _APPROX32 if dtype == np.float32 else None)
    NP = family.n_params(n_components, n_dims)
    NC = family.n_coef(n_components, n_dims)
    NS = family.n_stats(n_components, n_dims)
    M = n_components
    S = NS // M
    WPB = config.CUDA_WARPS_PER_BLOCK
    cdt = float32 if dtype == np.float32 else float64
    opts = ({} if config.CUDA_MAX_REGISTERS is None or numba_config.ENABLE_CUDASIM  # no such option
            else {"max_registers": config.CUDA_MAX_REGISTERS})

    @cuda.jit(**opts)
    def kernel(feat, stride, offsets, fit_ds, const, params_io, status, n_iter, loglik,
               xc, max_iter, tol, drop_rtol, reg):
        tid = cuda.threadIdx.x
        f = cuda.blockIdx.x * WPB + tid // _WARP
        lane = tid % _WARP
        if f >= fit_ds.shape[0]:
            return  # the whole warp leaves together
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
        st, it, ll = em(feat, stride, offsets[d], offsets[d + 1], lane, _WARP, const[d], params,
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


def launch(job, chunk, stream, watch=None) -> None:
    """Copy one chunk to the current GPU, run its fits, copy the results back.

    Parameters
    ----------
    job : bulkem.api.Job
        Results are written into its arrays at the chunk's fit rows.
    chunk : bulkem.engines.scheduler.Chunk
        The chunk's datasets, packed on the host.
    stream : numba.cuda.cudadrv.driver.Stream
    watch : callable, optional
        ``watch(done)`` is called every ``config.PROGRESS_POLL_S`` while the
        kernel runs with the number of the chunk's fits finished so far, read
        through a second stream; the kernel itself is untouched.
    """
    kernel = _kernel(job.family, job.n_components, job.n_dims, job.dtype)
    feat = cuda.to_device(chunk.feat, stream=stream)
    offsets = cuda.to_device(chunk.offsets, stream=stream)
    const = cuda.to_device(chunk.const, stream=stream)
    fit_ds = cuda.to_device(chunk.fit_ds, stream=stream)
    params = cuda.to_device(job.params[chunk.fits], stream=stream)
    n = len(chunk.fits)
    status = cuda.to_device(np.full(n, -1, np.int32), stream=stream)  # -1: not finished
    n_iter = cuda.device_array(n, np.int32, stream=stream)
    loglik = cuda.device_array(n, np.float64, stream=stream)
    wpb = config.CUDA_WARPS_PER_BLOCK
    kernel[(n + wpb - 1) // wpb, wpb * _WARP, stream](
        feat, chunk.stride, offsets, fit_ds, const, params, status, n_iter, loglik,
        EXP_CONSTS, job.max_iter, job.tol, job.drop_rtol, job.reg)
    if watch is not None and not numba_config.ENABLE_CUDASIM:
        done_evt = cuda.event()
        done_evt.record(stream)
        poll = cuda.stream()
        seen = np.empty(n, np.int32)
        last = time.perf_counter()
        # Ask often whether the kernel is done (cheap), count finished fits seldom.
        while not done_evt.query():
            time.sleep(config.PROGRESS_QUERY_S)
            if time.perf_counter() - last >= config.PROGRESS_POLL_S:
                status.copy_to_host(seen, stream=poll)
                poll.synchronize()
                watch(int(np.count_nonzero(seen >= 0)))
                last = time.perf_counter()
    out = [a.copy_to_host(stream=stream) for a in (params, status, n_iter, loglik)]
    stream.synchronize()
    job.params[chunk.fits], job.status[chunk.fits], job.n_iter[chunk.fits], \
        job.loglik[chunk.fits] = out


def run_fits(job, progress) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the GPUs, in place."""
    from . import scheduler

    scheduler.run_fits(job, progress)
