"""The models bulkem fits, by family name.

Each model supplies the EM driver's pieces (:mod:`bulkem.models.base`):
mixtures (:mod:`.mixture`), hidden Markov models (:mod:`.hmm`), TMAPs with
Erlang branches (:mod:`.tmap`) and state-space models (:mod:`.ssm`: AR(p) plus
noise, local level).  A family
reads its input form (``read``) and builds the model for the data and
options (``model``).
"""

from __future__ import annotations

from .. import kernels  # noqa: F401  (before anything compiles: kernels/cache.py says why)
from .hmm import HMM
from .mixture import MIXTURE_FAMILIES, Family, MixtureModel
from .ssm.family import AR_FAMILY, LOCAL_LEVEL_FAMILY
from .tmap import TMAP

FAMILIES: dict = {**MIXTURE_FAMILIES, HMM.name: HMM, TMAP.name: TMAP, AR_FAMILY.name: AR_FAMILY,
                  LOCAL_LEVEL_FAMILY.name: LOCAL_LEVEL_FAMILY}


def get(name):
    """The family called ``name``; raises ValueError naming the known ones."""
    if not isinstance(name, str) or name not in FAMILIES:
        raise ValueError(
            f"unknown family {name!r}; expected one of {sorted(FAMILIES)} (family=)."
        )
    return FAMILIES[name]


__all__ = ["FAMILIES", "Family", "MixtureModel", "get"]
