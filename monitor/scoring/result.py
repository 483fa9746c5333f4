"""The result record every scorer returns, and the closed failure taxonomy (SCORING.md §5).

:class:`ScoreResult` and :class:`Issue` are frozen, slotted dataclasses built on every scored run
(the daemon builds one result per scorer per run, and a failing result several issues), so their
``__init__`` is :func:`frozen_init`'s: the same signature, defaults and immutability as the one
``dataclasses`` generates, at less than half the cost.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias, TypeVar

from monitor.trajectory.model import ToolCall

_T = TypeVar("_T")


class _Factory(enum.Enum):
    FACTORY = "default factory"


def frozen_init(cls: type[_T]) -> type[_T]:
    """Replace the ``__init__`` of a frozen, slotted dataclass by one that sets each slot through its
    descriptor.

    The generated ``__init__`` of a frozen dataclass goes through ``object.__setattr__(self, name,
    value)`` per field (a name lookup on the type each time); this one calls each slot's own
    ``__set__``. Contract kept: the same parameters in the same order with the same defaults
    (``default_factory`` called per instance when the argument is omitted), ``__post_init__`` called
    when the class defines one, and instances stay frozen (``__setattr__`` still raises
    ``FrozenInstanceError``). ``dataclasses.replace`` goes through it too. Raises ``TypeError`` for a
    class that is not a slotted dataclass, or one with ``init=False`` or keyword-only fields.
    """
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"frozen_init needs a slotted dataclass, not {cls!r}")
    namespace: dict[str, Any] = {"_FACTORY": _Factory.FACTORY}
    params: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):
        if not f.init or f.kw_only:
            raise TypeError(f"frozen_init: field {f.name!r} of {cls.__name__} is init=False or keyword-only")
        namespace[f"_set_{f.name}"] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            params.append(f"{f.name}=_default_{f.name}")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            params.append(f"{f.name}=_FACTORY")
            body.append(f"    if {f.name} is _FACTORY:\n        {f.name} = _factory_{f.name}()")
        else:
            params.append(f.name)
        body.append(f"    _set_{f.name}(self, {f.name})")
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    source = f"def __init__(self, {', '.join(params)}) -> None:\n" + "\n".join(body or ["    pass"]) + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = getattr(cls.__init__, "__doc__", None)
    type.__setattr__(cls, "__init__", init)
    return cls


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


@frozen_init
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


@frozen_init
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
