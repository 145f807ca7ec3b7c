"""How fits run: the shared EM driver, the CPU engine and the CUDA engine."""

from .. import kernels  # noqa: F401  (before anything compiles: kernels/cache.py says why)
