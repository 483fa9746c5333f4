"""Conformance tests for ``tool_eval`` (SCORING.md §2.1, seed-000 ToolEvaluator)."""

from __future__ import annotations

import pytest

from monitor.scoring.base import ScorerConfigError
from monitor.scoring.expectation import Budgets, Expectation, ExpectedCall
from monitor.scoring.reference.tool_eval import ToolEval
from monitor.scoring.result import FailureKind, Severity
from monitor.trajectory.model import ABSENT, Malformed
from tests.scoring.builders import run_with_calls

WEATHER = ExpectedCall(
    name="get_weather",
    required_params={"city": "Hanoi"},
    param_validators={"units": {"enum": ["celsius", "fahrenheit"]}},
)
FORECAST = ExpectedCall(name="get_forecast", required_params={"city": "Hanoi", "days": 5})
EXAMPLE_RUN = run_with_calls(
    [
        ("get_weather", {"city": "Hanoi", "units": "kelvin"}),
        ("get_weather", {"city": "Hanoi", "units": "kelvin"}),
        ("get_forecast", {"city": "Hanoi", "days": 3}),
    ],
    final_response="In Hanoi the forecast is sunny.",
)
EXAMPLE_REF = Expectation(expected_calls=(WEATHER, FORECAST), expected_keywords=("Hanoi", "forecast", "humidity"))


def kinds(result):
    return [i.kind for i in result.issues]


def test_worked_example_literal() -> None:
    r = ToolEval({"variant": "literal"}).score(EXAMPLE_RUN, EXAMPLE_REF)
    assert r.status == "scored"
    assert r.details["precision"] == 1.0
    assert r.details["recall"] == 1.5
    assert r.details["param_accuracy"] == 0.625
    assert r.details["content"] == 0.667
    assert round(r.details["raw_overall"], 3) == 1.004
    assert r.score == 1.0
    assert r.passed is True
    assert r.scorer == "tool_eval:literal"


def test_worked_example_clipped() -> None:
    r = ToolEval().score(EXAMPLE_RUN, EXAMPLE_REF)
    assert r.details["precision"] == 0.667
    assert r.details["recall"] == 1.0
    assert r.details["param_accuracy"] == 0.625
    assert r.score == 0.754
    assert r.passed is False
    ks = kinds(r)
    assert FailureKind.INVALID_VALUE in ks
    assert FailureKind.WRONG_VALUE in ks
    assert FailureKind.RESPONSE_MISMATCH in ks
    assert FailureKind.UNNECESSARY_TOOL in ks  # the second get_weather


def test_float_order_threshold_quirk() -> None:
    # P 1.0, R 2/3, PA 2/3, content 1.0 → 0.7999999999999999: score 0.8 but not passed.
    ref = Expectation(
        expected_calls=(
            ExpectedCall("a", required_params={"x": 1}),
            ExpectedCall("b", required_params={"x": 1}),
            ExpectedCall("c", required_params={"x": 1}),
        )
    )
    run = run_with_calls([("a", {"x": 1}), ("b", {"x": 1})])
    r = ToolEval().score(run, ref)
    assert r.details["raw_overall"] == 0.7999999999999999
    assert r.score == 0.8
    assert r.passed is False


def test_missing_expected_name_fails_even_above_threshold() -> None:
    ref = Expectation(expected_calls=tuple(ExpectedCall(n) for n in "abcdefghij"))
    run = run_with_calls(list("abcdefghi"))
    r = ToolEval().score(run, ref)
    assert r.score == 0.94
    assert r.passed is False
    assert FailureKind.MISSING_TOOL in kinds(r)


def test_should_not_call_tools() -> None:
    run = run_with_calls(["a", "b"])
    r = ToolEval().score(run, Expectation(no_tools=True, expected_calls=()))
    assert r.score == 0.0 and r.passed is False
    assert [i.kind for i in r.issues] == [FailureKind.UNNECESSARY_TOOL] * 2
    assert all(i.detail == {"rule": "no_tools"} for i in r.issues)
    assert r.details["precision"] == r.details["recall"] == r.details["param_accuracy"] == 0.0


