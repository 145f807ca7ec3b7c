"""The tables of a batch fit (:class:`FitResult`) and each model's result methods."""

from .base import STATUS_MESSAGES, STATUS_NAMES, FitResult
from .hmm import HMMResult
from .mixture import MixtureResult
from .ssm import SSMResult
from .tmap import TMAPResult

__all__ = ["FitResult", "HMMResult", "MixtureResult", "SSMResult", "TMAPResult",
           "STATUS_NAMES",
           "STATUS_MESSAGES"]
