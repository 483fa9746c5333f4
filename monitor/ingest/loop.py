"""The run loop: the processor that drives the pipeline's steps (:mod:`monitor.steps`).

It owns what only the consumer can do: poll, pause/resume, the rebalance callbacks and the commit policy. Records
go to the first step (decode), one :class:`~monitor.steps.contract.Message` each; the steps pass the work on
(decode → assemble → rebuild → sample → score → store → observe → export → commit), each with its own bounds; the
last one keeps the offsets that are safe to commit, and the loop commits them on a timer
(``kafka.commit_interval_s``), on revocation and on shutdown. The chain is built in :func:`monitor.app.build_loop`.

One thread runs everything; the only blocking calls are the broker poll (``POLL_TIMEOUT_MS`` at most, 0 while the
steps have work left) and store transactions (bounded by ``store.statement_timeout_s``).

**Bounded work.** One iteration closes at most ``CLOSE_BATCH`` traces and spends at most ``WORK_BUDGET_S``
scoring and storing before it polls again, so a burst of traces closing at once never stops the loop: gauges stay
fresh, the member stays in its group and a stop request is seen within a second.

**Backpressure.** While a step reports pressure (:meth:`~monitor.steps.contract.Step.pressure`: ``store`` the
store is unavailable, ``scoring`` the judge pool is full, ``backlog`` too many closed traces or bytes on their way,
``dead_letter`` too many unacknowledged dead letters) every assigned partition is paused
(``monitor_consumer_paused{reason}``) and the loop keeps polling, so the member stays in the group and rebalances
run. A record the first step rejects (:class:`~monitor.steps.contract.MessageRejected`) is kept, with the rest of
its poll, and offered again; nothing is dropped. Partitions assigned while paused are paused at once.

**Replays** (:mod:`monitor.ingest.replay`). A partition's replay marks are loaded from the store when it is
assigned, before any of its records is processed (it stays paused until they are); the decode and rebuild steps
then skip what an earlier reading handled, so a trace stored before a restart, a ``kill -9`` or a rebalance is
never stored or counted again.

Revocation (inside ``poll()``, kafka-python's rebalance listener): the steps get one bounded chance to finish what
closed (:meth:`~monitor.steps.contract.Step.join`, ``REVOKE_BUDGET_S``), dead letters are flushed and the lost
partitions committed; then what is left of them in the steps is dropped (the new owner re-reads it from the
committed offset) and so are their open traces. A partition assigned back to this member is rewound to that
offset (kafka-python keeps its old position).

Shutdown (:meth:`RunLoop.drain`): fetching stops (partitions paused), the steps finish what closed until the
deadline, dead letters are flushed, the offsets are committed. Open traces are **not** force-closed: scoring an
incomplete run would record wrong verdicts; their records are re-read after the restart because the committed
offset stays at or below their first record.

Delivery is at least once: after a crash the records since the last commit are read again. The store is
idempotent, replay marks skip what was handled, and quality metrics count only the results the store accepted as
new, so nothing is stored or counted twice. Pipeline counters (records, spans, traces closed) count what this
process did, replays included.

A dead-letter rate above ``dead_letter.max_rate`` raises :class:`~monitor.ingest.dlq.DeadLetterRateExceeded` out
of :meth:`RunLoop.run` (after the same drain as a shutdown) so the daemon exits non-zero.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable
from typing import Final

from monitor.ingest.consumer import PartitionsCallback, Record, Source
from monitor.ingest.dlq import DeadLetterQueue, DeadLetterRateExceeded
from monitor.ingest.replay import ReplayGuard
from monitor.settings import Settings
from monitor.steps.assemble import AssembleStep
from monitor.steps.commit import CommitStep
from monitor.steps.contract import Message, MessageRejected, Step
from monitor.steps.work import (
    Backoff,
    Health,
    InFlight,
    LoopStats,
    PipelineMetrics,
    ResultSink,
    Store,
    StoreAvailability,
)
from monitor.store import StoreUnavailable
from monitor.trajectory.assembler import Assembler, TopicPartition

__all__ = [
    "CLOSE_BATCH",
    "MAX_DEAD_LETTERS_PENDING",
    "MAX_HELD",
    "POLL_TIMEOUT_MS",
    "WORK_BUDGET_S",
    "WRITE_BATCH",
    "LoopStats",
    "ResultSink",
    "RunLoop",
]

log = logging.getLogger(__name__)

POLL_TIMEOUT_MS: Final = 100
"""Longest a poll blocks; bounds how late a trace closes and how fast a stop request is seen."""
TICK_S: Final = 1.0
"""How often gauges (open traces, lag) and health are refreshed."""
WRITE_BATCH: Final = 200
"""Closed traces written per store transaction."""
CLOSE_BATCH: Final = 2000
"""Traces the assembler closes per iteration at most."""
WORK_BUDGET_S: Final = 0.25
"""Time one iteration spends scoring and storing before it polls again."""
MAX_HELD: Final = 5000
"""Closed traces on their way to the store above which the partitions pause (``backlog``)."""
MAX_DEAD_LETTERS_PENDING: Final = 1000
"""Unacknowledged dead letters above which the partitions pause (``dead_letter``)."""
MAX_DEAD_LETTER_BYTES_PENDING: Final = 64 * 1024 * 1024
REVOKE_BUDGET_S: Final = 5.0
"""Longest a revocation spends storing closed traces before it gives them to the new owner."""
REJECTED: Final = "rejected"
"""Pause reason while records the first step rejected wait to be offered again."""


class RunLoop:
    """The processor; see the module docstring for the contract.

    ``head`` is the first step (decode); ``assemble`` and ``committer`` are the chain's assemble and commit steps
    (the loop reads the assembler's gauges, resets a partition whose offsets went back, and commits per its
    policy). ``make_source(on_revoked, on_assigned)`` builds the broker source with this loop's rebalance
    callbacks. ``clock`` is monotonic seconds, ``wall`` epoch seconds. Not thread-safe except :meth:`stop`.
    """

    def __init__(
        self,
        settings: Settings,
        make_source: Callable[[PartitionsCallback, PartitionsCallback], Source],
        head: Step[Record],
        *,
        assemble: AssembleStep,
        committer: CommitStep,
        guard: ReplayGuard,
        availability: StoreAvailability,
        inflight: InFlight,
        stats: LoopStats,
        dlq: DeadLetterQueue,
        store: Store,
        metrics: PipelineMetrics,
        health: Health,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.head = head
        self.assemble = assemble
        self.committer = committer
        self.guard = guard
        self.availability = availability
        self.inflight = inflight
        self.stats = stats
        self.dlq = dlq
        self.store = store
        self.metrics = metrics
        self.health = health
        self.clock = clock
        self.wall = wall
        self._stop = threading.Event()
        self._pending: deque[Record] = deque()  # polled records the first step has not taken yet
        self._rejected_reason = ""
        self._pause_reasons: set[str] = set()
        self._paused_tps: set[TopicPartition] = set()
        self._unverified: set[TopicPartition] = set()
        self._verify_backoff = Backoff(clock)
        self._assigned: set[TopicPartition] = set()
        self._last_offset: dict[TopicPartition, int] = {}
        self._rewind: dict[TopicPartition, int] = {}  # revoked partitions: where to read from if they come back
        self._next_commit = 0.0
        self._next_tick = 0.0
        dlq.on_error(metrics.dead_letter_error)
        self.source = make_source(self._on_revoked, self._on_assigned)

    # ------------------------------------------------------------------ control

    def stop(self) -> None:
        """Ask :meth:`run` to return after the current iteration (then it drains). Thread- and signal-safe."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def paused(self) -> bool:
        """True while every assigned partition is paused for backpressure (store, scoring, backlog, dead letters)."""
        return bool(self._pause_reasons)

    @property
    def held(self) -> int:
        """Closed traces on their way to the store (scored or not)."""
        return self.inflight.traces

    @property
    def assembler(self) -> Assembler:
        return self.assemble.assembler

    def run(self, drain_deadline_s: float | None = None) -> None:
        """Loop until :meth:`stop`, then :meth:`drain` within ``drain_deadline_s`` (default: the setting).

        Raises :class:`~monitor.ingest.dlq.DeadLetterRateExceeded` after draining when the dead-letter limit
        tripped. Other exceptions (bugs) propagate without a drain: nothing past the last commit is lost.
        """
        deadline_s = self.settings.shutdown.drain_deadline_s if drain_deadline_s is None else drain_deadline_s
        self.health.set_alive(True)
        self._next_commit = self.clock() + self.settings.kafka.commit_interval_s
        try:
            while not self._stop.is_set():
                self.step()
        except DeadLetterRateExceeded as exc:
            log.error("%s", exc)
            self.drain(self.clock() + deadline_s)
            raise
        self.drain(self.clock() + deadline_s)

    def step(self) -> None:
        """One iteration: poll, hand records to the steps, let them work (bounded), pause policy, timers."""
        busy = self.inflight.traces > 0 and not self._pause_reasons
        records = self.source.poll(0 if busy or self._pending else POLL_TIMEOUT_MS)
        if records:
            self._pending.extend(records)
        if self._pending:
            self._submit_pending()
        now = self.clock()
        if self._unverified and self._verify_backoff.due():
            self._verify()
        self.head.poll()
        self._update_pause()
        now = self.clock()
        if now >= self._next_tick:
            self._tick(now)
        if now >= self._next_commit:
            self._next_commit = now + self.settings.kafka.commit_interval_s
            self.commit()

    # ------------------------------------------------------------------ records in

    def _submit_pending(self) -> None:
        """Offer the polled records to the first step in order; stop at the first it rejects (kept for later)."""
        pending = self._pending
        per_tp: Counter[TopicPartition] = Counter()
        last = self._last_offset
        n = 0
        try:
            while pending:
                rec = pending[0]
                tp = (rec.topic, rec.partition)
                offset = rec.offset
                prev = last.get(tp)
                if prev is not None and offset <= prev:
                    self._offset_reset(tp, prev, offset)
                if tp in self._unverified and not self._verify_now(tp):
                    raise MessageRejected("store")
                self.head.submit(Message(rec))
                pending.popleft()
                last[tp] = offset
                per_tp[tp] += 1
                n += 1
            self._rejected_reason = ""
        except MessageRejected as exc:
            self._rejected_reason = exc.reason
        finally:
            for (topic, partition), k in per_tp.items():
                self.metrics.records_consumed(topic, partition, k)
            self.stats.records += n

    def _offset_reset(self, tp: TopicPartition, prev: int, offset: int) -> None:
        """The partition went backwards (log truncated, broker lost its data, seek): restart its bookkeeping."""
        log.warning("offset of %s/%d went back from %d to %d: dropping its open traces", tp[0], tp[1], prev, offset)
        self.stats.offset_resets += 1
        self.assemble.reset(tp)
        self.committer.reset(tp)

    # ------------------------------------------------------------------ replay marks

    def _verify_now(self, tp: TopicPartition) -> bool:
        """Load the replay marks of ``tp``; on failure the partition stays unverified (and paused)."""
        try:
            n = self.guard.load(tp)
        except StoreUnavailable as exc:
            self.availability.observe(False)
            log.warning("cannot load the replay marks of %s/%d (%s): partition paused", tp[0], tp[1], exc)
            return False
        self.availability.observe(True)
        self._unverified.discard(tp)
        self._verify_backoff.succeeded()
        if n:
            log.info("%s/%d: %d replay marks above the committed offset", tp[0], tp[1], n)
        return True

    def _verify(self) -> None:
        for tp in sorted(self._unverified):
            if not self._verify_now(tp):
                self._verify_backoff.failed()
                break

    # ------------------------------------------------------------------ pausing

    def _update_pause(self) -> None:
        """Pause every partition while a step reports pressure or rejected records wait; resume when neither."""
        want = set(self.head.pressure())
        if self._pending and self._rejected_reason:
            want.add(self._rejected_reason)
        for reason in sorted(want - self._pause_reasons):
            log.warning("pausing consumption (%s); %d closed traces on their way", reason, self.inflight.traces)
            self._pause_reasons.add(reason)
            self.stats.pauses += 1
            self.metrics.paused(True, reason)
        for reason in sorted(self._pause_reasons - want):
            log.info("resuming consumption (%s cleared)", reason)
            self._pause_reasons.discard(reason)
            self.metrics.paused(False, reason)
        self._apply_pause()

    def _apply_pause(self) -> None:
        """Pause exactly the partitions that must not fetch: all when a reason holds (or stopping), else the
        partitions whose replay marks are not loaded yet."""
        everything = bool(self._pause_reasons) or self._stop.is_set()
        want = set(self._assigned) if everything else self._unverified & self._assigned
        if want - self._paused_tps:
            self.source.pause(want - self._paused_tps)
        if self._paused_tps - want:
            self.source.resume(self._paused_tps - want)
        self._paused_tps = want

    # ------------------------------------------------------------------ offsets

    def committable(self) -> dict[TopicPartition, int]:
        """Per assigned partition, the offset that is safe to commit now."""
        return self.committer.committable(self._assigned)

    def commit(self) -> bool:
        """Commit what the last step holds (see :meth:`monitor.steps.commit.CommitStep.commit`)."""
        return self.committer.commit(self.source, self._assigned)

    # ------------------------------------------------------------------ rebalance

    def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        lost = set(partitions)
        self.head.join(min(REVOKE_BUDGET_S, self.settings.kafka.session_timeout_ms / 3000))
        self.committer.flush_dead_letters(1.0)
        self.committer.commit(self.source, self._assigned, only=lost)
        watermark = self.committer.committable(self._assigned)
        for tp in lost:  # records above the watermark are dropped below: re-read them if the partition comes back
            last = self._last_offset.get(tp)
            if tp in watermark and last is not None and watermark[tp] <= last:
                self._rewind[tp] = watermark[tp]
        open_before = self.assembler.stats.dropped_traces
        self.stats.dropped_held += self.head.forget(lost)
        dropped = self.assembler.stats.dropped_traces - open_before
        self._pending = deque(r for r in self._pending if (r.topic, r.partition) not in lost)
        self.dlq.forget(lost)
        self.guard.forget(lost)
        for tp in lost:
            self._last_offset.pop(tp, None)
            self.metrics.forget_partition(*tp)
        self._unverified -= lost
        self._paused_tps -= lost
        self._assigned -= lost
        self.health.set_assigned(len(self._assigned))
        if lost:
            log.info("revoked %d partitions; %d open traces left to the new owner", len(lost), dropped)

    def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        self._assigned = self.source.assignment() | set(partitions)
        # a partition revoked and assigned back keeps its client-side position and paused flag: rewind it
        # to the low watermark (the open traces dropped on revocation are read again) and clear the flag
        self.source.resume(partitions)
        for tp in partitions:
            if tp in self._rewind:
                self.source.seek(tp, self._rewind[tp])
            self.committer.reset(tp)
            self._last_offset.pop(tp, None)
            if not self.guard.loaded(tp):
                self._unverified.add(tp)
        self._rewind.clear()
        for tp in sorted(self._unverified):
            if not self._verify_now(tp):
                break
        self._apply_pause()
        self.health.set_assigned(len(self._assigned))
        log.info("assigned %d partitions (%d in total)", len(partitions), len(self._assigned))

    # ------------------------------------------------------------------ periodic

    def _tick(self, now: float) -> None:
        self._next_tick = now + TICK_S
        self.assemble.gauges(now)
        lag = self.source.lag()
        for (topic, partition), n in lag.items():
            self.metrics.set_lag(topic, partition, n)
        self.health.set_lag(sum(lag.values()))
        self.health.set_assigned(len(self._assigned))
        self.availability.observe(self.availability.available)

    def flush_stats(self) -> None:
        """Report pending gauges and counters now (the loop does it every ``TICK_S``)."""
        self._tick(self.clock())

    # ------------------------------------------------------------------ shutdown

    def drain(self, deadline: float) -> None:
        """Stop fetching, let the steps finish what closed and flush dead letters (until ``deadline`` on the loop
        clock), commit. Open traces stay open.

        Keeps polling the paused consumer while it waits for a saturated step, so the member stays in the group
        until it leaves on close.
        """
        self._stop.set()
        self._apply_pause()
        while True:
            self.head.join(max(0.0, deadline - self.clock()))
            if not self.inflight.traces or self.clock() >= deadline:
                break
            self.source.poll(int(min(POLL_TIMEOUT_MS / 1000, max(0.0, deadline - self.clock())) * 1000))
        if self.inflight.traces:
            log.warning(
                "shutdown deadline passed with %d closed traces not stored: they are re-read", self.inflight.traces
            )
        if self.dlq.pending:
            self.committer.flush_dead_letters(max(0.5, deadline - self.clock()))
            if self.dlq.pending:
                log.warning("%d dead letters not acknowledged: their records are re-read", self.dlq.pending)
        self.commit()
        self._tick(self.clock())
        self.health.set_alive(False)
