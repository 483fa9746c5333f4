"""Hypothesis strategies for hostile Kafka record values, shaped like what the OpenTelemetry Collector's Kafka
exporter writes.

A drawn :class:`Batch` holds :class:`FuzzRecord` values for the spans topic (``ExportTraceServiceRequest``) and
the logs topic (``ExportLogsServiceRequest``), in OTLP protobuf and OTLP/JSON (hex ids, int64 as decimal
strings, enums as integers). The good records carry agent runs in the three conventions the product reads:
OTel GenAI (``gen_ai.operation.name`` ``invoke_agent``/``chat``/``execute_tool``, ``gen_ai.agent.name``,
``gen_ai.tool.name``, ``gen_ai.tool.call.arguments``/``.id``, ``gen_ai.conversation.id``,
``gen_ai.input/output.messages``), OpenInference (``openinference.span.kind`` AGENT/LLM/TOOL, ``tool.name``,
``input.value``) and OpenLLMetry (``traceloop.span.kind``); traces are split over several records and some
records carry several traces. Hostile content is mixed in, each kind tagged as a *feature* on the record (see
:data:`REQUIRED_FEATURES`):

* lone UTF-16 surrogates in agent names, tool names, conversation ids, argument keys and values (OTLP/JSON
  ``"\\ud800"`` escapes; inside JSON-text attributes such as ``gen_ai.tool.call.arguments`` they also ride in
  protobuf records), NUL characters, strings of several MB;
* JSON arguments nested 1,000–5,000 deep, AnyValues nested past the parsers' limits, span parent chains and
  nested agents hundreds deep, parent cycles;
* huge and negative integers, NaN and infinities, times at 0, at 2^64-1, past int64/uint64 and negative,
  end before start;
* duplicated span ids, missing and invalid trace/span/parent ids;
* truncated and bit-flipped records, empty records, garbage, invalid UTF-8, protobuf with bad UTF-8, JSON that
  is not OTLP, records over 1 MiB (also undecodable ones, which the dead-letter producer must cope with).

Every record says which decode outcomes are acceptable (``allowed``: ``"ok"`` and/or reasons from
``monitor.ingest.decode.DECODE_REASONS``), and every generated trace says whether a run must end up stored
(:class:`TracePlan`). Sizes are capped per batch (:data:`HUGE_BUDGET`) so an example stays fast.
"""

from __future__ import annotations

import base64
import json
import math
import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Final

from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from monitor.ingest.decode import DECODE_REASONS

# --------------------------------------------------------------------------- limits the fuzz settings use

MAX_RECORD_BYTES: Final = 3 * 1024 * 1024
"""``decode.max_record_bytes`` of the fuzz settings: larger records must be dead-lettered as ``too_large``."""
DLQ_COMFORT_BYTES: Final = 1024 * 1024
"""kafka-python's default ``max_request_size``: dead letters above it are the ones a naive producer loses."""
HUGE_BUDGET: Final = 6_000_000
"""Characters of huge strings per batch (keeps one example well under a second)."""
MAX_EXPECTED_CHAIN: Final = 200
"""Parent chains up to this depth must still be rebuilt (the rebuild limit ``rebuild.max_depth`` is 256)."""
MAX_EXPECTED_AGENT_DEPTH: Final = 24
"""Nested agents up to this depth must still be rebuilt (``rebuild.max_agent_depth`` is 32)."""

U64_MAX: Final = 2**64 - 1
I64_MAX: Final = 2**63 - 1
I64_MIN: Final = -(2**63)

OK: Final = "ok"
REASONS: Final = frozenset(DECODE_REASONS)
ANY_OUTCOME: Final = frozenset({OK, *REASONS} - {"unknown_encoding", "empty", "too_large"})
"""A damaged record may decode or fail for any content reason (size reasons are decided by the size)."""
PROTO_GARBAGE: Final = frozenset({"invalid_protobuf", "no_spans", "missing_ids"})

REQUIRED_FEATURES: Final = frozenset(
    {
        "otlp_proto",
        "otlp_json",
        "logs",
        "conv:gen_ai",
        "conv:openinference",
        "conv:openllmetry",
        "conv:vercel_ai",
        "conv:haystack",
        "surrogate",
        "surrogate:agent_name",
        "surrogate:tool_name",
        "surrogate:conversation_id",
        "surrogate:arg_key",
        "surrogate:arg_value",
        "surrogate_in_proto",
        "nul",
        "huge_string",
        "huge_record",
        "huge_bad_record",
        "deep_json_args",
        "deep_anyvalue",
        "deep_parent_chain",
        "nested_agents",
        "wide_trace",
        "bytes_value",
        "mixed_array",
        "parent_cycle",
        "huge_int",
        "negative_int",
        "invalid_int",
        "nan",
        "inf",
        "inverted_times",
        "zero_time",
        "u64_max_time",
        "int64_overflow_time",
        "negative_time",
        "out_of_range_time",
        "duplicate_span_ids",
        "missing_ids",
        "invalid_ids",
        "split_trace",
        "multi_trace_record",
        "duplicate_record",
        "tool_error",
        "truncated",
        "bit_flipped",
        "empty",
        "garbage",
        "json_not_otlp",
        "invalid_utf8",
        "proto_bad_utf8",
        "too_large",
    }
)
"""Every feature a few hundred drawn batches must show (checked by ``test_strategies_produce_every_feature``)."""


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class BadId:
    """An id that is not a valid OTLP id in either encoding: how to write it in JSON (None: key omitted) and proto."""

    json: Any
    proto: bytes
    label: str


@dataclass(frozen=True, slots=True)
class JsonRaw:
    """An AnyValue written verbatim in OTLP/JSON (only in JSON records), e.g. ``{"intValue": "12abc"}``."""

    doc: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Deep:
    """An AnyValue nested ``depth`` arrays deep (written textually / iteratively, never recursively)."""

    depth: int


Id = bytes | BadId


@dataclass(slots=True)
class SpanSpec:
    trace_id: Id
    span_id: Id
    parent_id: Id | None
    name: str
    kind: int = 1
    attrs: dict[str, Any] = field(default_factory=dict)
    events: list[tuple[str, int, dict[str, Any]]] = field(default_factory=list)
    status: tuple[int, str] = (0, "")
    start: int = 0
    end: int = 0
    scope: str = "tests.fuzz"


@dataclass(slots=True)
class LogSpec:
    trace_id: Id
    span_id: Id
    event_name: str
    time: int
    attrs: dict[str, Any]
    body: Any


@dataclass(frozen=True, slots=True, repr=False)
class FuzzRecord:
    """One Kafka record value to produce, with what it is and which decode outcomes are acceptable."""

    topic: str  # "spans" | "logs"
    key: bytes | None
    value: bytes | None
    encoding: str  # "otlp_proto" | "otlp_json" | "raw"
    features: frozenset[str]
    allowed: frozenset[str]
    traces: tuple[str, ...] = ()
    damaged: bool = False
    kind: str = ""

    @property
    def size(self) -> int:
        return len(self.value) if self.value is not None else 0

    def __repr__(self) -> str:
        return f"<FuzzRecord {self.describe(80)}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # Hypothesis prints failing examples with this
        p.text(repr(self))

    def describe(self, width: int = 160) -> str:
        head = repr(self.value[:width]) if self.value else repr(self.value)
        more = f"… (+{self.size - width} bytes)" if self.size > width else ""
        return (
            f"[{self.topic} topic] {self.kind} encoding={self.encoding} size={self.size} key={self.key!r} "
            f"damaged={self.damaged} features={sorted(self.features)} allowed={sorted(self.allowed)} "
            f"traces={list(self.traces)} value={head}{more}"
        )


