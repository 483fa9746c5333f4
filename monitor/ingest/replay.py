"""What a re-read must not do again: the replay guard of each assigned partition.

The committed offset of a partition is a low watermark: the first record of the oldest trace still open on
it. Traces that closed and were stored above it, and records above it that were dead-lettered, are read again
after a restart or a rebalance. A re-read that starts in the middle of a stored trace would see only its
tail and rebuild it as another run (a rootless one, under another run id): stored and counted twice. A
re-read dead letter would be sent twice.

So the run loop writes a :class:`~monitor.store.base.ReplayMark` for each of those in the same store
transaction as the results (traces), or once the dead letter is acknowledged (dead letters), and
:class:`ReplayGuard` loads the marks of a partition before the first record of it is processed. A trace
whose id is marked on the partition is skipped whole when it closes again; a bad record whose offset and
content match a dead-letter mark is not sent again. Marks whose ``last_offset`` is below the committed offset
can never be needed again and are forgotten (in memory at once, in the store every ``prune_interval_s``).

Only traces whose records span more than one offset (of one partition, or several partitions) can be re-read
in part, so only those are marked: a trace in one record is re-read whole or not at all, and the idempotent
store handles it.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from monitor.store.base import ReplayMark
from monitor.trajectory.assembler import ClosedTrace, TopicPartition


class HasTraceId(Protocol):
    @property
    def trace_id(self) -> str: ...


class MarkStore(Protocol):
    """The part of the results store the guard needs."""

    def load_marks(self, topic: str, partition: int) -> list[ReplayMark]: ...
    def forget_marks(self, topic: str, partition: int, below: int) -> int: ...


def dead_letter_ident(offset: int, key: bytes | None, value: bytes | None) -> str:
    """The mark identity of a dead-lettered record: its offset and a checksum of its content, so a partition
    whose log was recreated (offsets reused by other records) never matches an old mark."""
    crc = zlib.crc32(value or b"", zlib.crc32(key or b""))
    return f"{offset}:{crc:08x}"


def trace_marks(closed: ClosedTrace, *, always: bool = False) -> list[ReplayMark]:
    """Marks for a handled trace: one per partition where its records span more than one offset, every
    partition it touched when it touched several (a re-read of one of them alone would rebuild a fragment),
    or when ``always``."""
    out: list[ReplayMark] = []
    split = len(closed.first_offsets) > 1  # on several partitions: any one of them can be re-read alone
    for (topic, partition), first in closed.first_offsets.items():
        last = closed.last_offsets.get((topic, partition), first)
        if always or split or last > first:
            out.append(ReplayMark(topic, partition, "trace", closed.trace_id, last))
    return out


@dataclass(slots=True)
class _PartitionMarks:
    traces: dict[str, int] = field(default_factory=dict)  # trace id -> last offset
    dead_letters: dict[str, int] = field(default_factory=dict)  # ident -> offset
    skipped: set[str] = field(default_factory=set)  # marked traces whose re-read records were dropped


T = TypeVar("T", bound=HasTraceId)
V = TypeVar("V")


class ReplayGuard:
    """The replay marks of the assigned partitions, in memory; see the module docstring. Not thread-safe."""

    def __init__(self, store: MarkStore) -> None:
        self._store = store
        self._marks: dict[TopicPartition, _PartitionMarks] = {}

    def loaded(self, tp: TopicPartition) -> bool:
        return tp in self._marks

    def load(self, tp: TopicPartition) -> int:
        """Load the marks of ``tp`` from the store; returns how many. Raises ``StoreUnavailable``."""
        marks = _PartitionMarks()
        for mark in self._store.load_marks(tp[0], tp[1]):
            if mark.kind == "trace":
                marks.traces[mark.ident] = mark.last_offset
            else:
                marks.dead_letters[mark.ident] = mark.last_offset
        self._marks[tp] = marks
        return len(marks.traces) + len(marks.dead_letters)

    def drop_handled(self, tp: TopicPartition, items: Sequence[T]) -> tuple[Sequence[T], int]:
        """``items`` (spans or log events of one record of ``tp``) without those of traces already handled,
        and how many such traces this call met for the first time (each is counted once as a replay)."""
        marks = self._marks.get(tp)
        if marks is None or not marks.traces:
            return items, 0
        traces = marks.traces
        if not any(item.trace_id in traces for item in items):
            return items, 0
        new = {item.trace_id for item in items if item.trace_id in traces} - marks.skipped
        marks.skipped |= new
        return [item for item in items if item.trace_id not in traces], len(new)

    def drop_handled_ids(self, tp: TopicPartition, traces: Mapping[str, V]) -> tuple[Mapping[str, V], int]:
        """:meth:`drop_handled` for an indexed record: ``traces`` by trace id, without those already handled
        (``traces`` itself when none was)."""
        marks = self._marks.get(tp)
        if marks is None or not marks.traces or marks.traces.keys().isdisjoint(traces):
            return traces, 0
        handled = {trace_id for trace_id in traces if trace_id in marks.traces}
        new = handled - marks.skipped
        marks.skipped |= new
        return {k: v for k, v in traces.items() if k not in handled}, len(new)

    def handled_trace(self, closed: ClosedTrace) -> bool:
        """True when ``closed`` was already handled by an earlier reading of its partitions."""
        for tp in closed.first_offsets:
            marks = self._marks.get(tp)
            if marks is not None and closed.trace_id in marks.traces:
                return True
        return False

    def dead_lettered(self, tp: TopicPartition, ident: str) -> bool:
        marks = self._marks.get(tp)
        return marks is not None and ident in marks.dead_letters

    def add(self, marks: Sequence[ReplayMark]) -> None:
        """Remember marks that were stored (for partitions this member holds)."""
        for mark in marks:
            held = self._marks.get((mark.topic, mark.partition))
            if held is None:
                continue
            table = held.traces if mark.kind == "trace" else held.dead_letters
            table[mark.ident] = max(mark.last_offset, table.get(mark.ident, -1))

    def prune(self, tp: TopicPartition, committed: int) -> None:
        """Forget the in-memory marks of ``tp`` below the committed offset (never read again)."""
        held = self._marks.get(tp)
        if held is None:
            return
        for table in (held.traces, held.dead_letters):
            stale = [ident for ident, last in table.items() if last < committed]
            for ident in stale:
                del table[ident]
                held.skipped.discard(ident)

    def forget(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions revoked or reset: their marks are re-loaded on the next assignment."""
        for tp in partitions:
            self._marks.pop(tp, None)

    def size(self) -> int:
        return sum(len(m.traces) + len(m.dead_letters) for m in self._marks.values())
