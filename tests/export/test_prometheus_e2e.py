"""End to end: a real Prometheus scrapes our HttpServer; PromQL and the exemplar API see our data."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from monitor.export.http import HealthState, HttpServer
from monitor.export.metrics import Metrics
from monitor.settings import HttpSettings, MetricsSettings
from tests.export.builders import PARAMETER_ISSUES, SELECTION_ISSUES, TRACE, make_run, result
from tests.support.prometheus import PrometheusServer


def by_label(rows: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {row["metric"].get(label, ""): float(row["value"][1]) for row in rows}


def test_prometheus_scrapes_and_queries(prometheus: Callable[..., PrometheusServer]) -> None:
    metrics = Metrics(MetricsSettings(known_agents=["planner"], known_tools=["search", "fetch"]))
    server = HttpServer(HttpSettings(host="127.0.0.1", port=0), metrics, HealthState())
    server.start()
    try:
        run = make_run()
        metrics.observe_results(run, [result(run, issues=SELECTION_ISSUES + PARAMETER_ISSUES)])
        other = make_run(trace_id="a" * 32, run_id="b" * 16)
        metrics.observe_results(other, [result(other, issues=SELECTION_ISSUES[:1])])

        prom = prometheus(targets=[f"127.0.0.1:{server.port}"])
        expected = {"wrong_tool": 2.0, "missing_tool": 1.0, "hallucinated_tool": 1.0}
        rows = prom.wait_for(
            "sum by (kind) (monitor_tool_selection_errors_total)",
            lambda r: by_label(r, "kind") == expected,
            timeout=20,
        )
        assert by_label(rows, "kind") == expected
        assert by_label(prom.query("sum by (agent) (monitor_runs_scored_total)"), "agent") == {"planner": 2.0}
        assert by_label(prom.query("sum(monitor_parameter_errors_total)"), "") == {"": 2.0}
        up = prom.query('up{job="monitor"}')
        assert up and up[0]["value"][1] == "1"

        # Prometheus negotiated OpenMetrics, so the exemplars reached its exemplar storage
        found = prom.exemplars('monitor_tool_selection_errors_total{kind="wrong_tool"}')
        trace_ids = {e["labels"]["trace_id"] for series in found for e in series["exemplars"]}
        assert trace_ids & {TRACE, "a" * 32}, found
    finally:
        server.stop()
