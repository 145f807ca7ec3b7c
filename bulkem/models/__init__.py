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
from .ssm.linear import STATE_SPACE_FAMILY
from .tmap import TMAP

FAMILIES: dict = {**MIXTURE_FAMILIES, HMM.name: HMM, TMAP.name: TMAP, AR_FAMILY.name: AR_FAMILY,
                  LOCAL_LEVEL_FAMILY.name: LOCAL_LEVEL_FAMILY}


# Families whose likelihood is evaluated (bulkem.loglik), not fitted: every family of
# FAMILIES, and the state-space model of given matrices.
EVALUATED: dict = {**FAMILIES, STATE_SPACE_FAMILY.name: STATE_SPACE_FAMILY}


def get(name, evaluated: bool = False):
    """The family called ``name`` (of :data:`FAMILIES`, or with ``evaluated`` of
    :data:`EVALUATED`); raises ValueError naming the known ones."""
    known = EVALUATED if evaluated else FAMILIES
    if not evaluated and isinstance(name, str) and name in EVALUATED and name not in known:
        raise ValueError(f"family {name!r} is evaluated, not fitted: bulkem.loglik(data, "
                         f"{name!r}, params=...) gives its log-likelihood at given parameters. "
                         "Fit state-space models by EM with family='ar' or 'local_level'.")
    if not isinstance(name, str) or name not in known:
        raise ValueError(
            f"unknown family {name!r}; expected one of {sorted(known)} (family=)."
        )
    return known[name]


__all__ = ["EVALUATED", "FAMILIES", "Family", "MixtureModel", "get"]
