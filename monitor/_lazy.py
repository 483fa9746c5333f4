"""Lazy module attributes: a name is imported from where it lives on first use, so importing a package that
re-exports heavy modules stays cheap (PEP 562 ``__getattr__``)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any


def load(package: str, namespace: dict[str, Any], where: Mapping[str, tuple[str, str]], name: str) -> Any:
    """The attribute ``name`` of ``package`` from ``where[name]`` = (module, attribute), cached in ``namespace``;
    ``AttributeError`` for a name ``where`` does not list."""
    found = where.get(name)
    if found is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(found[0]), found[1])
    namespace[name] = value
    return value
