"""Model families, by name."""

from .base import Family
from .gaussian import FAMILY as GAUSSIAN
from .invgauss import FAMILY as INVGAUSS

FAMILIES: dict[str, Family] = {INVGAUSS.name: INVGAUSS, GAUSSIAN.name: GAUSSIAN}


def get(name: str) -> Family:
    """The family called ``name``; raises ValueError naming the known ones."""
    try:
        return FAMILIES[name]
    except KeyError:
        raise ValueError(
            f"unknown family {name!r}; expected one of {sorted(FAMILIES)}."
        ) from None
