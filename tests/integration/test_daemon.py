"""The daemon end to end with real parts: Tansu broker, kafka-python, the SQLite/PostgreSQL store, HTTP metrics.
The end-to-end test runs with each consumer client (``kafka.client``: kafka-python, confluent).

Each test uses its own topic and group; group joins cost about 3 s each on Tansu, so each test keeps them few.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from kafka import KafkaProducer

from tests.support.daemon import (
    agent_traffic,
    daemon_settings,
    daemon_thread,
    duplicate_result_keys,
    http_status,
    metric_sum,
    names,
    scrape,
    spawn_daemon,
    store_counts,
    wait_for,
    write_config,
)
from tests.support.kafka import committed, create_topics, end_offsets, free_port, produce, read_all


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_end_to_end_spans_to_stored_results_metrics_and_committed_offsets(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    topic, group = names("e2e")
    create_topics(kafka_bootstrap, {topic: 4})
    traffic = agent_traffic(40, seed=11)
    produce(kafka_bootstrap, topic, traffic.records)
    # one more trace whose two records land on two partitions (a Collector without partition_traces_by_id)
    split = agent_traffic(1, seed=12)
    producer = KafkaProducer(bootstrap_servers=kafka_bootstrap, acks="all")
    for i, (key, value) in enumerate(split.records):
        producer.send(topic, key=key, value=value, partition=i % 2)
    producer.flush()
    producer.close()
    runs = traffic.runs + split.runs
    url = f"sqlite:///{tmp_path / 'results.db'}"
    settings = daemon_settings(kafka_bootstrap, topic, group, url, kafka={"client": client})

    with daemon_thread(settings) as d:
        loop = d.app.loop
        assert loop is not None
        wait_for(lambda: loop.stats.traces_scored >= runs, 30, "every trace scored")
        ends = end_offsets(kafka_bootstrap, topic, 4)
        assert sum(ends.values()) == len(traffic.records) + len(split.records)
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 4) == ends, 15, "offsets committed to the end")
        wait_for(lambda: metric_sum(scrape(d.port), "monitor_split_traces_total") >= 1, 5, "split trace counted")
        m = scrape(d.port)
        assert metric_sum(m, "monitor_records_consumed_total") == len(traffic.records) + len(split.records)
        assert metric_sum(m, "monitor_spans_decoded_total") == traffic.spans + split.spans
        assert metric_sum(m, "monitor_runs_scored_total") == runs
        assert metric_sum(m, "monitor_runs_sampled_total", decision="sampled") == runs
        assert metric_sum(m, "monitor_traces_closed_total", outcome="complete") == runs
        assert metric_sum(m, "monitor_tool_calls_total") >= runs
        assert metric_sum(m, "monitor_split_traces_total") == 1
        assert metric_sum(m, "monitor_records_invalid_total") == 0
        n_runs, n_results = store_counts(url)
        assert n_runs == runs
        assert metric_sum(m, "monitor_store_writes_total", outcome="new") == n_results > 0
        status, body = http_status(d.port, "/readyz")
        assert status == 200 and body["partitions"] == 4 and body["lag"] == 0, body
        assert http_status(d.port, "/healthz")[0] == 200
        code = d.stop()
    assert code == 0
    assert duplicate_result_keys(url) == 0
    assert committed(kafka_bootstrap, group, topic, 4) == ends


def test_malformed_records_are_dead_lettered_and_a_flood_stops_the_daemon(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic, group = names("dlq")
    create_topics(kafka_bootstrap, {topic: 2})
    traffic = agent_traffic(10, seed=21)
    bad = [
        (b"bad-0", b"\xff\x00garbage", [("origin", b"test")]),
        (b"bad-1", b"{not json", [("origin", b"test")]),
        (b"bad-2", b"", [("origin", b"test")]),
    ]
    produce(kafka_bootstrap, topic, [*traffic.records[:10], *bad, *traffic.records[10:]])
    url = f"sqlite:///{tmp_path / 'results.db'}"
    port = free_port()
    settings = daemon_settings(
        kafka_bootstrap, topic, group, url, http={"port": port}, dead_letter={"window": 20, "max_rate": 0.5}
    )
    log = tmp_path / "daemon.log"
    proc = spawn_daemon(write_config(tmp_path / "monitor.yaml", settings), log)
    try:

        def scraped(name: str, **labels: str) -> float:
            try:
                return metric_sum(scrape(port), name, **labels)
            except OSError:
                return -1.0

        wait_for(lambda: scraped("monitor_runs_scored_total") == traffic.runs, 30, "good runs scored")
        wait_for(lambda: scraped("monitor_records_dead_lettered_total") == 3, 10, "dead letters counted")
        m = scrape(port)
        assert metric_sum(m, "monitor_records_invalid_total", reason="invalid_protobuf") == 1
        assert metric_sum(m, "monitor_records_invalid_total", reason="invalid_json") == 1
        assert metric_sum(m, "monitor_records_invalid_total", reason="empty") == 1
        dead = read_all(kafka_bootstrap, topic + ".dlq", expect=3)
        assert sorted(r.key for r in dead) == [b"bad-0", b"bad-1", b"bad-2"]
        for r in dead:
            h = dict(r.headers)
            assert h["monitor.dlq.topic"] == topic.encode()
            assert h["monitor.dlq.reason"] in (b"invalid_protobuf", b"invalid_json", b"empty")
            assert int(h["monitor.dlq.partition"]) in (0, 1) and int(h["monitor.dlq.offset"]) >= 0
            assert h["origin"] == b"test"  # original headers kept
            assert r.value == dict((k, v) for k, v, _ in bad)[r.key]
        assert proc.poll() is None, "the daemon goes on after a few bad records"

        # something systematically wrong: a flood of undecodable records stops the daemon
        produce(kafka_bootstrap, topic, [(f"flood-{i}".encode(), b"\x0a\xffnot-otlp") for i in range(30)])
        code = proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    out = log.read_text()
    assert code == 3, out[-3000:]
    assert "could not be decoded" in out and "Stopping rather than dead-lettering" in out
    # it stopped at the limit: at most max_rate * window more dead letters, not the whole flood
    flood_dead = [r for r in read_all(kafka_bootstrap, topic + ".dlq") if r.key.startswith(b"flood-")]
    assert 0 < len(flood_dead) <= 10
