"""Report queries: the same answers on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from monitor.store import SqlResultStore, queries
from tests.store.builders import missing_param, note, result, wrong_tool

SINCE = datetime(2025, 3, 1, tzinfo=UTC)
UNTIL = datetime(2025, 3, 3, tzinfo=UTC)


@pytest.fixture
def filled(store: SqlResultStore) -> SqlResultStore:
    day1, day2 = "2025-03-01T{}:00:00Z", "2025-03-02T{}:00:00Z"
    confused = wrong_tool("search", "get_forecast")
    store.write(
        [
            # weather / tool_eval
            result("t1", scorer="tool_eval", score=1.0, passed=True, scored_at=day1.format(10)),
            result(
                "t2",
                scorer="tool_eval",
                score=0.4,
                passed=False,
                scored_at=day1.format(11),
                issues=(confused, missing_param("get_forecast", "/days")),
            ),
            result(
                "t3",
                scorer="tool_eval",
                score=0.0,
                passed=False,
                scored_at=day1.format(12),
                issues=(confused, confused, note("get_forecast")),
            ),
            result("t4", scorer="tool_eval", status="not_applicable", reason="no_reference", scored_at=day1.format(13)),
            # weather / judge
            result("t1", scorer="judge", score=0.8, passed=True, scored_at=day1.format(10)),
            result("t2", scorer="judge", status="error", reason="judge_unavailable", scored_at=day1.format(11)),
            # travel / tool_eval
            result(
                "t5",
                agent="travel",
                score=0.9,
                passed=True,
                scored_at=day2.format("09"),
                issues=(wrong_tool("book_flight", "search_flights"),),
            ),
            result(
                "t6",
                agent="travel",
                score=0.2,
                passed=False,
                scored_at=day2.format(10),
                issues=(missing_param("book_flight", "/date"),),
            ),
            # no agent name
            result("t7", agent=None, score=1.0, passed=True, scored_at=day2.format(11)),
            # before the range
            result("t0", score=0.0, passed=False, scored_at="2025-02-01T00:00:00Z", issues=(confused,)),
        ]
    )
    return store


def test_scorer_stats(filled: SqlResultStore) -> None:
    stats = queries.scorer_stats(filled, SINCE, UNTIL)
    assert [(s.agent, s.scorer) for s in stats] == [
        ("travel", "tool_eval"),
        ("weather", "judge"),
        ("weather", "tool_eval"),
        (None, "tool_eval"),
    ]
    travel, judge, weather, anonymous = stats
    assert (travel.results, travel.scored, travel.passed, travel.failed) == (2, 2, 1, 1)
    assert travel.pass_rate == 0.5 and travel.mean_score == pytest.approx(0.55)
    assert (judge.results, judge.scored, judge.errors, judge.pass_rate) == (2, 1, 1, 1.0)
    assert judge.mean_score == pytest.approx(0.8)
    assert (weather.results, weather.scored, weather.not_applicable, weather.passed, weather.failed) == (4, 3, 1, 1, 2)
    assert weather.pass_rate == pytest.approx(1 / 3) and weather.mean_score == pytest.approx(1.4 / 3)
    assert (anonymous.results, anonymous.pass_rate, anonymous.mean_score) == (1, 1.0, 1.0)

    assert [s.results for s in queries.scorer_stats(filled)] == [2, 2, 5, 1]  # open range: t0 counts
    only = queries.scorer_stats(filled, SINCE, UNTIL, agents=["weather"], scorers=["judge"])
    assert [(s.agent, s.scorer) for s in only] == [("weather", "judge")]
    assert queries.scorer_stats(filled, UNTIL, None) == []
    # naive bounds are UTC
    assert queries.scorer_stats(filled, SINCE.replace(tzinfo=None), UNTIL.replace(tzinfo=None)) == stats


def test_issue_counts(filled: SqlResultStore) -> None:
    counts = queries.issue_counts(filled, SINCE, UNTIL)
    assert [(c.kind, c.agent, c.tool, c.parameter, c.issues, c.runs, c.example_trace_ids) for c in counts] == [
        ("wrong_tool", "weather", "search", None, 3, 2, ("t3", "t2")),
        ("missing_parameter", "travel", "book_flight", "/date", 1, 1, ("t6",)),
        ("missing_parameter", "weather", "get_forecast", "/days", 1, 1, ("t2",)),
        ("wrong_tool", "travel", "book_flight", None, 1, 1, ("t5",)),
    ]
    assert queries.issue_counts(filled, SINCE, UNTIL, examples=1)[0].example_trace_ids == ("t3",)
    assert queries.issue_counts(filled, SINCE, UNTIL, examples=0)[0].example_trace_ids == ()
    assert len(queries.issue_counts(filled, SINCE, UNTIL, limit=2)) == 2
    notes = queries.issue_counts(filled, SINCE, UNTIL, include_notes=True, kinds=["tool_schema_invalid"])
    assert [(c.kind, c.tool, c.example_trace_ids) for c in notes] == [("tool_schema_invalid", "get_forecast", ("t3",))]
    assert queries.issue_counts(filled, SINCE, UNTIL, kinds=["tool_schema_invalid"]) == []
    travel = queries.issue_counts(filled, SINCE, UNTIL, agents=["travel"], tools=["book_flight"])
    assert [c.kind for c in travel] == ["missing_parameter", "wrong_tool"]
    everything = queries.issue_counts(filled)
    assert everything[0].issues == 4 and everything[0].example_trace_ids == ("t3", "t2", "t0")


def test_confusion_pairs(filled: SqlResultStore) -> None:
    pairs = queries.confusion_pairs(filled, SINCE, UNTIL)
    assert [(p.agent, p.called, p.expected, p.issues, p.runs, p.example_trace_ids) for p in pairs] == [
        ("weather", "search", "get_forecast", 3, 2, ("t3", "t2")),
        ("travel", "book_flight", "search_flights", 1, 1, ("t5",)),
    ]
    assert [p.runs for p in queries.confusion_pairs(filled, agents=["weather"])] == [3]


def test_list_results(filled: SqlResultStore) -> None:
    rows = queries.list_results(filled, SINCE, UNTIL, agents=["weather"])
    assert [(r.trace_id, r.scorer) for r in rows] == [
        ("t4", "tool_eval"),
        ("t3", "tool_eval"),
        ("t2", "judge"),
        ("t2", "tool_eval"),
        ("t1", "judge"),
        ("t1", "tool_eval"),
    ]
    assert rows[0].status == "not_applicable" and rows[0].reason == "no_reference" and rows[0].passed is None
    assert rows[1].scored_at == datetime(2025, 3, 1, 12, tzinfo=UTC) and rows[1].passed is False
    failed = queries.list_results(filled, SINCE, UNTIL, passed=False)
    assert [(r.trace_id, r.agent) for r in failed] == [("t6", "travel"), ("t3", "weather"), ("t2", "weather")]
    assert len(queries.list_results(filled, limit=3)) == 3
    assert [r.trace_id for r in queries.list_results(filled, statuses=["error"])] == ["t2"]


def test_queries_accept_an_engine(filled: SqlResultStore) -> None:
    assert queries.scorer_stats(filled.engine, SINCE, UNTIL) == queries.scorer_stats(filled, SINCE, UNTIL)
