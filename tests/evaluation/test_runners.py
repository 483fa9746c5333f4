"""Runners (SCORING.md §6.6): real agents → real OTel SDK → our decoder and trajectory builder.

Ground truth never comes from spans: tools record the arguments they received, the fake Anthropic server records the
requests it got and the responses it sent, runner commands write the environment they saw.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import shlex
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import pytest

from monitor.evaluation.runner_command import assign_turns
from monitor.evaluation.runners import (
    CONTENT_CAPTURE_ENV,
    OtlpReceiver,
    RunnerFailed,
    anthropic_executor,
    case_payload,
    command_runner,
    in_process_runner,
    mock_tool_execution,
)
from monitor.rules.datasets.model import Case, Turn
from monitor.scoring.expectation import Expectation
from monitor.trajectory.model import ABSENT, Message, Run, TextPart, ToolDef
from monitor.trajectory.view import view
from tests.evaluation import agents_for_tests as agents
from tests.support.fake_anthropic import Error, FakeAnthropic, tool_results, tool_uses
from tests.support.fake_anthropic import Turn as FakeTurn

AGENTS = "tests.evaluation.agents_for_tests"
SCRIPT = Path(__file__).with_name("otlp_agent_script.py")
WEATHER_TOOLS = (
    ToolDef(
        "get_weather",
        "Get current weather for a city",
        {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    ),
    ToolDef("get_forecast", None, None),  # seed-001 style: a name only
)


def make_case(*texts: str, case_id: str = "c1", tools: tuple[ToolDef, ...] | None = None, **config: Any) -> Case:
    return Case(
        id=case_id,
        source="native",
        turns=tuple(Turn((Message("user", (TextPart(t),)),), Expectation()) for t in texts),
        tools=tools,
        config=config,
    )


def attrs(run: Run) -> dict[str, str]:
    """The evaluation keys the runner put on the run (resource attributes are kept too)."""
    return {k: v for k, v in run.attributes if k.startswith("monitor.eval.")}


@pytest.fixture(autouse=True)
def _reset_agents() -> Iterator[None]:
    agents.reset()
    yield
    agents.reset()


# =========================================================================== in-process runner


def test_in_process_pydantic_ai_multi_turn_rebuilds_each_turn_and_passes_the_calling_convention() -> None:
    runner = in_process_runner(f"{AGENTS}:weather")
    assert runner.name == f"in_process:{AGENTS}:weather"
    runs = runner.run(make_case("What's the weather in Hanoi, and the time?", "And in Paris?"), 3)

    assert [r.agent for r in runs] == ["weather", "weather"]
    assert [r.user_text for r in runs] == ["What's the weather in Hanoi, and the time?", "And in Paris?"]
    assert [r.final_response for r in runs] == ["It is sunny in Hanoi.", "It is sunny in Paris."]
    # the tools' own record of what they received, in order, split by turn
    # the first turn's two calls run concurrently: the tools log them in whatever order they ran
    assert sorted(((c.name, c.args) for c in runs[0].calls), key=repr) == sorted(agents.TOOL_LOG[:2], key=repr)
    assert [(c.name, c.args) for c in runs[1].calls] == agents.TOOL_LOG[2:]
    first = runs[0].calls
    assert [c.result for c in first] == [{"city": "Hanoi", "sky": "sunny"}, "12:00"]
    assert all(c.executed and c.step == 0 for c in first) and [c.part for c in first] == [0, 1]
    assert sorted(t.name for t in runs[0].tools_offered or ()) == ["get_time", "get_weather"]
    assert [attrs(r) for r in runs] == [
        {"monitor.eval.case_id": "c1", "monitor.eval.turn": str(i), "monitor.eval.run": "3"} for i in range(2)
    ]
    assert runs[0].trace_id != runs[1].trace_id  # every turn is a trace of its own
    # the calling convention: text, case id, turn, and the conversation so far
    assert agents.CALLS == [
        {"input": "What's the weather in Hanoi, and the time?", "case_id": "c1", "turn": 0, "history": []},
        {
            "input": "And in Paris?",
            "case_id": "c1",
            "turn": 1,
            "history": [
                {"role": "user", "content": "What's the weather in Hanoi, and the time?"},
                {"role": "assistant", "content": "It is sunny in Hanoi."},
            ],
        },
    ]


def test_in_process_async_callable_gets_only_the_keywords_it_declares() -> None:
    runs = in_process_runner(f"{AGENTS}:weather_async").run(make_case("Hanoi?", "Paris?"), 0)
    assert [c.args for r in runs for c in r.calls] == [{"city": "Hanoi"}, {"city": "Paris"}]
    assert agents.CALLS == [{"input": "Hanoi?", "turn": 0}, {"input": "Paris?", "turn": 1}]


def test_in_process_text_only_callable() -> None:
    (run,) = in_process_runner(f"{AGENTS}:text_only").run(make_case("Weather in Paris?"), 0)
    assert agents.CALLS == [{"input": "Weather in Paris?"}]
    assert [(c.name, c.args) for c in run.calls] == agents.TOOL_LOG == [("get_weather", {"city": "Paris"})]


def test_in_process_var_keyword_callable_gets_every_keyword_and_history_falls_back_to_the_run() -> None:
    case = Case(
        id="kw",
        source="adk",
        turns=(
            Turn((Message("user", (TextPart("Hanoi?"),)),), Expectation(), session_input={"user_id": "u1"}),
            Turn((Message("user", (TextPart("Paris?"),)),), Expectation()),
        ),
    )
    in_process_runner(f"{AGENTS}:everything").run(case, 1)
    assert agents.CALLS[0] == {
        "input": "Hanoi?",
        "case_id": "kw",
        "turn": 0,
        "history": [],
        "run": 1,
        "session_input": {"user_id": "u1"},
    }
    # the callable returned None: the assistant's side of the history is the rebuilt run's final response
    assert agents.CALLS[1]["history"][-1] == {"role": "assistant", "content": "It is sunny in Hanoi."}


def test_in_process_pydantic_test_model_arguments_match_what_the_tool_received() -> None:
    (run,) = in_process_runner(f"{AGENTS}:plan_trip").run(make_case("Plan a trip to Lisbon."), 0)
    assert run.agent == "travel_planner"
    assert [(c.name, c.args) for c in run.calls] == agents.TOOL_LOG
    assert len(agents.TOOL_LOG) == 1


def test_in_process_nested_agents_choose_the_outermost_run() -> None:
    (run,) = in_process_runner(f"{AGENTS}:delegate").run(make_case("Who knows the capital of France?"), 0)
    assert run.agent == "router"
    assert [(c.name, c.kind) for c in run.calls] == [("ask_expert", "agent")]
    (child,) = run.children
    assert child.agent == "geography_expert" and child.parent_run_id == run.run_id
    assert [(c.name, c.args) for c in child.calls] == [("lookup_fact", {"topic": "France"})]
    flat = view(run, "auto", "flatten")
    assert [c.name for c in flat] == ["ask_expert", "lookup_fact"]


def test_in_process_plain_otel_api_agent() -> None:
    runs = in_process_runner(f"{AGENTS}:plain_otel").run(make_case("Hanoi?", "Again?"), 0)
    run = runs[0]
    assert run.agent == "plain"
    assert run.user_text == "Hanoi?"
    assert run.final_response == "Rain in Hanoi (0 earlier messages)."
    assert runs[1].final_response == "Rain in Hanoi (2 earlier messages)."
    (call,) = run.calls
    assert (call.name, call.call_id, call.args, call.result, call.executed, call.step) == (
        "get_weather",
        "call_1",
        {"city": "Hanoi"},
        {"sky": "rain"},
        True,
        0,
    )
    assert [(s.usage.input_tokens, s.usage.output_tokens) for s in run.steps] == [(11, 7), (None, None)]


def test_in_process_without_agent_span_the_runner_root_is_the_run_root() -> None:
    (run,) = in_process_runner(f"{AGENTS}:plain_no_agent_span").run(make_case("x"), 0)
    assert run.agent is None
    assert [(c.name, c.executed, c.step) for c in run.calls] == [("noop", True, 0)]
    assert attrs(run)["monitor.eval.case_id"] == "c1"


def test_in_process_agent_on_a_thread_without_context_is_still_found() -> None:
    (run,) = in_process_runner(f"{AGENTS}:lost_context").run(make_case("Hanoi?"), 0)
    assert run.agent == "weather" and [c.args for c in run.calls] == [{"city": "Hanoi"}]
    assert attrs(run)["monitor.eval.turn"] == "0"


def test_in_process_concurrent_cases_do_not_mix_spans() -> None:
    runner = in_process_runner(f"{AGENTS}:text_only")
    cities = ["Hanoi", "Paris"] * 4
    with concurrent.futures.ThreadPoolExecutor(max_workers=4) as pool:
        results = list(
            pool.map(lambda c: runner.run(make_case(f"Weather in {c[1]}?", case_id=f"k{c[0]}"), 0), enumerate(cities))
        )
    for i, (city, runs) in enumerate(zip(cities, results, strict=True)):
        (run,) = runs
        assert [c.args for c in run.calls] == [{"city": city}]
        assert attrs(run)["monitor.eval.case_id"] == f"k{i}"


@pytest.mark.parametrize(
    ("name", "reason", "fragment"),
    [
        ("explode", "exception", "ValueError: the agent broke"),
        ("no_spans", "missing_run", "no agent run"),
        ("two_agents", "ambiguous_run", "'travel_planner', 'weather'"),
    ],
)
def test_in_process_failures(name: str, reason: str, fragment: str) -> None:
    with pytest.raises(RunnerFailed) as info:
        in_process_runner(f"{AGENTS}:{name}").run(make_case("Hanoi?"), 0)
    assert info.value.reason == reason
    assert fragment in info.value.detail


def test_in_process_exception_keeps_the_cause() -> None:
    with pytest.raises(RunnerFailed) as info:
        in_process_runner(f"{AGENTS}:explode").run(make_case("x"), 0)
    assert isinstance(info.value.__cause__, ValueError)


@pytest.mark.parametrize("name", ["sleepy", "sleepy_async"])
def test_in_process_timeout(name: str) -> None:
    runner = in_process_runner(f"{AGENTS}:{name}", timeout_s=0.3)
    started = time.monotonic()
    with pytest.raises(RunnerFailed) as info:
        runner.run(make_case("x"), 0)
    assert info.value.reason == "timeout"
    assert time.monotonic() - started < 2.5


def test_in_process_spans_of_an_abandoned_turn_never_reach_a_later_case() -> None:
    with pytest.raises(RunnerFailed) as info:
        in_process_runner(f"{AGENTS}:sleepy_then_agent", timeout_s=0.3).run(make_case("Hanoi?"), 0)
    assert info.value.reason == "timeout"
    # the abandoned thread runs the weather agent while this case is open: its spans must not be taken as strays
    with pytest.raises(RunnerFailed) as info:
        in_process_runner(f"{AGENTS}:no_spans_slow").run(make_case("x"), 0)
    assert info.value.reason == "missing_run"
    assert agents.TOOL_LOG == [("get_weather", {"city": "Hanoi"})]  # the abandoned agent did run meanwhile


def test_in_process_sync_call_returning_after_the_deadline_is_a_timeout() -> None:
    with pytest.raises(RunnerFailed) as info:
        in_process_runner(f"{AGENTS}:no_spans_slow", timeout_s=1.0).run(make_case("x"), 0)
    assert info.value.reason == "timeout"


@pytest.mark.parametrize(
    ("spec", "fragment"),
    [
        ("no_colon", "is not 'module:callable'"),
        ("tests.evaluation.does_not_exist:f", "cannot import"),
        (f"{AGENTS}:missing", "has no attribute"),
        (f"{AGENTS}:not_callable", "is not callable"),
    ],
)
def test_in_process_config_errors(spec: str, fragment: str) -> None:
    with pytest.raises(RunnerFailed) as info:
        in_process_runner(spec)
    assert info.value.reason == "config"
    assert fragment in info.value.detail


def test_in_process_loads_a_file_path_spec() -> None:
    path = Path(__file__).with_name("agents_for_tests.py")
    (run,) = in_process_runner(f"{path}:plain_no_agent_span").run(make_case("x"), 0)
    assert [c.name for c in run.calls] == ["noop"]


def test_in_process_content_capture_env_is_set_during_the_case_only_and_user_values_win(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for key in CONTENT_CAPTURE_ENV:
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "false")
    in_process_runner(f"{AGENTS}:env_probe").run(make_case("x"), 0)
    assert agents.CALLS[-1] == {
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY",
        "TRACELOOP_TRACE_CONTENT": "false",
        "OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
    }
    assert "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT" not in os.environ
    assert os.environ["TRACELOOP_TRACE_CONTENT"] == "false"


# =========================================================================== Anthropic executors


def anthropic_client(fake: FakeAnthropic, **kwargs: Any) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=fake.base_url, api_key="test", **kwargs)


def responses(fake: FakeAnthropic) -> list[dict[str, Any]]:
    return [r.response for r in fake.requests if r.path == "/v1/messages" and r.status == 200]


def test_loop_executor_multi_turn_against_the_messages_api() -> None:
    script = [
        [("get_weather", {"city": "Hanoi"}), ("get_forecast", {"city": "Hanoi", "days": 5})],
        "Sunny in Hanoi, and the forecast is good.",
        FakeTurn(text="Checking Paris.", tool_uses=[("get_weather", {"city": "Paris"})]),
        "Rainy in Paris.",
    ]
    with FakeAnthropic(script) as fake:
        executor = anthropic_executor(
            "loop",
            "claude-haiku-4-5",
            client=anthropic_client(fake),
            system_prompt="You are a weather assistant.",
            tool_results={"get_forecast": lambda args: {"days": args["days"], "sky": ["sun"] * args["days"]}},
        )
        runs = executor.run(make_case("Weather in Hanoi?", "And Paris?", tools=WEATHER_TOOLS), 1)
        assert fake.unexpected == []
        requests = fake.message_requests
        answers = responses(fake)

    assert len(requests) == 4
    for request in requests:
        assert request["model"] == "claude-haiku-4-5"
        assert request["max_tokens"] == 2000
        assert request["system"] == "You are a weather assistant."
        assert "tool_choice" not in request
        assert request["tools"] == [
            {
                "name": "get_weather",
                "description": "Get current weather for a city",
                "input_schema": WEATHER_TOOLS[0].input_schema,
            },
            {"name": "get_forecast", "input_schema": {"type": "object"}},
        ]
    assert requests[0]["messages"] == [{"role": "user", "content": "Weather in Hanoi?"}]
    first_uses = tool_uses(answers[0])
    results = tool_results(requests[1])
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in first_uses]
    assert json.loads(results[0]["content"]) == mock_tool_execution("get_weather", {"city": "Hanoi"})
    assert json.loads(results[1]["content"]) == {"days": 5, "sky": ["sun"] * 5}
    # turn 2 carries the whole conversation of turn 1 forward
    assert requests[2]["messages"][:4] == requests[1]["messages"] + [
        {"role": "assistant", "content": [{"type": "text", "text": "Sunny in Hanoi, and the forecast is good."}]}
    ]
    assert requests[2]["messages"][4] == {"role": "user", "content": "And Paris?"}

    first, second = runs
    assert first.agent == "tool_evaluator" and first.user_text == "Weather in Hanoi?"
    assert first.final_response == "Sunny in Hanoi, and the forecast is good."
    assert second.user_text == "And Paris?" and second.final_response == "Rainy in Paris."
    assert [(c.name, c.call_id, c.args) for c in first.calls] == [(u["name"], u["id"], u["input"]) for u in first_uses]
    assert [c.result for c in first.calls] == [
        mock_tool_execution("get_weather", {"city": "Hanoi"}),
        {"days": 5, "sky": ["sun"] * 5},
    ]
    assert all(c.executed and c.step == 0 for c in first.calls) and [c.part for c in first.calls] == [0, 1]
    assert [(c.name, c.args, c.step) for c in second.calls] == [("get_weather", {"city": "Paris"}, 0)]
    # usage per step is the API's
    assert [(s.usage.input_tokens, s.usage.output_tokens) for s in first.steps] == [
        (a["usage"]["input_tokens"], a["usage"]["output_tokens"]) for a in answers[:2]
    ]
    assert [s.model for s in first.steps] == ["claude-haiku-4-5"] * 2
    assert [t.name for t in first.tools_offered or ()] == ["get_weather", "get_forecast"]
    # times: steps and tool calls nest in the run, tools run after the step that asked for them
    step0, step1 = first.steps
    assert first.start_ns is not None and first.end_ns is not None
    for call in first.calls:
        assert call.start_ns is not None and call.end_ns is not None and step0.end_ns is not None
        assert step0.end_ns <= call.start_ns <= call.end_ns <= (step1.start_ns or 0) <= first.end_ns
    assert first.end_ns <= (second.start_ns or 0)
    assert "gen_ai" in first.conventions
    assert first.conversation_id == second.conversation_id
    assert [attrs(r) for r in runs] == [
        {"monitor.eval.case_id": "c1", "monitor.eval.turn": str(i), "monitor.eval.run": "1"} for i in range(2)
    ]


def test_loop_executor_tool_stub_errors_become_errored_calls_and_is_error_results() -> None:
    def broken(args: Any) -> Any:
        raise TimeoutError("backend down")

    with FakeAnthropic([[("get_weather", {"city": "Hue"})], "Sorry."]) as fake:
        executor = anthropic_executor("loop", "m", client=anthropic_client(fake), tool_results={"get_weather": broken})
        (run,) = executor.run(make_case("Hue?", tools=WEATHER_TOOLS), 0)
        (result,) = tool_results(fake.message_requests[1])
    assert result["is_error"] is True and "backend down" in result["content"]
    (call,) = run.calls
    assert call.error is not None and call.error.type == "TimeoutError"
    assert call.result is ABSENT


def test_loop_executor_static_string_stub_is_sent_verbatim() -> None:
    with FakeAnthropic([[("get_weather", {"city": "Hue"})], "ok"]) as fake:
        ex = anthropic_executor("loop", "m", client=anthropic_client(fake), tool_results={"get_weather": "sunny"})
        (run,) = ex.run(make_case("Hue?", tools=WEATHER_TOOLS), 0)
        (result,) = tool_results(fake.message_requests[1])
    assert result["content"] == "sunny"
    assert run.calls[0].result == "sunny"


def test_loop_executor_stops_at_max_steps() -> None:
    with FakeAnthropic(default=[("get_weather", {"city": "Hue"})]) as fake:
        ex = anthropic_executor("loop", "m", client=anthropic_client(fake), max_steps=3)
        (run,) = ex.run(make_case("Hue?", tools=WEATHER_TOOLS), 0)
        assert len(fake.message_requests) == 3
    assert len(run.steps) == 3
    assert [(c.step, c.executed) for c in run.calls] == [(0, True), (1, True), (2, True)]
    assert run.final_response is None


def test_select_executor_is_one_call_with_tools_selected_not_executed() -> None:
    script = [FakeTurn(text="I'll look that up.", tool_uses=[("get_weather", {"city": "Hanoi"})])]
    with FakeAnthropic(script) as fake:
        ex = anthropic_executor("select", "claude-haiku-4-5", client=anthropic_client(fake))
        assert ex.name == "anthropic_select:claude-haiku-4-5"
        (run,) = ex.run(make_case("Weather in Hanoi?", tools=WEATHER_TOOLS), 0)
        (request,) = fake.message_requests
        (use,) = tool_uses(responses(fake)[0])
    assert "tool_choice" not in request and "system" not in request
    assert [t["name"] for t in request["tools"]] == ["get_weather", "get_forecast"]
    assert run.agent == "single_turn_executor"
    (step,) = run.steps
    assert [(p.name, p.id, p.arguments) for p in step.tool_calls] == [("get_weather", use["id"], {"city": "Hanoi"})]
    assert [(c.name, c.args, c.executed, c.step, c.part) for c in run.calls] == [
        ("get_weather", {"city": "Hanoi"}, False, 0, 0)
    ]
    assert [c.name for c in view(run, "selected", "flatten")] == ["get_weather"]
    assert view(run, "executed", "flatten") == ()
    assert run.final_response == "I'll look that up."


def test_select_executor_multi_turn_carries_text_only_and_case_config_overrides() -> None:
    script = [
        FakeTurn(text="Reading it.", tool_uses=[("readFile", {"path": "README.md"})]),
        [("listFiles", {"dir": "src"})],
    ]
    tools = (ToolDef("readFile"), ToolDef("listFiles"))
    case = make_case(
        "Read README.md",
        "What files are in src?",
        tools=tools,
        config={"model": "case-model", "temperature": 0.2},
        systemPrompt="You are a file agent.",
    )
    with FakeAnthropic(script) as fake:
        runs = anthropic_executor("select", "runner-model", client=anthropic_client(fake)).run(case, 0)
        first, second = fake.message_requests
    assert first["model"] == second["model"] == "case-model"
    assert "temperature" not in first and first["system"] == "You are a file agent."
    assert second["messages"] == [
        {"role": "user", "content": "Read README.md"},
        {"role": "assistant", "content": [{"type": "text", "text": "Reading it."}]},
        {"role": "user", "content": "What files are in src?"},
    ]
    assert [[c.name for c in r.calls] for r in runs] == [["readFile"], ["listFiles"]]
    assert runs[1].final_response is None


def test_executor_without_case_tools_sends_none_and_records_none() -> None:
    with FakeAnthropic(["Weather and climate differ in time scale."]) as fake:
        (run,) = anthropic_executor("loop", "m", client=anthropic_client(fake)).run(make_case("Weather vs climate?"), 0)
        (request,) = fake.message_requests
    assert "tools" not in request
    assert run.tools_offered is None and run.calls == ()
    assert run.final_response == "Weather and climate differ in time scale."


def test_executor_retries_through_the_sdk_then_fails_with_api_error() -> None:
    with FakeAnthropic(["fine"]) as fake:
        fake.fail_next(529, count=2)
        (run,) = anthropic_executor("select", "m", client=anthropic_client(fake, max_retries=2)).run(make_case("x"), 0)
        assert len(fake.message_requests) == 3
    assert run.final_response == "fine" and len(run.steps) == 1

    with FakeAnthropic([Error(529)] * 3) as fake:
        runner = anthropic_executor("loop", "m", client=anthropic_client(fake, max_retries=2))
        with pytest.raises(RunnerFailed) as info:
            runner.run(make_case("x"), 0)
        assert len(fake.message_requests) == 3
    assert info.value.reason == "api_error" and "529" in info.value.detail


def test_executor_config_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(RunnerFailed) as info:
        anthropic_executor("plan", "m")  # type: ignore[arg-type]
    assert info.value.reason == "config"
    with pytest.raises(RunnerFailed):
        anthropic_executor("loop", "m", max_steps=0)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("ANTHROPIC_AUTH_TOKEN", raising=False)
    with pytest.raises(RunnerFailed) as info:
        anthropic_executor("loop", "m")
    assert info.value.reason == "config"


# =========================================================================== command runner


def script_cmd(mode: str, *extra: str) -> str:
    return " ".join(shlex.quote(p) for p in (sys.executable, str(SCRIPT), mode, *extra))


def test_command_runner_pydantic_ai_over_otlp_http(tmp_path: Path) -> None:
    env_out = tmp_path / "env.json"
    case = make_case("find the capital of France", "now find Spain's", case_id="geo, v2", tools=WEATHER_TOOLS)
    runner = command_runner(script_cmd("pydantic", "--env-out", str(env_out)), timeout_s=60)
    runs = runner.run(case, 2)

    received = [json.loads(line) for line in (tmp_path / "env.json.tools").read_text().splitlines()]
    assert [[(c.name, c.args) for c in r.calls] for r in runs] == [
        [(received[0]["name"], received[0]["args"])],
        [(received[1]["name"], received[1]["args"])],
    ]
    assert [r.agent for r in runs] == ["script_agent"] * 2
    assert [r.user_text for r in runs] == ["find the capital of France", "now find Spain's"]
    assert [r.final_response for r in runs] == ["Found it."] * 2
    for call in (c for r in runs for c in r.calls):
        assert isinstance(call.args, dict)
        assert call.executed and call.result == f"result for {call.args['query']}"
    assert [attrs(r) for r in runs] == [
        {"monitor.eval.case_id": "geo, v2", "monitor.eval.turn": str(i), "monitor.eval.run": "2"} for i in range(2)
    ]

    env = json.loads(env_out.read_text())
    assert env["OTEL_EXPORTER_OTLP_ENDPOINT"].startswith("http://127.0.0.1:")
    assert env["OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"] == env["OTEL_EXPORTER_OTLP_ENDPOINT"] + "/v1/traces"
    assert env["OTEL_EXPORTER_OTLP_PROTOCOL"] == "http/protobuf"
    assert env["OTEL_RESOURCE_ATTRIBUTES"].endswith("monitor.eval.case_id=geo%2C%20v2,monitor.eval.run=2")
    assert env["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] == os.environ.get(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY"
    )
    assert json.loads(env["MONITOR_EVAL_CASE"]) == case_payload(case, 2)
    payload = case_payload(case, 2)
    assert payload["turns"][1] == {
        "turn": 1,
        "input": "now find Spain's",
        "messages": [{"role": "user", "content": "now find Spain's"}],
        "session_input": None,
    }
    assert payload["tools"][1] == {"name": "get_forecast", "description": None, "input_schema": None}


def test_command_runner_user_content_switch_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELOOP_TRACE_CONTENT", "false")
    monkeypatch.delenv("OTEL_SEMCONV_STABILITY_OPT_IN", raising=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci")
    env_out = tmp_path / "env.json"
    command_runner(script_cmd("pydantic", "--env-out", str(env_out))).run(make_case("q"), 0)
    env = json.loads(env_out.read_text())
    assert env["TRACELOOP_TRACE_CONTENT"] == "false"
    assert env["OTEL_SEMCONV_STABILITY_OPT_IN"] == "gen_ai_latest_experimental"
    assert env["OTEL_RESOURCE_ATTRIBUTES"] == "deployment.environment=ci,monitor.eval.case_id=c1,monitor.eval.run=0"


def test_command_runner_otlp_json_gzip_runs_placed_by_their_turn_attribute() -> None:
    runs = command_runner(script_cmd("json")).run(make_case("first", "second", "third"), 0)
    assert [r.user_text for r in runs] == ["first", "second", "third"]
    assert [r.calls[0].args for r in runs] == [{"turn": 0}, {"turn": 1}, {"turn": 2}]
    # emitted in reverse order: start order alone would have reversed them
    assert (runs[0].start_ns or 0) > (runs[2].start_ns or 0)


@pytest.mark.parametrize(
    ("cmd", "reason", "fragment"),
    [
        (script_cmd("missing"), "missing_run", "2 turn(s) but 1 agent run(s)"),
        (script_cmd("fail"), "exit_status", "status 3: agent crashed: no model configured"),
    ],
)
def test_command_runner_failures(cmd: str, reason: str, fragment: str) -> None:
    with pytest.raises(RunnerFailed) as info:
        command_runner(cmd, timeout_s=60).run(make_case("a", "b"), 0)
    assert info.value.reason == reason
    assert fragment in info.value.detail


def test_command_runner_timeout_kills_the_command_and_its_children() -> None:
    started = time.monotonic()
    with pytest.raises(RunnerFailed) as info:
        command_runner(script_cmd("hang") + "; true", timeout_s=1.0).run(make_case("a"), 0)
    assert info.value.reason == "timeout"
    assert time.monotonic() - started < 10


def test_command_runner_config_errors() -> None:
    with pytest.raises(RunnerFailed):
        command_runner("   ")
    with pytest.raises(RunnerFailed):
        command_runner("true", timeout_s=0)


def test_assign_turns_counts() -> None:
    run = Run(trace_id="t", run_id="r")
    assert assign_turns([run], 1, "w") == [run]
    with pytest.raises(RunnerFailed) as info:
        assign_turns([run, run], 1, "w")
    assert info.value.reason == "unexpected_runs"
    with pytest.raises(RunnerFailed) as info:
        assign_turns([], 1, "w")
    assert info.value.reason == "missing_run"
    marked = [
        Run(trace_id="t", run_id=str(i), attributes=(("monitor.eval.turn", str(t)),)) for i, t in enumerate([1, 1])
    ]
    with pytest.raises(RunnerFailed) as info:
        assign_turns(marked, 2, "w")
    assert info.value.reason == "missing_run"


def post(url: str, body: bytes, ctype: str) -> int:
    request = urllib.request.Request(url, data=body, headers={"content-type": ctype}, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_receiver_answers_and_keeps_decode_errors() -> None:
    with OtlpReceiver() as rx:
        base = rx.endpoint
        assert post(base + "/v1/traces", b"\xff\x00garbage", "application/x-protobuf") == 400
        assert post(base + "/v1/traces", b"{}", "application/json") == 200  # an empty export
        assert post(base + "/v1/traces", b"x", "text/plain") == 415
        assert post(base + "/v1/metrics", b"", "application/x-protobuf") == 200
        assert post(base + "/v2/other", b"", "application/x-protobuf") == 404
        spans, logs, errors = rx.snapshot()
    assert spans == [] and logs == []
    assert len(errors) == 1 and "invalid_protobuf" in errors[0]
