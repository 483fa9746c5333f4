"""The running daemon scraped by a real Prometheus server: quality metrics arrive and are queryable by kind."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from monitor.demo.traffic import TrafficGenerator
from tests.support.daemon import daemon_settings, daemon_thread, names, wait_for
from tests.support.kafka import create_topics, produce
from tests.support.prometheus import PrometheusServer, prometheus  # noqa: F401  (fixture)


def test_prometheus_scrapes_the_daemon_and_sees_tool_selection_errors(
    kafka_bootstrap: str,
    tmp_path: Path,
    prometheus: Callable[..., PrometheusServer],  # noqa: F811
) -> None:
    topic, group = names("prom")
    create_topics(kafka_bootstrap, {topic: 2})
    records = TrafficGenerator(seed=8, malformed_ratio=0.0).batch(120)
    produce(kafka_bootstrap, topic, [(r.key, r.value) for r in records])
    rules = Path(__file__).resolve().parents[2] / "monitor" / "demo" / "rules.yaml"
    settings = daemon_settings(kafka_bootstrap, topic, group, f"sqlite:///{tmp_path / 'r.db'}")
    settings = settings.model_copy(update={"rules_file": rules})
    with daemon_thread(settings) as d:
        loop = d.app.loop
        assert loop is not None
        wait_for(lambda: loop.stats.traces_scored >= 120, 60, "every trace scored")
        server = prometheus(targets=[f"127.0.0.1:{d.port}"])
        scored = server.wait_for("sum(monitor_runs_scored_total)", lambda r: bool(r) and float(r[0]["value"][1]) == 120)
        assert scored
        by_kind = server.wait_for(
            "sum by (kind) (monitor_tool_selection_errors_total)", lambda r: any(float(x["value"][1]) > 0 for x in r)
        )
        kinds = {x["metric"]["kind"] for x in by_kind if float(x["value"][1]) > 0}
        assert "missing_tool" in kinds, kinds
        params = server.wait_for(
            "sum by (kind) (monitor_parameter_errors_total)", lambda r: any(float(x["value"][1]) > 0 for x in r)
        )
        assert {x["metric"]["kind"] for x in params if float(x["value"][1]) > 0} & {
            "missing_parameter",
            "unknown_parameter",
            "wrong_type",
        }
        up = server.query('up{job!=""}')
        assert up and all(float(x["value"][1]) == 1 for x in up)
