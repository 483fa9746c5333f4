"""An in-memory broker and consumer that satisfy :class:`monitor.ingest.consumer.Source`.

Ships with the package so users (and our unit tests) can drive the run loop without Kafka: produce
records into a :class:`MemoryBroker`, build the loop with ``make_source=broker.source_factory(topics)``,
call ``loop.step()`` and inspect ``broker.committed``. Semantics follow the Kafka consumer the loop
relies on, no more:

* :meth:`MemorySource.poll` assigns every partition of the subscribed topics on the first call
  (calling the assignment callback, as a group join would), then returns up to ``max_poll_records``
  records from unpaused partitions, round-robin, never blocking (the timeout is ignored);
* positions start at the committed offset (0 when none) and advance past what ``poll`` returned;
* :meth:`MemorySource.commit` records offsets in the broker (``broker.committed``), per group;
* :meth:`MemorySource.revoke` runs the revocation callback and takes the partitions away, as a
  rebalance would; a new source of the same group then starts from the committed offsets;
* :meth:`MemorySource.lag` is the end offset minus the position, for partitions polled at least once.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor.ingest.consumer import PartitionsCallback
from monitor.trajectory.assembler import TopicPartition as TP


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] | None = None


@dataclass
class MemoryBroker:
    """Topics of partitions of records; committed offsets per consumer group."""

    partitions: int = 4
    topics: dict[str, list[list[MemoryRecord]]] = field(default_factory=dict)
    committed: dict[str, dict[TP, int]] = field(default_factory=dict)

    def create_topic(self, topic: str, partitions: int | None = None) -> None:
        self.topics.setdefault(topic, [[] for _ in range(partitions or self.partitions)])

    def produce(self, topic: str, value: bytes | None, key: bytes | None = None, partition: int | None = None) -> int:
        """Append a record; the partition is the given one, else a hash of the key, else 0. Returns its offset."""
        self.create_topic(topic)
        parts = self.topics[topic]
        if partition is None:
            partition = zlib.crc32(key) % len(parts) if key is not None else 0
        offset = len(parts[partition])
        parts[partition].append(MemoryRecord(topic, partition, offset, key, value))
        return offset

    def end_offsets(self, topic: str) -> dict[TP, int]:
        return {(topic, p): len(records) for p, records in enumerate(self.topics.get(topic, []))}

    def source_factory(
        self, topics: Sequence[str], group: str = "memory", max_poll_records: int = 500
    ) -> Callable[[PartitionsCallback, PartitionsCallback], MemorySource]:
        """What :class:`~monitor.ingest.loop.RunLoop` takes as ``make_source``."""

        def make(on_revoked: PartitionsCallback, on_assigned: PartitionsCallback) -> MemorySource:
            return MemorySource(self, list(topics), group, on_revoked, on_assigned, max_poll_records)

        return make


class MemorySource:
    """One group member that owns every partition of its topics until :meth:`revoke`."""

    def __init__(
        self,
        broker: MemoryBroker,
        topics: list[str],
        group: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        max_poll_records: int = 500,
    ) -> None:
        self.broker = broker
        self.topics = topics
        self.group = group
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned
        self.max_poll_records = max_poll_records
        self.positions: dict[TP, int] = {}
        self.paused: set[TP] = set()
        self.polls = 0
        self.closed = False
        self._joined = False

    def poll(self, timeout_ms: int) -> list[MemoryRecord]:
        self.polls += 1
        if not self._joined:
            self._joined = True
            committed = self.broker.committed.get(self.group, {})
            assigned = [(t, p) for t in self.topics for p in range(len(self.broker.topics.get(t, [])))]
            for tp in assigned:
                self.positions[tp] = committed.get(tp, 0)
            self.on_assigned(assigned)
        out: list[MemoryRecord] = []
        active = [tp for tp in self.positions if tp not in self.paused]
        while len(out) < self.max_poll_records:
            took = False
            for tp in active:
                records = self.broker.topics[tp[0]][tp[1]]
                position = self.positions[tp]
                if position < len(records) and len(out) < self.max_poll_records:
                    out.append(records[position])
                    self.positions[tp] = position + 1
                    took = True
            if not took:
                break
        return out

    def seek(self, partition: TP, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (as ``KafkaConsumer.seek``)."""
        if partition in self.positions:
            self.positions[partition] = offset

    def pause(self, partitions: Iterable[TP]) -> None:
        self.paused.update(p for p in partitions if p in self.positions)

    def resume(self, partitions: Iterable[TP]) -> None:
        self.paused.difference_update(partitions)

    def assignment(self) -> set[TP]:
        return set(self.positions)

    def commit(self, offsets: Mapping[TP, int]) -> None:
        self.broker.committed.setdefault(self.group, {}).update(offsets)

    def lag(self) -> dict[TP, int]:
        return {tp: len(self.broker.topics[tp[0]][tp[1]]) - pos for tp, pos in self.positions.items()}

    def revoke(self, partitions: Iterable[TP] | None = None) -> None:
        """A rebalance takes ``partitions`` (default: all) away; the loop's callback runs first."""
        lost = sorted(set(self.positions) if partitions is None else set(partitions) & set(self.positions))
        self.on_revoked(lost)
        for tp in lost:
            self.positions.pop(tp, None)
            self.paused.discard(tp)

    def close(self) -> None:
        self.closed = True
