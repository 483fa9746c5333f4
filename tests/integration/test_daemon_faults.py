"""The daemon under faults, with real parts: broker outage and restart, PostgreSQL stopped mid-stream,
kill -9 and restart, two members of one group splitting the partitions. The tests of the consumer's offsets
(outage: commits refused then accepted by the new broker; kill -9; two members) run with each consumer client
(``kafka.client``: kafka-python, confluent)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

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
from tests.support.kafka import TansuBroker, committed, create_topics, end_offsets, free_port, produce
from tests.support.postgres import PostgresCluster, PostgresUnavailable, unavailable


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_broker_outage_the_daemon_survives_reconnects_and_consumes_after_the_restart(
    tmp_path: Path, client: str
) -> None:
    broker = TansuBroker(tmp_path)
    broker.start()
    try:
        topic, group = names("outage")
        create_topics(broker.bootstrap, {topic: 2})
        before = agent_traffic(8, seed=31)
        produce(broker.bootstrap, topic, before.records)
        url = f"sqlite:///{tmp_path / 'results.db'}"
        with daemon_thread(daemon_settings(broker.bootstrap, topic, group, url, kafka={"client": client})) as d:
            loop = d.app.loop
            assert loop is not None
            wait_for(lambda: loop.stats.traces_scored == before.runs, 30, "first batch scored")
            broker.stop()
            time.sleep(3)  # the outage: the daemon keeps running, polling a dead broker
            assert d.thread.is_alive() and http_status(d.port, "/healthz")[0] == 200
            broker.start()  # same port; memory storage: the topic and the group's offsets are gone
            create_topics(broker.bootstrap, {topic: 2})
            after = agent_traffic(6, seed=32)
            produce(broker.bootstrap, topic, after.records)
            wait_for(
                lambda: loop.stats.traces_scored == before.runs + after.runs, 60, "records produced after the restart"
            )
            ends = end_offsets(broker.bootstrap, topic, 2)
            wait_for(lambda: committed(broker.bootstrap, group, topic, 2) == ends, 20, "commit on the new broker")
            assert d.stop() == 0
        assert store_counts(url)[0] == before.runs + after.runs
    finally:
        broker.stop()


def test_store_unavailable_pauses_holds_the_traces_and_resumes_without_loss(kafka_bootstrap: str) -> None:
    try:
        cluster = PostgresCluster()
        cluster.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    try:
        url = cluster.create_database()
        topic, group = names("pgdown")
        create_topics(kafka_bootstrap, {topic: 2})
        first, second, third = agent_traffic(6, seed=41), agent_traffic(6, seed=42), agent_traffic(4, seed=43)
        total = first.runs + second.runs + third.runs
        produce(kafka_bootstrap, topic, first.records)
        with daemon_thread(daemon_settings(kafka_bootstrap, topic, group, url)) as d:
            loop = d.app.loop
            assert loop is not None
            wait_for(lambda: loop.stats.traces_scored == first.runs, 30, "first batch stored")
            cluster.stop()
            produce(kafka_bootstrap, topic, second.records)
            wait_for(lambda: loop.paused, 30, "the loop pauses on StoreUnavailable")
            assert metric_sum(scrape(d.port), "monitor_consumer_paused", reason="store") == 1
            produce(kafka_bootstrap, topic, third.records)  # not fetched while paused
            time.sleep(1.0)
            assert loop.held > 0 and loop.stats.traces_scored == first.runs
            assert d.thread.is_alive()
            cluster.start()
            wait_for(lambda: loop.stats.traces_scored == total, 60, "held and later traces stored after recovery")
            ends = end_offsets(kafka_bootstrap, topic, 2)
            wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 15, "offsets committed to the end")
            m = scrape(d.port)
            assert metric_sum(m, "monitor_consumer_paused", reason="store") == 0
            assert metric_sum(m, "monitor_runs_scored_total") == total
            assert metric_sum(m, "monitor_store_writes_total", outcome="error") >= 1
            assert d.stop() == 0
        assert store_counts(url)[0] == total
        assert duplicate_result_keys(url) == 0
    finally:
        cluster.destroy()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_kill_9_and_restart_scores_every_run_exactly_once(kafka_bootstrap: str, tmp_path: Path, client: str) -> None:
    topic, group = names("kill9")
    create_topics(kafka_bootstrap, {topic: 2})
    traffic = agent_traffic(30, seed=51)
    half = len(traffic.records) // 2
    url = f"sqlite:///{tmp_path / 'results.db'}"
    port1, port2 = free_port(), free_port()
    # the first process never reaches its commit timer: everything it stored is re-read by the second
    first = daemon_settings(
        kafka_bootstrap, topic, group, url, http={"port": port1}, kafka={"commit_interval_s": 3600, "client": client}
    )
    log = tmp_path / "daemon.log"
    proc = spawn_daemon(write_config(tmp_path / "first.yaml", first), log)
    try:
        produce(kafka_bootstrap, topic, traffic.records[:half])
        wait_for(lambda: store_counts(url)[0] >= 10, 40, "the first process stores runs")
        produce(kafka_bootstrap, topic, traffic.records[half:])
        proc.kill()  # SIGKILL mid-stream
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    stored_before = store_counts(url)[0]
    assert 10 <= stored_before <= traffic.runs
    assert set(committed(kafka_bootstrap, group, topic, 2).values()) == {None}

    second = daemon_settings(kafka_bootstrap, topic, group, url, http={"port": port2}, kafka={"client": client})
    proc = spawn_daemon(write_config(tmp_path / "second.yaml", second), log)
    try:

        def handled() -> float:
            try:
                m = scrape(port2)
            except OSError:
                return -1.0
            return metric_sum(m, "monitor_runs_sampled_total") + metric_sum(m, "monitor_replays_skipped_total")

        wait_for(lambda: handled() == traffic.runs, 40, "the second process handles every run")
        ends = end_offsets(kafka_bootstrap, topic, 2)
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 15, "offsets committed to the end")
        m = scrape(port2)
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert store_counts(url)[0] == traffic.runs
    assert duplicate_result_keys(url) == 0
    # metrics are not double-counted: the second process counts only what the first had not stored
    assert stored_before + metric_sum(m, "monitor_runs_scored_total") == traffic.runs
    # every trace spans two records, so each one the first process stored is marked and skipped whole
    assert metric_sum(m, "monitor_replays_skipped_total", kind="trace") == stored_before
    assert metric_sum(m, "monitor_runs_sampled_total") == traffic.runs - stored_before


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_two_members_split_the_partitions_and_revocation_commits_closed_work(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    topic, group = names("pair")
    create_topics(kafka_bootstrap, {topic: 4})
    first, second = agent_traffic(20, seed=61), agent_traffic(20, seed=62)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    # commits only on revocation and shutdown, so the offsets seen below come from those paths
    settings = daemon_settings(kafka_bootstrap, topic, group, url, kafka={"commit_interval_s": 3600, "client": client})
    produce(kafka_bootstrap, topic, first.records)
    with daemon_thread(settings) as a:
        la = a.app.loop
        assert la is not None
        wait_for(lambda: la.stats.traces_scored == first.runs, 30, "member A scores the first batch")
        assert set(committed(kafka_bootstrap, group, topic, 4).values()) == {None}
        with daemon_thread(settings) as b:
            lb = b.app.loop
            assert lb is not None

            def split() -> bool:
                pa, pb = http_status(a.port, "/readyz")[1], http_status(b.port, "/readyz")[1]
                return bool(pa["partitions"] == 2 and pb["partitions"] == 2)

            wait_for(split, 30, "two members with two partitions each")
            ends = end_offsets(kafka_bootstrap, topic, 4)
            # A's revocation scored and committed its closed work: B starts at the end, re-reads nothing
            assert committed(kafka_bootstrap, group, topic, 4) == ends
            produce(kafka_bootstrap, topic, second.records)
            total = first.runs + second.runs
            wait_for(lambda: la.stats.traces_scored + lb.stats.traces_scored == total, 30, "both members score")
            assert lb.stats.traces_scored > 0 and la.stats.traces_scored > first.runs
            mb = scrape(b.port)
            assert b.stop() == 0
        ma = scrape(a.port)
        assert a.stop() == 0
    assert lb.stats.results_duplicate == 0
    assert metric_sum(ma, "monitor_runs_scored_total") + metric_sum(mb, "monitor_runs_scored_total") == total
    assert store_counts(url)[0] == total
    assert duplicate_result_keys(url) == 0
    assert committed(kafka_bootstrap, group, topic, 4) == end_offsets(kafka_bootstrap, topic, 4)
