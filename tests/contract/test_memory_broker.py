"""What only the in-memory broker does (or does on demand): takeover joins, fencing, explicit rebalances, expiry.

The behaviour it shares with Kafka is in test_source_contract.py, run against both.
"""

from __future__ import annotations

import pytest

from monitor.ingest.consumer import CommitError
from monitor.ingest.memory import MemoryBroker, MemorySource
from monitor.testing import MemoryBroker as ShippedBroker

TOPIC = "spans"
P0, P1, P2, P3 = ((TOPIC, p) for p in range(4))
EVERYTHING = [P0, P1, P2, P3]


class Events:
    def __init__(self) -> None:
        self.seen: list[tuple[str, list[tuple[str, int]]]] = []

    def revoked(self, tps: list[tuple[str, int]]) -> None:
        self.seen.append(("revoked", tps))

    def assigned(self, tps: list[tuple[str, int]]) -> None:
        self.seen.append(("assigned", tps))


def member(broker: MemoryBroker, group: str = "g", **kwargs: object) -> tuple[MemorySource, Events]:
    events = Events()
    source = broker.source([TOPIC], group, on_revoked=events.revoked, on_assigned=events.assigned, **kwargs)  # type: ignore[arg-type]
    return source, events


def filled(group_mode: str = "takeover", per_partition: int = 3) -> MemoryBroker:
    broker = MemoryBroker(group_mode=group_mode)  # type: ignore[arg-type]
    broker.create_topic(TOPIC, 4)
    for p in range(4):
        for i in range(per_partition):
            broker.produce(TOPIC, f"{p}-{i}".encode(), partition=p)
    return broker


def test_the_kit_ships_the_same_broker() -> None:
    assert ShippedBroker is MemoryBroker


def test_takeover_a_joining_member_takes_everything_and_fences_the_old_one() -> None:
    broker = filled()
    old, old_events = member(broker)
    assert len(old.poll(0)) == 12
    old.commit({P0: 2})
    new, new_events = member(broker)
    got = new.poll(0)
    assert new_events.seen == [("revoked", []), ("assigned", EVERYTHING)]
    assert sorted((r.partition, r.offset) for r in got)[:2] == [(0, 2), (1, 0)], "from the committed offsets"
    assert broker.members("g") == [new] and old.fenced and not new.fenced

    # the fenced member: its next poll revokes what it held (commits refused, as after on_partitions_lost)
    refused: list[Exception] = []

    def try_commit(tps: list[tuple[str, int]]) -> None:
        old_events.revoked(tps)
        try:
            old.commit({P1: 3})
        except CommitError as exc:
            refused.append(exc)

    old.on_revoked = try_commit
    assert old.poll(0) == [] and old.assignment() == set()
    assert old_events.seen[-1] == ("revoked", EVERYTHING) and len(refused) == 1
    assert old.poll(0) == [] and old_events.seen[-1] == ("revoked", EVERYTHING), "never gets partitions again"
    with pytest.raises(CommitError):
        old.commit({P1: 1})
    assert broker.committed["g"] == {P0: 2}


def test_rebalance_revokes_and_assigns_back_inside_poll_keeping_positions_and_pauses() -> None:
    broker = filled()
    source, events = member(broker)
    assert len(source.poll(0)) == 12
    source.pause([P1])
    source.commit({P0: 1})
    broker.rebalance("g")
    assert events.seen[-1] == ("assigned", EVERYTHING), "nothing runs outside poll"
    broker.produce(TOPIC, b"new", partition=1)
    assert source.poll(0) == []
    assert events.seen[-2:] == [("revoked", EVERYTHING), ("assigned", EVERYTHING)]
    assert source.positions[P0] == 3, "kept, not reset to the committed offset"
    assert source.paused == {P1}
    source.resume([P1])
    assert [(r.partition, r.offset) for r in source.poll(0)] == [(1, 3)]


def test_share_mode_splits_by_range_and_expire_hands_a_crashed_members_partitions_over() -> None:
    broker = filled("share")
    a, a_events = member(broker)
    b, b_events = member(broker)
    a.poll(0)
    assert a.assignment() == set(EVERYTHING)
    assert b.poll(0) == [], "waits in the join until A rejoins"
    a.poll(0)
    b.poll(0)
    assert a_events.seen[-2:] == [("revoked", EVERYTHING), ("assigned", [P0, P1])]
    assert b_events.seen == [("revoked", []), ("assigned", [P2, P3])]
    assert broker.members("g") == [a, b]
    broker.expire(a)
    assert broker.members("g") == [b] and a.fenced
    b.poll(0)
    assert b_events.seen[-2:] == [("revoked", [P2, P3]), ("assigned", EVERYTHING)]
    a.poll(0)
    assert a_events.seen[-1] == ("revoked", [P0, P1]) and a.assignment() == set()


def test_a_member_that_never_polls_again_holds_a_shared_rebalance_until_closed() -> None:
    broker = filled("share")
    a, _ = member(broker)
    a.poll(0)
    b, b_events = member(broker)
    for _ in range(3):
        assert b.poll(0) == []
    assert b.assignment() == set()
    a.close()
    got = b.poll(0)
    assert b_events.seen[-1] == ("assigned", EVERYTHING) and len(got) == 12


def test_revoke_takes_partitions_away_at_once_and_close_is_idempotent() -> None:
    broker = filled()
    source, events = member(broker)
    source.poll(0)
    source.revoke([P0, (TOPIC, 9)])
    assert events.seen[-1] == ("revoked", [P0]) and P0 not in source.assignment()
    source.close()
    source.close()
    assert events.seen[-1] == ("revoked", [P1, P2, P3]) and source.closed
    assert broker.members("g") == []
    with pytest.raises(RuntimeError):
        source.poll(0)


def test_offset_reset_latest_and_out_of_range_positions_and_lag_while_paused() -> None:
    broker = filled()
    latest, _ = member(broker, auto_offset_reset="latest")
    assert latest.poll(0) == []
    assert latest.lag() == dict.fromkeys(EVERYTHING, 0)

    broker2 = filled()
    source, _ = member(broker2, "other")
    source.poll(0)
    source.seek(P0, 99)  # past the end: reset by auto_offset_reset (earliest) at the next fetch
    assert [r.offset for r in source.poll(0)] == [0, 1, 2]
    source.pause([P1])
    broker2.produce(TOPIC, b"x", partition=1)
    broker2.produce(TOPIC, b"y", partition=2)
    source.poll(0)
    lag = source.lag()
    assert lag[P1] == 0, "a paused partition's high watermark is not refreshed"
    assert lag[P2] == 0, "fetched"
    source.resume([P1])
    source.poll(0)
    assert source.lag()[P1] == 0 and source.positions[P1] == 4


def test_produced_records_carry_key_partition_offset_and_headers() -> None:
    broker = MemoryBroker(partitions=2)
    assert broker.produce("t", b"v", key=b"k", headers=[("h", b"1")]) == 0
    assert broker.produce("t", None) == 0  # no key: partition 0; a tombstone value is kept
    records = [r for part in broker.topics["t"] for r in part]
    assert {(r.key, r.value, tuple(r.headers or ())) for r in records} == {
        (b"k", b"v", (("h", b"1"),)),
        (None, None, ()),
    }
    assert broker.end_offsets("t") == {
        ("t", 0): sum(r.partition == 0 for r in records),
        ("t", 1): sum(r.partition == 1 for r in records),
    }
