"""Convention gotchas, one test each (``shared/reference/otel-agent-spans.md`` §0, §7, §8).

Spans here are hand-built where no installable library emits the shape (each test names its source);
real frameworks' spans are covered by tests/integration.
"""

from __future__ import annotations

import json

from monitor.trajectory.build import build_runs
from monitor.trajectory.model import ABSENT, Malformed, ToolResultPart
from monitor.trajectory.normalize import Role, normalize
from monitor.trajectory.spans import LogEvent, SpanEvent
from tests.spanutil import make_span

ROOT = "a" * 16


def _agent(**attrs: object) -> object:
    return make_span(
        "invoke_agent weather",
        span_id=ROOT,
        start=0,
        end=10_000,
        **{"gen_ai__operation__name": "invoke_agent", "gen_ai__agent__name": "weather", **attrs},
    )


def _chat(span_id: str, start: int, end: int, output: list[dict], parent: str = ROOT, **attrs: object) -> object:
    return make_span(
        "chat m",
        span_id=span_id,
        parent=parent,
        start=start,
        end=end,
        **{
            "gen_ai__operation__name": "chat",
            "gen_ai__request__model": "m",
            "gen_ai__output__messages": json.dumps([{"role": "assistant", "parts": output}]),
            **attrs,
        },
    )


def _tool(span_id: str, name: str, start: int, parent: str = ROOT, **attrs: object) -> object:
    return make_span(
        f"execute_tool {name}",
        span_id=span_id,
        parent=parent,
        start=start,
        end=start + 10,
        **{"gen_ai__operation__name": "execute_tool", "gen_ai__tool__name": name, **attrs},
    )


def test_tool_spans_without_ids_merge_with_the_kth_same_named_part_of_their_step() -> None:
    """OpenInference and OpenLLMetry tool spans carry no call id; ADK 2.x ids differ from the model's."""
    parts = [
        {"type": "tool_call", "id": "call_a", "name": "get_weather", "arguments": {"city": "Paris"}},
        {"type": "tool_call", "id": "call_b", "name": "get_weather", "arguments": {"city": "Oslo"}},
    ]
    spans = [
        _agent(),
        _chat("c1", 100, 200, parts),
        _tool("t1", "get_weather", 300, **{"gen_ai__tool__call__id": "adk-1234"}),
        _tool("t2", "get_weather", 310),
        _chat("c2", 400, 500, [{"type": "text", "content": "done"}]),
    ]
    (run,) = build_runs(spans)
    assert [(c.name, c.args, c.step, c.part, c.executed) for c in run.calls] == [
        ("get_weather", {"city": "Paris"}, 0, 0, True),
        ("get_weather", {"city": "Oslo"}, 0, 1, True),
    ]
    assert run.calls[0].call_id == "adk-1234" and run.calls[1].call_id == "call_b"


def test_selected_but_never_executed_calls_stay_in_the_run() -> None:
    spans = [
        _agent(),
        _chat("c1", 100, 200, [{"type": "tool_call", "id": "x", "name": "delete_all", "arguments": "{}"}]),
    ]
    (run,) = build_runs(spans)
    (call,) = run.calls
    assert call.name == "delete_all" and not call.executed and call.step == 0 and call.args == {}


def test_adk_merged_parallel_span_is_not_a_call_and_not_specified_id_is_none() -> None:
    """google-adk 2.13 `execute_tool (merged)` with gen_ai.tool.name="(merged tools)"; failed tools say
    `<not specified>` (google/adk/telemetry/tracing.py)."""
    spans = [
        _agent(),
        _tool("t1", "get_weather", 100, **{"gen_ai__tool__call__id": "<not specified>", "error__type": "Timeout"}),
        make_span(
            "execute_tool (merged)",
            span_id="m1",
            parent=ROOT,
            start=200,
            **{"gen_ai__operation__name": "execute_tool", "gen_ai__tool__name": "(merged tools)"},
        ),
    ]
    (run,) = build_runs(spans)
    (call,) = run.calls
    assert call.call_id is None and call.error is not None and call.error.type == "Timeout"


def test_tool_call_response_accepts_result_and_response_keys() -> None:
    """The JSON schema says `response`; the registry example and pydantic-ai use `result`."""
    for key in ("response", "result"):
        msgs = json.dumps([{"role": "tool", "parts": [{"type": "tool_call_response", "id": "1", key: {"t": 1}}]}])
        f = normalize(_chat("c1", 0, 1, [], **{"gen_ai__input__messages": msgs}))
        (part,) = f.input_messages[0].parts  # type: ignore[index]
        assert isinstance(part, ToolResultPart) and part.response == {"t": 1}


