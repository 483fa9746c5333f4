"""SCORING.md §4.0 as pure code: rendering, the request body, verdict validation, the exchange."""

from __future__ import annotations

from typing import Any, ClassVar

from monitor.scoring.judges.base import Judge, prompt_version, run_judge
from monitor.scoring.judges.protocol import (
    Block,
    Done,
    Exchange,
    Failed,
    JudgeConfig,
    Retry,
    build_request,
    render_call,
    render_catalogue,
    render_user_message,
    round_half_up_2,
    schema_errors,
    truncate,
)
from monitor.scoring.judges.tool_selection import ToolSelectionJudge
from monitor.trajectory.model import ABSENT, Malformed, ToolCall, ToolDef, ToolError
from tests.scoring.builders import run_with_steps
from tests.scoring.judges.helpers import Script, response, unavailable

SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["reason", "ok"],
    "additionalProperties": False,
    "properties": {"reason": {"type": "string"}, "ok": {"type": "boolean"}},
}


def body() -> dict[str, Any]:
    return build_request(JudgeConfig(model="m"), ["S1"], "<x>\ny\n</x>", SCHEMA)


# --------------------------------------------------------------------------- rendering


def test_truncate_marks_the_dropped_characters() -> None:
    assert truncate("abcdef", 4) == "abcd[truncated 2 chars]"
    assert truncate("abcd", 4) == "abcd"


def test_a_call_line_is_index_name_canonical_args_and_result_or_error() -> None:
    call = ToolCall(0, "get_weather", args={"units": "c", "city": "Paris", "n": 1.0}, result={"t": 18})
    assert render_call(call, 2000) == '[0] get_weather {"city":"Paris","n":1,"units":"c"} -> {"t":18}'
    failed = ToolCall(3, "search", args=ABSENT, error=ToolError("Timeout", "backend timed out"))
    assert render_call(failed, 2000) == "[3] search <not captured> -> ERROR Timeout: backend timed out"
    raw = ToolCall(1, "x", args=Malformed("{city: Paris"), result="plain text " * 3)
    assert render_call(raw, 10) == "[1] x {city: Par[truncated 2 chars] -> plain text[truncated 23 chars]"
    assert render_call(ToolCall(2, "y"), 100) == "[2] y <not captured> -> <not captured>"


def test_the_catalogue_is_sorted_by_name_with_canonical_schemas() -> None:
    tools = [
        ToolDef("b", "Second\n tool", {"type": "object", "properties": {"z": {}, "a": {}}}),
        ToolDef("a", None, None),
        ToolDef("b", "duplicate: first wins"),
    ]
    assert render_catalogue(tools, 100) == (
        '<tools>\na: \nb: Second tool\n  input_schema: {"properties":{"a":{},"z":{}},"type":"object"}\n</tools>'
    )
    assert "not captured" in render_catalogue(None, 100)
    assert "no tools were offered" in render_catalogue([], 100)


def test_middle_calls_are_elided_when_the_estimate_exceeds_max_input_tokens() -> None:
    lines = tuple(f"[{i}] tool {'x' * 50}" for i in range(40))
    blocks = [Block.text("user_input", "hi"), Block("trajectory", lines, elidable=True)]
    text, truncated = render_user_message(blocks, max_input_tokens=100_000)
    assert not truncated and text.count("\n[") == 40
    text, truncated = render_user_message(blocks, max_input_tokens=300)  # 1050 characters
    assert truncated and len(text) <= 1050
    assert "[0] tool" in text and "[39] tool" in text and "calls elided" in text


