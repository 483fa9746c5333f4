"""The run loop: poll → decode → assemble → build runs → score → store → metrics → commit.

One thread runs the whole pipeline; the only blocking call in the hot path is the broker poll
(``POLL_TIMEOUT_MS`` at most, less when held work is due for a retry). Offsets ride with the data: a
closed trace carries the first offset of its records on each partition, and the committed offset of
a partition is the assembler's low watermark lowered to the first offset of every closed trace not
yet stored (:meth:`RunLoop.committable`). The commit is the last step, on a timer
(``kafka.commit_interval_s``), on revocation and on shutdown, always after the dead-letter producer
was flushed.

Backpressure. :class:`~monitor.scoring.stage.Backpressure` from the scoring stage or
:class:`~monitor.store.StoreUnavailable` from the store stops processing at that trace: it and every
trace after it stay *held* (nothing is dropped), every assigned partition is paused, and the loop
keeps polling (so the member stays in the group and rebalances run) and retries the held traces
with a capped exponential backoff (0.1 s → 5 s) measured on the clock, never by sleeping. When the
held list is empty the partitions resume. Partitions assigned while paused are paused at once.

Revocation (inside ``poll()``, kafka-python's rebalance listener): traces already closed are
scored, stored and committed (one attempt each: a held trace whose store is down is dropped and its
offsets are not committed, so the new owner re-reads it); open traces with records on a revoked
partition are dropped, the new owner re-reads them from the committed low watermark.

Shutdown (:meth:`RunLoop.drain`): fetching stops (partitions paused), traces that already closed
are scored and stored until the deadline, the low watermark is committed. Open traces are **not**
force-closed: scoring an incomplete run would record wrong verdicts; their records are re-read
after the restart because the committed offset stays at or below their first record.

Delivery is at least once: after a crash the records since the last commit are read again and the
same runs are scored again. The store is idempotent and quality metrics count only the results the
store accepted as new (``write() → True``), so nothing is counted twice. Pipeline counters (records,
spans, traces closed) count what this process did, replays included.

A dead-letter rate above ``dead_letter.max_rate`` raises
:class:`~monitor.ingest.dlq.DeadLetterRateExceeded` out of :meth:`RunLoop.run` (after the same
drain as a shutdown) so the daemon exits non-zero.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from monitor.ingest.consumer import CommitError, PartitionsCallback, Record, Source
from monitor.ingest.decode import DecodeError, decode_logs_batch, decode_traces_batch
from monitor.ingest.dlq import DeadLetterError, DeadLetterLimit, DeadLetterQueue, DeadLetterRateExceeded
from monitor.sampling.sampler import Sampler
from monitor.scoring.result import ScoreResult
from monitor.scoring.stage import Backpressure
from monitor.settings import Settings
from monitor.store import StoredResult, StoreUnavailable
from monitor.trajectory.assembler import Assembler, AssemblerLimits, ClosedTrace, TopicPartition
from monitor.trajectory.build import build_runs
from monitor.trajectory.model import Run

log = logging.getLogger(__name__)

POLL_TIMEOUT_MS: Final = 100
"""Longest a poll blocks; bounds how late a trace closes and how fast a stop request is seen."""
TICK_S: Final = 1.0
"""How often gauges (open traces, lag) and health are refreshed."""
WRITE_BATCH: Final = 200
"""Closed traces written per store transaction (one ``write()`` call)."""
RETRY_MIN_S: Final = 0.1
RETRY_MAX_S: Final = 5.0


class Scoring(Protocol):
    def score(self, run: Run) -> list[ScoreResult]: ...


class Store(Protocol):
    def write(self, results: Sequence[StoredResult]) -> list[bool]: ...
    def purge_older_than(self, cutoff: datetime) -> int: ...


class PipelineMetrics(Protocol):
    def records_consumed(self, topic: str, partition: int, n: int = 1) -> None: ...
    def spans_decoded(self, n: int) -> None: ...
    def record_invalid(self, reason: str) -> None: ...
    def record_dead_lettered(self, reason: str) -> None: ...
    def traces_closed(self, outcome: str, n: int = 1) -> None: ...
    def late_spans(self, n: int) -> None: ...
    def split_traces(self, n: int) -> None: ...
    def commit_done(self, topic: str, partition: int, when_s: float) -> None: ...
    def set_lag(self, topic: str, partition: int, lag: int) -> None: ...
    def paused(self, on: bool, reason: str) -> None: ...
    def store_write(self, outcome: str, n: int = 1) -> None: ...
    def runs_sampled(self, decision: str, n: int = 1) -> None: ...
    def forget_partition(self, topic: str, partition: int) -> None: ...
    def observe_results(self, run: Run, results: Sequence[ScoreResult]) -> None: ...
    def set_open_traces(self, n: int, spans: int, oldest_age_s: float) -> None: ...


class Health(Protocol):
    def set_alive(self, on: bool) -> None: ...
    def set_assigned(self, partitions: int) -> None: ...
    def set_lag(self, total: int) -> None: ...


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


@dataclass(slots=True)
class _Held:
    closed: ClosedTrace
    runs: list[Run] | None = None


@dataclass(slots=True)
class _Scored:
    runs: list[Run]
    rows: list[StoredResult] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)  # index in ``runs`` of the top-level run of each row
    sampled: int = 0


class RunLoop:
    """The daemon's pipeline on one thread; see the module docstring for the contract.

    ``sampler`` (the stage's) only feeds ``runs_sampled``; without it a run counts as sampled when
    it produced results. ``make_source(on_revoked, on_assigned)`` builds the broker source with this loop's rebalance
    callbacks (``KafkaSource`` in the daemon). ``clock`` is monotonic seconds (assembler timing and
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
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        a = settings.assembler
        self.assembler = Assembler(
            AssemblerLimits(
                root_idle_s=a.root_idle_s,
                idle_s=a.idle_s,
                max_age_s=a.max_age_s,
                max_spans=a.max_spans,
                max_open_spans=a.max_open_spans,
                late_window_s=a.late_window_s,
            )
        )
        self.dlq = dlq
        self.stage = stage
        self.sampler = sampler
        self.store = store
        self.metrics = metrics
        self.health = health
        self.clock = clock
        self.wall = wall
        self.stats = LoopStats()
        self.limit = DeadLetterLimit(settings.dead_letter.max_rate, settings.dead_letter.window)
        self._spans_topic = settings.kafka.spans_topic
        self._encoding = settings.kafka.encoding
        self._max_record_bytes = settings.decode.max_record_bytes
        self._max_attribute_chars = settings.decode.max_attribute_chars
        self._stop = threading.Event()
        self._held: deque[_Held] = deque()
        self._paused_reason: str | None = None
        self._retry_at = 0.0
        self._backoff = RETRY_MIN_S
        self._assigned: set[TopicPartition] = set()
        self._last_offset: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._next_commit = 0.0
        self._next_tick = 0.0
        self._next_retention = 0.0
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
        return self._paused_reason is not None

    @property
    def held(self) -> int:
        """Closed traces waiting to be stored (scored or not)."""
        return len(self._held)

    def run(self, drain_deadline_s: float | None = None) -> None:
        """Loop until :meth:`stop`, then :meth:`drain` within ``drain_deadline_s`` (default: the setting).

        Raises :class:`~monitor.ingest.dlq.DeadLetterRateExceeded` after draining when the dead-letter
        limit tripped. Other exceptions (bugs, a store that raises something other than
        ``StoreUnavailable``) propagate without a drain: nothing past the last commit is lost, it is
        re-read after the restart.
        """
        deadline_s = self.settings.shutdown.drain_deadline_s if drain_deadline_s is None else drain_deadline_s
        self.health.set_alive(True)
        now = self.clock()
        self._next_commit = now + self.settings.kafka.commit_interval_s
        self._next_retention = now  # sweep once at start, then every retention_interval_s
        try:
            while not self._stop.is_set():
                self.step()
        except DeadLetterRateExceeded as exc:
            log.error("%s", exc)
            self.drain(self.clock() + deadline_s)
            raise
        self.drain(self.clock() + deadline_s)

    def step(self) -> None:
        """One iteration: poll, ingest, close, process held work, periodic duties. Blocks ≤ one poll."""
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
        closed = self.assembler.poll(now)
        if closed:
            self._held.extend(_Held(c) for c in closed)
        if records or closed:
            self._report_counters()
        if self._held and now >= self._retry_at:
            self._process_held(now)
        if now >= self._next_tick:
            self._tick(now)
        if now >= self._next_commit:
            self._next_commit = now + self.settings.kafka.commit_interval_s
            self.commit()
        if now >= self._next_retention:
            self._next_retention = now + self.settings.store.retention_interval_s
            self._retention()

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
                    asm.add_spans(traces.spans, tp, offset, now)
                    spans += len(traces.spans)
                else:
                    logs = decode_logs_batch(
                        value,
                        self._encoding,
                        max_record_bytes=self._max_record_bytes,
                        max_attribute_chars=self._max_attribute_chars,
                    )
                    asm.add_logs(logs.events, tp, offset, now)
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

    def _dead_letter(self, rec: Record, exc: DecodeError) -> None:
        self.limit.check_bad(exc.reason)  # raises DeadLetterRateExceeded: stop before sending this one
        self.metrics.record_invalid(exc.reason)
        self.stats.dead_letters[exc.reason] += 1
        if self.dlq.send(
            topic=rec.topic,
            partition=rec.partition,
            offset=rec.offset,
            key=rec.key,
            value=rec.value,
            headers=rec.headers,
            reason=exc.reason,
            detail=exc.detail,
        ):
            self.metrics.record_dead_lettered(exc.reason)
        self.assembler.mark_consumed((rec.topic, rec.partition), rec.offset)

    def _offset_reset(self, tp: TopicPartition, prev: int, offset: int) -> None:
        """The partition went backwards (log truncated, broker lost its data, seek): restart its bookkeeping."""
        log.warning("offset of %s/%d went back from %d to %d: dropping its open traces", tp[0], tp[1], prev, offset)
        self.stats.offset_resets += 1
        self.assembler.revoke([tp])
        self._committed.pop(tp, None)

    # ------------------------------------------------------------------ held work

    def _process_held(self, now: float) -> bool:
        """Score and store held traces in order, ``WRITE_BATCH`` traces per store transaction.

        Returns True when none is left. On ``Backpressure`` the traces scored before it are still
        written; on ``StoreUnavailable`` the whole batch stays held (nothing of it was written).
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
                rows = [row for scored in batch for row in scored.rows]
                try:
                    flags = self.store.write(rows) if rows else []
                except StoreUnavailable as exc:
                    self._pause(now, "store", exc)
                    return False
                self._account(batch, flags)
                for _ in batch:
                    self._held.popleft()
            if pressure is not None:
                self._pause(now, "scoring", pressure)
                return False
        self._resume()
        return True

    def _score(self, held: _Held) -> _Scored:
        """Build the runs of a closed trace (once) and score them; raises only ``Backpressure``."""
        closed = held.closed
        if held.runs is None:
            try:
                held.runs = build_runs(closed.spans, closed.logs, forced=closed.reason if closed.forced else None)
            except Exception:  # a bug in the rebuild must not stop the daemon: count it, keep the offsets moving
                log.exception("could not rebuild trace %s: skipped", closed.trace_id)
                self.metrics.record_invalid("rebuild_failed")
                held.runs = []
        scored = _Scored(held.runs)
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

    def _account(self, batch: Sequence[_Scored], flags: Sequence[bool]) -> None:
        """After the store accepted a batch: pipeline counters, and quality metrics for NEW results only."""
        flag_iter = iter(flags)
        n_new = n_rows = sampled = runs = 0
        for scored in batch:
            new_by_run: dict[int, list[ScoreResult]] = {}
            for row, owner_i in zip(scored.rows, scored.owners, strict=True):
                if next(flag_iter):
                    n_new += 1
                    new_by_run.setdefault(owner_i, []).append(row.result)
            for owner_i, results in new_by_run.items():
                self.metrics.observe_results(scored.runs[owner_i], results)
            n_rows += len(scored.rows)
            sampled += scored.sampled
            runs += len(scored.runs)
        if n_new:
            self.metrics.store_write("new", n_new)
        if n_rows - n_new:
            self.metrics.store_write("duplicate", n_rows - n_new)
        if sampled:
            self.metrics.runs_sampled("sampled", sampled)
        if runs - sampled:
            self.metrics.runs_sampled("skipped", runs - sampled)
        self.stats.traces_scored += len(batch)
        self.stats.runs += runs
        self.stats.results_new += n_new
        self.stats.results_duplicate += n_rows - n_new

    def _pause(self, now: float, reason: str, exc: BaseException) -> None:
        self._retry_at = now + self._backoff
        self._backoff = min(self._backoff * 2, RETRY_MAX_S)
        if reason == "store":
            self.metrics.store_write("error")
        if self._paused_reason is None:
            log.warning("pausing consumption (%s): %s; %d closed traces held", reason, exc, len(self._held))
            self._paused_reason = reason
            self.source.pause(self._assigned)
            self.metrics.paused(True, reason)
            self.stats.pauses += 1

    def _resume(self) -> None:
        self._backoff = RETRY_MIN_S
        self._retry_at = 0.0
        reason, self._paused_reason = self._paused_reason, None
        if reason is not None and not self._stop.is_set():
            log.info("resuming consumption (%s cleared)", reason)
            self.source.resume(self._assigned)
            self.metrics.paused(False, reason)
        elif reason is not None:
            self.metrics.paused(False, reason)

    # ------------------------------------------------------------------ offsets

    def committable(self) -> dict[TopicPartition, int]:
        """Per assigned partition, the offset safe to commit: the low watermark below every held trace."""
        offsets = self.assembler.committable()
        for held in self._held:
            for tp, first in held.closed.first_offsets.items():
                if tp in offsets and first < offsets[tp]:
                    offsets[tp] = first
        return {tp: off for tp, off in offsets.items() if tp in self._assigned}

    def commit(self, only: Iterable[TopicPartition] | None = None) -> bool:
        """Flush dead letters, then commit the changed low watermarks. Returns False if nothing could be committed.

        Failures are logged and counted; the same offsets go out with the next commit.
        """
        offsets = self.committable()
        if only is not None:
            keep = set(only)
            offsets = {tp: o for tp, o in offsets.items() if tp in keep}
        changed = {tp: o for tp, o in offsets.items() if self._committed.get(tp) != o}
        try:
            self.dlq.flush()
        except DeadLetterError as exc:
            log.error("not committing: %s", exc)
            self.stats.commit_failures += 1
            return False
        if not changed:
            return True
        try:
            self.source.commit(changed)
        except CommitError as exc:
            log.warning("commit of %d partitions failed (retried later): %s", len(changed), exc)
            self.stats.commit_failures += 1
            return False
        when = self.wall()
        for (topic, partition), off in changed.items():
            self._committed[(topic, partition)] = off
            self.metrics.commit_done(topic, partition, when)
        self.stats.commits += 1
        return True

    # ------------------------------------------------------------------ rebalance

    def _on_revoked(self, partitions: list[TopicPartition]) -> None:
        lost = set(partitions)
        now = self.clock()
        self._held.extend(_Held(c) for c in self.assembler.poll(now))
        if self._held:
            self._process_held(now)  # one attempt; what stays held on lost partitions is dropped below
        self.commit(only=lost)
        kept: deque[_Held] = deque()
        for held in self._held:
            if lost.intersection(held.closed.first_offsets):
                self.stats.dropped_held += 1
            else:
                kept.append(held)
        self._held = kept
        dropped = self.assembler.revoke(lost)
        for tp in lost:
            self._last_offset.pop(tp, None)
            self._committed.pop(tp, None)
            self.metrics.forget_partition(*tp)
        self._assigned -= lost
        self.health.set_assigned(len(self._assigned))
        if lost:
            log.info("revoked %d partitions; %d open traces left to the new owner", len(lost), dropped)

    def _on_assigned(self, partitions: list[TopicPartition]) -> None:
        self._assigned = self.source.assignment() | set(partitions)
        for tp in partitions:
            self._committed.pop(tp, None)
            self._last_offset.pop(tp, None)
        if self._paused_reason is not None or self._stop.is_set():
            self.source.pause(partitions)
        self.health.set_assigned(len(self._assigned))
        log.info("assigned %d partitions (%d in total)", len(partitions), len(self._assigned))

    # ------------------------------------------------------------------ periodic

    def _tick(self, now: float) -> None:
        self._next_tick = now + TICK_S
        asm = self.assembler
        self.metrics.set_open_traces(asm.open_traces, asm.open_spans, asm.oldest_open_age(now))
        self._report_counters()
        lag = self.source.lag()
        for (topic, partition), n in lag.items():
            self.metrics.set_lag(topic, partition, n)
        self.health.set_lag(sum(lag.values()))
        self.health.set_assigned(len(self._assigned))

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
            log.warning("retention sweep skipped: %s", exc)
            return
        if n:
            log.info("retention: deleted %d results older than %s", n, cutoff.isoformat())

    # ------------------------------------------------------------------ shutdown

    def drain(self, deadline: float) -> None:
        """Stop fetching, store what is closed (until ``deadline`` on the loop clock), commit. Open traces stay open.

        Keeps polling the paused consumer while it waits for a saturated stage or store, so the
        member stays in the group until it leaves on close.
        """
        self._stop.set()
        self.source.pause(self._assigned)
        now = self.clock()
        self._held.extend(_Held(c) for c in self.assembler.poll(now))
        while self._held and self.clock() < deadline:
            now = self.clock()
            if now >= self._retry_at and self._process_held(now):
                break
            wait_ms = int(max(0.0, min(self._retry_at, deadline) - self.clock()) * 1000)
            self.source.poll(min(wait_ms, POLL_TIMEOUT_MS))
        if self._held:
            log.warning("shutdown deadline passed with %d closed traces not stored: they are re-read", len(self._held))
        self.commit()
        self._tick(self.clock())
        self.health.set_alive(False)
