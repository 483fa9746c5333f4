"""Dead letters under broker-side faults, on the real broker behind a fault-injecting proxy.

Tansu accepts any record of any size; :class:`~tests.support.kafka_proxy.KafkaFaultProxy` answers the
dead-letter topic's produce requests the way Apache Kafka, MSK or Confluent Cloud do when they refuse one.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from kafka import KafkaProducer

from monitor.app import App
from monitor.ingest.dlq import DeadLetterError
from tests.support.daemon import (
    agent_traffic,
    daemon_settings,
    daemon_thread,
    metric_sum,
    names,
    scrape,
    store_counts,
    wait_for,
)
from tests.support.kafka import committed, create_topics, end_offsets, produce, read_all
from tests.support.kafka_proxy import proxied_tansu

MESSAGE_TOO_LARGE = 10
INVALID_RECORD = 87


def _bad(size: int, tag: str) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    """An undecodable record of ``size`` bytes (not protobuf, not JSON)."""
    body = (b"\xff\x00" + tag.encode() + b"-") * (size // (len(tag) + 3) + 1)
    return tag.encode(), body[:size], [("origin", b"test")]


def test_records_too_large_to_dead_letter_whole_are_dead_lettered_as_stubs(tmp_path: Path) -> None:
    """1. A 2 MiB undecodable record: above the producer's 1 MiB limit (the broker states none).
    2. A 300 KB one the broker refuses with MESSAGE_TOO_LARGE after the send (its limit is 100 KB).
    Result: both reach the dead-letter topic as stubs (first KiB, original size, SHA-256), the daemon goes
    on, the good runs around them are stored and the commit reaches the end."""
    with proxied_tansu(tmp_path) as (_broker, proxy):
        bootstrap = proxy.bootstrap
        topic, group = names("dlq-large")
        create_topics(bootstrap, {topic: 1, topic + ".dlq": 1})
        proxy.reject_produce(topic + ".dlq", MESSAGE_TOO_LARGE, min_record_bytes=100_000)
        traffic = agent_traffic(4, seed=61, parts=1)
        big, medium = _bad(2 * 1024 * 1024, "big"), _bad(300_000, "medium")
        producer = KafkaProducer(bootstrap_servers=bootstrap, max_request_size=8 * 1024 * 1024)
        records = [traffic.records[0], big, traffic.records[1], medium, *traffic.records[2:]]
        produce(bootstrap, topic, records, producer=producer)
        producer.close(5)
        url = f"sqlite:///{tmp_path / 'results.db'}"
        with daemon_thread(daemon_settings(bootstrap, topic, group, url)) as d:
            # (the end offset is the record count: a fetch-based end offset stops at the first record > 1 MiB)
            wait_for(lambda: committed(bootstrap, group, topic, 1) == {0: len(records)}, 40, "commit")
            m = scrape(d.port)
            assert d.stop() == 0
        assert store_counts(url)[0] == traffic.runs
        assert metric_sum(m, "monitor_records_dead_lettered_total") == 2
        assert metric_sum(m, "monitor_dead_letter_errors_total", error="MessageSizeTooLargeError") >= 1
        dead = {r.key: r for r in read_all(bootstrap, topic + ".dlq", expect=2)}
        assert set(dead) == {b"big", b"medium"}
        for key, original in ((b"big", big[1]), (b"medium", medium[1])):
            r = dead[key]
            h = dict(r.headers)
            assert h["monitor.dlq.truncated"] == b"1"
            assert int(h["monitor.dlq.original_size"]) == len(original)
            assert h["monitor.dlq.sha256"] == hashlib.sha256(original).hexdigest().encode()
            assert r.value == original[:1024]
            assert h["monitor.dlq.reason"] == b"invalid_protobuf"
            assert h["origin"] == b"test"


def test_a_dead_letter_the_broker_rejects_holds_the_commit_until_it_is_written(tmp_path: Path) -> None:
    """1. The broker accepts the dead letter's send but refuses it (INVALID_RECORD) until the fault clears.
    2. Good runs after the bad record are stored meanwhile.
    Result: the commit never passes the bad record while its dead letter is refused; once the fault
    clears, the dead letter is written and the commit reaches the end. Nothing is lost, nothing crashes."""
    with proxied_tansu(tmp_path) as (_broker, proxy):
        bootstrap = proxy.bootstrap
        topic, group = names("dlq-refused")
        create_topics(bootstrap, {topic: 1, topic + ".dlq": 1})
        proxy.reject_produce(topic + ".dlq", INVALID_RECORD)
        traffic = agent_traffic(5, seed=62, parts=1)
        produce(bootstrap, topic, [traffic.records[0], _bad(200, "refused"), *traffic.records[1:]])
        url = f"sqlite:///{tmp_path / 'results.db'}"
        with daemon_thread(daemon_settings(bootstrap, topic, group, url)) as d:
            wait_for(lambda: store_counts(url)[0] == traffic.runs, 40, "good runs stored")
            wait_for(
                lambda: metric_sum(scrape(d.port), "monitor_dead_letter_errors_total", error="InvalidRecordError") >= 2,
                30,
                "the refused dead letter retried",
            )
            assert committed(bootstrap, group, topic, 1)[0] in (None, 1)  # never past the bad record
            assert metric_sum(scrape(d.port), "monitor_dead_letters_pending") == 1
            proxy.clear()
            wait_for(lambda: committed(bootstrap, group, topic, 1) == end_offsets(bootstrap, topic, 1), 60, "commit")
            m = scrape(d.port)
            assert d.stop() == 0
        assert metric_sum(m, "monitor_records_dead_lettered_total") == 1
        assert [r.key for r in read_all(bootstrap, topic + ".dlq", expect=1)] == [b"refused"]


def test_restarts_after_the_rate_stop_never_send_a_dead_letter_twice(tmp_path: Path) -> None:
    """1. An open trace holds the commit at offset 0; a flood of undecodable records follows.
    2. The daemon dead-letters up to the limit and stops (exit 3); it is restarted three times.
    Result: every restart re-reads the flood from offset 0 but sends only dead letters not sent before:
    no source offset appears twice in the dead-letter topic."""
    with proxied_tansu(tmp_path) as (_broker, proxy):
        bootstrap = proxy.bootstrap
        topic, group = names("dlq-restart")
        create_topics(bootstrap, {topic: 1, topic + ".dlq": 1})
        traffic = agent_traffic(1, seed=63, parts=2)
        open_part = traffic.records[0]  # the trace's root comes never: it stays open, the commit stays at 0
        flood = [_bad(50, f"flood-{i}") for i in range(60)]
        produce(bootstrap, topic, [open_part, *flood])
        url = f"sqlite:///{tmp_path / 'results.db'}"
        settings = daemon_settings(
            bootstrap,
            topic,
            group,
            url,
            assembler={"idle_s": 600.0},
            dead_letter={"window": 20, "max_rate": 0.5},
        )
        sent: list[int] = []
        for attempt in range(3):
            with daemon_thread(settings) as d:
                d.thread.join(60)
                assert not d.thread.is_alive(), f"attempt {attempt}: the daemon did not stop on the flood"
                assert d.result == [3]
            dead = read_all(bootstrap, topic + ".dlq")
            offsets = [int(dict(r.headers)["monitor.dlq.offset"]) for r in dead]
            assert len(offsets) == len(set(offsets)), f"attempt {attempt}: duplicated dead letters {sorted(offsets)}"
            assert len(offsets) > (sent[-1] if sent else 0), "each restart gets further"
            sent.append(len(offsets))
        assert committed(bootstrap, group, topic, 1)[0] in (None, 0)


def test_a_missing_dead_letter_topic_is_a_clear_error_at_startup(tmp_path: Path) -> None:
    """The broker does not create topics automatically and the dead-letter topic does not exist: the daemon
    stops at startup (exit 3) naming the topic and the fix, before opening the store or consuming."""
    with proxied_tansu(tmp_path) as (_broker, proxy):
        bootstrap = proxy.bootstrap
        topic, group = names("dlq-missing")
        create_topics(bootstrap, {topic: 1})
        proxy.disable_auto_create([topic + ".dlq"])
        url = f"sqlite:///{tmp_path / 'results.db'}"
        app = App(daemon_settings(bootstrap, topic, group, url))
        assert app.run() == 3
        assert isinstance(app.error, DeadLetterError)
        message = str(app.error)
        assert topic + ".dlq" in message and "dead_letter.enabled: false" in message
        assert not (tmp_path / "results.db").exists()
        # created by hand, the same configuration starts
        create_topics(bootstrap, {topic + ".dlq": 1})
        with daemon_thread(daemon_settings(bootstrap, topic, group, url)) as d:
            assert d.stop() == 0
