"""``monitor.judging.runner.judge_run`` end to end: the real ``anthropic`` SDK against the shipped fake
server (``monitor.testing.FakeAnthropic``) on fixture runs."""

from __future__ import annotations

from typing import Any, ClassVar

from monitor.judging.runner import judge_run
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges import ArgumentCorrectnessJudge, GoalAccuracyJudge, ToolSelectionJudge
from monitor.scoring.judges.render import pretty_repr
from monitor.testing import FakeAnthropic
from tests.scoring.test_stage import one

OK_SELECTION = {
    "evaluations": [
        {"call_index": 0, "tool": "get_weather", "appropriate": True, "reasoning": "asked"},
        {"call_index": 1, "tool": "get_forecast", "appropriate": True, "reasoning": "asked"},
    ],
    "missing_tools": [],
    "reason": "Both tools were requested.",
}


class JudgeSection:
    model = "claude-judge-test"
    models: ClassVar[dict[str, str]] = {}
    max_tokens = 1024
    cache_ttl = "5m"
    max_field_chars = 2000
    max_input_tokens = 30_000


class Settings:
    judge = JudgeSection()


def test_a_verdict_end_to_end_with_the_sdk() -> None:
    run = one("adk1", "sequential_content")
    with FakeAnthropic() as fake:
        fake.script_verdict("submit_verdict", OK_SELECTION, usage={"input_tokens": 900, "cache_read_input_tokens": 50})
        (result,) = judge_run(fake.client(max_retries=0), ToolSelectionJudge(), run, None, Settings())
        assert fake.unexpected == []
        (body,) = fake.message_requests
    assert (result.status, result.score, result.passed, result.reason) == ("scored", 1.0, True, OK_SELECTION["reason"])
    assert result.trace_id == run.trace_id and result.scorer_version == ToolSelectionJudge.version
    assert result.judge is not None
    assert (result.judge.model, result.judge.requests, result.judge.input_tokens) == ("claude-judge-test", 1, 900)
    assert result.judge.cache_read_input_tokens == 50 and result.judge.latency_ms is not None
    assert body["temperature"] == 0 and body["model"] == "claude-judge-test"
    assert body["tool_choice"] == {"type": "tool", "name": "submit_verdict", "disable_parallel_tool_use": True}
    assert [s["cache_control"] for s in body["system"]] == [{"type": "ephemeral"}] * 2
    assert "get_forecast: Returns a daily forecast" in body["system"][1]["text"]


def test_invalid_then_repaired_sums_usage() -> None:
    run = one("adk1", "sequential_content")
    invalid = {k: v for k, v in OK_SELECTION.items() if k != "missing_tools"}
    with FakeAnthropic() as fake:
        fake.script_verdict("submit_verdict", invalid, check=False, usage={"input_tokens": 10, "output_tokens": 1})
        fake.script_verdict("submit_verdict", OK_SELECTION, usage={"input_tokens": 20, "output_tokens": 2})
        (result,) = judge_run(fake.client(max_retries=0), ToolSelectionJudge(), run, None, Settings())
        repair = fake.message_requests[1]["messages"]
    assert result.status == "scored" and result.judge is not None
    assert (result.judge.requests, result.judge.input_tokens, result.judge.output_tokens) == (2, 30, 3)
    assert [m["role"] for m in repair] == ["user", "assistant", "user"]
    assert repair[2]["content"][0]["tool_use_id"] == repair[1]["content"][0]["id"]


def test_invalid_twice_is_judge_output_invalid() -> None:
    run = one("adk1", "sequential_content")
    with FakeAnthropic() as fake:
        for _ in range(2):
            fake.script_verdict("submit_verdict", {"reason": "no verdict"}, check=False)
        (result,) = judge_run(fake.client(max_retries=0), ToolSelectionJudge(), run, None, Settings())
    assert (result.status, result.reason, result.score) == ("error", "judge_output_invalid", None)
    assert result.judge is not None and result.judge.requests == 2


def test_max_tokens_retries_with_doubled_max_tokens() -> None:
    run = one("adk1", "sequential_content")
    cut: dict[str, Any] = {
        "content": [{"type": "tool_use", "id": "toolu_x", "name": "submit_verdict", "input": {}}],
        "stop_reason": "max_tokens",
    }
    with FakeAnthropic([cut]) as fake:
        fake.script_verdict("submit_verdict", OK_SELECTION)
        (result,) = judge_run(fake.client(max_retries=0), ToolSelectionJudge(), run, None, Settings())
        sizes = [b["max_tokens"] for b in fake.message_requests]
    assert result.status == "scored" and sizes == [1024, 2048]


