"""Every panel's PromQL, run by a real Prometheus scraping the live daemon, returns data.

Real parts: the daemon in a thread (Tansu broker, kafka-python, SQLite store, its HTTP ``/metrics``), the demo's
simulated agents (:class:`monitor.demo.traffic.TrafficGenerator`, 10 % malformed records so the dead-letter panels
have data; beside them a few traces a second of an instrumentation no span convention reads, so the unrecognized
spans panel has data) with the demo's rules plus an LLM judge (``judge_tool_selection`` on flagged runs, against the
local :class:`~monitor.testing.FakeAnthropic`, with USD and request budgets, so the judge panels have data), and the
Debian ``prometheus`` server on loopback scraping the daemon every second with exemplar storage on.

The traffic opens with a burst of runs while the loop's limit of closed traces on their way
(``monitor.app.MAX_HELD``) is lowered to 20, so consumption pauses for ``backlog`` once and the pause panels have
series; then it runs steadily (20 runs a second) so every rate over ``$__rate_interval`` (30 s here) is current.

Each dashboard is checked twice, as it opens (``All`` for multi-value variables, the first value otherwise; a
repeated panel once per value of its variable) and with one real value per variable (the busiest: the value with
the largest total of the variable's own ``label_values`` selector). Variables are resolved with their own
``label_values`` queries through Prometheus' label API, in order (``tool`` depends on ``agent``). Every target must
return a non-empty result with at least one finite value, each metric selector in it must select series on its
own (so ``or vector(0)`` fallbacks prove nothing by themselves), and every target with exemplars on must find
exemplars carrying a ``trace_id``. Nothing is skipped: a metric without series in this traffic would fail the test.
"""

from __future__ import annotations

import math
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import files
from typing import Any, Final

import pytest
from kafka import KafkaProducer
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from monitor.demo.traffic import TrafficGenerator
from monitor.ingest.encode import encode, split_by_trace
from monitor.testing import FakeAnthropic
from monitor.testing.fake_anthropic import Turn
from tests.deploy.test_dashboards import (
    NAMES,
    load,
    panels,
    parse_label_values,
    selectors,
    substitute,
    variables,
)
from tests.support.daemon import daemon_settings, daemon_thread, names
from tests.support.kafka import create_topics
from tests.support.prometheus import PrometheusServer, require_binary

pytestmark = pytest.mark.slow

KEY: Final = "sk-ant-api03-dashboards-test-key"
JUDGE: Final = "judge_tool_selection"
VERDICT: Final = {"evaluations": [], "missing_tools": [], "reason": "fine"}
BURST: Final = 300
RUNS_PER_SECOND: Final = 20
DEADLINE_S: Final = 120.0
MODES: Final = ("as_opened", "one_value")
UNKNOWN_SCOPE: Final = "com.example.rag"
"""An instrumentation no span convention reads: its traces count in ``monitor_spans_unrecognized_total``."""
UNKNOWN_PER_SECOND: Final = 2


# ---------------------------------------------------------------------------------------------------------- the stack


