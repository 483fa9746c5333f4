"""The report's queries on SQLite and on a real PostgreSQL: the counts are the ones injected, and both backends give
the same document."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.report.document import build, gather
from monitor.report.render import render_html, render_json, render_markdown
from monitor.report.window import iso_week
from monitor.store import create_store_engine
from tests.report.conftest import SINCE, WEEK, report_settings
from tests.report.synthetic import Spec, populate


def _doc(url: str) -> dict[str, Any]:
    settings = report_settings(url)
    engine = create_store_engine(url)
    try:
        return build(gather(engine, iso_week(WEEK), settings), settings)
    finally:
        engine.dispose()


def test_counts_are_the_injected_ones(store_url: str, engine: sa.Engine) -> None:
    truth = populate(engine, Spec(since=SINCE, runs=600, seed=11))
    populate(engine, Spec(since=SINCE - timedelta(days=7), runs=300, seed=12))  # the previous week
    doc = _doc(store_url)
    render_json(doc)  # validates against the schema
    assert doc["headline"]["runs"]["value"] == 600 and doc["headline"]["runs"]["previous"] == 300
    assert doc["headline"]["tool_calls"]["value"] == sum(truth.calls.values())
    cells = {(e["agent"], c["called"], c["expected"]): c["runs"] for e in doc["confusions"] for c in e["cells"]}
    for agent in ("weather", "travel"):
        assert cells[(agent, f"{agent}_tool_1", f"{agent}_tool_0")] == truth.behaviours[(agent, "confusion")]
        patterns = {(p["kind"], p["tool"]): p for p in doc["patterns"] if p["agent"] == agent}
        missing = patterns[("missing_parameter", f"{agent}_tool_0")]
        assert missing["runs"] == truth.behaviours[(agent, "missing_parameter")]
        assert missing["tool_calls"] == truth.calls[(agent, f"{agent}_tool_0")]
        assert missing["agent_runs"] == truth.runs[agent]
        assert missing["trend"]["previous_total"] > 0 and missing["trend"]["p_value"] is not None
        assert patterns[("missing_tool", f"{agent}_tool_0")]["runs"] == truth.behaviours[(agent, "skipped")]
        assert patterns[("tool_error", f"{agent}_tool_0")]["values"] == [
            {"value": "Timeout", "count": truth.behaviours[(agent, "tool_error")]}
        ]
    assert doc["judge_spend"]["total_cost_usd"] == pytest.approx(truth.judge_cost, rel=1e-6)
    assert sum(s["scored"] for s in doc["scorers"] if s["scorer"] == "schema_check") == 600
    grounded = [r for r in doc["recommendations"] if r["kind"] == "missing_parameter"]
    assert grounded and grounded[0]["status"] == "confirmed"
    assert "`p0` is required in its schema but its description never mentions it" in grounded[0]["cause"]
    assert render_html(doc).count("data:image/png;base64,") >= 5
    assert "## Recommendations" in render_markdown(doc)


def test_sqlite_and_postgresql_give_the_same_document(tmp_path: Any, postgres_cluster: Any) -> None:
    from monitor.settings import StoreSettings
    from monitor.store import open_store

    docs = []
    pg = postgres_cluster.create_database()
    try:
        for url in (f"sqlite:///{tmp_path / 's.db'}", pg):
            open_store(StoreSettings(url=url)).close()
            engine = create_store_engine(url)
            populate(engine, Spec(since=SINCE, runs=400, seed=5))
            populate(engine, Spec(since=SINCE - timedelta(days=7), runs=200, seed=6))
            engine.dispose()
            doc = _doc(url)
            doc.pop("generated_at")
            doc["store"].pop("backend")
            docs.append(doc)
    finally:
        postgres_cluster.drop_database(pg.rsplit("/", 1)[1])
    assert docs[0] == docs[1]
