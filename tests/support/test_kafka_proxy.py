"""KafkaFaultProxy against a real Tansu: transparent relaying, injected Produce errors, no auto-create."""

from __future__ import annotations

import io
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.errors import (
    InvalidRecordError,
    KafkaTimeoutError,
    MessageSizeTooLargeError,
    NotEnoughReplicasError,
    TopicAuthorizationFailedError,
    UnknownTopicOrPartitionError,
)
from kafka.protocol.api_header import ResponseHeader
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.schemas.fields.codecs import Int32
from kafka.record.memory_records import MemoryRecordsBuilder

from tests.support.kafka import FAST_GROUP, committed, create_topics, read_all
from tests.support.kafka_proxy import KafkaFaultProxy, ProxiedTansuBroker, proxied_tansu

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[ProxiedTansuBroker, KafkaFaultProxy]]:
    with proxied_tansu(tmp_path) as pair:
        yield pair


def _name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def _producer(bootstrap: str, **config: Any) -> KafkaProducer:
    config.setdefault("linger_ms", 5)
    config.setdefault("retry_backoff_ms", 50)
    config.setdefault("max_block_ms", 5000)
    config.setdefault("delivery_timeout_ms", 8000)
    config.setdefault("request_timeout_ms", 5000)
    return KafkaProducer(bootstrap_servers=bootstrap, **config)


def _list_topics(bootstrap: str) -> list[str]:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        return list(admin.list_topics())
    finally:
        admin.close()


# ------------------------------------------------------------------ transparent relaying


def test_produce_consume_and_group_commit_through_the_proxy(
    proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy],
) -> None:
    _, proxy = proxied
    topic, group = _name("pass"), _name("group")
    create_topics(proxy.bootstrap, {topic: 2})
    producer = _producer(proxy.bootstrap)
    try:
        futures = [producer.send(topic, key=b"k%d" % i, value=b"v%d" % i) for i in range(20)]
        producer.flush(10)
        assert all(f.get(5).offset >= 0 for f in futures)
    finally:
        producer.close(5)

    consumer = KafkaConsumer(
        topic,
        bootstrap_servers=proxy.bootstrap,
        group_id=group,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        **FAST_GROUP,
    )
    try:
        seen: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(seen) < 20 and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=300).values():
                seen.extend(r.value for r in records)
        assert sorted(seen) == sorted(b"v%d" % i for i in range(20))
        consumer.commit()
        positions = {p: consumer.position(TopicPartition(topic, p)) for p in (0, 1)}
    finally:
        consumer.close()
    assert committed(proxy.bootstrap, group, topic, 2) == positions
    assert sum(positions.values()) == 20
    stats = proxy.stats
    assert stats.produce_requests[topic] >= 1
    assert stats.produce_rejected == {}
    assert stats.decode_errors == 0


# ------------------------------------------------------------------ reject_produce


@pytest.mark.parametrize(
    ("code", "error"), [(87, InvalidRecordError), (29, TopicAuthorizationFailedError)], ids=["invalid", "authz"]
)
def test_rejected_topic_fails_while_another_topic_works(
    proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy], code: int, error: type[Exception]
) -> None:
    _, proxy = proxied
    bad, good = _name("bad"), _name("good")
    create_topics(proxy.bootstrap, {bad: 1, good: 1})
    proxy.reject_produce(bad, code)
    # not idempotent: kafka-python 3.0.12's idempotent producer goes FATAL on a non-retriable error (see below)
    producer = _producer(proxy.bootstrap, linger_ms=50, enable_idempotence=False)
    try:
        # sent together: one Produce request carrying both topics, split by the proxy
        f_bad = producer.send(bad, b"x")
        f_good = producer.send(good, b"y")
        assert f_good.get(10).offset == 0
        with pytest.raises(error):
            f_bad.get(10)
        assert producer.send(good, b"z").get(10).offset == 1
    finally:
        producer.close(5)
    assert [r.value for r in read_all(proxy.bootstrap, bad, partitions=1)] == []
    assert [r.value for r in read_all(proxy.bootstrap, good, partitions=1, expect=2)] == [b"y", b"z"]
    assert proxy.stats.produce_rejected == {bad: 1}

    proxy.clear()
    producer = _producer(proxy.bootstrap)
    try:
        assert producer.send(bad, b"after-clear").get(10).offset == 0
    finally:
        producer.close(5)


