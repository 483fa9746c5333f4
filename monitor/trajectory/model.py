"""The trajectory model: what every scorer sees (SCORING.md §1).

Everything here is frozen and pure: no I/O, no clock. Field names are the one vocabulary for runs
everywhere (``monitor inspect --format json``, datasets, the results store).

Argument values have three states, kept apart on purpose:

* ``ABSENT``    content was not captured (most instrumentations make content opt-in);
* ``Malformed`` captured text that is not JSON (the raw text is kept);
* any JSON value (normally a dict) decoded from a JSON string or a structured OTLP AnyValue.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias


class _Absent(enum.Enum):
    """Singleton marker: the value was not captured."""

    ABSENT = "ABSENT"

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Final = _Absent.ABSENT
"""Content not captured by the instrumentation (never an error)."""


@dataclass(frozen=True, slots=True)
class Malformed:
    """Captured text that does not parse as JSON; ``raw`` keeps it verbatim."""

    raw: str


JSONValue: TypeAlias = Any
"""A decoded JSON value (dict, list, str, int, float, bool or None)."""

Captured: TypeAlias = "_Absent | Malformed | JSONValue"
"""A content field: ``ABSENT``, ``Malformed`` or a decoded JSON value."""


# --------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class TextPart:
    content: str
    type: Literal["text"] = "text"


@dataclass(frozen=True, slots=True)
class ToolCallPart:
    """A tool call the model requested (selected), executed or not."""

    name: str
    id: str | None = None
    arguments: Captured = ABSENT
    type: Literal["tool_call"] = "tool_call"


@dataclass(frozen=True, slots=True)
class ToolResultPart:
    """A tool result handed back to the model."""

    id: str | None = None
    response: Captured = ABSENT
    name: str | None = None
    type: Literal["tool_call_response"] = "tool_call_response"


@dataclass(frozen=True, slots=True)
class OtherPart:
    """Any other part (reasoning, blob, file, …): kept by type only."""

    type: str
    content: str | None = None


Part: TypeAlias = TextPart | ToolCallPart | ToolResultPart | OtherPart


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message in the OTel GenAI shape (role + ordered parts)."""

    role: str
    parts: tuple[Part, ...] = ()

    @property
    def text(self) -> str:
        """Text parts joined with a newline, empty parts skipped."""
        return "\n".join(p.content for p in self.parts if isinstance(p, TextPart) and p.content)

    @property
    def tool_calls(self) -> tuple[ToolCallPart, ...]:
        return tuple(p for p in self.parts if isinstance(p, ToolCallPart))


Messages: TypeAlias = tuple[Message, ...]


# --------------------------------------------------------------------------- tools


@dataclass(frozen=True, slots=True)
class ToolDef:
    """A tool offered to the model."""

    name: str
    description: str | None = None
    input_schema: JSONValue | None = None
    source: str = ""


@dataclass(frozen=True, slots=True)
class ToolError:
    type: str
    message: str = ""