class UnknownFramework:
    """Traces of a retrieval service instrumented with :data:`UNKNOWN_SCOPE` (no agent, model or tool keys), one
    OTLP protobuf record per trace keyed by its trace id."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource.create({"service.name": "rag-service"}))
        provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = provider.get_tracer(UNKNOWN_SCOPE, "2.0")

    def records(self, n: int) -> list[tuple[bytes, bytes]]:
        self.exporter.clear()
        for _ in range(n):
            with (
                self.tracer.start_as_current_span("rag.pipeline"),
                self.tracer.start_as_current_span("retrieve", attributes={"rag.query": "weather", "rag.top_k": 3}),
            ):
                pass
        request = encode_spans(self.exporter.get_finished_spans())
        return [(trace_id.encode(), encode(part, "otlp_proto")) for trace_id, part in split_by_trace(request)]


class Traffic:
    """The demo's simulated agents on the topic: one burst, then ``RUNS_PER_SECOND`` until stopped; and
    ``UNKNOWN_PER_SECOND`` traces of :class:`UnknownFramework` a second."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.bootstrap, self.topic = bootstrap, topic
        self.stop = threading.Event()
        self.error: list[BaseException] = []
        self.thread = threading.Thread(target=self._run, name="traffic", daemon=True)

    def _run(self) -> None:
        producer = KafkaProducer(bootstrap_servers=self.bootstrap, acks=1, linger_ms=20)
        generator = TrafficGenerator(seed=12, malformed_ratio=0.1)
        unknown = UnknownFramework()
        try:
            size = BURST
            while not self.stop.is_set():
                for record in generator.batch(size):
                    producer.send(self.topic, key=record.key, value=record.value)
                for key, value in unknown.records(UNKNOWN_PER_SECOND):
                    producer.send(self.topic, key=key, value=value)
                producer.flush(30)
                size = RUNS_PER_SECOND
                self.stop.wait(1.0)
        except BaseException as exc:  # reported by the test, not lost in the thread
            self.error.append(exc)
        finally:
            producer.close(5)

    def __enter__(self) -> Traffic:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.set()
        self.thread.join(30)


def judge_answer(request: dict[str, Any]) -> Turn:
    return Turn(tool_uses=[("submit_verdict", VERDICT)], usage={"output_tokens": 60})


@pytest.fixture(scope="module")
def live(kafka_bootstrap: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrometheusServer]:
    """The daemon under traffic, and a Prometheus that has scraped it a few times."""
    require_binary("prometheus")
    workdir = tmp_path_factory.mktemp("dashboards")
    topic, group = names("dashboards")
    create_topics(kafka_bootstrap, {topic: 2})
    rules = workdir / "rules.yaml"
    demo_rules = (files("monitor.demo") / "rules.yaml").read_text(encoding="utf-8")
    rules.write_text(demo_rules + f"  - name: judge-every-agent\n    match: {{}}\n    scorers:\n      {JUDGE}: {{}}\n")
    with pytest.MonkeyPatch.context() as mp, FakeAnthropic(judge_answer) as fake:
        mp.setenv("ANTHROPIC_API_KEY", KEY)
        mp.setattr("monitor.app.MAX_HELD", 20)  # the burst pauses consumption (backlog) once
        settings = daemon_settings(
            kafka_bootstrap,
            topic,
            group,
            f"sqlite:///{workdir / 'results.db'}",
            judge={
                "enabled": True,
                "base_url": fake.base_url,
                "max_tokens": 200,
                "only_flagged": True,  # unflagged runs are dropped (not_flagged): the drop panels have data
                "budgets": {"total": {"usd_per_day": 100.0, "requests_per_minute": 100_000}},
            },
        ).model_copy(update={"rules_file": rules})
        with daemon_thread(settings) as daemon, Traffic(kafka_bootstrap, topic) as traffic:
            prom = PrometheusServer(workdir / "prometheus", [f"127.0.0.1:{daemon.port}"]).start()
            try:
                prom.wait_for("monitor_build_info", timeout=30)
                prom.wait_for('max(monitor_consumer_paused{reason="backlog"})', timeout=60)
                prom.wait_for("sum(monitor_judge_requests_total)", timeout=60)
                prom.wait_for("count_over_time(monitor_build_info[30s]) > 5", timeout=30)  # a few scrapes
                yield prom
            finally:
                prom.stop()
            assert not traffic.error, traffic.error
        assert not daemon.error, daemon.error
        assert fake.unexpected == []


# ---------------------------------------------------------------------------------------------------------- checks


def grafana_regex_escape(value: str) -> str:
    """What Grafana's Prometheus data source does to a value of a multi-value variable."""
    return re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\\\1", value)


def label_values(prom: PrometheusServer, query: str, chosen: dict[str, str]) -> tuple[list[str], str, str]:
    """Values of a ``label_values`` variable (Grafana's order: case-insensitive), its selector and label."""
    selector, label = parse_label_values(substitute(query, chosen))
    assert selector is not None
    values: list[str] = prom.api(f"label/{label}/values", **{"match[]": selector})
    return sorted(values, key=str.lower), selector, label