def test_message_too_large_only_for_large_batches(proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy]) -> None:
    _, proxy = proxied
    topic = _name("size")
    create_topics(proxy.bootstrap, {topic: 1})
    proxy.reject_produce(topic, 10, min_record_bytes=100_000)
    producer = _producer(proxy.bootstrap, batch_size=1_000_000, max_request_size=2_000_000, enable_idempotence=False)
    try:
        assert producer.send(topic, b"small").get(10).offset == 0
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(topic, b"L" * 200_000).get(10)  # one record: cannot be split
        assert producer.send(topic, b"small again").get(10).offset == 1
        assert proxy.stats.produce_rejected == {topic: 1}

        # 16 x 20 kB in one ~320 kB batch: kafka-python splits it on MESSAGE_TOO_LARGE until it fits
        # (get() each future: flush() right after a split can raise UnknownError('Future not done'))
        futures = [producer.send(topic, bytes([65 + i]) * 20_000) for i in range(16)]
        assert sorted(f.get(10).offset for f in futures) == list(range(2, 18))
    finally:
        producer.close(5)
    assert proxy.stats.produce_rejected[topic] >= 2


def test_retriable_error_times_then_success(proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy]) -> None:
    _, proxy = proxied
    topic = _name("retry")
    create_topics(proxy.bootstrap, {topic: 1})
    proxy.reject_produce(topic, 19, times=2)  # NOT_ENOUGH_REPLICAS
    producer = _producer(proxy.bootstrap, retries=5)
    try:
        assert producer.send(topic, b"eventually").get(10).offset == 0
    finally:
        producer.close(5)
    stats = proxy.stats
    assert stats.produce_rejected[topic] == 2
    assert stats.produce_requests[topic] == 3

    proxy.reject_produce(topic, 19)  # until cleared: the retries run out
    producer = _producer(proxy.bootstrap, retries=2)
    try:
        with pytest.raises(NotEnoughReplicasError):
            producer.send(topic, b"never").get(10)
    finally:
        producer.close(5)
    assert proxy.stats.produce_rejected[topic] == 2 + 3  # first attempt + 2 retries
    assert [r.value for r in read_all(proxy.bootstrap, topic, partitions=1, expect=1)] == [b"eventually"]


def test_kafka_python_idempotent_producer_is_poisoned_by_one_non_retriable_error(
    proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy],
) -> None:
    """Pins a kafka-python 3.0.12 behaviour the proxy exposes (not a proxy feature).

    With the default ``enable_idempotence=True`` and no transactional id, ``TransactionManager.
    classify_batch_error`` returns FATAL for any non-retriable produce error (its docstring says the batch
    should just fail), so the producer enters FATAL_ERROR: every later future fails with the *same*
    exception, for any topic, although the fault fired once. The Java client only fails the batch.
    """
    _, proxy = proxied
    bad, good = _name("bad"), _name("good")
    create_topics(proxy.bootstrap, {bad: 1, good: 1})
    proxy.reject_produce(bad, 10, times=1)
    producer = _producer(proxy.bootstrap)
    try:
        with pytest.raises(MessageSizeTooLargeError):
            producer.send(bad, b"x").get(10)
        with pytest.raises(MessageSizeTooLargeError):  # another topic, fault already spent
            producer.send(good, b"y").get(10)
    finally:
        producer.close(5)
    assert proxy.stats.produce_rejected == {bad: 1}
    assert proxy.stats.produce_requests.get(good, 0) == 0  # never even sent


# ------------------------------------------------------------------ disable_auto_create


def test_disable_auto_create(proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy]) -> None:
    _, proxy = proxied
    missing, made = _name("x") + ".dlq", _name("y") + ".dlq"
    create_topics(proxy.bootstrap, {made: 1})
    proxy.disable_auto_create(lambda t: t.endswith(".dlq"))
    producer = _producer(proxy.bootstrap, max_block_ms=2000)
    try:
        with pytest.raises((KafkaTimeoutError, UnknownTopicOrPartitionError)):
            producer.send(missing, b"lost").get(5)
        assert producer.send(made, b"kept").get(10).offset == 0
        # a topic not covered by the predicate is still auto-created (even when asked for with a covered one)
        other = _name("auto")
        assert producer.send(other, b"auto").get(10).offset == 0
    finally:
        producer.close(5)
    topics = _list_topics(proxy.bootstrap)
    assert missing not in topics
    assert made in topics
    assert other in topics
    assert proxy.stats.auto_create_blocked[missing] >= 1


# ------------------------------------------------------------------ wire-level behaviour


