"""The daemon sends each new result as an OTLP ``gen_ai.evaluation.result`` event, once: real broker, real
store, a real OTLP receiver. A replay (a new group reading the topic again) stores nothing new and sends nothing."""

from __future__ import annotations

import time
from pathlib import Path

import sqlalchemy as sa

from tests.support.daemon import agent_traffic, daemon_settings, daemon_thread, metric_sum, names, scrape, wait_for
from tests.support.kafka import create_topics, produce
from tests.support.otlp_receiver import OtlpReceiver


def _results(url: str) -> set[tuple[str, str, str]]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {tuple(r) for r in conn.execute(sa.text("SELECT trace_id, run_id, scorer FROM results"))}  # type: ignore[misc]
    finally:
        engine.dispose()


def test_each_new_result_leaves_once_as_an_evaluation_event_linked_to_its_trace(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic, group = names("events")
    create_topics(kafka_bootstrap, {topic: 2})
    traffic = agent_traffic(5, seed=81)
    produce(kafka_bootstrap, topic, traffic.records)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    with OtlpReceiver.http() as rx:
        events = {"enabled": True, "protocol": "http/protobuf", "endpoint": rx.endpoint, "timeout_s": 2.0}
        with daemon_thread(daemon_settings(kafka_bootstrap, topic, group, url, evaluation_events=events)) as d:
            loop = d.app.loop
            assert loop is not None
            wait_for(lambda: loop.stats.traces_scored == traffic.runs, 40, "runs stored")
            stored = _results(url)
            records = rx.wait_for(len(stored), 20)
            wait_for(
                lambda: (
                    metric_sum(scrape(d.port), "monitor_evaluation_events_total", outcome="exported") == len(stored)
                ),
                20,
                "exported events counted",
            )
            assert d.stop() == 0
        assert len(records) == len(stored)
        sent = {(r.trace_id, r.span_id, r.attributes["gen_ai.evaluation.name"]) for r in records}
        assert sent == stored  # each stored result once, linked to its trace and the run's root span
        assert all(r.event_name == "gen_ai.evaluation.result" for r in records)
        # a replay from the start (another group): every result is a duplicate, no event leaves
        with daemon_thread(
            daemon_settings(kafka_bootstrap, topic, group + "-replay", url, evaluation_events=events)
        ) as d:
            loop = d.app.loop
            assert loop is not None
            # stored traces come back as duplicates, or are skipped whole by their replay marks
            wait_for(
                lambda: loop.stats.traces_scored + loop.stats.replayed_traces == traffic.runs, 40, "replay handled"
            )
            time.sleep(1.5)  # longer than the exporter's batch delay
            assert d.stop() == 0
        assert len(rx.records()) == len(stored)
