"""Builders of stored results for the store tests."""

from __future__ import annotations

from typing import Any

from monitor.scoring.result import FailureKind, Issue, JudgeUsage, NoteKind, ScoreResult, Severity, Status
from monitor.store import StoredResult


def result(
    trace_id: str = "t1",
    run_id: str = "r1",
    scorer: str = "tool_eval",
    version: int = 1,
    *,
    agent: str | None = "weather",
    status: Status = "scored",
    score: float | None = 1.0,
    passed: bool | None = True,
    scored_at: str | None = "2025-03-01T12:00:00Z",
    issues: tuple[Issue, ...] = (),
    details: dict[str, Any] | None = None,
    judge: JudgeUsage | None = None,
    reason: str | None = None,
    tools: tuple[str, ...] = ("get_forecast",),
    run_start_ns: int | None = 1_740_830_400_000_000_000,
    conversation_id: str | None = None,
) -> StoredResult:
    return StoredResult(
        result=ScoreResult(
            scorer=scorer,
            scorer_kind=scorer.split(":")[0],
            scorer_version=version,
            status=status,
            score=score if status == "scored" else None,
            threshold=0.5,
            passed=passed if status == "scored" else None,
            reason=reason,
            issues=issues,
            details=details or {},
            params={"threshold": 0.5},
            params_hash="abc123",
            judge=judge,
            trace_id=trace_id,
            run_id=run_id,
            agent=agent,
            conversation_id=conversation_id,
            scored_at=scored_at,
        ),
        run_start_ns=run_start_ns,
        tools=tools,
    )


def wrong_tool(called: str, expected: str) -> Issue:
    return Issue(FailureKind.WRONG_TOOL, tool=called, call_index=0, detail={"expected_tool": expected})


def missing_param(tool: str, parameter: str) -> Issue:
    return Issue(FailureKind.MISSING_PARAMETER, tool=tool, parameter=parameter, expected=3)


def note(tool: str) -> Issue:
    return Issue(NoteKind.TOOL_SCHEMA_INVALID, severity=Severity.INFO, tool=tool)
