"""``call_budget_check`` — excess calls (SCORING.md §3.5).

Contract: budgets come from the expectation (rules §3.9 or a dataset): ``max_tool_calls`` for the
run and ``max_calls_per_tool`` (``{name: n}``, exact names). None set → ``not_applicable/no_rule``.
Counts use the view (default ``flatten``: nested agents' calls count). One ``excess_calls`` issue
per exceeded budget (``tool`` None for the run budget, ``expected`` = limit, ``actual`` = count,
``call_index`` = the first call over the limit). Score = ``min(1, min over budgets of limit /
count)`` (1.0 for an empty view; a budget whose tool was not called does not lower it); passes iff
every count ≤ its limit.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, ClassVar

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer
from monitor.scoring.checks._common import CheckParams, check_calls
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, call_issue
from monitor.trajectory.model import Run, ToolCall

__all__ = ["CallBudgetCheck", "CallBudgetCheckParams"]


class CallBudgetCheckParams(CheckParams):
    """No parameters of its own: the budgets are part of the run's expectation."""


def _ratio(limit: int, count: int) -> float:
    if count <= limit:
        return 1.0
    return limit / count


class CallBudgetCheck(Scorer[CallBudgetCheckParams]):
    """Tool calls over the run's or a tool's call budget (SCORING.md §3.5)."""

    kind: ClassVar[str] = "call_budget_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[CallBudgetCheckParams]] = CallBudgetCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset({Need.RULES})
    summary: ClassVar[str] = "tool calls over the configured budgets"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        budgets = reference.budgets if reference is not None else None
        if budgets is None or (budgets.max_tool_calls is None and not budgets.max_calls_per_tool):
            return NotScored.na("no_rule")
        calls = check_calls(self, run)
        issues: list[Issue] = []
        score = 1.0

        def over(limit: int, matching: list[ToolCall], tool: str | None) -> None:
            nonlocal score
            count = len(matching)
            score = min(score, _ratio(limit, count))
            if count > limit:
                issues.append(
                    call_issue(
                        FailureKind.EXCESS_CALLS,
                        matching[limit],  # the first call over the budget
                        tool=tool,
                        expected=limit,
                        actual=count,
                        detail={"budget": "max_tool_calls" if tool is None else "max_calls_per_tool"},
                    )
                )

        if budgets.max_tool_calls is not None:
            over(budgets.max_tool_calls, list(calls), None)
        by_name: dict[str, list[ToolCall]] = {}
        for call in calls:
            by_name.setdefault(call.name, []).append(call)
        for name, limit in budgets.max_calls_per_tool.items():
            over(limit, by_name.get(name, []), name)
        details: dict[str, Any] = {
            "calls": len(calls),
            "max_tool_calls": budgets.max_tool_calls,
            "calls_per_tool": dict(sorted(Counter(c.name for c in calls).items())),
            "max_calls_per_tool": dict(budgets.max_calls_per_tool),
        }
        return Outcome(score=score, issues=tuple(issues), details=details)