def test_pydantic_ai_v1_running_tool_span_has_no_operation_name() -> None:
    """pydantic-ai ≤ 1.x instrumentation version 2: `running tool` with tool_arguments/tool_response."""
    span = make_span(
        "running tool",
        span_id="t1",
        parent=ROOT,
        **{"gen_ai__tool__name": "add", "tool_arguments": '{"x": 1}', "tool_response": "2"},
    )
    f = normalize(span)
    assert f.role is Role.TOOL and f.tool_name == "add" and f.args == {"x": 1} and f.result == 2


def test_openllmetry_langchain_envelopes_are_unwrapped() -> None:
    """opentelemetry-instrumentation-langchain writes args/results wrapped, in both key families."""
    envelope = json.dumps(
        {"input_str": "{'city': 'Paris'}", "tags": [], "metadata": {}, "inputs": {"city": "Paris"}, "kwargs": {}}
    )
    span = make_span(
        "execute_tool get_weather",
        span_id="t1",
        **{
            "traceloop__span__kind": "tool",
            "traceloop__entity__name": "get_weather",
            "gen_ai__operation__name": "execute_tool",
            "gen_ai__tool__name": "get_weather",
            "gen_ai__tool__call__arguments": envelope,
            "traceloop__entity__input": envelope,
            "gen_ai__tool__call__result": json.dumps({"output": "sunny", "kwargs": {}}),
        },
    )
    f = normalize(span)
    assert f.args == {"city": "Paris"} and f.result == "sunny"
    assert {"gen_ai", "openllmetry"} <= f.conventions


def test_traceloop_decorator_input_envelope() -> None:
    """traceloop-sdk @tool: traceloop.entity.input = {"args": [...], "kwargs": {...}}."""
    span = make_span(
        "lookup.tool",
        span_id="t1",
        **{
            "traceloop__span__kind": "tool",
            "traceloop__entity__name": "lookup",
            "traceloop__entity__input": json.dumps({"args": [], "kwargs": {"order_id": "A-17"}}),
        },
    )
    f = normalize(span)
    assert f.role is Role.TOOL and f.tool_name == "lookup" and f.args == {"order_id": "A-17"}


def test_openinference_on_an_adk_span_reads_arguments_not_tool_parameters() -> None:
    """openinference-instrumentation-google-adk sets tool.parameters to the *arguments* on ADK's span."""
    span = make_span(
        "execute_tool get_weather",
        span_id="t1",
        **{
            "gen_ai__operation__name": "execute_tool",
            "gen_ai__tool__name": "get_weather",
            "openinference__span__kind": "TOOL",
            "tool__parameters": '{"city": "Paris"}',
            "input__value": '{"city": "Paris"}',
            "output__value": '{"result": "rainy"}',
        },
    )
    f = normalize(span)
    assert f.args == {"city": "Paris"} and f.result == {"result": "rainy"}
    assert {"gen_ai", "openinference"} <= f.conventions


def test_openllmetry_legacy_flattened_prompt_and_completion() -> None:
    """OpenLLMetry before 2026-03: gen_ai.prompt.N.* / gen_ai.completion.N.tool_calls.M.* / llm.request.functions.N.*"""
    span = make_span(
        "anthropic.chat",
        span_id="c1",
        **{
            "llm.request.type": "chat",
            "gen_ai.system": "Anthropic",
            "gen_ai.request.model": "claude",
            "gen_ai.prompt.0.role": "user",
            "gen_ai.prompt.0.content": "Weather in Paris?",
            "gen_ai.completion.0.role": "assistant",
            "gen_ai.completion.0.tool_calls.0.id": "toolu_1",
            "gen_ai.completion.0.tool_calls.0.name": "get_weather",
            "gen_ai.completion.0.tool_calls.0.arguments": '{"city": "Paris"}',
            "llm.request.functions.0.name": "get_weather",
            "llm.request.functions.0.description": "Weather",
            "llm.request.functions.0.input_schema": '{"type": "object"}',
            "gen_ai.usage.prompt_tokens": 10,
        },
    )
    (run,) = build_runs([span])
    assert run.user_text == "Weather in Paris?"
    assert [(c.name, c.args, c.executed) for c in run.calls] == [("get_weather", {"city": "Paris"}, False)]
    assert run.tools_offered is not None and run.tools_offered[0].input_schema == {"type": "object"}
    assert run.usage.input_tokens == 10


