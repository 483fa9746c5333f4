"""``latency_check`` — latency over budget (SCORING.md §3.6).

Contract: budgets from the expectation: ``tool_latency_budget_ms`` (``{name | "*": ms}``, the
exact name before ``"*"``) and ``run_latency_budget_ms``. Tool latency = ``end_ns − start_ns`` of
an executed call; run latency = the root span's duration. Over budget = strictly greater.
Checked items = executed calls (with times) that have a budget, plus the run when it has a budget
and known times (so a run budget applies to an empty view). Issues ``tool_latency`` per call and
``run_latency`` (``expected`` = budget ms, ``actual`` = measured ms). Score = within-budget items /
checked items; no checked item → ``not_applicable/no_rule``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer
from monitor.scoring.checks._common import CheckParams, check_calls
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, call_issue
from monitor.trajectory.model import Run

__all__ = ["LatencyCheck", "LatencyCheckParams", "tool_budget"]


class LatencyCheckParams(CheckParams):
    """No parameters of its own: the budgets are part of the run's expectation."""


def tool_budget(budgets: Mapping[str, float], name: str) -> float | None:
    """The latency budget of tool ``name``: its own entry, else ``"*"``, else None."""
    if name in budgets:
        return budgets[name]
    return budgets.get("*")


class LatencyCheck(Scorer[LatencyCheckParams]):
    """Tool calls and runs slower than their budgets (SCORING.md §3.6)."""

    kind: ClassVar[str] = "latency_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[LatencyCheckParams]] = LatencyCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset({Need.RULES, Need.TIMINGS})
    summary: ClassVar[str] = "tool and run latency over budget"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        if reference is None:
            return NotScored.na("no_rule")
        tool_budgets = reference.budgets.tool_latency_budget_ms
        run_budget = reference.budgets.run_latency_budget_ms
        if not tool_budgets and run_budget is None:
            return NotScored.na("no_rule")
        issues: list[Issue] = []
        checked = slow = 0
        if tool_budgets:
            for call in check_calls(self, run):
                if not call.executed or call.start_ns is None or call.end_ns is None:
                    continue
                budget = tool_budget(tool_budgets, call.name)
                if budget is None:
                    continue
                checked += 1
                ms = (call.end_ns - call.start_ns) / 1e6
                if ms > budget:
                    slow += 1
                    issues.append(
                        call_issue(
                            FailureKind.TOOL_LATENCY,
                            call,
                            expected=budget,
                            actual=ms,
                            detail={"budget_key": call.name if call.name in tool_budgets else "*"},
                        )
                    )
        run_ms = run.duration_ms
        if run_budget is not None and run_ms is not None:
            checked += 1
            if run_ms > run_budget:
                slow += 1
                issues.append(Issue(kind=FailureKind.RUN_LATENCY, expected=run_budget, actual=run_ms))
        details: dict[str, Any] = {"checked": checked, "over_budget": slow, "run_latency_ms": run_ms}
        if checked == 0:
            return NotScored.na("no_rule", **details)
        return Outcome(score=(checked - slow) / checked, issues=tuple(issues), details=details)
