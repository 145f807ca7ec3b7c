"""bulkem: fit mixture models by EM to many datasets at once, on CPU cores or GPUs."""

from . import datasets
from .api import fit
from .families import FAMILIES
from .models.ssm import StateSpace
from .result import FitResult
from .ssm import kalman_loglik

__version__ = "0.1.0"
__all__ = ["fit", "FitResult", "FAMILIES", "StateSpace", "kalman_loglik", "datasets",
           "__version__"]
