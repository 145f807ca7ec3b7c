"""Tuning settings named on the command line (``--set``, ``--grid``): ``NAME=VALUE`` items.

Every tunable number is a field of :class:`bulkem.tuning.Tuning`, passed to ``bulkem.fit``
(``tuning=``), never patched.  ``NAME`` is a field (``cuda_max_registers``) or the old
``bulkem.config`` name in upper case (``CUDA_MAX_REGISTERS``, lowercased here), so that the
commands in ``BENCHMARKS.md`` and ``HISTORY.md`` still run.  Two old names differ:
``LARGE_CUDA_PREPARED_LAUNCH`` is ``cuda_prepared_launch``, and ``WIDE_REGIME`` (``True``,
``False``, ``None``) is ``strategy`` (``"wide"``, ``"bulk"``, ``None``).  ``VALUE`` is a
Python literal (``8``, ``None``, ``{'float32': 64}``); a bare word is a string
(``strategy=wide``); a list is made a tuple (``cuda_devices=[0]``).
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any

from bulkem.tuning import DEFAULT, Tuning

FIELDS = frozenset(f.name for f in dataclasses.fields(Tuning))
RENAMED = {"large_cuda_prepared_launch": "cuda_prepared_launch"}
WIDE_REGIME = {True: "wide", False: "bulk", None: None}  # the old WIDE_REGIME -> strategy


def literal(text: str) -> Any:
    """``text`` as a Python literal, or the string itself (``wide``)."""
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def setting(name: str, value: Any) -> dict[str, Any]:
    """One setting as ``Tuning.replace`` keywords: ``{field: value}``."""
    key = name.strip().lower()
    if key == "wide_regime":
        if value not in WIDE_REGIME:
            raise ValueError(f"WIDE_REGIME={value!r}: expected True, False or None "
                             "(now Tuning.strategy 'wide', 'bulk' or None).")
        return {"strategy": WIDE_REGIME[value]}
    key = RENAMED.get(key, key)
    if key not in FIELDS:
        raise ValueError(f"unknown setting {name!r}: not a field of bulkem.tuning.Tuning "
                         f"(fields: {', '.join(sorted(FIELDS))}).")
    if isinstance(value, list):
        value = tuple(value)
    return {key: value}


def parse(item: str) -> dict[str, Any]:
    """``NAME=VALUE`` as ``Tuning.replace`` keywords."""
    name, sep, value = item.partition("=")
    if not sep:
        raise ValueError(f"expected NAME=VALUE, got {item!r}.")
    return setting(name, literal(value))


def from_items(items: list[str], base: Tuning = DEFAULT) -> Tuning:
    """``base`` with every ``NAME=VALUE`` of ``items`` (``--set`` options)."""
    changes: dict[str, Any] = {}
    for item in items:
        changes.update(parse(item))
    return base.replace(**changes)


def grid_variants(specs: list[str]) -> list[dict[str, Any]]:
    """``NAME=V1;V2`` gives one variant per value; ``A=1+B=4`` one variant with both.

    Each variant is ``Tuning.replace`` keywords (field names).
    """
    out = []
    for spec in specs:
        if "+" in spec:
            variant: dict[str, Any] = {}
            for part in spec.split("+"):
                variant.update(parse(part))
            out.append(variant)
        else:
            name, _, values = spec.partition("=")
            out += [setting(name, literal(v)) for v in values.split(";")]
    return out


def variant_label(variant: dict[str, Any]) -> str:
    """``name=value ...`` of a variant, for table rows."""
    return " ".join(f"{k}={v}" for k, v in variant.items())
