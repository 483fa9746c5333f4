"""One contract for :class:`monitor.ingest.consumer.Source`, run against every implementation.

* ``kafka``: :class:`~monitor.ingest.consumer.KafkaSource` on the real test broker (Tansu, kafka-python 3.x);
* ``confluent``: :class:`~monitor.ingest.consumer_confluent.ConfluentSource` (``kafka.client: confluent``,
  confluent-kafka on librdkafka) on the same broker, with the same settings;
* ``memory``: :class:`~monitor.ingest.memory.MemorySource` (shipped as ``monitor.testing.MemoryBroker``) in its
  default ``takeover`` group mode, and ``memory-share``: the same in ``share`` mode.

What the run loop relies on: the callbacks run inside the first poll(s) before any record (revoke nothing, then
assign: kafka-python's eager join); poll gives
every record once, in offset order per partition, at most ``max_poll_records`` at a time; commit is where a new
member of the group starts; pause/resume/seek; lag; close and rebalances run the callbacks (eager protocol:
revoke everything, then assign; a partition assigned back keeps its position and paused flag; offsets committed
in the revocation callback are where the new owner starts). The only difference allowed is what a *joining*
member does in ``takeover`` mode (it takes every partition: tests/contract/test_memory_broker.py); the test of
two live members sharing a topic runs on the backends that share.
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol

import pytest

from monitor.ingest.consumer import KafkaSource, Record, Source
from monitor.ingest.consumer_confluent import ConfluentSource
from monitor.ingest.memory import MemoryBroker
from monitor.settings import KafkaSettings
from tests.support.kafka import committed, create_topics, produce

TP = tuple[str, int]
Produced = tuple[bytes | None, bytes, Sequence[tuple[str, bytes]]]


class Member:
    """A source plus what its callbacks saw: ``events`` in order, and whether each ran inside a source call."""

    def __init__(self, make: Callable[[Callable[[list[TP]], None], Callable[[list[TP]], None]], Source]) -> None:
        self.events: list[tuple[str, list[TP]]] = []
        self.outside_calls: list[str] = []
        self.records: list[Record] = []
        self.records_before_assignment = 0
        self.on_revoke: Callable[[Member, list[TP]], None] | None = None
        self._in_call = False
        self.source = make(self._revoked, self._assigned)

    def _revoked(self, partitions: list[TP]) -> None:
        if not self._in_call:
            self.outside_calls.append("revoked")
        self.events.append(("revoked", list(partitions)))
        if self.on_revoke is not None:
            self.on_revoke(self, partitions)

    def _assigned(self, partitions: list[TP]) -> None:
        if not self._in_call:
            self.outside_calls.append("assigned")
        self.events.append(("assigned", list(partitions)))

    def poll(self, timeout_ms: int = 200) -> list[Record]:
        self._in_call = True
        try:
            got = self.source.poll(timeout_ms)
        finally:
            self._in_call = False
        if got and not any(kind == "assigned" for kind, _ in self.events):
            self.records_before_assignment += len(got)
        self.records.extend(got)
        return got

    def close(self) -> None:
        self._in_call = True
        try:
            self.source.close()
        finally:
            self._in_call = False

    def of(self, tp: TP) -> list[Record]:
        return [r for r in self.records if (r.topic, r.partition) == tp]

    def offsets(self, tp: TP) -> list[int]:
        return [r.offset for r in self.of(tp)]


class Backend(Protocol):
    name: str
    shares: bool
    """Whether two live members of a group split its partitions (Kafka, memory ``share``)."""

    def topic(self, partitions: int) -> str: ...
    def group(self) -> str: ...
    def produce(self, topic: str, partition: int, records: Iterable[Produced]) -> None: ...
    def member(self, topic: str, group: str, max_poll_records: int = 500) -> Member: ...
    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int | None]: ...


class KafkaBackend:
    name = "kafka"
    shares = True

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.members: list[Member] = []

    def topic(self, partitions: int) -> str:
        topic = f"contract-{uuid.uuid4().hex[:8]}"
        create_topics(self.bootstrap, {topic: partitions})
        return topic

    def group(self) -> str:
        return f"g-contract-{uuid.uuid4().hex[:8]}"

    def produce(self, topic: str, partition: int, records: Iterable[Produced]) -> None:
        produce(self.bootstrap, topic, list(records), partition=partition)

    def member(self, topic: str, group: str, max_poll_records: int = 500) -> Member:
        settings = KafkaSettings(
            bootstrap_servers=self.bootstrap,
            spans_topic=topic,
            group_id=group,
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            max_poll_records=max_poll_records,
        )
        # the rebalance timeout is max_poll_interval_ms: bounded, so a member slow to rejoin (CI load) delays the
        # rebalance by seconds, not by the 5-minute default
        member = Member(
            lambda revoked, assigned: KafkaSource(
                settings, revoked, assigned, fetch_max_wait_ms=100, max_poll_interval_ms=10_000
            )
        )
        self.members.append(member)
        return member

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int | None]:
        return committed(self.bootstrap, group, topic, partitions)

    def cleanup(self) -> None:
        for member in self.members:
            with contextlib.suppress(Exception):  # closed already, or the test failed half-way
                member.close()


class ConfluentBackend(KafkaBackend):
    name = "confluent"

    def member(self, topic: str, group: str, max_poll_records: int = 500) -> Member:
        settings = KafkaSettings(
            bootstrap_servers=self.bootstrap,
            spans_topic=topic,
            group_id=group,
            client="confluent",
            session_timeout_ms=6000,
            heartbeat_interval_ms=500,
            max_poll_records=max_poll_records,
        )
        # the same tuning as KafkaBackend, by its kafka-python names (ConfluentSource translates them)
        member = Member(
            lambda revoked, assigned: ConfluentSource(
                settings, revoked, assigned, fetch_max_wait_ms=100, max_poll_interval_ms=10_000
            )
        )
        self.members.append(member)
        return member


class MemoryBackend:
    shares: bool

    def __init__(self, mode: Any) -> None:
        self.broker = MemoryBroker(group_mode=mode)
        self.name = f"memory-{mode}"
        self.shares = mode == "share"

    def topic(self, partitions: int) -> str:
        topic = f"contract-{uuid.uuid4().hex[:8]}"
        self.broker.create_topic(topic, partitions)
        return topic

    def group(self) -> str:
        return f"g-contract-{uuid.uuid4().hex[:8]}"

    def produce(self, topic: str, partition: int, records: Iterable[Produced]) -> None:
        for key, value, headers in records:
            self.broker.produce(topic, value, key=key, partition=partition, headers=headers)

    def member(self, topic: str, group: str, max_poll_records: int = 500) -> Member:
        return Member(self.broker.source_factory([topic], group, max_poll_records))

    def committed(self, group: str, topic: str, partitions: int) -> dict[int, int | None]:
        offsets = self.broker.committed.get(group, {})
        return {p: offsets.get((topic, p)) for p in range(partitions)}

    def cleanup(self) -> None:
        pass


@pytest.fixture(params=["memory-takeover", "memory-share", "kafka", "confluent"])
def backend(request: pytest.FixtureRequest) -> Any:
    yield from _backend(request)


@pytest.fixture(params=["memory-share", "kafka", "confluent"])
def sharing_backend(request: pytest.FixtureRequest) -> Any:
    """The backends where members share a topic (in takeover mode a joining member takes every partition: its
    own tests are in test_memory_broker.py)."""
    yield from _backend(request)


def _backend(request: pytest.FixtureRequest) -> Any:
    if request.param == "kafka":
        b: Any = KafkaBackend(request.getfixturevalue("kafka_bootstrap"))
    elif request.param == "confluent":
        b = ConfluentBackend(request.getfixturevalue("kafka_bootstrap"))
    else:
        b = MemoryBackend(request.param.removeprefix("memory-"))
    yield b
    b.cleanup()


def poll_until(members: Sequence[Member], done: Callable[[], bool], what: str, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}: events {[m.events for m in members]}")
        for m in members:
            m.poll(200)


def poll_more(members: Sequence[Member], times: int = 3) -> None:
    for _ in range(times):
        for m in members:
            m.poll(200)


def records(partition: int, n: int, start: int = 0) -> list[Produced]:
    """``n`` records for ``partition``: a key on even ones, no key on odd ones, a header on every third."""
    out: list[Produced] = []
    for i in range(start, start + n):
        key = f"k{partition}-{i}".encode() if i % 2 == 0 else None
        headers = [("h", f"{partition}-{i}".encode())] if i % 3 == 0 else []
        out.append((key, f"p{partition}-{i}".encode(), headers))
    return out


def joined(member: Member) -> Callable[[], bool]:
    return lambda: any(kind == "assigned" for kind, _ in member.events)


# --------------------------------------------------------------------------- the contract


def test_the_first_poll_joins_and_runs_the_assignment_callback_inside_poll_before_any_record(backend: Any) -> None:
    topic = backend.topic(3)
    for p in range(3):
        backend.produce(topic, p, records(p, 2))
    member = backend.member(topic, backend.group())
    assert member.events == [], "constructing a source does not join the group"
    poll_until([member], joined(member), "the assignment")
    everything = [(topic, 0), (topic, 1), (topic, 2)]
    # eager join (kafka-python 3): revoke what is held (nothing yet), then assign
    assert member.events == [("revoked", []), ("assigned", everything)]
    assert member.outside_calls == [] and member.records_before_assignment == 0
    assert member.source.assignment() == set(everything)


def test_poll_gives_every_record_once_in_offset_order_per_partition(backend: Any) -> None:
    topic = backend.topic(3)
    for p in range(3):
        backend.produce(topic, p, records(p, 9))
    member = backend.member(topic, backend.group(), max_poll_records=5)
    batches: list[int] = []
    deadline = time.monotonic() + 45
    while len(member.records) < 27 and time.monotonic() < deadline:
        batches.append(len(member.poll(200)))
    poll_more([member])
    assert len(member.records) == 27, "every record once, none twice"
    assert max(batches) <= 5, "at most max_poll_records per poll"
    for p in range(3):
        got = member.of((topic, p))
        assert [r.offset for r in got] == list(range(9))
        expected = records(p, 9)
        assert [(r.key, r.value, list(r.headers or [])) for r in got] == [(k, v, list(h)) for k, v, h in expected]
        assert {r.topic for r in got} == {topic}


def test_a_commit_is_where_the_next_member_of_the_group_starts(backend: Any) -> None:
    topic, group = backend.topic(2), backend.group()
    for p in range(2):
        backend.produce(topic, p, records(p, 6))
    first = backend.member(topic, group)
    poll_until([first], lambda: len(first.records) == 12, "the first member's records")
    first.source.commit({})  # nothing to commit: no error
    first.source.commit({(topic, 0): 4})
    assert backend.committed(group, topic, 2) == {0: 4, 1: None}
    first.close()
    assert first.events[-1] == ("revoked", [(topic, 0), (topic, 1)]), "close revokes what the member holds"

    second = backend.member(topic, group)
    poll_until([second], lambda: len(second.records) == 2 + 6, "the second member's records")
    assert second.offsets((topic, 0)) == [4, 5], "from the committed offset"
    assert second.offsets((topic, 1)) == list(range(6)), "no commit: from the earliest"


def test_pause_stops_a_partition_and_resume_goes_on_where_it_stopped(backend: Any) -> None:
    topic = backend.topic(2)
    member = backend.member(topic, backend.group())
    poll_until([member], joined(member), "the assignment")
    p0, p1 = (topic, 0), (topic, 1)
    with pytest.raises(KeyError):
        member.source.pause([(topic, 7)])  # not assigned
    backend.produce(topic, 0, records(0, 2))
    poll_until([member], lambda: len(member.of(p0)) == 2, "p0's first records")
    member.source.pause([p0])
    backend.produce(topic, 0, records(0, 3, start=2))
    backend.produce(topic, 1, records(1, 5))
    poll_until([member], lambda: len(member.of(p1)) == 5, "p1's records")
    poll_more([member])
    assert member.offsets(p0) == [0, 1], "nothing from a paused partition"
    member.source.resume([p0])
    poll_until([member], lambda: len(member.of(p0)) == 5, "p0's records after resume")
    assert member.offsets(p0) == [0, 1, 2, 3, 4]


def test_seek_sets_the_next_offset_read(backend: Any) -> None:
    topic = backend.topic(1)
    tp = (topic, 0)
    backend.produce(topic, 0, records(0, 10))
    member = backend.member(topic, backend.group())
    poll_until([member], lambda: len(member.records) == 10, "the records")
    member.source.seek(tp, 3)
    poll_until([member], lambda: len(member.records) == 17, "the records after seeking back")
    assert member.offsets(tp) == list(range(10)) + list(range(3, 10))
    member.source.seek(tp, 9)
    poll_until([member], lambda: len(member.records) == 18, "the last record again")
    assert member.records[-1].offset == 9
    with pytest.raises(ValueError):
        member.source.seek((topic, 5), 0)  # not assigned
    with pytest.raises(ValueError):
        member.source.seek(tp, -1)


def test_lag_is_the_high_watermark_minus_the_position_of_fetched_partitions(backend: Any) -> None:
    topic = backend.topic(2)
    p0, p1 = (topic, 0), (topic, 1)
    backend.produce(topic, 0, records(0, 20))
    member = backend.member(topic, backend.group(), max_poll_records=4)
    poll_until([member], lambda: len(member.records) >= 4, "a first batch")
    lag = member.source.lag()
    assert set(lag) <= member.source.assignment()
    assert lag[p0] == 20 - len(member.of(p0)) > 0
    assert lag.get(p1, 0) == 0
    poll_until([member], lambda: len(member.records) == 20, "every record")
    assert member.source.lag()[p0] == 0 and sum(member.source.lag().values()) == 0
    member.source.seek(p0, 5)
    assert member.source.lag()[p0] == 15, "the position moves at once; the high watermark stays"
    backend.produce(topic, 1, records(1, 3))
    poll_until([member], lambda: len(member.of(p1)) == 3, "p1's records")
    assert member.source.lag().get(p1) == 0


def test_close_runs_the_revocation_callback_and_commits_from_it_are_kept(backend: Any) -> None:
    topic, group = backend.topic(2), backend.group()
    backend.produce(topic, 1, records(1, 3))
    member = backend.member(topic, group)
    poll_until([member], lambda: len(member.records) == 3, "the records")
    member.on_revoke = lambda m, tps: m.source.commit({(topic, 1): 3})
    member.close()
    everything = [(topic, 0), (topic, 1)]
    assert member.events == [("revoked", []), ("assigned", everything), ("revoked", everything)]
    assert member.outside_calls == []
    assert backend.committed(group, topic, 2) == {0: None, 1: 3}


def test_a_second_member_takes_part_of_the_topic_in_an_eager_rebalance(sharing_backend: Any) -> None:
    backend = sharing_backend
    topic, group = backend.topic(2), backend.group()
    everything = [(topic, 0), (topic, 1)]
    for p in range(2):
        backend.produce(topic, p, records(p, 6))
    a = backend.member(topic, group)
    poll_until([a], lambda: len(a.records) == 12, "A's records")
    a.source.pause(everything)
    commits = {(topic, 0): 2, (topic, 1): 3}
    a.on_revoke = lambda m, tps: m.source.commit({tp: commits[tp] for tp in tps if tp in commits})

    b = backend.member(topic, group)
    poll_until(
        [a, b],
        lambda: len(a.events) >= 4 and joined(b)() and not a.source.assignment() & b.source.assignment(),
        "the rebalance",
    )
    (a_tp,) = a.events[3][1]
    (b_tp,) = b.events[1][1]
    assert a.events == [("revoked", []), ("assigned", everything), ("revoked", everything), ("assigned", [a_tp])]
    assert b.events == [("revoked", []), ("assigned", [b_tp])]
    assert {a_tp, b_tp} == set(everything)
    assert a.outside_calls == [] and b.outside_calls == []
    poll_until([a, b], lambda: len(b.records) == 6 - commits[b_tp], "B's records")
    assert b.offsets(b_tp) == list(range(commits[b_tp], 6)), "B starts where A committed in its revocation"

    # A got its partition back: position (the end, not the committed offset) and paused flag kept
    for p in range(2):
        backend.produce(topic, p, records(p, 2, start=6))
    poll_until([a, b], lambda: len(b.of(b_tp)) == 6 - commits[b_tp] + 2, "B's new records")
    poll_more([a, b])
    assert len(a.records) == 12, "A's partition is still paused"
    a.source.resume([a_tp])
    poll_until([a, b], lambda: len(a.records) == 14, "A's new records")
    assert a.offsets(a_tp)[-2:] == [6, 7], "A goes on from its own position"

    # B leaves: A rebalances and gets B's partition from B's last commit
    b.on_revoke = lambda m, tps: m.source.commit({b_tp: 8})
    b.close()
    assert b.events[-1] == ("revoked", [b_tp])
    poll_until([a], lambda: a.events[-1] == ("assigned", everything), "A taking the whole topic")
    assert a.events[-2] == ("revoked", [a_tp])
    backend.produce(topic, b_tp[1], records(b_tp[1], 1, start=8))
    poll_until([a], lambda: len(a.of(b_tp)) == 7, "B's partition at A")
    assert a.offsets(b_tp)[-1:] == [8]
