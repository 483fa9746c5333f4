"""Recommendations grounded in the tools' definitions: typed fixes, confirmed causes, hypotheses without data."""

from __future__ import annotations

from monitor.analysis import DefinitionIndex, Pattern, ToolDefinition, recommend
from monitor.analysis.recommend import recommend_one

FORECAST = ToolDefinition(
    "weather",
    "get_forecast",
    "Daily forecast for a city.",
    {
        "type": "object",
        "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
        "required": ["city", "days"],
    },
)
WEATHER = ToolDefinition("weather", "get_weather", "Current weather for a city.", {"type": "object"})
BOOK = ToolDefinition("travel", "book_flight", "Book a flight. Only after the user confirmed.", {"type": "object"})


def pattern(kind: str, tool: str, **kw: object) -> Pattern:
    values: dict[str, object] = {
        "agent": "weather",
        "kind": kind,
        "tool": tool,
        "parameter": None,
        "expected_tool": None,
        "severity": "error",
        "issues": 34,
        "runs": 34,
        "error_runs": 34,
        "agent_runs": 400,
        "tool_calls": 210,
        "examples": ("a" * 32,),
    }
    values.update(kw)
    return Pattern(**values)  # type: ignore[arg-type]


def test_missing_parameter_quotes_the_schema() -> None:
    r = recommend_one(pattern("missing_parameter", "get_forecast", parameter="/days"), DefinitionIndex([FORECAST]))
    assert r.fix == "parameter_schema" and r.confirmed
    assert r.finding == "`get_forecast` omitted `days` in 34 of 210 calls (16%) of `weather`."
    assert r.cause == "`days` is required in its schema but its description never mentions it."
    assert r.suggestion is not None and "integer, 1–14" in r.suggestion
    unknown = recommend_one(pattern("missing_parameter", "get_forecast", parameter="/days"), DefinitionIndex([]))
    assert not unknown.confirmed and "no definition" in unknown.cause


def test_confusion_and_forbidden_call() -> None:
    r = recommend_one(
        pattern("wrong_tool", "get_weather", expected_tool="get_forecast", source="inferred"),
        DefinitionIndex([FORECAST, WEATHER]),
        {"a" * 32: "What's the 5-day forecast for Oslo?"},
    )
    assert r.fix == "tool_description" and r.status == "confirmed"
    assert "Neither description says when to use the other" in r.cause
    assert r.suggestion is not None and "5-day forecast for Oslo" in r.suggestion
    f = recommend_one(pattern("forbidden_tool", "book_flight", agent="travel"), DefinitionIndex([BOOK]))
    assert f.fix == "tool_implementation" and f.confirmed and "already restricts it" in f.cause


def test_ranked_by_impact_with_state_changing_weight() -> None:
    ps = [
        pattern("tool_error", "get_forecast", runs=40, error_runs=40),
        pattern("tool_error", "book_flight", agent="travel", runs=30, error_runs=30, state_changing=True),
        pattern("loop", "get_forecast", runs=3, error_runs=3),
    ]
    recs = recommend(ps, [FORECAST, BOOK], limit=10, min_runs=5)
    assert [r.pattern.tool for r in recs] == ["book_flight", "get_forecast"]  # 45 > 40; the loop is below min_runs
    assert all(r.fix in ("tool_description", "parameter_schema", "system_prompt", "tool_implementation") for r in recs)
