"""Device math shared by every model: fast exp, scaled numbers, compile targets, the cache.

Everything here is plain Python written once and compiled twice, with
``numba.njit`` for the CPU and as CUDA device functions for the GPU (see
:class:`bulkem.kernels.target.Target`).  :mod:`.cache` keeps compiled CPU kernels on
disk.
"""

from . import cache  # noqa: F401,E402  (first: it makes numba's symbols unique, see cache.py)