@dataclass(frozen=True, slots=True)
class TracePlan:
    """A generated trace: whether a run rooted at ``root_span_id`` must be stored once its records decode."""

    trace_id: str
    root_span_id: str | None
    expect_run: bool
    why_not: str
    features: frozenset[str]
    spans: int
    too_deep: bool = False  # clearly deeper than rebuild.max_depth / max_agent_depth (defaults 256 / 32)

    def describe(self) -> str:
        want = "run expected" if self.expect_run else f"no run required ({self.why_not})"
        if self.too_deep:
            want += ", must be rejected as too_deep"
        return (
            f"trace {self.trace_id} root {self.root_span_id} {self.spans} spans, {want}, "
            f"features={sorted(self.features)}"
        )


@dataclass(frozen=True, slots=True, repr=False)
class Batch:
    records: tuple[FuzzRecord, ...]
    plans: tuple[TracePlan, ...]

    @property
    def features(self) -> frozenset[str]:
        out: set[str] = set()
        for r in self.records:
            out |= r.features
        for p in self.plans:
            out |= p.features
        return frozenset(out)

    def __repr__(self) -> str:
        return f"<Batch {self.describe()}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def describe(self) -> str:
        lines = [f"{len(self.records)} records, {len(self.plans)} traces"]
        lines += [f"  #{i} {r.describe()}" for i, r in enumerate(self.records)]
        lines += [f"  {p.describe()}" for p in self.plans]
        return "\n".join(lines)


# --------------------------------------------------------------------------- drawing context

_NAME = st.builds(
    str.__add__,
    st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
    st.text("abcdefghijklmnopqrstuvwxyz0123456789_", max_size=11),
)
_UNICODE = st.text(st.characters(codec="utf-8"), max_size=12)
_SURROGATE = st.integers(0xD800, 0xDFFF).map(chr)
_HUGE_SIZES = st.sampled_from([70_000, 300_000, 1_200_000, 2_000_000, 3_300_000])
_HUGE_PATTERNS = ("ab", '{"k": [1, "v"]}, ', "lorem ipsum dolor ")


@dataclass(slots=True)
class _Budget:
    huge_left: int = HUGE_BUDGET