@dataclass(frozen=True, slots=True)
class Usage:
    """Token usage of one model call or a whole run (``None`` = not reported)."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cache_read_input_tokens: int | None = None
    cache_creation_input_tokens: int | None = None

    def __add__(self, other: Usage) -> Usage:
        def add(a: int | None, b: int | None) -> int | None:
            if a is None:
                return b
            if b is None:
                return a
            return a + b

        return Usage(
            add(self.input_tokens, other.input_tokens),
            add(self.output_tokens, other.output_tokens),
            add(self.cache_read_input_tokens, other.cache_read_input_tokens),
            add(self.cache_creation_input_tokens, other.cache_creation_input_tokens),
        )


CallKind: TypeAlias = Literal["function", "mcp", "agent", "framework"]
"""``framework``: a tool the framework offers the model for its own control flow (smolagents ``final_answer``,
DSPy ``finish``), not the user's work: :func:`~monitor.trajectory.view.view` leaves it out unless asked."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of a run (SCORING.md §1.2).

    A call is the merge of a model's ``tool_call`` part (``step``/``part`` set) and the tool span
    that executed it (``executed``, times set). ``args`` comes from the span when captured there,
    else from the part; ``requested_args`` is what the model emitted (``ABSENT`` when no part).
    """

    index: int
    name: str
    call_id: str | None = None
    args: Captured = ABSENT
    result: Captured = ABSENT
    error: ToolError | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    executed: bool = False
    step: int | None = None
    part: int | None = None
    agent: str | None = None
    depth: int = 0
    kind: CallKind = "function"
    span_id: str | None = None
    requested_args: Captured = ABSENT
    step_end_ns: int | None = None

    @property
    def duration_ms(self) -> float | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def args_raw(self) -> str | None:
        return self.args.raw if isinstance(self.args, Malformed) else None

    @property
    def args_captured(self) -> bool:
        return self.args is not ABSENT


@dataclass(frozen=True, slots=True)
class LlmStep:
    """One model call of a run, in order."""

    index: int
    model: str | None = None
    provider: str | None = None
    usage: Usage = field(default_factory=Usage)
    tools_offered: tuple[ToolDef, ...] | None = None
    tool_calls: tuple[ToolCallPart, ...] = ()
    text: str | None = None
    input_messages: Messages | None = None
    start_ns: int | None = None
    end_ns: int | None = None
    span_id: str | None = None


RunStatus: TypeAlias = Literal["ok", "error"]


@dataclass(frozen=True, slots=True)
class Run:
    """One agent invocation (one user turn), SCORING.md §1.1.

    ``calls`` holds this run's own calls (``depth == 0``) ordered as §1.3; nested agent runs are in
    ``children`` and contribute to the ``flatten`` view (see :func:`monitor.trajectory.view.view`).
    ``content_captured`` is false when neither arguments nor messages were captured anywhere: such
    a run is still a run, scorers that need content return ``not_applicable``.
    ``forced`` names why the assembler closed the trace early (``max_age``/``max_spans``), if it did.
    """

    trace_id: str
    run_id: str
    agent: str | None = None
    conversation_id: str | None = None
    parent_run_id: str | None = None
    user_input: Messages | None = None
    final_response: str | None = None
    tools_offered: tuple[ToolDef, ...] | None = None
    steps: tuple[LlmStep, ...] = ()
    calls: tuple[ToolCall, ...] = ()
    children: tuple[Run, ...] = ()
    start_ns: int | None = None
    end_ns: int | None = None
    status: RunStatus = "ok"
    model: str | None = None
    usage: Usage = field(default_factory=Usage)
    content_captured: bool = True
    forced: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    conventions: tuple[str, ...] = ()

    @property
    def user_text(self) -> str | None:
        """Text of the last ``user`` message of the input (the current request)."""
        if not self.user_input:
            return None
        for message in reversed(self.user_input):
            if message.role == "user":
                text = message.text
                if text:
                    return text
        return None

    @property
    def duration_ms(self) -> float | None:
        if self.start_ns is None or self.end_ns is None:
            return None
        return (self.end_ns - self.start_ns) / 1e6

    @property
    def selected_calls(self) -> tuple[ToolCallPart, ...]:
        """Every tool_call part the model emitted in this run, in step order."""
        return tuple(part for step in self.steps for part in step.tool_calls)

    def walk(self) -> Iterator[Run]:
        """This run, then every nested run, depth first (pre-order, children in order). Iterative, so
        any nesting depth walks in linear time without recursion."""
        stack: list[Run] = [self]
        while stack:
            run = stack.pop()
            yield run
            stack.extend(reversed(run.children))

    def attribute(self, key: str) -> str | None:
        """A root-span or resource attribute kept for matching (e.g. ``monitor.eval.case_id``)."""
        for k, v in self.attributes:
            if k == key:
                return v
        return None
