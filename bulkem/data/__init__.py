"""Input forms -> validated, packed batches (values + offsets)."""

from .. import kernels  # noqa: F401  (before anything compiles: kernels/cache.py says why)
from .inputs import Packed, as_datasets, basic_problems, pack
from .ragged import Ragged

__all__ = ["Packed", "Ragged", "as_datasets", "basic_problems", "pack"]
