"""End to end: a real Prometheus with the shipped rules scrapes the live daemon; when one agent's tool-selection
errors rise, its alert goes pending, then firing, through Prometheus' HTTP API, while a quiet agent whose every
run goes wrong stays silent.

Real parts: the daemon (:class:`monitor.app.App` in a thread) consuming from the Tansu broker with the demo's rules
(:mod:`monitor.demo.rules`), the demo's simulated agents (:mod:`monitor.demo.agents`: real OpenTelemetry SDK
spans, encoded as the Collector's Kafka exporter writes them), and the Debian ``prometheus`` server on loopback
scraping the daemon every second and evaluating ``deploy/prometheus/rules.yaml`` rendered by its generator with
``scale=1/120``: the same rules and thresholds with every duration divided by 120 (an hour of the rules is 30 s,
``for: 15m`` is 7.5 s, the 7-day baseline 84 minutes, offset by 30 s).

Traffic: ``weather`` runs 8 times a second, one run in 20 a tool-selection error (``skipped_tool``: the expected
``get_forecast`` is never called, a ``missing_tool`` issue), a deterministic pattern; ``travel`` runs once every
2 s, 15 runs per (scaled) hour, below the alerts' floor of 50, all correct. Once Prometheus holds a baseline of
about 5 % for ``weather`` (and no alert is active), one ``weather`` run in 2 and every ``travel`` run go wrong.
``ToolSelectionErrorsAboveBaseline`` for ``weather`` must then be seen pending, then firing, naming the agent and
the tool; no alert may ever name ``travel``, although its error ratio passes the thresholds, for longer than the
alert's ``for:``.
"""

from __future__ import annotations

import random
import re
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from types import ModuleType
from typing import Any, Final

import pytest
import yaml
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from monitor.demo.agents import SimRun, emit, plan_run
from monitor.ingest.encode import encode, split_by_trace
from tests.deploy.conftest import ConfiguredPrometheus
from tests.support.daemon import daemon_settings, daemon_thread, names
from tests.support.kafka import create_topics

pytestmark = pytest.mark.slow

SCALE: Final = 1 / 120
HOUR_S: Final = 3600 * SCALE
NOISY: Final = "weather"
QUIET: Final = "travel"
ALERT: Final = "ToolSelectionErrorsAboveBaseline"
TICK_S: Final = 0.25
NOISY_PER_TICK: Final = 2
QUIET_EVERY_TICKS: Final = 8
WRONG: Final = "skipped_tool"


class Agents:
    """Runs of the demo's ``weather`` and ``travel`` agents, correct or with a tool-selection error, as records."""

    def __init__(self, seed: int = 5) -> None:
        self.rng = random.Random(seed)
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "e2e-agents"}))
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer("e2e.agents")

    def plan(self, agent: str, wrong: bool) -> SimRun:
        """A run of ``agent`` drawn from the demo's mix until it has the wanted behaviour (GenAI semconv with content,
        so the rules' input patterns match)."""
        behaviour = WRONG if wrong else "correct"
        while True:
            run = plan_run(self.rng, convention="genai")
            if run.agent == agent and run.behaviour == behaviour:
                return run

    def records(self, runs: list[SimRun]) -> list[tuple[bytes, bytes]]:
        """One OTLP protobuf record per trace, keyed by its hex trace id (``partition_traces_by_id``)."""
        self.exporter.clear()
        now = time.time_ns()
        for i, run in enumerate(runs):
            emit(self.tracer, run, start_ns=now + i * 1_000_000)
        request = encode_spans(self.exporter.get_finished_spans())
        return [(trace_id.encode(), encode(part, "otlp_proto")) for trace_id, part in split_by_trace(request)]


