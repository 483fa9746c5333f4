"""Browsing stored runs (:mod:`monitor.store.browse`) on SQLite and PostgreSQL: every filter, the order and the pages,
one trace with its kept runs, results and issues, the schema check; and, on runs the real pipeline scored, the
filters agree with the stored rows."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.app import build_loop
from monitor.demo.traffic import TrafficGenerator
from monitor.export.http import HealthState
from monitor.export.metrics import Metrics
from monitor.ingest.dlq import DeadLetterQueue
from monitor.ingest.memory import MemoryBroker
from monitor.sampling.sampler import Sampler
from monitor.scoring.stage import ScoringStage
from monitor.settings import RunSummarySettings, load_settings
from monitor.store import SqlResultStore, StoredResult, create_store_engine, migrate, open_store
from monitor.store.browse import (
    REQUIRED_REVISION,
    RunRow,
    SchemaTooOld,
    check_browsable,
    get_trace,
    list_runs,
    traces_starting_with,
)
from monitor.store.kept import RunKeeper
from monitor.store.schema import issues, results, runs
from monitor.testing import ManualClock
from monitor.trajectory.serialize import run_from_json
from tests.store.builders import missing_param, note, result, wrong_tool

T0 = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
SCORED = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)
LONG_TOOL = "lookup_" + "very_long_tool_name_" * 20
UNICODE_AGENT = "天気エージェント 🌦 météo"
TOPIC = "otlp_spans"


def tid(name: str) -> str:
    """A 32-character hex trace id."""
    return hashlib.md5(name.encode()).hexdigest()


def ns(at: datetime) -> int:
    return int(at.timestamp()) * 1_000_000_000


def iso(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def run_doc(trace: str, run_id: str, agent: str | None, tools: list[str], text: str, **extra: Any) -> dict[str, Any]:
    return {
        "trace_id": trace,
        "run_id": run_id,
        "agent": agent,
        "user_input": text,
        "final_response": f"done: {text}",
        "calls": [
            {"name": t, "args": {"q": text, "api_key": "sk-secret"}, "result": "ok", "executed": True} for t in tools
        ],
        **extra,
    }


# ----------------------------------------------------------------------------- a hand-made store


class Runs:
    """The runs written by :func:`fill`, by letter."""

    A = (tid("A"), "a1")  # weather, get_weather ×2, schema_check failed (missing_parameter), start T0+3h
    B = (tid("B"), "b1")  # weather, get_forecast, tool_eval failed (wrong_tool) + a note, start T0+2h
    C = (tid("C"), "c1")  # travel, search_flights + book_flight, tool_error_check errored, start T0+1h
    D = (tid("D"), "d1")  # no agent, no calls, no start (first scored T0+2h30), not kept
    E = (tid("E"), "e1")  # unicode agent, a tool named x"get_weather and a very long one, start T0
    P = (tid("P"), "p1")  # the parent of Q, start T0+5h
    Q = (tid("P"), "q1")  # nested in P, start T0+5h+1s


def keep(doc: dict[str, Any]) -> list[Any]:
    """The kept rows of a run tree, as the daemon's store step makes them (default redaction)."""
    return RunKeeper(RunSummarySettings()).keep(run_from_json(doc), SCORED)[0]


