"""``monitor demo``: the whole product on one machine, live.

1. starts the embedded Kafka-compatible broker (Tansu) on a free loopback port;
2. starts the daemon with its defaults (SQLite store in a temporary folder, the demo's rules, the
   HTTP server for ``/metrics``);
3. produces simulated agents' traffic (:mod:`monitor.demo.traffic`) at ``rate`` runs per second,
   in the Collector's Kafka format, malformed records included;
4. shows live progress, then stops the traffic, lets the last traces close, stops the daemon
   gracefully and prints what it found (issues by kind, agent and tool with example traces; pass
   rates per scorer) and where to look.
"""

from __future__ import annotations

import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

import sqlalchemy as sa
from kafka import KafkaProducer
from kafka.admin import KafkaAdminClient, NewTopic
from prometheus_client.parser import text_string_to_metric_families
from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table

from monitor.app import App
from monitor.demo.broker import TansuBroker
from monitor.demo.traffic import TrafficGenerator
from monitor.settings import Settings, load_settings
from monitor.store import queries

TOPIC = "otlp_spans"
PARTITIONS = 4


@dataclass
class _Progress:
    runs_produced: int = 0
    records_produced: int = 0
    malformed_produced: int = 0
    behaviours: dict[str, int] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)


def demo_settings(bootstrap: str, workdir: Path, http_port: int) -> Settings:
    """The daemon's defaults, pointed at the embedded broker, a SQLite file and the demo's rules."""
    rules = Path(str(files("monitor.demo") / "rules.yaml"))
    return load_settings(
        None,
        kafka={
            "bootstrap_servers": bootstrap,
            "group_id": "demo",
            "session_timeout_ms": 6000,  # the embedded broker holds a join for half of this
            "heartbeat_interval_ms": 500,
            "commit_interval_s": 1.0,
        },
        assembler={"root_idle_s": 1.0, "idle_s": 5.0},
        store={"url": f"sqlite:///{workdir / 'monitor.db'}"},
        http={"host": "127.0.0.1", "port": http_port},
        rules_file=rules,
    )


def _produce(bootstrap: str, rate: float, seed: int, progress: _Progress) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=20, acks=1)
    generator = TrafficGenerator(seed=seed)
    try:
        while not progress.stop.is_set():
            started = time.monotonic()
            batch = max(1, int(rate))
            for record in generator.batch(batch):
                producer.send(TOPIC, key=record.key, value=record.value)
                progress.records_produced += 1
                if record.run is None:
                    progress.malformed_produced += 1
                else:
                    progress.behaviours[record.run.behaviour] = progress.behaviours.get(record.run.behaviour, 0) + 1
            progress.runs_produced += batch
            producer.flush()
            progress.stop.wait(max(0.0, 1.0 - (time.monotonic() - started)))
    finally:
        producer.close()


def _scrape(port: int) -> dict[str, float]:
    """A few totals from our own /metrics (what a Prometheus server would scrape)."""
    wanted = {
        "monitor_records_consumed_total": 0.0,
        "monitor_records_dead_lettered_total": 0.0,
        "monitor_runs_scored_total": 0.0,
        "monitor_tool_selection_errors_total": 0.0,
        "monitor_parameter_errors_total": 0.0,
        "monitor_failure_patterns_total": 0.0,
        "monitor_traces_open": 0.0,
    }
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return wanted
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name in wanted:
                wanted[sample.name] += sample.value
    return wanted


