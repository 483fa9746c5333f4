"""Normalize one span of any convention into :class:`SpanFacts`.

Detection is per span and per field: every convention's keys are read, and for each field the first
source that captured it wins, in the priority of ``otel-agent-spans.md`` §7 (OTel GenAI, then
OpenInference, then OpenLLMetry, then framework-specific keys). That priority is data: the rows and
rules of :mod:`monitor.trajectory.keytable`, compiled once into one reader per fact, which the
functions here call. One span may carry several conventions at once (OpenInference on ADK's own
spans, OpenLLMetry writing both ``traceloop.*`` and ``gen_ai.*``); ``conventions`` records which
were seen.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from monitor.trajectory.keytable import (
    CONVENTION_KEY_PREFIXES,
    CONVENTION_KEYS,
    CONVENTION_SCOPES,
    FLATTENED_PREFIXES,
    GENERIC_RULES,
    KNOWN_RULES,
    RESULT_UNWRAPPERS,
    ROLE_DEFAULT,
    TOOL_KIND_DEFAULT,
    Convention,
    Fact,
    Role,
    SpanView,
    adk_capture_off,
    as_text,
    fact_classifier,
    fact_reader,
    unwrap_text_blocks,
)
from monitor.trajectory.messages import (
    ELIDED,
    decode_arguments,
    decode_result,
    loads,
    messages_text,
    normalize_role,
    parse_message,
    parse_messages,
)
from monitor.trajectory.model import (
    ABSENT,
    Captured,
    Message,
    Messages,
    Part,
    TextPart,
    ToolCallPart,
    ToolDef,
    ToolError,
    ToolResultPart,
    Usage,
)
from monitor.trajectory.semconv import (
    Events,
    GenAI,
    ModelCallIdentity,
    OpenAIAgents,
    PydanticAI,
    Strands,
)
from monitor.trajectory.spans import STATUS_ERROR, SpanEvent, SpanRecord

__all__ = [
    "GENERIC",
    "Role",
    "SpanFacts",
    "detect_role",
    "handoff_tool_name",
    "model_response_id",
    "normalize",
    "normalize_agent_content",
    "unwrap_text_blocks",
]


@dataclass(slots=True)
class SpanFacts:
    """What one span says about the run, independent of its convention."""

    span: SpanRecord
    role: Role
    conventions: set[str] = field(default_factory=set)
    agent_name: str | None = None
    conversation_id: str | None = None
    # tool spans
    tool_name: str | None = None
    call_id: str | None = None
    args: Captured = ABSENT
    result: Captured = ABSENT
    error: ToolError | None = None
    tool_kind: str = "function"
    agent_name_weak: bool = False  # taken from a span name only (e.g. OpenInference's root AGENT span)
    # model and agent spans
    model: str | None = None
    provider: str | None = None
    usage: Usage = field(default_factory=Usage)
    input_messages: Messages | None = None
    output_messages: Messages | None = None
    tools_offered: tuple[ToolDef, ...] | None = None
    final_text: str | None = None

    @property
    def span_id(self) -> str:
        return self.span.span_id

    @property
    def output_tool_calls(self) -> tuple[ToolCallPart, ...]:
        if not self.output_messages:
            return ()
        return tuple(p for m in self.output_messages if m.role == "assistant" for p in m.tool_calls)

    @property
    def output_text(self) -> str | None:
        return messages_text(self.output_messages, "assistant")


# --------------------------------------------------------------------------- the table, compiled once
# Each reader below is one fact's rows (rules) of the key table: ``_TOOL_NAME(view)`` reads them in
# the table's priority order.

_ROLE: Final = fact_classifier(Fact.ROLE, ROLE_DEFAULT, KNOWN_RULES)
_GENERIC_ROLE: Final = fact_classifier(Fact.ROLE, ROLE_DEFAULT, GENERIC_RULES)
_TOOL_FAILED: Final = fact_classifier(Fact.TOOL_FAILED, False)
_TOOL_SUCCEEDED: Final = fact_classifier(Fact.TOOL_SUCCEEDED, False)
_TOOL_KIND: Final = fact_classifier(Fact.TOOL_KIND, TOOL_KIND_DEFAULT)
_HANDOFF_TARGET: Final = fact_reader(Fact.HANDOFF_TARGET)
_TOOL_NAME: Final = fact_reader(Fact.TOOL_NAME)
_CALL_ID: Final = fact_reader(Fact.CALL_ID)
_ARGUMENTS: Final = fact_reader(Fact.ARGUMENTS)
_RESULT: Final = fact_reader(Fact.RESULT)
_INPUT_MESSAGES: Final = fact_reader(Fact.INPUT_MESSAGES)
_OUTPUT_MESSAGES: Final = fact_reader(Fact.OUTPUT_MESSAGES)
_TOOLS_OFFERED: Final = fact_reader(Fact.TOOLS_OFFERED)
_MODEL: Final = fact_reader(Fact.MODEL)
_PROVIDER: Final = fact_reader(Fact.PROVIDER)
_INPUT_TOKENS: Final = fact_reader(Fact.INPUT_TOKENS)
_OUTPUT_TOKENS: Final = fact_reader(Fact.OUTPUT_TOKENS)
_CACHE_READ_TOKENS: Final = fact_reader(Fact.CACHE_READ_TOKENS)
_CACHE_CREATION_TOKENS: Final = fact_reader(Fact.CACHE_CREATION_TOKENS)
_AGENT_INPUT: Final = fact_reader(Fact.AGENT_INPUT)
_FINAL_TEXT: Final = fact_reader(Fact.FINAL_TEXT)
_AGENT_INPUT_TOKENS: Final = fact_reader(Fact.AGENT_INPUT_TOKENS)
_AGENT_OUTPUT_TOKENS: Final = fact_reader(Fact.AGENT_OUTPUT_TOKENS)
_AGENT_NAME: Final = fact_reader(Fact.AGENT_NAME)
_SPAN_AGENT_NAME: Final = fact_reader(Fact.SPAN_AGENT_NAME)
_CONVERSATION_ID: Final = fact_reader(Fact.CONVERSATION_ID)
_UNSET: Final = object()
GENERIC: Final = Convention.GENERIC.value
"""The ``conventions`` label of a span read from generic evidence only."""


# --------------------------------------------------------------------------- role detection


def detect_role(span: SpanRecord) -> Role:
    """The span's role: the first of the ``role`` rules of the key table that holds."""
    role: Role = _ROLE(span)
    return role