def test_openinference_flattened_messages_and_tools() -> None:
    """OpenInference: llm.input_messages.N.message.*, llm.output_messages.N.message.tool_calls.M.tool_call.*"""
    span = make_span(
        "Messages",
        span_id="c1",
        **{
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Weather in Oslo?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.tool_calls.0.tool_call.id": "toolu_1",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
            "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Oslo"}',
            "llm.tools.0.tool.json_schema": json.dumps(
                {"name": "get_weather", "description": "w", "input_schema": {"type": "object"}}
            ),
            "llm.token_count.prompt": 5,
        },
    )
    (run,) = build_runs([span])
    assert run.user_text == "Weather in Oslo?" and run.calls[0].args == {"city": "Oslo"}
    assert run.tools_offered is not None and run.tools_offered[0].name == "get_weather"


def test_strands_legacy_tool_content_lives_in_span_events() -> None:
    """strands-agents 1.62 default mode: args in event gen_ai.tool.message, result in gen_ai.choice."""
    span = make_span(
        "execute_tool get_weather",
        span_id="t1",
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather", "gen_ai.tool.status": "error"},
    )
    span = span.__class__(
        **{
            **{f: getattr(span, f) for f in span.__dataclass_fields__},
            "events": (
                SpanEvent(
                    "gen_ai.tool.message", 1, {"role": "tool", "content": '{"city": "Paris"}', "id": "tooluse_1"}
                ),
                SpanEvent("gen_ai.choice", 2, {"message": '[{"text": "Error: Timeout"}]', "id": "tooluse_1"}),
            ),
        }
    )
    f = normalize(span)
    assert f.args == {"city": "Paris"} and f.call_id == "tooluse_1" and f.result == "Error: Timeout"
    assert f.error is not None


def test_event_mode_log_records_are_joined_to_their_chat_span() -> None:
    """GenAI ≤ 1.36 events travel as OTLP log records (otlp_logs topic)."""
    chat = make_span("chat m", span_id="c1", **{"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
    trace = chat.trace_id
    logs = [
        LogEvent(trace, "c1", "gen_ai.user.message", 1, {}, {"content": "Weather in Lima?"}),
        LogEvent(
            trace,
            "c1",
            "gen_ai.choice",
            2,
            {},
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "get_weather", "arguments": '{"city": "Lima"}'},
                        }
                    ]
                },
            },
        ),
    ]
    (run,) = build_runs([chat], logs)
    assert run.user_text == "Weather in Lima?"
    assert [(c.name, c.args, c.call_id) for c in run.calls] == [("get_weather", {"city": "Lima"}, "call_1")]


def test_openai_agents_two_invoke_agent_spans_make_one_run_and_repr_output_is_parsed() -> None:
    """opentelemetry-instrumentation-openai-agents-v2: a nameless root invoke_agent wraps the agent's;
    chat output text is the SDK object's repr."""
    repr_text = (
        "ResponseFunctionToolCall(arguments='{\"city\": \"Lima\"}', call_id='call_1', name='get_weather', "
        "type='function_call', id='fc_1', status='completed')"
    )
    spans = [
        make_span("Agent workflow", span_id="r0", start=0, end=1000, **{"gen_ai.operation.name": "invoke_agent"}),
        make_span(
            "invoke_agent triage",
            span_id=ROOT,
            parent="r0",
            start=1,
            end=999,
            **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage"},
        ),
        _chat("c1", 10, 20, [{"type": "text", "content": repr_text}]),
        _tool("t1", "get_weather", 30, **{"gen_ai.tool.call.arguments": '{"city": "Lima"}'}),
    ]
    (run,) = build_runs(spans)
    assert run.agent == "triage" and run.children == ()
    (call,) = run.calls
    assert (call.name, call.args, call.step, call.executed) == ("get_weather", {"city": "Lima"}, 0, True)


def test_nested_model_spans_are_one_model_call() -> None:
    """An instrumentation over the anthropic SDK's own gen_ai spans: one call appears twice, nested."""
    outer = make_span(
        "Messages",
        span_id="c1",
        parent=ROOT,
        start=10,
        end=100,
        **{
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "hi",
        },
    )
    inner = _chat("c2", 20, 90, [{"type": "tool_call", "id": "t", "name": "f", "arguments": {}}], parent="c1")
    (run,) = build_runs([_agent(), outer, inner])
    assert len(run.steps) == 1 and run.steps[0].tool_calls[0].name == "f" and run.user_text == "hi"


