"""Runs kept to be looked at (``run_summaries``) and the tools agents offered (``tool_definitions``), on SQLite and
PostgreSQL: written with their results only, redacted and capped, read back as runs, gone with retention."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from monitor.settings import RunSummarySettings
from monitor.store import SqlResultStore
from monitor.store.kept import RunKeeper
from monitor.store.schema import run_summaries, tool_definitions
from monitor.trajectory.model import Run
from monitor.trajectory.serialize import run_from_json
from monitor.trajectory.summary import REDACTED, summarize
from monitor.trajectory.summary import tool_definitions as offered
from tests.store.builders import result

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)

TOOLS = [
    {"name": "login", "description": "Log the user in.", "input_schema": {"type": "object"}},
    {"name": "get_forecast", "description": "Forecast.", "input_schema": {"required": ["city", "days"]}},
]


def run(trace: str = "t1", *, long: int = 10, calls: int = 2, description: str = "Forecast.") -> Run:
    tools = [dict(TOOLS[0]), {**TOOLS[1], "description": description}]
    return run_from_json(
        {
            "trace_id": trace,
            "run_id": "r1",
            "agent": "weather",
            "user_input": "log me in and tell me the weather in Paris " + "x" * long,
            "final_response": "Sunny.",
            "tools_offered": tools,
            "calls": [
                {
                    "name": "login",
                    "args": {"user": "ann", "password": "hunter2", "nested": {"api_key": "k-1", "ok": 1}},
                    "result": {"token": "t-9", "ok": True},
                    "executed": True,
                }
            ]
            + [{"name": "get_forecast", "args": {"city": "Paris"}, "result": "sun"} for _ in range(calls - 1)],
        }
    )


def keeper(**over: object) -> RunKeeper:
    return RunKeeper(RunSummarySettings(**over))  # type: ignore[arg-type]


def test_summaries_are_redacted_capped_and_read_back_as_runs() -> None:
    doc = summarize(
        run(long=5000, calls=5), max_field_chars=100, max_calls=3, redact=re.compile("(?i)password|token|api_key")
    )
    login = doc["calls"][0]
    assert login["args"] == {"user": "ann", "password": REDACTED, "nested": {"api_key": REDACTED, "ok": 1}}
    assert login["result"] == {"token": REDACTED, "ok": True}
    assert doc["user_text"].endswith("[truncated 4943 chars]") and len(doc["user_text"]) < 130
    assert (doc["calls_kept"], doc["calls_total"], len(doc["calls"])) == (3, 5, 3)
    back = run_from_json(doc)
    assert [c.name for c in back.calls] == ["login", "get_forecast", "get_forecast"]
    assert "hunter2" not in repr(doc) and "k-1" not in repr(doc) and "t-9" not in repr(doc)


def test_a_hook_redacts_further_and_a_failing_hook_keeps_nothing() -> None:
    kept, tools = keeper(redact_hook="tests.store.test_kept_runs:drop_user_text").keep(run(), NOW)
    assert kept[0].user_text == "[removed]" and kept[0].run["user_text"] == "[removed]"
    assert [t.name for t in tools] == ["login", "get_forecast"]
    assert keeper(redact_hook="tests.store.test_kept_runs:broken").keep(run(), NOW)[0] == []


def drop_user_text(doc: dict[str, object]) -> dict[str, object]:
    return {**doc, "user_text": "[removed]"}


def broken(doc: dict[str, object]) -> dict[str, object]:
    raise RuntimeError("hook bug")


def test_a_changed_description_is_a_new_definition() -> None:
    a, b = offered(run()), offered(run(description="Forecast for 1-10 days (days required)."))
    assert [t.name for t in a] == [t.name for t in b] and a[1].definition_hash != b[1].definition_hash
    assert a[0].definition_hash == b[0].definition_hash


def kept_rows(store: SqlResultStore) -> list[sa.Row[object]]:
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(run_summaries)).all())


def tool_rows(store: SqlResultStore) -> list[sa.Row[object]]:
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(tool_definitions).order_by(tool_definitions.c.name)).all())


def test_kept_runs_are_written_with_their_results_only_and_go_with_retention(store: SqlResultStore) -> None:
    k = keeper()
    kept, tools = k.keep(run("t1"), NOW)
    other, _ = k.keep(run("t2"), NOW)
    store.write_all([result("t1", run_id="r1")], kept=[*kept, *other], tools=tools)
    rows = kept_rows(store)
    assert [(r.trace_id, r.run_id, r.agent, r.calls, r.status) for r in rows] == [("t1", "r1", "weather", 2, "ok")]
    assert rows[0].run["calls"][0]["args"]["password"] == REDACTED
    assert run_from_json(rows[0].run).user_text == run().user_text
    # a replay keeps the run as it was; tools seen again move last_seen forward only
    later, _ = k.keep(run("t1", long=3), NOW)
    _, tools_later = k.keep(run("t1"), NOW + timedelta(days=1))
    store.write_all([result("t1", run_id="r1")], kept=later, tools=tools_later)
    assert kept_rows(store)[0].user_text == rows[0].user_text
    t = tool_rows(store)
    assert [(r.name, r.first_seen, r.last_seen) for r in t] == [
        ("get_forecast", NOW, NOW + timedelta(days=1)),
        ("login", NOW, NOW + timedelta(days=1)),
    ]
    store.purge_older_than(datetime(2030, 1, 1, tzinfo=UTC))
    assert kept_rows(store) == [] and tool_rows(store) == []


@pytest.mark.parametrize("enabled", [False])
def test_nothing_is_kept_when_disabled(enabled: bool) -> None:
    assert keeper(enabled=enabled).keep(run(), NOW) == ([], [])
