"""unknown_tool_check (§3.2) and tool_error_check (§3.3)."""

from __future__ import annotations

from typing import Any

from monitor.scoring.checks import call_error
from monitor.scoring.checks.tool_error_check import ToolErrorCheck
from monitor.scoring.checks.unknown_tool_check import UnknownToolCheck, did_you_mean
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, NoteKind, ScoreResult, Severity
from tests.scoring.checks.builders import c, make_run, tool

OFFERED = [tool("get_weather"), tool("get_forecast"), tool("search_docs")]


def unknown(run: Any, exp: Expectation | None = None, **params: Any) -> ScoreResult:
    return UnknownToolCheck(params).score(run, exp)


def errors(run: Any, exp: Expectation | None = None, **params: Any) -> ScoreResult:
    return ToolErrorCheck(params).score(run, exp)


# --------------------------------------------------------------------------- §3.2


def test_offered_calls_pass() -> None:
    r = unknown(make_run([c("get_weather"), c("search_docs")], tools=OFFERED))
    assert r.score == 1.0 and r.passed is True and r.issues == ()
    assert r.details == {"checked": 2, "hallucinated": 0, "unchecked": 0}


def test_hallucinated_unexecuted_with_did_you_mean() -> None:
    r = unknown(make_run([c("get_wether", executed=False), c("get_weather")], tools=OFFERED))
    assert r.score == 0.5 and r.passed is False
    (issue,) = r.issues
    assert issue.kind is FailureKind.HALLUCINATED_TOOL and issue.tool == "get_wether" and issue.call_index == 0
    assert issue.detail["did_you_mean"] == "get_weather" and issue.detail["executed"] is False


def test_case_slip_and_no_close_match() -> None:
    assert did_you_mean("Get_Weather", ["get_weather", "search_docs"]) == "get_weather"
    assert did_you_mean("delete_everything", ["get_weather", "search_docs"]) is None
    assert did_you_mean("", ["a"]) is None


def test_executed_with_error_is_hallucinated() -> None:
    r = unknown(make_run([c("fetch_url", error="ToolNotFound", message="no such tool")], tools=OFFERED))
    assert r.score == 0.0 and r.issues[0].detail["error_type"] == "ToolNotFound"


def test_executed_ok_is_incomplete_definitions_note() -> None:
    r = unknown(make_run([c("fetch_url"), c("fetch_url")], tools=OFFERED))
    assert r.score == 1.0 and r.passed is True
    (note,) = r.issues
    assert note.kind is NoteKind.TOOL_DEFINITIONS_INCOMPLETE and note.severity is Severity.INFO


def test_allowed_tools_from_expectation_and_params_with_globs() -> None:
    run = make_run(
        [c("final_result", executed=False), c("web_search", executed=False), c("mcp__x", executed=False)],
        tools=OFFERED,
    )
    assert unknown(run).score == 0.0
    r = unknown(run, Expectation(allowed_tools=("final_result",)), allowed_tools=["web_search", "mcp__*"])
    assert r.score == 1.0


def test_child_agent_names_are_offered() -> None:
    child = make_run([c("get_weather")], agent="weather_agent", tools=OFFERED, run_id="c" * 16)
    run = make_run([c("weather_agent", executed=False, kind="agent")], tools=OFFERED, children=[child])
    assert unknown(run).score == 1.0


def test_step_definitions_before_run_and_catalogue() -> None:
    run = make_run([c("only_in_step", step=0, executed=False)], tools=OFFERED, steps=[[tool("only_in_step")]])
    assert unknown(run).score == 1.0
    run2 = make_run([c("cat_tool", executed=False)])
    assert unknown(run2).reason == "no_tool_definitions"
    assert unknown(run2, Expectation(catalogue=(tool("cat_tool"),))).score == 1.0
    assert unknown(make_run([c("x", executed=False)], tools=[])).score == 0.0  # [] = captured, none offered


def test_unknown_tool_not_applicable() -> None:
    assert unknown(make_run([], tools=OFFERED)).reason == "no_tool_calls"
    r = unknown(make_run([c("x")]), Expectation(allowed_tools=("x",)))
    assert r.status == "not_applicable" and r.reason == "no_tool_definitions"


# --------------------------------------------------------------------------- §3.3


def test_errored_call_issue_and_score() -> None:
    run = make_run([c("search", error="TimeoutError", message="timed out after 30s"), c("fetch")])
    r = errors(run)
    assert r.score == 0.5 and r.passed is False
    (issue,) = r.issues
    assert issue.kind is FailureKind.TOOL_ERROR and issue.tool == "search" and issue.actual == "TimeoutError"
    assert issue.detail == {"type": "TimeoutError", "message": "timed out after 30s", "recovered": False}
    assert r.details["error_types"] == {"TimeoutError": 1}


def test_mcp_call_tool_result_is_error() -> None:
    result = {
        "content": [{"type": "text", "text": "file not found"}, {"type": "image", "data": "..."}],
        "isError": True,
    }
    run = make_run([c("read_file", result=result), c("read_file", result={"content": [], "isError": False})])
    r = errors(run)
    assert r.score == 0.5
    assert r.issues[0].detail["type"] == "MCP_TOOL_ERROR" and r.issues[0].detail["message"] == "file not found"
    assert r.issues[0].detail["recovered"] is True
    assert call_error(run.calls[1]) is None


def test_recovered_errors_and_count_recovered_false() -> None:
    run = make_run([c("search", error="HTTP_ERROR"), c("search"), c("fetch", error="HTTP_ERROR")])
    r = errors(run)
    assert [i.detail["recovered"] for i in r.issues] == [True, False]
    assert r.score == 1 - 2 / 3 and r.passed is False
    lenient = errors(run, count_recovered=False)
    assert lenient.score == 1 - 1 / 3
    assert [i.severity for i in lenient.issues] == [Severity.WARNING, Severity.ERROR]
    only_recovered = make_run([c("search", error="HTTP_ERROR"), c("search")])
    r2 = errors(only_recovered, count_recovered=False)
    assert r2.score == 1.0 and r2.passed is True and len(r2.issues) == 1


def test_unexecuted_later_call_does_not_recover() -> None:
    r = errors(make_run([c("search", error="E"), c("search", executed=False)]))
    assert r.issues[0].detail["recovered"] is False


def test_error_message_truncated_to_500() -> None:
    r = errors(make_run([c("x", error="E", message="m" * 2000)]))
    assert len(r.issues[0].detail["message"]) == 500


def test_tool_error_not_applicable_without_calls() -> None:
    r = errors(make_run([]))
    assert r.status == "not_applicable" and r.reason == "no_tool_calls"


def test_nested_errors_counted_in_flatten_only() -> None:
    child = make_run([c("inner", error="E")], agent="child", run_id="c" * 16)
    run = make_run([c("outer")], children=[child])
    assert errors(run).score == 0.5
    assert errors(run, scope="own").score == 1.0
