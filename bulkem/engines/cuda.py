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

from .. import config  # noqa: E402
from .driver import make_em  # noqa: E402

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
def _warp_sum_vec(a, n):
    for k in range(n):
        a[k] = _warp_sum(a[k])


_kernels: dict = {}


def _kernel(family, n_components, n_dims, dtype):
    key = (family.name, n_components, n_dims, np.dtype(dtype).name, config.CUDA_WARPS_PER_BLOCK)
    if key in _kernels:
        return _kernels[key]
    em = make_em(family, n_components, n_dims, dtype.type, _device, _warp_sum, _warp_sum_vec)
    NP = family.n_params(n_components, n_dims)
    NC = family.n_coef(n_components, n_dims)
    NS = family.n_stats(n_components, n_dims)
    M = n_components
    WPB = config.CUDA_WARPS_PER_BLOCK
    cdt = float32 if dtype == np.float32 else float64

    @cuda.jit
    def kernel(feat, stride, offsets, fit_ds, const, params_io, status, n_iter, loglik,
               max_iter, tol, drop_rtol, reg):
        tid = cuda.threadIdx.x
        f = cuda.blockIdx.x * WPB + tid // _WARP
        lane = tid % _WARP
        if f >= fit_ds.shape[0]:
            return  # the whole warp leaves together
        params = cuda.local.array(NP, float64)
        coef = cuda.local.array(NC, cdt)
        stats = cuda.local.array(NS, float64)
        t = cuda.local.array(M, cdt)
        for k in range(NP):
            params[k] = params_io[f, k]
        d = fit_ds[f]
        st, it, ll = em(feat, stride, offsets[d], offsets[d + 1], lane, _WARP, const[d],
                        params, coef, stats, t, max_iter, tol, drop_rtol, reg)
        if lane == 0:
            status[f] = st
            n_iter[f] = it
            loglik[f] = ll
            for k in range(NP):
                params_io[f, k] = params[k]

    _kernels[key] = kernel
    return kernel


def run_fits(job, progress) -> None:
    """Run every fit of a :class:`bulkem.api.Job` on the current GPU, in place."""
    kernel = _kernel(job.family, job.n_components, job.n_dims, job.dtype)
    stream = cuda.stream()
    feat = cuda.to_device(job.feat.astype(job.dtype, copy=False), stream=stream)
    offsets = cuda.to_device(job.offsets, stream=stream)
    const = cuda.to_device(job.const, stream=stream)
    n = len(job.fit_ds)
    step = config.CUDA_CHUNK_FITS
    wpb = config.CUDA_WARPS_PER_BLOCK
    for lo in range(0, n, step):
        hi = min(n, lo + step)
        fit_ds = cuda.to_device(job.fit_ds[lo:hi], stream=stream)
        params = cuda.to_device(job.params[lo:hi], stream=stream)
        status = cuda.device_array(hi - lo, np.int32, stream=stream)
        n_iter = cuda.device_array(hi - lo, np.int32, stream=stream)
        loglik = cuda.device_array(hi - lo, np.float64, stream=stream)
        blocks = (hi - lo + wpb - 1) // wpb
        kernel[blocks, wpb * _WARP, stream](
            feat, job.stride, offsets, fit_ds, const, params, status, n_iter, loglik,
            job.max_iter, job.tol, job.drop_rtol, job.reg)
        params.copy_to_host(job.params[lo:hi], stream=stream)
        status.copy_to_host(job.status[lo:hi], stream=stream)
        n_iter.copy_to_host(job.n_iter[lo:hi], stream=stream)
        loglik.copy_to_host(job.loglik[lo:hi], stream=stream)
        stream.synchronize()
        progress(hi - lo)
