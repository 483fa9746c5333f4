"""What the failure analysis reads: plain rows the store queries return (:mod:`monitor.store.failures`).

A window is ``[since, until)`` in UTC. A run belongs to the window in which it was first scored
(``runs.first_scored_at``); its results and issues go with it, even a judge verdict stored later, so every
count of a window refers to the same runs.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Final

from monitor.scoring.result import FailureKind

__all__ = [
    "CATEGORY_OF",
    "SELECTION_KINDS",
    "AgentDay",
    "Category",
    "IssueGroup",
    "JudgeSpend",
    "ScoreBucket",
    "SelectionIssue",
    "ToolDefinition",
    "ToolUsage",
    "ValueCount",
    "Window",
    "WindowData",
]


class Category(enum.StrEnum):
    """The groups of the failure taxonomy (SCORING §5.3) the report charts."""

    SELECTION = "tool_selection"
    PARAMETERS = "parameters"
    EXECUTION = "execution"
    EFFICIENCY = "efficiency"
    LATENCY = "latency"
    OUTCOME = "outcome"


CATEGORY_OF: Final[Mapping[str, Category]] = {
    FailureKind.WRONG_TOOL: Category.SELECTION,
    FailureKind.MISSING_TOOL: Category.SELECTION,
    FailureKind.UNNECESSARY_TOOL: Category.SELECTION,
    FailureKind.FORBIDDEN_TOOL: Category.SELECTION,
    FailureKind.HALLUCINATED_TOOL: Category.SELECTION,
    FailureKind.WRONG_ORDER: Category.SELECTION,
    FailureKind.MISSING_PARAMETER: Category.PARAMETERS,
    FailureKind.UNKNOWN_PARAMETER: Category.PARAMETERS,
    FailureKind.WRONG_TYPE: Category.PARAMETERS,
    FailureKind.ENUM_VIOLATION: Category.PARAMETERS,
    FailureKind.INVALID_VALUE: Category.PARAMETERS,
    FailureKind.WRONG_VALUE: Category.PARAMETERS,
    FailureKind.FORBIDDEN_PARAMETER: Category.PARAMETERS,
    FailureKind.MALFORMED_ARGUMENTS: Category.PARAMETERS,
    FailureKind.TOOL_ERROR: Category.EXECUTION,
    FailureKind.REPEATED_CALL: Category.EFFICIENCY,
    FailureKind.LOOP: Category.EFFICIENCY,
    FailureKind.EXCESS_CALLS: Category.EFFICIENCY,
    FailureKind.TOOL_LATENCY: Category.LATENCY,
    FailureKind.RUN_LATENCY: Category.LATENCY,
    FailureKind.RESPONSE_MISMATCH: Category.OUTCOME,
    FailureKind.OFF_TOPIC: Category.OUTCOME,
    FailureKind.OVER_REFUSAL: Category.OUTCOME,
    FailureKind.GOAL_NOT_MET: Category.OUTCOME,
    FailureKind.POOR_TRAJECTORY: Category.OUTCOME,
}
"""Every FailureKind's group; a kind the store holds that this version does not know falls in ``outcome``."""

SELECTION_KINDS: Final = frozenset(
    {"wrong_tool", "missing_tool", "unnecessary_tool", "forbidden_tool", "hallucinated_tool"}
)
"""Kinds the store returns issue by issue (:class:`SelectionIssue`): the confusions are derived from them."""


@dataclass(frozen=True, slots=True)
class Window:
    since: datetime
    until: datetime

    @property
    def days(self) -> list[date]:
        """The UTC days the window touches, in order."""
        first, last = self.since.date(), (self.until - _EPSILON).date()
        return [date.fromordinal(d) for d in range(first.toordinal(), last.toordinal() + 1)]

    def previous(self) -> Window:
        """The window of the same length just before this one."""
        return Window(self.since - (self.until - self.since), self.since)


@dataclass(frozen=True, slots=True)
class AgentDay:
    """Runs of one agent first scored on one UTC day; ``failed_runs`` had a scored result that did not pass."""

    agent: str | None
    day: date
    runs: int
    failed_runs: int


@dataclass(frozen=True, slots=True)
class ToolUsage:
    """Calls of one tool by one agent's runs of the window, and how many runs called it."""

    agent: str | None
    tool: str
    calls: int
    runs: int


@dataclass(frozen=True, slots=True)
class IssueGroup:
    """Issues of one (agent, kind, tool, parameter) in the window (every kind but :data:`SELECTION_KINDS`).

    ``runs`` are the distinct runs hurt, ``error_runs`` those with an issue of severity ``error`` (the others only
    had warnings); ``judged_runs`` those where a judge scorer raised it; ``examples`` recent full trace ids.
    """

    agent: str | None
    kind: str
    tool: str | None
    parameter: str | None
    issues: int
    runs: int
    error_runs: int
    judged_runs: int = 0
    examples: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SelectionIssue:
    """One tool-selection issue (a kind of :data:`SELECTION_KINDS`) with the names its run called, in call order,
    and whether a judge scorer raised it."""

    trace_id: str
    run_id: str
    agent: str | None
    scorer: str
    judge: bool
    kind: str
    severity: str
    tool: str | None
    expected_tool: str | None
    call_index: int | None
    called: tuple[str, ...]
    scored_at: datetime


@dataclass(frozen=True, slots=True)
class ValueCount:
    """How often one offending value (the issue's ``actual``, as JSON text) occurs in one pattern."""

    agent: str | None
    kind: str
    tool: str | None
    parameter: str | None
    value: str
    issues: int


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool as an agent offered it (its spans carried it): the latest definition seen."""

    agent: str | None
    name: str
    description: str | None
    input_schema: Any
    last_seen: datetime | None = None


@dataclass(frozen=True, slots=True)
class ScoreBucket:
    """Scored results of one scorer whose score fell in ``[bucket / 10, (bucket + 1) / 10)`` (1.0 in bucket 9)."""

    scorer: str
    bucket: int
    results: int
    passed: int


@dataclass(frozen=True, slots=True)
class JudgeSpend:
    """Judge usage of one (day, scorer, model): results with judge data, their cost (None: no price known)."""

    day: date
    scorer: str
    model: str | None
    results: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


@dataclass(frozen=True, slots=True)
class WindowData:
    """Everything the analysis needs about one window; lists in any order."""

    window: Window
    agent_days: list[AgentDay] = field(default_factory=list)
    tools: list[ToolUsage] = field(default_factory=list)
    issue_groups: list[IssueGroup] = field(default_factory=list)
    selection: list[SelectionIssue] = field(default_factory=list)
    values: list[ValueCount] = field(default_factory=list)
    category_runs: dict[tuple[str | None, str], int] = field(default_factory=dict)
    """Distinct runs hurt per (agent, :class:`Category` value)."""

    @property
    def agent_runs(self) -> dict[str | None, int]:
        out: dict[str | None, int] = {}
        for d in self.agent_days:
            out[d.agent] = out.get(d.agent, 0) + d.runs
        return out

    @property
    def runs(self) -> int:
        return sum(d.runs for d in self.agent_days)

    @property
    def failed_runs(self) -> int:
        return sum(d.failed_runs for d in self.agent_days)

    @property
    def tool_calls(self) -> dict[tuple[str | None, str], int]:
        return {(t.agent, t.tool): t.calls for t in self.tools}


_EPSILON = datetime.resolution