def fill(store: SqlResultStore) -> None:
    at = iso(SCORED)

    def res(
        key: tuple[str, str], scorer: str, agent: str | None, tools: list[str], start: datetime | None, **kw: Any
    ) -> StoredResult:
        return result(
            key[0],
            run_id=key[1],
            scorer=scorer,
            agent=agent,
            tools=tuple(tools),
            run_start_ns=None if start is None else ns(start),
            scored_at=kw.pop("scored_at", at),
            **kw,
        )

    a_tools = ["get_weather", "get_weather"]
    store.write_all(
        [
            res(
                Runs.A,
                "schema_check",
                "weather",
                a_tools,
                T0 + timedelta(hours=3),
                passed=False,
                score=0.0,
                issues=(missing_param("get_weather", "/city"),),
            ),
            res(Runs.A, "tool_error_check", "weather", a_tools, T0 + timedelta(hours=3)),
        ],
        kept=keep(run_doc(*Runs.A, "weather", a_tools, "weather in Paris?")),
    )
    b_tools = ["get_forecast"]
    store.write_all(
        [
            res(
                Runs.B,
                "tool_eval",
                "weather",
                b_tools,
                T0 + timedelta(hours=2),
                passed=False,
                score=0.0,
                issues=(wrong_tool("get_forecast", "get_weather"),),
                reason="called the forecast",
            ),
            res(Runs.B, "schema_check", "weather", b_tools, T0 + timedelta(hours=2), issues=(note("get_forecast"),)),
        ],
        kept=keep(run_doc(*Runs.B, "weather", b_tools, "weather now in Oslo?")),
    )
    c_tools = ["search_flights", "book_flight"]
    store.write_all(
        [
            res(
                Runs.C,
                "tool_error_check",
                "travel",
                c_tools,
                T0 + timedelta(hours=1),
                status="error",
                reason="internal",
            )
        ],
        kept=keep(run_doc(*Runs.C, "travel", c_tools, "fly me to Rome")),
    )
    store.write_all([res(Runs.D, "tool_eval", None, [], None, scored_at=iso(T0 + timedelta(hours=2, minutes=30)))])
    e_tools = ['x"get_weather', LONG_TOOL]
    store.write_all(
        [res(Runs.E, "tool_eval", UNICODE_AGENT, e_tools, T0)],
        kept=keep(run_doc(*Runs.E, UNICODE_AGENT, e_tools, "¿qué tiempo hace en Zürich? 🌧")),
    )
    parent = run_doc(
        *Runs.P,
        "planner",
        ["delegate"],
        "plan my trip",
        children=[run_doc(*Runs.Q, "booker", ["book_flight"], "book it", parent_run_id=Runs.P[1])],
    )
    store.write_all(
        [
            res(Runs.P, "tool_eval", "planner", ["delegate"], T0 + timedelta(hours=5)),
            res(Runs.Q, "tool_eval", "booker", ["book_flight"], T0 + timedelta(hours=5, seconds=1)),
        ],
        kept=keep(parent),
    )


NEWEST_FIRST = [Runs.Q, Runs.P, Runs.A, Runs.D, Runs.B, Runs.C, Runs.E]


def keys(rows: list[RunRow]) -> list[tuple[str, str]]:
    return [(r.trace_id, r.run_id) for r in rows]


@pytest.fixture
def filled(store: SqlResultStore) -> SqlResultStore:
    fill(store)
    return store


def test_runs_come_newest_first_with_what_their_results_say(filled: SqlResultStore) -> None:
    rows = list_runs(filled)
    assert keys(rows) == NEWEST_FIRST
    by = {(r.trace_id, r.run_id): r for r in rows}
    a, b, c, d, e = (by[k] for k in (Runs.A, Runs.B, Runs.C, Runs.D, Runs.E))
    assert all(len(r.trace_id) == 32 for r in rows)
    assert (a.agent, a.tools, a.failed_scorers, a.issue_kinds, a.kept) == (
        "weather",
        ("get_weather", "get_weather"),
        ("schema_check",),
        ("missing_parameter",),
        True,
    )
    assert a.user_text == "weather in Paris?" and a.start_time == T0 + timedelta(hours=3)
    assert (b.failed_scorers, b.issue_kinds, b.note_kinds) == (
        ("tool_eval",),
        ("wrong_tool",),
        ("tool_schema_invalid",),
    )
    assert (c.failed_scorers, c.errored_scorers) == ((), ("tool_error_check",))
    assert (d.agent, d.tools, d.start_time, d.kept, d.user_text) == (None, (), None, False, None)
    assert d.time == d.first_scored_at == T0 + timedelta(hours=2, minutes=30)
    assert (e.agent, e.tools, e.user_text) == (
        UNICODE_AGENT,
        ('x"get_weather', LONG_TOOL),
        "¿qué tiempo hace en Zürich? 🌧",
    )


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        ({"agents": ["weather"]}, [Runs.A, Runs.B]),
        ({"agents": ["travel", UNICODE_AGENT]}, [Runs.C, Runs.E]),
        ({"tools": ["get_weather"]}, [Runs.A]),  # not E, whose tool is x"get_weather
        ({"tools": ['x"get_weather']}, [Runs.E]),
        ({"tools": [LONG_TOOL]}, [Runs.E]),
        ({"tools": ["book_flight"]}, [Runs.Q, Runs.C]),
        ({"tools": ["get_%"]}, []),
        ({"kinds": ["missing_parameter"]}, [Runs.A]),
        ({"kinds": ["wrong_tool", "missing_parameter"]}, [Runs.A, Runs.B]),
        ({"kinds": ["tool_schema_invalid"]}, [Runs.B]),  # a note, asked for by name
        ({"failed_scorers": ["schema_check"]}, [Runs.A]),
        ({"failed_scorers": ["tool_error_check"]}, []),  # C errored, A passed: neither failed
        ({"agents": ["weather"], "kinds": ["wrong_tool"]}, [Runs.B]),
        ({"agents": ["weather"], "tools": ["book_flight"]}, []),
        ({"since": T0 + timedelta(hours=2), "until": T0 + timedelta(hours=3)}, [Runs.D, Runs.B]),  # [since, until)
        ({"since": T0 + timedelta(hours=3)}, [Runs.Q, Runs.P, Runs.A]),
        ({"until": T0 + timedelta(hours=1)}, [Runs.E]),
        ({"since": datetime(2026, 11, 23, 10, 30)}, [Runs.Q, Runs.P, Runs.A, Runs.D]),  # naive: UTC
        ({"since": datetime(2026, 11, 23, 11, 0, tzinfo=UTC).astimezone(tz=None)}, [Runs.Q, Runs.P, Runs.A]),
        ({"agents": []}, []),
    ],
)
def test_filters(filled: SqlResultStore, filters: dict[str, Any], expected: list[tuple[str, str]]) -> None:
    assert keys(list_runs(filled, **filters)) == expected


