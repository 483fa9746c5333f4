"""The result record every scorer returns, and the closed failure taxonomy (SCORING.md §5)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from monitor.trajectory.model import ToolCall


class FailureKind(enum.StrEnum):
    """What went wrong in the agent's tool use. Closed: safe as a Prometheus label."""

    WRONG_TOOL = "wrong_tool"
    MISSING_TOOL = "missing_tool"
    UNNECESSARY_TOOL = "unnecessary_tool"
    FORBIDDEN_TOOL = "forbidden_tool"
    HALLUCINATED_TOOL = "hallucinated_tool"
    WRONG_ORDER = "wrong_order"
    MISSING_PARAMETER = "missing_parameter"
    UNKNOWN_PARAMETER = "unknown_parameter"
    WRONG_TYPE = "wrong_type"
    ENUM_VIOLATION = "enum_violation"
    INVALID_VALUE = "invalid_value"
    WRONG_VALUE = "wrong_value"
    FORBIDDEN_PARAMETER = "forbidden_parameter"
    MALFORMED_ARGUMENTS = "malformed_arguments"
    TOOL_ERROR = "tool_error"
    REPEATED_CALL = "repeated_call"
    LOOP = "loop"
    EXCESS_CALLS = "excess_calls"
    TOOL_LATENCY = "tool_latency"
    RUN_LATENCY = "run_latency"
    RESPONSE_MISMATCH = "response_mismatch"
    OFF_TOPIC = "off_topic"
    OVER_REFUSAL = "over_refusal"
    GOAL_NOT_MET = "goal_not_met"
    POOR_TRAJECTORY = "poor_trajectory"


class NoteKind(enum.StrEnum):
    """Data-quality notes (severity ``info``): never failures of the agent."""

    TOOL_SCHEMA_INVALID = "tool_schema_invalid"
    TOOL_DEFINITIONS_CONFLICT = "tool_definitions_conflict"
    TOOL_DEFINITIONS_INCOMPLETE = "tool_definitions_incomplete"


class Severity(enum.StrEnum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


Status: TypeAlias = Literal["scored", "not_applicable", "error"]

NOT_APPLICABLE_REASONS = frozenset(
    {
        "no_reference",
        "arguments_not_captured",
        "results_not_captured",
        "no_tool_definitions",
        "no_tool_calls",
        "no_user_input",
        "no_output",
        "no_topics",
        "no_rule",
        "judges_disabled",
    }
)
ERROR_REASONS = frozenset(
    {"invocation_count_mismatch", "judge_output_invalid", "judge_unavailable", "runner_failed", "internal"}
)


@dataclass(frozen=True, slots=True)
class Issue:
    """One explained finding (SCORING.md §5.2). Issues explain a score; they never change it."""

    kind: FailureKind | NoteKind
    severity: Severity = Severity.ERROR
    tool: str | None = None
    parameter: str | None = None
    call_index: int | None = None
    call_id: str | None = None
    expected: Any = None
    actual: Any = None
    detail: Any = None
    turn: int | None = None
    """0-based turn of a multi-turn case the issue belongs to (None: single turn / whole conversation)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": str(self.kind),
            "severity": str(self.severity),
            "tool": self.tool,
            "parameter": self.parameter,
            "call_index": self.call_index,
            "call_id": self.call_id,
            "expected": self.expected,
            "actual": self.actual,
            "detail": self.detail,
            "turn": self.turn,
        }


class _CallName(enum.Enum):
    CALL_NAME = "the call's name"


CALL_NAME: Final = _CallName.CALL_NAME
"""Default ``tool`` of :func:`call_issue`: the name of the call the issue is about."""


def call_issue(
    kind: FailureKind | NoteKind,
    call: ToolCall,
    *,
    severity: Severity = Severity.ERROR,
    tool: str | _CallName | None = CALL_NAME,
    parameter: str | None = None,
    expected: Any = None,
    actual: Any = None,
    detail: Any = None,
) -> Issue:
    """An issue about one call (§5.2): ``call_index`` and ``call_id`` from ``call``, ``tool`` its name
    unless given (a budget issue on the whole run names no tool; ``wrong_order`` names the expected
    tool while pointing at the call found in its place)."""
    return Issue(
        kind,
        severity,
        call.name if tool is CALL_NAME else tool,
        parameter,
        call.index,
        call.call_id,
        expected,
        actual,
        detail,
    )


@dataclass(frozen=True, slots=True)
class JudgeUsage:
    model: str
    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    batch: bool = False
    cost_usd: float | None = None
    latency_ms: float | None = None


@dataclass(frozen=True, slots=True)
class ScoreResult:
    """One scorer's verdict on one run (or one offline case), SCORING.md §5.1.

    ``score`` and ``passed`` are set only when ``status == "scored"``; ``reason`` carries the
    not-applicable / error reason code, or a judge's explanation.
    """

    scorer: str
    scorer_kind: str
    scorer_version: int
    status: Status
    score: float | None = None
    threshold: float | None = None
    passed: bool | None = None
    reason: str | None = None
    degraded: str | None = None
    issues: tuple[Issue, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    params_hash: str = ""
    judge: JudgeUsage | None = None
    trace_id: str | None = None
    run_id: str | None = None
    agent: str | None = None
    conversation_id: str | None = None
    case_id: str | None = None
    turn: int | None = None
    run_no: int | None = None
    scored_at: str | None = None

    @property
    def failure_issues(self) -> tuple[Issue, ...]:
        return tuple(i for i in self.issues if i.severity is not Severity.INFO)