def test_the_request_forces_the_verdict_tool_and_caches_the_static_blocks() -> None:
    b = build_request(JudgeConfig(model="claude-x", max_tokens=512), ["S1", "S2"], "U", SCHEMA)
    assert b["model"] == "claude-x" and b["temperature"] == 0 and b["max_tokens"] == 512
    assert b["tools"] == [
        {"name": "submit_verdict", "description": b["tools"][0]["description"], "input_schema": SCHEMA}
    ]
    assert b["tool_choice"] == {"type": "tool", "name": "submit_verdict", "disable_parallel_tool_use": True}
    assert [s["cache_control"] for s in b["system"]] == [{"type": "ephemeral"}] * 2
    assert b["messages"] == [{"role": "user", "content": [{"type": "text", "text": "U"}]}]
    hour = build_request(JudgeConfig(cache_ttl="1h", strict_tools=True), ["S1"], "U", SCHEMA)
    assert hour["system"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert hour["tools"][0]["strict"] is True


def test_config_from_settings_objects_and_mappings() -> None:
    class Section:
        model = "base"
        models: ClassVar[dict[str, str]] = {"judge_tool_selection": "special"}
        max_tokens = 2048
        cache_ttl = "1h"
        max_field_chars = 50
        max_input_tokens = 999

    class Settings:
        judge = Section()

    c = JudgeConfig.from_settings(Settings(), "judge_tool_selection")
    assert (c.model, c.max_tokens, c.cache_ttl, c.max_field_chars, c.max_input_tokens) == (
        "special",
        2048,
        "1h",
        50,
        999,
    )
    assert JudgeConfig.from_settings(Section(), "judge_goal_accuracy").model == "base"
    assert JudgeConfig.from_settings({"model": "m"}, "k", model="param").model == "param"
    assert JudgeConfig.from_settings(None) == JudgeConfig()


def test_rendering_is_deterministic() -> None:
    judge = ToolSelectionJudge()
    a = judge.prepare([run_with_steps([["a", "b"]])], None, JudgeConfig())
    b = judge.prepare([run_with_steps([["a", "b"]])], None, JudgeConfig())
    assert not isinstance(a, Judge) and a.body == b.body  # type: ignore[union-attr]


def test_round_half_up_like_mastra() -> None:
    assert round_half_up_2(0.125) == 0.13
    assert round_half_up_2(1 / 3) == 0.33
    assert round_half_up_2(2 / 3) == 0.67
    assert round_half_up_2(0.005) == 0.01
    assert round_half_up_2(1.0) == 1.0


def test_the_prompt_hash_is_in_the_version() -> None:
    v1, h1 = prompt_version(1, ["prompt"])
    v2, h2 = prompt_version(1, ["prompt edited"])
    assert v1 != v2 and h1 != h2 and v1 // 100_000_000 == 1
    assert ToolSelectionJudge.version == prompt_version(1, ToolSelectionJudge.prompt_material())[0]


# --------------------------------------------------------------------------- validation and the exchange


def test_schema_errors_name_the_path() -> None:
    assert schema_errors(SCHEMA, {"reason": "r", "ok": True}) is None
    problem = schema_errors(SCHEMA, {"reason": 1, "ok": True, "x": 0})
    assert problem is not None and "at /reason" in problem and "'x' was unexpected" in problem


def test_an_invalid_verdict_gets_one_repair_with_a_matching_tool_result() -> None:
    ex = Exchange(body(), lambda v: schema_errors(SCHEMA, v))
    step = ex.advance(response({"reason": "r"}))
    assert isinstance(step, Retry) and step.why == "repair"
    messages = step.body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "user"]
    assert messages[1]["content"][0]["type"] == "tool_use"
    result = messages[2]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1" and result["is_error"]
    assert "'ok' is a required property" in result["content"]
    assert ex.advance(response({"reason": "r", "ok": True})) == Done({"reason": "r", "ok": True})


def test_invalid_twice_fails_as_judge_output_invalid() -> None:
    ex = Exchange(body(), lambda v: schema_errors(SCHEMA, v))
    assert isinstance(ex.advance(response(None)), Retry)  # no tool_use at all: repaired with a text message
    assert ex.body["messages"][-1]["content"][0]["type"] == "text"
    step = ex.advance(response({"ok": "yes"}))
    assert isinstance(step, Failed) and step.reason == "judge_output_invalid"


def test_max_tokens_doubles_once() -> None:
    ex = Exchange(body(), lambda v: schema_errors(SCHEMA, v))
    step = ex.advance(response({"reason": "r"}, stop_reason="max_tokens"))
    assert isinstance(step, Retry) and step.why == "max_tokens" and step.body["max_tokens"] == 2048
    assert len(step.body["messages"]) == 1  # the cut-off answer is not replayed
    assert isinstance(ex.advance(response(None, stop_reason="max_tokens")), Failed)


def test_run_judge_sums_usage_over_retries_and_reports_errors_never_scores() -> None:
    run = run_with_steps([["get_weather"]], user_text="weather?")
    ok = {"evaluations": [], "missing_tools": [], "reason": "fine"}
    send = Script([response({"reason": "x"}), response(ok, usage={"input_tokens": 7, "output_tokens": 3})])
    result = run_judge(ToolSelectionJudge(), run, None, JudgeConfig(model="m"), send)
    assert result.status == "scored" and result.reason == "fine"
    assert result.judge is not None and result.judge.requests == 2
    assert (result.judge.input_tokens, result.judge.output_tokens, result.judge.cache_read_input_tokens) == (107, 13, 5)
    bad = run_judge(ToolSelectionJudge(), run, None, JudgeConfig(), Script([response({}), response({})]))
    assert (bad.status, bad.reason, bad.score, bad.passed) == ("error", "judge_output_invalid", None, None)
    down = run_judge(ToolSelectionJudge(), run, None, JudgeConfig(), Script([unavailable()]))
    assert (down.status, down.reason, down.judge) == ("error", "judge_unavailable", None)
