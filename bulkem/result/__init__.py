"""The tables of a batch fit (:class:`FitResult`) and each model's result methods."""

from .base import STATUS_MESSAGES, STATUS_NAMES, FitResult
from .mixture import MixtureResult

__all__ = ["FitResult", "MixtureResult", "STATUS_NAMES", "STATUS_MESSAGES"]