def test_api_errors_use_the_sdk_retries_then_judge_unavailable() -> None:
    run = one("adk1", "sequential_content")
    with FakeAnthropic() as fake:
        fake.rate_limit(retry_after=None)
        fake.overloaded()
        fake.script_verdict("submit_verdict", OK_SELECTION)
        (result,) = judge_run(fake.client(max_retries=2), ToolSelectionJudge(), run, None, Settings())
        assert len(fake.message_requests) == 3 and result.status == "scored"
        assert result.judge is not None and result.judge.requests == 1  # SDK retries are not judge requests
    with FakeAnthropic() as fake:
        fake.server_error(count=3)
        (result,) = judge_run(fake.client(max_retries=2), ToolSelectionJudge(), run, None, Settings())
    assert (result.status, result.reason, result.score) == ("error", "judge_unavailable", None)
    assert "InternalServerError" in result.details["message"]


def test_not_applicable_sends_nothing_and_the_model_parameter_wins() -> None:
    with FakeAnthropic() as fake:
        (na,) = judge_run(
            fake.client(), ArgumentCorrectnessJudge(), one("adk1", "sequential_no_content"), None, Settings()
        )
        assert fake.message_requests == []
    assert (na.status, na.reason, na.judge) == ("not_applicable", "arguments_not_captured", None)
    run = one("adk1", "tool_error_handled")
    verdict = {"user_goal": "g", "end_state": "e", "desired_outcome": "Both answered.", "reason": "r", "verdict": 0}
    with FakeAnthropic() as fake:
        fake.script_verdict("submit_verdict", verdict)
        judge = GoalAccuracyJudge({"model": "claude-param"})
        (result,) = judge_run(fake.client(), judge, run, Expectation(reference_outcome="Both answered."), Settings())
        assert fake.message_requests[0]["model"] == "claude-param"
    assert (result.score, result.passed, result.issues[0].kind) == (0.0, False, "goal_not_met")


def test_goal_accuracy_two_step_makes_ragas_two_calls_and_merges_them() -> None:
    run = one("adk1", "sequential_content")
    judge = GoalAccuracyJudge({"two_step": True})
    inferred = {"user_goal": "know the weather", "end_state": "the weather was given"}
    with FakeAnthropic() as fake:
        fake.script_verdict("submit_verdict", inferred)
        fake.script_verdict("submit_verdict", {"reason": "wrong city"}, check=False)  # invalid: repaired
        fake.script_verdict("submit_verdict", {"reason": "wrong city", "verdict": 0})
        (result,) = judge_run(fake.client(), judge, run, Expectation(reference_outcome="Paris forecast"), Settings())
    first, second, repair = (r["messages"][0]["content"][0]["text"] for r in fake.message_requests)
    assert "<workflow>" in first and "<desired_outcome>\nParis forecast" in second
    assert "<end_state>\nthe weather was given" in second and repair == second
    assert fake.message_requests[1]["tools"][0]["input_schema"]["required"] == ["reason", "verdict"]
    assert (result.status, result.score, result.passed) == ("scored", 0.0, False)
    assert result.details["desired_outcome"] == "Paris forecast" and result.details["user_goal"] == "know the weather"
    assert [i.kind.value for i in result.issues] == ["goal_not_met"]
    assert result.judge is not None and result.judge.requests == 3


def test_a_conversation_goes_to_the_judge_turn_by_turn() -> None:
    first, second = one("adk1", "sequential_content"), one("adk1", "sequential_content")
    judge = GoalAccuracyJudge({"scope": "conversation"})
    verdict = {"user_goal": "g", "end_state": "e", "desired_outcome": "g", "reason": "r", "verdict": 1}
    with FakeAnthropic() as fake:
        fake.script_verdict("submit_verdict", verdict)
        (result,) = judge_run(fake.client(), judge, [first, second], None, Settings())
    workflow = fake.message_requests[0]["messages"][0]["content"][0]["text"]
    both, single = pretty_repr([first, second], 2000), pretty_repr([second], 2000)
    assert result.score == 1.0 and len(both) == 2 * len(single)
    assert "<workflow>\n" + "\n".join(both) + "\n</workflow>" in workflow
