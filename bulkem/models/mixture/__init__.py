"""Finite mixtures: a family's per-observation math, the fused E-step, the one-large-dataset regime.

* :mod:`.family`: what a component family supplies (:class:`Family`);
* :mod:`.invgauss`, :mod:`.gaussian`: the families;
* :mod:`.fused`: the E-step over a fit's observations;
* :mod:`.model`: a mixture as a model of the EM driver;
* :mod:`.wide`: few fits of very many observations, each over the whole machine.
"""

from .family import Family
from .gaussian import FAMILY as GAUSSIAN
from .invgauss import FAMILY as INVGAUSS
from .model import MixtureModel

MIXTURE_FAMILIES: dict[str, Family] = {INVGAUSS.name: INVGAUSS, GAUSSIAN.name: GAUSSIAN}

__all__ = ["Family", "MixtureModel", "MIXTURE_FAMILIES", "GAUSSIAN", "INVGAUSS"]