class _Ctx:
    """What one trace's draws share: ``draw``, the features seen, whether surrogates can be written."""

    def __init__(self, draw: Callable[[Any], Any], budget: _Budget, *, json_only: bool) -> None:
        self.draw = draw
        self.budget = budget
        self.json_only = json_only  # the trace's records are OTLP/JSON, so raw surrogates can be written
        self.surrogates = json_only
        self.feats: set[str] = set()

    @contextmanager
    def inner_json_escapes(self, on: bool) -> Iterator[None]:
        """Content that ends up inside a JSON text written with ``ensure_ascii`` may hold surrogates in any record."""
        before = self.surrogates
        self.surrogates = before or on
        try:
            yield
        finally:
            self.surrogates = before

    def huge(self, where: str) -> str | None:
        size = self.draw(_HUGE_SIZES)
        if size > self.budget.huge_left:
            return None
        self.budget.huge_left -= size
        pattern = self.draw(st.sampled_from(_HUGE_PATTERNS))
        self.feats.update({"huge_string", f"huge_string:{where}"})
        return (pattern * (size // len(pattern) + 1))[:size]

    def text(self, where: str, *, huge_ok: bool = False) -> str:
        draw = self.draw
        mode = draw(st.integers(0, 15))
        if mode <= 8:
            return str(draw(_NAME))
        if mode <= 10:
            s = str(draw(_UNICODE))
            if "\x00" in s:
                self.feats.add("nul")
            return s
        base = str(draw(_NAME))
        pos = draw(st.integers(0, len(base)))
        if mode <= 12 and self.surrogates:
            self.feats.update({"surrogate", f"surrogate:{where}"})
            if not self.json_only:
                self.feats.add("surrogate_in_proto")
            return base[:pos] + draw(_SURROGATE) + base[pos:]
        if mode <= 13:
            self.feats.add("nul")
            return base[:pos] + "\x00" + base[pos:]
        if mode == 14 and huge_ok and draw(st.integers(0, 1)) == 0:
            huge = self.huge(where)
            if huge is not None:
                return huge
        return ""

    def number(self, *, structured: bool) -> Any:
        """A JSON-ish number for content (inside JSON texts any size works; as an AnyValue only int64)."""
        draw = self.draw
        mode = draw(st.integers(0, 7))
        if mode <= 2:
            return draw(st.integers(0, 10_000))
        if mode == 3:
            self.feats.add("huge_int")
            if structured and not self.json_only:
                return draw(st.sampled_from([I64_MAX, I64_MIN, 2**53 + 1]))
            return draw(st.sampled_from([2**63, 2**64 + 1, 10**30, -(2**63) - 1, I64_MAX, 10**400]))
        if mode == 4:
            self.feats.add("negative_int")
            return draw(st.integers(-(10**6), -1))
        if mode == 5:
            self.feats.add("nan")
            return math.nan
        if mode == 6:
            self.feats.add("inf")
            return draw(st.sampled_from([math.inf, -math.inf]))
        return draw(st.floats(allow_nan=False, allow_infinity=False, width=64))

    def token_count(self) -> Any:
        """An AnyValue for ``gen_ai.usage.*``: mostly sane, sometimes huge, negative, NaN, inf or not an int."""
        draw = self.draw
        mode = draw(st.integers(0, 9))
        if mode <= 4:
            return draw(st.integers(0, 100_000))
        if mode == 5:
            self.feats.add("huge_int")
            if self.json_only:
                big = draw(st.sampled_from([2**64 + 7, 10**30, -(10**25)]))
                return JsonRaw({"intValue": str(big)})
            return draw(st.sampled_from([I64_MAX, I64_MIN]))
        if mode == 6:
            self.feats.add("negative_int")
            return draw(st.integers(-(10**9), -1))
        if mode == 7:
            self.feats.add("nan")
            return math.nan
        if mode == 8:
            self.feats.add("inf")
            return draw(st.sampled_from([math.inf, -math.inf]))
        if self.json_only:
            self.feats.add("invalid_int")
            return JsonRaw({"intValue": draw(st.sampled_from(["12abc", "", "1e3", " 7", "0x10", "NaN"]))})
        return 7

    def leaf(self, where: str) -> Any:
        draw = self.draw
        mode = draw(st.integers(0, 8))
        if mode <= 4:
            return self.text(where, huge_ok=True)
        if mode <= 6:
            return self.number(structured=False)
        if mode == 7:
            return draw(st.sampled_from([True, False, None]))
        return [self.text(where) for _ in range(draw(st.integers(0, 2)))]

    def attr_value(self) -> Any:
        """An attribute value (an AnyValue): a leaf, bytes, a mixed array or a small kvlist with hostile keys."""
        draw = self.draw
        mode = draw(st.integers(0, 5))
        if mode <= 2:
            return self.leaf("attr_value")
        if mode == 3:
            self.feats.add("bytes_value")
            return draw(st.binary(max_size=24))
        if mode == 4:
            self.feats.add("mixed_array")
            return [self.text("attr_value"), draw(st.integers(-5, 5)), True, 1.5, [self.text("attr_value")]]
        return {self.text("attr_key"): self.leaf("attr_value") for _ in range(draw(st.integers(0, 3)))}

    def arguments(self) -> tuple[Any, str, bool]:
        """Tool-call arguments: (decoded object or None, the JSON text as instrumentations write it, deep?)."""
        draw = self.draw
        mode = draw(st.integers(0, 9))
        if mode == 7:
            depth = draw(st.integers(1000, 5000))
            self.feats.add("deep_json_args")
            if draw(st.booleans()):
                return None, '{"a":' * depth + "1" + "}" * depth, True
            return None, "[" * depth + "]" * depth, True
        if mode == 8:
            self.feats.add("malformed_args")
            return None, draw(st.sampled_from(['{"city": ', "not json", "[1, 2", "\x00", '{"a": 1}}'])), False
        if mode == 9:
            raw = draw(st.sampled_from(["[]", '"Paris"', "42", "null", "{}"]))
            return json.loads(raw), raw, False
        escapes = draw(st.booleans())
        with self.inner_json_escapes(escapes):
            args = {self.text("arg_key"): self.leaf("arg_value") for _ in range(draw(st.integers(0, 3)))}
        return args, json.dumps(args, ensure_ascii=escapes), False


def _proto_safe(value: Any) -> bool:
    """Whether an object can be written as protobuf AnyValues (UTF-8 strings, int64 ints)."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, str):
            try:
                v.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(v, bool) or v is None or isinstance(v, float):
            continue
        elif isinstance(v, int):
            if not I64_MIN <= v <= I64_MAX:
                return False
        elif isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
        else:
            return False
    return True


def _dumps(value: Any) -> str:
    """A JSON text as instrumentations write it; lone surrogates become ``\\udXXX`` escapes (valid in JSON)."""
    text = json.dumps(value, ensure_ascii=False)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True)
    return text


def _messages(role: str, parts: list[dict[str, Any]], **extra: Any) -> str:
    return _dumps([{"role": role, "parts": parts, **extra}])


# --------------------------------------------------------------------------- agent runs in three conventions

CONVENTIONS: Final = ("gen_ai", "openinference", "openllmetry", "vercel_ai", "haystack")
_SCOPES: Final = {
    "gen_ai": "opentelemetry.instrumentation.genai",
    "openinference": "openinference.instrumentation.anthropic",
    "openllmetry": "opentelemetry.instrumentation.anthropic",
    "vercel_ai": "ai",
    "haystack": "haystack",
}


def _haystack_message(role: str, content: list[dict[str, Any]], **meta: Any) -> dict[str, Any]:
    return {"role": role, "meta": meta, "name": None, "content": content}


class _TraceBuilder:
    def __init__(self, ctx: _Ctx, trace_id: bytes, rng: random.Random) -> None:
        self.ctx = ctx
        self.trace_id = trace_id
        self.rng = rng
        self.spans: list[SpanSpec] = []
        self._ids: set[bytes] = set()

    def new_id(self) -> bytes:
        while True:
            raw = self.rng.getrandbits(64).to_bytes(8, "big")
            if any(raw) and raw not in self._ids:
                self._ids.add(raw)
                return raw

    def add(self, parent: bytes | None, name: str, conv: str, attrs: dict[str, Any], kind: int = 1) -> SpanSpec:
        span = SpanSpec(self.trace_id, self.new_id(), parent, name, kind, attrs, scope=_SCOPES[conv])
        self.spans.append(span)
        return span

    # -- spans of one convention

    def agent(self, conv: str, parent: bytes | None, agent: str, conversation: str, user: str, answer: str) -> SpanSpec:
        if conv == "gen_ai":
            attrs = {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": agent,
                "gen_ai.conversation.id": conversation,
                "gen_ai.provider.name": "anthropic",
                "gen_ai.input.messages": _messages("user", [{"type": "text", "content": user}]),
                "gen_ai.output.messages": _messages(
                    "assistant", [{"type": "text", "content": answer}], finish_reason="stop"
                ),
            }
            return self.add(parent, f"invoke_agent {agent}", conv, attrs)
        if conv == "openinference":
            attrs = {
                "openinference.span.kind": "AGENT",
                "agent.name": agent,
                "session.id": conversation,
                "input.value": user,
                "output.value": answer,
            }
            return self.add(parent, agent, conv, attrs)
        if conv == "vercel_ai":
            attrs = {
                "ai.operationId": "ai.generateText",
                "operation.name": f"ai.generateText {agent}",
                "ai.telemetry.functionId": agent,
                "ai.prompt": _dumps({"system": "You help.", "prompt": user}),
                "ai.response.text": answer,
            }
            return self.add(parent, "ai.generateText", conv, attrs)
        if conv == "haystack":
            attrs = {
                "haystack.agent.input": _dumps({"messages": [_haystack_message("user", [{"text": user}])]}),
                "haystack.agent.output": _dumps({"messages": [_haystack_message("assistant", [{"text": answer}])]}),
            }
            return self.add(parent, "haystack.agent.run", conv, attrs)
        kind = self.ctx.draw(st.sampled_from(["agent", "workflow"]))
        attrs = {
            "traceloop.span.kind": kind,
            "traceloop.entity.name": agent,
            "traceloop.association.properties.session_id": conversation,
            "traceloop.entity.input": _dumps({"args": [user], "kwargs": {}}),
            "traceloop.entity.output": _dumps(answer),
        }
        return self.add(parent, f"{agent}.{kind}", conv, attrs)

    def llm(
        self, conv: str, parent: bytes, user: str, calls: list[tuple[str, str, Any, str]], answer: str | None
    ) -> SpanSpec:
        ctx = self.ctx
        model = "claude-fuzz-1"
        if conv == "gen_ai":
            parts: list[dict[str, Any]] = [
                {"type": "tool_call", "id": cid, "name": tool, "arguments": obj if obj is not None else raw}
                for cid, tool, obj, raw in calls
            ]
            if answer is not None:
                parts.append({"type": "text", "content": answer})
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": model,
                "gen_ai.provider.name": "anthropic",
                "gen_ai.usage.input_tokens": ctx.token_count(),
                "gen_ai.usage.output_tokens": ctx.token_count(),
                "gen_ai.input.messages": _messages("user", [{"type": "text", "content": user}]),
                "gen_ai.output.messages": _messages("assistant", parts, finish_reason="tool_call" if calls else "stop"),
                "gen_ai.tool.definitions": _dumps(
                    [{"type": "function", "name": tool, "parameters": {"type": "object"}} for _, tool, _, _ in calls]
                ),
            }
            return self.add(parent, f"chat {model}", conv, attrs, kind=3)
        if conv == "openinference":
            attrs = {
                "openinference.span.kind": "LLM",
                "llm.model_name": model,
                "llm.token_count.prompt": ctx.token_count(),
                "llm.token_count.completion": ctx.token_count(),
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": user,
                "llm.output_messages.0.message.role": "assistant",
            }
            if answer is not None:
                attrs["llm.output_messages.0.message.content"] = answer
            for j, (cid, tool, _obj, raw) in enumerate(calls):
                prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
                attrs[prefix + "id"] = cid
                attrs[prefix + "function.name"] = tool
                attrs[prefix + "function.arguments"] = raw
            return self.add(parent, "Messages", conv, attrs, kind=3)
        if conv == "vercel_ai":
            attrs = {
                "ai.operationId": "ai.generateText.doGenerate",
                "ai.model.id": model,
                "ai.usage.inputTokens": ctx.token_count(),
                "ai.usage.outputTokens": ctx.token_count(),
                "ai.prompt.messages": _dumps([{"role": "user", "content": [{"type": "text", "text": user}]}]),
                "ai.response.toolCalls": _dumps(
                    [{"toolCallId": cid, "toolName": tool, "input": raw} for cid, tool, _obj, raw in calls]
                ),
            }
            if answer is not None:
                attrs["ai.response.text"] = answer
            return self.add(parent, "ai.generateText.doGenerate", conv, attrs)
        if conv == "haystack":
            content: list[dict[str, Any]] = [
                {"tool_call": {"tool_name": tool, "arguments": raw, "id": cid}} for cid, tool, obj, raw in calls
            ]
            if answer is not None:
                content.append({"text": answer})
            usage = {
                "prompt_tokens": ctx.draw(st.integers(0, 10**6)),
                "completion_tokens": ctx.draw(st.integers(0, 10**6)),
            }
            reply = _haystack_message("assistant", content, model=model, usage=usage)
            attrs = {
                "haystack.agent.step.llm.input": _dumps({"messages": [_haystack_message("user", [{"text": user}])]}),
                "haystack.agent.step.llm.output": _dumps({"replies": [reply]}),
            }
            return self.add(parent, "haystack.agent.step.llm", conv, attrs)
        attrs = {
            "llm.request.type": "chat",
            "gen_ai.system": "Anthropic",
            "gen_ai.request.model": model,
            "gen_ai.usage.prompt_tokens": ctx.token_count(),
            "gen_ai.usage.completion_tokens": ctx.token_count(),
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": user,
            "gen_ai.completion.0.role": "assistant",
        }
        if answer is not None:
            attrs["gen_ai.completion.0.content"] = answer
        for j, (cid, tool, _obj, raw) in enumerate(calls):
            attrs[f"gen_ai.completion.0.tool_calls.{j}.id"] = cid
            attrs[f"gen_ai.completion.0.tool_calls.{j}.name"] = tool
            attrs[f"gen_ai.completion.0.tool_calls.{j}.arguments"] = raw
        return self.add(parent, "anthropic.chat", conv, attrs, kind=3)

    def tool(self, conv: str, parent: bytes, cid: str, tool: str, obj: Any, raw: str, result: str) -> SpanSpec:
        ctx = self.ctx
        args: Any = raw
        structured = isinstance(obj, dict) and ctx.draw(st.integers(0, 3)) == 0
        if structured and (ctx.json_only or _proto_safe(obj)):  # "SHOULD be structured when supported"
            args = obj
            ctx.feats.add("structured_args")
        if conv == "gen_ai":
            attrs: dict[str, Any] = {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": tool,
                "gen_ai.tool.call.id": cid,
                "gen_ai.tool.type": "function",
                "gen_ai.tool.call.arguments": args,
                "gen_ai.tool.call.result": result,
            }
            span = self.add(parent, f"execute_tool {tool}", conv, attrs)
        elif conv == "openinference":
            attrs = {
                "openinference.span.kind": "TOOL",
                "tool.name": tool,
                "tool_call.id": cid,
                "input.value": raw,
                "output.value": result,
            }
            span = self.add(parent, tool, conv, attrs)
        elif conv == "vercel_ai":
            attrs = {
                "ai.operationId": "ai.toolCall",
                "ai.toolCall.name": tool,
                "ai.toolCall.id": cid,
                "ai.toolCall.args": raw,
                "ai.toolCall.result": result,
            }
            span = self.add(parent, "ai.toolCall", conv, attrs)
        elif conv == "haystack":
            attrs = {
                "haystack.tool.name": tool,
                "haystack.agent.step.tool.input": raw,
                "haystack.agent.step.tool.output": result,
            }
            if ctx.draw(st.integers(0, 5)) == 0:
                attrs["haystack.tool.error"] = True
            span = self.add(parent, "haystack.agent.step.tool", conv, attrs)
        else:
            entity_input = raw
            if isinstance(obj, dict) and _proto_safe(obj):
                entity_input = json.dumps({"args": [], "kwargs": obj}, ensure_ascii=True)
            attrs = {
                "traceloop.span.kind": "tool",
                "traceloop.entity.name": tool,
                "traceloop.entity.input": entity_input,
                "traceloop.entity.output": result,
            }
            span = self.add(parent, f"{tool}.tool", conv, attrs)
        if ctx.draw(st.integers(0, 5)) == 0:
            ctx.feats.add("tool_error")
            message = ctx.text("error_message")
            span.status = (2, message)
            span.attrs["error.type"] = "ToolError"
            span.events.append(("exception", 0, {"exception.type": "ToolError", "exception.message": message}))
        return span

    # -- whole runs

    def run(self, parent: bytes | None, *, nested_ok: bool) -> SpanSpec:
        ctx, draw = self.ctx, self.ctx.draw
        conv = draw(st.sampled_from(CONVENTIONS))
        ctx.feats.add(f"conv:{conv}")
        agent = ctx.text("agent_name")
        conversation = ctx.text("conversation_id")
        user = ctx.text("user_text")
        answer = ctx.text("answer")
        root = self.agent(conv, parent, agent, conversation, user, answer)
        if ctx.draw(st.integers(0, 1)) == 0:  # one hostile extra attribute
            key, value = ctx.text("attr_key"), ctx.attr_value()
            if key and key not in root.attrs and (ctx.json_only or _proto_safe({key: value})):
                root.attrs[key] = value
        for i in range(draw(st.integers(0, 3))):
            tool = ctx.text("tool_name")
            cid = ctx.text("call_id") if draw(st.booleans()) else f"call_{i}"
            obj, raw, _deep = ctx.arguments()
            result = ctx.text("result", huge_ok=True)
            self.llm(conv, root.span_id, user, [(cid, tool, obj, raw)], None)
            tool_span = self.tool(conv, root.span_id, cid, tool, obj, raw, result)
            if nested_ok and draw(st.integers(0, 6)) == 0:  # agent as a tool: a nested run under the tool span
                ctx.feats.add("nested_agent")
                self.run(tool_span.span_id, nested_ok=False)
        self.llm(conv, root.span_id, user, [], answer)
        return root

    def chain(self, depth: int) -> SpanSpec:
        """A run whose only tool call sits under ``depth`` nested spans (a deep parent chain)."""
        self.ctx.feats.add("deep_parent_chain")
        root = self.agent("gen_ai", None, "chain_agent", "conv-chain", "go deep", "done")
        parent = root.span_id
        for i in range(depth):
            step = self.add(parent, f"step {i}", "openllmetry", {"traceloop.span.kind": "task"})
            parent = step.span_id
        self.tool("gen_ai", parent, "call_deep", "get_weather", {"city": "Paris"}, '{"city": "Paris"}', "18C")
        return root

    def wide(self, calls: int) -> SpanSpec:
        """One agent calling ``calls`` tools (a wide trace: thousands of spans, one record or several)."""
        self.ctx.feats.add("wide_trace")
        root = self.agent("gen_ai", None, "wide_agent", "conv-wide", "call everything", "done")
        for i in range(calls):
            args = {"i": i}
            self.tool("gen_ai", root.span_id, f"call_{i}", f"tool_{i % 7}", args, json.dumps(args), str(i))
        return root

    def nested_agents(self, depth: int) -> SpanSpec:
        """``depth`` agents, each invoked by its parent (distinct names), each calling one tool."""
        self.ctx.feats.add("nested_agents")
        root = self.agent("gen_ai", None, "agent_0", "conv-nest", "delegate", "done")
        parent = root
        for i in range(1, depth + 1):
            self.tool("gen_ai", parent.span_id, f"call_{i}", "lookup", {"i": i}, json.dumps({"i": i}), "ok")
            parent = self.agent("gen_ai", parent.span_id, f"agent_{i}", "conv-nest", f"level {i}", "ok")
        return root


def _assign_times(spans: list[SpanSpec], t0: int) -> None:
    """Nested, increasing times (a parent encloses its children), without recursion."""
    children: dict[bytes, list[SpanSpec]] = {}
    roots: list[SpanSpec] = []
    for s in spans:
        if isinstance(s.parent_id, bytes):
            children.setdefault(s.parent_id, []).append(s)
        else:
            roots.append(s)
    clock = t0
    stack: list[tuple[SpanSpec, bool]] = [(r, False) for r in reversed(roots)]
    while stack:
        span, done = stack.pop()
        if done:
            span.end = clock
            clock += 1_000
            continue
        span.start = clock
        clock += 1_000
        stack.append((span, True))
        assert isinstance(span.span_id, bytes)
        stack.extend((c, False) for c in reversed(children.get(span.span_id, [])))


def _bad_id(draw: Callable[[Any], Any], size: int) -> BadId:
    choice = draw(st.integers(0, 5))
    if choice == 0:
        return BadId(None, b"", "missing")
    if choice == 1:
        return BadId("", b"", "empty")
    if choice == 2:
        return BadId("abc", b"\x01\x02\x03", "short")
    if choice == 3:
        return BadId("zz" * size, b"\x01" * (size + 1), "non-hex/too long")
    if choice == 4:
        return BadId("0" * (2 * size), b"\x00" * size, "all zero")
    return BadId(12345, b"\x07" * (size - 1), "a number/too short")


# --------------------------------------------------------------------------- encoders


def _proto_any(target: AnyValue, value: Any) -> None:
    if isinstance(value, Deep):
        v = target
        for _ in range(value.depth):
            v = v.array_value.values.add()
        v.string_value = "bottom"
    elif isinstance(value, bool):
        target.bool_value = value
    elif isinstance(value, int):
        target.int_value = value
    elif isinstance(value, float):
        target.double_value = value
    elif isinstance(value, str):
        target.string_value = value
    elif isinstance(value, bytes):
        target.bytes_value = value
    elif isinstance(value, list):
        target.array_value.SetInParent()
        for item in value:
            _proto_any(target.array_value.values.add(), item)
    elif isinstance(value, dict):
        target.kvlist_value.SetInParent()
        for k, item in value.items():
            kv = target.kvlist_value.values.add()
            kv.key = k
            if item is not None:
                _proto_any(kv.value, item)
    elif isinstance(value, JsonRaw):  # never generated for protobuf records
        raise AssertionError("JsonRaw in a protobuf record")


def _proto_attrs(kvs: Any, attrs: dict[str, Any]) -> None:
    for key, value in attrs.items():
        kv = kvs.add()
        kv.key = key
        if value is not None:
            _proto_any(kv.value, value)


def _proto_id(value: Id | None) -> bytes:
    if value is None:
        return b""
    return value.proto if isinstance(value, BadId) else value


def encode_spans_proto(spans: list[SpanSpec], service: str) -> bytes:
    request = ExportTraceServiceRequest()
    rs = request.resource_spans.add()
    _proto_attrs(rs.resource.attributes, {"service.name": service})
    scopes: dict[str, Any] = {}
    for s in spans:
        ss = scopes.get(s.scope)
        if ss is None:
            ss = scopes[s.scope] = rs.scope_spans.add()
            ss.scope.name = s.scope
        span = ss.spans.add()
        span.trace_id = _proto_id(s.trace_id)
        span.span_id = _proto_id(s.span_id)
        span.parent_span_id = _proto_id(s.parent_id)
        span.name = s.name
        span.kind = s.kind  # type: ignore[assignment]
        span.start_time_unix_nano = s.start
        span.end_time_unix_nano = s.end
        _proto_attrs(span.attributes, s.attrs)
        for name, t, attrs in s.events:
            ev = span.events.add()
            ev.name = name
            ev.time_unix_nano = t
            _proto_attrs(ev.attributes, attrs)
        if s.status != (0, ""):
            span.status.code = s.status[0]  # type: ignore[assignment]
            span.status.message = s.status[1]
    return bytes(request.SerializeToString())


def encode_logs_proto(logs: list[LogSpec], service: str) -> bytes:
    request = ExportLogsServiceRequest()
    rl = request.resource_logs.add()
    _proto_attrs(rl.resource.attributes, {"service.name": service})
    sl = rl.scope_logs.add()
    sl.scope.name = "opentelemetry.instrumentation.genai"
    for spec in logs:
        rec = sl.log_records.add()
        rec.trace_id = _proto_id(spec.trace_id)
        rec.span_id = _proto_id(spec.span_id)
        rec.time_unix_nano = spec.time
        rec.event_name = spec.event_name
        _proto_attrs(rec.attributes, spec.attrs)
        if spec.body is not None:
            _proto_any(rec.body, spec.body)
    return bytes(request.SerializeToString())


@dataclass(frozen=True, slots=True)
class JsonStyle:
    """How one OTLP/JSON record is written (all variants the decoder must accept)."""

    id_case: str = "lower"  # lower | upper | base64
    ints: str = "string"  # string | number
    floats: str = "string"  # how NaN/inf are written: string ("NaN") | literal (NaN)
    times: str = "string"  # string | number


_DEEP_MARK = "\u2063deep-anyvalue\u2063"


class _JsonWriter:
    def __init__(self, style: JsonStyle) -> None:
        self.style = style
        self.deep: list[int] = []

    def id(self, value: Id | None) -> Any:
        if value is None:
            return None
        if isinstance(value, BadId):
            return value.json
        if self.style.id_case == "upper":
            return value.hex().upper()
        if self.style.id_case == "base64":
            return base64.b64encode(value).decode()
        return value.hex()

    def int64(self, value: int) -> Any:
        return str(value) if self.style.ints == "string" else value

    def time(self, value: int) -> Any:
        return str(value) if self.style.times == "string" else value

    def any(self, value: Any) -> dict[str, Any]:
        if isinstance(value, JsonRaw):
            return value.doc
        if isinstance(value, Deep):
            self.deep.append(value.depth)
            return {"stringValue": f"{_DEEP_MARK}{len(self.deep) - 1}"}
        if isinstance(value, bool):
            return {"boolValue": value}
        if isinstance(value, int):
            return {"intValue": self.int64(value)}
        if isinstance(value, float):
            if math.isfinite(value) or self.style.floats == "literal":
                return {"doubleValue": value}
            return {"doubleValue": "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")}
        if isinstance(value, str):
            return {"stringValue": value}
        if isinstance(value, bytes):
            return {"bytesValue": base64.b64encode(value).decode()}
        if isinstance(value, list):
            return {"arrayValue": {"values": [self.any(v) for v in value]}}
        if isinstance(value, dict):
            return {"kvlistValue": {"values": self.attrs(value)}}
        return {}

    def attrs(self, attrs: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"key": k, **({"value": self.any(v)} if v is not None else {})} for k, v in attrs.items()]

    def finish(self, doc: dict[str, Any]) -> bytes:
        text = json.dumps(doc, separators=(",", ":"), ensure_ascii=False)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:  # lone surrogates: written as \udXXX escapes, as JSON allows
            data = json.dumps(doc, separators=(",", ":"), ensure_ascii=True).encode("ascii")
        for i, depth in enumerate(self.deep):
            mark = json.dumps({"stringValue": f"{_DEEP_MARK}{i}"}, separators=(",", ":"), ensure_ascii=False)
            deep = '{"arrayValue":{"values":[' * depth + '{"stringValue":"bottom"}' + "]}}" * depth
            for candidate in (mark, json.dumps(json.loads(mark), separators=(",", ":"))):
                data = data.replace(candidate.encode("utf-8"), deep.encode(), 1)
        return data


def encode_spans_json(spans: list[SpanSpec], service: str, style: JsonStyle) -> bytes:
    w = _JsonWriter(style)
    scopes: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        doc: dict[str, Any] = {}
        for key, value in (("traceId", w.id(s.trace_id)), ("spanId", w.id(s.span_id))):
            if value is not None:
                doc[key] = value
        parent = w.id(s.parent_id)
        if parent is not None:
            doc["parentSpanId"] = parent
        doc.update(
            name=s.name,
            kind=s.kind,
            startTimeUnixNano=w.time(s.start),
            endTimeUnixNano=w.time(s.end),
            attributes=w.attrs(s.attrs),
        )
        if s.events:
            doc["events"] = [{"timeUnixNano": w.time(t), "name": n, "attributes": w.attrs(a)} for n, t, a in s.events]
        if s.status != (0, ""):
            doc["status"] = {"code": s.status[0], "message": s.status[1]}
        scopes.setdefault(s.scope, []).append(doc)
    request = {
        "resourceSpans": [
            {
                "resource": {"attributes": w.attrs({"service.name": service})},
                "scopeSpans": [{"scope": {"name": name}, "spans": docs} for name, docs in scopes.items()],
            }
        ]
    }
    return w.finish(request)


def encode_logs_json(logs: list[LogSpec], service: str, style: JsonStyle) -> bytes:
    w = _JsonWriter(style)
    records = []
    for spec in logs:
        doc: dict[str, Any] = {"timeUnixNano": w.time(spec.time), "eventName": spec.event_name}
        for key, value in (("traceId", w.id(spec.trace_id)), ("spanId", w.id(spec.span_id))):
            if value is not None:
                doc[key] = value
        doc["attributes"] = w.attrs(spec.attrs)
        if spec.body is not None:
            doc["body"] = w.any(spec.body)
        records.append(doc)
    request = {
        "resourceLogs": [
            {
                "resource": {"attributes": w.attrs({"service.name": service})},
                "scopeLogs": [{"scope": {"name": "opentelemetry.instrumentation.genai"}, "logRecords": records}],
            }
        ]
    }
    return w.finish(request)


_JSON_STYLES = st.builds(
    JsonStyle,
    id_case=st.sampled_from(["lower", "lower", "upper", "base64"]),
    ints=st.sampled_from(["string", "string", "number"]),
    floats=st.sampled_from(["string", "literal"]),
    times=st.sampled_from(["string", "string", "number"]),
)


# --------------------------------------------------------------------------- record mutations and outcomes


def _size_outcome(value: bytes | None, allowed: frozenset[str]) -> frozenset[str]:
    if not value:
        return frozenset({"empty"})
    if len(value) > MAX_RECORD_BYTES:
        return frozenset({"too_large"})
    return allowed


def _size_features(value: bytes | None, allowed: frozenset[str]) -> set[str]:
    feats: set[str] = set()
    if value and len(value) > DLQ_COMFORT_BYTES:
        feats.add("huge_record")
        if OK not in allowed:
            feats.add("huge_bad_record")
    if value and len(value) > MAX_RECORD_BYTES:
        feats.add("too_large")
    return feats


def _finish_record(
    draw: Callable[[Any], Any],
    *,
    topic: str,
    key: bytes | None,
    value: bytes,
    encoding: str,
    features: set[str],
    allowed: frozenset[str],
    traces: tuple[str, ...],
    kind: str,
    mutate: bool = True,
) -> FuzzRecord:
    damaged = False
    if mutate and len(value) >= 2:
        mode = draw(st.integers(0, 13))
        if mode == 12:
            cut = draw(st.integers(1, len(value) - 1))
            value = value[:cut]
            features = features | {"truncated"}
            damaged = True
        elif mode == 13:
            flipped = bytearray(value)
            for _ in range(draw(st.integers(1, 8))):
                pos = draw(st.integers(0, len(value) - 1))
                flipped[pos] ^= 1 << draw(st.integers(0, 7))
            value = bytes(flipped)
            features = features | {"bit_flipped"}
            damaged = True
    if damaged:
        allowed = ANY_OUTCOME
    allowed = _size_outcome(value, allowed)
    features = features | {encoding} | _size_features(value, allowed)
    if topic == "logs":
        features.add("logs")
    return FuzzRecord(topic, key, value, encoding, frozenset(features), allowed, traces, damaged, kind)


# --------------------------------------------------------------------------- one trace → records


@dataclass(slots=True)
class _TraceDraw:
    plan: TracePlan
    spans: list[SpanSpec]
    logs: list[LogSpec]
    json_only: bool
    proto_only: bool
    feats: set[str]
    why_not: list[str]
    allowed_extra: set[str]


@st.composite
def _trace(draw: Callable[[Any], Any], budget: _Budget) -> _TraceDraw:
    enc_mode = draw(st.sampled_from(["proto", "json", "mixed"]))
    ctx = _Ctx(draw, budget, json_only=enc_mode == "json")
    rng = random.Random(draw(st.integers(0, 2**32)))
    trace_id = rng.getrandbits(128).to_bytes(16, "big") or b"\x01" * 16
    b = _TraceBuilder(ctx, trace_id, rng)
    why_not: list[str] = []
    allowed_extra: set[str] = set()

    shape = draw(st.integers(0, 12))
    over_limit = False
    if shape == 12:
        root = b.wide(draw(st.integers(300, 2500)))
    elif shape == 10:
        depth = draw(st.integers(100, 700))
        root = b.chain(depth)
        if depth + 2 > MAX_EXPECTED_CHAIN:
            why_not.append(f"a parent chain of {depth + 2} spans, near or over rebuild.max_depth (256)")
        over_limit = depth > 256 + 4
    elif shape == 11:
        depth = draw(st.integers(2, 400))
        root = b.nested_agents(depth)
        if depth > MAX_EXPECTED_AGENT_DEPTH:
            why_not.append(f"{depth + 1} nested agents, near or over rebuild.max_agent_depth (32)")
        over_limit = depth > 32 + 4
    else:
        root = b.run(None, nested_ok=True)
    spans = b.spans
    _assign_times(spans, draw(st.integers(1_600_000_000_000_000_000, 1_900_000_000_000_000_000)))
    others = [s for s in spans if s is not root]

    # -- times
    tmode = draw(st.integers(1, 9))
    if tmode == 6:
        ctx.feats.add("inverted_times")
        for s in [root, *rng.sample(others, min(len(others), 3))]:
            s.start, s.end = s.end, s.start
    elif tmode == 7:
        ctx.feats.add("zero_time")
        for s in rng.sample(spans, min(len(spans), 3)):
            if draw(st.booleans()):
                s.start = 0
            s.end = 0
    elif tmode >= 8 and not ctx.json_only:
        ctx.feats.add("u64_max_time")
        for s in rng.sample(spans, min(len(spans), 3)):
            s.end = U64_MAX
            if draw(st.booleans()):
                s.start = U64_MAX
    elif tmode >= 8:  # only OTLP/JSON can write a time outside uint64
        target = root if draw(st.booleans()) else rng.choice(spans)
        ctx.feats.add("out_of_range_time")
        if tmode == 8:
            ctx.feats.add("int64_overflow_time")
            when = draw(st.sampled_from([2**64, 10**25, 2**63 * 3]))
            target.start, target.end = when, when + 1_000
        else:
            ctx.feats.add("negative_time")
            target.start = draw(st.sampled_from([-1, -5_000_000_000, -(10**19), -(10**25)]))
        allowed_extra.add("invalid_structure")  # a decoder may reject times outside uint64
        why_not.append("a time outside uint64 (stored or not, it must be accounted for)")

    # -- ids and parents
    imode = draw(st.integers(0, 12))
    if imode == 7 and len(others) >= 2:
        ctx.feats.add("duplicate_span_ids")
        a, c = rng.sample(others, 2)
        if draw(st.booleans()):
            c.span_id = a.span_id  # two different spans, one id
        else:
            spans.append(replace(a, attrs=dict(a.attrs)))  # the same span twice (a retried export)
    elif imode == 8:
        ctx.feats.add("duplicate_span_ids")
        victim = rng.choice(others) if others else None
        if victim is not None:
            victim.span_id = root.span_id
            why_not.append("a child reuses the root span id")
    elif imode == 9 and others:
        victim = rng.choice(others)
        if draw(st.booleans()):
            bad = victim.span_id = _bad_id(draw, 8)
        else:
            bad = victim.trace_id = _bad_id(draw, 16)
        ctx.feats.add("missing_ids" if bad.label in ("missing", "empty") else "invalid_ids")
    elif imode == 10 and others:
        ctx.feats.add("invalid_ids")
        rng.choice(others).parent_id = _bad_id(draw, 8)
    elif imode == 11 and len(others) >= 2:
        ctx.feats.add("parent_cycle")
        a, c = rng.sample(others, 2)
        if draw(st.booleans()):
            a.parent_id, c.parent_id = c.span_id, a.span_id
        else:
            a.parent_id = a.span_id
    elif imode == 12:
        which = draw(st.sampled_from(["root", "all"]))
        bad = _bad_id(draw, 8)
        ctx.feats.add("missing_ids" if bad.label in ("missing", "empty") else "invalid_ids")
        for s in [root] if which == "root" else spans:
            if draw(st.booleans()):
                s.span_id = bad
            else:
                s.trace_id = _bad_id(draw, 16)
        why_not.append(f"{which} span ids invalid")

    # -- deep AnyValue inside the trace (decodable or not, depending on the depth and the encoding)
    if draw(st.integers(0, 11)) == 0 and others:
        depth = draw(st.sampled_from([20, 40, 60, 150, 300, 400, 2000]))
        rng.choice(others).attrs["fuzz.deep"] = Deep(depth)
        ctx.feats.add("deep_anyvalue")
        allowed_extra.update({"invalid_json", "invalid_protobuf", "invalid_structure"})
        why_not.append("a deeply nested AnyValue may make the record undecodable")

    if "invalid_int" in ctx.feats:
        allowed_extra.add("invalid_structure")
    if "huge_int" in ctx.feats and ctx.json_only:
        allowed_extra.add("invalid_structure")

    # -- GenAI log events for the chat spans (the logs topic)
    logs: list[LogSpec] = []
    if draw(st.integers(0, 4)) == 0:
        chats = [s for s in spans if s.kind == 3] or [root]
        for s in chats[: draw(st.integers(1, 3))]:
            name = draw(st.sampled_from(["gen_ai.user.message", "gen_ai.choice", "gen_ai.tool.message"]))
            body: Any = {"content": ctx.text("log_body")}
            if name == "gen_ai.choice":
                message = {"role": "assistant", "content": ctx.text("answer")}
                body = {"index": 0, "finish_reason": "stop", "message": message}
            if not ctx.json_only and not _proto_safe(body):
                body = {"content": "x"}
            sid: Id = s.span_id
            if draw(st.integers(0, 5)) == 0:
                sid = _bad_id(draw, 8)  # an event that cannot be joined: skipped, not an error
            when = s.start if 0 <= s.start <= U64_MAX else 0
            logs.append(LogSpec(s.trace_id, sid, name, when, {"event.name": name}, body))

    root_id = root.span_id.hex() if isinstance(root.span_id, bytes) else None
    plan = TracePlan(
        trace_id=trace_id.hex(),
        root_span_id=root_id,
        expect_run=not why_not and root_id is not None,
        why_not="; ".join(why_not),
        features=frozenset(ctx.feats),
        spans=len(spans),
        too_deep=over_limit and not ctx.feats & {"invalid_ids", "missing_ids", "parent_cycle", "duplicate_span_ids"},
    )
    return _TraceDraw(plan, spans, logs, ctx.json_only, enc_mode == "proto", ctx.feats, why_not, allowed_extra)


def _valid_ids(span: SpanSpec) -> bool:
    return isinstance(span.trace_id, bytes) and isinstance(span.span_id, bytes)


def _encode_spans(draw: Callable[[Any], Any], spans: list[SpanSpec], encoding: str) -> bytes:
    if encoding == "otlp_proto":
        return encode_spans_proto(spans, "fuzz-agent")
    return encode_spans_json(spans, "fuzz-agent", draw(_JSON_STYLES))


def _span_records(draw: Callable[[Any], Any], group: list[_TraceDraw]) -> list[FuzzRecord]:
    """The spans records of one trace split in 1..3 parts, or (``len(group) > 1``) one record of several traces."""
    t = group[0]
    multi = len(group) > 1
    if multi:
        parts = [[s for g in group for s in g.spans]]
    else:
        n = draw(st.integers(1, 3))
        parts = [t.spans[i::n] for i in range(n)] if draw(st.booleans()) else _chunks(t.spans, n)
        parts = [p for p in parts if p]
    feats_all: set[str] = set().union(*(g.feats for g in group))
    extra: set[str] = set().union(*(g.allowed_extra for g in group))
    out: list[FuzzRecord] = []
    for i, part in enumerate(parts):
        if any(g.json_only for g in group):
            encoding = "otlp_json"
        elif any(g.proto_only for g in group):
            encoding = "otlp_proto"
        else:
            encoding = draw(st.sampled_from(["otlp_proto", "otlp_json"]))
        value = _encode_spans(draw, part, encoding)
        feats = set(feats_all)
        allowed_extra = set(extra)
        if encoding == "otlp_json" and "surrogate" in feats:
            allowed_extra |= {"invalid_utf8", "invalid_json"}  # rejecting lone surrogates is acceptable
        base = OK if any(_valid_ids(s) for s in part) else "missing_ids"
        if len(parts) > 1:
            feats.add("split_trace")
        if multi:
            feats.add("multi_trace_record")
            key = None
            kind = f"spans of {len(group)} traces"
        else:
            key = t.plan.trace_id.encode() if draw(st.integers(0, 5)) else None
            kind = f"trace part {i + 1}/{len(parts)} ({len(part)} spans)"
        out.append(
            _finish_record(
                draw,
                topic="spans",
                key=key,
                value=value,
                encoding=encoding,
                features=feats,
                allowed=frozenset({base} | allowed_extra),
                traces=tuple(g.plan.trace_id for g in group),
                kind=kind,
            )
        )
    return out


def _log_records(draw: Callable[[Any], Any], t: _TraceDraw) -> list[FuzzRecord]:
    """The GenAI log events of a trace as one logs-topic record (none when the trace has no events)."""
    if not t.logs:
        return []
    encoding = "otlp_json" if t.json_only else draw(st.sampled_from(["otlp_proto", "otlp_json"]))
    if encoding == "otlp_proto":
        value = encode_logs_proto(t.logs, "fuzz-agent")
    else:
        value = encode_logs_json(t.logs, "fuzz-agent", draw(_JSON_STYLES))
    allowed = {OK}
    if encoding == "otlp_json" and "surrogate" in t.feats:
        allowed |= {"invalid_utf8", "invalid_json"}
    return [
        _finish_record(
            draw,
            topic="logs",
            key=t.plan.trace_id.encode(),
            value=value,
            encoding=encoding,
            features=set(t.feats) | {"logs"},
            allowed=frozenset(allowed),
            traces=(t.plan.trace_id,),
            kind=f"GenAI log events ({len(t.logs)})",
        )
    ]


def _chunks(items: list[SpanSpec], n: int) -> list[list[SpanSpec]]:
    size = max(1, math.ceil(len(items) / n))
    return [items[i : i + size] for i in range(0, len(items), size)]


# --------------------------------------------------------------------------- records that are bad on their own

JSON_NOT_OTLP: Final[tuple[tuple[bytes, frozenset[str]], ...]] = (
    (b"{}", frozenset({"no_spans"})),
    (b'{"foo": 1}', frozenset({"no_spans"})),
    (b'{"resourceSpans": null}', frozenset({"no_spans"})),
    (b'  \n {"resourceSpans": []}', frozenset({"no_spans"})),
    (b'{"a": {"b": [true, false, null, 1e999]}}', frozenset({"no_spans"})),
    (b'{"resourceSpans": 5}', frozenset({"invalid_structure"})),
    (b'{"resourceSpans": [1, 2]}', frozenset({"invalid_structure"})),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": "x"}]}]}', frozenset({"invalid_structure"})),
    (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": 5, "spanId": [1]}]}]}]}', frozenset({"missing_ids"})),
    (
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0af7651916cd43dd8448eb211c80319c", '
        b'"spanId": "b7ad6b7169203331", "attributes": "not a list"}]}]}]}',
        frozenset({"invalid_structure", OK}),
    ),
    (
        b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "0af7651916cd43dd8448eb211c80319c", '
        b'"spanId": "b7ad6b7169203332", "startTimeUnixNano": "soon", "kind": "SPAN_KIND_SERVER"}]}]}]}',
        frozenset({"invalid_structure", OK}),
    ),
    (b'{"resourceLogs": []}', frozenset({"invalid_structure"})),
    (b"[]", PROTO_GARBAGE),
    (b"[1, 2, 3]", PROTO_GARBAGE),
    (b'"just a string"', PROTO_GARBAGE),
    (b"42", PROTO_GARBAGE),
    (b"null", PROTO_GARBAGE),
    (b"true", PROTO_GARBAGE),
)
_VALID_SPAN_JSON = (
    '{"resourceSpans":[{"scopeSpans":[{"spans":[{"traceId":"5b8efff798038103d269b633813fc60c",'
    '"spanId":"eee19b7ec3c1b174","name":"invoke_agent NAME","startTimeUnixNano":"1700000000000000000",'
    '"endTimeUnixNano":"1700000001000000000","attributes":[{"key":"gen_ai.operation.name",'
    '"value":{"stringValue":"invoke_agent"}},{"key":"gen_ai.agent.name","value":{"stringValue":"NAME"}}]}]}]}]}'
)


@st.composite
def bad_records(draw: Callable[[Any], Any], budget: _Budget | None = None) -> FuzzRecord:
    """A record that is bad on its own (for the spans topic, sometimes the logs topic)."""
    budget = budget or _Budget()
    kind = draw(
        st.sampled_from(
            [
                "empty",
                "garbage",
                "json_not_otlp",
                "invalid_utf8_json",
                "surrogate_utf8_bytes",
                "proto_bad_utf8",
                "deep_anyvalue",
                "huge_bad",
                "logs_bad",
            ]
        )
    )
    topic = "spans"
    feats: set[str] = set()
    encoding = "raw"
    if kind == "empty":
        value: bytes | None = draw(st.sampled_from([b"", None]))
        feats.add("empty")
        topic = draw(st.sampled_from(["spans", "logs"]))
        return FuzzRecord(
            topic,
            draw(st.sampled_from([None, b"empty-key"])),
            value,
            "raw",
            frozenset(feats | ({"logs"} if topic == "logs" else set())),
            frozenset({"empty"}),
            kind="empty record",
        )
    if kind == "garbage":
        value = draw(st.binary(min_size=1, max_size=96))
        feats.add("garbage")
        allowed = ANY_OUTCOME
    elif kind == "json_not_otlp":
        value, allowed = draw(st.sampled_from(JSON_NOT_OTLP))
        feats.add("json_not_otlp")
    elif kind == "invalid_utf8_json":
        name = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xe2\x82", b"\xf0\x9f\x98"]))
        value = _VALID_SPAN_JSON.encode().replace(b"NAME", b"agent" + name, 1)
        feats.update({"invalid_utf8", "otlp_json"})
        encoding = "otlp_json"
        allowed = frozenset({"invalid_utf8"})
    elif kind == "surrogate_utf8_bytes":  # CESU-style bytes of a lone surrogate: not UTF-8
        value = _VALID_SPAN_JSON.replace("NAME", "agent\ud800").encode("utf-8", "surrogatepass")
        feats.update({"invalid_utf8", "surrogate", "otlp_json"})
        encoding = "otlp_json"
        allowed = frozenset({"invalid_utf8"})
    elif kind == "proto_bad_utf8":
        placeholder = "\x01\x02\x03\x04\x05\x06"
        spans = [
            SpanSpec(
                b"\x5b" * 16,
                b"\xee" * 8,
                None,
                placeholder,
                attrs={"gen_ai.operation.name": "invoke_agent"},
                start=1,
                end=2,
            )
        ]
        good = encode_spans_proto(spans, "fuzz-agent")
        bad = draw(st.sampled_from([b"\xed\xa0\x80\xed\xb0\x80", b"\xff\xfe\xfd\xfc\xfb\xfa", b"ab\xc0\x80cd"]))
        value = good.replace(placeholder.encode(), bad, 1)
        feats.update({"proto_bad_utf8", "otlp_proto"})
        encoding = "otlp_proto"
        allowed = frozenset({"invalid_protobuf"})
    elif kind == "deep_anyvalue":
        feats.add("deep_anyvalue")
        span = SpanSpec(b"\x5c" * 16, b"\xef" * 8, None, "deep", attrs={"fuzz.deep": None}, start=1, end=2)
        if draw(st.booleans()):
            span.attrs["fuzz.deep"] = Deep(draw(st.integers(120, 400)))
            value = encode_spans_proto([span], "fuzz-agent")
            encoding = "otlp_proto"
            allowed = frozenset({OK, "invalid_protobuf"})
        else:
            span.attrs["fuzz.deep"] = Deep(draw(st.integers(400, 3000)))
            value = encode_spans_json([span], "fuzz-agent", JsonStyle())
            encoding = "otlp_json"
            allowed = frozenset({OK, "invalid_json", "invalid_structure"})
        feats.add(encoding)
    elif kind == "huge_bad":
        size = draw(st.sampled_from([1_100_000, 1_600_000, MAX_RECORD_BYTES + 1000, MAX_RECORD_BYTES + 1000]))
        if size > budget.huge_left:
            size = 1_050_000
        budget.huge_left -= size
        if draw(st.booleans()):
            value = b"{" + b"x" * (size - 1)
            encoding = "otlp_json"
            allowed = frozenset({"invalid_json"})
        else:
            value = b"\x0a\xff\xff\xff\x7f" + b"\x00" * (size - 5)  # a length prefix far past the end
            encoding = "otlp_proto"
            allowed = frozenset({"invalid_protobuf"})
        feats.add(encoding)
    else:  # logs_bad
        topic = "logs"
        value, allowed = draw(
            st.sampled_from(
                [
                    (b'{"resourceLogs": 5}', frozenset({"invalid_structure"})),
                    (b'{"resourceLogs": [{"scopeLogs": "x"}]}', frozenset({"invalid_structure"})),
                    (b"{}", frozenset({OK})),
                    (b"{\xff}", frozenset({"invalid_utf8"})),
                    (b"\x0a\x05\x12", frozenset({"invalid_protobuf"})),
                ]
            )
        )
        feats.add("json_not_otlp")
    return _finish_record(
        draw,
        topic=topic,
        key=draw(st.sampled_from([None, b"bad-key", b"\x00\xff"])),
        value=value,
        encoding=encoding,
        features=feats,
        allowed=allowed,
        traces=(),
        kind=f"bad record ({kind})",
        mutate=kind in ("json_not_otlp", "garbage"),
    )


# --------------------------------------------------------------------------- batches


@st.composite
def batches(draw: Callable[[Any], Any], max_traces: int = 5, max_bad: int = 4) -> Batch:
    """Records of 1..``max_traces`` generated traces (split, merged, with logs) and 0..``max_bad`` bad records,
    in a drawn order. At most about half the records are bad, far below any dead-letter rate limit."""
    budget = _Budget()
    traces = [draw(_trace(budget)) for _ in range(draw(st.integers(1, max_traces)))]
    records: list[FuzzRecord] = []
    rest = list(traces)
    if len(rest) >= 2 and draw(st.integers(0, 3)) == 0:  # a Collector without partition_traces_by_id
        records.extend(_span_records(draw, rest[:2]))
        rest = [replace(t, spans=[]) for t in rest[:2]] + rest[2:]
    for t in rest:
        if t.spans:
            records.extend(_span_records(draw, [t]))
        records.extend(_log_records(draw, t))
    if records and draw(st.integers(0, 5)) == 0:  # a retried export: the same record value twice
        copy = records[draw(st.integers(0, len(records) - 1))]
        records.append(replace(copy, features=copy.features | {"duplicate_record"}, kind=copy.kind + " (again)"))
    n_bad = draw(st.integers(0, min(max_bad, max(1, len(records)))))
    records.extend(draw(bad_records(budget)) for _ in range(n_bad))
    order = draw(st.permutations(range(len(records))))
    return Batch(tuple(records[i] for i in order), tuple(t.plan for t in traces))


def record_values(max_traces: int = 3) -> st.SearchStrategy[FuzzRecord]:
    """One record at a time (good, hostile or bad): for tests that want a flat stream."""
    return st.one_of(batches(max_traces=max_traces, max_bad=1).map(lambda b: b.records[0]), bad_records())