def _live_view(progress: _Progress, port: int, elapsed: float, duration: float) -> Panel:
    totals = _scrape(port)
    table = Table(show_header=False, box=None)
    table.add_row("simulated runs produced", f"{progress.runs_produced}")
    table.add_row("records produced (malformed)", f"{progress.records_produced} ({progress.malformed_produced})")
    table.add_row("records consumed", f"{totals['monitor_records_consumed_total']:.0f}")
    table.add_row("dead-lettered", f"{totals['monitor_records_dead_lettered_total']:.0f}")
    table.add_row("runs scored", f"{totals['monitor_runs_scored_total']:.0f}")
    table.add_row("tool-selection errors", f"{totals['monitor_tool_selection_errors_total']:.0f}")
    table.add_row("parameter errors", f"{totals['monitor_parameter_errors_total']:.0f}")
    table.add_row("open traces", f"{totals['monitor_traces_open']:.0f}")
    return Panel(
        Group(table, f"metrics: http://127.0.0.1:{port}/metrics   ({elapsed:.0f}/{duration:.0f} s)"),
        title="agent-tool-monitor demo",
    )


def _summary(console: Console, settings: Settings, workdir: Path, port: int) -> None:
    engine = sa.create_engine(settings.store.url)
    issues = queries.issue_counts(engine, limit=15, examples=1)
    table = Table(title="failure patterns found (most affected runs first)")
    for column in ("kind", "agent", "tool", "parameter", "runs", "example trace"):
        table.add_column(column)
    for row in issues:
        table.add_row(
            row.kind,
            row.agent or "-",
            row.tool or "-",
            row.parameter or "-",
            str(row.runs),
            ", ".join(row.example_trace_ids),
        )
    console.print(table)
    stats = Table(title="scorers")
    for column in ("agent", "scorer", "scored", "pass rate", "mean score"):
        stats.add_column(column)
    for s in queries.scorer_stats(engine):
        if not s.scored:
            continue
        stats.add_row(
            s.agent or "-",
            s.scorer,
            str(s.scored),
            f"{s.pass_rate:.1%}" if s.pass_rate is not None else "-",
            f"{s.mean_score:.3f}" if s.mean_score is not None else "-",
        )
    console.print(stats)
    engine.dispose()
    console.print(
        f"results store: {workdir / 'monitor.db'} (SQLite; `monitor eval` and reports read the same schema)\n"
        f"inspect a trace's records: monitor inspect FILE  ·  daemon config: monitor config --defaults"
    )


def run_demo(duration_s: float = 45.0, rate: float = 20.0, seed: int = 1, http_port: int = 0) -> int:
    """Run the demo for ``duration_s`` seconds of traffic; returns the daemon's exit code."""
    console = Console()
    workdir = Path(tempfile.mkdtemp(prefix="monitor-demo-"))
    broker = TansuBroker(workdir)
    console.print("starting the embedded Kafka-compatible broker (Tansu)…")
    broker.start()
    try:
        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])
        admin.close()
        settings = demo_settings(broker.bootstrap, workdir, http_port)
        app = App(settings)
        daemon = threading.Thread(target=lambda: setattr(app, "exit_code", app.run()), name="daemon", daemon=True)
        daemon.start()
        if not app.ready.wait(60):
            console.print("[red]the daemon did not start[/red]")
            return 1
        port = app.http_port
        console.print(f"daemon up: metrics at http://127.0.0.1:{port}/metrics, health at /healthz and /readyz")
        progress = _Progress()
        producer = threading.Thread(target=_produce, args=(broker.bootstrap, rate, seed, progress), daemon=True)
        producer.start()
        started = time.monotonic()
        with Live(console=console, refresh_per_second=2) as live:
            while time.monotonic() - started < duration_s and daemon.is_alive():
                live.update(_live_view(progress, port, time.monotonic() - started, duration_s))
                time.sleep(0.5)
            progress.stop.set()
            producer.join(10)
            drain_until = time.monotonic() + settings.assembler.idle_s + 5
            while time.monotonic() < drain_until and daemon.is_alive():
                live.update(_live_view(progress, port, time.monotonic() - started, duration_s))
                if _scrape(port)["monitor_traces_open"] == 0 and time.monotonic() - started > duration_s + 2:
                    break
                time.sleep(0.5)
        app.stop()
        daemon.join(settings.shutdown.drain_deadline_s + 10)
        _summary(console, settings, workdir, port)
        return int(getattr(app, "exit_code", 0))
    finally:
        broker.stop()