def test_pages_cover_every_run_once_in_order(filled: SqlResultStore) -> None:
    pages = [keys(list_runs(filled, limit=3, offset=offset)) for offset in range(0, 9, 3)]
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [k for page in pages for k in page] == NEWEST_FIRST
    with pytest.raises(ValueError):
        list_runs(filled, limit=-1)


def test_a_trace_with_its_runs_kept_runs_results_and_issues(filled: SqlResultStore) -> None:
    (b,) = get_trace(filled, Runs.B[0])
    assert b.run.run_id == "b1" and b.summary is not None
    assert b.summary.user_text == "weather now in Oslo?" and b.summary.final_response == "done: weather now in Oslo?"
    assert b.summary.run["calls"][0]["args"] == {"q": "weather now in Oslo?", "api_key": "[redacted]"}
    assert [(s.scorer, s.status, s.passed) for s in b.scores] == [
        ("schema_check", "scored", True),
        ("tool_eval", "scored", False),
    ]
    tool_eval = b.scores[1]
    assert tool_eval.reason == "called the forecast" and tool_eval.threshold == 0.5
    (issue,) = tool_eval.issues
    assert (issue.kind, issue.severity, issue.tool, issue.expected_tool, issue.call_index) == (
        "wrong_tool",
        "error",
        "get_forecast",
        "get_weather",
        0,
    )
    assert [(i.kind, i.severity) for i in b.scores[0].issues] == [("tool_schema_invalid", "info")]

    parent, child = get_trace(filled, Runs.P[0])
    assert (parent.run.run_id, child.run.run_id) == ("p1", "q1")
    assert parent.summary is not None and child.summary is not None
    assert parent.summary.run["children"] == ["q1"] and child.summary.run["parent_run_id"] == "p1"

    (d,) = get_trace(filled, Runs.D[0])
    assert d.summary is None and [s.scorer for s in d.scores] == ["tool_eval"]
    assert get_trace(filled, "0" * 32) == [] and get_trace(filled, Runs.A[0][:11]) == []


def test_shortened_trace_ids_find_the_full_ones(filled: SqlResultStore) -> None:
    a = Runs.A[0]
    assert traces_starting_with(filled, a[:11]) == [a]
    assert traces_starting_with(filled, a[:11].upper()) == []  # case-sensitive on both backends
    assert traces_starting_with(filled, "") == [] and traces_starting_with(filled, "%") == []