def _conventions(a: Mapping[str, Any], span: SpanRecord) -> set[str]:
    """The conventions whose keys (``CONVENTION_KEY_PREFIXES``, ``CONVENTION_KEYS``) or instrumentation scope
    (``CONVENTION_SCOPES``) the span shows."""
    seen: set[str] = set()
    cache = _KEY_CONVENTION
    for key in a:
        convention = cache.get(key, _UNSET)
        if convention is _UNSET:
            convention = _key_convention(key)
        if convention is not None:
            seen.add(convention)  # type: ignore[arg-type]
    if span.scope_name.startswith(_SCOPE_PREFIXES):
        seen.add(next(c.value for prefix, c in CONVENTION_SCOPES if span.scope_name.startswith(prefix)))
    return seen


_CONVENTION_PREFIXES: Final = tuple(prefix for prefix, _ in CONVENTION_KEY_PREFIXES)
_SCOPE_PREFIXES: Final = tuple(prefix for prefix, _ in CONVENTION_SCOPES)
_KEY_CONVENTION: dict[str, str | None] = {}
"""Attribute key → the convention it shows (None: none): keys repeat from span to span, so each is looked up once.
Bounded: emptied past :data:`_KEY_CONVENTION_MAX` keys (indexed keys such as ``llm.input_messages.17.…`` vary)."""
_KEY_CONVENTION_MAX: Final = 65_536


