"""The daemon when its store hangs or vanishes, with real parts (a Kafka broker, PostgreSQL, a SQLite file):
PostgreSQL frozen mid-stream (SIGSTOP: it neither answers nor drops connections) and a SQLite file whose
directory disappears while traffic flows. In both the loop must not block nor write into the void: it pauses
(``monitor_consumer_paused{reason="store"}``), keeps polling and retrying, and commits nothing past unstored
traces; once the store is back every run is stored exactly once and the commit reaches the end offsets.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer

from tests.support.daemon import (
    Traffic,
    agent_traffic,
    daemon_settings,
    daemon_thread,
    duplicate_result_keys,
    metric_sum,
    names,
    scrape,
    store_counts,
    wait_for,
)
from tests.support.kafka import committed, create_topics, end_offsets, produce
from tests.support.postgres import PostgresCluster, PostgresUnavailable, unavailable

STORE_TIMEOUTS = {"connect_timeout_s": 1.0, "statement_timeout_s": 2.0}


def test_postgres_frozen_mid_stream_pauses_commits_nothing_unstored_and_resumes_without_loss(
    kafka_bootstrap: str,
) -> None:
    try:
        cluster = PostgresCluster()
        cluster.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    try:
        url = cluster.create_database()
        topic, group = names("pgfrozen")
        create_topics(kafka_bootstrap, {topic: 2})
        first, second, third = agent_traffic(6, seed=61), agent_traffic(6, seed=62), agent_traffic(4, seed=63)
        total = first.runs + second.runs + third.runs
        produce(kafka_bootstrap, topic, first.records)
        with daemon_thread(daemon_settings(kafka_bootstrap, topic, group, url, store=STORE_TIMEOUTS)) as d:
            loop = d.app.loop
            assert loop is not None
            wait_for(lambda: loop.stats.traces_scored == first.runs, 30, "first batch stored")
            # the commit reaches every record of the first batch (counted: fetch-based end offsets are slow here)
            wait_for(
                lambda: sum(v or 0 for v in committed(kafka_bootstrap, group, topic, 2).values()) == len(first.records),
                30,
                "first batch committed",
            )
            stored_ends = committed(kafka_bootstrap, group, topic, 2)
            with cluster.frozen():
                produce(kafka_bootstrap, topic, second.records)
                wait_for(lambda: loop.paused, 20, "the loop pauses on a frozen store instead of hanging in it")
                m = scrape(d.port)
                assert metric_sum(m, "monitor_consumer_paused", reason="store") == 1
                errors = metric_sum(m, "monitor_store_writes_total", outcome="error")
                produce(kafka_bootstrap, topic, third.records)
                # the loop is not stuck: it keeps coming back to retry (each attempt ends within its bound)
                wait_for(
                    lambda: metric_sum(scrape(d.port), "monitor_store_writes_total", outcome="error") >= errors + 2,
                    30,
                    "retries while frozen",
                )
                assert loop.paused and loop.held > 0 and loop.stats.traces_scored == first.runs
                assert committed(kafka_bootstrap, group, topic, 2) == stored_ends  # nothing past unstored traces
                assert d.thread.is_alive()
            wait_for(lambda: loop.stats.traces_scored == total, 60, "held and later traces stored after the thaw")
            ends = end_offsets(kafka_bootstrap, topic, 2)
            wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 15, "offsets committed to the end")
            m = scrape(d.port)
            assert metric_sum(m, "monitor_consumer_paused", reason="store") == 0
            assert metric_sum(m, "monitor_runs_scored_total") == total
            assert d.stop() == 0
        assert store_counts(url)[0] == total
        assert duplicate_result_keys(url) == 0
    finally:
        cluster.destroy()  # thaws first


def _sqlite_setup(kafka_bootstrap: str, tmp_path: Path, prefix: str) -> tuple[Path, str, str, str]:
    """(directory of the store file, store URL, topic, group) for one test."""
    data = tmp_path / "data"
    data.mkdir()
    url = f"sqlite:///{data / 'results.db'}"
    topic, group = names(prefix)
    create_topics(kafka_bootstrap, {topic: 2})
    return data, url, topic, group


def _first_stored_then_file_away(
    kafka_bootstrap: str, loop: Any, topic: str, group: str, first: Traffic, second: Traffic, data: Path
) -> tuple[dict[int, int | None], Path]:
    """Wait for ``first`` stored and committed, move the store's directory away, produce ``second`` and wait for
    the loop to pause; returns the committed offsets of the first batch and where the directory went."""
    wait_for(lambda: loop.stats.traces_scored == first.runs, 30, "first batch stored")
    stored_ends = end_offsets(kafka_bootstrap, topic, 2)
    wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == stored_ends, 30, "first batch committed")
    away = data.parent / "away"
    data.rename(away)
    produce(kafka_bootstrap, topic, second.records)
    wait_for(lambda: loop.paused, 20, "the loop pauses while the file is not at its path")
    return stored_ends, away


def test_sqlite_directory_removed_while_running_pauses_and_commits_nothing_past_what_was_stored(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    data, url, topic, group = _sqlite_setup(kafka_bootstrap, tmp_path, "sqlitegone")
    first, second = agent_traffic(6, seed=71), agent_traffic(6, seed=72)
    produce(kafka_bootstrap, topic, first.records)
    settings = daemon_settings(kafka_bootstrap, topic, group, url, shutdown={"drain_deadline_s": 2.0})
    with daemon_thread(settings) as d:
        loop = d.app.loop
        assert loop is not None
        wait_for(lambda: loop.stats.traces_scored == first.runs, 30, "first batch stored")
        stored_ends = end_offsets(kafka_bootstrap, topic, 2)
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == stored_ends, 30, "first batch committed")
        shutil.rmtree(data)
        produce(kafka_bootstrap, topic, second.records)
        wait_for(lambda: loop.paused, 20, "the loop pauses instead of writing into a deleted file")
        assert metric_sum(scrape(d.port), "monitor_consumer_paused", reason="store") == 1
        time.sleep(2.0)  # several commit intervals (0.5 s) and retries
        assert loop.paused and loop.held > 0 and loop.stats.traces_scored == first.runs
        assert committed(kafka_bootstrap, group, topic, 2) == stored_ends
        assert d.stop() == 0  # the drain gives up on the held traces: they stay above the committed offsets
    assert committed(kafka_bootstrap, group, topic, 2) == stored_ends
    assert not data.exists()  # nothing made a fresh database behind the daemon's back


def test_sqlite_directory_moved_away_and_back_resumes_without_loss(kafka_bootstrap: str, tmp_path: Path) -> None:
    data, url, topic, group = _sqlite_setup(kafka_bootstrap, tmp_path, "sqlitemoved")
    first, second = agent_traffic(6, seed=81), agent_traffic(6, seed=82)
    produce(kafka_bootstrap, topic, first.records)
    with daemon_thread(daemon_settings(kafka_bootstrap, topic, group, url)) as d:
        loop = d.app.loop
        assert loop is not None
        stored_ends, away = _first_stored_then_file_away(kafka_bootstrap, loop, topic, group, first, second, data)
        time.sleep(1.0)
        assert loop.stats.traces_scored == first.runs
        assert committed(kafka_bootstrap, group, topic, 2) == stored_ends
        away.rename(data)
        total = first.runs + second.runs
        wait_for(lambda: loop.stats.traces_scored == total, 30, "held traces stored once the file is back")
        ends = end_offsets(kafka_bootstrap, topic, 2)
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 15, "offsets committed to the end")
        assert metric_sum(scrape(d.port), "monitor_consumer_paused", reason="store") == 0
        assert d.stop() == 0
    assert store_counts(url)[0] == total
    assert duplicate_result_keys(url) == 0


def test_sqlite_away_during_a_rebalance_loses_nothing_once_the_partitions_and_the_file_are_back(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    """While the file is away the daemon holds closed traces it cannot store. A second member joins the group:
    the daemon's partitions are revoked and the held traces dropped (re-read later from the committed offsets).
    The member leaves, the partitions come back, the file comes back: every trace is assembled again from the
    re-read records (not taken for late spans of traces closed before the revocation), stored once, and the
    backlog count is back to zero."""
    data, url, topic, group = _sqlite_setup(kafka_bootstrap, tmp_path, "sqliterebalance")
    first, second = agent_traffic(6, seed=91), agent_traffic(6, seed=92)
    produce(kafka_bootstrap, topic, first.records)
    with daemon_thread(daemon_settings(kafka_bootstrap, topic, group, url)) as d:
        loop = d.app.loop
        assert loop is not None
        stored_ends, away = _first_stored_then_file_away(kafka_bootstrap, loop, topic, group, first, second, data)
        wait_for(lambda: loop.held > 0, 20, "closed traces held while the file is away")

        other = KafkaConsumer(
            topic, bootstrap_servers=kafka_bootstrap, group_id=group, enable_auto_commit=False, session_timeout_ms=6000
        )
        try:
            wait_for(lambda: bool(other.poll(timeout_ms=200) is not None and other.assignment()), 60, "member joined")
            assert loop.stats.dropped_held > 0  # the revocation dropped traces the daemon could not store
        finally:
            other.close(autocommit=False)
        assert committed(kafka_bootstrap, group, topic, 2) == stored_ends
        away.rename(data)
        total = first.runs + second.runs
        wait_for(lambda: store_counts(url)[0] == total, 60, "every trace stored once the partitions and file are back")
        ends = end_offsets(kafka_bootstrap, topic, 2)
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 30, "offsets committed to the end")
        wait_for(lambda: loop.held == 0, 10, "no backlog left")
        assert d.stop() == 0
    assert store_counts(url)[0] == total
    assert duplicate_result_keys(url) == 0