def test_the_schema_must_have_the_kept_runs(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        with pytest.raises(SchemaTooOld) as empty:
            check_browsable(engine)
        assert empty.value.current is None
        migrate.upgrade(engine, "0003")
        with pytest.raises(SchemaTooOld) as old:
            check_browsable(engine)
        assert (old.value.current, old.value.required) == ("0003", REQUIRED_REVISION)
        migrate.upgrade(engine)
        assert check_browsable(engine) == migrate.head_revision()
    finally:
        engine.dispose()


# ----------------------------------------------------------------------------- the real pipeline


def fill_by_pipeline(url: str, n_runs: int, *, seed: int = 5, **store: Any) -> None:
    """Score ``n_runs`` simulated runs with the daemon's chain (memory broker, the real steps) into the store at
    ``url``; ``store`` overrides store settings (``summaries={"enabled": False}``)."""
    settings = load_settings(
        None,
        kafka={"spans_topic": TOPIC, "commit_interval_s": 1.0},
        assembler={"root_idle_s": 0.0, "idle_s": 0.5},
        store={"url": url, **store},
        dead_letter={"enabled": False},
    )
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    broker.create_topic(TOPIC, 2)
    for record in TrafficGenerator(seed=seed, malformed_ratio=0.0).batch(n_runs):
        broker.produce(TOPIC, record.value, key=record.key)
    sampler = Sampler(settings.sampling)
    stage = ScoringStage(settings, None, sampler, lambda: SCORED)
    sink = open_store(settings.store)
    try:
        loop = build_loop(
            settings,
            broker.source_factory([TOPIC]),
            DeadLetterQueue(settings.kafka, settings.dead_letter),
            stage,
            sink,
            Metrics(settings.metrics),
            HealthState(),
            sampler,
            clock=clock,
            wall=SCORED.timestamp,
        )
        for _ in range(40):
            loop.step()
            clock.advance(0.5)
            if loop.stats.traces_scored == n_runs and not loop.held:
                break
        assert loop.stats.traces_scored == n_runs
        for _ in range(3):
            loop.step()
            clock.advance(0.5)
    finally:
        sink.close()


def stored_truth(
    engine: sa.Engine,
) -> tuple[list[Any], dict[tuple[str, str], set[str]], dict[tuple[str, str], set[str]]]:
    """The runs, and per run its issue kinds and failed scorers, read straight from the tables."""
    with engine.connect() as conn:
        run_rows = list(conn.execute(sa.select(runs)).all())
        kinds: dict[tuple[str, str], set[str]] = {}
        for row in conn.execute(
            sa.select(results.c.trace_id, results.c.run_id, issues.c.kind).select_from(
                issues.join(results, issues.c.result_id == results.c.id)
            )
        ):
            kinds.setdefault((row.trace_id, row.run_id), set()).add(row.kind)
        failed: dict[tuple[str, str], set[str]] = {}
        for row in conn.execute(sa.select(results).where(results.c.status == "scored", results.c.passed == sa.false())):
            failed.setdefault((row.trace_id, row.run_id), set()).add(row.scorer)
    return run_rows, kinds, failed


def test_on_runs_the_pipeline_scored_the_filters_agree_with_the_stored_rows(store_url: str) -> None:
    fill_by_pipeline(store_url, 40)
    engine = create_store_engine(store_url)
    try:
        run_rows, kinds, failed = stored_truth(engine)
        everything = list_runs(engine, limit=1000)
        assert len(everything) == len(run_rows) == 40 and all(r.kept for r in everything)
        assert all(len(r.trace_id) == 32 for r in everything)
        times = [r.time for r in everything]
        assert times == sorted(times, reverse=True)

        for tool in sorted({t for row in run_rows for t in row.tools}):
            want = {(r.trace_id, r.run_id) for r in run_rows if tool in r.tools}
            assert set(keys(list_runs(engine, tools=[tool], limit=1000))) == want, tool
        found_kinds = sorted({k for ks in kinds.values() for k in ks})
        assert found_kinds, "the traffic injects failures"
        for kind in found_kinds:
            want = {key for key, ks in kinds.items() if kind in ks}
            assert set(keys(list_runs(engine, kinds=[kind], limit=1000))) == want, kind
        for scorer in sorted({s for ss in failed.values() for s in ss}):
            want = {key for key, ss in failed.items() if scorer in ss}
            assert set(keys(list_runs(engine, failed_scorers=[scorer], limit=1000))) == want, scorer
        for agent in sorted({r.agent for r in run_rows if r.agent}):
            assert len(list_runs(engine, agents=[agent], limit=1000)) == sum(r.agent == agent for r in run_rows)

        middle = sorted(times)[20]
        assert {r.time for r in list_runs(engine, since=middle, limit=1000)} == {t for t in times if t >= middle}

        sample = everything[7]
        (detail,) = get_trace(engine, sample.trace_id)
        assert detail.summary is not None
        back = run_from_json({**detail.summary.run, "children": []})
        assert tuple(c.name for c in back.calls) == sample.tools and back.user_text == sample.user_text
        assert {s.scorer for s in detail.scores} >= {"schema_check", "tool_error_check"}
    finally:
        engine.dispose()
