"""Where numba-cuda needs help: a numpy alias, the simulator's missing pieces, exit-time unloading.

Import ``cuda`` from here (or from :mod:`bulkem.engines.cuda`), never from
numba directly: the numpy alias must be in place before ``numba.cuda`` is
imported, and under the simulator its shuffles must be installed.
"""

from __future__ import annotations

import atexit

import numpy as np

# numba-cuda 0.30 still reads numpy.row_stack, which numpy 2.5 removed (seen on
# the GPU image: "module 'numpy' has no attribute 'row_stack'").  Restore the
# alias before numba.cuda is imported; drop this once numba-cuda no longer
# needs it.
# (setattr, so that linters' numpy-2 autofixes cannot rewrite the alias away.)
if not hasattr(np, "row_stack"):
    setattr(np, "row_stack", np.vstack)  # noqa: B010

from numba import config as numba_config  # noqa: E402
from numba import cuda  # noqa: E402

SIMULATED = bool(numba_config.ENABLE_CUDASIM)

if SIMULATED:
    from . import _cudasim

    _cudasim.install()

__all__ = ["cuda", "numba_config", "SIMULATED", "available", "register_exit_hook",
           "Launcher", "device", "prepared_launch", "_unload_each_library_once"]


def available() -> tuple[bool, str]:
    """Whether a usable CUDA GPU is present, and what was found."""
    try:
        if cuda.is_available():
            name = getattr(cuda.get_current_device(), "name", b"CUDA simulator")
            return True, name.decode() if isinstance(name, bytes) else str(name)
        return False, "numba.cuda.is_available() is False (no CUDA driver or no GPU found)"
    except Exception as err:  # pragma: no cover - depends on the machine
        return False, f"CUDA could not be initialised: {err}"


def _unload_each_library_once(gpus) -> int:
    """Keep one unloading per kernel library; return how many duplicates were dropped.

    numba-cuda 0.30 loads a kernel's compiled library once per process (the
    library is context-independent) but registers its unloading with every
    GPU's context that ran the kernel.  At exit the second unloading of the
    same library crashed processes that had fitted on two H200s ("double
    free or corruption", a segmentation fault; seen in the weakref exit
    finalizers calling ``cuLibraryUnload``).  Run at exit, before those
    finalizers: the libraries are freed with the process either way.
    """
    seen, dropped = set(), 0
    for gpu in gpus:
        ctx = getattr(gpu, "primary_context", None)
        for handle, module in list(getattr(ctx, "modules", {}).items()):
            finalizer = getattr(module, "_finalizer", None)
            if handle in seen and finalizer is not None:
                finalizer.detach()
                dropped += 1
            seen.add(handle)
    return dropped


def _at_exit() -> None:
    try:
        _unload_each_library_once(cuda.gpus)
    except Exception:  # noqa: BLE001 - nothing is left to report to at exit
        pass


_registered = False


def register_exit_hook() -> None:
    """Register :func:`_unload_each_library_once` at exit, once, at the first kernel build.

    Registered after numba's exit hooks, so it runs before them (LIFO).
    """
    global _registered
    if not _registered and not SIMULATED:
        atexit.register(_at_exit)
        _registered = True


class Launcher:
    """Launches ``configured`` (``kernel[grid, block, stream]``) again and again with ``args``.

    numba-cuda types and marshals every argument again at each launch, which
    costs tens of microseconds, about as much as a small kernel; engines that
    launch the same kernels with the same arguments every iteration (or every
    time step) build the marshalled argument list once, the way
    ``numba.cuda``'s own launch builds it, and hand it to ``cuda.core.launch``.
    An integer argument may change between launches (:meth:`set`).  Where this
    numba-cuda differs (or under the simulator, or with ``prepared=False``),
    the ordinary launch is used.
    """

    def __init__(self, configured, args, prepared: bool = True) -> None:
        self.configured = configured
        self.args = list(args)
        self._fast = None
        if SIMULATED or not prepared:
            return
        try:
            from cuda.core import LaunchConfig, launch
            from numba.cuda._compat import CUDA_CORE_GE_1_0

            disp = configured.dispatcher
            kernel = disp.compile(tuple(disp.typeof_pyval(a) for a in args))
            stream = configured.stream
            kargs: list = []
            self._slot = {}  # argument -> its position in kargs (integer arguments)
            for k, (ty, val) in enumerate(zip(kernel.argument_types, args, strict=True)):
                self._slot[k] = len(kargs)
                kernel._prepare_args(ty, val, stream, [], kargs)
            coop = "is_cooperative" if CUDA_CORE_GE_1_0 else "cooperative_launch"
            cfg = LaunchConfig(grid=configured.griddim, block=configured.blockdim, shmem_size=0,
                               **{coop: False})
            cufunc = kernel._codelibrary.get_cufunc().kernel
        except Exception:  # pragma: no cover - another numba-cuda
            return
        self._kargs = kargs
        self._fast = lambda: launch(stream, cfg, cufunc, *kargs)

    def set(self, k: int, value: int) -> None:
        """Argument ``k`` (an integer) is ``value`` from the next launch on."""
        self.args[k] = value
        if self._fast is not None:
            self._kargs[self._slot[k]].value = value

    def __call__(self) -> None:
        if self._fast is not None:
            self._fast()
        else:
            self.configured(*self.args)


_INLINE = {} if SIMULATED else {"forceinline": True}  # (the simulator has no inlining)


def device(fn):
    """``fn`` as a CUDA device function, inlined (forceinline) on the GPU."""
    return cuda.jit(device=True, **_INLINE)(fn)


def local_array(n: int, dtype):
    """``f`` such that ``f()`` is a new local array of ``n`` values of ``dtype`` (a numpy
    scalar type) in the calling thread: inlined at Numba's IR level, so the array is the
    caller's (a local array made in a device function must not outlive it)."""
    from numba import from_dtype

    nb_dtype = from_dtype(np.dtype(dtype))
    opts = {} if SIMULATED else {"inline": "always"}

    @cuda.jit(device=True, **opts)
    def vector():
        return cuda.local.array(n, nb_dtype)

    return vector


def prepared_launch(configured, args, prepared: bool = True):
    """A no-argument function launching ``configured`` with the fixed ``args``
    (:class:`Launcher`; ``prepared``: ``Tuning.cuda_prepared_launch``)."""
    return Launcher(configured, args, prepared=prepared)
