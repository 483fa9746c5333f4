"""The run loop: poll → decode → assemble → build runs → score → store → metrics → commit.

One thread runs the whole pipeline; the only blocking calls in the hot path are the broker poll
(``POLL_TIMEOUT_MS`` at most, less when held work is due for a retry) and store transactions (bounded by
``store.statement_timeout_s``). Offsets ride with the data: a closed trace carries the first offset of its
records on each partition, and the committed offset of a partition is the assembler's low watermark lowered
to the first offset of every closed trace not yet stored and of every dead letter not yet acknowledged
(:meth:`RunLoop.committable`). The commit is the last step, on a timer (``kafka.commit_interval_s``), on
revocation and on shutdown.

**Bounded work.** One iteration closes at most ``CLOSE_BATCH`` traces and spends at most ``WORK_BUDGET_S``
storing held ones before it polls again, so a burst of traces closing at once (300k rootless traces hitting
their idle timeout together) never stops the loop: gauges stay fresh, the member stays in its group and a
stop request is seen within a second. While more than ``MAX_HELD`` closed traces (or
``assembler.max_open_bytes`` of them) wait, or more than ``MAX_DEAD_LETTERS_PENDING`` dead letters are
unacknowledged, the partitions pause (reasons ``backlog`` and ``dead_letter``) so the backlog cannot grow
without bound.

**Backpressure.** :class:`~monitor.scoring.stage.Backpressure` from the scoring stage or
:class:`~monitor.store.StoreUnavailable` from the store stops processing at that trace: it and every
trace after it stay *held* (nothing is dropped), every assigned partition is paused, and the loop
keeps polling (so the member stays in the group and rebalances run) and retries the held traces
with a capped exponential backoff (0.1 s → 5 s) measured on the clock, never by sleeping. When the
held list is empty the partitions resume. Partitions assigned while paused are paused at once.

**Replays** (:mod:`monitor.ingest.replay`). A partition's replay marks are loaded from the store when it
is assigned, before any of its records is processed (it stays paused until they are). A closed trace
already handled by an earlier reading is skipped whole; a bad record already dead-lettered is not sent
again. So a trace stored before a restart, a ``kill -9`` or a rebalance is never stored or counted again,
under its own identity (the idempotent store) or another one (a re-read of its tail).

**Records that cannot be stored.** A batch the store rejects with anything but ``StoreUnavailable`` is
bisected; the trace that still fails alone is dead-lettered (reason ``unstorable``, its spans as JSON) and
counted in ``monitor_traces_rejected_total{reason="unstorable"}``. A trace the rebuild refuses (deeper than
``rebuild.max_depth``/``max_agent_depth``) or fails on is counted there too (``too_deep``,
``rebuild_failed``) with one log line. Either way the offsets move on.

**Dead letters** (:mod:`monitor.ingest.dlq`) never stop the loop: a failed send is retried with a backoff
and the commit stays below it until the broker acknowledged it.

Revocation (inside ``poll()``, kafka-python's rebalance listener): traces already closed are
scored, stored and committed (within ``REVOKE_BUDGET_S``; a held trace not stored by then is dropped and
its offsets are not committed, so the new owner re-reads it); open traces with records on a revoked
partition are dropped, the new owner re-reads them from the committed low watermark.

Shutdown (:meth:`RunLoop.drain`): fetching stops (partitions paused), traces that already closed
are scored and stored until the deadline, dead letters are flushed, the low watermark is committed. Open
traces are **not** force-closed: scoring an incomplete run would record wrong verdicts; their records are
re-read after the restart because the committed offset stays at or below their first record.

Delivery is at least once: after a crash the records since the last commit are read again. The store is
idempotent, replay marks skip what was handled, and quality metrics count only the results the store
accepted as new (``write() → True``), so nothing is stored or counted twice. Pipeline counters (records,
spans, traces closed) count what this process did, replays included.

A dead-letter rate above ``dead_letter.max_rate`` raises
:class:`~monitor.ingest.dlq.DeadLetterRateExceeded` out of :meth:`RunLoop.run` (after the same
drain as a shutdown) so the daemon exits non-zero.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from monitor.ingest.consumer import CommitError, PartitionsCallback, Record, Source
from monitor.ingest.decode import DecodeError, decode_logs_batch, decode_traces_batch
from monitor.ingest.dlq import (
    HEADER_TRACE_ID,
    DeadLetter,
    DeadLetterLimit,
    DeadLetterQueue,
    DeadLetterRateExceeded,
    make_dead_letter,
)
from monitor.ingest.replay import MarkStore, ReplayGuard, dead_letter_ident, trace_marks
from monitor.sampling.sampler import Sampler
from monitor.scoring.result import ScoreResult
from monitor.scoring.stage import Backpressure
from monitor.settings import Settings
from monitor.store import ReplayMark, StoredResult, StoreUnavailable
from monitor.trajectory.assembler import Assembler, AssemblerLimits, ClosedTrace, TopicPartition
from monitor.trajectory.build import RebuildRejected, build_runs
from monitor.trajectory.model import Run

log = logging.getLogger(__name__)

POLL_TIMEOUT_MS: Final = 100
"""Longest a poll blocks; bounds how late a trace closes and how fast a stop request is seen."""
TICK_S: Final = 1.0
"""How often gauges (open traces, lag) and health are refreshed."""
WRITE_BATCH: Final = 200
"""Closed traces written per store transaction (one ``write()`` call)."""
CLOSE_BATCH: Final = 2000
"""Traces the assembler closes per iteration at most."""
WORK_BUDGET_S: Final = 0.25
"""Time one iteration spends scoring and storing held traces before it polls again."""
MAX_HELD: Final = 5000
"""Closed traces waiting for the store above which the partitions pause (``backlog``)."""
MAX_DEAD_LETTERS_PENDING: Final = 1000
"""Unacknowledged dead letters above which the partitions pause (``dead_letter``)."""
MAX_DEAD_LETTER_BYTES_PENDING: Final = 64 * 1024 * 1024
REVOKE_BUDGET_S: Final = 5.0
"""Longest a revocation spends storing closed traces before it gives them to the new owner."""
MARK_PRUNE_INTERVAL_S: Final = 30.0
RETRY_MIN_S: Final = 0.1
RETRY_MAX_S: Final = 5.0
UNSTORABLE: Final = "unstorable"


class Scoring(Protocol):
    def score(self, run: Run) -> list[ScoreResult]: ...


class Store(MarkStore, Protocol):
    def write(self, results: Sequence[StoredResult], marks: Sequence[ReplayMark] = ()) -> list[bool]: ...
    def purge_older_than(self, cutoff: datetime) -> int: ...


class PipelineMetrics(Protocol):
    def records_consumed(self, topic: str, partition: int, n: int = 1) -> None: ...
    def spans_decoded(self, n: int) -> None: ...
    def record_invalid(self, reason: str) -> None: ...
    def record_dead_lettered(self, reason: str) -> None: ...
    def dead_letter_error(self, error: str) -> None: ...
    def set_dead_letters_pending(self, n: int) -> None: ...
    def traces_closed(self, outcome: str, n: int = 1) -> None: ...
    def traces_rejected(self, reason: str, n: int = 1) -> None: ...
    def replays_skipped(self, kind: str, n: int = 1) -> None: ...
    def late_spans(self, n: int) -> None: ...
    def split_traces(self, n: int) -> None: ...
    def commit_done(self, topic: str, partition: int, when_s: float) -> None: ...
    def set_lag(self, topic: str, partition: int, lag: int) -> None: ...
    def paused(self, on: bool, reason: str) -> None: ...
    def store_write(self, outcome: str, n: int = 1) -> None: ...
    def set_store_available(self, available: bool) -> None: ...
    def runs_sampled(self, decision: str, n: int = 1) -> None: ...
    def forget_partition(self, topic: str, partition: int) -> None: ...
    def observe_results(self, run: Run, results: Sequence[ScoreResult]) -> None: ...
    def set_open_traces(self, n: int, spans: int, oldest_age_s: float, nbytes: int = 0) -> None: ...


class ResultSink(Protocol):
    """Where new results go besides the store and the metrics (the OTLP evaluation-event exporter).

    ``emit`` receives exactly the results the store accepted as new (so a replay never sends twice) and must
    neither block nor raise; ``shutdown`` is bounded by its timeout."""

    def emit(self, results: Sequence[ScoreResult]) -> None: ...
    def shutdown(self, timeout_s: float) -> None: ...


class Health(Protocol):
    def set_alive(self, on: bool) -> None: ...
    def set_assigned(self, partitions: int) -> None: ...
    def set_lag(self, total: int) -> None: ...
    def set_store_available(self, available: bool, now: float | None = None) -> None: ...


@dataclass(slots=True)
class LoopStats:
    """What this loop did (for tests, benchmarks and the exit log line); counters only grow."""

    records: int = 0
    spans: int = 0
    dead_letters: Counter[str] = field(default_factory=Counter)
    traces_scored: int = 0
    runs: int = 0
    results_new: int = 0
    results_duplicate: int = 0
    commits: int = 0
    commit_failures: int = 0
    pauses: int = 0
    dropped_held: int = 0
    offset_resets: int = 0
    replayed_traces: int = 0
    replayed_dead_letters: int = 0
    rejected: Counter[str] = field(default_factory=Counter)


@dataclass(slots=True)
class _Held:
    closed: ClosedTrace
    runs: list[Run] | None = None
    rejected: str | None = None  # too_deep | rebuild_failed


@dataclass(slots=True)
class _Scored:
    held: _Held
    runs: list[Run]
    rows: list[StoredResult] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)  # index in ``runs`` of the top-level run of each row
    marks: list[ReplayMark] = field(default_factory=list)
    sampled: int = 0
    replayed: bool = False


class RunLoop:
    """The daemon's pipeline on one thread; see the module docstring for the contract.

    ``sampler`` (the stage's) only feeds ``runs_sampled``; without it a run counts as sampled when
    it produced results. ``make_source(on_revoked, on_assigned)`` builds the broker source with this loop's
    rebalance callbacks (``KafkaSource`` in the daemon). ``clock`` is monotonic seconds (assembler timing and
    timers), ``wall`` is epoch seconds (commit timestamps, retention). Not thread-safe except
    :meth:`stop`, which any thread (or a signal handler) may call.
    """

    def __init__(
        self,
        settings: Settings,
        make_source: Callable[[PartitionsCallback, PartitionsCallback], Source],
        dlq: DeadLetterQueue,
        stage: Scoring,
        store: Store,
        metrics: PipelineMetrics,
        health: Health,
        *,
        sampler: Sampler | None = None,
        sinks: Sequence[ResultSink] = (),
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.sinks = tuple(sinks)
        a = settings.assembler
        self.assembler = Assembler(
            AssemblerLimits(
                root_idle_s=a.root_idle_s,
                idle_s=a.idle_s,
                max_age_s=a.max_age_s,
                max_spans=a.max_spans,
                max_open_spans=a.max_open_spans,
                max_open_bytes=a.max_open_bytes,
                late_window_s=a.late_window_s,
            )
        )
        self.dlq = dlq
        dlq.on_error(metrics.dead_letter_error)
        self.stage = stage
        self.sampler = sampler
        self.store = store
        self.metrics = metrics
        self.health = health
        self.clock = clock
        self.wall = wall
        self.stats = LoopStats()
        self.limit = DeadLetterLimit(settings.dead_letter.max_rate, settings.dead_letter.window)
        self.guard = ReplayGuard(store)
        self._spans_topic = settings.kafka.spans_topic
        self._encoding = settings.kafka.encoding
        self._max_record_bytes = settings.decode.max_record_bytes
        self._max_attribute_chars = settings.decode.max_attribute_chars
        self._max_depth = settings.rebuild.max_depth
        self._max_agent_depth = settings.rebuild.max_agent_depth
        self._stop = threading.Event()
        self._held: deque[_Held] = deque()
        self._held_bytes = 0  # encoded bytes of the held traces (the backlog bound)
        self._pause_reasons: set[str] = set()
        self._paused_tps: set[TopicPartition] = set()
        self._unverified: set[TopicPartition] = set()
        self._retry_at = 0.0
        self._backoff = RETRY_MIN_S
        self._verify_at = 0.0
        self._assigned: set[TopicPartition] = set()
        self._last_offset: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._pruned: dict[TopicPartition, int] = {}
        self._rewind: dict[TopicPartition, int] = {}  # revoked partitions: where to read from if they come back
        self._unmarked: list[DeadLetter] = []  # acknowledged dead letters whose marks are not stored yet
        self._next_commit = 0.0
        self._next_tick = 0.0
        self._next_retention = 0.0
        self._next_prune = 0.0
        self._store_available = True
        self._reported_stats: dict[str, int] = {}
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
        """Closed traces waiting to be stored (scored or not)."""
        return len(self._held)

    def run(self, drain_deadline_s: float | None = None) -> None:
        """Loop until :meth:`stop`, then :meth:`drain` within ``drain_deadline_s`` (default: the setting).

        Raises :class:`~monitor.ingest.dlq.DeadLetterRateExceeded` after draining when the dead-letter
        limit tripped. Other exceptions (bugs) propagate without a drain: nothing past the last commit is
        lost, it is re-read after the restart.
        """
        deadline_s = self.settings.shutdown.drain_deadline_s if drain_deadline_s is None else drain_deadline_s
        self.health.set_alive(True)
        now = self.clock()
        self._next_commit = now + self.settings.kafka.commit_interval_s
        self._next_retention = now  # sweep once at start, then every retention_interval_s
        self._next_prune = now + MARK_PRUNE_INTERVAL_S
        try:
            while not self._stop.is_set():
                self.step()
        except DeadLetterRateExceeded as exc:
            log.error("%s", exc)
            self.drain(self.clock() + deadline_s)
            raise
        self.drain(self.clock() + deadline_s)

    def step(self) -> None:
        """One iteration: poll, ingest, close, process held work (bounded), periodic duties."""
        now = self.clock()
        timeout = POLL_TIMEOUT_MS
        if self._held and not self.paused:
            timeout = 0
        elif self._held:
            timeout = max(0, min(POLL_TIMEOUT_MS, int((self._retry_at - now) * 1000)))
        records = self.source.poll(timeout)
        now = self.clock()
        if records:
            self._ingest(records, now)
        self._collect_dead_letters()
        closed = self.assembler.poll(now, CLOSE_BATCH)
        if closed:
            self._hold(closed)
        if records or closed:
            self._report_counters()
        if self._unverified and now >= self._verify_at:
            self._verify(now)
        if self._held and now >= self._retry_at:
            self._process_held(now, now + WORK_BUDGET_S)
        self._update_pause()
        if now >= self._next_tick:
            self._tick(now)
        if now >= self._next_commit:
            self._next_commit = now + self.settings.kafka.commit_interval_s
            self.commit()
        if now >= self._next_retention:
            self._next_retention = now + self.settings.store.retention_interval_s
            self._retention()

    def _hold(self, closed: Sequence[ClosedTrace]) -> None:
        """Queue closed traces for scoring and storing, in order."""
        self._held.extend(_Held(c) for c in closed)
        self._held_bytes += sum(c.nbytes for c in closed)

    # ------------------------------------------------------------------ ingest

    def _ingest(self, records: Sequence[Record], now: float) -> None:
        per_tp: Counter[TopicPartition] = Counter()
        spans = 0
        good = 0
        asm = self.assembler
        last = self._last_offset
        for rec in records:
            tp = (rec.topic, rec.partition)
            offset = rec.offset
            prev = last.get(tp)
            if prev is not None and offset <= prev:
                self._offset_reset(tp, prev, offset)
            if tp in self._unverified:
                self._verify_now(tp)
            last[tp] = offset
            per_tp[tp] += 1
            value = rec.value or b""
            try:
                if rec.topic == self._spans_topic:
                    traces = decode_traces_batch(
                        value,
                        self._encoding,
                        max_record_bytes=self._max_record_bytes,
                        max_attribute_chars=self._max_attribute_chars,
                    )
                    decoded = traces.spans
                    kept, replayed = self.guard.drop_handled(tp, decoded)
                    if replayed:
                        self._count_replays(replayed)
                    asm.add_spans(kept, tp, offset, now, len(value))
                    spans += len(decoded)
                else:
                    logs = decode_logs_batch(
                        value,
                        self._encoding,
                        max_record_bytes=self._max_record_bytes,
                        max_attribute_chars=self._max_attribute_chars,
                    )
                    events, replayed = self.guard.drop_handled(tp, logs.events)
                    if replayed:
                        self._count_replays(replayed)
                    asm.add_logs(events, tp, offset, now, len(value))
                good += 1
            except DecodeError as exc:
                if good:
                    self.limit.good(good)
                    good = 0
                self._dead_letter(rec, exc)
        if good:
            self.limit.good(good)
        for (topic, partition), n in per_tp.items():
            self.metrics.records_consumed(topic, partition, n)
        self.stats.records += len(records)
        if spans:
            self.stats.spans += spans
            self.metrics.spans_decoded(spans)

    def _count_replays(self, n: int) -> None:
        self.stats.replayed_traces += n
        self.metrics.replays_skipped("trace", n)

    def _dead_letter(self, rec: Record, exc: DecodeError) -> None:
        tp = (rec.topic, rec.partition)
        ident = dead_letter_ident(rec.offset, rec.key, rec.value)
        if self.guard.dead_lettered(tp, ident):  # sent and acknowledged by an earlier reading
            self.stats.replayed_dead_letters += 1
            self.metrics.replays_skipped("dead_letter")
            self.assembler.mark_consumed(tp, rec.offset)
            return
        self.limit.check_bad(exc.reason)  # raises DeadLetterRateExceeded: stop before sending this one
        self.metrics.record_invalid(exc.reason)
        self.stats.dead_letters[exc.reason] += 1
        self.dlq.send(
            make_dead_letter(
                topic=rec.topic,
                partition=rec.partition,
                offset=rec.offset,
                key=rec.key,
                value=rec.value,
                headers=rec.headers,
                reason=exc.reason,
                detail=exc.detail,
                marks=[ReplayMark(rec.topic, rec.partition, "dead_letter", ident, rec.offset)],
            )
        )
        self.assembler.mark_consumed(tp, rec.offset)

    def _collect_dead_letters(self) -> None:
        if not self.dlq.pending:
            return
        for letter in self.dlq.poll():
            self.metrics.record_dead_lettered(letter.reason)
            if letter.marks:
                self._unmarked.append(letter)

    def _offset_reset(self, tp: TopicPartition, prev: int, offset: int) -> None:
        """The partition went backwards (log truncated, broker lost its data, seek): restart its bookkeeping."""
        log.warning("offset of %s/%d went back from %d to %d: dropping its open traces", tp[0], tp[1], prev, offset)
        self.stats.offset_resets += 1
        self.assembler.revoke([tp])
        self._committed.pop(tp, None)

    # ------------------------------------------------------------------ replay marks

    def _verify_now(self, tp: TopicPartition) -> bool:
        """Load the replay marks of ``tp``; on failure the partition stays unverified (and paused)."""
        try:
            n = self.guard.load(tp)
        except StoreUnavailable as exc:
            self._set_store_available(False)
            log.warning("cannot load the replay marks of %s/%d (%s): partition paused", tp[0], tp[1], exc)
            return False
        self._set_store_available(True)
        self._unverified.discard(tp)
        if n:
            log.info("%s/%d: %d replay marks above the committed offset", tp[0], tp[1], n)
        return True

    def _verify(self, now: float) -> None:
        for tp in sorted(self._unverified):
            if not self._verify_now(tp):
                self._verify_at = now + self._backoff
                break

    # ------------------------------------------------------------------ held work

    def _process_held(self, now: float, deadline: float) -> bool:
        """Score and store held traces in order, ``WRITE_BATCH`` traces per store transaction, until none is
        left (returns True) or ``deadline`` passes on the loop clock.

        On ``Backpressure`` the traces scored before it are still written; on ``StoreUnavailable`` the traces
        of the batch not written yet stay held.
        """
        while self._held:
            batch: list[_Scored] = []
            pressure: Backpressure | None = None
            for held in itertools.islice(self._held, WRITE_BATCH):
                try:
                    batch.append(self._score(held))
                except Backpressure as exc:
                    pressure = exc
                    break
            if batch:
                done: list[tuple[_Scored, list[bool]]] = []
                try:
                    self._write(batch, done)
                except StoreUnavailable as exc:
                    self._finish(done)
                    self._pause(now, "store", exc)
                    return False
                self._finish(done)
            if pressure is not None:
                self._pause(now, "scoring", pressure)
                return False
            if self._held and self.clock() >= deadline:
                return False
        self._resume()
        return True

    def _score(self, held: _Held) -> _Scored:
        """Build the runs of a closed trace (once) and score them; raises only ``Backpressure``."""
        closed = held.closed
        if self.guard.handled_trace(closed):
            return _Scored(held, [], replayed=True)
        if held.runs is None:
            try:
                held.runs = build_runs(
                    closed.spans,
                    closed.logs,
                    forced=closed.reason if closed.forced else None,
                    max_depth=self._max_depth,
                    max_agent_depth=self._max_agent_depth,
                )
            except RebuildRejected as exc:
                log.warning("trace %s not rebuilt (%s): %s", closed.trace_id, exc.reason, exc)
                held.rejected = exc.reason
                held.runs = []
            except Exception as exc:  # a bug in the rebuild must not stop the daemon: count it, move on
                log.error("could not rebuild trace %s: %s: %s", closed.trace_id, type(exc).__name__, str(exc)[:200])
                log.debug("rebuild failure of trace %s", closed.trace_id, exc_info=True)
                held.rejected = "rebuild_failed"
                held.runs = []
        scored = _Scored(held, held.runs, marks=trace_marks(closed))
        for i, run in enumerate(held.runs):
            by_id = {r.run_id: r for r in run.walk()}
            results = self.stage.score(run)
            if self.sampler is not None:
                scored.sampled += self.sampler.should_score(run).sampled  # deterministic: the stage's decision
            elif results:
                scored.sampled += 1
            for result in results:
                owner = by_id.get(result.run_id or "", run)
                scored.rows.append(
                    StoredResult(result=result, run_start_ns=owner.start_ns, tools=tuple(c.name for c in owner.calls))
                )
                scored.owners.append(i)
        return scored

    def _write(self, batch: list[_Scored], done: list[tuple[_Scored, list[bool]]]) -> None:
        """Store ``batch`` in one transaction, appending (scored, new-flags) to ``done`` in order.

        A batch the store rejects (anything but ``StoreUnavailable``) is bisected until the trace that fails
        alone is found; that one is dead-lettered instead (:meth:`_unstorable`). ``StoreUnavailable``
        propagates; ``done`` then holds what was written before it.
        """
        rows = [row for scored in batch for row in scored.rows]
        marks = [mark for scored in batch for mark in scored.marks]
        if not rows and not marks:
            done.extend((scored, []) for scored in batch)
            return
        try:
            flags = self.store.write(rows, marks)
        except StoreUnavailable:
            self._set_store_available(False)
            raise
        except Exception as exc:
            self._set_store_available(True)
            if len(batch) == 1:
                self._unstorable(batch[0], exc)
                done.append((batch[0], []))
                return
            half = len(batch) // 2
            self._write(batch[:half], done)
            self._write(batch[half:], done)
            return
        self._set_store_available(True)
        it = iter(flags)
        for scored in batch:
            done.append((scored, [next(it) for _ in scored.rows]))

    def _unstorable(self, scored: _Scored, exc: BaseException) -> None:
        """A trace the store rejects on its own: dead-letter its spans (as JSON) with the reason, count it."""
        closed = scored.held.closed
        detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]
        log.error("trace %s cannot be stored (%s): dead-lettered", closed.trace_id, detail)
        (topic, partition), first = min(closed.first_offsets.items(), key=lambda kv: (kv[0], kv[1]))
        self.dlq.send(
            make_dead_letter(
                topic=topic,
                partition=partition,
                offset=first,
                key=closed.trace_id.encode(),
                value=_spans_json(closed),
                headers=(),
                reason=UNSTORABLE,
                detail=detail,
                marks=trace_marks(closed, always=True),
                holds=[(t, p, off) for (t, p), off in closed.first_offsets.items()],
                extra_headers=[(HEADER_TRACE_ID, closed.trace_id.encode())],
            )
        )
        self.stats.dead_letters[UNSTORABLE] += 1
        scored.rows.clear()
        scored.owners.clear()
        scored.runs = []
        scored.sampled = 0
        scored.held.rejected = UNSTORABLE

    def _finish(self, done: list[tuple[_Scored, list[bool]]]) -> None:
        """The store took these (a prefix of the held traces): pop them, count them, remember their marks."""
        n_new = n_rows = sampled = runs = 0
        emitted: list[ScoreResult] = []
        for scored, flags in done:
            self._held_bytes -= self._held.popleft().closed.nbytes
            if scored.replayed:
                self._count_replays(1)
                continue
            rejected = scored.held.rejected
            if rejected is not None:
                self.stats.rejected[rejected] += 1
                self.metrics.traces_rejected(rejected)
            self.guard.add(scored.marks)
            new_by_run: dict[int, list[ScoreResult]] = {}
            for row, owner_i, new in zip(scored.rows, scored.owners, flags, strict=True):
                if new:
                    n_new += 1
                    new_by_run.setdefault(owner_i, []).append(row.result)
            for owner_i, results in new_by_run.items():
                self.metrics.observe_results(scored.runs[owner_i], results)
                if self.sinks:
                    emitted.extend(results)
            n_rows += len(scored.rows)
            sampled += scored.sampled
            runs += len(scored.runs)
            self.stats.traces_scored += 1
        if emitted:
            for sink in self.sinks:
                sink.emit(emitted)
        if n_new:
            self.metrics.store_write("new", n_new)
        if n_rows - n_new:
            self.metrics.store_write("duplicate", n_rows - n_new)
        if sampled:
            self.metrics.runs_sampled("sampled", sampled)
        if runs - sampled:
            self.metrics.runs_sampled("skipped", runs - sampled)
        self.stats.runs += runs
        self.stats.results_new += n_new
        self.stats.results_duplicate += n_rows - n_new

    def _set_store_available(self, available: bool) -> None:
        if available != self._store_available:
            self._store_available = available
            self.metrics.set_store_available(available)
        self.health.set_store_available(available, self.clock())

    # ------------------------------------------------------------------ pausing

    def _pause(self, now: float, reason: str, exc: BaseException) -> None:
        self._retry_at = now + self._backoff
        self._backoff = min(self._backoff * 2, RETRY_MAX_S)
        if reason == "store":
            self.metrics.store_write("error")
        if reason not in self._pause_reasons:
            log.warning("pausing consumption (%s): %s; %d closed traces held", reason, exc, len(self._held))
            self._set_reason(reason, True)

    def _resume(self) -> None:
        self._backoff = RETRY_MIN_S
        self._retry_at = 0.0
        for reason in ("store", "scoring"):
            if reason in self._pause_reasons:
                log.info("resuming consumption (%s cleared)", reason)
                self._set_reason(reason, False)

    def _set_reason(self, reason: str, on: bool) -> None:
        if on and reason not in self._pause_reasons:
            self._pause_reasons.add(reason)
            self.stats.pauses += 1
            self.metrics.paused(True, reason)
        elif not on and reason in self._pause_reasons:
            self._pause_reasons.discard(reason)
            self.metrics.paused(False, reason)
        self._apply_pause()

    def _update_pause(self) -> None:
        """Backlog bounds: pause while too many closed traces or dead letters wait, resume at half."""
        held = len(self._held)
        held_bytes = self._held_bytes
        max_bytes = self.settings.assembler.max_open_bytes
        if held > MAX_HELD or held_bytes > max_bytes:
            self._set_reason("backlog", True)
        elif held <= MAX_HELD // 2 and held_bytes <= max_bytes // 2 and "backlog" in self._pause_reasons:
            self._set_reason("backlog", False)
        pending = self.dlq.pending
        pending_bytes = self.dlq.pending_bytes if pending else 0
        self.metrics.set_dead_letters_pending(pending)
        if pending > MAX_DEAD_LETTERS_PENDING or pending_bytes > MAX_DEAD_LETTER_BYTES_PENDING:
            self._set_reason("dead_letter", True)
        elif pending <= MAX_DEAD_LETTERS_PENDING // 2 and pending_bytes <= MAX_DEAD_LETTER_BYTES_PENDING // 2:
            self._set_reason("dead_letter", False)

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
        """Per assigned partition, the offset safe to commit: the low watermark below every held trace and
        every unacknowledged dead letter."""
        offsets = self.assembler.committable()
        for held in self._held:
            for tp, first in held.closed.first_offsets.items():
                if tp in offsets and first < offsets[tp]:
                    offsets[tp] = first
        for tp, first in self.dlq.unacknowledged().items():
            if tp in offsets and first < offsets[tp]:
                offsets[tp] = first
        return {tp: off for tp, off in offsets.items() if tp in self._assigned}

    def commit(self, only: Iterable[TopicPartition] | None = None) -> bool:
        """Store the marks of acknowledged dead letters that a re-read could see, then commit the changed low
        watermarks. Returns False if nothing could be committed. Failures are logged and counted; the same
        offsets go out with the next commit."""
        self._collect_dead_letters()
        offsets = self.committable()
        if only is not None:
            keep = set(only)
            offsets = {tp: o for tp, o in offsets.items() if tp in keep}
        self._store_dead_letter_marks(offsets)
        changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        if not changed:
            return True
        try:
            self.source.commit(changed)
        except CommitError as exc:
            log.warning("commit of %d partitions failed (retried later): %s", len(changed), exc)
            self.stats.commit_failures += 1
            return False
        when = self.wall()
        for tp, off in changed.items():
            self._committed[tp] = off
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
                self._set_store_available(False)
                log.warning("dead-letter marks not stored (%s): retried with the next commit", exc)
                return
            self._set_store_available(True)
            self.guard.add(needed)
        self._unmarked.clear()

    def _prune_marks(self) -> None:
        now = self.clock()
        if now < self._next_prune:
            return
        self._next_prune = now + MARK_PRUNE_INTERVAL_S
        for tp, off in self._committed.items():
            if self._pruned.get(tp) == off:
                continue
            try:
                self.store.forget_marks(tp[0], tp[1], off)
            except StoreUnavailable:
                return
            self._pruned[tp] = off

    # ------------------------------------------------------------------ rebalance

    def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        lost = set(partitions)
        now = self.clock()
        self._hold(self.assembler.poll(now))
        if self._held:  # one bounded attempt; what stays held on lost partitions is dropped below
            self._process_held(now, now + min(REVOKE_BUDGET_S, self.settings.kafka.session_timeout_ms / 3000))
        if self.dlq.pending:
            self.dlq.flush(1.0)
        self.commit(only=lost)
        watermark = self.committable()
        for tp in lost:  # records above the watermark are dropped below: re-read them if the partition comes back
            last = self._last_offset.get(tp)
            if tp in watermark and last is not None and watermark[tp] <= last:
                self._rewind[tp] = watermark[tp]
        kept: deque[_Held] = deque()
        for held in self._held:
            if lost.intersection(held.closed.first_offsets):
                self.stats.dropped_held += 1
            else:
                kept.append(held)
        self._held = kept
        self._held_bytes = sum(h.closed.nbytes for h in kept)
        dropped = self.assembler.revoke(lost)
        self.dlq.forget(lost)
        self.guard.forget(lost)
        for tp in lost:
            self._last_offset.pop(tp, None)
            self._committed.pop(tp, None)
            self._pruned.pop(tp, None)
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
            self._committed.pop(tp, None)
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
        asm = self.assembler
        self.metrics.set_open_traces(asm.open_traces, asm.open_spans, asm.oldest_open_age(now), asm.open_bytes)
        self._report_counters()
        lag = self.source.lag()
        for (topic, partition), n in lag.items():
            self.metrics.set_lag(topic, partition, n)
        self.health.set_lag(sum(lag.values()))
        self.health.set_assigned(len(self._assigned))
        self.health.set_store_available(self._store_available, now)

    def _report_counters(self) -> None:
        """Turn the assembler's monotonic counters into metric increments (deltas since the last report)."""
        stats = self.assembler.stats
        current = {f"closed:{k}": v for k, v in stats.closed.items()}
        current["late"] = stats.late_spans
        current["split"] = stats.split_traces
        for key, value in current.items():
            delta = value - self._reported_stats.get(key, 0)
            if delta <= 0:
                continue
            self._reported_stats[key] = value
            if key == "late":
                self.metrics.late_spans(delta)
            elif key == "split":
                self.metrics.split_traces(delta)
            else:
                self.metrics.traces_closed(key.split(":", 1)[1], delta)

    def flush_stats(self) -> None:
        """Report pending assembler counters now (the loop does it every ``TICK_S``)."""
        self._tick(self.clock())

    def _retention(self) -> None:
        cutoff = datetime.fromtimestamp(self.wall(), UTC) - timedelta(days=self.settings.store.retention_days)
        try:
            n = self.store.purge_older_than(cutoff)
        except StoreUnavailable as exc:
            self._set_store_available(False)
            log.warning("retention sweep skipped: %s", exc)
            return
        if n:
            log.info("retention: deleted %d results older than %s", n, cutoff.isoformat())

    # ------------------------------------------------------------------ shutdown

    def drain(self, deadline: float) -> None:
        """Stop fetching, store what is closed and flush dead letters (until ``deadline`` on the loop clock),
        commit. Open traces stay open.

        Keeps polling the paused consumer while it waits for a saturated stage or store, so the
        member stays in the group until it leaves on close.
        """
        self._stop.set()
        self._apply_pause()
        now = self.clock()
        self._hold(self.assembler.poll(now, CLOSE_BATCH))
        while self._held and self.clock() < deadline:
            now = self.clock()
            if now >= self._retry_at and self._process_held(now, deadline):
                break
            wait_ms = int(max(0.0, min(self._retry_at, deadline) - self.clock()) * 1000)
            self.source.poll(min(wait_ms, POLL_TIMEOUT_MS))
        if self._held:
            log.warning("shutdown deadline passed with %d closed traces not stored: they are re-read", len(self._held))
        if self.dlq.pending:
            for letter in self.dlq.flush(max(0.5, deadline - self.clock())):
                self.metrics.record_dead_lettered(letter.reason)
                if letter.marks:
                    self._unmarked.append(letter)
            if self.dlq.pending:
                log.warning("%d dead letters not acknowledged: their records are re-read", self.dlq.pending)
        self.commit()
        self._tick(self.clock())
        self.health.set_alive(False)


def _spans_json(closed: ClosedTrace) -> bytes:
    """The spans of a trace as one JSON document (ASCII: any lone surrogate is an escape, never invalid bytes)."""
    doc: dict[str, Any] = {
        "trace_id": closed.trace_id,
        "first_offsets": {f"{t}/{p}": off for (t, p), off in closed.first_offsets.items()},
        "spans": [
            {
                "span_id": s.span_id,
                "parent_span_id": s.parent_span_id,
                "name": s.name,
                "kind": s.kind,
                "start_ns": s.start_ns,
                "end_ns": s.end_ns,
                "status_code": s.status_code,
                "status_message": s.status_message,
                "attributes": s.attributes,
                "resource": s.resource,
                "scope": s.scope_name,
            }
            for s in closed.spans
        ],
    }
    return json.dumps(doc, ensure_ascii=True, default=repr, allow_nan=True).encode("ascii")
