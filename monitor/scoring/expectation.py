"""What a run is expected to do (SCORING.md §2.0): built by dataset loaders or production rules."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from monitor.trajectory.model import ABSENT, Captured, ToolDef

Category: TypeAlias = Literal["golden", "secondary", "negative"]


@dataclass(frozen=True, slots=True)
class ExpectedCall:
    """One expected tool call.

    ``args`` ABSENT means unspecified (peers receive ``{}``, ADK ``None``). ``required_params``,
    ``forbidden_params`` and ``param_validators`` (JSON Schema fragments) are seed-000's
    ToolCallExpectation fields, used by ``tool_eval``; when ``required_params`` is None,
    ``tool_eval`` uses ``args``.
    """

    name: str
    args: Captured = ABSENT
    type: str | None = None
    output: Captured = ABSENT
    required_params: Mapping[str, Any] | None = None
    forbidden_params: tuple[str, ...] = ()
    param_validators: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ExpectedMessage:
    """One message of a reference trajectory in message form (agentevals / OpenAI / LangChain).

    ``role`` is ``user`` | ``assistant`` | ``tool`` | ``system`` (``human``/``ai`` are read as
    ``user``/``assistant``); ``tool_calls`` None or empty = a message without tool calls. Text is
    never compared (SCORING.md §2.3 ``strict``).
    """

    role: str
    tool_calls: tuple[ExpectedCall, ...] | None = None


@dataclass(frozen=True, slots=True)
class Budgets:
    max_tool_calls: int | None = None
    max_calls_per_tool: Mapping[str, int] = field(default_factory=dict)
    tool_latency_budget_ms: Mapping[str, float] = field(default_factory=dict)
    run_latency_budget_ms: float | None = None
    max_identical_calls: int | None = None
    max_identical_calls_per_tool: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicLabel:
    topic: str
    answered: bool
    on_topic: bool


@dataclass(frozen=True, slots=True)
class Expectation:
    """Everything a reference-based scorer or a rule-driven check may need; all fields optional.

    ``expected_calls`` None = no reference calls given (scorers needing them return
    ``not_applicable/no_reference``); an empty tuple = "no calls expected".

    ``catalogue`` is the configured tool catalogue (SCORING.md §3.9) for the run's agent and its
    nested agents, used by the definition lookups of §3.1 / §3.2 when spans carry no
    definitions; None = no catalogue configured.
    """

    expected_calls: tuple[ExpectedCall, ...] | None = None
    expected_tools: tuple[str, ...] | None = None
    forbidden_tools: tuple[str, ...] | None = None
    no_tools: bool = False
    expected_response: str | None = None
    expected_keywords: tuple[str, ...] | None = None
    category: Category | None = None
    reference_topics: tuple[str, ...] | None = None
    topic_labels: tuple[TopicLabel, ...] | None = None
    reference_outcome: str | None = None
    budgets: Budgets = field(default_factory=Budgets)
    allowed_tools: tuple[str, ...] = ()
    rubrics: tuple[tuple[str, str], ...] = ()
    expected_messages: tuple[ExpectedMessage, ...] | None = None
    """Reference trajectory in message form (§2.3 ``strict``); None = use ``expected_calls``."""
    catalogue: tuple[ToolDef, ...] | None = None
