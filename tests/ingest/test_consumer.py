"""The Kafka source and the dead-letter pieces against the real broker (Tansu), plus the pure rate limit."""

from __future__ import annotations

import hashlib
import time

import pytest

from monitor.ingest.consumer import KafkaSource, Source
from monitor.ingest.consumer_confluent import ConfluentSource
from monitor.ingest.dlq import (
    HEADER_OFFSET,
    HEADER_PARTITION,
    HEADER_REASON,
    HEADER_TOPIC,
    DeadLetterLimit,
    DeadLetterQueue,
    DeadLetterRateExceeded,
    make_dead_letter,
)
from monitor.settings import DeadLetterSettings, KafkaSettings
from tests.support.daemon import names
from tests.support.kafka import committed, create_topics, produce, read_all

# ------------------------------------------------------------------ dead-letter rate limit (pure)


def test_limit_allows_up_to_max_rate_of_the_window_and_trips_beyond() -> None:
    limit = DeadLetterLimit(max_rate=0.5, window=10)
    for _ in range(5):
        limit.check_bad("invalid_json")  # 5 of 10 allowed
    with pytest.raises(DeadLetterRateExceeded) as info:
        limit.check_bad("invalid_json")
    assert info.value.bad == 6 and info.value.reasons == {"invalid_json": 6}
    assert "kafka.encoding" in str(info.value)


def test_limit_is_a_sliding_window_good_records_push_old_bad_ones_out() -> None:
    limit = DeadLetterLimit(max_rate=0.2, window=10)
    for _ in range(50):  # 2 bad in every 10: exactly at the limit, forever
        limit.check_bad("empty")
        limit.check_bad("empty")
        limit.good(8)
    limit.good(10)
    limit.check_bad("empty")
    limit.check_bad("empty")
    with pytest.raises(DeadLetterRateExceeded):
        limit.check_bad("empty")


def test_limit_counts_the_record_that_trips_it_but_does_not_keep_it() -> None:
    limit = DeadLetterLimit(max_rate=0.1, window=10)
    limit.check_bad("too_large")
    for _ in range(3):
        with pytest.raises(DeadLetterRateExceeded):
            limit.check_bad("too_large")
    limit.good(9)  # the one bad record leaves the window
    limit.check_bad("too_large")


# ------------------------------------------------------------------ against the broker


def test_dead_letters_carry_reason_source_and_original_key_and_headers(kafka_bootstrap: str) -> None:
    topic, _ = names("dlq-unit")
    dlq = DeadLetterQueue(KafkaSettings(bootstrap_servers=kafka_bootstrap), DeadLetterSettings())
    try:
        letter = make_dead_letter(
            topic=topic,
            partition=3,
            offset=41,
            key=b"k1",
            value=b"\xffgarbage",
            headers=[("traceparent", b"00-abc")],
            reason="invalid_protobuf",
            detail="Error parsing message",
        )
        assert dlq.send(letter)
        assert dlq.unacknowledged() == {(topic, 3): 41}  # the commit must stay below it until acknowledged
        assert dlq.flush(30) == [letter]
        assert dlq.unacknowledged() == {} and dlq.pending == 0
    finally:
        dlq.close()
    (rec,) = read_all(kafka_bootstrap, topic + ".dlq", expect=1)
    headers = dict(rec.headers)
    assert rec.key == b"k1" and rec.value == b"\xffgarbage"
    assert headers[HEADER_REASON] == b"invalid_protobuf" and headers[HEADER_TOPIC] == topic.encode()
    assert headers[HEADER_PARTITION] == b"3" and headers[HEADER_OFFSET] == b"41"
    assert headers["traceparent"] == b"00-abc"


def test_a_dead_letter_above_the_request_limit_becomes_a_stub(kafka_bootstrap: str) -> None:
    topic, _ = names("dlq-stub")
    dlq = DeadLetterQueue(
        KafkaSettings(bootstrap_servers=kafka_bootstrap), DeadLetterSettings(max_request_bytes=64 * 1024)
    )
    value = bytes(range(256)) * 1024  # 256 KiB
    try:
        letter = make_dead_letter(
            topic=topic,
            partition=0,
            offset=7,
            key=b"k",
            value=value,
            headers=[("h", b"v")],
            reason="too_large",
            detail="record too large",
        )
        assert dlq.send(letter)
        (acked,) = dlq.flush(30)
        assert acked.stub and dlq.stats.stubs == 1
    finally:
        dlq.close()
    (rec,) = read_all(kafka_bootstrap, topic + ".dlq", expect=1)
    headers = dict(rec.headers)
    assert rec.value == value[:1024]
    assert headers["monitor.dlq.truncated"] == b"1"
    assert headers["monitor.dlq.original_size"] == str(len(value)).encode()
    assert headers["monitor.dlq.sha256"] == hashlib.sha256(value).hexdigest().encode()
    assert headers["h"] == b"v" and headers[HEADER_OFFSET] == b"7"


def test_disabled_dead_lettering_sends_nothing(kafka_bootstrap: str) -> None:
    dlq = DeadLetterQueue(KafkaSettings(bootstrap_servers=kafka_bootstrap), DeadLetterSettings(enabled=False))
    letter = make_dead_letter(
        topic="t", partition=0, offset=0, key=None, value=b"x", headers=None, reason="empty", detail=""
    )
    assert not dlq.send(letter)
    assert dlq.flush(1) == [] and dlq.pending == 0
    dlq.close()


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_source_joins_polls_pauses_resumes_reports_lag_and_commits(kafka_bootstrap: str, client: str) -> None:
    topic, group = names("source")
    create_topics(kafka_bootstrap, {topic: 2})
    produce(kafka_bootstrap, topic, [(b"k%d" % i, b"v%d" % i) for i in range(40)])
    events: list[tuple[str, list[tuple[str, int]]]] = []
    settings = KafkaSettings(
        bootstrap_servers=kafka_bootstrap,
        spans_topic=topic,
        group_id=group,
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=10,
        client=client,
    )
    make = ConfluentSource if client == "confluent" else KafkaSource
    source: Source = make(
        settings, lambda tps: events.append(("revoked", tps)), lambda tps: events.append(("assigned", tps))
    )
    try:
        got: list[object] = []
        deadline = time.monotonic() + 20
        while len(got) < 10 and time.monotonic() < deadline:
            got.extend(source.poll(200))
        assert ("assigned", [(topic, 0), (topic, 1)]) in events
        assert source.assignment() == {(topic, 0), (topic, 1)}
        # lag from the fetch high watermark and the position (never ListOffsets); a partition not
        # fetched yet has no entry
        lag = source.lag()
        assert lag and set(lag) <= {(topic, 0), (topic, 1)} and 0 < sum(lag.values()) <= 40 - len(got)

        source.pause(source.assignment())
        paused_polls = [source.poll(100) for _ in range(5)]
        assert all(batch == [] for batch in paused_polls), "no records while paused"
        source.resume(source.assignment())
        deadline = time.monotonic() + 20
        while len(got) < 40 and time.monotonic() < deadline:
            got.extend(source.poll(200))
        assert len(got) == 40
        assert sum(source.lag().values()) == 0

        source.commit({(topic, 0): 5, (topic, 1): 7})
        assert committed(kafka_bootstrap, group, topic, 2) == {0: 5, 1: 7}
    finally:
        source.close()
    # leaving the group revokes (the listener runs on kafka-python's IO thread, commit deferred there)
    assert events[-1][0] == "revoked"
