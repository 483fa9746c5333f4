"""The span-key priority table: which span keys give which fact, per convention, in priority order.

Every fact :mod:`monitor.trajectory.normalize` reads from a span (a tool's name, call id, arguments
and result, the span's role, a model call's input and output, …) is a list of rows here, one per
convention and key, highest priority first, each naming who defines the key (``§`` numbers refer to
``shared/reference/otel-agent-spans.md``: §1 OTel GenAI, §2 OpenInference, §3 OpenLLMetry, §4
frameworks; its §7 is the priority cheat sheet this table implements). The normalizer interprets the
rows; the keys themselves are spelled once, in :mod:`monitor.trajectory.semconv`.

Two kinds of rows:

* :class:`Row` — *where a value is*. A row reads one source (an attribute, the span name, or a named
  function of the span) and decodes what it read with a named function. Rows are grouped in tiers
  (``tier``, ascending): within a tier, the first row whose source is *present* decides (its decoded
  value is the tier's answer, even when the decoding yields nothing); a tier that yields nothing
  (None or ABSENT) hands over to the next tier. "Present" is per :class:`Read`: an attribute that is
  not None (``ATTR``), not None and not ``""`` (``ATTR_SET``), a span name with the prefix
  (``NAME_AFTER``), a function result that is not None (``FUNCTION``).
* :class:`Rule` — *what a span is* (its role, a tool's kind). The first rule whose test holds (and
  its ``also`` test, if any) gives the value.

``docs/decoding.md`` holds the table as :func:`render_markdown` prints it (a test keeps them equal).
Special cases that are logic rather than a key (JSON decoding, envelope unwrapping, flattened
message lists) are the named functions below, referenced from the rows.
"""

from __future__ import annotations

import ast
import enum
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeAlias

from monitor.trajectory.messages import (
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
    ToolResultPart,
)
from monitor.trajectory.semconv import (
    ADK,
    EXECUTE_TOOL_SPAN_PREFIX,
    INVOKE_AGENT_SPAN_PREFIX,
    MCP,
    AgentToolTypes,
    DSPy,
    Events,
    GenAI,
    Generic,
    Haystack,
    LangChain,
    LlamaIndex,
    Op,
    OpenAIAgents,
    OpenInference,
    PydanticAI,
    PythonCallWrappers,
    Smolagents,
    Strands,
    Traceloop,
    VercelAI,
)
from monitor.trajectory.spans import SpanRecord

__all__ = [
    "FACT_SCOPE",
    "FLATTENED_PREFIXES",
    "RESULT_UNWRAPPERS",
    "ROLE_DEFAULT",
    "ROWS",
    "RULES",
    "TOOL_KIND_DEFAULT",
    "Check",
    "Condition",
    "Convention",
    "Fact",
    "FactClassifier",
    "FactReader",
    "Read",
    "Role",
    "Row",
    "Rule",
    "SpanView",
    "adk_capture_off",
    "as_count",
    "as_text",
    "fact_classifier",
    "fact_reader",
    "render_markdown",
    "unwrap_text_blocks",
]


class Role(enum.Enum):
    WORKFLOW = "workflow"
    AGENT = "agent"
    LLM = "llm"
    TOOL = "tool"
    SYNTHETIC = "synthetic"  # ADK's merged parallel-tools span: not a call of its own
    OTHER = "other"


class Convention(enum.StrEnum):
    """Who defines a key (the first six are also the labels of ``SpanFacts.conventions``)."""

    GENAI = "gen_ai"  # OTel GenAI semantic conventions (semantic-conventions ≤ v1.41, then semantic-conventions-genai)
    OPENINFERENCE = "openinference"
    OPENLLMETRY = "openllmetry"  # OpenLLMetry / Traceloop
    ADK = "adk"  # Google ADK's own `gcp.vertex.agent` tracer
    PYDANTIC_AI = "pydantic_ai"
    STRANDS = "strands"
    OPENAI_AGENTS = "openai_agents"  # openai-agents SDK as its instrumentations write it
    VERCEL_AI = "vercel_ai"  # Vercel AI SDK's own `ai.*` telemetry
    HAYSTACK = "haystack"  # Haystack agents through opentelemetry-haystack
    DSPY = "dspy"  # DSPy through openinference-instrumentation-dspy (OpenInference keys, DSPy's span names)
    MCP = "mcp"
    GENERIC = "generic"  # no known convention: evidence read from the shape of the keys (semconv.Generic)
    ANY = "any"  # no convention: the span's own name, or a fact read before


class Fact(enum.StrEnum):
    """What a row gives. ``SpanFacts`` field names where they are the same."""

    ROLE = "role"
    HANDOFF_TARGET = "handoff_target"
    TOOL_NAME = "tool_name"
    CALL_ID = "call_id"
    ARGUMENTS = "args"
    RESULT = "result"
    TOOL_KIND = "tool_kind"
    INPUT_MESSAGES = "input_messages"
    OUTPUT_MESSAGES = "output_messages"
    TOOLS_OFFERED = "tools_offered"
    MODEL = "model"
    PROVIDER = "provider"
    INPUT_TOKENS = "usage.input_tokens"
    OUTPUT_TOKENS = "usage.output_tokens"
    CACHE_READ_TOKENS = "usage.cache_read_input_tokens"
    CACHE_CREATION_TOKENS = "usage.cache_creation_input_tokens"
    AGENT_INPUT = "agent.input_messages"
    FINAL_TEXT = "final_text"
    AGENT_INPUT_TOKENS = "agent.usage.input_tokens"
    AGENT_OUTPUT_TOKENS = "agent.usage.output_tokens"
    AGENT_NAME = "agent_name"
    SPAN_AGENT_NAME = "span.agent_name"
    CONVERSATION_ID = "conversation_id"
    TOOL_FAILED = "tool_failed"
    TOOL_SUCCEEDED = "tool_succeeded"


FACT_SCOPE: Final[Mapping[Fact, str]] = {
    Fact.ROLE: "every span",
    Fact.HANDOFF_TARGET: "tool spans, before the other tool facts: a handoff is the call of `transfer_to_<agent>`",
    Fact.TOOL_NAME: "tool spans",
    Fact.CALL_ID: "tool spans",
    Fact.ARGUMENTS: "tool spans",
    Fact.RESULT: "tool spans; the result is then unwrapped by `RESULT_UNWRAPPERS`",
    Fact.TOOL_KIND: "tool spans (default `function`)",
    Fact.INPUT_MESSAGES: "model, agent and workflow spans",
    Fact.OUTPUT_MESSAGES: "model, agent and workflow spans",
    Fact.TOOLS_OFFERED: "model, agent and workflow spans",
    Fact.MODEL: "model, agent and workflow spans",
    Fact.PROVIDER: "model, agent and workflow spans",
    Fact.INPUT_TOKENS: "model, agent and workflow spans",
    Fact.OUTPUT_TOKENS: "model, agent and workflow spans",
    Fact.CACHE_READ_TOKENS: "model, agent and workflow spans",
    Fact.CACHE_CREATION_TOKENS: "model, agent and workflow spans",
    Fact.AGENT_INPUT: "agent spans whose input_messages rows gave nothing",
    Fact.FINAL_TEXT: "agent spans",
    Fact.AGENT_INPUT_TOKENS: "agent spans that reported no usage of their own",
    Fact.AGENT_OUTPUT_TOKENS: "agent spans that reported no usage of their own",
    Fact.AGENT_NAME: "agent spans",
    Fact.SPAN_AGENT_NAME: "every span that has no agent name yet",
    Fact.CONVERSATION_ID: "every span",
    Fact.TOOL_FAILED: "tool spans whose status is not ERROR and that carry no `error.type` nor exception event",
    Fact.TOOL_SUCCEEDED: "tool spans whose status is ERROR but that carry no `error.type` nor exception event: "
    "evidence that the status is not the call's own",
}


class Read(enum.Enum):
    """How a row reads its source, and when the source counts as present."""

    ATTR = "attribute"  # attributes[key]; present unless None
    ATTR_SET = "attribute, non-empty"  # attributes[key]; present unless None or ""
    MERGED = "attribute or details event"  # attributes[key], else the operation-details event's; unless None
    NAME_AFTER = "span name after"  # the span name's rest after the prefix `key`; present when it has the prefix
    NAME = "span name"  # the span name itself; always present
    KEY_MATCH = "first key matching"  # attributes[k] of the first key k matching the pattern `key`; unless None
    FUNCTION = "function"  # reader(view); present unless None
    EVENTS = "span events"  # read in event order by one pass over the span's events (normalize)


class Check(enum.Enum):
    """A test of a :class:`Rule`."""

    TEXT_IN = "text of"  # the attribute's trimmed text is one of `values`
    VALUE_IN = "value of"  # the attribute is a string equal to one of `values`, as sent
    IS_TEXT = "is a string"  # the attribute is a string (any)
    NO_TEXT = "has no text"  # the attribute is absent, not a string, or blank
    HAS_TEXT = "has text"  # the attribute is a non-blank string
    HAS = "present"  # the attribute is present, whatever its value
    HAS_PREFIX = "some key starts with"
    NO_EVENT = "has no event named"
    KEY_MATCHES = "some key matches"  # a regular expression (re.search) over the attribute keys
    IS_TRUE = "is true"  # the attribute is the boolean true (or the text "true")
    NAME_IS = "span name is"
    NAME_STARTS = "span name starts with"
    NAME_ENDS = "span name ends with"
    SCOPE_IS = "instrumentation scope is"
    ROOT = "root span"


@dataclass(frozen=True, slots=True)
class Condition:
    check: Check
    key: str = ""  # the attribute key, span name, name prefix or scope the check reads
    values: frozenset[str] = frozenset()

    def describe(self) -> str:
        if self.check in (Check.TEXT_IN, Check.VALUE_IN):
            shown = " \\| ".join(f"`{v}`" for v in sorted(self.values))
            return f"{self.check.value} `{self.key}` ∈ {shown}" if len(self.values) > 1 else f"`{self.key}` = {shown}"
        if self.check is Check.ROOT:
            return "root span"
        if self.check is Check.KEY_MATCHES:
            shown = self.key.replace("|", "\\|")
            return f"{self.check.value} `{shown}`"
        if self.check in (Check.IS_TEXT, Check.NO_TEXT, Check.HAS_TEXT, Check.HAS, Check.IS_TRUE):
            return f"`{self.key}` {self.check.value}"
        return f"{self.check.value} `{self.key}`"


def text_in(key: str, *values: str) -> Condition:
    return Condition(Check.TEXT_IN, key, frozenset(values))


def value_in(key: str, *values: str) -> Condition:
    return Condition(Check.VALUE_IN, key, frozenset(values))


def is_text(key: str) -> Condition:
    return Condition(Check.IS_TEXT, key)


def no_text(key: str) -> Condition:
    return Condition(Check.NO_TEXT, key)


def has_text(key: str) -> Condition:
    return Condition(Check.HAS_TEXT, key)


def has(key: str) -> Condition:
    return Condition(Check.HAS, key)


def no_event(name: str) -> Condition:
    return Condition(Check.NO_EVENT, name)


def has_prefix(prefix: str) -> Condition:
    return Condition(Check.HAS_PREFIX, prefix)


def key_matches(pattern: str) -> Condition:
    return Condition(Check.KEY_MATCHES, pattern)


def is_true(key: str) -> Condition:
    return Condition(Check.IS_TRUE, key)


def name_is(name: str) -> Condition:
    return Condition(Check.NAME_IS, name)


def name_starts(prefix: str) -> Condition:
    return Condition(Check.NAME_STARTS, prefix)


def name_ends(suffix: str) -> Condition:
    return Condition(Check.NAME_ENDS, suffix)


def scope_is(scope: str) -> Condition:
    return Condition(Check.SCOPE_IS, scope)


ROOT: Final = Condition(Check.ROOT)


