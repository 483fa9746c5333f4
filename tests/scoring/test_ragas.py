"""Conformance tests for ``ragas_tool_call_accuracy`` and ``ragas_tool_call_f1`` (SCORING.md §2.5, §2.6)."""

from __future__ import annotations

import pytest

from monitor.scoring.expectation import Expectation
from monitor.scoring.reference.ragas_tool_call import RagasToolCallAccuracy, RagasToolCallF1, ragas_arg_score
from monitor.trajectory.model import ABSENT, Malformed
from tests.scoring.builders import expected, run_with_calls

REF = [("weather_check", {"location": "New York"}), ("temperature_conversion", {"temperature_fahrenheit": 75})]
PRED = [
    ("weather_check", {"location": "New York", "units": "F"}),
    ("temperature_conversion", {"temperature_fahrenheit": "75"}),
]


def acc(pred: list, ref: list, **params: object) -> float | None:
    return RagasToolCallAccuracy(params).score(run_with_calls(pred), Expectation(expected_calls=expected(ref))).score


def f1(pred: list, ref: list, **params: object) -> float | None:
    return RagasToolCallF1(params).score(run_with_calls(pred), Expectation(expected_calls=expected(ref))).score


def test_accuracy_worked_example() -> None:
    assert acc(PRED, REF) == 1.0
    assert acc(PRED[::-1], REF) == 0.0
    assert acc(PRED[::-1], REF, strict_order=False) == 1.0
    assert acc(PRED[:1], REF) == 0.0


def test_accuracy_empty_cases() -> None:
    assert acc([], []) == 1.0
    assert acc([], REF) == 0.0
    assert acc(PRED, []) == 0.0


@pytest.mark.parametrize(
    ("pred", "ref", "want"),
    [
        (5, "5", 1.0),
        (75, "75", 1.0),
        (True, "True", 1.0),
        (None, "None", 1.0),
        (5, 5.0, 0.0),
        (1, True, 0.0),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}, 0.0),
        ({"a": 1, "b": 2}, {"a": 1, "b": 2}, 1.0),
    ],
)
def test_accuracy_str_comparison(pred: object, ref: object, want: float) -> None:
    assert ragas_arg_score({"v": pred}, {"v": ref}) == want
    assert acc([("f", {"v": pred})], [("f", {"v": ref})]) == want


def test_arg_score_rules() -> None:
    assert ragas_arg_score({}, {}) == 1.0
    assert ragas_arg_score({"a": 1}, {}) == 0.0
    assert ragas_arg_score({"a": 1}, {"a": 1, "b": 2}) == 0.5


def test_accuracy_partial_args() -> None:
    assert acc([("f", {"a": 1}), ("g", {"x": 1})], [("f", {"a": 1, "b": 2}), ("g", {"x": 2})]) == 0.25


def test_accuracy_multi_turn_concatenates() -> None:
    t1 = run_with_calls([PRED[0]])
    t2 = run_with_calls([PRED[1]], start_ns=10**9)
    r = RagasToolCallAccuracy().score_turns([(t1, None), (t2, Expectation(expected_calls=expected(REF)))])
    assert r.score == 1.0


def test_accuracy_malformed_and_absent() -> None:
    assert acc([("f", Malformed("{x"))], [("f", {"a": 1})]) == 0.0
    run = run_with_calls([("f", ABSENT)])
    ref = Expectation(expected_calls=expected([("f", {"a": 1})]))
    assert RagasToolCallAccuracy().score(run, ref).reason == "arguments_not_captured"
    assert RagasToolCallAccuracy({"on_missing_arguments": "names_only"}).score(run, ref).score == 1.0


def test_f1_examples() -> None:
    assert f1([], []) == 0.0
    assert f1([("a", {"x": 1})], [("a", {"x": 1})]) == 1.0
    assert f1([("a", {"x": 1, "y": 2})], [("a", {"x": 1})]) == 0.0  # extra key → FP and FN
    assert f1([("a", {"x": 1}), ("a", {"x": 1})], [("a", {"x": 1})]) == 1.0  # duplicates collapse
    assert f1([("a", {"x": 1.0})], [("a", {"x": True})]) == 1.0  # 1 == 1.0 == True hash alike
    assert f1([("a", {"x": 1}), ("b", {})], [("a", {"x": 1}), ("c", {})]) == 0.5
    assert f1([("a", {"x": 1}), ("b", {}), ("c", {})], [("a", {"x": 1})]) == round(2 * (1 / 3) / (1 + 1 / 3), 4)
    assert f1([("a", {"l": [1, {"k": 2}]})], [("a", {"l": [1, {"k": 2}]})]) == 1.0


def test_f1_no_reference() -> None:
    assert RagasToolCallF1().score(run_with_calls(["a"]), Expectation()).reason == "no_reference"
