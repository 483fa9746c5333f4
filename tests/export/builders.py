"""Hand-built runs and results for the export tests."""

from __future__ import annotations

from monitor.scoring.result import FailureKind, Issue, NoteKind, ScoreResult, Severity
from monitor.trajectory.model import Run, ToolCall

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
RUN = "00f067aa0ba902b7"


def make_run(
    agent: str | None = "planner",
    tools: tuple[str, ...] = ("search", "fetch", "search"),
    trace_id: str = TRACE,
    run_id: str = RUN,
    children: tuple[Run, ...] = (),
) -> Run:
    calls = tuple(ToolCall(index=i, name=name, executed=True) for i, name in enumerate(tools))
    return Run(trace_id=trace_id, run_id=run_id, agent=agent, calls=calls, children=children)


def result(
    run: Run,
    scorer: str = "tool_selection",
    score: float | None = 0.5,
    passed: bool | None = False,
    issues: tuple[Issue, ...] = (),
    status: str = "scored",
    agent: str | None = None,
) -> ScoreResult:
    return ScoreResult(
        scorer=scorer,
        scorer_kind="code",
        scorer_version=1,
        status=status,  # type: ignore[arg-type]
        score=score if status == "scored" else None,
        passed=passed if status == "scored" else None,
        issues=issues,
        trace_id=run.trace_id,
        run_id=run.run_id,
        agent=agent if agent is not None else run.agent,
    )


SELECTION_ISSUES = (
    Issue(FailureKind.WRONG_TOOL, tool="fetch", call_index=1),
    Issue(FailureKind.MISSING_TOOL, tool="get_forecast"),
    Issue(FailureKind.HALLUCINATED_TOOL, tool="get_weather_v2", call_index=3),
)
PARAMETER_ISSUES = (
    Issue(FailureKind.MISSING_PARAMETER, tool="search", parameter="query", call_index=0),
    Issue(FailureKind.WRONG_TYPE, tool="search", parameter="limit", call_index=2),
)
OTHER_ISSUES = (
    Issue(FailureKind.GOAL_NOT_MET),
    Issue(NoteKind.TOOL_SCHEMA_INVALID, severity=Severity.INFO, tool="search"),
    Issue(FailureKind.TOOL_LATENCY, severity=Severity.INFO, tool="fetch"),
)
