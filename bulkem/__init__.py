"""bulkem: fit models by EM to many datasets at once, on CPU cores or GPUs.

The public names are loaded on first use (``import bulkem`` itself is quick;
the first ``bulkem.fit`` imports pandas and numba).
"""

from __future__ import annotations

import importlib

__version__ = "0.1.0"
__all__ = ["fit", "loglik", "FitResult", "FAMILIES", "StateSpace", "kalman_loglik", "datasets",
           "__version__"]

_LAZY = {  # name -> (module, attribute or None for the module itself)
    "fit": (".scale", "fit"),  # api.fit, or checkpointed
    "loglik": (".api", "loglik"),  # at given parameters, every family of fit
    "FitResult": (".result", "FitResult"),
    "FAMILIES": (".models", "FAMILIES"),
    "StateSpace": (".models.ssm", "StateSpace"),
    "kalman_loglik": (".api", "kalman_loglik"),
    "datasets": (".interop.datasets", None),
    "dask": (".scale.dask", None),  # needs the optional dask extra
}


def __getattr__(name: str):
    if name not in _LAZY:
        raise AttributeError(f"module 'bulkem' has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = importlib.import_module(module, __name__)
    if attr is not None:
        value = getattr(value, attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
