"""Normalize one span of any convention into :class:`SpanFacts`.

Detection is per span and per field: every convention's keys are read, and for each field the first
source that captured it wins, in the priority of ``otel-agent-spans.md`` §7 (OTel GenAI, then
OpenInference, then OpenLLMetry, then framework-specific keys). One span may carry several
conventions at once (OpenInference on ADK's own spans, OpenLLMetry writing both ``traceloop.*`` and
``gen_ai.*``); ``conventions`` records which were seen.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from monitor.trajectory.messages import (
    ELIDED,
    decode_arguments,
    decode_result,
    langchain_tool_result,
    loads,
    messages_text,
    normalize_role,
    parse_message,
    parse_messages,
    parse_tool_definitions,
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
    ADK,
    EXECUTE_TOOL_SPAN_PREFIX,
    INVOKE_AGENT_SPAN_PREFIX,
    MCP,
    AgentToolTypes,
    Events,
    GenAI,
    ModelCallIdentity,
    Op,
    OpenAIAgents,
    OpenInference,
    PydanticAI,
    Strands,
    Traceloop,
)
from monitor.trajectory.spans import STATUS_ERROR, SpanEvent, SpanRecord


class Role(enum.Enum):
    WORKFLOW = "workflow"
    AGENT = "agent"
    LLM = "llm"
    TOOL = "tool"
    SYNTHETIC = "synthetic"  # ADK's merged parallel-tools span: not a call of its own
    OTHER = "other"


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


# --------------------------------------------------------------------------- helpers


def _str(value: Any) -> str | None:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return None


_INT64_MAX: Final = 2**63 - 1


def _int(value: Any) -> int | None:
    """A count (token usage) from an attribute: an int, an integral float or a string of ASCII digits,
    within int64 (what every store's integer column holds); anything else is not reported (None)."""
    if isinstance(value, bool):
        return None
    integral_float = isinstance(value, float) and value.is_integer()
    # isdigit() alone also accepts "²", which int() refuses
    digits = isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19
    if integral_float or digits:
        value = int(value)
    if isinstance(value, int) and -_INT64_MAX - 1 <= value <= _INT64_MAX:
        return value
    return None


def _first(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


_INDEXED = re.compile(r"(\d+)\.(.+)")


def _indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Group flattened ``<prefix><i>.<rest>`` keys by index ``i``."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        m = _INDEXED.match(key, len(prefix))
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return out


def _sub_indexed(flat: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    return _indexed(flat, prefix)


# --------------------------------------------------------------------------- role detection


def detect_role(span: SpanRecord) -> Role:
    a = span.attributes
    op = _str(a.get(GenAI.OPERATION))
    name = span.name
    tool_name = a.get(GenAI.TOOL_NAME)
    if not isinstance(tool_name, str | None):
        tool_name = None
    if name.startswith(ADK.MERGED_SPAN_PREFIX) or tool_name in ADK.MERGED_TOOL_NAMES:
        return Role.SYNTHETIC
    if op == Op.EXECUTE_TOOL or op == OpenAIAgents.HANDOFF_OP:
        return Role.TOOL
    if op == Op.INVOKE_AGENT:
        return Role.AGENT
    if op == Op.INVOKE_WORKFLOW:
        return Role.WORKFLOW
    if op in Op.INFERENCE:
        return Role.LLM
    oi = _str(a.get(OpenInference.SPAN_KIND))
    if oi == OpenInference.KIND_TOOL:
        return Role.TOOL
    if oi == OpenInference.KIND_AGENT:
        return Role.AGENT
    if oi == OpenInference.KIND_LLM:
        return Role.LLM
    if oi == OpenInference.KIND_CHAIN and span.parent_span_id is None:
        return Role.WORKFLOW  # the root chain of a LangChain / LangGraph trace holds the whole run
    tl = a.get(Traceloop.SPAN_KIND)
    if tl == Traceloop.KIND_TOOL:
        return Role.TOOL
    if tl == Traceloop.KIND_AGENT:
        return Role.AGENT
    if tl == Traceloop.KIND_WORKFLOW:
        return Role.WORKFLOW
    if name.startswith(EXECUTE_TOOL_SPAN_PREFIX) or name == PydanticAI.RUNNING_TOOL_SPAN:
        return Role.TOOL
    if tool_name is not None and op is None:  # pydantic-ai ≤ 1.x `running tool`
        return Role.TOOL
    if name == PydanticAI.AGENT_RUN_SPAN or name.startswith(INVOKE_AGENT_SPAN_PREFIX):
        return Role.AGENT
    if name == ADK.INVOCATION_SPAN and span.scope_name == ADK.SCOPE:
        return Role.WORKFLOW
    if (
        name == ADK.CALL_LLM_SPAN
        or ADK.LLM_REQUEST in a
        or Traceloop.REQUEST_TYPE in a
        or any(k.startswith(Traceloop.PROMPT_PREFIX) for k in a)
    ):
        return Role.LLM
    if op is not None and (GenAI.REQUEST_MODEL in a or GenAI.INPUT_MESSAGES in a):
        return Role.LLM
    return Role.OTHER


def _conventions(a: Mapping[str, Any], span: SpanRecord) -> set[str]:
    seen: set[str] = set()
    for key in a:
        if key.startswith("gen_ai."):
            seen.add("gen_ai")
        elif key.startswith(("openinference.", "llm.", "input.value", "output.value", "tool.")):
            seen.add("openinference")
        elif key.startswith("traceloop."):
            seen.add("openllmetry")
        elif key.startswith("gcp.vertex.agent."):
            seen.add("adk")
        elif key.startswith(("pydantic_ai.", "logfire.")) or key in (
            PydanticAI.TOOL_ARGUMENTS,
            PydanticAI.FINAL_RESULT,
        ):
            seen.add("pydantic_ai")
    if span.scope_name.startswith("strands"):
        seen.add("strands")
    elif span.scope_name == ADK.SCOPE:
        seen.add("adk")
    elif span.scope_name == "pydantic-ai":
        seen.add("pydantic_ai")
    return seen


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
            return Message("tool", (ToolResultPart(_str(body.get("id")), decode_result(body.get("content"))),))
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


# --------------------------------------------------------------------------- flattened messages


def _oi_messages(a: Mapping[str, Any], prefix: str, default_role: str) -> Messages | None:
    rows = _indexed(a, prefix)
    if not rows:
        return None
    out: list[Message] = []
    for _, flat in sorted(rows.items()):
        role = normalize_role(flat.get(OpenInference.MSG_ROLE), default_role)
        parts: list[Part] = []
        contents = _sub_indexed(flat, OpenInference.MSG_CONTENTS)
        tool_call_parts_from_contents = False
        for _, c in sorted(contents.items()):
            ctype = c.get("message_content.type")
            if ctype == "text" and isinstance(c.get("message_content.text"), str):
                parts.append(TextPart(c["message_content.text"]))
            elif ctype == "tool_use":
                name = _first(c, OpenInference.TC_NAME, "message_content." + OpenInference.TC_NAME)
                if name is None:
                    continue
                tool_call_parts_from_contents = True
                parts.append(
                    ToolCallPart(
                        str(name),
                        _str(_first(c, OpenInference.TC_ID, "message_content." + OpenInference.TC_ID)),
                        decode_arguments(_first(c, OpenInference.TC_ARGS, "message_content." + OpenInference.TC_ARGS)),
                    )
                )
        content = flat.get(OpenInference.MSG_CONTENT)
        if isinstance(content, str) and content and not contents:
            decoded = loads(content)
            if isinstance(decoded, list):
                msg = parse_message({"role": role, "content": decoded}, role)
                parts.extend(msg.parts if msg else ())
            else:
                parts.append(TextPart(content))
        if not tool_call_parts_from_contents:
            for _, tc in sorted(_sub_indexed(flat, OpenInference.MSG_TOOL_CALLS).items()):
                parts.append(
                    ToolCallPart(
                        str(tc.get(OpenInference.TC_NAME) or ""),
                        _str(tc.get(OpenInference.TC_ID)),
                        decode_arguments(tc.get(OpenInference.TC_ARGS)),
                    )
                )
        if role == "tool" and flat.get(OpenInference.MSG_TOOL_CALL_ID) is not None:
            parts = [ToolResultPart(_str(flat.get(OpenInference.MSG_TOOL_CALL_ID)), decode_result(content))]
        out.append(Message(role, tuple(parts)))
    return tuple(out)


def _legacy_traceloop_messages(a: Mapping[str, Any], prefix: str, default_role: str) -> Messages | None:
    rows = _indexed(a, prefix)
    if not rows:
        return None
    out: list[Message] = []
    for _, flat in sorted(rows.items()):
        role = normalize_role(flat.get("role"), default_role)
        parts: list[Part] = []
        content = flat.get("content")
        if content is not None:
            decoded = loads(content)
            if isinstance(decoded, list):
                msg = parse_message({"role": role, "content": decoded}, role)
                parts.extend(msg.parts if msg else ())
            elif isinstance(decoded, str) and decoded:
                parts.append(TextPart(decoded))
            elif isinstance(content, str) and content:
                parts.append(TextPart(content))
        for _, tc in sorted(_sub_indexed(flat, "tool_calls.").items()):
            parts.append(
                ToolCallPart(str(tc.get("name") or ""), _str(tc.get("id")), decode_arguments(tc.get("arguments")))
            )
        if role == "tool" and flat.get("tool_call_id") is not None:
            parts = [ToolResultPart(_str(flat.get("tool_call_id")), decode_result(content))]
        out.append(Message(role, tuple(parts)))
    return tuple(out)


_FLATTENED_PREFIXES: tuple[str, ...] = (
    OpenInference.INPUT_MESSAGES_PREFIX,
    OpenInference.OUTPUT_MESSAGES_PREFIX,
    OpenInference.TOOLS_PREFIX,
    Traceloop.PROMPT_PREFIX,
    Traceloop.COMPLETION_PREFIX,
    Traceloop.FUNCTIONS_PREFIX,
)


def _flattened_tools(a: Mapping[str, Any]) -> tuple[ToolDef, ...] | None:
    oi = _indexed(a, OpenInference.TOOLS_PREFIX)
    if oi:
        defs: list[ToolDef] = []
        for _, flat in sorted(oi.items()):
            parsed = parse_tool_definitions(flat.get(OpenInference.TOOL_JSON_SCHEMA), "llm.tools")
            defs.extend(parsed or ())
        return tuple(defs)
    fns = _indexed(a, Traceloop.FUNCTIONS_PREFIX)
    if fns:
        return tuple(
            ToolDef(
                str(f.get("name")),
                _str(f.get("description")),
                _schema(f.get("parameters", f.get("input_schema"))),
                "llm.request.functions",
            )
            for _, f in sorted(fns.items())
            if f.get("name")
        )
    return None


def _schema(value: Any) -> Any:
    decoded = loads(value)
    return decoded if isinstance(decoded, Mapping) else None


# --------------------------------------------------------------------------- per-role extraction


def _error(span: SpanRecord) -> ToolError | None:
    a = span.attributes
    exc = next((ev for ev in span.events if ev.name == Events.EXCEPTION), None)
    exc_type = _str(exc.attributes.get(Events.EXCEPTION_TYPE)) if exc else None
    exc_msg = _str(exc.attributes.get(Events.EXCEPTION_MESSAGE)) if exc else None
    error_type = _str(a.get(GenAI.ERROR_TYPE))
    failed = (
        span.status_code == STATUS_ERROR
        or error_type is not None
        or exc is not None
        or a.get(Strands.TOOL_STATUS) == "error"
        or a.get(PydanticAI.TOOL_FAILURE_STAGE) is not None
        or a.get(Traceloop.TASK_STATUS) == "failure"
    )
    if not failed:
        return None
    kind = error_type or exc_type or _str(a.get(PydanticAI.TOOL_FAILURE_STAGE)) or "error"
    message = exc_msg or span.status_message or ""
    return ToolError(kind, message[:500])


def _unwrap_traceloop_input(value: Any) -> Captured:
    decoded = decode_arguments(value)
    if isinstance(decoded, Mapping):
        if "inputs" in decoded and "input_str" in decoded:  # LangChain envelope
            inputs = decoded.get("inputs")
            if isinstance(inputs, Mapping):
                return dict(inputs)
            return decode_arguments(decoded.get("input_str"))
        if set(decoded) <= {"args", "kwargs"} and ("args" in decoded or "kwargs" in decoded):
            kwargs = decoded.get("kwargs") or {}
            args = decoded.get("args") or []
            if not args:
                return dict(kwargs) if isinstance(kwargs, Mapping) else kwargs
            if not kwargs and len(args) == 1 and isinstance(args[0], Mapping):
                return dict(args[0])
            return {"args": args, **(kwargs if isinstance(kwargs, Mapping) else {})}
    return decoded


def _unwrap_traceloop_output(value: Any) -> Captured:
    """OpenLLMetry's callback envelopes: ``{"output": …, "kwargs": …}`` (tools) and
    ``{"outputs": …, "kwargs": …}`` (chains and graphs)."""
    decoded = decode_result(value)
    if isinstance(decoded, Mapping):
        for key in ("output", "outputs"):
            if key in decoded and set(decoded) <= {key, "kwargs"}:
                inner = decoded[key]
                return decode_result(inner) if isinstance(inner, str) else inner
    return decoded


def _adk_function_response(result: Captured) -> Captured:
    """OpenInference on ADK writes the whole function response part, ``{"id", "name", "response"}``."""
    if isinstance(result, Mapping) and set(result) == {"id", "name", "response"}:
        return result["response"]
    return result


def unwrap_text_blocks(result: Captured) -> Captured:
    """A result made only of text content blocks (strands ``[{"text": …}]``, MCP
    ``[{"type": "text", "text": …}]``) becomes its text, decoded when it is JSON."""
    if (
        isinstance(result, list)
        and result
        and all(
            isinstance(b, Mapping) and isinstance(b.get("text"), str) and set(b) <= {"text", "type"} for b in result
        )
    ):
        return decode_result("\n".join(b["text"] for b in result))
    return result


def handoff_tool_name(agent: str) -> str:
    """The openai-agents SDK's default handoff tool name (``Handoff.default_tool_name``)."""
    return re.sub(r"[^a-z0-9_]", "_", (OpenAIAgents.HANDOFF_TOOL_PREFIX + agent).replace(" ", "_").lower())


def _handoff_facts(f: SpanFacts) -> bool:
    """A handoff span is the execution of the model's ``transfer_to_<agent>`` call."""
    span = f.span
    a = span.attributes
    target: Any = None
    if a.get(GenAI.OPERATION) == OpenAIAgents.HANDOFF_OP:
        target = a.get(OpenAIAgents.HANDOFF_TO)
    elif span.name.startswith(OpenAIAgents.OI_HANDOFF_SPAN_PREFIX) and a.get(GenAI.TOOL_NAME) is None:
        target = a.get(OpenInference.OUTPUT_VALUE) or span.name[len(OpenAIAgents.OI_HANDOFF_SPAN_PREFIX) :]
    target = _str(target)
    if target is None:
        return False
    f.tool_name = handoff_tool_name(target)
    f.tool_kind = "agent"
    f.result = target
    f.error = _error(span)
    return True


def _tool_facts(f: SpanFacts) -> None:
    span = f.span
    a = span.attributes
    if _handoff_facts(f):
        return
    name = _first(a, GenAI.TOOL_NAME, OpenInference.TOOL_NAME)
    if name is None and a.get(Traceloop.SPAN_KIND) == Traceloop.KIND_TOOL:
        name = a.get(Traceloop.ENTITY_NAME)
    if name is None and span.name.startswith(EXECUTE_TOOL_SPAN_PREFIX):
        name = span.name[len(EXECUTE_TOOL_SPAN_PREFIX) :]
    f.tool_name = str(name) if name is not None else span.name
    call_id = _str(_first(a, GenAI.TOOL_CALL_ID, OpenInference.TOOL_ID, OpenInference.TOOL_CALL_ID))
    f.call_id = None if call_id == ADK.NO_CALL_ID else call_id

    # arguments: GenAI > OpenInference > pydantic v2 > ADK 1.x > OpenLLMetry > strands events
    args: Captured = ABSENT
    is_traceloop_tool = a.get(Traceloop.SPAN_KIND) == Traceloop.KIND_TOOL
    raw = a.get(GenAI.TOOL_CALL_ARGUMENTS)
    if raw is not None:
        args = _unwrap_traceloop_input(raw) if is_traceloop_tool else decode_arguments(raw)
    elif a.get(OpenInference.INPUT_VALUE) is not None:
        args = decode_arguments(a.get(OpenInference.INPUT_VALUE))
    elif a.get(PydanticAI.TOOL_ARGUMENTS) is not None:
        args = decode_arguments(a.get(PydanticAI.TOOL_ARGUMENTS))
    elif a.get(ADK.TOOL_CALL_ARGS) is not None:
        args = decode_arguments(a.get(ADK.TOOL_CALL_ARGS))
    elif a.get(Traceloop.ENTITY_INPUT) is not None:
        args = _unwrap_traceloop_input(a.get(Traceloop.ENTITY_INPUT))

    result: Captured = ABSENT
    raw = a.get(GenAI.TOOL_CALL_RESULT)
    if raw is not None:
        result = _unwrap_traceloop_output(raw) if is_traceloop_tool else decode_result(raw)
    elif a.get(OpenInference.OUTPUT_VALUE) is not None:
        result = decode_result(a.get(OpenInference.OUTPUT_VALUE))
    elif a.get(PydanticAI.TOOL_RESPONSE) is not None:
        result = decode_result(a.get(PydanticAI.TOOL_RESPONSE))
    elif a.get(ADK.TOOL_RESPONSE) is not None:
        result = decode_result(a.get(ADK.TOOL_RESPONSE))
    elif a.get(Traceloop.ENTITY_OUTPUT) is not None:
        result = _unwrap_traceloop_output(a.get(Traceloop.ENTITY_OUTPUT))

    if args is ABSENT or result is ABSENT:
        for ev in span.events:
            if ev.name == Events.TOOL_MESSAGE and args is ABSENT:  # strands legacy
                content = _event_attr(ev, Strands.EVENT_CONTENT)
                if content is not None:
                    args = decode_arguments(content)
                if f.call_id is None:
                    f.call_id = _str(_event_attr(ev, Strands.EVENT_ID))
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
    result = unwrap_text_blocks(langchain_tool_result(_adk_function_response(result)))
    if a.get(ADK.TOOL_CALL_ARGS) == "{}" and a.get(ADK.TOOL_RESPONSE) in ("{}", None) and raw is None:
        args = result = ABSENT  # ADK 1.x with content capture off writes "{}" for both
    f.args = args
    f.result = result
    f.error = _error(span)
    tool_type = _str(a.get(GenAI.TOOL_TYPE))
    if (tool_type in MCP.TOOL_TYPES) or MCP.METHOD in a:
        f.tool_kind = "mcp"
    elif tool_type in AgentToolTypes.VALUES:
        f.tool_kind = "agent"


def _usage(a: Mapping[str, Any]) -> Usage:
    return Usage(
        _int(_first(a, GenAI.USAGE_INPUT, GenAI.USAGE_PROMPT_OLD, OpenInference.TOKENS_PROMPT)),
        _int(_first(a, GenAI.USAGE_OUTPUT, GenAI.USAGE_COMPLETION_OLD, OpenInference.TOKENS_COMPLETION)),
        _int(_first(a, GenAI.USAGE_CACHE_READ, GenAI.USAGE_CACHE_READ_ALT, OpenInference.TOKENS_CACHE_READ)),
        _int(_first(a, GenAI.USAGE_CACHE_CREATION, GenAI.USAGE_CACHE_CREATION_ALT, OpenInference.TOKENS_CACHE_WRITE)),
    )


def _model_io(f: SpanFacts) -> None:
    """Input/output messages and tool definitions of a model or agent span, any convention."""
    span = f.span
    a = span.attributes
    ev_in, ev_out, details = _events_io(span.events)
    merged: Mapping[str, Any] = {**details, **a} if details else a

    inputs = parse_messages(merged.get(GenAI.INPUT_MESSAGES))
    outputs = parse_messages(merged.get(GenAI.OUTPUT_MESSAGES), "assistant")
    # flattened (indexed-key) conventions: one cheap pass decides whether any is present at all
    flattened = any(k.startswith(_FLATTENED_PREFIXES) for k in a)
    if flattened and inputs is None:
        inputs = _oi_messages(a, OpenInference.INPUT_MESSAGES_PREFIX, "user")
    if flattened and outputs is None:
        outputs = _oi_messages(a, OpenInference.OUTPUT_MESSAGES_PREFIX, "assistant")
    if flattened and inputs is None:
        inputs = _legacy_traceloop_messages(a, Traceloop.PROMPT_PREFIX, "user")
    if flattened and outputs is None:
        outputs = _legacy_traceloop_messages(a, Traceloop.COMPLETION_PREFIX, "assistant")
    if inputs is None and a.get(ADK.LLM_REQUEST) is not None:
        inputs = parse_messages(a.get(ADK.LLM_REQUEST))
    if outputs is None and a.get(ADK.LLM_RESPONSE) is not None:
        outputs = parse_messages(a.get(ADK.LLM_RESPONSE), "assistant")
    if inputs is None:
        inputs = ev_in
    if outputs is None:
        outputs = ev_out
    if f.role is Role.LLM:
        if inputs is None and a.get(OpenInference.INPUT_VALUE) is not None:
            inputs = parse_messages(a.get(OpenInference.INPUT_VALUE))
        if outputs is None and a.get(OpenInference.OUTPUT_VALUE) is not None:
            outputs = parse_messages(a.get(OpenInference.OUTPUT_VALUE), "assistant")
    f.input_messages = inputs
    f.output_messages = outputs

    tools = parse_tool_definitions(merged.get(GenAI.TOOL_DEFINITIONS), GenAI.TOOL_DEFINITIONS)
    if tools is None and flattened:
        tools = _flattened_tools(a)
    if tools is None and a.get(PydanticAI.MODEL_REQUEST_PARAMETERS) is not None:
        params = loads(a.get(PydanticAI.MODEL_REQUEST_PARAMETERS))
        if isinstance(params, Mapping) and isinstance(params.get("function_tools"), list):
            tools = parse_tool_definitions(params["function_tools"], PydanticAI.MODEL_REQUEST_PARAMETERS)
    if tools is None and a.get(ADK.LLM_REQUEST) is not None:
        request = loads(a.get(ADK.LLM_REQUEST))
        config = request.get("config") if isinstance(request, Mapping) else None
        if isinstance(config, Mapping) and isinstance(config.get("tools"), list):
            tools = parse_tool_definitions(config["tools"], ADK.LLM_REQUEST)
    if tools is None and a.get(Strands.AGENT_TOOLS) is not None:
        tools = parse_tool_definitions(a.get(Strands.AGENT_TOOLS), Strands.AGENT_TOOLS)
    f.tools_offered = tools
    f.model = _str(
        _first(a, GenAI.RESPONSE_MODEL, GenAI.REQUEST_MODEL, OpenInference.MODEL_NAME, PydanticAI.MODEL_NAME)
    )
    f.provider = _str(_first(a, GenAI.PROVIDER, GenAI.SYSTEM, OpenInference.PROVIDER, OpenInference.SYSTEM))
    f.usage = _usage(a)


def model_response_id(span: SpanRecord) -> str | None:
    """The provider's id of the response a model span recorded, if the span carries it (see
    :class:`~monitor.trajectory.semconv.ModelCallIdentity`): a response-id attribute, else the ``id``
    of a provider response body held as JSON. Parses that body, so callers ask only when they need it
    (to tell a model call recorded twice from two calls)."""
    a = span.attributes
    for key in ModelCallIdentity.RESPONSE_ID_KEYS:
        found = _str(a.get(key))
        if found is not None:
            return found
    for key in ModelCallIdentity.RESPONSE_BODY_KEYS:
        raw = a.get(key)
        if not (isinstance(raw, str) and raw.lstrip().startswith("{")):
            continue
        body = loads(raw)
        if isinstance(body, Mapping) and any(body.get(k) == v for k, v in ModelCallIdentity.RESPONSE_BODY_MARKERS):
            found = _str(body.get("id"))
            if found is not None:
                return found
    return None


def normalize_agent_content(f: SpanFacts) -> None:
    """Read a span as an agent span (input, answer, tools, usage) after its role was decided from context.

    Keeps an agent name already set."""
    name = f.agent_name
    _agent_facts(f)
    f.agent_name = name or f.agent_name


def _agent_facts(f: SpanFacts) -> None:
    span = f.span
    a = span.attributes
    _model_io(f)
    # agent-level input / output in the conventions that put them on the agent span
    if f.input_messages is None:
        all_messages = a.get(PydanticAI.ALL_MESSAGES)
        if all_messages is not None:
            f.input_messages = parse_messages(all_messages)
        elif a.get(OpenInference.INPUT_VALUE) is not None:
            f.input_messages = parse_messages(a.get(OpenInference.INPUT_VALUE))
        elif a.get(Traceloop.ENTITY_INPUT) is not None:
            f.input_messages = parse_messages(_traceloop_text(a.get(Traceloop.ENTITY_INPUT)))
    final = a.get(PydanticAI.FINAL_RESULT)
    if final is not None:
        f.final_text = final if isinstance(final, str) else _json_text(final)
    elif f.output_messages:
        f.final_text = messages_text(f.output_messages, "assistant")
    elif a.get(OpenInference.OUTPUT_VALUE) is not None:
        f.final_text = _text_from_value(a.get(OpenInference.OUTPUT_VALUE))
    elif a.get(Traceloop.ENTITY_OUTPUT) is not None:
        f.final_text = _text_from_value(_unwrap_traceloop_output(a.get(Traceloop.ENTITY_OUTPUT)))
    if f.usage == Usage():
        f.usage = Usage(_int(a.get(PydanticAI.AGGREGATED_INPUT)), _int(a.get(PydanticAI.AGGREGATED_OUTPUT)))
    name = _first(a, GenAI.AGENT_NAME, OpenInference.AGENT_NAME, PydanticAI.AGENT_NAME)
    if name is None and a.get(Traceloop.SPAN_KIND) in (Traceloop.KIND_AGENT, Traceloop.KIND_WORKFLOW):
        name = a.get(Traceloop.ENTITY_NAME)
    if name is None and span.name.startswith(INVOKE_AGENT_SPAN_PREFIX):
        name = span.name[len(INVOKE_AGENT_SPAN_PREFIX) :]
    if name is None and a.get(OpenInference.SPAN_KIND) == OpenInference.KIND_AGENT:
        name = _first(a, OpenInference.GRAPH_NODE_NAME, OpenInference.GRAPH_NODE_ID)
        if name is None:
            name = span.name
            f.agent_name_weak = True
    f.agent_name = _str(name)


def _json_text(value: Any) -> str:
    import json

    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _traceloop_text(value: Any) -> Any:
    decoded = _unwrap_traceloop_input(value)
    if isinstance(decoded, Mapping) and len(decoded) == 1:
        only = next(iter(decoded.values()))
        if isinstance(only, str | list):
            return only
    return decoded


def _text_from_value(value: Any) -> str | None:
    """An agent's answer from an output value: plain text, or the assistant text of messages in it.

    Structured outputs that hold no assistant message (an error event, a state object) are not an
    answer: None, so the answer falls back to the last model step's text."""
    decoded = loads(value)
    if isinstance(decoded, str):
        return decoded or None
    return messages_text(parse_messages(decoded, "assistant"), "assistant")


def _common(f: SpanFacts) -> None:
    a = f.span.attributes
    conv = _str(_first(a, GenAI.CONVERSATION_ID, OpenInference.SESSION_ID, ADK.SESSION_ID))
    if conv is None:
        for key in Traceloop.SESSION_KEYS:
            conv = _str(a.get(Traceloop.ASSOCIATION_PREFIX + key))
            if conv:
                break
    f.conversation_id = conv
    if f.agent_name is None:
        f.agent_name = _str(_first(a, GenAI.AGENT_NAME, PydanticAI.AGENT_NAME))


def normalize(span: SpanRecord) -> SpanFacts:
    """All a span says about the run, whatever convention(s) it speaks. Never raises on content."""
    role = detect_role(span)
    f = SpanFacts(span=span, role=role, conventions=_conventions(span.attributes, span))
    if role is Role.TOOL:
        _tool_facts(f)
    elif role in (Role.AGENT, Role.WORKFLOW):
        _agent_facts(f)
    elif role is Role.LLM:
        _model_io(f)
    _common(f)
    return f
