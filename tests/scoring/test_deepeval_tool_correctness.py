"""Conformance tests for ``deepeval_tool_correctness`` (SCORING.md §2.8, deepeval 4.3.1)."""

from __future__ import annotations

import pytest

from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.reference.deepeval_tool_correctness import DeepEvalToolCorrectness, deepeval_compare_dicts
from tests.scoring.builders import expected, run_with_calls

IP = {"evaluation_params": ["input_parameters"]}


def score(actual: list, exp: list, results: list | None = None, **params: object) -> float | None:
    scorer = DeepEvalToolCorrectness(params)
    return scorer.score(run_with_calls(actual, results=results), Expectation(expected_calls=expected(exp))).score


def test_compare_dicts_examples() -> None:
    assert deepeval_compare_dicts(
        {"q": "paris", "n": 5, "opts": {"a": 1, "b": 2}}, {"q": "paris", "n": 6, "opts": {"a": 1, "b": 3}}
    ) == pytest.approx(0.5, abs=1e-12)
    assert deepeval_compare_dicts({"q": "a", "n": 5, "k": 1}, {"q": "a", "n": 5, "m": 1}) == 0.5
    assert deepeval_compare_dicts({"l": [{"a": 1}]}, {"l": [{"a": 2}]}) == 0.0


def test_lcs_backtrack_float_quirk() -> None:
    exp = [("search", {"a": 3, "b": 3, "c": 2}), ("search", {"a": 3}), ("search", {"a": 3, "b": 1, "c": 1})]
    called = [("search", {"a": 3, "b": 3}), ("search", {"a": 3}), ("search", {"a": 3})]
    assert score(called, exp, should_consider_ordering=True, **IP) == 0.6666666666666665


def test_best_match_zero_weight_marks_nothing() -> None:
    assert score([("search", {"y": 2})], [("search", {"x": 1}), ("search", {"y": 2})], **IP) == 0.5


def test_used_is_by_value() -> None:
    calls = [("search", {"q": "a", "n": 1}), ("search", {"q": "a", "n": 1}), ("book", {})]
    assert score(calls, calls) == pytest.approx(2 / 3)
    assert round(score(calls, calls) or 0, 3) == 0.667


@pytest.mark.parametrize(
    ("params", "actual", "exp", "want"),
    [
        ({}, [], [], 1.0),
        ({}, ["a"], [], 0.0),
        ({"should_consider_ordering": True}, [], [], 1.0),
        ({"should_consider_ordering": True}, ["a"], [], 0.0),
        ({"should_exact_match": True}, [], [], 1.0),
        ({"should_exact_match": True}, ["a", "b"], ["a", "b"], 1.0),
        ({"should_exact_match": True}, ["b", "a"], ["a", "b"], 0.0),
        ({"should_consider_ordering": True}, ["b", "a"], ["a", "b"], 0.5),
        ({}, ["b", "a"], ["a", "b"], 1.0),
        ({}, ["a", "x", "y"], ["a"], 1.0),  # extra calls are free
    ],
)
def test_modes(params: dict, actual: list, exp: list, want: float) -> None:
    assert score(actual, exp, **params) == want


def test_strict_mode() -> None:
    s = DeepEvalToolCorrectness({"strict_mode": True, "threshold": 0.3})
    assert s.params.threshold == 1.0
    r = s.score(run_with_calls(["a"]), Expectation(expected_calls=expected(["a", "b"])))
    assert r.score == 0.0 and r.passed is False
    assert (
        DeepEvalToolCorrectness().score(run_with_calls(["a"]), Expectation(expected_calls=expected(["a", "b"]))).passed
    )


def test_output_param_and_types() -> None:
    exp = (ExpectedCall("a", output={"ok": 1}),)
    run = run_with_calls(["a"], results=[{"ok": 1}])
    s = DeepEvalToolCorrectness({"evaluation_params": ["output"]})
    assert s.score(run, Expectation(expected_calls=exp)).score == 1.0
    run_bad = run_with_calls(["a"], results=[{"ok": 2}])
    assert s.score(run_bad, Expectation(expected_calls=exp)).score == 0.0
    assert s.score(run_with_calls(["a"]), Expectation(expected_calls=exp)).reason == "results_not_captured"
    mcp = run_with_calls(["a"], kinds=["mcp"])
    assert DeepEvalToolCorrectness().score(mcp, Expectation(expected_calls=(ExpectedCall("a"),))).score == 0.0
    assert (
        DeepEvalToolCorrectness().score(mcp, Expectation(expected_calls=(ExpectedCall("a", type="MCP"),))).score == 1.0
    )
