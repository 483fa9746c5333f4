"""Store: result rows and replay marks of closed traces, ``write_batch`` traces per transaction.

* Traces collect in a batch; a full batch is written at once, a partial one on the next :meth:`StoreStep.poll`.
  Each trace's replay marks (:func:`~monitor.ingest.replay.trace_marks`) and the judge verdicts its runs are
  owed are written in the same transaction as its rows; the marks are known to the replay guard once the write
  returned. Judge verdicts (:class:`~monitor.steps.work.VerdictWork`) ride in the same batches and settle their
  owed jobs in the same transaction.
* :class:`~monitor.store.StoreUnavailable` (the store is down, frozen past its statement timeout, its file gone):
  the batch stays, the step refuses further traces (``store`` pressure: the run loop pauses fetching) and retries
  with a capped exponential backoff (0.1 s → 5 s) on later polls; each failed attempt counts
  ``monitor_store_writes_total{outcome="error"}``. Nothing is dropped and nothing after the batch is committed.
* Any other error: the batch is bisected until the trace that fails alone is found; that trace is dead-lettered
  (reason ``unstorable``, its spans as JSON, its trace id in a header) and goes on as ``rejected`` with no rows.
* Retention: every ``store.retention_interval_s`` results older than ``store.retention_days`` are deleted.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable, Set
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from monitor.ingest.dlq import HEADER_TRACE_ID, DeadLetterQueue, make_dead_letter
from monitor.ingest.replay import ReplayGuard, trace_marks
from monitor.settings import Settings
from monitor.steps.contract import Message, MessageRejected, Step, TopicPartition
from monitor.steps.work import Backoff, LoopStats, PipelineMetrics, Store, StoreAvailability, TraceWork, VerdictWork
from monitor.store import StoreUnavailable
from monitor.trajectory.assembler import ClosedTrace

log = logging.getLogger(__name__)

Work = TraceWork | VerdictWork | None

UNSTORABLE: Final = "unstorable"


class StoreStep:
    """Writes ``TraceWork`` rows and marks, fills ``TraceWork.new``; see the module docstring."""

    def __init__(
        self,
        next_step: Step[Work],
        settings: Settings,
        *,
        store: Store,
        dlq: DeadLetterQueue,
        guard: ReplayGuard,
        availability: StoreAvailability,
        metrics: PipelineMetrics,
        stats: LoopStats,
        clock: Callable[[], float],
        wall: Callable[[], float],
        write_batch: int,
    ) -> None:
        self.next = next_step
        self.store = store
        self.dlq = dlq
        self.guard = guard
        self.availability = availability
        self.metrics = metrics
        self.stats = stats
        self.clock = clock
        self.wall = wall
        self.write_batch = write_batch
        self.retention_days = settings.store.retention_days
        self.retention_interval_s = settings.store.retention_interval_s
        self.batch: list[Message[Work]] = []
        self._traces = 0  # traces (not offsets-only messages) in the batch
        self.written: deque[Message[Work]] = deque()
        self._failing = False
        self._backoff = Backoff(clock)
        self._next_retention = 0.0

    @property
    def held(self) -> int:
        """Traces waiting in the batch."""
        return self._traces

    # ------------------------------------------------------------------ the contract

    def submit(self, message: Message[Work]) -> None:
        if self._failing:
            raise MessageRejected("store")
        self.batch.append(message)
        if message.payload is not None:
            self._traces += 1
            if self._traces >= self.write_batch:
                self._flush()

    def poll(self) -> None:
        if self.batch and self._backoff.due():
            self._flush()
        self._forward()
        self.next.poll()
        if self.clock() >= self._next_retention:
            self._next_retention = self.clock() + self.retention_interval_s
            self._retention()

    def join(self, timeout_s: float) -> None:
        if self.batch and self._backoff.due():
            self._flush()
        self._forward()
        self.next.join(timeout_s)

    def forget(self, partitions: Set[TopicPartition]) -> int:
        dropped = 0
        kept: list[Message[Work]] = []
        for message in self.batch:
            if message.payload is not None and message.payload.on(partitions):
                dropped += 1
            else:
                kept.append(message)
        self.batch = kept
        self._traces = sum(1 for m in kept if m.payload is not None)
        if not self._traces and not kept:
            self._end_outage()
        return dropped + self.next.forget(partitions)

    def pressure(self) -> frozenset[str]:
        below = self.next.pressure()
        return below | {"store"} if self._failing else below

    def close(self) -> None:
        self.next.close()

    def terminate(self) -> None:
        self.next.terminate()

    # ------------------------------------------------------------------ writing

    def _flush(self) -> None:
        """Write the batch; what was written moves on (in order), the rest stays on ``StoreUnavailable``."""
        batch = self.batch
        done: list[Message[Work]] = []
        try:
            self._write(batch, done)
        except StoreUnavailable as exc:
            self._outage(exc)
            return
        finally:
            self.batch = batch[len(done) :]
            self._traces = sum(1 for m in self.batch if m.payload is not None)
            self.written.extend(done)
        self._end_outage()

    def _write(self, batch: list[Message[Work]], done: list[Message[Work]]) -> None:
        """Store ``batch`` in one transaction, appending its messages to ``done`` in order. A batch the store
        rejects (anything but ``StoreUnavailable``) is bisected; a trace that fails alone is dead-lettered."""
        works = [m.payload for m in batch if m.payload is not None]
        traces = [work for work in works if isinstance(work, TraceWork)]
        for trace in traces:
            if not trace.replayed and not trace.marks:
                trace.marks = trace_marks(trace.closed)
        rows = [row for work in works for row in work.rows]
        marks = [mark for trace in traces for mark in trace.marks]
        jobs = [job.row for trace in traces for job in trace.owed]
        settled = [key for work in works for key in work.settled]
        kept = [k for trace in traces for k in trace.kept]
        tools = [t for trace in traces for t in trace.tools]
        if not rows and not marks and not jobs and not settled:
            done.extend(batch)
            return
        try:
            flags = self.store.write_all(rows, marks, jobs=jobs, settled=settled, kept=kept, tools=tools)
        except StoreUnavailable:
            self.availability.observe(False)
            raise
        except Exception as exc:
            self.availability.observe(True)
            if len(works) == 1:
                self._unstorable(works[0], exc)
                done.extend(batch)
                return
            half = _half(batch)
            self._write(batch[:half], done)
            self._write(batch[half:], done)
            return
        self.availability.observe(True)
        it = iter(flags)
        for work in works:
            work.new = [next(it) for _ in work.rows]
            if isinstance(work, TraceWork):
                self.guard.add(work.marks)
        done.extend(batch)

    def _unstorable(self, work: TraceWork | VerdictWork, exc: BaseException) -> None:
        """A trace the store rejects on its own: dead-letter its spans (as JSON) with the reason, count it.
        Verdicts the store rejects on their own are logged, counted as store errors and settled (their jobs
        would fail the same way on every resume)."""
        if isinstance(work, VerdictWork):
            log.error("%d judge verdicts cannot be stored (%s): dropped", len(work.rows), exc)
            self.metrics.store_write("error", len(work.rows))
            work.rows, work.owners, work.new = [], [], []
            try:
                self.store.write_all([], settled=work.settled)
            except Exception:
                log.warning("the verdicts' jobs stay owed: their settle failed too", exc_info=True)
            return
        closed = work.closed
        detail = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"[:400]
        log.error("trace %s cannot be stored (%s): dead-lettered", closed.trace_id, detail)
        (topic, partition), first = min(closed.first_offsets.items(), key=lambda kv: (kv[0], kv[1]))
        self.dlq.send(
            make_dead_letter(
                topic=topic,
                partition=partition,
                offset=first,
                key=closed.trace_id.encode(),
                value=spans_json(closed),
                headers=(),
                reason=UNSTORABLE,
                detail=detail,
                marks=trace_marks(closed, always=True),
                holds=[(t, p, off) for (t, p), off in closed.first_offsets.items()],
                extra_headers=[(HEADER_TRACE_ID, closed.trace_id.encode())],
            )
        )
        self.stats.dead_letters[UNSTORABLE] += 1
        work.rows = []
        work.owners = []
        work.runs = []
        work.sampled = []
        work.marks = []
        work.owed = []
        work.kept = []
        work.tools = []
        work.rejected = UNSTORABLE

    def _forward(self) -> None:
        written = self.written
        while written:
            try:
                self.next.submit(written[0])
            except MessageRejected:
                return
            written.popleft()

    # ------------------------------------------------------------------ outages

    def _outage(self, exc: StoreUnavailable) -> None:
        self.metrics.store_write("error")
        self._backoff.failed()
        if not self._failing:
            self._failing = True
            log.warning("the store is unavailable (%s): %d closed traces held, retrying", exc, self._traces)

    def _end_outage(self) -> None:
        self._backoff.succeeded()
        if self._failing:
            self._failing = False
            log.info("the store is available again")

    def _retention(self) -> None:
        cutoff = datetime.fromtimestamp(self.wall(), UTC) - timedelta(days=self.retention_days)
        try:
            n = self.store.purge_older_than(cutoff)
        except StoreUnavailable as exc:
            self.availability.observe(False)
            log.warning("retention sweep skipped: %s", exc)
            return
        if n:
            log.info("retention: deleted %d results older than %s", n, cutoff.isoformat())


def _half(batch: list[Message[Work]]) -> int:
    """Where to split ``batch`` so each half holds about half of its traces (offsets-only messages ride along)."""
    traces = [i for i, m in enumerate(batch) if m.payload is not None]
    return traces[len(traces) // 2]


def spans_json(closed: ClosedTrace) -> bytes:
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
            for s in closed.materialize()
        ],
    }
    return json.dumps(doc, ensure_ascii=True, default=repr, allow_nan=True).encode("ascii")