@pytest.mark.parametrize(("response", "score", "passed"), [("Hello there", 1.0, True), ("bye", 0.5, False)])
def test_no_expected_calls_content_branch(response: str, score: float, passed: bool) -> None:
    run = run_with_calls(["unexpected"], final_response=response)
    r = ToolEval().score(run, Expectation(expected_calls=(), expected_keywords=("HELLO",)))
    assert r.score == score and r.passed is passed
    assert r.details["precision"] == r.details["recall"] == r.details["param_accuracy"] == 1.0


def test_missing_parameter_and_forbidden() -> None:
    ref = Expectation(
        expected_calls=(ExpectedCall("s", required_params={"q": None, "n": 2}, forbidden_params=("debug",)),)
    )
    run = run_with_calls([("s", {"n": 2, "debug": True})])
    r = ToolEval().score(run, ref)
    # items: q missing 0.0, n 1.0, debug forbidden 0.0 → 1/3
    assert r.details["param_scores"] == [1 / 3]
    assert FailureKind.MISSING_PARAMETER in kinds(r)
    assert FailureKind.FORBIDDEN_PARAMETER in kinds(r)


def test_null_required_value_only_checks_presence() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s", required_params={"q": None}),))
    r = ToolEval().score(run_with_calls([("s", {"q": "anything"})]), ref)
    assert r.details["param_scores"] == [1.0]
    assert r.score == 1.0


def test_literal_uses_first_call_clipped_uses_best() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s", required_params={"q": "b"}),))
    run = run_with_calls([("s", {"q": "a"}), ("s", {"q": "b"})])
    assert ToolEval({"variant": "literal"}).score(run, ref).details["param_scores"] == [0.5]
    assert ToolEval().score(run, ref).details["param_scores"] == [1.0]


def test_args_from_expected_args_when_no_required_params() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s", args={"q": "x"}),))
    r = ToolEval().score(run_with_calls([("s", {"q": "y"})]), ref)
    assert r.details["param_scores"] == [0.5]


def test_callable_validator() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s", param_validators={"n": lambda v: v > 3}),))
    assert ToolEval().score(run_with_calls([("s", {"n": 2})]), ref).details["param_scores"] == [0.0]
    assert ToolEval().score(run_with_calls([("s", {"n": 5})]), ref).details["param_scores"] == [1.0]


def test_absent_arguments_not_applicable_and_names_only() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s", required_params={"q": "x"}),))
    run = run_with_calls([("s", ABSENT)])
    r = ToolEval().score(run, ref)
    assert r.status == "not_applicable" and r.reason == "arguments_not_captured"
    r2 = ToolEval({"on_missing_arguments": "names_only"}).score(run, ref)
    assert r2.status == "scored" and r2.degraded == "names_only"
    assert r2.details["param_accuracy"] is None
    assert r2.score == 1.0


def test_absent_arguments_without_items_is_scored() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s"),))
    r = ToolEval().score(run_with_calls([("s", ABSENT)]), ref)
    assert r.status == "scored" and r.score == 1.0


def test_malformed_arguments_have_no_keys() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s", required_params={"q": "x"}),))
    r = ToolEval().score(run_with_calls([("s", Malformed("{oops"))]), ref)
    assert r.details["param_scores"] == [0.0]


def test_budget_issues_are_warnings() -> None:
    ref = Expectation(expected_calls=(ExpectedCall("s"),), budgets=Budgets(max_tool_calls=1, run_latency_budget_ms=0.5))
    r = ToolEval().score(run_with_calls(["s", "s"]), ref)
    budget = [i for i in r.issues if i.kind in (FailureKind.EXCESS_CALLS, FailureKind.RUN_LATENCY)]
    assert {i.kind for i in budget} == {FailureKind.EXCESS_CALLS, FailureKind.RUN_LATENCY}
    assert all(i.severity is Severity.WARNING for i in budget)


def test_no_reference() -> None:
    assert ToolEval().score(run_with_calls(["s"]), None).reason == "no_reference"


@pytest.mark.parametrize(
    "params",
    [
        {"weights": {"precision": 0.5, "recall": 0.5, "param_accuracy": 0.5, "content": 0.0}},
        {"weights": {"precision": -0.1, "recall": 0.5, "param_accuracy": 0.5, "content": 0.1}},
        {"variant": "strict"},
        {"treshold": 0.5},
    ],
)
def test_config_errors(params: dict) -> None:
    with pytest.raises(ScorerConfigError):
        ToolEval(params)
