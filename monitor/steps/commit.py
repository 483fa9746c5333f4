"""Commit, the last step: it keeps the offsets of the messages that came through and commits them when the run
loop says (its commit policy: every ``kafka.commit_interval_s``, on revocation, on shutdown).

* Messages arrive in order, so the latest offsets per partition are safe, except below a dead letter the broker
  has not acknowledged yet (the commit stays at its record).
* Before a commit, the replay marks of acknowledged dead letters at or above the offsets about to be committed are
  stored (a re-read would otherwise send them again); below the committed offset marks are pruned.
* The dead-letter producer's acknowledgements are collected on every poll (``monitor_records_dead_lettered_total``);
  above ``max_pending`` unacknowledged letters (or ``max_pending_bytes``) the step reports ``dead_letter`` pressure
  until they are down to half.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Set
from typing import Final, Protocol

from monitor.ingest.consumer import CommitError
from monitor.ingest.dlq import DeadLetter, DeadLetterQueue
from monitor.ingest.replay import ReplayGuard
from monitor.steps.contract import Message, TopicPartition
from monitor.steps.work import InFlight, LoopStats, PipelineMetrics, Store, StoreAvailability, TraceWork, VerdictWork
from monitor.store import StoreUnavailable

log = logging.getLogger(__name__)

Work = TraceWork | VerdictWork | None

MARK_PRUNE_INTERVAL_S: Final = 30.0


class Committer(Protocol):
    """The consumer's commit (``KafkaSource.commit``); raises :class:`~monitor.ingest.consumer.CommitError`."""

    def commit(self, offsets: Mapping[TopicPartition, int]) -> None: ...


class CommitStep:
    """Offsets of finished messages → the consumer group; see the module docstring."""

    def __init__(
        self,
        *,
        dlq: DeadLetterQueue,
        store: Store,
        guard: ReplayGuard,
        availability: StoreAvailability,
        inflight: InFlight,
        metrics: PipelineMetrics,
        stats: LoopStats,
        clock: Callable[[], float],
        wall: Callable[[], float],
        max_pending: int,
        max_pending_bytes: int,
    ) -> None:
        self.dlq = dlq
        self.store = store
        self.guard = guard
        self.availability = availability
        self.inflight = inflight
        self.metrics = metrics
        self.stats = stats
        self.clock = clock
        self.wall = wall
        self.max_pending = max_pending
        self.max_pending_bytes = max_pending_bytes
        self.offsets: dict[TopicPartition, int] = {}
        self.committed: dict[TopicPartition, int] = {}
        self._pruned: dict[TopicPartition, int] = {}
        self._unmarked: list[DeadLetter] = []  # acknowledged dead letters whose marks are not stored yet
        self._next_prune = 0.0  # the first commit prunes, then every MARK_PRUNE_INTERVAL_S
        self._dead_letter_pressure = False

    # ------------------------------------------------------------------ the contract

    def submit(self, message: Message[Work]) -> None:
        self.offsets.update(message.committable)
        if isinstance(message.payload, TraceWork):
            self.inflight.done(message.payload.closed)

    def poll(self) -> None:
        self.collect_dead_letters()
        pending = self.dlq.pending
        pending_bytes = self.dlq.pending_bytes if pending else 0
        self.metrics.set_dead_letters_pending(pending)
        if pending > self.max_pending or pending_bytes > self.max_pending_bytes:
            self._dead_letter_pressure = True
        elif pending <= self.max_pending // 2 and pending_bytes <= self.max_pending_bytes // 2:
            self._dead_letter_pressure = False

    def join(self, timeout_s: float) -> None:
        self.collect_dead_letters()

    def forget(self, partitions: Set[TopicPartition]) -> int:
        for tp in partitions:
            self.offsets.pop(tp, None)
            self.committed.pop(tp, None)
            self._pruned.pop(tp, None)
        return 0

    def pressure(self) -> frozenset[str]:
        return frozenset({"dead_letter"}) if self._dead_letter_pressure else frozenset()

    def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass

    # ------------------------------------------------------------------ committing

    def reset(self, tp: TopicPartition) -> None:
        """Forget what was committed for ``tp`` (its offsets went back, or it was assigned anew)."""
        self.committed.pop(tp, None)

    def collect_dead_letters(self) -> None:
        if not self.dlq.pending:
            return
        self._acknowledged(self.dlq.poll())

    def flush_dead_letters(self, timeout_s: float) -> None:
        """Wait up to ``timeout_s`` for the broker to acknowledge the dead letters sent."""
        if self.dlq.pending:
            self._acknowledged(self.dlq.flush(timeout_s))

    def _acknowledged(self, letters: Iterable[DeadLetter]) -> None:
        for letter in letters:
            self.metrics.record_dead_lettered(letter.reason)
            if letter.marks:
                self._unmarked.append(letter)

    def committable(self, assigned: Set[TopicPartition]) -> dict[TopicPartition, int]:
        """Per assigned partition, the offset safe to commit: the latest finished message's, lowered to every
        unacknowledged dead letter."""
        offsets = {tp: off for tp, off in self.offsets.items() if tp in assigned}
        for tp, first in self.dlq.unacknowledged().items():
            if tp in offsets and first < offsets[tp]:
                offsets[tp] = first
        return offsets

    def commit(
        self, source: Committer, assigned: Set[TopicPartition], only: Iterable[TopicPartition] | None = None
    ) -> bool:
        """Store the marks of acknowledged dead letters a re-read could see, then commit the changed offsets.
        Returns False if the commit failed (logged, counted; the same offsets go out with the next one)."""
        self.collect_dead_letters()
        offsets = self.committable(assigned)
        if only is not None:
            keep = set(only)
            offsets = {tp: o for tp, o in offsets.items() if tp in keep}
        self._store_dead_letter_marks(offsets)
        changed = {tp: o for tp, o in offsets.items() if self.committed.get(tp) != o}
        if not changed:
            return True
        try:
            source.commit(changed)
        except CommitError as exc:
            log.warning("commit of %d partitions failed (retried later): %s", len(changed), exc)
            self.stats.commit_failures += 1
            return False
        when = self.wall()
        for tp, off in changed.items():
            self.committed[tp] = off
            self.guard.prune(tp, off)
            self.metrics.commit_done(tp[0], tp[1], when)
        self.stats.commits += 1
        self._prune_marks()
        return True

    def _store_dead_letter_marks(self, offsets: dict[TopicPartition, int]) -> None:
        """Marks of acknowledged dead letters at or above the offsets about to be committed (below them the
        records are never read again: no mark needed)."""
        if not self._unmarked:
            return
        needed = [
            mark
            for letter in self._unmarked
            for mark in letter.marks
            if mark.last_offset >= offsets.get((mark.topic, mark.partition), -1)
        ]
        if needed:
            try:
                self.store.write([], needed)
            except StoreUnavailable as exc:
                self.availability.observe(False)
                log.warning("dead-letter marks not stored (%s): retried with the next commit", exc)
                return
            self.availability.observe(True)
            self.guard.add(needed)
        self._unmarked.clear()

    def _prune_marks(self) -> None:
        now = self.clock()
        if now < self._next_prune:
            return
        self._next_prune = now + MARK_PRUNE_INTERVAL_S
        for tp, off in self.committed.items():
            if self._pruned.get(tp) == off:
                continue
            try:
                self.store.forget_marks(tp[0], tp[1], off)
            except StoreUnavailable:  # pruned with a later commit
                return
            self._pruned[tp] = off
