"""``tool_error_check`` — calls that errored (SCORING.md §3.3).

Contract: a call errored when :func:`~monitor.trajectory.errors.call_error` says so (the
builder's ``ToolCall.error`` from span status / ``error.type`` / ``exception`` event / strands
status / pydantic-ai failure, or an MCP ``CallToolResult`` with ``isError: true``). One
``tool_error`` issue per errored call; ``detail`` = ``{"type", "message" (≤ 500 chars),
"recovered"}``, ``recovered`` = a later executed call of the same name in the view did not
error. With ``count_recovered: false`` recovered errors are not ``flagged`` and their issue is a
``warning``. Score = 1 − flagged / calls. Empty view → ``not_applicable/no_tool_calls``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer
from monitor.scoring.checks._common import CheckParams, check_calls, truncate_text
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, Severity, call_issue
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import Run, ToolError

__all__ = ["ToolErrorCheck", "ToolErrorCheckParams"]


class ToolErrorCheckParams(CheckParams):
    """``count_recovered``: count errors followed by a successful call of the same tool (default true)."""

    count_recovered: bool = True


class ToolErrorCheck(Scorer[ToolErrorCheckParams]):
    """Tool calls whose execution failed (SCORING.md §3.3)."""

    kind: ClassVar[str] = "tool_error_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[ToolErrorCheckParams]] = ToolErrorCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset()
    summary: ClassVar[str] = "tool calls that errored"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        calls = check_calls(self, run)
        if not calls:
            return NotScored.na("no_tool_calls")
        errors: list[ToolError | None] = [call_error(c) for c in calls]
        # walking backwards: names with a later executed, error-free call
        later_ok: list[bool] = [False] * len(calls)
        ok_names: set[str] = set()
        for i in range(len(calls) - 1, -1, -1):
            later_ok[i] = calls[i].name in ok_names
            if calls[i].executed and errors[i] is None:
                ok_names.add(calls[i].name)
        issues: list[Issue] = []
        flagged = recovered_count = 0
        by_type: dict[str, int] = {}
        for call, error, recovered in zip(calls, errors, later_ok, strict=True):
            if error is None:
                continue
            by_type[error.type] = by_type.get(error.type, 0) + 1
            counted = self.params.count_recovered or not recovered
            flagged += counted
            recovered_count += recovered
            issues.append(
                call_issue(
                    FailureKind.TOOL_ERROR,
                    call,
                    severity=Severity.ERROR if counted else Severity.WARNING,
                    actual=error.type,
                    detail={"type": error.type, "message": truncate_text(error.message), "recovered": recovered},
                )
            )
        details: dict[str, Any] = {
            "calls": len(calls),
            "errored": len(issues),
            "recovered": recovered_count,
            "flagged": flagged,
            "error_types": dict(sorted(by_type.items())),
        }
        return Outcome(score=1.0 - flagged / len(calls), issues=tuple(issues), details=details)
