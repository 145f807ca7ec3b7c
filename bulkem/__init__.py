"""bulkem: fit models by EM to many datasets at once, on CPU cores or GPUs."""

from . import datasets
from .api import fit
from .models import FAMILIES
from .models.ssm import StateSpace
from .result import FitResult
from .ssm import kalman_loglik

__version__ = "0.1.0"
__all__ = ["fit", "FitResult", "FAMILIES", "StateSpace", "kalman_loglik", "datasets",
           "__version__"]


def __getattr__(name: str):
    if name == "dask":  # needs the optional dask extra, so imported on first use
        import importlib

        return importlib.import_module(".dask", __name__)
    raise AttributeError(f"module 'bulkem' has no attribute {name!r}")
