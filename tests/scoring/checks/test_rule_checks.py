"""call_budget_check (§3.5), latency_check (§3.6), no_tool_needed_check (§3.7), forbidden_tool_check (§3.8)."""

from __future__ import annotations

from typing import Any

import pytest

from monitor.scoring.checks.call_budget_check import CallBudgetCheck
from monitor.scoring.checks.forbidden_tool_check import ForbiddenToolCheck
from monitor.scoring.checks.latency_check import LatencyCheck
from monitor.scoring.checks.no_tool_needed_check import NoToolNeededCheck
from monitor.scoring.expectation import Budgets, Expectation
from monitor.scoring.result import FailureKind
from tests.scoring.checks.builders import c, make_run


def budgets(**kw: Any) -> Expectation:
    return Expectation(budgets=Budgets(**kw))


# --------------------------------------------------------------------------- §3.5


def test_budget_not_applicable_without_rule() -> None:
    run = make_run([c("a")])
    assert CallBudgetCheck().score(run, None).reason == "no_rule"
    assert CallBudgetCheck().score(run, Expectation()).reason == "no_rule"


def test_run_budget_exceeded() -> None:
    r = CallBudgetCheck().score(make_run([c("a"), c("b"), c("a"), c("c")]), budgets(max_tool_calls=3))
    assert r.score == 0.75 and r.passed is False
    (issue,) = r.issues
    assert (issue.kind, issue.tool, issue.expected, issue.actual, issue.call_index) == (
        FailureKind.EXCESS_CALLS,
        None,
        3,
        4,
        3,
    )


def test_per_tool_budget_and_minimum_ratio() -> None:
    run = make_run([c("search")] * 4 + [c("fetch")])
    r = CallBudgetCheck().score(run, budgets(max_tool_calls=10, max_calls_per_tool={"search": 2, "fetch": 5, "x": 1}))
    assert r.score == 0.5
    assert [(i.tool, i.expected, i.actual) for i in r.issues] == [("search", 2, 4)]
    assert r.details["calls_per_tool"] == {"fetch": 1, "search": 4}


def test_budget_within_limits_and_empty_view() -> None:
    assert CallBudgetCheck().score(make_run([c("a")] * 3), budgets(max_tool_calls=3)).score == 1.0
    r = CallBudgetCheck().score(make_run([]), budgets(max_tool_calls=0))
    assert r.status == "scored" and r.score == 1.0 and r.passed is True
    zero = CallBudgetCheck().score(make_run([c("a")]), budgets(max_tool_calls=0))
    assert zero.score == 0.0 and zero.passed is False


def test_budget_counts_nested_calls_by_default() -> None:
    child = make_run([c("inner"), c("inner")], agent="child", run_id="c" * 16)
    run = make_run([c("outer")], children=[child])
    assert CallBudgetCheck().score(run, budgets(max_tool_calls=2)).score == pytest.approx(2 / 3)
    assert CallBudgetCheck({"scope": "own"}).score(run, budgets(max_tool_calls=2)).score == 1.0


# --------------------------------------------------------------------------- §3.6


def test_latency_not_applicable() -> None:
    run = make_run([c("a")])
    assert LatencyCheck().score(run, None).reason == "no_rule"
    assert LatencyCheck().score(run, Expectation()).reason == "no_rule"
    # a budget for a tool that was not executed: nothing checked
    assert LatencyCheck().score(run, budgets(tool_latency_budget_ms={"b": 10})).reason == "no_rule"
    assert (
        LatencyCheck().score(make_run([c("a", executed=False)]), budgets(tool_latency_budget_ms={"*": 1})).reason
        == "no_rule"
    )


def test_tool_latency_name_before_star_strictly_greater() -> None:
    run = make_run([c("slow", duration_ms=300), c("fast", duration_ms=100), c("edge", duration_ms=100)])
    r = LatencyCheck().score(run, budgets(tool_latency_budget_ms={"*": 100, "slow": 500}))
    assert r.score == 1.0 and r.details["checked"] == 3  # 100 == budget is within
    r2 = LatencyCheck().score(run, budgets(tool_latency_budget_ms={"*": 99, "slow": 200}))
    assert r2.score == 0.0
    assert [(i.tool, i.expected, i.actual, i.detail["budget_key"]) for i in r2.issues] == [
        ("slow", 200, 300.0, "slow"),
        ("fast", 99, 100.0, "*"),
        ("edge", 99, 100.0, "*"),
    ]


def test_run_latency_applies_to_empty_view() -> None:
    r = LatencyCheck().score(make_run([], run_ms=12_000), budgets(run_latency_budget_ms=10_000))
    assert r.score == 0.0 and r.passed is False
    (issue,) = r.issues
    assert issue.kind is FailureKind.RUN_LATENCY and issue.expected == 10_000 and issue.actual == 12_000.0
    assert LatencyCheck().score(make_run([], run_ms=10_000), budgets(run_latency_budget_ms=10_000)).score == 1.0


def test_latency_mixed_items() -> None:
    run = make_run([c("a", duration_ms=50), c("b", duration_ms=5)], run_ms=100)
    r = LatencyCheck().score(run, budgets(tool_latency_budget_ms={"a": 10}, run_latency_budget_ms=1000))
    assert r.details["checked"] == 2 and r.score == 0.5


# --------------------------------------------------------------------------- §3.7


def test_no_tool_needed() -> None:
    rule = Expectation(no_tools=True)
    assert NoToolNeededCheck().score(make_run([c("a")]), None).reason == "no_rule"
    assert NoToolNeededCheck().score(make_run([c("a")]), Expectation()).reason == "no_rule"
    assert NoToolNeededCheck().score(make_run([]), rule).score == 1.0
    r = NoToolNeededCheck().score(make_run([c("a"), c("b")]), rule)
    assert r.score == 0.0 and r.passed is False
    assert [(i.kind, i.tool, i.detail) for i in r.issues] == [
        (FailureKind.UNNECESSARY_TOOL, "a", {"rule": "no_tools"}),
        (FailureKind.UNNECESSARY_TOOL, "b", {"rule": "no_tools"}),
    ]


# --------------------------------------------------------------------------- §3.8


def test_forbidden_tools() -> None:
    check = ForbiddenToolCheck()
    run = make_run([c("read_file"), c("delete_file"), c("Delete_dir"), c("drop_table")])
    assert check.score(run, None).reason == "no_rule"
    assert check.score(run, Expectation()).reason == "no_rule"
    assert check.score(run, Expectation(forbidden_tools=())).score == 1.0
    r = check.score(run, Expectation(forbidden_tools=("delete_*", "drop_table")))
    assert r.score == 0.0 and r.passed is False
    assert [(i.tool, i.detail["pattern"]) for i in r.issues] == [
        ("delete_file", "delete_*"),
        ("drop_table", "drop_table"),
    ]
    assert check.score(make_run([]), Expectation(forbidden_tools=("x",))).score == 1.0
    assert check.score(make_run([c("read_file")]), Expectation(forbidden_tools=("delete_*",))).score == 1.0
