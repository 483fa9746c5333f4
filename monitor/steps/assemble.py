"""Assemble: decoded records in, closed traces out (:class:`~monitor.steps.work.TraceWork`), with their offsets.

The step owns the :class:`~monitor.trajectory.assembler.Assembler`. :meth:`AssembleStep.submit` always takes
the record (the assembler's own bounds, ``assembler.max_open_spans`` / ``max_open_bytes``, close the oldest
traces early). :meth:`AssembleStep.poll` closes at most ``close_batch`` due traces (while the closed traces
on their way are fewer than ``max_held``) and forwards them in order until the next step rejects or
``work_budget_s`` has passed.

**Offsets.** Each closed trace leaves with the offsets safe to commit once it is stored: per partition the
assembler's low watermark lowered to the first offset of every trace closed with it but after it. When nothing
closed but the watermark moved (records of traces still open elsewhere, dead letters, replays) an offsets-only
message goes on. So a message's offsets never pass a record that is still open or still on its way.

**Backlog.** Closed traces between this step and the commit are counted (:class:`~monitor.steps.work.InFlight`);
above ``max_held`` of them or ``max_bytes`` of their records the step reports ``backlog`` pressure (the run loop
pauses fetching) until they are down to half. On a revocation every trace on the lost partitions leaves the count,
wherever in the chain it was dropped.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Set

from monitor.steps.contract import Message, MessageRejected, Step, TopicPartition
from monitor.steps.work import Decoded, InFlight, LoopStats, PipelineMetrics, TraceWork
from monitor.trajectory.assembler import Assembler, AssemblerLimits, ClosedTrace

Work = TraceWork | None


class AssembleStep:
    """:class:`Decoded` → :class:`TraceWork`; see the module docstring."""

    def __init__(
        self,
        next_step: Step[Work],
        limits: AssemblerLimits,
        *,
        clock: Callable[[], float],
        inflight: InFlight,
        metrics: PipelineMetrics,
        stats: LoopStats,
        close_batch: int,
        work_budget_s: float,
        max_held: int,
    ) -> None:
        self.next = next_step
        self.assembler = Assembler(limits)
        self.clock = clock
        self.inflight = inflight
        self.metrics = metrics
        self.stats = stats
        self.close_batch = close_batch
        self.work_budget_s = work_budget_s
        self.max_held = max_held
        self.max_bytes = limits.max_open_bytes
        self.outbox: deque[Message[Work]] = deque()
        self._sent: Mapping[TopicPartition, int] = {}
        self._backlog = False
        self._reported: dict[str, int] = {}

    # ------------------------------------------------------------------ input

    def submit(self, message: Message[Decoded]) -> None:
        d = message.payload
        asm = self.assembler
        if d.indexed is not None:
            asm.add_deferred(
                d.indexed.record,
                d.indexed.traces,
                d.tp,
                d.offset,
                self.clock(),
                d.nbytes,
                timestamp_ms=d.timestamp_ms,
                flagged=d.flagged,
            )
        elif d.spans is not None:
            asm.add_spans(
                d.spans, d.tp, d.offset, self.clock(), d.nbytes, timestamp_ms=d.timestamp_ms, flagged=d.flagged
            )
        elif d.logs is not None:
            asm.add_logs(d.logs, d.tp, d.offset, self.clock(), d.nbytes, timestamp_ms=d.timestamp_ms)
        else:
            asm.mark_consumed(d.tp, d.offset)

    def reset(self, tp: TopicPartition) -> None:
        """The partition's offsets went back (log truncated, seek): drop its open traces."""
        self.assembler.revoke([tp])

    # ------------------------------------------------------------------ output

    def _close(self, limit: int | None) -> None:
        now = self.clock()
        closed = self.assembler.poll(now, limit)
        watermark = self.assembler.committable()
        if closed:
            self._enqueue(closed, watermark)
        elif watermark != self._sent:
            if self.outbox and self.outbox[-1].payload is None:
                self.outbox[-1] = Message(None, watermark)  # one offsets-only message is enough
            else:
                self.outbox.append(Message(None, watermark))
            self._sent = watermark
        self._report_counters()

    def _enqueue(self, closed: list[ClosedTrace], watermark: dict[TopicPartition, int]) -> None:
        """Queue ``closed`` in order, each with the watermark lowered below every trace after it."""
        offsets = dict(watermark)
        messages: list[Message[Work]] = []
        for trace in reversed(closed):
            messages.append(Message(TraceWork(trace), dict(offsets)))
            for tp, first in trace.first_offsets.items():
                if tp in offsets and first < offsets[tp]:
                    offsets[tp] = first
            self.inflight.add(trace)
        messages.reverse()
        self.outbox.extend(messages)
        self._sent = watermark

    def _forward(self, deadline: float) -> None:
        outbox = self.outbox
        while outbox:
            try:
                self.next.submit(outbox[0])
            except MessageRejected:
                return
            outbox.popleft()
            if self.clock() >= deadline:
                return

    def poll(self) -> None:
        if self.inflight.traces < self.max_held:
            self._close(self.close_batch)
        if self.outbox:
            self._forward(self.clock() + self.work_budget_s)
        self.next.poll()
        self._update_backlog()

    def join(self, timeout_s: float) -> None:
        deadline = self.clock() + timeout_s
        self._close(None)
        if timeout_s > 0:
            self._forward(deadline)
        self.next.join(max(0.0, deadline - self.clock()))
        self._update_backlog()

    def forget(self, partitions: Set[TopicPartition]) -> int:
        kept: deque[Message[Work]] = deque()
        dropped = 0
        for message in self.outbox:
            work = message.payload
            if work is not None and work.on(partitions):
                dropped += 1
            else:
                kept.append(message)
        self.outbox = kept
        self.assembler.revoke(partitions)
        self._sent = {}
        dropped += self.next.forget(partitions)
        self.inflight.forget(partitions)  # whichever step below dropped them
        self._update_backlog()
        return dropped

    def pressure(self) -> frozenset[str]:
        below = self.next.pressure()
        return below | {"backlog"} if self._backlog else below

    def close(self) -> None:
        self.next.close()

    def terminate(self) -> None:
        self.next.terminate()

    # ------------------------------------------------------------------ bookkeeping

    def _update_backlog(self) -> None:
        held, nbytes = self.inflight.traces, self.inflight.nbytes
        if held > self.max_held or nbytes > self.max_bytes:
            self._backlog = True
        elif held <= self.max_held // 2 and nbytes <= self.max_bytes // 2:
            self._backlog = False

    def gauges(self, now: float) -> None:
        """Open-trace gauges and the assembler's counters (every tick)."""
        asm = self.assembler
        self.metrics.set_open_traces(asm.open_traces, asm.open_spans, asm.oldest_open_age(now), asm.open_bytes)
        self._report_counters()

    def _report_counters(self) -> None:
        """Turn the assembler's monotonic counters into metric increments (deltas since the last report)."""
        stats = self.assembler.stats
        reported = self._reported
        for reason, value in stats.closed.items():
            key = "closed:" + reason
            delta = value - reported.get(key, 0)
            if delta > 0:
                reported[key] = value
                self.metrics.traces_closed(reason, delta)
        delta = stats.late_spans - reported.get("late", 0)
        if delta > 0:
            reported["late"] = stats.late_spans
            self.metrics.late_spans(delta)
        delta = stats.split_traces - reported.get("split", 0)
        if delta > 0:
            reported["split"] = stats.split_traces
            self.metrics.split_traces(delta)
