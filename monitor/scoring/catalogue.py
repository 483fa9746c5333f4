"""The registry of scorer kinds: name → class, parameters with defaults, docs.

Scorer classes are discovered as concrete subclasses of :class:`~monitor.scoring.base.Scorer`
that define ``kind``, after importing the packages in :data:`SCORER_PACKAGES` (reference scorers
of SCORING.md §2, checks of §3; a package that does not exist yet is skipped). Two classes with
one ``kind`` are a programming error.

Use :func:`build` to make a scorer instance from configuration (``{id?, kind, params?}``): an
unknown kind is a :class:`~monitor.scoring.base.ScorerConfigError` naming the close matches.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from monitor.scoring.base import Scorer, ScorerConfigError

__all__ = ["SCORER_PACKAGES", "ScorerInfo", "build", "catalogue", "describe", "kinds", "scorer_class"]

SCORER_PACKAGES = ("monitor.scoring.reference", "monitor.scoring.checks", "monitor.scoring.judges")


@dataclass(frozen=True, slots=True)
class ScorerInfo:
    """What the catalogue knows about one scorer kind."""

    kind: str
    cls: type[Scorer[Any]]
    version: int
    summary: str
    doc: str
    needs: tuple[str, ...]
    turn_mode: str
    defaults: dict[str, Any]
    params_schema: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "version": self.version,
            "summary": self.summary,
            "needs": list(self.needs),
            "turn_mode": self.turn_mode,
            "defaults": self.defaults,
            "params_schema": self.params_schema,
        }


def _subclasses(cls: type[Any]) -> list[type[Any]]:
    out: list[type[Any]] = []
    for sub in cls.__subclasses__():
        out.append(sub)
        out.extend(_subclasses(sub))
    return out


@lru_cache(maxsize=1)
def catalogue() -> dict[str, ScorerInfo]:
    """Every registered scorer kind, sorted by kind."""
    for pkg in SCORER_PACKAGES:
        try:
            importlib.import_module(pkg)
        except ModuleNotFoundError as exc:
            if exc.name is None or not pkg.startswith(exc.name):
                raise
    found: dict[str, ScorerInfo] = {}
    for cls in _subclasses(Scorer):
        if inspect.isabstract(cls) or "kind" not in cls.__dict__:
            continue
        kind = cls.kind
        if kind in found and found[kind].cls is not cls:
            raise RuntimeError(f"scorer kind {kind!r} is defined twice: {found[kind].cls!r} and {cls!r}")
        doc = inspect.getdoc(cls) or ""
        module_doc = inspect.getdoc(inspect.getmodule(cls)) or ""
        found[kind] = ScorerInfo(
            kind=kind,
            cls=cls,
            version=cls.version,
            summary=cls.summary or (doc.splitlines()[0] if doc else ""),
            doc=f"{doc}\n\n{module_doc}".strip(),
            needs=tuple(sorted(str(n) for n in cls.needs)),
            turn_mode=cls.turn_mode,
            defaults=cls.param_defaults(),
            params_schema=cls.Params.model_json_schema(),
        )
    return dict(sorted(found.items()))


def kinds() -> list[str]:
    return list(catalogue())


def scorer_class(kind: str) -> type[Scorer[Any]]:
    """The class of a scorer kind, or a config error naming the closest kinds."""
    cat = catalogue()
    if kind not in cat:
        close = difflib.get_close_matches(kind, list(cat), n=3, cutoff=0.5)
        hint = f"did you mean {', '.join(repr(c) for c in close)}?" if close else f"known kinds: {', '.join(cat)}"
        raise ScorerConfigError(kind, [f"unknown scorer kind ({hint})"])
    return cat[kind].cls


def build(kind: str, params: Mapping[str, Any] | None = None, *, id: str | None = None) -> Scorer[Any]:
    """A validated scorer instance (raises :class:`ScorerConfigError` on a bad kind or parameter)."""
    return scorer_class(kind)(params, id=id)


def describe(kind: str) -> ScorerInfo:
    scorer_class(kind)
    return catalogue()[kind]
