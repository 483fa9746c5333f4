"""``monitor runs`` and ``monitor show`` through ``monitor.cli.main``, on stores the real pipeline filled (SQLite and
PostgreSQL): filters, pages, whole trace ids, links to the tracing UI, the run printed as ``inspect`` prints it with
its scores and issues, and every way it can go wrong (not in the store, not kept, an old schema, no store, bad
arguments, unicode, very long and markup-like names)."""

from __future__ import annotations

import json
import re
import socket
import sqlite3
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.cli import main
from monitor.settings import StoreSettings
from monitor.store import KeptRun, create_store_engine, migrate, open_store
from monitor.trajectory.serialize import run_from_json
from tests.store.builders import result
from tests.store.test_browse import LONG_TOOL, UNICODE_AGENT, Runs, fill, fill_by_pipeline, keep, run_doc

TEMPLATE = "https://tracing.example/trace/{trace_id}?run={run_id}"
TRACE_ID = re.compile(r"\b[0-9a-f]{32}\b")


def write_config(path: Path, url: str, template: str | None = TEMPLATE, **extra: Any) -> str:
    doc: dict[str, Any] = {"store": {"url": url, **extra}}
    if template is not None:
        doc["tracing"] = {"url_template": template}
    path.write_text(yaml.safe_dump(doc), encoding="utf-8")
    return str(path)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def json_lines(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line.strip()]


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def demo_url(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A store holding 40 simulated runs scored by the daemon's chain."""
    if request.param == "sqlite":
        yield_url = f"sqlite:///{tmp_path_factory.mktemp('demo') / 'store.db'}"
        fill_by_pipeline(yield_url, 40)
        yield yield_url
        return
    cluster = request.getfixturevalue("postgres_cluster")
    url = cluster.create_database()
    fill_by_pipeline(url, 40)
    yield url
    cluster.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture
def demo(demo_url: str, tmp_path: Path) -> str:
    """``--config`` of the demo store with a link template."""
    return write_config(tmp_path / "monitor.yaml", demo_url)


def all_runs(capsys: pytest.CaptureFixture[str], config: str) -> list[dict[str, Any]]:
    code, out, _ = cli(capsys, "runs", "--config", config, "--format", "json", "--limit", "1000")
    assert code == 0
    return json_lines(out)


# ----------------------------------------------------------------------------- monitor runs


def test_the_table_shows_whole_trace_ids_and_links(demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    listed = all_runs(capsys, demo)
    assert len(listed) == 40
    code, out, _ = cli(capsys, "runs", "--config", demo, "--limit", "100")
    assert code == 0
    rows = [line for line in out.splitlines() if TRACE_ID.match(line)]
    assert [TRACE_ID.match(line).group(0) for line in rows] == [r["trace_id"] for r in listed]  # type: ignore[union-attr]
    for run in listed:
        link = f"https://tracing.example/trace/{run['trace_id']}?run={run['run_id']}"
        assert run["link"] == link and link in out
    assert "link" in out.splitlines()[0] and "runs 1-40, newest first" in out


def test_without_a_template_there_is_no_link(demo_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_config(tmp_path / "plain.yaml", demo_url, template=None)
    code, out, _ = cli(capsys, "runs", "--config", config, "--limit", "3")
    assert code == 0 and "https://" not in out and "link" not in out.splitlines()[0]
    assert len(TRACE_ID.findall(out)) == 3 and "next page: --offset 3" in out
    assert all(r["link"] is None for r in all_runs(capsys, config))


def test_every_filter_narrows_to_the_matching_runs(demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    listed = all_runs(capsys, demo)

    def runs(*argv: str) -> list[tuple[str, str]]:
        code, out, err = cli(capsys, "runs", "--config", demo, "--format", "json", "--limit", "1000", *argv)
        assert code == 0, err
        return [(r["trace_id"], r["run_id"]) for r in json_lines(out)]

    def where(predicate: Any) -> list[tuple[str, str]]:
        return [(r["trace_id"], r["run_id"]) for r in listed if predicate(r)]

    agents = sorted({r["agent"] for r in listed})
    assert len(agents) >= 2
    for agent in agents:
        assert runs("--agent", agent) == where(lambda r, a=agent: r["agent"] == a)
    assert runs("--agent", agents[0], "--agent", agents[1]) == where(lambda r: r["agent"] in agents[:2])
    tools = sorted({t for r in listed for t in r["tools"]})
    for tool in tools:
        assert runs("--tool", tool) == where(lambda r, t=tool: t in r["tools"])
    kinds = sorted({k for r in listed for k in r["issue_kinds"]})
    assert kinds, "the traffic injects failures"
    for kind in kinds:
        assert runs("--kind", kind) == where(lambda r, k=kind: k in r["issue_kinds"])
    failed = sorted({s for r in listed for s in r["failed_scorers"]})
    for scorer in failed:
        assert runs("--failed-scorer", scorer) == where(lambda r, s=scorer: s in r["failed_scorers"])
    assert runs("--agent", agents[0], "--kind", kinds[0]) == where(
        lambda r: r["agent"] == agents[0] and kinds[0] in r["issue_kinds"]
    )
    assert runs("--tool", "no_such_tool") == []


def test_pages_and_time_ranges(demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    listed = all_runs(capsys, demo)
    keys = [(r["trace_id"], r["run_id"]) for r in listed]
    pages = []
    for offset in (0, 15, 30):
        code, out, _ = cli(
            capsys, "runs", "--config", demo, "--format", "json", "--limit", "15", "--offset", str(offset)
        )
        assert code == 0
        pages.extend((r["trace_id"], r["run_id"]) for r in json_lines(out))
    assert pages == keys

    starts = sorted(datetime.fromisoformat(r["start_time"]) for r in listed)
    middle = starts[len(starts) // 2]
    code, out, _ = cli(capsys, "runs", "--config", demo, "--format", "json", "--since", middle.isoformat())
    assert code == 0 and len(json_lines(out)) == sum(s >= middle for s in starts)
    until = middle.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    code, out, _ = cli(capsys, "runs", "--config", demo, "--format", "json", "--until", until, "--limit", "1000")
    assert code == 0 and len(json_lines(out)) == sum(s < middle for s in starts)
    # the simulated runs started minutes ago
    code, out, _ = cli(capsys, "runs", "--config", demo, "--format", "json", "--since", "6h", "--limit", "1000")
    assert code == 0 and len(json_lines(out)) == 40
    code, out, _ = cli(capsys, "runs", "--config", demo, "--until", "6h")
    assert code == 0 and "no stored run matches" in out


# ----------------------------------------------------------------------------- monitor show


def test_show_prints_the_run_as_inspect_does_with_its_scores_issues_and_link(
    demo: str, capsys: pytest.CaptureFixture[str]
) -> None:
    listed = all_runs(capsys, demo)
    failing = [r for r in listed if r["issue_kinds"]]
    assert failing
    for run in failing[:3] + [r for r in listed if not r["issue_kinds"]][:1]:
        trace = run["trace_id"]
        code, out, err = cli(capsys, "show", trace, "--config", demo)
        assert code == 0, err
        assert f"trace {trace}  run {run['run_id']}" in out  # the inspect tree's title, the id whole
        assert f"user: {run['user_text']}" in out
        for tool in run["tools"]:
            assert tool in out
        for kind in run["issue_kinds"]:
            assert kind in out
        assert f"tracing UI: https://tracing.example/trace/{trace}?run={run['run_id']}" in out

        code, out, _ = cli(capsys, "show", trace, "--config", demo, "--format", "json")
        (line,) = json_lines(out)
        assert code == 0 and line["kept"] and line["link"].endswith(f"?run={run['run_id']}")
        back = run_from_json({**line["run"], "children": []})
        assert [c.name for c in back.calls] == run["tools"] and back.user_text == run["user_text"]
        assert sorted({s["scorer"] for s in line["scores"] if s["passed"] is False}) == run["failed_scorers"]
        assert (
            sorted({i["kind"] for s in line["scores"] for i in s["issues"] if i["severity"] != "info"})
            == (run["issue_kinds"])
        )
        code, table, _ = cli(capsys, "show", trace, "--config", demo)
        for score in line["scores"]:
            assert score["scorer"] in table


def test_show_finds_an_uppercased_id_and_explains_a_missing_one(demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    trace = all_runs(capsys, demo)[0]["trace_id"]
    code, out, _ = cli(capsys, "show", trace.upper(), "--config", demo)
    assert code == 0 and trace in out
    code, out, err = cli(capsys, "show", "f" * 32, "--config", demo)
    assert (code, out) == (1, "") and "is not in the store" in err and "retention_days (30 days)" in err
    code, _, err = cli(capsys, "show", trace[:11], "--config", demo)  # an id an old report cut
    assert code == 1 and f"Trace ids starting with it: {trace}" in err


def test_a_run_scored_but_not_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    fill_by_pipeline(url, 3, summaries={"enabled": False})
    config = write_config(tmp_path / "monitor.yaml", url)
    listed = all_runs(capsys, config)
    assert len(listed) == 3 and not any(r["kept"] for r in listed)
    code, out, _ = cli(capsys, "runs", "--config", config)
    assert code == 0 and all(line.split()[-2] == "no" for line in out.splitlines() if TRACE_ID.match(line))
    code, out, err = cli(capsys, "show", listed[0]["trace_id"], "--config", config)
    assert code == 1 and "its trajectory was not kept" in out and "schema_check" in out
    assert "was scored but its trajectory was not kept" in err and "store.summaries.enabled" in err
    code, out, _ = cli(capsys, "show", listed[0]["trace_id"], "--config", config, "--format", "json")
    assert code == 1 and json_lines(out)[0]["run"] is None and json_lines(out)[0]["scores"]


def test_nested_unicode_long_and_markup_like_names(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(StoreSettings(url=url))
    try:
        fill(store)
        trace = "c0ffee" + "0" * 26
        tools = ["x[/bold]", "ünïcödé_tööl"]
        doc = run_doc(trace, "m1", "ops[/red] 🚀", tools, "[red]not markup[/red] ✓")
        doc["calls"][0]["error"] = {"type": "Boom[/x]", "message": "failed [/y]"}
        store.write_all([result(trace, run_id="m1", agent="ops[/red] 🚀", tools=tuple(tools))], kept=keep(doc))
    finally:
        store.close()
    config = write_config(tmp_path / "monitor.yaml", url, template="https://t.example/{trace_id}")

    code, out, err = cli(capsys, "runs", "--config", config, "--limit", "100")
    assert code == 0, err
    assert UNICODE_AGENT in out and "ops[/red] 🚀" in out and "x[/bold]" in out
    assert LONG_TOOL not in out and LONG_TOOL[:60] in out and "…" in out  # folded, then cut, in the table
    for key in (Runs.A, Runs.E, Runs.P, (trace, "m1")):
        assert f"{key[0]}  {key[1]}" in out and f"https://t.example/{key[0]}" in out
    code, out, _ = cli(capsys, "runs", "--config", config, "--format", "json", "--tool", LONG_TOOL)
    (line,) = json_lines(out)
    assert code == 0 and (line["agent"], line["tools"]) == (UNICODE_AGENT, ['x"get_weather', LONG_TOOL])

    code, out, err = cli(capsys, "show", trace, "--config", config)
    assert code == 0, err
    assert "ops[/red] 🚀" in out and "x[/bold]" in out and "ünïcödé_tööl" in out and "Boom[/x]: failed [/y]" in out
    assert "[red]not markup[/red] ✓" in out
    code, out, err = cli(capsys, "show", Runs.E[0], "--config", config)
    assert code == 0 and UNICODE_AGENT in out and "¿qué tiempo hace en Zürich? 🌧" in out and LONG_TOOL[:60] in out

    code, out, _ = cli(capsys, "show", Runs.P[0], "--config", config)
    assert code == 0
    lines = out.splitlines()
    (parent,) = [i for i, line in enumerate(lines) if f"run {Runs.P[1]}  status" in line]
    (child,) = [i for i, line in enumerate(lines) if f"run {Runs.Q[1]}  status" in line]
    assert parent < child and lines[child].index("booker") > lines[parent].index("planner")  # nested, indented
    assert "user: plan my trip" in out and "user: book it" in out
    assert out.count(f"tracing UI: https://t.example/{Runs.P[0]}") == 1  # a link without {run_id}: once
    code, out, _ = cli(capsys, "show", Runs.P[0], "--config", config, "--format", "json")
    assert [line["run_id"] for line in json_lines(out)] == [Runs.P[1], Runs.Q[1]]


def test_a_kept_run_a_hook_mangled_is_said_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'store.db'}"
    store = open_store(StoreSettings(url=url))
    trace = "d" * 32
    mangled = KeptRun(trace, "r1", "weather", None, None, "ok", None, 1, {"calls": [{"args": {}}]})  # no call name
    try:
        store.write_all([result(trace, run_id="r1")], kept=[mangled])
    finally:
        store.close()
    code, out, err = cli(capsys, "show", trace, "--config", write_config(tmp_path / "m.yaml", url))
    assert code == 0, err
    assert "its kept trajectory cannot be read back (KeyError: 'name')" in out and "tool_eval" in out


# ----------------------------------------------------------------------------- what can go wrong


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_an_old_schema_is_named_plainly(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if backend == "sqlite":
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        cluster = request.getfixturevalue("postgres_cluster")
        url = cluster.create_database()
        request.addfinalizer(lambda: cluster.drop_database(url.rsplit("/", 1)[1]))
    engine = create_store_engine(url)
    migrate.upgrade(engine, "0003")
    engine.dispose()
    config = write_config(tmp_path / "monitor.yaml", url)
    for argv in (["runs"], ["show", "a" * 32]):
        code, out, err = cli(capsys, *argv, "--config", config)
        assert (code, out) == (2, "")
        assert "the store's schema is at revision 0003" in err and "needs revision 0004" in err
        assert "`monitor run`" in err and "store.migrate_on_start" in err and "Traceback" not in err


def test_a_database_without_the_schema_and_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    code, _, err = cli(capsys, "runs", "--config", write_config(tmp_path / "a.yaml", f"sqlite:///{empty}"))
    assert code == 2 and "has no monitor schema" in err
    missing = tmp_path / "nowhere.db"
    config = write_config(tmp_path / "b.yaml", f"sqlite:///{missing}")
    for argv in (["runs"], ["show", "a" * 32]):
        code, _, err = cli(capsys, *argv, "--config", config)
        assert code == 2 and "does not exist" in err and "MONITOR_STORE__URL" in err
    assert not missing.exists()  # a read-only command never creates a store


def test_an_unreachable_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://monitor:s3cret-pw@127.0.0.1:{port}/store"
    config = write_config(tmp_path / "monitor.yaml", url, connect_timeout_s=1)
    code, _, err = cli(capsys, "runs", "--config", config)
    assert code == 3 and f"cannot reach the store at postgresql://monitor:***@127.0.0.1:{port}/store" in err
    assert "s3cret-pw" not in err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["runs", "--limit", "0"], "--limit must be between 1 and 10000"),
        (["runs", "--offset", "-1"], "--offset must not be negative"),
        (["runs", "--kind", "wrong_tools"], "'wrong_tools' is not a failure kind; the kinds (SCORING §5.3) are:"),
        (["runs", "--since", "yesterday"], "--since: 'yesterday' is neither an ISO 8601 date"),
        (["runs", "--until", "99999999w"], "--until: '99999999w' is too far back"),
        (["runs", "--since", "2026-11-24", "--until", "2026-11-23"], "must be before --until"),
        (["runs", "--agent", " "], "--agent needs a value"),
        (["show", "  "], "give the trace id to show"),
    ],
)
def test_bad_arguments_exit_2(argv: list[str], message: str, demo: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, *argv, "--config", demo)
    assert (code, out) == (2, "") and message in err


def test_bad_settings_and_usage_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "show", "a" * 32, "--config", str(tmp_path / "none.yaml"))
    assert code == 2 and "does not exist" in err
    bad = tmp_path / "bad.yaml"
    bad.write_text("tracing:\n  url_template: https://t.example/{span}\n", encoding="utf-8")
    code, _, err = cli(capsys, "runs", "--config", str(bad))
    assert code == 2 and "tracing.url_template" in err
    with pytest.raises(SystemExit) as exc:
        main(["runs", "--format", "xml"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["show"])
    assert exc.value.code == 2
