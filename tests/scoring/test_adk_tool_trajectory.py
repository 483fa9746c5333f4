"""Conformance tests for ``adk_tool_trajectory`` (SCORING.md §2.4, ADK 2.13.0 TrajectoryEvaluator)."""

from __future__ import annotations

import pytest

from monitor.scoring.base import ScorerConfigError
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.reference.adk_trajectory import AdkToolTrajectory
from monitor.trajectory.model import ABSENT
from tests.scoring.builders import expected, run_with_calls

T = {n: (n, {"k": n}) for n in ("T1", "T2", "T3", "x")}


def score(match_type: object, actual: list, exp: list, **params: object) -> float | None:
    scorer = AdkToolTrajectory({"match_type": match_type, **params})
    return scorer.score(run_with_calls(actual), Expectation(expected_calls=expected(exp))).score


@pytest.mark.parametrize(("mt", "want"), [("EXACT", 0.0), ("IN_ORDER", 1.0), ("ANY_ORDER", 1.0)])
def test_extra_call(mt: str, want: float) -> None:
    assert score(mt, [T["T1"], T["x"], T["T2"], T["T3"]], [T["T1"], T["T2"], T["T3"]]) == want


@pytest.mark.parametrize(("mt", "want"), [("IN_ORDER", 0.0), ("ANY_ORDER", 1.0), ("EXACT", 0.0)])
def test_swapped(mt: str, want: float) -> None:
    assert score(mt, [T["T2"], T["T1"]], [T["T1"], T["T2"]]) == want


def test_seed_004_needs_two_roll_die_calls() -> None:
    exp = [("roll_die", {"sides": 10}), ("roll_die", {"sides": 10}), ("check_prime", {"nums": [9]})]
    assert score("ANY_ORDER", [exp[0], exp[2]], exp) == 0.0
    assert score("ANY_ORDER", [exp[2], exp[0], exp[1]], exp) == 1.0


@pytest.mark.parametrize(("mt", "want"), [("EXACT", 1.0), ("IN_ORDER", 1.0), ("ANY_ORDER", 1.0)])
def test_both_empty(mt: str, want: float) -> None:
    assert score(mt, [], []) == want


@pytest.mark.parametrize(("mt", "want"), [("EXACT", 0.0), ("IN_ORDER", 1.0), ("ANY_ORDER", 1.0)])
def test_nothing_expected_something_called(mt: str, want: float) -> None:
    assert score(mt, ["a"], []) == want


def test_match_type_coercion() -> None:
    assert AdkToolTrajectory({"match_type": " in-order "}).params.match_type == "IN_ORDER"
    assert AdkToolTrajectory({"match_type": "any order"}).params.match_type == "ANY_ORDER"
    assert AdkToolTrajectory({"match_type": 2}).params.match_type == "ANY_ORDER"
    with pytest.raises(ScorerConfigError, match="match_type"):
        AdkToolTrajectory({"match_type": "fuzzy"})


def test_unspecified_expected_args_is_null() -> None:
    assert score("EXACT", [("f", {})], [("f",)]) == 0.0
    assert score("EXACT", [("f", {"a": 1})], [("f",)], ignore_args=True) == 1.0


def test_absent_args() -> None:
    run = run_with_calls([("f", ABSENT)])
    ref = Expectation(expected_calls=expected([("f", {})]))
    assert AdkToolTrajectory().score(run, ref).reason == "arguments_not_captured"
    assert AdkToolTrajectory({"ignore_args": True}).score(run, ref).score == 1.0
    r = AdkToolTrajectory({"on_missing_arguments": "names_only"}).score(run, ref)
    assert r.score == 1.0 and r.degraded == "names_only"


def test_mean_over_turns_and_pooling() -> None:
    ok = (run_with_calls([("f", {})]), Expectation(expected_calls=(ExpectedCall("f", args={}),)))
    bad = (run_with_calls([("g", {})]), Expectation(expected_calls=(ExpectedCall("f", args={}),)))
    scorer = AdkToolTrajectory()
    r = scorer.score_turns([ok, bad, ok])
    assert r.score == pytest.approx(2 / 3) and r.passed is False
    assert r.details["turn_scores"] == [1.0, 0.0, 1.0]
    assert {i.turn for i in r.issues} == {1}
    refs = [ok[1], bad[1]]
    pooled = scorer.score_pooled([[ok[0], ok[0]], [ok[0], bad[0]]], refs)
    assert pooled.score == 0.75


def test_invocation_count_mismatch() -> None:
    scorer = AdkToolTrajectory()
    r = scorer.score_case([run_with_calls([])], [Expectation(expected_calls=()), Expectation(expected_calls=())])
    assert r.status == "error" and r.reason == "invocation_count_mismatch"
    r2 = scorer.score_pooled([[run_with_calls([])]], [Expectation(expected_calls=())] * 2)
    assert r2.reason == "invocation_count_mismatch"


def test_issues_only_on_failure_and_no_extras_in_in_order() -> None:
    r = AdkToolTrajectory({"match_type": "IN_ORDER"}).score(
        run_with_calls([("a", {}), ("x", {})]), Expectation(expected_calls=expected([("a", {}), ("b", {})]))
    )
    assert [str(i.kind) for i in r.issues] == ["wrong_tool"]
    ok = AdkToolTrajectory({"match_type": "IN_ORDER"}).score(
        run_with_calls([("a", {}), ("x", {})]), Expectation(expected_calls=expected([("a", {})]))
    )
    assert ok.issues == ()