def _records(*values: bytes) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for value in values:
        builder.append(int(time.time() * 1000), None, value)
    builder.close()
    return bytes(builder.buffer())


def _produce(correlation_id: int, acks: int, data: dict[str, bytes]) -> bytes:
    topic_cls = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        version=9,
        transactional_id=None,
        acks=acks,
        timeout_ms=5000,
        topic_data=[
            topic_cls(name=t, partition_data=[topic_cls.PartitionProduceData(index=0, records=r)])
            for t, r in data.items()
        ],
    )
    request.with_header(correlation_id=correlation_id, client_id="raw-test")
    return bytes(request.encode(header=True, framed=True))


def _metadata(correlation_id: int, topics: list[str]) -> bytes:
    request = MetadataRequest(
        version=12,
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=True,
    )
    request.with_header(correlation_id=correlation_id, client_id="raw-test")
    return bytes(request.encode(header=True, framed=True))


def _read_response(sock: socket.socket) -> bytes:
    def exactly(n: int) -> bytes:
        buf = b""
        while len(buf) < n:
            chunk = sock.recv(n - len(buf))
            assert chunk, "connection closed"
            buf += chunk
        return buf

    return exactly(int(Int32.decode(io.BytesIO(exactly(4)))))


def _errors(response: Any) -> dict[str, int]:
    return {t.name: p.error_code for t in response.responses for p in t.partition_responses}


def test_wire_order_split_merge_and_acks0(proxied: tuple[ProxiedTansuBroker, KafkaFaultProxy]) -> None:
    _, proxy = proxied
    ok, bad, gone = _name("ok"), _name("bad"), _name("gone") + ".dlq"
    create_topics(proxy.bootstrap, {ok: 1, bad: 1})
    proxy.reject_produce(bad, 87)
    proxy.disable_auto_create([gone])
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
        # pipelined: the proxy's own answers (2, 5) must wait for the broker's (1, 3); 4 expects no response
        sock.sendall(
            _produce(1, -1, {ok: _records(b"a")})
            + _produce(2, -1, {bad: _records(b"b")})
            + _produce(3, -1, {ok: _records(b"c"), bad: _records(b"d")})
            + _produce(4, 0, {bad: _records(b"e")})
            + _produce(5, -1, {gone: _records(b"f")})
            + _metadata(6, [ok])
        )
        frames = [_read_response(sock) for _ in range(5)]
    ids = [ResponseHeader.decode(io.BytesIO(f), flexible=False).correlation_id for f in frames]
    assert ids == [1, 2, 3, 5, 6]
    r1, r2, r3, r5 = (ProduceResponse.decode(f, version=9, header=True) for f in frames[:4])
    assert _errors(r1) == {ok: 0}
    assert _errors(r2) == {bad: 87}
    assert _errors(r3) == {ok: 0, bad: 87}  # split: ok forwarded, bad answered, merged
    assert r3.responses[0].partition_responses[0].base_offset == 1
    assert _errors(r5) == {gone: 3}
    metadata = MetadataResponse.decode(frames[4], version=12, header=True)
    assert [(t.name, t.error_code) for t in metadata.topics] == [(ok, 0)]
    assert [r.value for r in read_all(proxy.bootstrap, ok, partitions=1, expect=2)] == [b"a", b"c"]
    assert gone not in _list_topics(proxy.bootstrap)
    stats = proxy.stats
    assert stats.produce_requests == {ok: 2, bad: 3, gone: 1}
    assert stats.produce_rejected == {bad: 3, gone: 1}


# ------------------------------------------------------------------ lifecycle


def test_late_upstream_and_stop_with_live_connections(tmp_path: Path) -> None:
    proxy = KafkaFaultProxy()
    proxy.start()
    broker = ProxiedTansuBroker(tmp_path, advertised_port=proxy.port)
    try:
        with socket.create_connection(("127.0.0.1", proxy.port), timeout=10) as sock:
            sock.sendall(_metadata(1, []))  # accepted before the proxy knows its broker: waits for it
            broker.start()
            proxy.connect_upstream(broker.bootstrap)
            metadata = MetadataResponse.decode(_read_response(sock), version=12, header=True)
            assert [(b.host, b.port) for b in metadata.brokers] == [("127.0.0.1", proxy.port)]  # advertised
            started = time.monotonic()
            proxy.stop()
            assert time.monotonic() - started < 2
            assert sock.recv(1) == b""  # the proxy closed the client connection
    finally:
        proxy.stop()
        broker.stop()
