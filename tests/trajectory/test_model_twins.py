"""One model call recorded by two sibling model spans is one step; only evidence merges them.

The recorded shapes (OpenLLMetry's ``anthropic.chat`` or OpenInference's ``messages.stream`` beside the anthropic
SDK's own ``anthropic.messages.create``) are in tests/fixtures/frameworks/{traceloop_sdk_anthropic,
openinference_anthropic_stream}; the cases here isolate each kind of evidence
(:class:`monitor.trajectory.semconv.ModelCallIdentity`), and the cases where overlap in time is all there is.
"""

from __future__ import annotations

import json
from typing import Any

from monitor.trajectory.build import build_runs
from monitor.trajectory.model import ABSENT
from tests.spanutil import make_span

ROOT = "a" * 16


def _agent() -> Any:
    return make_span(
        "invoke_agent travel",
        span_id=ROOT,
        start=0,
        end=100_000,
        **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "travel"},
    )


def _content_span(span_id: str, start: int, end: int, parts: list[dict[str, Any]], **attrs: Any) -> Any:
    """OpenLLMetry 0.62 ``anthropic.chat``: content as OTel GenAI messages."""
    return make_span(
        "anthropic.chat",
        span_id=span_id,
        parent=ROOT,
        start=start,
        end=end,
        **{
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "claude",
            "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
            **attrs,
        },
    )


def _native_span(span_id: str, start: int, end: int, **attrs: Any) -> Any:
    """The anthropic SDK's own span, metadata only (its default): no content at all."""
    return make_span(
        "anthropic.messages.create",
        span_id=span_id,
        parent=ROOT,
        start=start,
        end=end,
        **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "claude", **attrs},
    )


def _oi_stream_span(span_id: str, start: int, end: int, response: dict[str, Any]) -> Any:
    """OpenInference 3.1 ``messages.stream``: the whole Message as ``output.value``, no response-id attribute."""
    return make_span(
        "messages.stream",
        span_id=span_id,
        parent=ROOT,
        start=start,
        end=end,
        **{
            "openinference.span.kind": "LLM",
            "llm.model_name": "claude",
            "output.value": json.dumps(response),
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "".join(
                b.get("text", "") for b in response["content"] if b["type"] == "text"
            ),
        },
    )


def _tool(span_id: str, name: str, start: int, args: dict[str, Any]) -> Any:
    """A decorator's tool span: no call id (traceloop ``@tool``, OpenInference ``OITracer.tool``)."""
    return make_span(
        f"{name}.tool",
        span_id=span_id,
        parent=ROOT,
        start=start,
        end=start + 10,
        **{"traceloop.span.kind": "tool", "traceloop.entity.name": name, "traceloop.entity.input": json.dumps(args)},
    )


WEATHER = {"type": "tool_call", "id": "toolu_1", "name": "get_weather", "arguments": {"city": "Paris"}}


def test_same_response_id_merges_a_content_span_with_a_metadata_only_sibling() -> None:
    """traceloop-sdk 0.62.4 on anthropic 2.12: both spans carry gen_ai.response.id."""
    spans = [
        _agent(),
        _content_span("c1", 100, 900, [WEATHER], **{"gen_ai.response.id": "msg_1"}),
        _native_span("n1", 120, 880, **{"gen_ai.response.id": "msg_1"}),
        _tool("t1", "get_weather", 1_000, {"city": "Paris"}),
        _content_span("c2", 2_000, 2_900, [{"type": "text", "content": "sunny"}], **{"gen_ai.response.id": "msg_2"}),
        _native_span("n2", 2_050, 2_850, **{"gen_ai.response.id": "msg_2"}),
    ]
    (run,) = build_runs(spans)
    assert [s.span_id for s in run.steps] == ["c1", "c2"]
    assert [(c.name, c.args, c.executed, c.step, c.part, c.call_id) for c in run.calls] == [
        ("get_weather", {"city": "Paris"}, True, 0, 0, "toolu_1")
    ]


def test_response_id_inside_an_openinference_output_value_is_evidence() -> None:
    """openinference-instrumentation-anthropic 3.1 with messages.stream: the id is only in output.value."""
    message = {"id": "msg_9", "type": "message", "role": "assistant", "content": [{"type": "text", "text": "hi"}]}
    spans = [
        _agent(),
        _oi_stream_span("o1", 100, 900, message),
        _native_span("n1", 150, 850, **{"gen_ai.response.id": "msg_9"}),
    ]
    (run,) = build_runs(spans)
    assert len(run.steps) == 1 and run.steps[0].text == "hi"


def test_different_response_ids_are_two_calls_even_with_the_same_output() -> None:
    """Two parallel model calls that happen to answer the same text are two steps: the ids say so."""
    text = [{"type": "text", "content": "ok"}]
    spans = [
        _agent(),
        _content_span("c1", 100, 900, text, **{"gen_ai.response.id": "msg_1"}),
        _content_span("c2", 150, 950, text, **{"gen_ai.response.id": "msg_2"}),
    ]
    (run,) = build_runs(spans)
    assert [s.span_id for s in run.steps] == ["c1", "c2"]


def test_same_usage_merges_a_metadata_only_span_without_response_id() -> None:
    """Without response ids, equal reported token counts are the evidence; overlap in time alone (n2 reports
    other counts, n3 none at all) never merges."""
    usage = {"gen_ai.usage.input_tokens": 111, "gen_ai.usage.output_tokens": 52}
    spans = [
        _agent(),
        _content_span("c1", 100, 900, [WEATHER], **usage),
        _native_span("n1", 120, 880, **usage),
        _native_span("n2", 130, 870, **{"gen_ai.usage.input_tokens": 111, "gen_ai.usage.output_tokens": 7}),
        _native_span("n3", 140, 860),
    ]
    (run,) = build_runs(spans)
    assert [s.span_id for s in run.steps] == ["c1", "n2", "n3"]
    assert run.steps[0].usage.input_tokens == 111 and run.usage.input_tokens == 222


def test_a_selected_call_with_the_same_name_and_arguments_is_linked_to_its_execution() -> None:
    """The tool span starts after a later model span began (outside its step's window), yet it is that call;
    a tool span with other arguments is not linked by its name alone."""

    def spans(tool_args: dict[str, Any]) -> list[Any]:
        return [
            _agent(),
            _content_span("c1", 100, 900, [WEATHER]),
            _native_span("n1", 120, 880),  # a sibling nothing identifies as the same call: its own step
            _tool("t1", "get_weather", 1_000, tool_args),
        ]

    (run,) = build_runs(spans({"city": "Paris"}))
    assert len(run.steps) == 2
    assert [(c.name, c.executed, c.step, c.part, c.call_id) for c in run.calls] == [
        ("get_weather", True, 0, 0, "toolu_1")
    ]
    (run,) = build_runs(spans({"city": "Oslo"}))
    assert sorted((c.executed, c.args["city"]) for c in run.calls) == [(False, "Paris"), (True, "Oslo")]
    assert all(c.args is not ABSENT for c in run.calls)
