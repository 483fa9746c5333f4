"""`monitor report --webhook` posts a Slack-compatible summary to a real local HTTP server; the URL (a secret) is
never printed, not even when the post fails."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.cli import main
from tests.report.conftest import SINCE, WEEK
from tests.report.synthetic import Spec, populate


class _Hook:
    def __init__(self, status: int) -> None:
        self.status = status
        self.posts: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                hook.posts.append((self.path, dict(self.headers), json.loads(body)))
                self.send_response(hook.status)
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/services/T000/B000/SECRET-TOKEN-123"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def store(tmp_path: Path) -> str:
    from monitor.settings import StoreSettings
    from monitor.store import open_store

    url = f"sqlite:///{tmp_path / 'store.db'}"
    open_store(StoreSettings(url=url)).close()
    engine = sa.create_engine(url)
    populate(engine, Spec(since=SINCE, runs=300))
    engine.dispose()
    return url


@pytest.fixture
def hook_ok() -> Iterator[_Hook]:
    hook = _Hook(200)
    yield hook
    hook.close()


def test_the_summary_is_posted_in_slack_format(
    store: str, hook_ok: _Hook, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", store)
    monkeypatch.setenv("MONITOR_REPORT_WEBHOOK_URL", hook_ok.url)
    code = main(["report", "--week", WEEK, "--format", "json", "--out", str(tmp_path), "--webhook"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert len(hook_ok.posts) == 1
    path, headers, payload = hook_ok.posts[0]
    assert path.endswith("SECRET-TOKEN-123")
    assert headers["Content-Type"].startswith("application/json")
    assert set(payload) == {"text", "blocks"}
    assert WEEK in payload["text"] and "300 runs" in payload["text"]
    assert [b["type"] for b in payload["blocks"]][:3] == ["header", "section", "section"]
    doc = json.loads((tmp_path / f"report-{WEEK}.json").read_text())
    top = doc["recommendations"][0]
    assert top["title"] in payload["blocks"][2]["text"]["text"]
    assert all(len(b["text"]["text"]) <= 3000 for b in payload["blocks"] if "text" in b)
    assert "SECRET-TOKEN" not in captured.out + captured.err and "127.0.0.1" not in captured.out + captured.err


def test_a_failed_post_is_exit_3_without_the_url(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    hook = _Hook(500)
    try:
        monkeypatch.setenv("MONITOR_STORE__URL", store)
        monkeypatch.setenv("MONITOR_REPORT_WEBHOOK_URL", hook.url)
        code = main(["report", "--week", WEEK, "--format", "md", "--out", str(tmp_path), "--webhook"])
    finally:
        hook.close()
    captured = capsys.readouterr()
    assert code == 3
    assert "HTTP 500" in captured.err
    assert (tmp_path / f"report-{WEEK}.md").exists()  # written all the same
    assert "SECRET-TOKEN" not in captured.out + captured.err and "127.0.0.1" not in captured.out + captured.err
    # nobody listening: the same, naming no address
    monkeypatch.setenv("MONITOR_REPORT_WEBHOOK_URL", hook.url)
    assert main(["report", "--week", WEEK, "--format", "md", "--out", str(tmp_path), "--webhook"]) == 3
    captured = capsys.readouterr()
    assert "could not be reached" in captured.err and "SECRET-TOKEN" not in captured.err + captured.out


def test_webhook_without_the_variable_is_a_usage_error(
    store: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MONITOR_STORE__URL", store)
    monkeypatch.delenv("MONITOR_REPORT_WEBHOOK_URL", raising=False)
    assert main(["report", "--week", WEEK, "--out", str(tmp_path), "--webhook"]) == 2
    assert "MONITOR_REPORT_WEBHOOK_URL" in capsys.readouterr().err
    assert not list(tmp_path.glob("report-*"))


def test_the_default_window_is_the_last_full_iso_week() -> None:
    from monitor.report.window import last_full_week, resolve

    w = last_full_week(datetime(2026, 11, 25, 9, tzinfo=UTC))  # a Wednesday of W48
    assert (w.since, w.until) == (datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 23, tzinfo=UTC))
    w = last_full_week(datetime(2026, 11, 23, 0, tzinfo=UTC))  # Monday 00:00 of W48: W47 just ended
    assert w.since == datetime(2026, 11, 16, tzinfo=UTC)
    w = resolve(None, "2026-11-16", "2026-11-18T12:00:00", datetime(2026, 12, 1, tzinfo=UTC))
    assert (w.since, w.until) == (datetime(2026, 11, 16, tzinfo=UTC), datetime(2026, 11, 18, 12, tzinfo=UTC))
    w = resolve("2027-W01", None, None, datetime(2026, 12, 1, tzinfo=UTC))
    assert w.since == datetime(2027, 1, 4, tzinfo=UTC)
