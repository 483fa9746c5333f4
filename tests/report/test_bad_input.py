"""Bad input: an empty week, one agent, thousands of tools, unicode and very long names, no judge data, a store of
an older schema, bad options. The report says so plainly; it never fails or draws an empty chart."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.analysis import DefinitionIndex, IssueGroup, ToolUsage, Window, WindowData, analyze
from monitor.analysis.model import AgentDay
from monitor.cli import main
from monitor.report.document import LIMITS, ReportInputs, build
from monitor.report.render import render_html, render_json, render_markdown
from monitor.settings import StoreSettings, load_settings
from monitor.store import create_store_engine, migrate, open_store
from monitor.store.failures import StoreFeatures
from tests.report.conftest import SINCE, WEEK
from tests.report.synthetic import Spec, populate


def _report(url: str, out: Path, week: str = WEEK, monkeypatch: pytest.MonkeyPatch | None = None) -> dict[str, Any]:
    assert monkeypatch is not None
    monkeypatch.setenv("MONITOR_STORE__URL", url)
    assert main(["report", "--week", week, "--format", "html,md,json", "--out", str(out)]) == 0
    doc: dict[str, Any] = json.loads((out / f"report-{week}.json").read_text())
    doc["_html"] = (out / f"report-{week}.html").read_text()
    doc["_md"] = (out / f"report-{week}.md").read_text()
    return doc


def _sqlite(tmp_path: Path, spec: Spec | None = None) -> str:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    open_store(StoreSettings(url=url)).close()
    if spec is not None:
        engine = sa.create_engine(url)
        populate(engine, spec)
        engine.dispose()
    return url


def _images(html: str) -> list[str]:
    return re.findall(r'<img id="([^"]+)"', html)


def test_an_empty_week_says_so_and_draws_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _sqlite(tmp_path, Spec(since=SINCE, runs=50))
    doc = _report(url, tmp_path / "out", "2026-W40", monkeypatch)
    assert doc["headline"]["runs"]["value"] == 0
    assert any("No runs were scored" in n for n in doc["notes"])
    assert doc["recommendations"] == [] and doc["patterns"] == [] and doc["agents"] == []
    assert _images(doc["_html"]) == []
    assert "No runs were scored" in doc["_html"] and "No runs were scored" in doc["_md"]
    assert "No recommendation" in doc["_md"]


def test_a_store_without_any_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = _report(_sqlite(tmp_path), tmp_path / "out", WEEK, monkeypatch)
    assert doc["headline"]["runs"]["value"] == 0 and _images(doc["_html"]) == []


def test_one_agent_and_no_judge_data(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = _sqlite(tmp_path, Spec(since=SINCE, runs=200, agents=("solo",), judge_share=0.0))
    doc = _report(url, tmp_path / "out", WEEK, monkeypatch)
    assert [a["agent"] for a in doc["agents"]] == ["solo"]
    assert any("No judge results" in n for n in doc["notes"])
    assert doc["judge_spend"]["available"] is False and doc["headline"]["judge_cost_usd"]["value"] is None
    images = _images(doc["_html"])
    assert "chart-judge-spend" not in images and "chart-failure-ratio" in images
    assert "No judge results in this window" in doc["_html"]


def test_unicode_and_very_long_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = "天気エージェント🌦|pipe " + "ž" * 400
    url = _sqlite(tmp_path, Spec(since=SINCE, runs=150, agents=(agent, "<script>alert(1)</script>")))
    doc = _report(url, tmp_path / "out", WEEK, monkeypatch)
    assert {a["agent"] for a in doc["agents"]} == {agent, "<script>alert(1)</script>"}  # full names in JSON
    html = doc["_html"]
    assert "<script>alert(1)</script>" not in html and "&lt;script&gt;" in html
    assert "天気エージェント" in html and len(_images(html)) >= 3
    md = doc["_md"]
    assert "天気エージェント🌦\\|pipe" in md  # the pipe cannot break a table
    table_rows = [line for line in md.splitlines() if line.startswith("| ")]
    assert all(line.rstrip().endswith("|") for line in table_rows)


def test_thousands_of_tools_stay_bounded() -> None:
    window = Window(SINCE, SINCE + timedelta(days=7))
    tools = [f"tool_{i:05d}_" + "x" * 80 for i in range(3000)]
    data = WindowData(
        window,
        agent_days=[AgentDay("big", SINCE.date(), 30_000, 9_000)],
        tools=[ToolUsage("big", t, 10, 10) for t in tools],
        issue_groups=[
            IssueGroup("big", "missing_parameter", t, "/p", 1 + i % 9, 1 + i % 9, 1 + i % 9, examples=(f"{i:032x}",))
            for i, t in enumerate(tools)
        ],
    )
    analysis = analyze(data, WindowData(window.previous()), DefinitionIndex(()))
    settings = load_settings(None)
    inputs = ReportInputs(window, StoreFeatures(True, True, True), "sqlite", analysis, DefinitionIndex(()))
    doc = build(inputs, settings)
    render_json(doc)
    assert len(doc["patterns"]) == LIMITS["patterns"] and doc["patterns_not_shown"] > 1000
    assert len(doc["recommendations"]) == settings.report.max_recommendations
    html = render_html(doc)
    assert f"{len(doc['parameter_errors']) - LIMITS['heatmap_tools']} more tool(s)" in html
    assert len(html) < 3_000_000
    assert "more pattern(s) not shown" in render_markdown(doc)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_store_of_an_older_revision(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = request.getfixturevalue("postgres_cluster").create_database()
    engine = create_store_engine(url)
    migrate.upgrade(engine, "0003")
    populate(engine, Spec(since=SINCE, runs=120, kept=False))
    engine.dispose()
    doc = _report(url, tmp_path / "out", WEEK, monkeypatch)
    assert doc["store"] == {"backend": backend, "run_summaries": False, "tool_definitions": False}
    assert any("predates revision 0004" in n for n in doc["notes"])
    assert doc["recommendations"] and all(r["status"] == "hypothesis" for r in doc["recommendations"])
    assert all(e["user_text"] is None for e in doc["examples"])
    engine = create_store_engine(url)
    assert migrate.current_revision(engine) == "0003"  # read, never migrated
    engine.dispose()


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--week", "2026-W60"], "has no ISO week"),
        (["--week", "last"], "expected an ISO week"),
        (["--since", "2026-11-20", "--until", "2026-11-10"], "must be before"),
        (["--since", "yesterday"], "expected an ISO date"),
        (["--format", "pdf"], "expected html, md or json"),
        (["--week", WEEK, "--since", "2026-11-01"], "cannot be combined"),
    ],
)
def test_bad_options_are_usage_errors(
    argv: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", _sqlite(tmp_path))
    assert main(["report", *argv, "--out", str(tmp_path / "out")]) == 2
    assert message in capsys.readouterr().err


def test_no_store_or_not_a_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", f"sqlite:///{tmp_path / 'missing.db'}")
    assert main(["report", "--out", str(tmp_path)]) == 2
    assert "no store at" in capsys.readouterr().err
    assert not (tmp_path / "missing.db").exists()
    other = tmp_path / "other.db"
    engine = sa.create_engine(f"sqlite:///{other}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x INTEGER)"))
    engine.dispose()
    monkeypatch.setenv("MONITOR_STORE__URL", f"sqlite:///{other}")
    assert main(["report", "--out", str(tmp_path)]) == 2
    assert "holds no monitor store" in capsys.readouterr().err