def _key_convention(key: str) -> str | None:
    if key.startswith(_CONVENTION_PREFIXES):
        convention: str | None = next(c.value for prefix, c in CONVENTION_KEY_PREFIXES if key.startswith(prefix))
    else:
        known = CONVENTION_KEYS.get(key)
        convention = known.value if known is not None else None
    if len(_KEY_CONVENTION) >= _KEY_CONVENTION_MAX:
        _KEY_CONVENTION.clear()
    _KEY_CONVENTION[key] = convention
    return convention


# --------------------------------------------------------------------------- content from events


def _event_attr(ev: SpanEvent, key: str) -> Any:
    if key in ev.attributes:
        return ev.attributes[key]
    if isinstance(ev.body, Mapping):
        return ev.body.get(key)
    return None


def _event_message(ev: SpanEvent) -> Message | None:
    """An OTel ≤ 1.36 message event (span event or joined log record) as a Message."""
    role = Events.ROLE_OF.get(ev.name, "assistant")
    if ev.body is not None:
        body = loads(ev.body)
        if ev.name == Events.TOOL_MESSAGE and isinstance(body, Mapping) and "role" not in body:
            return Message("tool", (ToolResultPart(as_text(body.get("id")), decode_result(body.get("content"))),))
        msg = parse_message(body, role)
        if msg is not None:
            return Message(normalize_role(ev.attributes.get("role") or msg.role, role), msg.parts)
    content = _event_attr(ev, "content")
    if content == ELIDED:
        return None
    if content is None and ev.name == Events.CHOICE:
        content = _event_attr(ev, "message")
    if content is None and not ev.attributes.get("tool_calls"):
        return None
    decoded = loads(content)
    parts: list[Part] = []
    if isinstance(decoded, list):
        msg = parse_message({"role": role, "content": decoded}, role)
        parts.extend(msg.parts if msg else ())
    elif isinstance(decoded, str) and decoded:
        parts.append(TextPart(decoded))
    elif isinstance(decoded, Mapping):
        msg = parse_message(decoded, role)
        parts.extend(msg.parts if msg else ())
    tool_calls = loads(ev.attributes.get("tool_calls"))
    if tool_calls:
        msg = parse_message({"role": "assistant", "tool_calls": tool_calls}, "assistant")
        parts.extend(msg.parts if msg else ())
    return Message(normalize_role(ev.attributes.get("role"), role), tuple(parts))


def _events_io(events: Iterable[SpanEvent]) -> tuple[Messages | None, Messages | None, Mapping[str, Any]]:
    """Input / output messages carried by events, plus the operation-details attributes if any."""
    inputs: list[Message] = []
    outputs: list[Message] = []
    details: dict[str, Any] = {}
    for ev in events:
        if ev.name in Events.INPUT_EVENTS:
            msg = _event_message(ev)
            if msg is not None:
                inputs.append(msg)
        elif ev.name == Events.CHOICE:
            msg = _event_message(ev)
            if msg is not None:
                outputs.append(msg)
        elif ev.name == Events.OPERATION_DETAILS:
            details.update(ev.attributes)
            if isinstance(ev.body, Mapping):
                details.update(ev.body)
        elif ev.name == Events.CONTENT_PROMPT:
            parsed = parse_messages(ev.attributes.get(GenAI.PROMPT))
            inputs.extend(parsed or ())
        elif ev.name == Events.CONTENT_COMPLETION:
            parsed = parse_messages(ev.attributes.get(GenAI.COMPLETION), "assistant")
            outputs.extend(parsed or ())
    return (tuple(inputs) or None, tuple(outputs) or None, details)


# --------------------------------------------------------------------------- per-role extraction


