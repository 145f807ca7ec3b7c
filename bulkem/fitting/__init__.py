"""The model-agnostic EM loop (:mod:`.driver`), random starts (:mod:`.starts`), the memory
check (:mod:`.memory`) and progress reporting (:mod:`.progress`)."""

from .. import kernels  # noqa: F401  (before anything compiles: kernels/cache.py says why)