def test_agent_as_tool_makes_a_nested_run_and_a_call_of_kind_agent() -> None:
    spans = [
        _agent(),
        _tool("t1", "ask_researcher", 100, **{"gen_ai.tool.call.arguments": '{"q": "x"}'}),
        make_span(
            "invoke_agent researcher",
            span_id="r1",
            parent="t1",
            start=101,
            end=105,
            **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "researcher"},
        ),
        _tool("t2", "search", 102, parent="r1"),
    ]
    (run,) = build_runs(spans)
    assert [c.kind for c in run.calls] == ["agent"]
    (child,) = run.children
    assert child.agent == "researcher" and child.parent_run_id == ROOT and [c.name for c in child.calls] == ["search"]


def test_no_agent_span_makes_a_run_of_the_outermost_span() -> None:
    spans = [
        make_span("handle request", span_id="h1", start=0, end=100),
        _chat("c1", 10, 20, [{"type": "tool_call", "id": "1", "name": "f", "arguments": {}}], parent="h1"),
        _tool("t1", "f", 30, parent="h1"),
    ]
    (run,) = build_runs(spans)
    assert run.run_id == "h1" and run.agent is None and len(run.calls) == 1 and run.calls[0].executed


def test_content_not_captured_is_a_run_without_arguments() -> None:
    (run,) = build_runs([_agent(), _tool("t1", "get_weather", 10)])
    assert run.calls[0].args is ABSENT and not run.content_captured


def test_malformed_arguments_keep_their_raw_text() -> None:
    (run,) = build_runs([_agent(), _tool("t1", "f", 10, **{"gen_ai.tool.call.arguments": "{city: Paris"})])
    assert run.calls[0].args == Malformed("{city: Paris")


def test_empty_conversation_id_is_not_a_conversation() -> None:
    (run,) = build_runs([_agent(**{"gen_ai.conversation.id": ""})])
    assert run.conversation_id is None


def test_clock_skew_and_duplicate_spans_do_not_break_the_rebuild() -> None:
    skewed = make_span(
        "execute_tool f",
        span_id="t1",
        parent=ROOT,
        start=500,
        end=100,
        **{"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "f"},
    )
    (run,) = build_runs([_agent(), skewed, skewed, _agent()])
    (call,) = run.calls
    assert call.duration_ms == 0.0


def test_langgraph_through_openinference_is_one_run_with_its_tool_calls() -> None:
    """openinference-instrumentation-langchain on a LangGraph ReAct agent: a root CHAIN, one AGENT span per
    model turn (LangChain runs named "agent" are forced to AGENT) and the tools under a sibling "tools" chain;
    tool inputs are LangChain's Python-repr ``input_str``."""
    kind = "openinference.span.kind"
    spans = [
        make_span(
            "LangGraph",
            span_id="r0",
            start=0,
            end=1000,
            **{kind: "CHAIN", "input.value": '{"messages": [["user", "Weather in Oslo?"]]}'},
        ),
        make_span("agent", span_id="a1", parent="r0", start=10, end=100, **{kind: "AGENT"}),
        make_span(
            "ChatAnthropic",
            span_id="l1",
            parent="a1",
            start=20,
            end=90,
            **{
                kind: "LLM",
                "llm.input_messages.0.message.role": "user",
                "llm.input_messages.0.message.content": "Weather in Oslo?",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.tool_calls.0.tool_call.id": "toolu_1",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.name": "get_weather",
                "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments": '{"city": "Oslo"}',
            },
        ),
        make_span("tools", span_id="t0", parent="r0", start=110, end=200, **{kind: "CHAIN"}),
        make_span(
            "get_weather",
            span_id="t1",
            parent="t0",
            start=120,
            end=190,
            **{kind: "TOOL", "tool.name": "get_weather", "input.value": "{'city': 'Oslo'}", "output.value": "cloudy"},
        ),
        make_span("agent", span_id="a2", parent="r0", start=210, end=300, **{kind: "AGENT"}),
        make_span(
            "ChatAnthropic",
            span_id="l2",
            parent="a2",
            start=220,
            end=290,
            **{
                kind: "LLM",
                "llm.output_messages.0.message.role": "assistant",
                "llm.output_messages.0.message.content": "Cloudy in Oslo.",
            },
        ),
    ]
    (run,) = build_runs(spans)
    assert run.agent == "agent" and run.children == ()
    assert [(c.name, c.args, c.executed, c.step) for c in run.calls] == [("get_weather", {"city": "Oslo"}, True, 0)]
    assert run.user_text == "Weather in Oslo?" and run.final_response == "Cloudy in Oslo."
