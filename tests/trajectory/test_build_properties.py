"""Property: no span content, however odd, makes the rebuild raise; every call keeps a valid shape."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.trajectory.build import build_runs
from monitor.trajectory.spans import SpanEvent, SpanRecord

KEYS = [
    "gen_ai.operation.name",
    "gen_ai.tool.name",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.definitions",
    "gen_ai.agent.name",
    "gen_ai.conversation.id",
    "gen_ai.usage.input_tokens",
    "openinference.span.kind",
    "input.value",
    "output.value",
    "tool.name",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.name",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.tools.0.tool.json_schema",
    "traceloop.span.kind",
    "traceloop.entity.name",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "gen_ai.prompt.0.content",
    "gen_ai.completion.0.tool_calls.0.name",
    "tool_arguments",
    "final_result",
    "pydantic_ai.all_messages",
    "gcp.vertex.agent.llm_request",
    "gcp.vertex.agent.tool_call_args",
    "gen_ai.handoff.to_agent",
]
OPS = ["chat", "execute_tool", "invoke_agent", "invoke_workflow", "agent_handoff", "response", "x"]
KINDS = ["TOOL", "AGENT", "LLM", "CHAIN", "tool", "agent", "workflow"]

json_leaf = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
json_doc = st.recursive(
    json_leaf, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=8
)
message_like = st.lists(
    st.fixed_dictionaries(
        {"role": st.sampled_from(["user", "assistant", "tool", "model", 3])},
        optional={
            "parts": st.lists(
                st.fixed_dictionaries(
                    {"type": st.sampled_from(["text", "tool_call", "tool_call_response", "blob", 7])},
                    optional={"name": json_leaf, "id": json_leaf, "arguments": json_doc, "content": json_doc},
                ),
                max_size=3,
            ),
            "content": json_doc,
            "tool_calls": json_doc,
        },
    ),
    max_size=3,
)
value = st.one_of(
    json_leaf,
    st.sampled_from(OPS + KINDS),
    json_doc.map(json.dumps),
    message_like.map(json.dumps),
    message_like,
    st.text(max_size=30),
    st.binary(max_size=8),
)


@st.composite
def spans(draw: st.DrawFn) -> list[SpanRecord]:
    n = draw(st.integers(1, 8))
    ids = [f"{i + 1:016x}" for i in range(n)]
    out = []
    for i, span_id in enumerate(ids):
        parent = draw(st.sampled_from([None, "ffffffffffffffff", *ids[:i]]))
        attrs = draw(st.dictionaries(st.sampled_from(KEYS), value, max_size=6))
        start = draw(st.integers(0, 10_000))
        events = tuple(
            SpanEvent(
                draw(st.sampled_from(["gen_ai.choice", "gen_ai.tool.message", "exception", "gen_ai.user.message"])),
                1,
                draw(
                    st.dictionaries(st.sampled_from(["content", "message", "id", "exception.type"]), value, max_size=3)
                ),
                draw(st.one_of(st.none(), json_doc)),
            )
            for _ in range(draw(st.integers(0, 2)))
        )
        out.append(
            SpanRecord(
                trace_id="ab" * 16,
                span_id=span_id,
                parent_span_id=parent,
                name=draw(
                    st.sampled_from(["execute_tool x", "invoke_agent a", "running tool", "chat m", "agent run", "s"])
                ),
                start_ns=start,
                end_ns=draw(st.integers(0, 20_000)),
                attributes=attrs,
                events=events,
                status_code=draw(st.integers(0, 2)),
            )
        )
    return out


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans())
def test_the_rebuild_never_raises_and_calls_are_well_formed(batch: list[SpanRecord]) -> None:
    for run in build_runs(batch):
        for r in run.walk():
            assert [c.index for c in r.calls] == list(range(len(r.calls)))
            assert all(isinstance(c.name, str) for c in r.calls)
            assert r.user_text is None or isinstance(r.user_text, str)
            assert r.final_response is None or isinstance(r.final_response, str)
