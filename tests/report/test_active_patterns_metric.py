"""The daemon's active failure patterns metric (``monitor.export.patterns``) on the demo's stored traffic: the
top patterns as ``monitor_failure_pattern_runs`` series, bounded, replaced on each refresh; the store unavailable
keeps the last values."""

from __future__ import annotations

from datetime import timedelta

from monitor.export.metrics import Metrics
from monitor.export.patterns import PatternExporter
from monitor.settings import MetricsSettings, ReportSettings
from monitor.store import SqlResultStore
from tests.report.conftest import WALL, DemoStore


def samples(metrics: Metrics) -> dict[tuple[str, ...], float]:
    out: dict[tuple[str, ...], float] = {}
    for family in metrics.registry.collect():
        if family.name == "monitor_failure_pattern_runs":
            for s in family.samples:
                out[tuple(s.labels[k] for k in ("agent", "kind", "tool", "expected_tool"))] = s.value
    return out


def test_the_top_patterns_are_exported_bounded_and_replaced(demo_store: DemoStore) -> None:
    metrics = Metrics(MetricsSettings())
    store = SqlResultStore(demo_store.url)
    try:
        settings = ReportSettings(patterns_window_s=14 * 86_400, max_active_patterns=3, min_runs=5)
        exporter = PatternExporter(store, settings, metrics, wall=lambda: WALL + timedelta(days=1))
        assert exporter.refresh() == 3
        first = samples(metrics)
        assert len(first) == 3 and all(v >= 5 for v in first.values())
        # the demo's most injected failure: get_weather called where get_forecast was expected
        top = max(first, key=lambda k: first[k])
        assert top[0] == "weather" and "get_weather" in top and "get_forecast" in top
        # a later window with no runs: every series goes
        empty = PatternExporter(store, settings, metrics, wall=lambda: WALL + timedelta(days=400))
        assert empty.refresh() == 0 and samples(metrics) == {}
    finally:
        store.close()


def test_an_unavailable_store_keeps_the_last_values(demo_store: DemoStore) -> None:
    metrics = Metrics(MetricsSettings())
    settings = ReportSettings(patterns_window_s=14 * 86_400, max_active_patterns=2)
    store = SqlResultStore(demo_store.url)
    try:
        assert PatternExporter(store, settings, metrics, wall=lambda: WALL + timedelta(days=1)).refresh() == 2
    finally:
        store.close()
    before = samples(metrics)
    gone = SqlResultStore("postgresql://nobody@127.0.0.1:9/none", connect_timeout_s=1)
    assert PatternExporter(gone, settings, metrics).refresh() == -1
    assert samples(metrics) == before
