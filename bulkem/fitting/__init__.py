"""The model-agnostic EM loop (:mod:`.driver`) and random starts (:mod:`.starts`)."""

from .. import kernels  # noqa: F401  (before anything compiles: kernels/cache.py says why)
