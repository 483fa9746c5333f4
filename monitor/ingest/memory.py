"""An in-memory broker and consumer that satisfy :class:`monitor.ingest.consumer.Source`.

Ships with the package (``from monitor.testing import MemoryBroker``) so users and our own tests can drive the run
loop without Kafka: produce records into a :class:`MemoryBroker`, build the loop with
``make_source=broker.source_factory(topics)``, call ``loop.step()`` and inspect ``broker.committed``.

The behaviour is the one the run loop relies on from :class:`~monitor.ingest.consumer.KafkaSource` on a real
broker, and tests/contract/test_source_contract.py runs the same suite against both:

* **Join.** Nothing happens until the first :meth:`MemorySource.poll`, which joins the group and runs the
  callbacks *inside* ``poll`` before any record is returned: the revocation callback with an empty list (as
  kafka-python 3 does on every eager join), then the assignment callback. A partition starts at the group's
  committed offset, else at the earliest (``auto_offset_reset="earliest"``) or the end (``"latest"``).
* **Poll** returns up to ``max_poll_records`` records from assigned, unpaused partitions, in offset order per
  partition (round-robin across partitions), and never blocks (the timeout is ignored; Kafka waits up to it).
* **Pause / resume / seek.** A paused partition returns nothing until resumed, then goes on where it stopped.
  :meth:`~MemorySource.seek` sets the next offset read; a position past the end is reset by
  ``auto_offset_reset`` at the next fetch. Pausing, resuming or seeking a partition that is not assigned raises
  (``KeyError`` / ``ValueError``, as kafka-python does).
* **Commit** stores offsets in the broker (``broker.committed[group]``), synchronously; a new member of the group
  starts from them. A member that was fenced (see below) cannot commit: :class:`~monitor.ingest.consumer.CommitError`.
* **Lag** is the high watermark seen at the partition's last fetch minus the position, never negative; a
  partition not fetched yet has no entry, and a paused partition's high watermark is not refreshed.
* **Rebalances** follow Kafka's eager protocol and run inside ``poll``: every member runs the revocation
  callback for all it holds, rejoins, and once all members have rejoined each gets its new assignment
  (Kafka's range assignor, members in join order) through the assignment callback. A partition assigned back
  to the member that held it keeps its position and paused flag (as kafka-python does); a partition new to a
  member starts at the committed offset, so offsets committed in the revocation callback are where the new
  owner starts. :meth:`MemorySource.close` runs the revocation callback and leaves the group.

The one deliberate difference is what a *joining* member does to the others, set by ``group_mode``:

* ``"takeover"`` (default): the joining member takes every partition, and the members already in the group
  are fenced, as Kafka evicts a member whose session expired (a process that crashed or was abandoned by the
  test: in memory nobody would ever evict it). A fenced member's next poll runs its revocation callback for
  what it held (commits refused, as after ``on_partitions_lost``) and returns nothing from then on. This is
  what a test that "restarts" a loop by building a new one on the same broker needs.
* ``"share"``: Kafka's behaviour between live members: the group rebalances and the partitions are split.
  A member that never polls again holds the rebalance up (Kafka would evict it after its session timeout):
  :meth:`~MemorySource.close` it, or :meth:`MemoryBroker.expire` it.

:meth:`MemoryBroker.rebalance` starts a rebalance of a group (e.g. one member's partitions revoked and
assigned back in one ``poll``); :meth:`MemorySource.revoke` takes partitions away at once, outside ``poll``
(kept for tests written before rebalances were modelled). Not thread-safe: drive it from one thread.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, TypeAlias

if TYPE_CHECKING:
    from monitor.ingest.consumer import PartitionsCallback

__all__ = ["GroupMode", "MemoryBroker", "MemoryRecord", "MemorySource"]

TP: TypeAlias = tuple[str, int]
GroupMode: TypeAlias = Literal["takeover", "share"]
OffsetReset: TypeAlias = Literal["earliest", "latest"]


def _ignore(partitions: list[TP]) -> None:
    pass


@dataclass(frozen=True, slots=True)
class MemoryRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] | None = None
    timestamp: int = -1
    """Milliseconds since the epoch when the record was produced (Kafka's CreateTime); -1 unknown."""


@dataclass
class _Group:
    members: list[MemorySource] = field(default_factory=list)
    rejoining: list[MemorySource] = field(default_factory=list)
    rebalancing: bool = False
    generation: int = 0


@dataclass
class MemoryBroker:
    """Topics of partitions of records; committed offsets and members per consumer group.

    ``partitions``: the partition count of topics created implicitly (by :meth:`produce`) or without a count.
    ``group_mode``: what a joining member does to the group's other members (module docstring).
    """

    partitions: int = 4
    topics: dict[str, list[list[MemoryRecord]]] = field(default_factory=dict)
    committed: dict[str, dict[TP, int]] = field(default_factory=dict)
    group_mode: GroupMode = "takeover"
    groups: dict[str, _Group] = field(default_factory=dict, repr=False)

    # ------------------------------------------------------------------ topics and records

    def create_topic(self, topic: str, partitions: int | None = None) -> None:
        """Create ``topic`` (no-op when it exists). Create topics before members join: a member is assigned the
        partitions that exist when its group's rebalance completes."""
        self.topics.setdefault(topic, [[] for _ in range(partitions or self.partitions)])

    def produce(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Sequence[tuple[str, bytes | None]] | None = None,
    ) -> int:
        """Append a record; the partition is the given one, else a hash of the key, else 0. Returns its offset.

        The key hash is CRC-32, not Kafka's murmur2: records of one key share a partition, but not the partition
        a Kafka producer would pick."""
        self.create_topic(topic)
        parts = self.topics[topic]
        if partition is None:
            partition = zlib.crc32(key) % len(parts) if key is not None else 0
        offset = len(parts[partition])
        parts[partition].append(
            MemoryRecord(topic, partition, offset, key, value, list(headers or ()), int(time.time() * 1000))
        )
        return offset

    def end_offsets(self, topic: str) -> dict[TP, int]:
        """The next offset of every partition of ``topic`` (the high watermark)."""
        return {(topic, p): len(records) for p, records in enumerate(self.topics.get(topic, []))}

    # ------------------------------------------------------------------ members

    def source_factory(
        self,
        topics: Sequence[str],
        group: str = "memory",
        max_poll_records: int = 500,
        auto_offset_reset: OffsetReset = "earliest",
    ) -> Callable[[PartitionsCallback, PartitionsCallback], MemorySource]:
        """What :class:`~monitor.ingest.loop.RunLoop` takes as ``make_source``: one new member per call."""

        def make(on_revoked: PartitionsCallback, on_assigned: PartitionsCallback) -> MemorySource:
            return MemorySource(self, list(topics), group, on_revoked, on_assigned, max_poll_records, auto_offset_reset)

        return make

    def source(
        self,
        topics: Sequence[str],
        group: str = "memory",
        *,
        on_revoked: PartitionsCallback = _ignore,
        on_assigned: PartitionsCallback = _ignore,
        max_poll_records: int = 500,
        auto_offset_reset: OffsetReset = "earliest",
    ) -> MemorySource:
        """A new member of ``group`` subscribed to ``topics`` (it joins at its first poll)."""
        return self.source_factory(topics, group, max_poll_records, auto_offset_reset)(on_revoked, on_assigned)

    def members(self, group: str = "memory") -> list[MemorySource]:
        """The live members of ``group`` in join order (not closed, fenced or expired)."""
        g = self.groups.get(group)
        return list(g.members) if g is not None else []

    def rebalance(self, group: str = "memory") -> None:
        """Start a rebalance of ``group``: at its next poll each member runs the revocation callback for all it
        holds and rejoins; when all have, each gets its assignment at its next poll (the last one to rejoin in
        that same poll). With one member it gets its partitions back, positions and paused flags kept."""
        g = self.groups.get(group)
        if g is not None and g.members:
            self._start_rebalance(g)

    def expire(self, member: MemorySource) -> None:
        """The session of ``member`` expires (a crashed member): it is fenced and leaves its group, and the other
        members rebalance (in ``share`` mode) to take its partitions."""
        member._fence()
        self._leave(member)

    # ------------------------------------------------------------------ group protocol (used by MemorySource)

    def _group(self, name: str) -> _Group:
        return self.groups.setdefault(name, _Group())

    def _start_rebalance(self, g: _Group) -> None:
        if not g.rebalancing:
            g.rebalancing = True
            g.rejoining = list(g.members)
            for m in g.members:
                m._incoming = None  # an assignment not delivered yet is superseded by this round's

    def _join(self, member: MemorySource) -> None:
        g = self._group(member.group)
        if self.group_mode == "takeover":
            for other in g.members:
                other._fence()
            g.members = []
            g.rebalancing = False
        g.members.append(member)
        if g.rebalancing:
            g.rejoining.append(member)
        else:
            self._start_rebalance(g)

    def _leave(self, member: MemorySource) -> None:
        g = self.groups.get(member.group)
        if g is None or member not in g.members:
            return
        g.members.remove(member)
        if member in g.rejoining:
            g.rejoining.remove(member)
        if g.members:
            self._start_rebalance(g)
            self._complete(g)
        else:
            g.rebalancing = False
            g.rejoining = []

    def _rejoined(self, member: MemorySource) -> None:
        g = self._group(member.group)
        if member in g.rejoining:
            g.rejoining.remove(member)
        self._complete(g)

    def _complete(self, g: _Group) -> None:
        """Once every member rejoined: range assignment per topic, members in join order."""
        if not g.rebalancing or g.rejoining:
            return
        g.rebalancing = False
        g.generation += 1
        out: dict[int, list[TP]] = {id(m): [] for m in g.members}
        topics = sorted({t for m in g.members for t in m.topics})
        for topic in topics:
            subscribed = [m for m in g.members if topic in m.topics]
            n = len(self.topics.get(topic, []))
            per, extra = divmod(n, len(subscribed))
            start = 0
            for i, m in enumerate(subscribed):
                size = per + (1 if i < extra else 0)
                out[id(m)].extend((topic, p) for p in range(start, start + size))
                start += size
        for m in g.members:
            m._incoming = out[id(m)]


class MemorySource:
    """One member of a consumer group on a :class:`MemoryBroker`; see the module docstring for the contract."""

    def __init__(
        self,
        broker: MemoryBroker,
        topics: list[str],
        group: str,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        max_poll_records: int = 500,
        auto_offset_reset: OffsetReset = "earliest",
    ) -> None:
        self.broker = broker
        self.topics = topics
        self.group = group
        self.on_revoked = on_revoked
        self.on_assigned = on_assigned
        self.max_poll_records = max_poll_records
        self.auto_offset_reset = auto_offset_reset
        self.positions: dict[TP, int] = {}
        """The assigned partitions and the next offset to read of each."""
        self.paused: set[TP] = set()
        self.polls = 0
        self.closed = False
        self._joined = False
        self._fenced = False
        self._incoming: list[TP] | None = None
        self._highwater: dict[TP, int] = {}

    @property
    def fenced(self) -> bool:
        """True once the member was replaced (``takeover`` join) or expired: it never gets partitions again."""
        return self._fenced

    def _fence(self) -> None:
        self._fenced = True
        self._incoming = None

    def _initial(self, tp: TP) -> int:
        committed = self.broker.committed.get(self.group, {})
        if tp in committed:
            return committed[tp]
        return 0 if self.auto_offset_reset == "earliest" else len(self._records(tp))

    def _records(self, tp: TP) -> list[MemoryRecord]:
        parts = self.broker.topics.get(tp[0], [])
        return parts[tp[1]] if tp[1] < len(parts) else []

    def _drop(self, tp: TP) -> None:
        self.positions.pop(tp, None)
        self.paused.discard(tp)
        self._highwater.pop(tp, None)

    # ------------------------------------------------------------------ Source

    def poll(self, timeout_ms: int) -> list[MemoryRecord]:
        """Join / rebalance as needed (callbacks run here), then up to ``max_poll_records`` records."""
        if self.closed:
            raise RuntimeError("poll() on a closed MemorySource")
        self.polls += 1
        if self._fenced:
            if self.positions:
                lost = sorted(self.positions)
                try:
                    self.on_revoked(lost)
                finally:
                    for tp in lost:
                        self._drop(tp)
            return []
        if not self._joined:
            self._joined = True
            self.broker._join(self)
        group = self.broker._group(self.group)
        if self in group.rejoining:
            # eager: everything held, before rejoining; an empty list too (kafka-python calls it on the first join)
            self.on_revoked(sorted(self.positions))
            self.broker._rejoined(self)
        if self._incoming is not None:
            new, self._incoming = self._incoming, None
            keep = set(new)
            for tp in list(self.positions):
                if tp not in keep:
                    self._drop(tp)
            for tp in new:
                if tp not in self.positions:
                    self.positions[tp] = self._initial(tp)
            self.on_assigned(sorted(new))
        if group.rebalancing or self._fenced:
            return []  # waiting for the other members to rejoin (Kafka blocks in JoinGroup)
        return self._fetch()

    def _fetch(self) -> list[MemoryRecord]:
        active = [tp for tp in self.positions if tp not in self.paused]
        for tp in active:
            end = len(self._records(tp))
            self._highwater[tp] = end
            if self.positions[tp] > end:  # out of range: auto_offset_reset
                self.positions[tp] = 0 if self.auto_offset_reset == "earliest" else end
        out: list[MemoryRecord] = []
        while len(out) < self.max_poll_records:
            took = False
            for tp in active:
                records = self._records(tp)
                position = self.positions[tp]
                if position < len(records) and len(out) < self.max_poll_records:
                    out.append(records[position])
                    self.positions[tp] = position + 1
                    took = True
            if not took:
                break
        return out

    def seek(self, partition: TP, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (as ``KafkaConsumer.seek``: ``ValueError`` when not assigned)."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        if partition not in self.positions:
            raise ValueError(f"unassigned partition {partition}")
        self.positions[partition] = offset

    def pause(self, partitions: Iterable[TP]) -> None:
        """Stop fetching ``partitions`` (``KeyError`` for one not assigned, as kafka-python)."""
        tps = list(partitions)
        for tp in tps:
            if tp not in self.positions:
                raise KeyError(tp)
        self.paused.update(tps)

    def resume(self, partitions: Iterable[TP]) -> None:
        """Fetch ``partitions`` again (``KeyError`` for one not assigned, as kafka-python)."""
        tps = list(partitions)
        for tp in tps:
            if tp not in self.positions:
                raise KeyError(tp)
        self.paused.difference_update(tps)

    def assignment(self) -> set[TP]:
        return set(self.positions)

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Store ``offsets`` (the next offset to read) for the group; ``CommitError`` once the member was fenced."""
        if not offsets:
            return
        if self._fenced:
            from monitor.ingest.consumer import CommitError

            raise CommitError("the member was evicted from the group: its offsets cannot be committed")
        self.broker.committed.setdefault(self.group, {}).update(offsets)

    def lag(self) -> dict[TP, int]:
        return {tp: max(0, self._highwater[tp] - pos) for tp, pos in self.positions.items() if tp in self._highwater}

    def close(self) -> None:
        """Run the revocation callback for the partitions held, then leave the group (idempotent)."""
        if self.closed:
            return
        try:
            if self._joined and not self._fenced and self.positions:
                self.on_revoked(sorted(self.positions))
        finally:
            for tp in list(self.positions):
                self._drop(tp)
            self.closed = True
            if self._joined:
                self.broker._leave(self)

    # ------------------------------------------------------------------ test helpers

    def revoke(self, partitions: Iterable[TP] | None = None) -> None:
        """Take ``partitions`` (default: all) away at once: the revocation callback runs now, outside ``poll``.

        Nobody else gets them until the group's next rebalance. Prefer :meth:`MemoryBroker.rebalance`, which
        runs the callbacks inside ``poll`` as Kafka does."""
        lost = sorted(set(self.positions) if partitions is None else set(partitions) & set(self.positions))
        self.on_revoked(lost)
        for tp in lost:
            self._drop(tp)