class Traffic:
    """The producer thread: ``NOISY_PER_TICK`` weather runs per tick, one travel run every ``QUIET_EVERY_TICKS``.

    ``noisy_wrong_every``: weather run number i (from 0) is wrong when i is a multiple of it; ``quiet_wrong``: every
    travel run is wrong. Both may change while it runs.
    """

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.noisy_wrong_every = 20
        self.quiet_wrong = False
        self.sent = {NOISY: 0, QUIET: 0}
        self.stop = threading.Event()
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def _run(self) -> None:
        agents = Agents()
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=5)
        try:
            tick = 0
            while not self.stop.is_set():
                started = time.monotonic()
                runs = []
                for _ in range(NOISY_PER_TICK):
                    runs.append(agents.plan(NOISY, self.sent[NOISY] % self.noisy_wrong_every == 0))
                    self.sent[NOISY] += 1
                if tick % QUIET_EVERY_TICKS == 0:
                    runs.append(agents.plan(QUIET, self.quiet_wrong))
                    self.sent[QUIET] += 1
                for key, value in agents.records(runs):
                    producer.send(self.topic, key=key, value=value)
                producer.flush(10)
                tick += 1
                self.stop.wait(max(0.0, TICK_S - (time.monotonic() - started)))
        except BaseException as exc:  # surfaced by the test
            self.error.append(exc)
        finally:
            producer.close(5)

    def check(self) -> None:
        assert not self.error, f"traffic thread failed: {self.error[0]!r}"
        assert self.thread.is_alive(), "traffic thread stopped"


def unix(rfc3339: str) -> float:
    """Seconds since the epoch of an RFC 3339 time as Prometheus writes it (nanoseconds, ``Z``)."""
    m = re.fullmatch(r"(.+?)(?:\.(\d+))?Z", rfc3339)
    assert m, rfc3339
    whole = datetime.fromisoformat(m.group(1)).replace(tzinfo=UTC)
    return whole.timestamp() + float(f"0.{m.group(2) or 0}")


def value(rows: list[dict[str, Any]]) -> float | None:
    return float(rows[0]["value"][1]) if rows else None


class AlertWatch:
    """Polls ``/api/v1/alerts``: every state seen per (alertname, agent), in order, and every alert naming ``QUIET``."""

    def __init__(self, prom: ConfiguredPrometheus) -> None:
        self.prom = prom
        self.states: dict[tuple[str, str], list[str]] = {}
        self.quiet: list[dict[str, Any]] = []
        self.last: list[dict[str, Any]] = []

    def poll(self) -> list[dict[str, Any]]:
        self.last = self.prom.alerts()
        for alert in self.last:
            labels = alert["labels"]
            key = (labels["alertname"], labels.get("agent", ""))
            seen = self.states.setdefault(key, [])
            if not seen or seen[-1] != alert["state"]:
                seen.append(alert["state"])
            if labels.get("agent") == QUIET:
                self.quiet.append(alert)
        assert not self.quiet, f"the quiet agent {QUIET!r} raised {self.quiet}"
        return self.last

    def until(self, cond: Callable[[], bool], timeout: float, what: str, check: Callable[[], None]) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            check()
            self.poll()
            if cond():
                return
            time.sleep(0.2)
        raise AssertionError(f"timed out after {timeout}s waiting for {what}; alerts: {self.last}; seen: {self.states}")

    def active(self, alertname: str, agent: str) -> list[dict[str, Any]]:
        return [a for a in self.last if a["labels"]["alertname"] == alertname and a["labels"].get("agent") == agent]


