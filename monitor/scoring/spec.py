"""A configured scorer instance — ``{id, kind, params}`` — as rules, datasets and gate files name it.

:class:`ScorerSpec` lives in :mod:`monitor.scoring` so that the scoring stage can take specs from
the rules (:mod:`monitor.rules`) and from datasets (:mod:`monitor.rules.datasets`) without
importing them: rules and datasets depend on scoring, never the other way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from monitor.scoring import catalogue
from monitor.scoring.base import Scorer

__all__ = ["ScorerRegistry", "ScorerSpec"]

ScorerRegistry: TypeAlias = Mapping[str, type[Scorer[Any]]]
"""Kind → scorer class (default everywhere: :func:`monitor.scoring.catalogue.scorer_classes`)."""


@dataclass(frozen=True, slots=True)
class ScorerSpec:
    """One configured scorer instance: ``id`` (unique; referenced by gates and sampling), ``kind``
    (a kind of :mod:`monitor.scoring.catalogue`) and effective ``params`` (``threshold`` included when
    configured)."""

    id: str
    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def is_judge(self) -> bool:
        return catalogue.is_judge_kind(self.kind)

    def build(self, registry: ScorerRegistry | None = None) -> Scorer[Any]:
        """Instantiate the scorer: from the catalogue (unknown kind or parameter:
        :class:`~monitor.scoring.base.ScorerConfigError` with a did-you-mean), or from ``registry``
        when given (a kind missing there: ``KeyError``)."""
        if registry is None:
            return catalogue.build(self.kind, dict(self.params), id=self.id)
        cls = registry.get(self.kind)
        if cls is None:
            raise KeyError(f"scorer kind {self.kind!r} (id {self.id!r}) is not registered")
        return cls(dict(self.params), id=self.id)
