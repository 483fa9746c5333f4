"""``no_tool_needed_check`` — a tool called when the rules say none is needed (SCORING.md §3.7).

Contract: applies when the expectation has ``no_tools: true`` (seed-000 ``should_not_call_tools``;
a production rule such as agent ``faq`` with ``input_regex: ^(hi|hello|thanks)``), else
``not_applicable/no_rule``. Score 1.0 for an empty view, else 0.0, with one ``unnecessary_tool``
issue per call (``detail.rule = "no_tools"``).
"""

from __future__ import annotations

from typing import ClassVar

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer
from monitor.scoring.checks._common import CheckParams, check_calls
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, call_issue
from monitor.trajectory.model import Run

__all__ = ["NoToolNeededCheck", "NoToolNeededCheckParams"]


class NoToolNeededCheckParams(CheckParams):
    """No parameters of its own: ``no_tools`` is part of the run's expectation."""


class NoToolNeededCheck(Scorer[NoToolNeededCheckParams]):
    """Any tool call on a run whose rules say no tool is needed (SCORING.md §3.7)."""

    kind: ClassVar[str] = "no_tool_needed_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[NoToolNeededCheckParams]] = NoToolNeededCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset({Need.RULES})
    summary: ClassVar[str] = "tools called where the rules say none is needed"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        if reference is None or not reference.no_tools:
            return NotScored.na("no_rule")
        calls = check_calls(self, run)
        issues = tuple(call_issue(FailureKind.UNNECESSARY_TOOL, c, detail={"rule": "no_tools"}) for c in calls)
        return Outcome(score=0.0 if calls else 1.0, issues=issues, details={"calls": len(calls)})
