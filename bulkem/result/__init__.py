"""The tables of a batch fit (:class:`FitResult`), each model's result methods, plots.

:func:`result_class` picks a model's result class from :data:`RESULT_CLASSES`;
:mod:`.plotting` draws a mixture fit.
"""

from __future__ import annotations

from ..models.hmm.model import HMMModel
from ..models.mixture.model import MixtureModel
from ..models.ssm.model import SSMModel
from ..models.tmap.model import TMAPModel
from .base import STATUS_MESSAGES, STATUS_NAMES, FitResult
from .hmm import HMMResult
from .mixture import MixtureResult
from .ssm import SSMResult
from .tmap import TMAPResult

__all__ = ["FitResult", "HMMResult", "MixtureResult", "SSMResult", "TMAPResult",
           "STATUS_NAMES", "STATUS_MESSAGES", "result_class"]

RESULT_CLASSES: dict[type, type[FitResult]] = {  # model class -> its tables' class
    MixtureModel: MixtureResult,
    HMMModel: HMMResult,
    TMAPModel: TMAPResult,
    SSMModel: SSMResult,
}


def result_class(model) -> type[FitResult]:
    """The result class of a model: its own class's entry, else its nearest base class's."""
    for cls in type(model).__mro__:
        if cls in RESULT_CLASSES:
            return RESULT_CLASSES[cls]
    raise TypeError(f"no result class for a {type(model).__name__}")