def busiest(prom: PrometheusServer, selector: str, label: str) -> str:
    top = prom.query(f"topk(1, sum by ({label}) ({selector}))")
    assert top, f"no series for {selector}"
    value: str = top[0]["metric"][label]
    return value


@dataclass(frozen=True)
class Check:
    dashboard: str
    panel: str
    ref: str
    expr: str
    exemplar: bool

    def __str__(self) -> str:
        return f"{self.dashboard} / {self.panel} [{self.ref}]: {self.expr}"


def checks(prom: PrometheusServer, name: str, mode: str) -> list[Check]:
    """The substituted targets of dashboard ``name`` with variables chosen as ``mode`` says."""
    d = load(name)
    chosen: dict[str, str] = {"datasource": "prometheus"}
    every: dict[str, list[str]] = {}
    for variable in variables(d):
        if variable["type"] != "query":
            continue
        values, selector, label = label_values(prom, variable["query"], chosen)
        assert values, f"{name}: variable {variable['name']} has no values ({variable['query']})"
        every[variable["name"]] = values
        multi = bool(variable.get("multi") or variable.get("includeAll"))
        if mode == "as_opened":
            value = variable["allValue"] if variable.get("includeAll") else values[0]
        else:
            value = busiest(prom, selector, label)
        chosen[variable["name"]] = grafana_regex_escape(value) if multi and value != ".*" else value
    out: list[Check] = []
    for panel in panels(d):
        repeat = panel.get("repeat")
        if repeat and mode == "as_opened":
            instances = [{**chosen, repeat: grafana_regex_escape(v)} for v in every[repeat]]
        else:
            instances = [chosen]
        for values in instances:
            title = substitute(panel["title"], values)
            for target in panel.get("targets", []):
                out.append(
                    Check(
                        name, title, target["refId"], substitute(target["expr"], values), target.get("exemplar", False)
                    )
                )
    return out


def problem(prom: PrometheusServer, check: Check) -> str | None:
    """None when the query returns series with a finite value (and exemplars when on), else what is wrong.

    Each vector selector of the expression must select series on its own too, so a fallback such as
    ``or vector(0)`` (a stat showing 0 for an agent without errors) cannot stand in for a metric without data."""
    result = prom.query(check.expr)
    if not result:
        return "no series"
    for metric, matchers in selectors(check.expr):
        if not prom.query(f"{metric}{matchers}"):
            return f"the selector {metric}{matchers} selects no series"
    values = [float(r["value"][1]) for r in result]
    if not any(math.isfinite(v) for v in values):
        return f"no finite value: {values}"
    if check.exemplar:
        found = prom.exemplars(check.expr)
        trace_ids = {e["labels"].get("trace_id") for series in found for e in series["exemplars"]}
        if not trace_ids - {None}:
            return "no exemplar with a trace_id"
    return None


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name", NAMES)
def test_every_panel_query_returns_data(live: PrometheusServer, name: str, mode: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while True:
        try:
            todo = checks(live, name, mode)
            failing = {str(c): p for c in todo if (p := problem(live, c)) is not None}
        except AssertionError as exc:  # a variable without values yet
            todo, failing = [], {"variables": str(exc)}
        if not failing or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert not failing, "\n".join(f"{check}\n    -> {why}" for check, why in failing.items())
    assert len(todo) >= 15, f"{name}: only {len(todo)} queries"


def test_the_checks_cover_every_target_of_every_panel(live: PrometheusServer) -> None:
    for name in NAMES:
        d = load(name)
        expected = sum(len(p.get("targets", [])) for p in panels(d) if not p.get("repeat"))
        repeated = [p for p in panels(d) if p.get("repeat")]
        found = checks(live, name, "one_value")
        assert len(found) == expected + sum(len(p["targets"]) for p in repeated)
        assert all("$" not in c.expr for c in found), [c.expr for c in found if "$" in c.expr]