class SpanView:
    """One span as the rows read it; ``normalize`` builds it once per span and fills the model-span
    fields (``merged``, ``flattened``, ``events_*``) before it reads model facts."""

    __slots__ = (
        "attrs", "events_in", "events_out", "flattened", "generic", "merged", "output_messages", "role", "span",
        "weak_name",
    )  # fmt: skip

    def __init__(self, span: SpanRecord, role: Role) -> None:
        self.span = span
        self.attrs: Mapping[str, Any] = span.attributes
        self.role = role
        self.merged: Mapping[str, Any] = self.attrs  # span attributes over the operation-details event's
        self.flattened = False  # whether any key of a flattened (indexed) message or tool list is present
        self.events_in: Messages | None = None  # input messages carried by events
        self.events_out: Messages | None = None  # output messages carried by events
        self.output_messages: Messages | None = None  # the output_messages fact, once read
        self.weak_name = False  # set when the agent name is only the span's name
        self.generic = False  # the span's role came from generic evidence (no known convention)


Decoder: TypeAlias = Callable[[Any], Any]
Reader: TypeAlias = Callable[[SpanView], Any]
Guard: TypeAlias = Callable[[SpanView], bool]


@dataclass(frozen=True, slots=True)
class Row:
    """Where a fact's value is, for one convention (see the module docstring for the semantics)."""

    fact: Fact
    convention: Convention
    read: Read
    key: str  # the attribute key or span-name prefix; for FUNCTION and EVENTS rows, what they read
    decode: Decoder | None  # applied to what was read (None: taken as it is)
    ref: str  # who defines the key
    when: Guard | None = None  # the row applies only to spans where this holds
    tier: int = 1
    reader: Reader | None = None  # FUNCTION rows: the function that reads the span


@dataclass(frozen=True, slots=True)
class Rule:
    """What a span is, for one convention: ``value`` when ``test`` (and ``also``) hold."""

    fact: Fact
    value: Any
    convention: Convention
    test: Condition
    ref: str
    also: Condition | None = None


# --------------------------------------------------------------------------- value readers


def as_text(value: Any) -> str | None:
    """A string attribute, trimmed; None when it is not a string or blank."""
    if isinstance(value, str):
        value = value.strip()
        return value or None
    return None


_INT64_MAX: Final = 2**63 - 1


def as_count(value: Any) -> int | None:
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


def call_id_text(value: Any) -> str | None:
    """A call id as text; ADK's ``<not specified>`` placeholder (§4.1) is no id."""
    call_id = as_text(value)
    return None if call_id == ADK.NO_CALL_ID else call_id


def _first_set(attrs: Mapping[str, Any], *keys: str) -> Any:
    for key in keys:
        value = attrs.get(key)
        if value is not None and value != "":
            return value
    return None


# --------------------------------------------------------------------------- envelopes and wrappers


def unwrap_traceloop_input(value: Any) -> Captured:
    """OpenLLMetry's input envelopes: the decorators' ``{"args", "kwargs"}`` (§3.1) and LangChain's
    ``{"input_str", "inputs", …}`` (§3.2), as the arguments they wrap."""
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


def unwrap_traceloop_output(value: Any) -> Captured:
    """OpenLLMetry's callback envelopes: ``{"output": …, "kwargs": …}`` (tools) and
    ``{"outputs": …, "kwargs": …}`` (chains and graphs)."""
    decoded = decode_result(value)
    if isinstance(decoded, Mapping):
        for key in ("output", "outputs"):
            if key in decoded and set(decoded) <= {key, "kwargs"}:
                inner = decoded[key]
                return decode_result(inner) if isinstance(inner, str) else inner
    return decoded


def adk_function_response(result: Captured) -> Captured:
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


def llama_index_tool_output(result: Captured) -> Captured:
    """LlamaIndex's serialized ``ToolOutput`` as the tool's own return value (``raw_output``)."""
    if isinstance(result, Mapping) and set(result) >= LlamaIndex.TOOL_OUTPUT_KEYS:
        return result["raw_output"]
    return result


RESULT_UNWRAPPERS: Final[tuple[Decoder, ...]] = (
    adk_function_response,
    langchain_tool_result,
    llama_index_tool_output,
    unwrap_text_blocks,
)
"""Applied in this order to a tool result, whichever row (or event) gave it."""


def adk_capture_off(attrs: Mapping[str, Any]) -> bool:
    """ADK 1.x with content capture off writes ``"{}"`` for both arguments and response (§4.1): then
    neither was captured."""
    return (
        attrs.get(ADK.TOOL_CALL_ARGS) == "{}"
        and attrs.get(ADK.TOOL_RESPONSE) in ("{}", None)
        and attrs.get(GenAI.TOOL_CALL_RESULT) is None
    )


def parse_output_messages(value: Any) -> Messages | None:
    return parse_messages(value, "assistant")


def genai_tool_definitions(value: Any) -> tuple[ToolDef, ...] | None:
    return parse_tool_definitions(value, GenAI.TOOL_DEFINITIONS)


def strands_agent_tools(value: Any) -> tuple[ToolDef, ...] | None:
    return parse_tool_definitions(value, Strands.AGENT_TOOLS)


def _tool_list(value: Any, field: str, source: str) -> tuple[ToolDef, ...] | None:
    """Tool definitions in the list ``field`` of a JSON object (None when there is no such list)."""
    params = loads(value)
    if isinstance(params, Mapping) and isinstance(params.get(field), list):
        return parse_tool_definitions(params[field], source)
    return None


def pydantic_function_tools(value: Any) -> tuple[ToolDef, ...] | None:
    """``model_request_parameters.function_tools`` (§4.2)."""
    return _tool_list(value, "function_tools", PydanticAI.MODEL_REQUEST_PARAMETERS)


def pydantic_output_tools(value: Any) -> frozenset[str]:
    """Names in ``model_request_parameters.output_tools``: the tools pydantic-ai offers the model to end a run with
    its structured output (``output_type``; ``final_result`` by default, ``final_result_<Type>`` with several output
    types, or the name a ``ToolOutput`` gives). Its control flow, not the user's tools."""
    params = loads(value)
    tools = params.get("output_tools") if isinstance(params, Mapping) else None
    if not isinstance(tools, list):
        return frozenset()
    return frozenset(t["name"] for t in tools if isinstance(t, Mapping) and isinstance(t.get("name"), str))


def adk_request_tools(value: Any) -> tuple[ToolDef, ...] | None:
    """``llm_request.config.tools`` (§4.1)."""
    request = loads(value)
    config = request.get("config") if isinstance(request, Mapping) else None
    if isinstance(config, Mapping) and isinstance(config.get("tools"), list):
        return parse_tool_definitions(config["tools"], ADK.LLM_REQUEST)
    return None