def test_tool_selection_alert_goes_pending_then_firing_for_the_agent_whose_errors_rise(
    kafka_bootstrap: str,
    tmp_path: Path,
    prometheus_server: Callable[..., ConfiguredPrometheus],
    rules_generator: ModuleType,
) -> None:
    started = time.monotonic()
    topic, group = names("alerts")
    create_topics(kafka_bootstrap, {topic: 2})
    rules_file = Path(str(files("monitor.demo") / "rules.yaml"))
    settings = daemon_settings(kafka_bootstrap, topic, group, f"sqlite:///{tmp_path / 'results.db'}")
    settings = settings.model_copy(update={"rules_file": rules_file})
    rules = tmp_path / "rules.yaml"
    rules.write_text(rules_generator.render(rules_generator.Options(scale=SCALE)))

    traffic = Traffic(kafka_bootstrap, topic)
    with daemon_thread(settings) as daemon:
        traffic.thread.start()
        try:
            prom = prometheus_server(targets=[f"127.0.0.1:{daemon.port}"], rule_files=[rules])
            watch = AlertWatch(prom)

            # the daemon is scraped, its tool-selection errors arrive, and every rule evaluates without error
            prom.wait_for(
                f'agent:monitor_runs_scored:rate1h{{agent=~"{NOISY}|{QUIET}"}}', lambda r: len(r) == 2, timeout=30
            )
            groups = prom.rule_groups()
            assert {g["name"] for g in groups} == {g["name"] for g in yaml.safe_load(rules.read_text())["groups"]}
            bad = [(r["name"], r.get("lastError")) for g in groups for r in g["rules"] if r["health"] == "err"]
            assert not bad, bad

            # a baseline of about 5 % builds up (the 7 days before the last hour: here everything older than
            # 30 s); the agent stays silent at its usual level
            baseline = f'agent:monitor_tool_selection_errors_per_run:ratio_baseline7d{{agent="{NOISY}"}}'
            ratio = f'agent:monitor_tool_selection_errors_per_run:ratio_rate1h{{agent="{NOISY}"}}'

            def settled() -> bool:
                b, r = value(prom.query(baseline)), value(prom.query(ratio))
                return (
                    b is not None
                    and 0.03 <= b <= 0.07
                    and r is not None
                    and 0.02 <= r <= 0.08
                    and not watch.active(ALERT, NOISY)
                )

            watch.until(settled, 75, f"a settled baseline of {NOISY}", traffic.check)
            print(f"baseline settled after {time.monotonic() - started:.1f} s: {prom.query(baseline)}")
            assert (
                value(prom.query(f'agent:monitor_tool_selection_errors_per_run:ratio_rate1h{{agent="{QUIET}"}}')) == 0
            )

            # the rise: weather 5 % -> 50 %, travel 0 % -> 100 %
            traffic.noisy_wrong_every = 2
            traffic.quiet_wrong = True
            rise = time.time()
            watch.states.pop((ALERT, NOISY), None)

            watch.until(
                lambda: any(a["state"] == "firing" for a in watch.active(ALERT, NOISY)),
                45,
                f"{ALERT} firing for {NOISY}",
                traffic.check,
            )
            print(f"firing {time.time() - rise:.1f} s after the rise ({time.monotonic() - started:.1f} s in)")
            assert watch.states[(ALERT, NOISY)] == ["pending", "firing"], watch.states
            firing = watch.active(ALERT, NOISY)[0]
            assert firing["labels"]["severity"] == "critical"
            assert unix(firing["activeAt"]) >= rise - 1, (firing, rise)  # active since the rise, not before
            notes = firing["annotations"]
            assert f"Agent {NOISY} made" in notes["description"], notes
            assert "get_forecast (missing_tool:" in notes["description"], notes
            assert notes["summary"].startswith(f"Tool-selection errors of agent {NOISY} "), notes
            assert notes["dashboard"].endswith(f"/d/atm-agent?var-agent={NOISY}"), notes
            assert notes["runbook_url"].endswith("runbook.md#toolselectionerrorsabovebaseline"), notes
            assert float(firing["value"]) > 0.1, firing

            # the quiet agent: its error ratio is past both thresholds of the alert (2 x its baseline of 0, and
            # + 0.05) for longer than the alert's for:, but it scores fewer than 50 runs an hour: nothing fires
            quiet_ratio = f'agent:monitor_tool_selection_errors_per_run:ratio_rate1h{{agent="{QUIET}"}}'
            watch.until(
                lambda: (value(prom.query(quiet_ratio)) or 0) > 0.2,
                30,
                f"the error ratio of {QUIET} to rise",
                traffic.check,
            )
            quiet_from = time.monotonic()
            for_s = 15 * 60 * SCALE
            watch.until(lambda: time.monotonic() - quiet_from > for_s + 3, for_s + 10, "the hold", traffic.check)
            assert (value(prom.query(quiet_ratio)) or 0) > 0.2
            quiet_baseline = f'agent:monitor_tool_selection_errors_per_run:ratio_baseline7d{{agent="{QUIET}"}}'
            assert value(prom.query(quiet_baseline)) == 0
            volume = value(prom.query(f'agent:monitor_runs_scored:rate1h{{agent="{QUIET}"}} * {HOUR_S:g}'))
            assert volume is not None and 5 <= volume < 50, volume
            # nothing named the quiet agent, not even between two polls
            assert prom.query(f'max_over_time(ALERTS{{agent="{QUIET}"}}[10m])') == []
            pending = prom.query(
                f'max_over_time(ALERTS{{alertname="{ALERT}", agent="{NOISY}", alertstate="pending"}}[10m])'
            )
            assert pending, "Prometheus never recorded the pending state"
            assert traffic.sent[NOISY] > 200 and traffic.sent[QUIET] > 10, traffic.sent
        finally:
            traffic.stop.set()
            traffic.thread.join(15)
    print(f"done in {time.monotonic() - started:.1f} s")  # about 70 s; the waits above bound it
