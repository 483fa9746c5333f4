"""Conformance tests for ``trajectory_match`` (SCORING.md §2.3, agentevals 0.0.9)."""

from __future__ import annotations

import pytest

from monitor.scoring.base import ScorerConfigError
from monitor.scoring.expectation import Expectation, ExpectedMessage
from monitor.scoring.reference.trajectory_match import TrajectoryMatch
from monitor.scoring.result import FailureKind
from monitor.trajectory.model import ABSENT
from tests.scoring.builders import expected, run_with_calls, run_with_steps


def score(params: dict, actual: list, ref: list) -> float | None:
    return TrajectoryMatch(params).score(run_with_calls(actual), Expectation(expected_calls=expected(ref))).score


def test_subset_swaps_operands() -> None:
    actual = [("f", {"x": 1, "y": 2})]
    ref = [("f", {"x": 1})]
    assert score({"trajectory_match_mode": "subset", "tool_args_match_mode": "subset"}, actual, ref) == 1.0
    assert score({"trajectory_match_mode": "subset", "tool_args_match_mode": "superset"}, actual, ref) == 0.0


def test_superset_args_orientation() -> None:
    actual = [("f", {"x": 1, "y": 2}), ("g", {})]
    ref = [("f", {"x": 1})]
    assert score({"trajectory_match_mode": "superset", "tool_args_match_mode": "superset"}, actual, ref) == 1.0
    assert score({"trajectory_match_mode": "superset", "tool_args_match_mode": "subset"}, actual, ref) == 0.0


def test_greedy_false_negative_and_optimal() -> None:
    ref = [("A", {}), ("A", {"x": 1})]
    actual = [("A", {"x": 1}), ("A", {"y": 2})]
    params = {"trajectory_match_mode": "superset", "tool_args_match_mode": "superset"}
    assert score(params, actual, ref) == 0.0
    assert score({**params, "matching": "optimal"}, actual, ref) == 1.0


@pytest.mark.parametrize(
    ("mode", "actual", "ref", "want"),
    [
        ("superset", ["a"], [], 1.0),
        ("subset", [], ["a"], 1.0),
        ("unordered", [], [], 1.0),
        ("strict", [], [], 1.0),
        ("unordered", ["a"], [], 0.0),
        ("subset", ["a"], [], 0.0),
        ("superset", [], ["a"], 0.0),
    ],
)
def test_empty_cases(mode: str, actual: list, ref: list, want: float) -> None:
    assert score({"trajectory_match_mode": mode}, actual, ref) == want


def test_unordered_ignores_order_and_needs_equal_sizes() -> None:
    p = {"trajectory_match_mode": "unordered"}
    assert score(p, ["a", "b"], ["b", "a"]) == 1.0
    assert score(p, ["a", "b", "b"], ["b", "a"]) == 0.0


def test_strict_is_ordered_by_steps() -> None:
    assert score({}, ["a", "b"], ["a", "b"]) == 1.0
    r = TrajectoryMatch().score(run_with_calls(["a", "b"]), Expectation(expected_calls=expected(["b", "a"])))
    assert r.score == 0.0
    assert [i.kind for i in r.issues] == [FailureKind.WRONG_ORDER]


def test_strict_parallel_calls_match_in_any_order_within_a_step() -> None:
    run = run_with_steps([["a", "b"], ["c"]])
    assert TrajectoryMatch().score(run, Expectation(expected_calls=expected(["b", "a", "c"]))).score == 1.0
    assert TrajectoryMatch().score(run, Expectation(expected_calls=expected(["a", "c", "b"]))).score == 0.0


def test_strict_message_form_reference() -> None:
    run = run_with_steps([["a", "b"], ["c"]])
    msgs = (
        ExpectedMessage("system"),
        ExpectedMessage("human"),
        ExpectedMessage("ai", expected(["b", "a"])),
        ExpectedMessage("tool"),
        ExpectedMessage("tool"),
        ExpectedMessage("assistant", expected(["c"])),
        ExpectedMessage("tool"),
        ExpectedMessage("assistant"),
    )
    assert TrajectoryMatch().score(run, Expectation(expected_messages=msgs)).score == 1.0
    # Without the user message in the reference none is emitted for the actual.
    assert TrajectoryMatch().score(run, Expectation(expected_messages=msgs[2:])).score == 1.0
    # Different grouping: one step with all three calls in the reference.
    regrouped = (
        ExpectedMessage("user"),
        ExpectedMessage("assistant", expected(["a", "b", "c"])),
        *[ExpectedMessage("tool")] * 3,
        ExpectedMessage("assistant"),
    )
    assert TrajectoryMatch().score(run, Expectation(expected_messages=regrouped)).score == 0.0


