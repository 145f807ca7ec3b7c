"""Finite mixtures: a family's per-observation math, the fused E-step, the mixture model.

* :mod:`.family`: what a component family supplies (:class:`Family`);
* :mod:`.invgauss`, :mod:`.gaussian` (and :mod:`.gaussian_full`,
  :mod:`.gaussian_tied`, :mod:`.gaussian_spherical`), :mod:`.poisson`,
  :mod:`.negbinom`, :mod:`.lognormal`, :mod:`.gamma`: the families;
* :mod:`.fused`: the E-step over a fit's observations;
* :mod:`.model`: a mixture as a model of the EM driver.

Few fits of very many observations, each over the whole machine (the
one-large-dataset regime), run in :mod:`bulkem.engines.cpu.large` and
:mod:`bulkem.engines.cuda.large`.
"""

from .family import Family
from .gamma import FAMILY as GAMMA
from .gaussian import FAMILY as GAUSSIAN
from .gaussian_full import FAMILY as GAUSSIAN_FULL
from .gaussian_spherical import FAMILY as GAUSSIAN_SPHERICAL
from .gaussian_tied import FAMILY as GAUSSIAN_TIED
from .invgauss import FAMILY as INVGAUSS
from .lognormal import FAMILY as LOGNORMAL
from .model import MixtureModel
from .negbinom import FAMILY as NEGBINOM
from .poisson import FAMILY as POISSON

# fit(family="gaussian", covariance_type=...): "diag" (the default), "full", "tied" or
# "spherical" (scikit-learn's names)
GAUSSIAN.variants.update({"diag": GAUSSIAN, "full": GAUSSIAN_FULL, "tied": GAUSSIAN_TIED,
                          "spherical": GAUSSIAN_SPHERICAL})

MIXTURE_FAMILIES: dict[str, Family] = {INVGAUSS.name: INVGAUSS, GAUSSIAN.name: GAUSSIAN,
                                       POISSON.name: POISSON, NEGBINOM.name: NEGBINOM,
                                       LOGNORMAL.name: LOGNORMAL, GAMMA.name: GAMMA}

__all__ = ["Family", "MixtureModel", "MIXTURE_FAMILIES", "GAMMA", "GAUSSIAN", "GAUSSIAN_FULL",
           "GAUSSIAN_SPHERICAL", "GAUSSIAN_TIED", "INVGAUSS",
           "LOGNORMAL", "NEGBINOM", "POISSON"]
