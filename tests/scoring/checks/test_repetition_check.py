"""repetition_check (SCORING.md §3.4)."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.scoring.checks.repetition_check import Cycle, RepetitionCheck, call_key, find_cycles
from monitor.scoring.expectation import Budgets, Expectation
from monitor.scoring.result import FailureKind, ScoreResult, Severity
from monitor.trajectory.model import ABSENT, Malformed, ToolCall
from tests.scoring.checks.builders import c, make_run


def rep(run: Any, exp: Expectation | None = None, **params: Any) -> ScoreResult:
    return RepetitionCheck(params).score(run, exp)


def test_adk_roll_die_twice_allowed_third_flagged() -> None:
    assert rep(make_run([c("roll_die", {"sides": 10})] * 2)).score == 1.0
    r = rep(make_run([c("roll_die", {"sides": 10})] * 3))
    repeated = [i for i in r.issues if i.kind is FailureKind.REPEATED_CALL]
    assert [(i.call_index, i.expected, i.actual) for i in repeated] == [(2, 2, 3)]
    assert repeated[0].detail["retry"] is False and repeated[0].detail["first_index"] == 0
    # three identical calls are also a period-1 cycle; the flagged set is the union
    assert r.details["flagged"] == 2 and r.score == pytest.approx(1 / 3) and r.passed is False


def test_spec_example_search_fetch_loop() -> None:
    run = make_run([c("search", {"q": 1}), c("fetch", {"id": 1})] * 3)
    r = rep(run)
    loops = [i for i in r.issues if i.kind is FailureKind.LOOP]
    assert len(loops) == 1
    assert loops[0].detail == {
        "kind": "cycle",
        "start": 0,
        "period": 2,
        "repeats": 3,
        "names": ["search", "fetch"],
        "name_only": False,
    }
    assert r.details["flagged"] == 4 and r.score == 1 - 4 / 6


def test_per_tool_limit_from_params_and_expectation() -> None:
    run = make_run([c("roll_die", {"sides": 6}), c("other", {"n": 1})] * 2 + [c("roll_die", {"sides": 6})])
    assert any(i.kind is FailureKind.REPEATED_CALL for i in rep(run).issues)
    ok = rep(run, max_identical_calls_per_tool={"roll_die": 10})
    assert not any(i.kind is FailureKind.REPEATED_CALL for i in ok.issues)
    exp = Expectation(budgets=Budgets(max_identical_calls_per_tool={"roll_die": 10}))
    assert not any(i.kind is FailureKind.REPEATED_CALL for i in rep(run, exp).issues)
    # the expectation's global limit overrides the scorer's global limit
    tight = Expectation(budgets=Budgets(max_identical_calls=1))
    r = rep(make_run([c("a", {"x": 1}), c("a", {"x": 1})]), tight)
    assert [i.call_index for i in r.issues] == [1]


def test_retries_are_not_repeats() -> None:
    run = make_run([c("fetch", {"u": 1}, error="Timeout"), c("fetch", {"u": 1}, error="Timeout"), c("fetch", {"u": 1})])
    r = rep(run)
    assert [i for i in r.issues if i.kind is FailureKind.REPEATED_CALL] == []


def test_retry_storm() -> None:
    run = make_run([c("fetch", {"u": 1}, error="Timeout")] * 4 + [c("fetch", {"u": 1})])
    r = rep(run)
    storms = [i for i in r.issues if i.kind is FailureKind.REPEATED_CALL]
    assert [i.call_index for i in storms] == [3, 4]
    assert all(i.detail["retry_storm"] for i in storms)
    assert storms[0].detail["consecutive_retries"] == 3
    assert rep(run, max_retries=5).details["retry_storms"] == 0


def test_repeat_after_success_resets_retry_run() -> None:
    run = make_run([c("f", {"u": 1}, error="E"), c("f", {"u": 1}), c("f", {"u": 1})])
    # o2 retry, o3 repeat: 1 + 1 repeat = 2 ≤ 2 → nothing flagged
    assert [i for i in rep(run).issues if i.kind is FailureKind.REPEATED_CALL] == []


def test_absent_args_are_name_only_warnings() -> None:
    run = make_run([c("search", ABSENT)] * 6)
    r = rep(run)
    assert r.score == 1.0 and r.passed is True
    assert r.issues and all(i.severity is Severity.WARNING and i.detail["name_only"] for i in r.issues)
    assert r.details["name_only"] is True


def test_any_absent_switches_cycle_detection_to_names() -> None:
    run = make_run([c("a", {"x": 1}), c("b", ABSENT), c("a", {"x": 2}), c("b", {}), c("a", {"x": 3}), c("b", {})])
    r = rep(run)
    (loop,) = [i for i in r.issues if i.kind is FailureKind.LOOP]
    assert loop.severity is Severity.WARNING and loop.detail["period"] == 2 and r.score == 1.0


def _key(args: Any) -> tuple[str, str | None]:
    return call_key(ToolCall(index=0, name="t", args=args))


def test_keys_use_jcs() -> None:
    assert _key({"b": [1, 2], "a": 1.0}) == _key({"a": 1, "b": [1, 2]}) == ("t", '{"a":1,"b":[1,2]}')
    assert _key({"a": "1"}) != _key({"a": 1})
    assert _key(ABSENT) == ("t", None)
    assert _key(Malformed("{x")) == ("t", "\x00malformed:{x")
    big = _key({"n": 2**60})  # beyond JCS's integer domain: sorted-key JSON fallback
    assert big[1] is not None and str(2**60) in big[1]


def test_unicode_and_malformed_keys_compare_exactly() -> None:
    run = make_run([c("t", {"q": "café"}), c("t", {"q": "cafe\u0301"}), c("t", {"q": "café"})])
    assert rep(run).score == 1.0
    run2 = make_run([c("t", Malformed("{"))] * 3)
    assert rep(run2).details["repeated_calls"] == 1


def test_same_tool_streak_is_warning() -> None:
    run = make_run([c("search", {"q": i}) for i in range(8)])
    r = rep(run)
    (streak,) = r.issues
    assert streak.kind is FailureKind.LOOP and streak.severity is Severity.WARNING
    assert streak.detail["kind"] == "same_tool_streak" and streak.detail["length"] == 8
    assert r.score == 1.0 and r.passed is True
    assert rep(make_run([c("search", {"q": i}) for i in range(7)])).issues == ()


def test_no_calls_not_applicable() -> None:
    r = rep(make_run([]))
    assert r.status == "not_applicable" and r.reason == "no_tool_calls"


@pytest.mark.parametrize(
    ("seq", "expected"),
    [
        ("abababc", [Cycle(0, 2, 3)]),
        ("aaaaaa", [Cycle(0, 1, 6)]),  # p=1·6 ties p=2·3 and p=3·2: smaller p wins
        ("abcabcabcx", [Cycle(0, 3, 3)]),
        ("xaaa", [Cycle(1, 1, 3)]),
        ("aabaabaab", [Cycle(0, 3, 3)]),  # p=3·3=9 beats p=1 (k=2 < 3)
        ("abab", []),
        ("", []),
        ("abcdefabcdefabcdef", []),  # period 6 > max_period 5
    ],
)
def test_find_cycles(seq: str, expected: list[Cycle]) -> None:
    assert find_cycles(list(seq), max_period=5, min_cycle_repeats=3) == expected


def test_find_cycles_continues_after_a_cycle() -> None:
    assert find_cycles(list("aaabbb"), 5, 3) == [Cycle(0, 1, 3), Cycle(3, 1, 3)]


def test_invalid_params_are_config_errors() -> None:
    from monitor.scoring.base import ScorerConfigError

    with pytest.raises(ScorerConfigError, match="min_cycle_repeats"):
        RepetitionCheck({"min_cycle_repeats": 1})
    with pytest.raises(ScorerConfigError, match="max_identical"):
        RepetitionCheck({"max_identical_call": 3})