def test_strict_final_response_without_step_adds_assistant_message() -> None:
    run = run_with_steps([["a"]], final_step=False, final_response="ok")
    msgs = (
        ExpectedMessage("user"),
        ExpectedMessage("assistant", expected(["a"])),
        ExpectedMessage("tool"),
        ExpectedMessage("assistant"),
    )
    assert TrajectoryMatch().score(run, Expectation(expected_messages=msgs)).score == 1.0


def test_overrides() -> None:
    actual = [("f", {"q": {"a": 1, "b": 2}, "z": 9})]
    ref = [("f", {"q": {"a": 1, "b": 3}, "z": 9})]
    assert score({}, actual, ref) == 0.0
    assert score({"tool_args_match_overrides": {"f": ["z", "q.a"]}}, actual, ref) == 1.0
    assert score({"tool_args_match_overrides": {"f": ["q.b"]}}, actual, ref) == 0.0
    assert score({"tool_args_match_overrides": {"f": "ignore"}}, actual, ref) == 1.0
    # a falsy override is ignored
    assert score({"tool_args_match_overrides": {"f": []}}, actual, ref) == 0.0
    # two missing paths are equal
    assert score({"tool_args_match_overrides": {"f": ["nope.x"]}}, actual, ref) == 1.0


def test_callable_override() -> None:
    scorer = TrajectoryMatch(matchers={"f": lambda a, r: a["q"].lower() == r["q"].lower()})
    run = run_with_calls([("f", {"q": "PARIS"})])
    assert scorer.score(run, Expectation(expected_calls=expected([("f", {"q": "paris"})]))).score == 1.0
    assert "callable_overrides" in scorer.params_json


def test_absent_arguments() -> None:
    run = run_with_calls([("f", ABSENT)])
    ref = Expectation(expected_calls=expected([("f", {"x": 1})]))
    assert TrajectoryMatch().score(run, ref).reason == "arguments_not_captured"
    r = TrajectoryMatch({"on_missing_arguments": "names_only"}).score(run, ref)
    assert r.score == 1.0 and r.degraded == "names_only"
    assert TrajectoryMatch({"tool_args_match_mode": "ignore"}).score(run, ref).score == 1.0


def test_unspecified_reference_args_are_empty_dict() -> None:
    assert score({}, [("f", {"x": 1})], [("f",)]) == 0.0
    assert score({"tool_args_match_mode": "superset"}, [("f", {"x": 1})], [("f",)]) == 1.0


def test_issues_explain_failure() -> None:
    r = TrajectoryMatch({"trajectory_match_mode": "unordered"}).score(
        run_with_calls([("search", {"q": "a", "extra": 1}), ("book", {})]),
        Expectation(expected_calls=expected([("search", {"q": "b"}), ("pay", {})])),
    )
    kinds = sorted(str(i.kind) for i in r.issues)
    assert kinds == ["unknown_parameter", "wrong_tool", "wrong_value"]
    wrong_tool = next(i for i in r.issues if i.kind == FailureKind.WRONG_TOOL)
    assert wrong_tool.tool == "book" and wrong_tool.detail == {"expected_tool": "pay"}


def test_multi_turn_concatenates() -> None:
    t1 = run_with_calls(["a"])
    t2 = run_with_calls(["b"], start_ns=10**9)
    scorer = TrajectoryMatch({"trajectory_match_mode": "unordered"})
    r = scorer.score_turns([(t1, Expectation(expected_calls=expected(["b", "a"]))), (t2, None)])
    assert r.score == 1.0


def test_bad_mode() -> None:
    with pytest.raises(ScorerConfigError, match="trajectory_match_mode"):
        TrajectoryMatch({"trajectory_match_mode": "fuzzy"})