def _error(span: SpanRecord) -> ToolError | None:
    a = span.attributes
    exc = next((ev for ev in span.events if ev.name == Events.EXCEPTION), None)
    exc_type = as_text(exc.attributes.get(Events.EXCEPTION_TYPE)) if exc else None
    exc_msg = as_text(exc.attributes.get(Events.EXCEPTION_MESSAGE)) if exc else None
    error_type = as_text(a.get(GenAI.ERROR_TYPE))
    status_failed = span.status_code == STATUS_ERROR and (exc is not None or not _TOOL_SUCCEEDED(span))
    failed = status_failed or error_type is not None or exc is not None or _TOOL_FAILED(span)
    if not failed:
        return None
    kind = error_type or exc_type or as_text(a.get(PydanticAI.TOOL_FAILURE_STAGE)) or "error"
    message = exc_msg or span.status_message or ""
    return ToolError(kind, message[:500])


def handoff_tool_name(agent: str) -> str:
    """The openai-agents SDK's default handoff tool name (``Handoff.default_tool_name``)."""
    return re.sub(r"[^a-z0-9_]", "_", (OpenAIAgents.HANDOFF_TOOL_PREFIX + agent).replace(" ", "_").lower())


def _handoff_facts(f: SpanFacts, v: SpanView) -> bool:
    """A handoff span is the execution of the model's ``transfer_to_<agent>`` call."""
    target = _HANDOFF_TARGET(v)
    if target is None:
        return False
    f.tool_name = handoff_tool_name(target)
    f.tool_kind = "agent"
    f.result = target
    f.error = _error(f.span)
    return True


def _tool_facts(f: SpanFacts, v: SpanView) -> None:
    if _handoff_facts(f, v):
        return
    f.tool_name = _TOOL_NAME(v)
    f.call_id = _CALL_ID(v)
    args = _ARGUMENTS(v, ABSENT)
    result = _RESULT(v, ABSENT)
    if args is ABSENT or result is ABSENT:
        args, result = _strands_tool_events(f, args, result)
    for unwrap in RESULT_UNWRAPPERS:
        result = unwrap(result)
    if adk_capture_off(v.attrs):
        args = result = ABSENT
    f.args = args
    f.result = result
    f.error = _error(f.span)
    f.tool_kind = _TOOL_KIND(f.span)


def _strands_tool_events(f: SpanFacts, args: Captured, result: Captured) -> tuple[Captured, Captured]:
    """The ``EVENTS`` rows of the tool facts (strands, §4.3), in one pass over the span events in
    their order: arguments and result where the attributes gave none, and the call id of the legacy
    ``gen_ai.tool.message`` event read while the arguments were still missing."""
    for ev in f.span.events:
        if ev.name == Events.TOOL_MESSAGE and args is ABSENT:  # strands legacy
            content = _event_attr(ev, Strands.EVENT_CONTENT)
            if content is not None:
                args = decode_arguments(content)
            if f.call_id is None:
                f.call_id = as_text(_event_attr(ev, Strands.EVENT_ID))
        elif ev.name == Events.CHOICE and result is ABSENT:
            message = _event_attr(ev, Strands.EVENT_MESSAGE)
            if message is not None:
                result = decode_result(message)
        elif ev.name == Events.OPERATION_DETAILS:  # strands latest: args in input messages
            inputs = parse_messages(_event_attr(ev, GenAI.INPUT_MESSAGES))
            outputs = parse_messages(_event_attr(ev, GenAI.OUTPUT_MESSAGES), "tool")
            for msg in inputs or ():
                for p in msg.parts:
                    if isinstance(p, ToolCallPart) and args is ABSENT:
                        args = p.arguments
            for msg in outputs or ():
                for p in msg.parts:
                    if isinstance(p, ToolResultPart) and result is ABSENT:
                        result = p.response
    return args, result


