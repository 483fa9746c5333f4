"""Failure patterns from plain rows: confusions by their evidence, no double counting, rates, trends, the bounded
set of active patterns, state-changing weight."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from monitor.analysis import (
    DefinitionIndex,
    IssueGroup,
    SelectionIssue,
    ToolDefinition,
    ToolUsage,
    Window,
    WindowData,
    active_patterns,
    analyze,
    find_patterns,
)
from monitor.analysis.model import AgentDay

T0 = datetime(2026, 11, 16, tzinfo=UTC)
WINDOW = Window(T0, T0 + timedelta(days=7))


def sel(trace: str, kind: str, tool: str | None, called: tuple[str, ...], **kw: object) -> SelectionIssue:
    return SelectionIssue(
        trace_id=trace,
        run_id="r",
        agent=kw.get("agent", "a"),  # type: ignore[arg-type]
        scorer=str(kw.get("scorer", "tools_selected")),
        judge=bool(kw.get("judge", False)),
        kind=kind,
        severity="error",
        tool=tool,
        expected_tool=kw.get("expected_tool"),  # type: ignore[arg-type]
        call_index=kw.get("call_index"),  # type: ignore[arg-type]
        called=called,
        scored_at=T0 + timedelta(hours=int(trace[-1], 16) if trace[-1].isalnum() else 0),
    )


def test_confusions_by_evidence_and_no_double_counting() -> None:
    rows = [
        # explicit wrong_tool (reference scorer via explain)
        sel("t1", "wrong_tool", "get_weather", ("get_weather",), expected_tool="get_forecast", call_index=0),
        # missing + unnecessary in the same run: paired
        sel("t2", "missing_tool", "get_forecast", ("get_weather",)),
        sel("t2", "unnecessary_tool", "get_weather", ("get_weather",), call_index=0),
        # missing only, the run called another offered tool: inferred
        sel("t3", "missing_tool", "get_forecast", ("get_weather",)),
        # missing, the run called an invented name: goes to hallucinated_tool
        sel("t4", "missing_tool", "get_forecast", ("get_weather_fc",)),
        sel("t4", "hallucinated_tool", "get_weather_fc", ("get_weather_fc",), call_index=0),
        # missing, nothing called: stays missing_tool
        sel("t5", "missing_tool", "get_forecast", ()),
        # the judge says so
        sel("t6", "wrong_tool", "get_weather", ("get_weather",), expected_tool="get_forecast", judge=True),
    ]
    defs = DefinitionIndex(
        [ToolDefinition("a", n, f"{n} tool", {"type": "object"}) for n in ("get_weather", "get_forecast")]
    )
    data = WindowData(WINDOW, agent_days=[AgentDay("a", T0.date(), 100, 10)], selection=rows)
    patterns = {(p.kind, p.tool, p.expected_tool): p for p in find_patterns(data, defs)}
    confusion = patterns[("wrong_tool", "get_weather", "get_forecast")]
    assert confusion.runs == 4 and confusion.source == "expectation"
    assert dict(confusion.by_source) == {"expectation": 1, "paired": 1, "inferred": 1, "judge": 1}
    assert ("unnecessary_tool", "get_weather", None) not in patterns  # part of the confusion
    assert patterns[("missing_tool", "get_forecast", None)].runs == 1
    invented = patterns[("hallucinated_tool", "get_weather_fc", None)]
    assert invented.runs == 1 and invented.instead_of == (("get_forecast", 1),)
    assert confusion.run_rate == 0.04


def test_rates_trend_and_state_changing_weight() -> None:
    def window_data(window: Window, runs: int, hurt: int) -> WindowData:
        return WindowData(
            window,
            agent_days=[AgentDay("a", window.since.date(), runs, hurt)],
            tools=[ToolUsage("a", "send_email", 2 * runs, runs), ToolUsage("a", "lookup", runs, runs)],
            issue_groups=[
                IssueGroup("a", "missing_parameter", "send_email", "/to", hurt, hurt, hurt, examples=("f" * 32,)),
                IssueGroup("a", "missing_parameter", "lookup", "/q", hurt, hurt, 0),
            ],
        )

    current, previous = window_data(WINDOW, 1000, 80), window_data(WINDOW.previous(), 1000, 30)
    analysis = analyze(current, previous, significance=0.05)
    send, lookup = analysis.patterns
    assert send.tool == "send_email" and send.state_changing and send.impact == 80 * 1.5
    assert lookup.severity == "warning" and lookup.impact == 40.0
    assert send.call_rate == 80 / 2000 and send.run_rate == 0.08
    assert send.trend is not None and send.trend.significant and send.trend.direction == "up"
    assert send.trend.previous_runs == 30 and send.examples == ("f" * 32,)
    steady = analyze(current, window_data(WINDOW.previous(), 1000, 78)).patterns[0]
    assert steady.trend is not None and not steady.trend.significant
    assert analysis.agents[0].failed_runs == 80 and analysis.failure_trend is not None


def test_active_patterns_are_bounded_and_stable() -> None:
    groups = [IssueGroup("a", "tool_error", f"t{i:03d}", None, i, i, i) for i in range(1, 300)]
    data = WindowData(WINDOW, agent_days=[AgentDay("a", T0.date(), 10_000, 500)], issue_groups=groups)
    patterns = find_patterns(data)
    active = active_patterns(patterns, 50, min_runs=5)
    assert len(active) == 50 and active[0].tool == "t299" and all(p.runs >= 5 for p in active)
    assert active == active_patterns(list(reversed(patterns)), 50, min_runs=5)
    assert set(active[0].labels()) == {"agent", "kind", "tool", "parameter", "expected_tool"}
    assert active_patterns(patterns, 0) == []
