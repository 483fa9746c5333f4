"""Done-when of issue 11 on the demo's traffic: `monitor report` writes an HTML report whose top recommendation names
the failure the traffic generator injected most, with correct counts; the wrong-tool confusion is in the matrix;
the same data is in Markdown and JSON; `monitor show` prints the examples it links."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from monitor.cli import main
from monitor.demo.agents import BEHAVIOURS
from monitor.report.render import validate
from tests.report.conftest import WEEK, DemoStore


@pytest.fixture(scope="module")
def written(demo_store: DemoStore, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("report")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MONITOR_STORE__URL", demo_store.url)
        mp.setenv("MONITOR_TRACING__URL_TEMPLATE", "https://jaeger.example/trace/{trace_id}")
        assert main(["report", "--week", WEEK, "--format", "html,md", "--format", "json", "--out", str(out)]) == 0
    return {fmt: out / f"report-{WEEK}.{fmt}" for fmt in ("html", "md", "json")}


def _truth(demo: DemoStore, agent: str, behaviour: str) -> int:
    """Runs of that behaviour the wrong-tool check can see: the demo's rules match on the user's text, which the
    no-content convention does not capture."""
    return sum(
        n for (a, b, conv), n in demo.behaviours.items() if a == agent and b == behaviour and conv != "genai_nocontent"
    )


def test_the_top_recommendation_is_the_most_injected_failure_with_its_counts(
    demo_store: DemoStore, written: dict[str, Path]
) -> None:
    doc = json.loads(written["json"].read_text())
    validate(doc)
    most_injected = max(BEHAVIOURS, key=lambda b: BEHAVIOURS[b] if b != "correct" else -1)
    assert most_injected == "wrong_tool"
    top = doc["recommendations"][0]
    assert (top["kind"], top["agent"], top["tool"], top["expected_tool"]) == (
        "wrong_tool",
        "weather",
        "get_weather",
        "get_forecast",
    )
    weather_runs = sum(n for (a, _, _), n in demo_store.behaviours.items() if a == "weather")
    expected = _truth(demo_store, "weather", "wrong_tool")
    assert expected > 20
    assert top["evidence"]["runs"] == expected
    assert top["evidence"]["agent_runs"] == weather_runs
    assert f"in {expected} of {weather_runs} runs" in top["finding"]
    assert top["fix"] == "tool_description" and top["status"] == "confirmed"
    assert "Current weather for a city." in top["cause"] and "Daily forecast for a city." in top["cause"]
    # full trace ids, linked to the tracing UI
    for ex in top["evidence"]["examples"]:
        assert len(ex["trace_id"]) == 32
        assert ex["url"] == f"https://jaeger.example/trace/{ex['trace_id']}"


def test_the_confusions_are_in_the_matrix(demo_store: DemoStore, written: dict[str, Path]) -> None:
    doc = json.loads(written["json"].read_text())
    cells = {(e["agent"], c["called"], c["expected"]): c["runs"] for e in doc["confusions"] for c in e["cells"]}
    assert cells[("weather", "get_weather", "get_forecast")] == _truth(demo_store, "weather", "wrong_tool")
    assert cells[("travel", "book_flight", "search_flights")] == _truth(demo_store, "travel", "wrong_tool")
    html = written["html"].read_text()
    assert 'id="chart-confusion-0"' in html and 'src="data:image/png;base64,' in html
    assert "<code>get_weather</code></td><td><code>get_forecast</code>" in html
    # the missing_tool issues the confusion explains are not counted twice
    missing = [p for p in doc["patterns"] if p["kind"] == "missing_tool" and p["tool"] == "get_forecast"]
    assert all(p["runs"] == _truth(demo_store, "weather", "skipped_tool") for p in missing)


def test_markdown_and_json_carry_the_same_data(written: dict[str, Path]) -> None:
    doc = json.loads(written["json"].read_text())
    md = written["md"].read_text()
    html = written["html"].read_text()
    for r in doc["recommendations"]:
        assert f"### {r['rank']}. {r['title']}" in md
        assert r["finding"] in md
        assert r["cause"] in md
    for e in doc["confusions"]:
        for c in e["cells"]:
            assert f"| {e['agent']} | `{c['called']}` | `{c['expected']}` | {c['runs']:,} |" in md
    for p in doc["patterns"]:
        assert f"| {p['agent']} | {p['kind']} |" in md
    h = doc["headline"]
    assert f"| runs | {int(h['runs']['value']):,} |" in md
    assert f'<td class="n">{int(h["runs"]["value"]):,}</td>' in html
    for ex in doc["examples"]:
        assert ex["trace_id"] in md and ex["trace_id"] in html


def test_monitor_show_prints_every_example_the_report_links(
    demo_store: DemoStore, written: dict[str, Path], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", demo_store.url)
    doc = json.loads(written["json"].read_text())
    capsys.readouterr()
    for ex in doc["recommendations"][0]["evidence"]["examples"]:
        assert main(["show", ex["trace_id"]]) == 0
        assert ex["trace_id"] in capsys.readouterr().out
