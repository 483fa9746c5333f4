"""Helpers for daemon tests: agent traffic as Kafka records, settings, a daemon in a thread or a process,
metrics scraping and store counts. Everything here drives the real components (no fakes).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
import yaml
from prometheus_client.parser import text_string_to_metric_families

from monitor.app import App
from monitor.ingest.encode import encode, split_by_trace, split_spans
from monitor.settings import Settings
from tests.spanutil import Recorder, agent_run

REPO = Path(__file__).resolve().parents[2]


def _weather(city: str) -> dict[str, object]:
    return {"city": city, "temp": 18}


def _forecast(city: str, days: int = 1) -> dict[str, object]:
    return {"city": city, "days": days}


TOOLS: dict[str, Callable[..., Any]] = {"get_weather": _weather, "get_forecast": _forecast}


@dataclass
class Traffic:
    """Records of ``traces`` agent runs: ``(key, value)`` with key = hex trace id, each trace split in ``parts``."""

    records: list[tuple[bytes, bytes]]
    trace_ids: list[str]
    spans: int

    @property
    def runs(self) -> int:
        return len(self.trace_ids)


def agent_traffic(traces: int, *, seed: int = 1, parts: int = 2, json_share: float = 0.5) -> Traffic:
    """Real OTel SDK spans of a GenAI-semconv agent (invoke_agent → chat → execute_tool → chat), encoded as
    the Collector's Kafka exporter writes them (one request per trace, keyed by hex trace id), each trace
    split over ``parts`` records, a share of them OTLP/JSON."""
    rng = random.Random(seed)
    rec = Recorder(service=f"agent-{seed}")
    tracer = rec.tracer()
    cities = ["Paris", "Oslo", "Lima", "Kyiv", "Rome"]
    for _ in range(traces):
        calls: list[tuple[str, dict[str, Any]]] = [("get_weather", {"city": rng.choice(cities)})]
        if rng.random() < 0.5:
            calls.append(("get_forecast", {"city": rng.choice(cities), "days": rng.randint(1, 5)}))
        agent_run(tracer, TOOLS, calls)
    records: list[tuple[bytes, bytes]] = []
    trace_ids: list[str] = []
    n_spans = 0
    for trace_hex, req in split_by_trace(rec.request()):
        trace_ids.append(trace_hex)
        for part in split_spans(req, parts):
            n_spans += sum(len(ss.spans) for rs in part.resource_spans for ss in rs.scope_spans)
            enc = "otlp_json" if rng.random() < json_share else "otlp_proto"
            records.append((trace_hex.encode(), encode(part, enc)))
    return Traffic(records, trace_ids, n_spans)


def names(prefix: str) -> tuple[str, str]:
    """A fresh (topic, group id) pair for one test."""
    tag = uuid.uuid4().hex[:8]
    return f"{prefix}-{tag}", f"g-{prefix}-{tag}"


def daemon_settings(bootstrap: str, topic: str, group: str, store_url: str, **sections: dict[str, Any]) -> Settings:
    """Settings tuned for tests: fast group joins, quick trace closing, short commit interval, HTTP on a free port."""
    doc: dict[str, dict[str, Any]] = {
        "kafka": {
            "bootstrap_servers": bootstrap,
            "spans_topic": topic,
            "group_id": group,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
            "commit_interval_s": 0.5,
        },
        "assembler": {"root_idle_s": 0.3, "idle_s": 2.0},
        "http": {"host": "127.0.0.1", "port": 0},
        "store": {"url": store_url},
        "shutdown": {"drain_deadline_s": 10.0},
    }
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return Settings(**doc)  # type: ignore[arg-type]


def write_config(path: Path, settings: Settings) -> Path:
    path.write_text(yaml.safe_dump(settings.model_dump(mode="json", exclude_none=True)))
    return path


@dataclass
class DaemonThread:
    app: App
    thread: threading.Thread
    result: list[int] = field(default_factory=list)
    error: list[BaseException] = field(default_factory=list)

    def stop(self, timeout: float = 30.0) -> int:
        self.app.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "daemon did not stop in time"
        if self.error:
            raise self.error[0]
        return self.result[0]

    @property
    def port(self) -> int:
        return self.app.http_port


@contextmanager
def daemon_thread(settings: Settings) -> Iterator[DaemonThread]:
    """Run :class:`App` in a thread; stopped (gracefully) on exit."""
    app = App(settings)
    d = DaemonThread(app, threading.Thread(target=lambda: None))

    def target() -> None:
        try:
            d.result.append(app.run())
        except BaseException as exc:
            d.error.append(exc)

    d.thread = threading.Thread(target=target, name="daemon", daemon=True)
    d.thread.start()
    assert app.ready.wait(30), "daemon did not start"
    try:
        yield d
    finally:
        if d.thread.is_alive():
            app.stop()
            d.thread.join(30)


def spawn_daemon(config: Path, log: Path, *, new_session: bool = False) -> subprocess.Popen[bytes]:
    """``python -m monitor run --config FILE`` as a subprocess (stdout+stderr to ``log``); ``new_session``: in a
    process group of its own (and its children's), which a signal can be sent to as a terminal's Ctrl-C does."""
    env = dict(os.environ)
    env.pop("MONITOR_CONFIG", None)
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "monitor", "run", "--config", str(config)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=new_session,
        )


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """``/metrics`` as {(sample name, sorted labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def metric_sum(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str, **labels: str) -> float:
    want = set(labels.items())
    return sum(v for (n, lbls), v in samples.items() if n == name and want <= set(lbls))


def http_status(port: int, path: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as resp:
            return resp.status, json.loads(resp.read() or b"{}")
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")


def store_counts(url: str) -> tuple[int, int]:
    """(runs, results) in the store at ``url`` (read-only, with its own short-lived engine)."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT count(*) FROM runs")).scalar_one()
            results = conn.execute(sa.text("SELECT count(*) FROM results")).scalar_one()
        return int(runs), int(results)
    except sa.exc.OperationalError:
        return 0, 0
    finally:
        engine.dispose()


def duplicate_result_keys(url: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(
                conn.execute(
                    sa.text(
                        "SELECT count(*) FROM (SELECT trace_id, run_id, scorer, scorer_version, count(*) AS n "
                        "FROM results GROUP BY 1, 2, 3, 4 HAVING count(*) > 1) AS d"
                    )
                ).scalar_one()
            )
    finally:
        engine.dispose()


def wait_for(cond: Callable[[], bool], timeout: float, what: str, interval: float = 0.1) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {what}")
