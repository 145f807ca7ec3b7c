"""Above the API: checkpointed and streamed runs, Dask, combining results.

:func:`fit` is the package's ``bulkem.fit``: :func:`bulkem.api.fit`, or with
``checkpoint=`` the same fits in chunks, each written to the run directory as it
finishes (:mod:`bulkem.scale.checkpoint`).  The API below never calls this layer.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any

from .. import api, models

_CHECKPOINT_DOC = """    checkpoint : str or os.PathLike, optional
        A run directory: the datasets are fitted in chunks, each written there
        (Parquet) as it finishes, and the same call again after a crash fits
        only what is missing (see :mod:`bulkem.scale.checkpoint`).

"""


_API_SIGNATURE = inspect.signature(api.fit)


@functools.wraps(api.fit)
def fit(datasets: Any, *args: Any, checkpoint: str | os.PathLike | None = None,
        **kwargs: Any) -> api.FitResult:
    if checkpoint is None:
        return api.fit(datasets, *args, **kwargs)
    bound = _API_SIGNATURE.bind(datasets, *args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    del arguments["datasets"]
    arguments.update(arguments.pop("options"))
    if arguments["n_components"] is None:  # the family's default, so that the manifest names it
        arguments["n_components"] = getattr(models.get(arguments["family"]),
                                            "default_n_components", 2)
    from .checkpoint import fit as fit_in_chunks

    return fit_in_chunks(datasets, checkpoint, **arguments)


def _signature() -> inspect.Signature:
    sig = _API_SIGNATURE
    params = list(sig.parameters.values())
    extra = inspect.Parameter("checkpoint", inspect.Parameter.KEYWORD_ONLY, default=None,
                              annotation="str | os.PathLike | None")
    return sig.replace(parameters=params[:-1] + [extra, params[-1]])


fit.__signature__ = _signature()  # type: ignore[attr-defined]
_RETURNS = "    Returns\n    -------\n    FitResult"
fit.__doc__ = (api.fit.__doc__ or "").replace(_RETURNS, _CHECKPOINT_DOC + _RETURNS, 1)
del fit.__wrapped__  # help() shows the signature above, not api.fit's