def _model_io(f: SpanFacts, v: SpanView) -> None:
    """Input/output messages, tool definitions, model, provider and usage of a model or agent span."""
    a = v.attrs
    ev_in, ev_out, details = _events_io(f.span.events)
    v.merged = {**details, **a} if details else a
    v.events_in = ev_in
    v.events_out = ev_out
    # flattened (indexed-key) conventions: one cheap pass decides whether any is present at all
    v.flattened = any(k.startswith(FLATTENED_PREFIXES) for k in a)
    f.input_messages = _INPUT_MESSAGES(v)
    f.output_messages = _OUTPUT_MESSAGES(v)
    f.tools_offered = _TOOLS_OFFERED(v)
    f.model = _MODEL(v)
    f.provider = _PROVIDER(v)
    f.usage = Usage(
        _INPUT_TOKENS(v),
        _OUTPUT_TOKENS(v),
        _CACHE_READ_TOKENS(v),
        _CACHE_CREATION_TOKENS(v),
    )


def model_response_id(span: SpanRecord) -> str | None:
    """The provider's id of the response a model span recorded, if the span carries it (see
    :class:`~monitor.trajectory.semconv.ModelCallIdentity`): a response-id attribute, else the ``id``
    of a provider response body held as JSON. Parses that body, so callers ask only when they need it
    (to tell a model call recorded twice from two calls)."""
    a = span.attributes
    for key in ModelCallIdentity.RESPONSE_ID_KEYS:
        found = as_text(a.get(key))
        if found is not None:
            return found
    for key in ModelCallIdentity.RESPONSE_BODY_KEYS:
        raw = a.get(key)
        if not (isinstance(raw, str) and raw.lstrip().startswith("{")):
            continue
        body = loads(raw)
        if isinstance(body, Mapping) and any(body.get(k) == v for k, v in ModelCallIdentity.RESPONSE_BODY_MARKERS):
            found = as_text(body.get("id"))
            if found is not None:
                return found
    return None


def normalize_agent_content(f: SpanFacts) -> None:
    """Read a span as an agent span (input, answer, tools, usage) after its role was decided from context.

    Keeps an agent name already set."""
    name = f.agent_name
    _agent_facts(f, SpanView(f.span, f.role))
    f.agent_name = name or f.agent_name


def _agent_facts(f: SpanFacts, v: SpanView) -> None:
    _model_io(f, v)
    # agent-level input / output in the conventions that put them on the agent span
    if f.input_messages is None:
        f.input_messages = _AGENT_INPUT(v)
    v.output_messages = f.output_messages
    final = _FINAL_TEXT(v, _UNSET)
    if final is not _UNSET:
        f.final_text = final
    if f.usage == Usage():
        f.usage = Usage(_AGENT_INPUT_TOKENS(v), _AGENT_OUTPUT_TOKENS(v))
    f.agent_name = _AGENT_NAME(v)
    if v.weak_name:
        f.agent_name_weak = True


def _common(f: SpanFacts, v: SpanView) -> None:
    f.conversation_id = _CONVERSATION_ID(v)
    if f.agent_name is None:
        f.agent_name = _SPAN_AGENT_NAME(v)


def normalize(span: SpanRecord) -> SpanFacts:
    """All a span says about the run, whatever convention(s) it speaks. Never raises on content.

    A span in which no known convention is seen, and that no known rule gives a role, is read from
    generic evidence (the ``generic`` rules and rows of the key table): then ``conventions`` is
    ``{"generic"}``."""
    role = detect_role(span)
    conventions = _conventions(span.attributes, span)
    generic = False
    if role is Role.OTHER and not conventions:
        role = _GENERIC_ROLE(span)
        if role is not Role.OTHER:
            generic = True
            conventions.add(GENERIC)
    f = SpanFacts(span=span, role=role, conventions=conventions)
    v = SpanView(span, role)
    v.generic = generic
    if role is Role.TOOL:
        _tool_facts(f, v)
    elif role in (Role.AGENT, Role.WORKFLOW):
        _agent_facts(f, v)
    elif role is Role.LLM:
        _model_io(f, v)
    _common(f, v)
    return f