def json_text(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def final_result_text(value: Any) -> str:
    """pydantic-ai's ``final_result``: a string, or JSON of a structured output."""
    return value if isinstance(value, str) else json_text(value)


def traceloop_text(value: Any) -> Any:
    decoded = unwrap_traceloop_input(value)
    if isinstance(decoded, Mapping) and len(decoded) == 1:
        only = next(iter(decoded.values()))
        if isinstance(only, str | list):
            return only
    return decoded


def traceloop_input_messages(value: Any) -> Messages | None:
    return parse_messages(traceloop_text(value))


def text_from_value(value: Any) -> str | None:
    """An agent's answer from an output value: plain text, or the assistant text of messages in it.

    Structured outputs that hold no assistant message (an error event, a state object) are not an
    answer: None, so the answer falls back to the last model step's text."""
    decoded = loads(value)
    if isinstance(decoded, str):
        return decoded or None
    return messages_text(parse_messages(decoded, "assistant"), "assistant")


def traceloop_output_text(value: Any) -> str | None:
    return text_from_value(unwrap_traceloop_output(value))


def assistant_text(messages: Messages) -> str | None:
    return messages_text(messages, "assistant")


# --------------------------------------------------------------------------- flattened (indexed-key) lists

_INDEXED = re.compile(r"(\d+)\.(.+)")

FLATTENED_PREFIXES: Final[tuple[str, ...]] = (
    OpenInference.INPUT_MESSAGES_PREFIX,
    OpenInference.OUTPUT_MESSAGES_PREFIX,
    OpenInference.TOOLS_PREFIX,
    Traceloop.PROMPT_PREFIX,
    Traceloop.COMPLETION_PREFIX,
    Traceloop.FUNCTIONS_PREFIX,
)
"""Prefixes of the flattened conventions: one pass over the keys decides whether any is present."""


def indexed(attrs: Mapping[str, Any], prefix: str) -> dict[int, dict[str, Any]]:
    """Group flattened ``<prefix><i>.<rest>`` keys by index ``i``."""
    out: dict[int, dict[str, Any]] = {}
    for key, value in attrs.items():
        if not key.startswith(prefix):
            continue
        m = _INDEXED.match(key, len(prefix))
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = value
    return out


def oi_messages(a: Mapping[str, Any], prefix: str, default_role: str) -> Messages | None:
    """OpenInference ``llm.{input,output}_messages.<i>.message.*`` (§2)."""
    rows = indexed(a, prefix)
    if not rows:
        return None
    out: list[Message] = []
    for _, flat in sorted(rows.items()):
        role = normalize_role(flat.get(OpenInference.MSG_ROLE), default_role)
        parts: list[Part] = []
        contents = indexed(flat, OpenInference.MSG_CONTENTS)
        tool_call_parts_from_contents = False
        for _, c in sorted(contents.items()):
            ctype = c.get("message_content.type")
            if ctype == "text" and isinstance(c.get("message_content.text"), str):
                parts.append(TextPart(c["message_content.text"]))
            elif ctype == "tool_use":
                name = _first_set(c, OpenInference.TC_NAME, "message_content." + OpenInference.TC_NAME)
                if name is None:
                    continue
                tool_call_parts_from_contents = True
                parts.append(
                    ToolCallPart(
                        str(name),
                        as_text(_first_set(c, OpenInference.TC_ID, "message_content." + OpenInference.TC_ID)),
                        decode_arguments(
                            _first_set(c, OpenInference.TC_ARGS, "message_content." + OpenInference.TC_ARGS)
                        ),
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
            for _, tc in sorted(indexed(flat, OpenInference.MSG_TOOL_CALLS).items()):
                parts.append(
                    ToolCallPart(
                        str(tc.get(OpenInference.TC_NAME) or ""),
                        as_text(tc.get(OpenInference.TC_ID)),
                        decode_arguments(tc.get(OpenInference.TC_ARGS)),
                    )
                )
        if role == "tool" and flat.get(OpenInference.MSG_TOOL_CALL_ID) is not None:
            parts = [ToolResultPart(as_text(flat.get(OpenInference.MSG_TOOL_CALL_ID)), decode_result(content))]
        out.append(Message(role, tuple(parts)))
    return tuple(out)


def legacy_traceloop_messages(a: Mapping[str, Any], prefix: str, default_role: str) -> Messages | None:
    """OpenLLMetry's legacy ``gen_ai.{prompt,completion}.<i>.*`` (§3.3)."""
    rows = indexed(a, prefix)
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
        for _, tc in sorted(indexed(flat, "tool_calls.").items()):
            parts.append(
                ToolCallPart(str(tc.get("name") or ""), as_text(tc.get("id")), decode_arguments(tc.get("arguments")))
            )
        if role == "tool" and flat.get("tool_call_id") is not None:
            parts = [ToolResultPart(as_text(flat.get("tool_call_id")), decode_result(content))]
        out.append(Message(role, tuple(parts)))
    return tuple(out)


def _schema(value: Any) -> Any:
    decoded = loads(value)
    return decoded if isinstance(decoded, Mapping) else None


# --------------------------------------------------------------------------- readers of the span (FUNCTION rows)


def oi_input_messages(v: SpanView) -> Messages | None:
    return oi_messages(v.attrs, OpenInference.INPUT_MESSAGES_PREFIX, "user") if v.flattened else None


def oi_output_messages(v: SpanView) -> Messages | None:
    return oi_messages(v.attrs, OpenInference.OUTPUT_MESSAGES_PREFIX, "assistant") if v.flattened else None


def traceloop_prompt_messages(v: SpanView) -> Messages | None:
    return legacy_traceloop_messages(v.attrs, Traceloop.PROMPT_PREFIX, "user") if v.flattened else None


def traceloop_completion_messages(v: SpanView) -> Messages | None:
    return legacy_traceloop_messages(v.attrs, Traceloop.COMPLETION_PREFIX, "assistant") if v.flattened else None


def oi_tools(v: SpanView) -> tuple[ToolDef, ...] | None:
    """``llm.tools.<i>.tool.json_schema`` (§2)."""
    rows = indexed(v.attrs, OpenInference.TOOLS_PREFIX) if v.flattened else None
    if not rows:
        return None
    defs: list[ToolDef] = []
    for _, flat in sorted(rows.items()):
        parsed = parse_tool_definitions(flat.get(OpenInference.TOOL_JSON_SCHEMA), "llm.tools")
        defs.extend(parsed or ())
    return tuple(defs)


def traceloop_functions(v: SpanView) -> tuple[ToolDef, ...] | None:
    """``llm.request.functions.<i>.{name,description,parameters|input_schema}`` (§3.3)."""
    fns = indexed(v.attrs, Traceloop.FUNCTIONS_PREFIX) if v.flattened else None
    if not fns:
        return None
    return tuple(
        ToolDef(
            str(f.get("name")),
            as_text(f.get("description")),
            _schema(f.get("parameters", f.get("input_schema"))),
            "llm.request.functions",
        )
        for _, f in sorted(fns.items())
        if f.get("name")
    )


def event_input_messages(v: SpanView) -> Messages | None:
    return v.events_in


def event_output_messages(v: SpanView) -> Messages | None:
    return v.events_out


def output_messages_if_any(v: SpanView) -> Messages | None:
    return v.output_messages or None


def oi_handoff_target(v: SpanView) -> Any:
    """OpenInference's handoff TOOL span ``handoff to <agent>`` (no ``gen_ai.tool.name``): its
    ``output.value``, else the agent in the span name. None on an OTel ``agent_handoff`` span."""
    name = v.span.name
    if not name.startswith(OpenAIAgents.OI_HANDOFF_SPAN_PREFIX) or handoff_operation(v):
        return None
    a = v.attrs
    if a.get(GenAI.TOOL_NAME) is not None:
        return None
    return a.get(OpenInference.OUTPUT_VALUE) or name[len(OpenAIAgents.OI_HANDOFF_SPAN_PREFIX) :]


def weak_span_name(v: SpanView) -> str:
    """The span name as a last-resort agent name, marked weak (OpenInference's root AGENT span)."""
    v.weak_name = True
    return v.span.name


# --------------------------------------------------------------------------- framework decoders


def _redacted(value: Any) -> bool:
    return isinstance(value, str) and value == OpenInference.REDACTED


def oi_value_messages(value: Any) -> Messages | None:
    """OpenInference ``input.value`` as messages; a hidden input (``__REDACTED__``) gives none."""
    return None if _redacted(value) else parse_messages(value)


def oi_value_output_messages(value: Any) -> Messages | None:
    """OpenInference ``output.value`` as assistant messages; a hidden output gives none."""
    return None if _redacted(value) else parse_output_messages(value)


def oi_text(value: Any) -> str | None:
    """OpenInference ``output.value`` as an answer; a hidden output gives none."""
    return None if _redacted(value) else text_from_value(value)


def oi_arguments(value: Any) -> Captured:
    """OpenInference ``input.value`` of a TOOL span; a hidden input (``__REDACTED__``) was not captured."""
    return ABSENT if _redacted(value) else decode_arguments(value)


def oi_result(value: Any) -> Captured:
    """OpenInference ``output.value`` of a TOOL span; a hidden output (``__REDACTED__``) was not captured."""
    return ABSENT if _redacted(value) else decode_result(value)


def unwrap_python_call(value: Any) -> Captured:
    """A Python call wrapper as the arguments it carries: ``{"kwargs": {...}}`` → the kwargs;
    ``{"args": [x], "kwargs": {}}`` with one mapping → it; wrapper flags (``sanitize_inputs_outputs``) are left out."""
    if _redacted(value):
        return ABSENT
    decoded = decode_arguments(value)
    if isinstance(decoded, Mapping) and ("kwargs" in decoded or "args" in decoded):
        rest = set(decoded) - {"args", "kwargs"} - PythonCallWrappers.FLAGS
        if not rest:
            kwargs = decoded.get("kwargs") or {}
            args = decoded.get("args") or []
            if isinstance(kwargs, Mapping) and isinstance(args, list):
                if not args:
                    return dict(kwargs)
                if not kwargs and len(args) == 1 and isinstance(args[0], Mapping):
                    return dict(args[0])
                return {"args": args, **kwargs}
    return decoded


def dspy_tool_name(name: str) -> str | None:
    """``get_weather.__call__`` → ``get_weather``; None for a span name without the suffix."""
    for suffix in DSPy.TOOL_NAME_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return None


def dspy_module_name(v: SpanView) -> str | None:
    """A DSPy program's class from its root span name (``WeatherAgent.forward`` → ``WeatherAgent``), weak."""
    name = v.span.name
    for suffix in DSPy.MODULE_NAME_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            v.weak_name = True
            return name[: -len(suffix)]
    return None


def dspy_input(value: Any) -> Messages | None:
    """A DSPy module's inputs (``{"input_args": {...}}`` for ReAct, the fields themselves for a program's
    ``forward``): one text field is the user's request; several are given as JSON."""
    if _redacted(value):
        return None
    decoded = loads(value)
    if not isinstance(decoded, Mapping):
        return None
    fields = decoded.get(DSPy.INPUT_ARGS, decoded)  # ReAct wraps its inputs; a program's forward() does not
    if not isinstance(fields, Mapping):
        return None
    if not fields:
        return None
    texts = [v for v in fields.values() if isinstance(v, str)]
    text = texts[0] if len(fields) == 1 and texts else json_text(dict(fields))
    return (Message("user", (TextPart(text),)),)


def dspy_prediction(value: Any) -> str | None:
    """A DSPy Prediction's answer: its one output field that is not the trajectory or the reasoning."""
    if _redacted(value):
        return None
    decoded = loads(value)
    if not isinstance(decoded, Mapping):
        return None
    answers = {k: v for k, v in decoded.items() if k not in DSPy.NOT_ANSWERS}
    if len(answers) == 1:
        only = next(iter(answers.values()))
        return only if isinstance(only, str) else json_text(only)
    return json_text(answers) if answers else None


def vercel_prompt(value: Any) -> Messages | None:
    """The root span's ``ai.prompt``: ``{"system", "prompt"}`` or ``{"system", "messages"}``."""
    decoded = loads(value)
    if not isinstance(decoded, Mapping):
        return parse_messages(decoded)
    out: list[Message] = []
    system = decoded.get("system")
    if isinstance(system, str) and system:
        out.append(Message("system", (TextPart(system),)))
    prompt = decoded.get("prompt")
    if isinstance(prompt, str) and prompt:
        out.append(Message("user", (TextPart(prompt),)))
    else:
        out.extend(parse_messages(decoded.get("messages", prompt)) or ())
    return tuple(out) or None


def vercel_output(v: SpanView) -> Messages | None:
    """A Vercel model span's answer: ``ai.response.text`` and the calls of ``ai.response.toolCalls``."""
    text = as_text(v.attrs.get(VercelAI.RESPONSE_TEXT))
    calls = v.attrs.get(VercelAI.RESPONSE_TOOL_CALLS)
    parts: list[Part] = [TextPart(text)] if text else []
    parts.extend(tool_call_list(calls) if calls is not None else ())
    return (Message("assistant", tuple(parts)),) if parts else None


_HAYSTACK_MESSAGE_HEAD: Final = "ChatMessage(_role=<ChatRole."
_HAYSTACK_ROLE: Final = re.compile(r"\w+: '(\w+)'>")
_HAYSTACK_TEXT_HEAD: Final = "TextContent(text="


def _python_string_literal(text: str, start: int) -> tuple[str, int] | None:
    """The Python string literal (``'…'`` or ``"…"``, backslash escapes) that starts at ``text[start]``, decoded,
    and the index after it; None when there is none. One forward scan: linear in what it reads."""
    if start >= len(text) or text[start] not in "'\"":
        return None
    quote, i = text[start], start + 1
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == quote:
            try:
                value = ast.literal_eval(text[start : i + 1])
            except (ValueError, SyntaxError, MemoryError, RecursionError):
                return None
            return (value, i + 1) if isinstance(value, str) else None
        i += 1
    return None


def haystack_messages(value: Any) -> Messages | None:
    """Haystack's ``{"messages": [ChatMessage.to_dict()]}``; when a value was not JSON-serializable (a
    streaming callback) Haystack writes ``str()`` of the dict instead: the texts of its ``ChatMessage`` reprs are
    read then (tool calls in a repr are not). Linear in the value: each repr is read once, forward."""
    decoded = loads(value)
    if not isinstance(decoded, str):
        return parse_messages(decoded)
    out: list[Message] = []
    heads = decoded.split(_HAYSTACK_MESSAGE_HEAD)[1:]
    for chunk in heads:
        role = _HAYSTACK_ROLE.match(chunk)
        if role is None:
            continue
        texts: list[Part] = []
        at = chunk.find(_HAYSTACK_TEXT_HEAD)
        while at >= 0:
            literal = _python_string_literal(chunk, at + len(_HAYSTACK_TEXT_HEAD))
            if literal is None:
                break
            texts.append(TextPart(literal[0]))
            at = chunk.find(_HAYSTACK_TEXT_HEAD, literal[1])
        out.append(Message(normalize_role(role.group(1)), tuple(texts)))
    return tuple(out) or None


def _haystack_reply_meta(v: SpanView) -> Mapping[str, Any]:
    output = loads(v.attrs.get(Haystack.LLM_OUTPUT))
    replies = output.get("replies") if isinstance(output, Mapping) else None
    first = replies[0] if isinstance(replies, list) and replies else None
    meta = first.get("meta") if isinstance(first, Mapping) else None
    return meta if isinstance(meta, Mapping) else {}


def haystack_model(v: SpanView) -> str | None:
    return as_text(_haystack_reply_meta(v).get("model"))


def _haystack_usage(v: SpanView, key: str) -> int | None:
    usage = _haystack_reply_meta(v).get("usage")
    return as_count(usage.get(key)) if isinstance(usage, Mapping) else None


def haystack_input_tokens(v: SpanView) -> int | None:
    return _haystack_usage(v, "prompt_tokens")


def haystack_output_tokens(v: SpanView) -> int | None:
    return _haystack_usage(v, "completion_tokens")


def haystack_tools(value: Any) -> tuple[ToolDef, ...] | None:
    return parse_tool_definitions(value, Haystack.AGENT_TOOLS)


_LLAMA_AGENT_NAME: Final = re.compile(LlamaIndex.AGENT_NAME_IN_REPR)
_OBJECT_REPR: Final = re.compile(r"\A[A-Z][A-Za-z0-9_]*\(")


def llama_index_agent_name(value: Any) -> str | None:
    """``current_agent_name='…'`` in the ``AgentOutput`` repr a LlamaIndex agent step receives."""
    found = _LLAMA_AGENT_NAME.search(value) if isinstance(value, str) else None
    return found.group(1) if found else None


def not_an_object_repr(value: Any) -> str | None:
    """An output that is text, not the (truncated) repr of a Python object (LlamaIndex's ``StopEvent(…)``)."""
    if _redacted(value) or (isinstance(value, str) and _OBJECT_REPR.match(value)):
        return None
    return text_from_value(value)


def smolagents_arguments(v: SpanView) -> Captured | None:
    """A smolagents tool's wrapper ``{"args": [...], "kwargs": {...}}`` with positional arguments named by the
    order of the tool's ``tool.parameters`` (CodeAgent calls ``get_time("Europe/Paris")``)."""
    raw = v.attrs.get(OpenInference.INPUT_VALUE)
    if raw is None:
        return None
    args = unwrap_python_call(raw)
    if not isinstance(args, Mapping):
        return args
    positional = args.get("args")
    params = loads(v.attrs.get(OpenInference.TOOL_PARAMETERS))
    if isinstance(positional, list) and isinstance(params, Mapping) and len(positional) <= len(params):
        named = dict(zip(params, positional, strict=False))
        return {**named, **{k: val for k, val in args.items() if k != "args"}}
    return args


def smolagents_agent_name(name: str) -> str | None:
    """``weather_agent.run`` → ``weather_agent``."""
    suffix = Smolagents.AGENT_SPAN_SUFFIX
    return name[: -len(suffix)] if name.endswith(suffix) and len(name) > len(suffix) else None


def smolagents_task(value: Any) -> Messages | None:
    """The root span's ``{"task": …}`` as the user's request."""
    decoded = None if _redacted(value) else loads(value)
    task = decoded.get(Smolagents.TASK) if isinstance(decoded, Mapping) else None
    return (Message("user", (TextPart(task),)),) if isinstance(task, str) and task else None


def smolagents_output(value: Any) -> str | None:
    """The root span's answer; when the run streamed, ``output.value`` concatenates the reprs of every event,
    and the answer is the last ``FinalAnswerStep(output=…)``."""
    if not isinstance(value, str) or _redacted(value):
        return None
    at = value.rfind(Smolagents.FINAL_ANSWER_STEP)
    if at < 0:
        return None if _OBJECT_REPR.match(value) else value
    literal = value[at + len(Smolagents.FINAL_ANSWER_STEP) :].removesuffix(")")
    try:
        answer = ast.literal_eval(literal)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None
    return answer if isinstance(answer, str) else json_text(answer)


def smolagents_tool_names(value: Any) -> tuple[ToolDef, ...] | None:
    """``smolagents.tools_names``: a Python list repr (or a string array) of tool names."""
    if isinstance(value, str) and value.startswith("["):
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    return parse_tool_definitions(value, Smolagents.TOOLS_NAMES) if isinstance(value, list | tuple) else None


def langchain_agent_name(value: Any) -> str | None:
    """``lc_agent_name`` of OpenInference's ``metadata`` (LangChain.js ``createAgent``'s name)."""
    metadata = loads(value)
    return as_text(metadata.get(LangChain.AGENT_NAME_METADATA)) if isinstance(metadata, Mapping) else None


def invocation_tools(value: Any) -> tuple[ToolDef, ...] | None:
    """The ``tools`` of OpenInference's ``llm.invocation_parameters`` (kept when inputs are hidden)."""
    return _tool_list(value, "tools", OpenInference.INVOCATION_PARAMETERS)


def vercel_tools(value: Any) -> tuple[ToolDef, ...] | None:
    return parse_tool_definitions(value, VercelAI.PROMPT_TOOLS)


# --------------------------------------------------------------------------- generic evidence (no known convention)

_GENERIC_TOOL_CALLS: Final = re.compile(Generic.TOOL_CALLS_KEY, re.IGNORECASE)
_GENERIC_OUTPUT_TEXT: Final = re.compile(Generic.OUTPUT_TEXT_KEY, re.IGNORECASE)


def _dotted(item: Mapping[str, Any], fields: tuple[str, ...]) -> Any:
    """The first field of ``item`` present (not None); ``a.b`` reads ``item["a"]["b"]``."""
    for name in fields:
        value: Any = item
        for part in name.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None:
            return value
    return None


def tool_call_list(value: Any) -> tuple[ToolCallPart, ...]:
    """A list of tool calls in whatever field names its writer chose (``Generic.CALL_*_FIELDS``): each
    item a mapping with a name, an optional id and optional arguments. Items without a name are left out."""
    decoded = loads(value)
    if isinstance(decoded, Mapping):
        decoded = [decoded]
    if not isinstance(decoded, list):
        return ()
    parts: list[ToolCallPart] = []
    for item in decoded:
        if not isinstance(item, Mapping):
            continue
        name = as_text(_dotted(item, Generic.CALL_NAME_FIELDS))
        if name is None:
            continue
        call_id = _dotted(item, Generic.CALL_ID_FIELDS)
        parts.append(ToolCallPart(name, as_text(call_id), decode_arguments(_dotted(item, Generic.CALL_ARGS_FIELDS))))
    return tuple(parts)


def generic_output(v: SpanView) -> Messages | None:
    """A model span's answer from generic evidence: the text of a ``…response.text``-like key and the
    calls of a ``…tool_calls``-like key, as one assistant message."""
    calls = first_matching(v.attrs, _GENERIC_TOOL_CALLS)
    text = as_text(first_matching(v.attrs, _GENERIC_OUTPUT_TEXT))
    parts: list[Part] = [TextPart(text)] if text else []
    parts.extend(tool_call_list(calls) if calls is not None else ())
    return (Message("assistant", tuple(parts)),) if parts else None


# --------------------------------------------------------------------------- guards


def generic_span(v: SpanView) -> bool:
    return v.generic


def python_call_wrapper(v: SpanView) -> bool:
    return v.span.scope_name in PythonCallWrappers.SCOPES


def dspy_span(v: SpanView) -> bool:
    return v.span.scope_name == DSPy.SCOPE


def dspy_root(v: SpanView) -> bool:
    return v.span.scope_name == DSPy.SCOPE and v.span.parent_span_id is None


def llama_index_span(v: SpanView) -> bool:
    return v.span.scope_name == LlamaIndex.SCOPE


def smolagents_span(v: SpanView) -> bool:
    return v.span.scope_name == Smolagents.SCOPE


def haystack_agent_component(v: SpanView) -> bool:
    return bool(v.attrs.get(Haystack.COMPONENT_TYPE) == Haystack.AGENT_COMPONENT)


def traceloop_tool(v: SpanView) -> bool:
    return v.attrs.get(Traceloop.SPAN_KIND) == Traceloop.KIND_TOOL


def traceloop_agent(v: SpanView) -> bool:
    return v.attrs.get(Traceloop.SPAN_KIND) in (Traceloop.KIND_AGENT, Traceloop.KIND_WORKFLOW)


def openinference_agent(v: SpanView) -> bool:
    return v.attrs.get(OpenInference.SPAN_KIND) == OpenInference.KIND_AGENT


def llm_span(v: SpanView) -> bool:
    return v.role is Role.LLM


def handoff_operation(v: SpanView) -> bool:
    return v.attrs.get(GenAI.OPERATION) == OpenAIAgents.HANDOFF_OP


# --------------------------------------------------------------------------- the table

F = Fact
GENAI, OI, OLLM = Convention.GENAI, Convention.OPENINFERENCE, Convention.OPENLLMETRY
GADK, PYD, STRANDS = Convention.ADK, Convention.PYDANTIC_AI, Convention.STRANDS
OAA, ANY, GENERIC = Convention.OPENAI_AGENTS, Convention.ANY, Convention.GENERIC
VAI, HAY, DSP = Convention.VERCEL_AI, Convention.HAYSTACK, Convention.DSPY
ATTR, SET, MERGED, KEY_MATCH = Read.ATTR, Read.ATTR_SET, Read.MERGED, Read.KEY_MATCH
NAME_AFTER, NAME, FUNCTION, EVENTS = Read.NAME_AFTER, Read.NAME, Read.FUNCTION, Read.EVENTS

ROWS: Final[tuple[Row, ...]] = (
    # ---- handoff target (tool spans): a handoff executes the model's `transfer_to_<agent>` call
    Row(F.HANDOFF_TARGET, OAA, ATTR, OpenAIAgents.HANDOFF_TO, as_text,
        "OTel contrib openai-agents-v2: `agent_handoff` span (§1.2, §4.4)", when=handoff_operation),
    Row(F.HANDOFF_TARGET, OAA, FUNCTION, "`output.value`, else the span name after `handoff to `", as_text,
        "OpenInference openai-agents: handoff TOOL span, `output.value` = target agent (§2)", reader=oi_handoff_target),
    # ---- tool name
    Row(F.TOOL_NAME, GENAI, SET, GenAI.TOOL_NAME, str, "semconv v1.31 execute_tool; required since v1.41 (§1.2)"),
    Row(F.TOOL_NAME, OI, SET, OpenInference.TOOL_NAME, str, "OpenInference TOOL span (§2)"),
    Row(F.TOOL_NAME, OLLM, ATTR, Traceloop.ENTITY_NAME, str, "OpenLLMetry `tool` entity (§3.1)", when=traceloop_tool),
    Row(F.TOOL_NAME, VAI, SET, VercelAI.TOOL_NAME, str, "Vercel AI SDK `ai.toolCall` span"),
    Row(F.TOOL_NAME, HAY, SET, Haystack.TOOL_NAME, str, "Haystack `haystack.agent.step.tool` span"),
    Row(F.TOOL_NAME, DSP, NAME, "the span name before `.__call__`", dspy_tool_name,
        "openinference-instrumentation-dspy names tool spans `<tool>.__call__` (no `tool.name`)", when=dspy_span),
    Row(F.TOOL_NAME, GENAI, NAME_AFTER, EXECUTE_TOOL_SPAN_PREFIX, None,
        "semconv span name `execute_tool {gen_ai.tool.name}` (§1.2)"),
    Row(F.TOOL_NAME, GENERIC, KEY_MATCH, Generic.TOOL_NAME_KEY, as_text, "generic evidence: a key naming a tool",
        when=generic_span),
    Row(F.TOOL_NAME, ANY, NAME, "the span name", None,
        "last resort (OpenInference names TOOL spans after the tool, §2)"),
    # ---- call id
    Row(F.CALL_ID, GENAI, SET, GenAI.TOOL_CALL_ID, call_id_text,
        "semconv v1.31; ADK `<not specified>` = none (§1.3, §4.1)"),
    Row(F.CALL_ID, OI, SET, OpenInference.TOOL_ID, call_id_text, "OpenInference `tool.id` (§2, ADK enrichment §4.1)"),
    Row(F.CALL_ID, OI, SET, OpenInference.TOOL_CALL_ID, call_id_text, "OpenInference `tool_call.id` (§2)"),
    Row(F.CALL_ID, VAI, SET, VercelAI.TOOL_ID, call_id_text, "Vercel AI SDK `ai.toolCall` span"),
    Row(F.CALL_ID, GENERIC, KEY_MATCH, Generic.TOOL_CALL_ID_KEY, call_id_text, "generic evidence: a call-id key",
        when=generic_span),
    Row(F.CALL_ID, STRANDS, EVENTS, "`gen_ai.tool.message` event: `id`", as_text,
        "strands legacy span events (§4.3)", tier=2),
    # ---- arguments
    Row(F.ARGUMENTS, OLLM, ATTR, GenAI.TOOL_CALL_ARGUMENTS, unwrap_traceloop_input,
        "OpenLLMetry LangChain writes its envelope here too (§3.2, §8.8)", when=traceloop_tool),
    Row(F.ARGUMENTS, GENAI, ATTR, GenAI.TOOL_CALL_ARGUMENTS, decode_arguments, "semconv v1.38, opt-in (§1.3)"),
    Row(F.ARGUMENTS, OI, FUNCTION, "`input.value` wrapper, positional arguments named by `tool.parameters`", None,
        "OpenInference on smolagents (CodeAgent passes positional arguments)", when=smolagents_span,
        reader=smolagents_arguments),
    Row(F.ARGUMENTS, OI, ATTR, OpenInference.INPUT_VALUE, unwrap_python_call,
        "OpenInference on LlamaIndex, smolagents, DSPy: the Python call wrapper `{kwargs: {…}}`",
        when=python_call_wrapper),
    Row(F.ARGUMENTS, OI, ATTR, OpenInference.INPUT_VALUE, oi_arguments, "OpenInference TOOL span input (§2)"),
    Row(F.ARGUMENTS, VAI, ATTR, VercelAI.TOOL_ARGS, decode_arguments, "Vercel AI SDK `ai.toolCall` span"),
    Row(F.ARGUMENTS, HAY, ATTR, Haystack.TOOL_INPUT, decode_arguments, "Haystack tool span"),
    Row(F.ARGUMENTS, PYD, ATTR, PydanticAI.TOOL_ARGUMENTS, decode_arguments,
        "pydantic-ai instrumentation v2 `running tool` (§4.2, §8.4)"),
    Row(F.ARGUMENTS, GADK, ATTR, ADK.TOOL_CALL_ARGS, decode_arguments, "ADK 1.x tool span (§4.1)"),
    Row(F.ARGUMENTS, OLLM, ATTR, Traceloop.ENTITY_INPUT, unwrap_traceloop_input,
        "OpenLLMetry `{args, kwargs}` / LangChain envelope (§3.1, §3.2)"),
    Row(F.ARGUMENTS, GENERIC, KEY_MATCH, Generic.TOOL_INPUT_KEY, decode_arguments,
        "generic evidence: an input / arguments key", when=generic_span),
    Row(F.ARGUMENTS, STRANDS, EVENTS, "`gen_ai.tool.message` event: `content`", decode_arguments,
        "strands legacy span events (§4.3)", tier=2),
    Row(F.ARGUMENTS, STRANDS, EVENTS, "operation-details event: `gen_ai.input.messages` `tool_call` part", None,
        "strands latest span events (§4.3, §8.6)", tier=2),
    # ---- result (then RESULT_UNWRAPPERS)
    Row(F.RESULT, OLLM, ATTR, GenAI.TOOL_CALL_RESULT, unwrap_traceloop_output,
        "OpenLLMetry LangChain writes its envelope here too (§3.2, §8.8)", when=traceloop_tool),
    Row(F.RESULT, GENAI, ATTR, GenAI.TOOL_CALL_RESULT, decode_result, "semconv v1.38, opt-in (§1.3)"),
    Row(F.RESULT, OI, ATTR, OpenInference.OUTPUT_VALUE, oi_result, "OpenInference TOOL span output (§2)"),
    Row(F.RESULT, VAI, ATTR, VercelAI.TOOL_RESULT, decode_result, "Vercel AI SDK `ai.toolCall` span"),
    Row(F.RESULT, HAY, ATTR, Haystack.TOOL_OUTPUT, decode_result, "Haystack tool span"),
    Row(F.RESULT, PYD, ATTR, PydanticAI.TOOL_RESPONSE, decode_result,
        "pydantic-ai instrumentation v2 `running tool` (§4.2, §8.4)"),
    Row(F.RESULT, GADK, ATTR, ADK.TOOL_RESPONSE, decode_result, "ADK 1.x tool span (§4.1)"),
    Row(F.RESULT, OLLM, ATTR, Traceloop.ENTITY_OUTPUT, unwrap_traceloop_output,
        "OpenLLMetry `{output, kwargs}` envelope (§3.1, §3.2)"),
    Row(F.RESULT, GENERIC, KEY_MATCH, Generic.TOOL_OUTPUT_KEY, decode_result,
        "generic evidence: an output / result key", when=generic_span),
    Row(F.RESULT, STRANDS, EVENTS, "`gen_ai.choice` event: `message`", decode_result,
        "strands legacy span events (§4.3)", tier=2),
    Row(F.RESULT, STRANDS, EVENTS, "operation-details event: `gen_ai.output.messages` `tool_call_response` part", None,
        "strands latest span events (§4.3)", tier=2),
    # ---- model input messages
    Row(F.INPUT_MESSAGES, GENAI, MERGED, GenAI.INPUT_MESSAGES, parse_messages,
        "semconv v1.37, on the span or its operation-details event (§1.3, §1.5)"),
    Row(F.INPUT_MESSAGES, OI, FUNCTION, "`llm.input_messages.<i>.message.*`", None, "OpenInference (§2)",
        tier=2, reader=oi_input_messages),
    Row(F.INPUT_MESSAGES, OLLM, FUNCTION, "`gen_ai.prompt.<i>.*`", None, "OpenLLMetry legacy LLM spans (§3.3, §8.10)",
        tier=3, reader=traceloop_prompt_messages),
    Row(F.INPUT_MESSAGES, GADK, ATTR, ADK.LLM_REQUEST, parse_messages, "ADK 1.x `call_llm` span (§4.1)", tier=4),
    Row(F.INPUT_MESSAGES, GENAI, FUNCTION,
        "events `gen_ai.{system,user,assistant,tool}.message`, `gen_ai.content.prompt`", None,
        "semconv v1.28–v1.36 events, v1.27 span events (§1.5)", tier=5, reader=event_input_messages),
    Row(F.INPUT_MESSAGES, OI, ATTR, OpenInference.INPUT_VALUE, oi_value_messages,
        "OpenInference LLM span: the request body (§2)", when=llm_span, tier=6),
    Row(F.INPUT_MESSAGES, VAI, ATTR, VercelAI.PROMPT_MESSAGES, parse_messages, "Vercel AI SDK model span", tier=7),
    Row(F.INPUT_MESSAGES, HAY, ATTR, Haystack.LLM_INPUT, haystack_messages, "Haystack model span `messages`", tier=7),
    # ---- model output messages
    Row(F.OUTPUT_MESSAGES, GENAI, MERGED, GenAI.OUTPUT_MESSAGES, parse_output_messages,
        "semconv v1.37, on the span or its operation-details event (§1.3, §1.5)"),
    Row(F.OUTPUT_MESSAGES, OI, FUNCTION, "`llm.output_messages.<i>.message.*`", None, "OpenInference (§2)",
        tier=2, reader=oi_output_messages),
    Row(F.OUTPUT_MESSAGES, OLLM, FUNCTION, "`gen_ai.completion.<i>.*`", None,
        "OpenLLMetry legacy LLM spans (§3.3, §8.10)", tier=3, reader=traceloop_completion_messages),
    Row(F.OUTPUT_MESSAGES, GADK, ATTR, ADK.LLM_RESPONSE, parse_output_messages,
        "ADK 1.x `call_llm` span (§4.1)", tier=4),
    Row(F.OUTPUT_MESSAGES, GENAI, FUNCTION, "events `gen_ai.choice`, `gen_ai.content.completion`", None,
        "semconv v1.28–v1.36 events, v1.27 span events (§1.5)", tier=5, reader=event_output_messages),
    Row(F.OUTPUT_MESSAGES, OI, ATTR, OpenInference.OUTPUT_VALUE, oi_value_output_messages,
        "OpenInference LLM span: the response body (§2)", when=llm_span, tier=6),
    Row(F.OUTPUT_MESSAGES, VAI, FUNCTION, "`ai.response.text` and `ai.response.toolCalls`", None,
        "Vercel AI SDK model and root spans", tier=7, reader=vercel_output),
    Row(F.OUTPUT_MESSAGES, HAY, ATTR, Haystack.LLM_OUTPUT, parse_output_messages, "Haystack model span `replies`",
        tier=7),
    Row(F.OUTPUT_MESSAGES, GENERIC, FUNCTION, "a `…response.text` key and a `…tool_calls` list", None,
        "generic evidence", when=generic_span, tier=7, reader=generic_output),
    # ---- tools offered to the model
    Row(F.TOOLS_OFFERED, GENAI, MERGED, GenAI.TOOL_DEFINITIONS, genai_tool_definitions,
        "semconv v1.38, on the span or its operation-details event (§1.3)"),
    Row(F.TOOLS_OFFERED, OI, FUNCTION, "`llm.tools.<i>.tool.json_schema`", None, "OpenInference (§2)",
        tier=2, reader=oi_tools),
    Row(F.TOOLS_OFFERED, OLLM, FUNCTION, "`llm.request.functions.<i>.*`", None, "OpenLLMetry legacy LLM spans (§3.3)",
        tier=3, reader=traceloop_functions),
    Row(F.TOOLS_OFFERED, PYD, ATTR, PydanticAI.MODEL_REQUEST_PARAMETERS, pydantic_function_tools,
        "pydantic-ai model span `function_tools` (§4.2)", tier=4),
    Row(F.TOOLS_OFFERED, GADK, ATTR, ADK.LLM_REQUEST, adk_request_tools, "ADK 1.x `config.tools` (§4.1)", tier=5),
    Row(F.TOOLS_OFFERED, STRANDS, ATTR, Strands.AGENT_TOOLS, strands_agent_tools, "strands agent span (§4.3)", tier=6),
    Row(F.TOOLS_OFFERED, VAI, ATTR, VercelAI.PROMPT_TOOLS, vercel_tools, "Vercel AI SDK model span", tier=7),
    Row(F.TOOLS_OFFERED, HAY, ATTR, Haystack.AGENT_TOOLS, haystack_tools,
        "Haystack agent span (a plain tag: also without content)", tier=7),
    Row(F.TOOLS_OFFERED, HAY, ATTR, Haystack.LLM_INPUT, haystack_tools, "Haystack model span `tools`", tier=8),
    Row(F.TOOLS_OFFERED, OI, ATTR, Smolagents.TOOLS_NAMES, smolagents_tool_names,
        "smolagents agent span: the tools' names (also without content)", tier=9),
    Row(F.TOOLS_OFFERED, OI, ATTR, OpenInference.INVOCATION_PARAMETERS, invocation_tools,
        "OpenInference request parameters' `tools` (LangChain.js: kept when inputs are hidden)", tier=9),
    # ---- model and provider
    Row(F.MODEL, GENAI, SET, GenAI.RESPONSE_MODEL, as_text, "semconv (§1.3)"),
    Row(F.MODEL, GENAI, SET, GenAI.REQUEST_MODEL, as_text, "semconv (§1.3); OpenLLMetry too (§3.3)"),
    Row(F.MODEL, OI, SET, OpenInference.MODEL_NAME, as_text, "OpenInference (§2)"),
    Row(F.MODEL, PYD, SET, PydanticAI.MODEL_NAME, as_text, "pydantic-ai agent span (§4.2)"),
    Row(F.MODEL, VAI, SET, VercelAI.RESPONSE_MODEL, as_text, "Vercel AI SDK model span"),
    Row(F.MODEL, VAI, SET, VercelAI.MODEL_ID, as_text, "Vercel AI SDK"),
    Row(F.MODEL, HAY, FUNCTION, "`replies[0].meta.model` of the model output", None, "Haystack model span",
        reader=haystack_model),
    Row(F.MODEL, GENERIC, KEY_MATCH, Generic.MODEL_KEY, as_text, "generic evidence: a model key", when=generic_span),
    Row(F.PROVIDER, GENAI, SET, GenAI.PROVIDER, as_text, "semconv v1.37 (§1.3)"),
    Row(F.PROVIDER, GENAI, SET, GenAI.SYSTEM, as_text, "semconv ≤ v1.36, deprecated since v1.37; OpenLLMetry (§1.3)"),
    Row(F.PROVIDER, OI, SET, OpenInference.PROVIDER, as_text, "OpenInference (§2)"),
    Row(F.PROVIDER, OI, SET, OpenInference.SYSTEM, as_text, "OpenInference (§2)"),
    Row(F.PROVIDER, VAI, SET, VercelAI.MODEL_PROVIDER, as_text, "Vercel AI SDK"),
    # ---- token usage
    Row(F.INPUT_TOKENS, GENAI, SET, GenAI.USAGE_INPUT, as_count, "semconv (§1.3)"),
    Row(F.INPUT_TOKENS, GENAI, SET, GenAI.USAGE_PROMPT_OLD, as_count,
        "old name: OpenLLMetry legacy, strands (§3.3, §4.3)"),
    Row(F.INPUT_TOKENS, OI, SET, OpenInference.TOKENS_PROMPT, as_count, "OpenInference (§2)"),
    Row(F.INPUT_TOKENS, VAI, SET, VercelAI.USAGE_INPUT, as_count, "Vercel AI SDK ai 5 streamText, ai 6, ai 7"),
    Row(F.INPUT_TOKENS, VAI, SET, VercelAI.USAGE_PROMPT, as_count, "Vercel AI SDK ai 5 generateText"),
    Row(F.INPUT_TOKENS, HAY, FUNCTION, "`replies[0].meta.usage.prompt_tokens`", None, "Haystack model span",
        reader=haystack_input_tokens),
    Row(F.OUTPUT_TOKENS, GENAI, SET, GenAI.USAGE_OUTPUT, as_count, "semconv (§1.3)"),
    Row(F.OUTPUT_TOKENS, GENAI, SET, GenAI.USAGE_COMPLETION_OLD, as_count,
        "old name: OpenLLMetry legacy, strands (§3.3, §4.3)"),
    Row(F.OUTPUT_TOKENS, OI, SET, OpenInference.TOKENS_COMPLETION, as_count, "OpenInference (§2)"),
    Row(F.OUTPUT_TOKENS, VAI, SET, VercelAI.USAGE_OUTPUT, as_count, "Vercel AI SDK ai 5 streamText, ai 6, ai 7"),
    Row(F.OUTPUT_TOKENS, VAI, SET, VercelAI.USAGE_COMPLETION, as_count, "Vercel AI SDK ai 5 generateText"),
    Row(F.OUTPUT_TOKENS, HAY, FUNCTION, "`replies[0].meta.usage.completion_tokens`", None, "Haystack model span",
        reader=haystack_output_tokens),
    Row(F.CACHE_READ_TOKENS, GENAI, SET, GenAI.USAGE_CACHE_READ, as_count, "semconv (§1.3)"),
    Row(F.CACHE_READ_TOKENS, GENAI, SET, GenAI.USAGE_CACHE_READ_ALT, as_count, "strands (§4.3)"),
    Row(F.CACHE_READ_TOKENS, OI, SET, OpenInference.TOKENS_CACHE_READ, as_count, "OpenInference (§2)"),
    Row(F.CACHE_READ_TOKENS, VAI, SET, VercelAI.USAGE_CACHE_READ, as_count, "Vercel AI SDK ai 6, ai 7"),
    Row(F.CACHE_READ_TOKENS, VAI, SET, VercelAI.USAGE_CACHED_INPUT, as_count, "Vercel AI SDK ai 5"),
    Row(F.CACHE_CREATION_TOKENS, GENAI, SET, GenAI.USAGE_CACHE_CREATION, as_count, "semconv (§1.3)"),
    Row(F.CACHE_CREATION_TOKENS, GENAI, SET, GenAI.USAGE_CACHE_CREATION_ALT, as_count, "Anthropic-style name"),
    Row(F.CACHE_CREATION_TOKENS, OI, SET, OpenInference.TOKENS_CACHE_WRITE, as_count, "OpenInference (§2)"),
    # ---- agent spans: input and answer when the model rows gave none
    Row(F.AGENT_INPUT, PYD, ATTR, PydanticAI.ALL_MESSAGES, parse_messages, "pydantic-ai agent span (§4.2)"),
    Row(F.AGENT_INPUT, VAI, ATTR, VercelAI.PROMPT, vercel_prompt, "Vercel AI SDK root span `ai.prompt`"),
    Row(F.AGENT_INPUT, HAY, ATTR, Haystack.AGENT_INPUT, haystack_messages, "Haystack agent span"),
    Row(F.AGENT_INPUT, HAY, ATTR, Haystack.COMPONENT_INPUT, haystack_messages, "Haystack Agent component span",
        when=haystack_agent_component),
    Row(F.AGENT_INPUT, OI, ATTR, OpenInference.INPUT_VALUE, smolagents_task, "smolagents agent span `{task: …}`",
        when=smolagents_span),
    Row(F.AGENT_INPUT, DSP, ATTR, OpenInference.INPUT_VALUE, dspy_input, "DSPy module `{input_args: {…}}`",
        when=dspy_span),
    Row(F.AGENT_INPUT, OI, ATTR, OpenInference.INPUT_VALUE, oi_value_messages,
        "OpenInference AGENT / CHAIN input (§2, §7)"),
    Row(F.AGENT_INPUT, OLLM, ATTR, Traceloop.ENTITY_INPUT, traceloop_input_messages,
        "OpenLLMetry workflow / agent input (§3.1, §7)"),
    Row(F.FINAL_TEXT, PYD, ATTR, PydanticAI.FINAL_RESULT, final_result_text, "pydantic-ai agent span (§4.2)"),
    Row(F.FINAL_TEXT, ANY, FUNCTION, "the output_messages rows above", assistant_text, "§7 final answer",
        reader=output_messages_if_any),
    Row(F.FINAL_TEXT, OI, ATTR, OpenInference.OUTPUT_VALUE, smolagents_output,
        "smolagents agent span: the answer, or the last `FinalAnswerStep` of a streamed run", when=smolagents_span),
    Row(F.FINAL_TEXT, OI, ATTR, OpenInference.OUTPUT_VALUE, not_an_object_repr,
        "LlamaIndex: a `StopEvent(…)` repr (cut short) is no answer", when=llama_index_span),
    Row(F.FINAL_TEXT, DSP, ATTR, OpenInference.OUTPUT_VALUE, dspy_prediction, "DSPy module output: a Prediction",
        when=dspy_span),
    Row(F.FINAL_TEXT, OI, ATTR, OpenInference.OUTPUT_VALUE, oi_text, "OpenInference AGENT / CHAIN output (§2)"),
    Row(F.FINAL_TEXT, HAY, ATTR, Haystack.AGENT_OUTPUT, text_from_value, "Haystack agent span `messages`"),
    Row(F.FINAL_TEXT, HAY, ATTR, Haystack.COMPONENT_OUTPUT, text_from_value, "Haystack Agent component span",
        when=haystack_agent_component),
    Row(F.FINAL_TEXT, OLLM, ATTR, Traceloop.ENTITY_OUTPUT, traceloop_output_text,
        "OpenLLMetry workflow / agent output (§3.1)"),
    Row(F.AGENT_INPUT_TOKENS, PYD, ATTR, PydanticAI.AGGREGATED_INPUT, as_count, "pydantic-ai agent span (§4.2)"),
    Row(F.AGENT_OUTPUT_TOKENS, PYD, ATTR, PydanticAI.AGGREGATED_OUTPUT, as_count, "pydantic-ai agent span (§4.2)"),
    # ---- agent name
    Row(F.AGENT_NAME, GENAI, SET, GenAI.AGENT_NAME, as_text, "semconv v1.31 (§1.3)"),
    Row(F.AGENT_NAME, VAI, SET, VercelAI.FUNCTION_ID, as_text,
        "Vercel AI SDK `ai.telemetry.functionId`: the only agent name it records"),
    Row(F.AGENT_NAME, OI, SET, OpenInference.AGENT_NAME, as_text, "OpenInference (§2)"),
    Row(F.AGENT_NAME, OI, NAME, "the span name before `.run`", smolagents_agent_name,
        "smolagents agent span `<name>.run` (no agent-name attribute)", when=smolagents_span),
    Row(F.AGENT_NAME, OI, ATTR, OpenInference.INPUT_VALUE, llama_index_agent_name,
        "LlamaIndex `parse_agent_output` input: `current_agent_name` in the `AgentOutput` repr", when=llama_index_span),
    Row(F.AGENT_NAME, HAY, SET, Haystack.COMPONENT_NAME, as_text, "Haystack Agent component span (in a pipeline)",
        when=haystack_agent_component),
    Row(F.AGENT_NAME, PYD, SET, PydanticAI.AGENT_NAME, as_text, "pydantic-ai agent span (§4.2)"),
    Row(F.AGENT_NAME, OLLM, ATTR, Traceloop.ENTITY_NAME, as_text, "OpenLLMetry `agent` / `workflow` entity (§3.1)",
        when=traceloop_agent),
    Row(F.AGENT_NAME, GENAI, NAME_AFTER, INVOKE_AGENT_SPAN_PREFIX, as_text,
        "semconv span name `invoke_agent {gen_ai.agent.name}` (§1.2)"),
    Row(F.AGENT_NAME, OI, SET, OpenInference.GRAPH_NODE_NAME, as_text, "OpenInference AGENT span (§2)",
        when=openinference_agent),
    Row(F.AGENT_NAME, OI, SET, OpenInference.GRAPH_NODE_ID, as_text, "OpenInference AGENT span (§2)",
        when=openinference_agent),
    Row(F.AGENT_NAME, DSP, FUNCTION, "the root span name before `.forward` (weak)", as_text,
        "DSPy program class (a module has no name)", when=dspy_root, reader=dspy_module_name),
    Row(F.AGENT_NAME, OI, FUNCTION, "the span name (weak)", as_text,
        "OpenInference AGENT span named after the run (§2, §8.12)", when=openinference_agent, reader=weak_span_name),
    Row(F.AGENT_NAME, OI, ATTR, OpenInference.METADATA, langchain_agent_name,
        "LangChain.js `createAgent` name: `lc_agent_name` in OpenInference `metadata` (on the root CHAIN span)",
        tier=2),
    Row(F.SPAN_AGENT_NAME, GENAI, SET, GenAI.AGENT_NAME, as_text,
        "semconv; ADK and pydantic-ai put it on tool spans (§1.2)"),
    Row(F.SPAN_AGENT_NAME, PYD, SET, PydanticAI.AGENT_NAME, as_text, "pydantic-ai (§4.2)"),
    # ---- conversation
    Row(F.CONVERSATION_ID, GENAI, SET, GenAI.CONVERSATION_ID, as_text, "semconv v1.34 (§1.3, §8.15)"),
    Row(F.CONVERSATION_ID, OI, SET, OpenInference.SESSION_ID, as_text, "OpenInference `session.id` (§2)"),
    Row(F.CONVERSATION_ID, GADK, SET, ADK.SESSION_ID, as_text, "ADK 1.x (§4.1)"),
    *(
        Row(F.CONVERSATION_ID, OLLM, ATTR, Traceloop.ASSOCIATION_PREFIX + key, as_text,
            "OpenLLMetry association properties (§3.1)", tier=2 + i)
        for i, key in enumerate(Traceloop.SESSION_KEYS)
    ),
)  # fmt: skip

RULES: Final[tuple[Rule, ...]] = (
    # ---- role, first rule that holds (else Role.OTHER)
    Rule(F.ROLE, Role.SYNTHETIC, GADK, name_starts(ADK.MERGED_SPAN_PREFIX),
         "ADK 1.x merged parallel-tools span (§4.1)"),
    Rule(F.ROLE, Role.SYNTHETIC, GADK, value_in(GenAI.TOOL_NAME, *ADK.MERGED_TOOL_NAMES),
         "ADK 1.x merged parallel-tools span (§4.1)"),
    Rule(F.ROLE, Role.TOOL, GENAI, text_in(GenAI.OPERATION, Op.EXECUTE_TOOL), "semconv v1.31 execute_tool (§1.2)"),
    Rule(F.ROLE, Role.TOOL, OAA, text_in(GenAI.OPERATION, OpenAIAgents.HANDOFF_OP),
         "OTel contrib openai-agents-v2 handoff (§1.2, §4.4)"),
    Rule(F.ROLE, Role.AGENT, GENAI, text_in(GenAI.OPERATION, Op.INVOKE_AGENT), "semconv v1.33 invoke_agent (§1.2)"),
    Rule(F.ROLE, Role.WORKFLOW, GENAI, text_in(GenAI.OPERATION, Op.INVOKE_WORKFLOW),
         "semconv v1.41 invoke_workflow (§1.2)"),
    Rule(F.ROLE, Role.LLM, GENAI, text_in(GenAI.OPERATION, Op.CHAT, Op.GENERATE_CONTENT, Op.TEXT_COMPLETION),
         "semconv inference span (§1.2)"),
    Rule(F.ROLE, Role.LLM, OAA, text_in(GenAI.OPERATION, Op.RESPONSE),
         "OTel contrib openai-agents-v2 ResponseSpan (§1.2)"),
    Rule(F.ROLE, Role.TOOL, VAI, value_in(VercelAI.OPERATION_ID, VercelAI.TOOL_OP), "Vercel AI SDK `ai.toolCall`"),
    Rule(F.ROLE, Role.AGENT, VAI, value_in(VercelAI.OPERATION_ID, *VercelAI.AGENT_OPS),
         "Vercel AI SDK `ai.generateText` / `ai.streamText` (…Object): the run"),
    Rule(F.ROLE, Role.LLM, VAI, value_in(VercelAI.OPERATION_ID, *VercelAI.MODEL_OPS),
         "Vercel AI SDK `….doGenerate` / `….doStream`: one model call"),
    Rule(F.ROLE, Role.OTHER, OI, name_ends(LlamaIndex.NO_MODEL_CALL_SUFFIX),
         "LlamaIndex: an LLM span that prepares a request and calls no model", also=scope_is(LlamaIndex.SCOPE)),
    Rule(F.ROLE, Role.AGENT, OI, name_ends(LlamaIndex.AGENT_STEP_SUFFIX),
         "LlamaIndex: the agent step that names the agent (a span of the same run)", also=scope_is(LlamaIndex.SCOPE)),
    Rule(F.ROLE, Role.TOOL, OI, text_in(OpenInference.SPAN_KIND, OpenInference.KIND_TOOL), "OpenInference (§2)"),
    Rule(F.ROLE, Role.AGENT, OI, text_in(OpenInference.SPAN_KIND, OpenInference.KIND_AGENT), "OpenInference (§2)"),
    Rule(F.ROLE, Role.LLM, OI, text_in(OpenInference.SPAN_KIND, OpenInference.KIND_LLM), "OpenInference (§2)"),
    Rule(F.ROLE, Role.WORKFLOW, OI, text_in(OpenInference.SPAN_KIND, OpenInference.KIND_CHAIN),
         "OpenInference: the root chain of a LangChain / LangGraph trace holds the whole run (§2, §7)", also=ROOT),
    Rule(F.ROLE, Role.TOOL, OLLM, value_in(Traceloop.SPAN_KIND, Traceloop.KIND_TOOL), "OpenLLMetry (§3.1)"),
    Rule(F.ROLE, Role.AGENT, OLLM, value_in(Traceloop.SPAN_KIND, Traceloop.KIND_AGENT), "OpenLLMetry (§3.1)"),
    Rule(F.ROLE, Role.WORKFLOW, OLLM, value_in(Traceloop.SPAN_KIND, Traceloop.KIND_WORKFLOW), "OpenLLMetry (§3.1)"),
    Rule(F.ROLE, Role.TOOL, GENAI, name_starts(EXECUTE_TOOL_SPAN_PREFIX), "semconv span name (§0.3, §1.2)"),
    Rule(F.ROLE, Role.AGENT, HAY, name_is(Haystack.AGENT_RUN_SPAN), "Haystack agent run"),
    Rule(F.ROLE, Role.LLM, HAY, name_is(Haystack.LLM_SPAN), "Haystack agent step: the model call"),
    Rule(F.ROLE, Role.TOOL, HAY, name_is(Haystack.TOOL_SPAN), "Haystack agent step: one tool call"),
    Rule(F.ROLE, Role.AGENT, HAY, value_in(Haystack.COMPONENT_TYPE, Haystack.AGENT_COMPONENT),
         "Haystack Agent run as a pipeline component (names the agent)"),
    Rule(F.ROLE, Role.TOOL, PYD, name_is(PydanticAI.RUNNING_TOOL_SPAN), "pydantic-ai instrumentation v2 (§4.2)"),
    Rule(F.ROLE, Role.TOOL, PYD, is_text(GenAI.TOOL_NAME),
         "pydantic-ai ≤ 1.x `running tool`: a tool name and no operation (§0.3, §8.4)", also=no_text(GenAI.OPERATION)),
    Rule(F.ROLE, Role.AGENT, PYD, name_is(PydanticAI.AGENT_RUN_SPAN), "pydantic-ai instrumentation v2 (§4.2)"),
    Rule(F.ROLE, Role.AGENT, GENAI, name_starts(INVOKE_AGENT_SPAN_PREFIX), "semconv span name (§1.2)"),
    Rule(F.ROLE, Role.WORKFLOW, GADK, name_is(ADK.INVOCATION_SPAN), "ADK 1.x root span (§4.1)",
         also=scope_is(ADK.SCOPE)),
    Rule(F.ROLE, Role.LLM, GADK, name_is(ADK.CALL_LLM_SPAN), "ADK 1.x model span (§4.1)"),
    Rule(F.ROLE, Role.LLM, GADK, has(ADK.LLM_REQUEST), "ADK 1.x model span (§4.1)"),
    Rule(F.ROLE, Role.LLM, OLLM, has(Traceloop.REQUEST_TYPE), "OpenLLMetry legacy LLM span (§3.3)"),
    Rule(F.ROLE, Role.LLM, OLLM, has_prefix(Traceloop.PROMPT_PREFIX), "OpenLLMetry legacy LLM span (§3.3)"),
    Rule(F.ROLE, Role.LLM, GENAI, has(GenAI.REQUEST_MODEL), "an operation with a model: custom inference op (§1.2)",
         also=has_text(GenAI.OPERATION)),
    Rule(F.ROLE, Role.LLM, GENAI, has(GenAI.INPUT_MESSAGES), "an operation with messages: custom inference op (§1.2)",
         also=has_text(GenAI.OPERATION)),
    # ---- tool kind (default "function")
    Rule(F.TOOL_KIND, "mcp", GENAI, text_in(GenAI.TOOL_TYPE, *MCP.TOOL_TYPES),
         "`gen_ai.tool.type` of MCP tools (ADK `McpTool`, §1.3, §8.5)"),
    Rule(F.TOOL_KIND, "mcp", Convention.MCP, has(MCP.METHOD), "MCP semconv `mcp.method.name`"),
    Rule(F.TOOL_KIND, "agent", GENAI, text_in(GenAI.TOOL_TYPE, *AgentToolTypes.VALUES),
         "`gen_ai.tool.type` of agent tools (ADK `AgentTool`, §4.1, §8.5)"),
    # ---- a failed tool whose status and events do not say so (status ERROR, `error.type` and an `exception`
    # event always do)
    Rule(F.TOOL_FAILED, True, STRANDS, value_in(Strands.TOOL_STATUS, "error"), "strands `gen_ai.tool.status` (§4.3)"),
    Rule(F.TOOL_FAILED, True, PYD, has(PydanticAI.TOOL_FAILURE_STAGE), "pydantic-ai tool failure stage (§4.2)"),
    Rule(F.TOOL_FAILED, True, OLLM, value_in(Traceloop.TASK_STATUS, "failure"), "OpenLLMetry task status (§3.1)"),
    Rule(F.TOOL_FAILED, True, HAY, is_true(Haystack.TOOL_ERROR), "Haystack `haystack.tool.error` (status stays unset)"),
    Rule(F.TOOL_SUCCEEDED, True, VAI, value_in(VercelAI.OPERATION_ID, VercelAI.TOOL_OP),
         "Vercel AI SDK records an `exception` event on every tool that throws; openinference-vercel 2.8 marks every "
         "span that ends after a failure ERROR", also=no_event(Events.EXCEPTION)),
    # ---- generic evidence: read only from spans in which no known convention's key or scope is seen
    Rule(F.ROLE, Role.TOOL, GENERIC, key_matches(Generic.TOOL_NAME_KEY),
         "generic: a key naming a tool, and an input or output key", also=key_matches(Generic.TOOL_IO_KEY)),
    Rule(F.ROLE, Role.LLM, GENERIC, key_matches(Generic.TOOL_CALLS_KEY), "generic: a list of tool calls"),
    Rule(F.ROLE, Role.LLM, GENERIC, key_matches(Generic.MODEL_KEY), "generic: a model key and a response-text key",
         also=key_matches(Generic.OUTPUT_TEXT_KEY)),
)  # fmt: skip

KNOWN_RULES: Final = tuple(r for r in RULES if r.convention is not Convention.GENERIC)
"""The rules of the known conventions; :data:`GENERIC_RULES` are read only where none of them holds."""
GENERIC_RULES: Final = tuple(r for r in RULES if r.convention is Convention.GENERIC)

ROLE_DEFAULT: Final = Role.OTHER
TOOL_KIND_DEFAULT: Final = "function"

# --------------------------------------------------------------------------- which conventions a span speaks

CONVENTION_KEY_PREFIXES: Final[tuple[tuple[str, Convention], ...]] = (
    ("gen_ai.", GENAI),
    ("openinference.", OI),
    ("llm.", OI),
    ("input.value", OI),
    ("output.value", OI),
    ("tool.", OI),
    ("traceloop.", OLLM),
    ("gcp.vertex.agent.", GADK),
    ("pydantic_ai.", PYD),
    ("logfire.", PYD),
    (VercelAI.KEY_PREFIX, VAI),
    (Haystack.KEY_PREFIX, HAY),
)
"""An attribute key starting with the prefix shows the convention (the first prefix that matches)."""
CONVENTION_KEYS: Final[Mapping[str, Convention]] = {
    PydanticAI.TOOL_ARGUMENTS: PYD,
    PydanticAI.FINAL_RESULT: PYD,
}
"""Attribute keys that show a convention by themselves."""
CONVENTION_SCOPES: Final[tuple[tuple[str, Convention], ...]] = (
    ("strands", STRANDS),
    (ADK.SCOPE, GADK),
    ("pydantic-ai", PYD),
    (Haystack.SCOPE, HAY),
    (DSPy.SCOPE, DSP),
)
"""An instrumentation scope name starting with the prefix shows the convention."""

# --------------------------------------------------------------------------- the interpreter
#
# Each fact's rows (rules) are compiled once, at import, into one reader function that reads them in
# table order: the normalize path is hot, so a tier of plain attribute rows runs as one loop.

_NOT_PRESENT: Final = object()
Tier: TypeAlias = Callable[[SpanView], Any]
"""A compiled tier: its answer on a span, or ``_NOT_PRESENT`` when none of its rows is present."""


class FactReader(Protocol):
    """A fact's compiled rows: ``reader(view, missing)`` is the fact's value on the span, or ``missing``
    when none of its rows is present (see :func:`fact_reader`)."""

    def __call__(self, v: SpanView, missing: Any = None, /) -> Any: ...


FactClassifier: TypeAlias = Callable[[SpanRecord], Any]
"""A fact's compiled rules: the value of the first rule that holds on a span, else the default."""


def _tiers(fact: Fact, rows: tuple[Row, ...]) -> list[list[Row]]:
    """The fact's rows by tier, up to the first tier read from span events (the caller's own pass)."""
    by_tier: dict[int, list[Row]] = {}
    for row in rows:
        if row.fact is fact:
            by_tier.setdefault(row.tier, []).append(row)
    out: list[list[Row]] = []
    for t in sorted(by_tier):
        if any(r.read is Read.EVENTS for r in by_tier[t]):
            break
        out.append(by_tier[t])
    return out


def _plain(rows: list[Row]) -> tuple[tuple[str, bool, Decoder | None], ...] | None:
    """A tier of attribute rows without guards as ``(key, non-empty only, decoder)``; else None."""
    if all(r.read in (Read.ATTR, Read.ATTR_SET) and r.when is None for r in rows):
        return tuple((r.key, r.read is Read.ATTR_SET, r.decode) for r in rows)
    return None


def _tier(rows: list[Row]) -> Tier:
    for row in rows:
        if (row.read is Read.FUNCTION) != (row.reader is not None):
            raise ValueError(f"{row.fact}: a {row.read} row cannot have reader {row.reader}")
    plain = _plain(rows)
    if plain is not None:

        def attributes(v: SpanView) -> Any:
            a = v.attrs
            for key, set_only, decode in plain:
                raw = a.get(key)
                if raw is None or (set_only and raw == ""):
                    continue
                return raw if decode is None else decode(raw)
            return _NOT_PRESENT

        return attributes
    only = rows[0]
    if len(rows) == 1 and only.when is None and only.read in (Read.MERGED, Read.FUNCTION):
        key, decode, reader = only.key, only.decode, only.reader

        def single(v: SpanView) -> Any:  # one row: the model-message and tool-definition tiers
            raw = v.merged.get(key) if reader is None else reader(v)
            if raw is None:
                return _NOT_PRESENT
            return raw if decode is None else decode(raw)

        return single
    steps = tuple((r.read, r.key, r.decode, r.when, r.reader) for r in rows)
    patterns = {r.key: re.compile(r.key, re.IGNORECASE) for r in rows if r.read is Read.KEY_MATCH}

    def tier(v: SpanView) -> Any:
        a = v.attrs
        for read, key, decode, when, reader in steps:
            if when is not None and not when(v):
                continue
            if read is _KEY_MATCH:
                raw = first_matching(a, patterns[key])
                if raw is None:
                    continue
            elif read is _ATTR:
                raw = a.get(key)
                if raw is None:
                    continue
            elif read is _SET:
                raw = a.get(key)
                if raw is None or raw == "":
                    continue
            elif read is _MERGED:
                raw = v.merged.get(key)
                if raw is None:
                    continue
            elif read is _NAME_AFTER:
                name = v.span.name
                if not name.startswith(key):
                    continue
                raw = name[len(key) :]
            elif read is _NAME:
                raw = v.span.name
            else:  # FUNCTION
                raw = reader(v)  # type: ignore[misc]  # checked above
                if raw is None:
                    continue
            return raw if decode is None else decode(raw)
        return _NOT_PRESENT

    return tier


_ATTR, _SET, _MERGED, _NAME_AFTER, _NAME, _KEY_MATCH = ATTR, SET, MERGED, NAME_AFTER, NAME, Read.KEY_MATCH


def first_matching(attrs: Mapping[str, Any], pattern: re.Pattern[str]) -> Any:
    """The value of the first attribute (in the span's order) whose key matches ``pattern`` and is not None."""
    for key, value in attrs.items():
        if value is not None and pattern.search(key):
            return value
    return None


def fact_reader(fact: Fact, rows: tuple[Row, ...] = ROWS) -> FactReader:
    """The fact's rows compiled: in each tier the first present row decides; the first tier that
    yields something (not None, not ABSENT) gives the value, else the last empty answer, else
    ``missing`` when no row was present. ``EVENTS`` rows are left to the caller."""
    tiers = _tiers(fact, rows)
    plain = _plain(tiers[0]) if len(tiers) == 1 else None
    if plain is not None:  # the common case in one loop: model, provider, usage, call id…

        def read_attributes(v: SpanView, missing: Any = None) -> Any:
            a = v.attrs
            for key, set_only, decode in plain:
                raw = a.get(key)
                if raw is None or (set_only and raw == ""):
                    continue
                return raw if decode is None else decode(raw)
            return missing

        return read_attributes
    compiled = tuple(_tier(rows) for rows in tiers)

    def read(v: SpanView, missing: Any = None) -> Any:
        value = missing
        for tier in compiled:
            got = tier(v)
            if got is _NOT_PRESENT:
                continue
            if got is not None and got is not ABSENT:
                return got
            value = got
        return value

    return read


Step: TypeAlias = Callable[[SpanRecord, Mapping[str, Any]], Any]
"""A compiled rule step: the value it gives on a span, or None when it does not hold."""


def _holds(test: Condition) -> Callable[[SpanRecord, Mapping[str, Any]], bool]:
    check, key, values = test.check, test.key, test.values
    if check is Check.TEXT_IN:
        return lambda span, a: as_text(a.get(key)) in values
    if check is Check.VALUE_IN:
        return lambda span, a: isinstance(a.get(key), str) and a.get(key) in values
    if check is Check.IS_TEXT:
        return lambda span, a: isinstance(a.get(key), str)
    if check is Check.NO_TEXT:
        return lambda span, a: as_text(a.get(key)) is None
    if check is Check.HAS_TEXT:
        return lambda span, a: as_text(a.get(key)) is not None
    if check is Check.HAS:
        return lambda span, a: key in a
    if check is Check.HAS_PREFIX:
        return lambda span, a: any(k.startswith(key) for k in a)
    if check is Check.NO_EVENT:
        return lambda span, a: all(ev.name != key for ev in span.events)
    if check is Check.KEY_MATCHES:
        pattern = re.compile(key, re.IGNORECASE)
        return lambda span, a: any(pattern.search(k) for k in a)
    if check is Check.IS_TRUE:
        return lambda span, a: a.get(key) is True or (isinstance(a.get(key), str) and a[key].strip().lower() == "true")
    if check is Check.NAME_IS:
        return lambda span, a: span.name == key
    if check is Check.NAME_STARTS:
        return lambda span, a: span.name.startswith(key)
    if check is Check.NAME_ENDS:
        return lambda span, a: span.name.endswith(key)
    if check is Check.SCOPE_IS:
        return lambda span, a: span.scope_name == key
    if check is Check.ROOT:
        return lambda span, a: span.parent_span_id is None
    raise AssertionError(check)


def _map_step(check: Check, key: str, table: dict[str, tuple[Any, Condition | None]]) -> Step:
    """Consecutive ``TEXT_IN`` (``VALUE_IN``) rules on one key as one dictionary lookup: their values
    are disjoint, so at most one of them holds."""
    hits: dict[str | None, tuple[Any, Callable[[SpanRecord, Mapping[str, Any]], bool] | None]] = {
        value: (result, None if also is None else _holds(also)) for value, (result, also) in table.items()
    }
    text = check is Check.TEXT_IN

    def lookup_value(span: SpanRecord, a: Mapping[str, Any]) -> Any:
        raw = a.get(key)
        hit = hits.get(as_text(raw) if text else raw if isinstance(raw, str) else None)
        if hit is None:
            return None
        result, also = hit
        return result if also is None or also(span, a) else None

    return lookup_value


def _rule_step(rule: Rule) -> Step:
    value, key, check = rule.value, rule.test.key, rule.test.check
    if rule.also is None and check is Check.NAME_IS:
        return lambda span, a: value if span.name == key else None
    if rule.also is None and check is Check.NAME_STARTS:
        return lambda span, a: value if span.name.startswith(key) else None
    if rule.also is None and check is Check.HAS:
        return lambda span, a: value if key in a else None
    holds = _holds(rule.test)
    also = None if rule.also is None else _holds(rule.also)

    def step(span: SpanRecord, a: Mapping[str, Any]) -> Any:
        return value if holds(span, a) and (also is None or also(span, a)) else None

    return step


def fact_classifier(fact: Fact, default: Any, rules: tuple[Rule, ...] = RULES) -> FactClassifier:
    """The fact's rules compiled: the value of the first rule that holds (its ``also`` test too),
    else ``default``. Consecutive ``TEXT_IN`` (``VALUE_IN``) rules on one key run as one lookup."""
    steps: list[Step] = []
    group: tuple[Check, str, dict[str, tuple[Any, Condition | None]]] | None = None
    for rule in (r for r in rules if r.fact is fact):
        if rule.value is None:
            raise ValueError(f"{fact}: a rule cannot give None")
        test = rule.test
        if test.check in (Check.TEXT_IN, Check.VALUE_IN):
            if group is None or group[:2] != (test.check, test.key):
                if group is not None:
                    steps.append(_map_step(*group))
                group = (test.check, test.key, {})
            for value in test.values:
                if value in group[2]:
                    raise ValueError(f"{fact}: {test.key} = {value!r} in two consecutive rules")
                group[2][value] = (rule.value, rule.also)
            continue
        if group is not None:
            steps.append(_map_step(*group))
            group = None
        steps.append(_rule_step(rule))
    if group is not None:
        steps.append(_map_step(*group))
    compiled = tuple(steps)

    def classify(span: SpanRecord) -> Any:
        a = span.attributes
        for step in compiled:
            value = step(span, a)
            if value is not None:
                return value
        return default

    return classify


# --------------------------------------------------------------------------- the table as documentation


def _fn_name(fn: Callable[..., Any] | None) -> str:
    return "" if fn is None else f"`{fn.__name__}`"


def render_markdown(rows: tuple[Row, ...] = ROWS, rules: tuple[Rule, ...] = RULES) -> str:
    """The table as Markdown, one section per fact, rows in priority order (``docs/decoding.md``)."""
    out: list[str] = []
    for fact in Fact:
        fact_rules = [r for r in rules if r.fact is fact]
        fact_rows = [r for r in rows if r.fact is fact]
        if not (fact_rules or fact_rows):
            continue
        out.append(f"#### `{fact}` — {FACT_SCOPE[fact]}")
        out.append("")
        if fact_rules:
            out.append("| # | gives | convention | when | defined by |")
            out.append("|---|---|---|---|---|")
            for i, rule in enumerate(fact_rules, 1):
                when = rule.test.describe() + (f" and {rule.also.describe()}" if rule.also else "")
                shown = rule.value.value if isinstance(rule.value, enum.Enum) else rule.value
                out.append(f"| {i} | `{shown}` | {rule.convention} | {when} | {rule.ref} |")
        else:
            out.append("| # | tier | convention | reads | key | decoded by | only when | defined by |")
            out.append("|---|---|---|---|---|---|---|---|")
            for i, row in enumerate(fact_rows, 1):
                key = row.key if row.read in (Read.FUNCTION, Read.EVENTS, Read.NAME) else f"`{row.key}`"
                if row.read is Read.KEY_MATCH:
                    key = "`" + row.key.replace("|", "\\|") + "`"
                if row.read is Read.FUNCTION:
                    key += f" ({_fn_name(row.reader)})"
                out.append(
                    f"| {i} | {row.tier} | {row.convention} | {row.read.value} | {key} | {_fn_name(row.decode)} "
                    f"| {_fn_name(row.when)} | {row.ref} |"
                )
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def tool_error_markers() -> tuple[tuple[bytes, ...], ...]:
    """What the encoded record (OTLP protobuf or JSON) of any span a tool call or a run can be found errored from,
    other than by its status code (SCORING.md §3.3), holds: groups of byte strings that all occur in it. The
    ``exception`` event's name, ``error.type``, MCP's ``isError``, and for every ``tool_failed`` rule its key
    (with the values it compares to, when it compares). The sampling before the rebuild (``always_if_errored``)
    treats a trace whose records match no group, and none of whose spans has status ERROR, as not errored; a false
    match only costs a rebuild."""
    groups: set[tuple[bytes, ...]] = {
        (Events.EXCEPTION.encode(),),
        (GenAI.ERROR_TYPE.encode(),),
        (MCP.IS_ERROR.encode(),),
    }
    for rule in RULES:
        if rule.fact is Fact.TOOL_FAILED:
            for condition in (rule.test, rule.also):
                if condition is None or not condition.key:
                    continue
                if condition.check in (Check.VALUE_IN, Check.TEXT_IN):
                    groups.update((condition.key.encode(), value.strip().encode()) for value in condition.values)
                else:
                    groups.add((condition.key.encode(),))
    return tuple(sorted(groups))
