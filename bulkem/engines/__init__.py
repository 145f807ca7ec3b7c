"""How fits run: the strategy table, the CPU and CUDA engines, decoding of fitted chains.

* :mod:`.select`: which strategy (bulk, large, wide, many states) runs a job, and its run;
* :mod:`.cpu`: the CPU engines (bulk, wide, large) and the Kalman filters;
* :mod:`.cuda`: the CUDA engines (bulk, wide, large, many states), their scheduler and
  buffers, and the Kalman filters;
* :mod:`.infer`: forward scores, posteriors and Viterbi paths of fitted chains.

The EM driver they run is :mod:`bulkem.fitting.driver`.
"""

from .. import kernels  # noqa: F401  (before anything compiles: kernels/cache.py says why)
