"""Spans of many interleaved traces in → closed traces out, with committable offsets.

No span says "the run is over", so a trace closes when (checked by :meth:`Assembler.poll`):

* ``complete``  its root span (no parent) has arrived and the trace has been idle ``root_idle_s``;
* ``idle``      no root seen and idle ``idle_s`` (the root lives in another service, or was lost);
* ``max_age``   open longer than ``max_age_s`` (forced);
* ``max_spans`` it reached ``max_spans`` spans (forced, at once);
* ``memory``    the assembler holds more than ``max_open_spans`` spans or ``max_open_bytes`` bytes of records:
                the oldest traces are forced out;
* ``shutdown``  :meth:`drain` closed it (forced).

Bytes. Every span (and log event) is charged its share of the encoded record it came in (``nbytes`` of
:meth:`Assembler.add_spans`), so ``max_open_bytes`` bounds memory in bytes whatever the span count: decoded
Python objects take a small multiple of their encoded size (docs/daemon.md gives the measured factor).

Lazy records. :meth:`Assembler.add_deferred` takes a record that was only indexed (its traces, their span
counts, roots and error statuses) and keeps the record itself, undecoded (:class:`DeferredSpans`), shared by
every trace it holds; :meth:`ClosedTrace.materialize` decodes the trace's spans when it is needed, after the
trace-level sampling decision. An open span then costs its share of the record's bytes plus a few dozen bytes
of index, instead of its decoded objects. Duplicate spans (a record produced twice) are dropped when the trace
is materialized rather than on arrival.

Hints. Each closed trace says whether any span had status ERROR or any of its records was ``flagged`` by the
caller (the decode step flags records holding a tool-error marker), and the Kafka timestamp of its last record:
the sampling before the rebuild and the latency metric read them.

Work per call. :meth:`Assembler.poll` closes at most ``limit`` traces per call when given one; the rest stay
due and close on the next calls, so a burst of traces closing at once never blocks the caller for long.

Spans of a trace already closed are *late*: counted (``stats.late_spans``), never re-emitted. Closed
trace ids are remembered in a bounded LRU for ``late_window_s``.

Offsets. For each (topic, partition) the committable offset is the low watermark: the smallest first
offset of any trace still open with records on it, else the last consumed offset + 1. Committing it
never loses an open trace; a restart re-reads the records of open traces (at-least-once). Records of
one trace on several partitions are counted once per trace (``stats.split_traces``): the Collector
must key records by trace id for a trace to be rebuilt whole.

The assembler is pure state: it reads no clock (every call takes ``now``, seconds from any monotonic
source) and does no I/O.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal, Protocol, TypeAlias

from monitor.trajectory.spans import STATUS_ERROR, DeferredSpans, LogEvent, SpanRecord

TopicPartition: TypeAlias = tuple[str, int]
CloseReason: TypeAlias = Literal["complete", "idle", "max_age", "max_spans", "memory", "shutdown"]
FORCED_REASONS: Final = frozenset({"max_age", "max_spans", "memory", "shutdown"})


class IndexEntry(Protocol):
    """One trace of an indexed record (:meth:`Assembler.add_deferred`)."""

    @property
    def spans(self) -> int: ...
    @property
    def root(self) -> bool: ...
    @property
    def errored(self) -> bool: ...


@dataclass(frozen=True, slots=True)
class AssemblerLimits:
    root_idle_s: float = 5.0
    idle_s: float = 30.0
    max_age_s: float = 600.0
    max_spans: int = 10_000
    max_open_spans: int = 1_000_000
    max_open_bytes: int = 256 * 1024 * 1024
    late_window_s: float = 600.0
    max_remembered_closed: int = 200_000

    def __post_init__(self) -> None:
        for name in ("root_idle_s", "idle_s", "max_age_s", "late_window_s"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0")
        if self.max_spans < 1 or self.max_open_spans < 1 or self.max_open_bytes < 1:
            raise ValueError("max_spans, max_open_spans and max_open_bytes must be >= 1")


@dataclass(slots=True)
class AssemblerStats:
    """Monotonic counters; the daemon exports them as Prometheus counters."""

    spans_in: int = 0
    late_spans: int = 0
    late_logs: int = 0
    duplicate_spans: int = 0
    split_traces: int = 0
    closed: dict[str, int] = field(default_factory=dict)
    dropped_traces: int = 0  # open traces dropped on revocation
    logs_only_traces: int = 0


@dataclass(frozen=True, slots=True)
class ClosedTrace:
    """A closed trace: its decoded ``spans`` and the ``deferred`` records still holding the rest (lazy path;
    :meth:`materialize` gives them all), its log events, why it closed and its offsets. ``flagged``: a span had
    status ERROR or a record was flagged (module docstring); ``last_record_ms``: the Kafka timestamp of its
    last record (-1 unknown); ``span_count``: spans as counted on arrival (duplicates of deferred records
    included)."""

    trace_id: str
    spans: tuple[SpanRecord, ...]
    logs: tuple[LogEvent, ...]
    reason: CloseReason
    first_offsets: dict[TopicPartition, int]
    last_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    nbytes: int = 0
    deferred: tuple[DeferredSpans, ...] = ()
    flagged: bool = False
    last_record_ms: int = -1
    span_count: int = 0

    @property
    def forced(self) -> bool:
        return self.reason in FORCED_REASONS

    def materialize(self) -> tuple[SpanRecord, ...]:
        """Every span of the trace: the decoded ones, then those of the deferred records decoded now (each
        span id once, the first copy kept). Without deferred records this is ``spans`` as it is."""
        if not self.deferred:
            return self.spans
        out = list(self.spans)
        seen = {span.span_id for span in out}
        for record in self.deferred:
            for span in record.spans_of(self.trace_id):
                if span.span_id not in seen:
                    seen.add(span.span_id)
                    out.append(span)
        return tuple(out)


@dataclass(slots=True)
class _Open:
    trace_id: str
    first_seen: float
    last_activity: float
    spans: list[SpanRecord] = field(default_factory=list)
    logs: list[LogEvent] = field(default_factory=list)
    span_ids: set[str] = field(default_factory=set)
    has_root: bool = False
    first_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    last_offsets: dict[TopicPartition, int] = field(default_factory=dict)
    split_counted: bool = False
    nbytes: int = 0
    n_spans: int = 0
    deferred: list[DeferredSpans] = field(default_factory=list)
    flagged: bool = False
    last_record_ms: int = -1


class Assembler:
    """Buffers spans per trace and emits closed traces; see the module docstring."""

    def __init__(self, limits: AssemblerLimits | None = None) -> None:
        self.limits = limits or AssemblerLimits()
        self.stats = AssemblerStats()
        self._open: dict[str, _Open] = {}
        self._by_first: OrderedDict[str, None] = OrderedDict()  # insertion = first-seen order
        self._rooted: OrderedDict[str, None] = OrderedDict()  # by last activity
        self._rootless: OrderedDict[str, None] = OrderedDict()  # by last activity
        # trace id -> (closed at, the partitions of its records)
        self._closed: OrderedDict[str, tuple[float, tuple[TopicPartition, ...]]] = OrderedDict()
        self._one_partition: dict[TopicPartition, tuple[TopicPartition]] = {}  # shared 1-tuples of _closed
        self._consumed: dict[TopicPartition, int] = {}
        # per partition, the open traces in the order of their first record there (= offset order, records of a
        # partition arrive in offset order): the first entry holds the partition's lowest open offset
        self._firsts: dict[TopicPartition, OrderedDict[str, int]] = {}
        self._open_spans = 0
        self._open_bytes = 0
        self._ready: list[ClosedTrace] = []

    # ------------------------------------------------------------------ input

    @property
    def open_traces(self) -> int:
        return len(self._open)

    @property
    def open_spans(self) -> int:
        return self._open_spans

    @property
    def open_bytes(self) -> int:
        """Encoded record bytes charged to the open traces."""
        return self._open_bytes

    def add_spans(
        self,
        spans: Sequence[SpanRecord],
        tp: TopicPartition,
        offset: int,
        now: float,
        nbytes: int = 0,
        *,
        timestamp_ms: int = -1,
        flagged: bool = False,
    ) -> None:
        """Take the spans of the record at ``offset`` on ``tp`` (any number of traces); ``nbytes`` is the
        record's encoded size, shared among its spans for the byte bound; ``timestamp_ms`` its Kafka timestamp;
        ``flagged`` marks every trace of the record (module docstring, "Hints")."""
        self._consumed[tp] = max(self._consumed.get(tp, -1), offset)
        limits = self.limits
        share, extra = divmod(nbytes, len(spans)) if spans else (0, 0)
        for span in spans:
            self.stats.spans_in += 1
            trace = self._trace_for(span.trace_id, tp, offset, now, timestamp_ms)
            if trace is None:
                self.stats.late_spans += 1
                continue
            if span.span_id in trace.span_ids:
                self.stats.duplicate_spans += 1
                continue
            trace.span_ids.add(span.span_id)
            trace.spans.append(span)
            trace.n_spans += 1
            if flagged or span.status_code == STATUS_ERROR:
                trace.flagged = True
            self._open_spans += 1
            charged = share + extra
            extra = 0
            trace.nbytes += charged
            self._open_bytes += charged
            if span.parent_span_id is None and not trace.has_root:
                self._rooted_now(trace)
            if trace.n_spans >= limits.max_spans:
                self._close(trace.trace_id, "max_spans", now)
        self._enforce_memory(now)

    def add_deferred(
        self,
        record: DeferredSpans,
        traces: Mapping[str, IndexEntry],
        tp: TopicPartition,
        offset: int,
        now: float,
        nbytes: int = 0,
        *,
        timestamp_ms: int = -1,
        flagged: bool = False,
    ) -> None:
        """Take an indexed, undecoded record (module docstring, "Lazy records"): ``traces`` maps each trace id
        it holds to its index entry; the record's ``nbytes`` are shared among its spans as in :meth:`add_spans`."""
        self._consumed[tp] = max(self._consumed.get(tp, -1), offset)
        limits = self.limits
        total = sum(entry.spans for entry in traces.values())
        share, extra = divmod(nbytes, total) if total else (0, 0)
        for trace_id, entry in traces.items():
            n = entry.spans
            self.stats.spans_in += n
            trace = self._trace_for(trace_id, tp, offset, now, timestamp_ms)
            if trace is None:
                self.stats.late_spans += n
                continue
            trace.deferred.append(record)
            trace.n_spans += n
            if flagged or entry.errored:
                trace.flagged = True
            self._open_spans += n
            charged = share * n + extra
            extra = 0
            trace.nbytes += charged
            self._open_bytes += charged
            if entry.root and not trace.has_root:
                self._rooted_now(trace)
            if trace.n_spans >= limits.max_spans:
                self._close(trace_id, "max_spans", now)
        self._enforce_memory(now)

    def _rooted_now(self, trace: _Open) -> None:
        trace.has_root = True
        self._rootless.pop(trace.trace_id, None)
        self._rooted[trace.trace_id] = None

    def add_logs(
        self,
        events: Sequence[LogEvent],
        tp: TopicPartition,
        offset: int,
        now: float,
        nbytes: int = 0,
        *,
        timestamp_ms: int = -1,
    ) -> None:
        """Take GenAI log events of the record at ``offset`` on ``tp`` (the logs topic); ``nbytes`` and
        ``timestamp_ms`` as in :meth:`add_spans`."""
        self._consumed[tp] = max(self._consumed.get(tp, -1), offset)
        share, extra = divmod(nbytes, len(events)) if events else (0, 0)
        for event in events:
            trace = self._trace_for(event.trace_id, tp, offset, now, timestamp_ms)
            if trace is None:
                self.stats.late_logs += 1
                continue
            trace.logs.append(event)
            charged = share + extra
            extra = 0
            trace.nbytes += charged
            self._open_bytes += charged
        self._enforce_memory(now)

    def mark_consumed(self, tp: TopicPartition, offset: int) -> None:
        """A record with no usable content (dead-lettered, empty) still advances the watermark."""
        self._consumed[tp] = max(self._consumed.get(tp, -1), offset)

    def _trace_for(self, trace_id: str, tp: TopicPartition, offset: int, now: float, timestamp_ms: int) -> _Open | None:
        trace = self._open.get(trace_id)
        if trace is None:
            if trace_id in self._closed:
                return None
            trace = _Open(trace_id, now, now)
            self._open[trace_id] = trace
            self._by_first[trace_id] = None
            self._rootless[trace_id] = None
        else:
            trace.last_activity = now
            order = self._rooted if trace.has_root else self._rootless
            order.move_to_end(trace_id)
        trace.last_offsets[tp] = offset
        if timestamp_ms > trace.last_record_ms:
            trace.last_record_ms = timestamp_ms
        if tp not in trace.first_offsets:
            trace.first_offsets[tp] = offset
            firsts = self._firsts.get(tp)
            if firsts is None:
                firsts = self._firsts[tp] = OrderedDict()
            firsts[trace_id] = offset
            topic = tp[0]
            if not trace.split_counted and sum(1 for t, _ in trace.first_offsets if t == topic) > 1:
                trace.split_counted = True
                self.stats.split_traces += 1
        return trace

    # ------------------------------------------------------------------ output

    def poll(self, now: float, limit: int | None = None) -> list[ClosedTrace]:
        """Close the traces whose rule fires at ``now`` (at most ``limit`` of them, oldest activity first;
        the others close on later calls); return all traces closed since the last poll."""
        limits = self.limits
        budget = len(self._open) if limit is None else limit
        for order, wait, reason in (
            (self._rooted, limits.root_idle_s, "complete"),
            (self._rootless, limits.idle_s, "idle"),
            (self._by_first, limits.max_age_s, "max_age"),
        ):
            due: list[str] = []
            for trace_id in order:
                trace = self._open[trace_id]
                since = trace.first_seen if reason == "max_age" else trace.last_activity
                if len(due) >= budget or now - since < wait:
                    break
                due.append(trace_id)
            for trace_id in due:
                self._close(trace_id, reason, now)  # type: ignore[arg-type]
            budget -= len(due)
        self._forget_closed(now)
        ready, self._ready = self._ready, []
        return ready

    def drain(self, now: float) -> list[ClosedTrace]:
        """Close everything still open (``shutdown``) and return all pending closed traces."""
        for trace_id in list(self._open):
            self._close(trace_id, "shutdown", now)
        ready, self._ready = self._ready, []
        return ready

    def revoke(self, partitions: Iterable[TopicPartition]) -> int:
        """Drop open traces with records on revoked partitions (the new owner re-reads them).

        Returns the number of traces dropped. Closed-but-unpolled traces are kept: the caller polls,
        scores and commits them before giving the partitions up. The closed traces remembered for late spans
        with records on those partitions are forgotten: whatever of them the caller could not store is re-read
        from the watermark (by this member when the partitions come back, or by the new owner), and must be
        assembled again, not taken for late spans (what was stored is recognized as a replay downstream).
        Costs one pass over the remembered closed traces (at most ``max_remembered_closed``).
        """
        lost = set(partitions)
        dropped = [t.trace_id for t in self._open.values() if lost.intersection(t.first_offsets)]
        forgotten = [trace_id for trace_id, (_at, tps) in self._closed.items() if not lost.isdisjoint(tps)]
        for trace_id in forgotten:
            del self._closed[trace_id]
        for trace_id in dropped:
            trace = self._remove(trace_id)
            self._open_spans -= trace.n_spans
            self._open_bytes -= trace.nbytes
        for tp in lost:
            self._consumed.pop(tp, None)
            self._firsts.pop(tp, None)
        self.stats.dropped_traces += len(dropped)
        return len(dropped)

    def committable(self) -> dict[TopicPartition, int]:
        """Per partition, the offset that is safe to commit now (the low watermark). Costs O(partitions +
        closed traces not yet polled), not O(open traces)."""
        low: dict[TopicPartition, int] = {tp: off + 1 for tp, off in self._consumed.items()}
        for tp, firsts in self._firsts.items():
            if firsts and tp in low:
                first = next(iter(firsts.values()))
                if first < low[tp]:
                    low[tp] = first
        for closed in self._ready:  # closed but not yet handed out: not committable either
            for tp, first in closed.first_offsets.items():
                if tp in low and first < low[tp]:
                    low[tp] = first
        return low

    def oldest_open_age(self, now: float) -> float:
        for trace_id in self._by_first:
            return now - self._open[trace_id].first_seen
        return 0.0

    # ------------------------------------------------------------------ internals

    def _remove(self, trace_id: str) -> _Open:
        trace = self._open.pop(trace_id)
        for tp in trace.first_offsets:
            firsts = self._firsts.get(tp)
            if firsts is not None:
                firsts.pop(trace_id, None)
        self._by_first.pop(trace_id, None)
        self._rooted.pop(trace_id, None)
        self._rootless.pop(trace_id, None)
        return trace

    def _close(self, trace_id: str, reason: CloseReason, now: float) -> None:
        trace = self._remove(trace_id)
        self._open_spans -= trace.n_spans
        self._open_bytes -= trace.nbytes
        tps: tuple[TopicPartition, ...]
        if len(trace.first_offsets) == 1:
            (tp,) = trace.first_offsets
            tps = self._one_partition.get(tp) or self._one_partition.setdefault(tp, (tp,))
        else:
            tps = tuple(trace.first_offsets)
        self._closed[trace_id] = (now, tps)
        self._closed.move_to_end(trace_id)
        while len(self._closed) > self.limits.max_remembered_closed:
            self._closed.popitem(last=False)
        self.stats.closed[reason] = self.stats.closed.get(reason, 0) + 1
        if not trace.n_spans:
            self.stats.logs_only_traces += 1
            return
        self._ready.append(
            ClosedTrace(
                trace_id,
                tuple(trace.spans),
                tuple(trace.logs),
                reason,
                trace.first_offsets,
                trace.last_offsets,
                trace.nbytes,
                tuple(trace.deferred),
                trace.flagged,
                trace.last_record_ms,
                trace.n_spans,
            )
        )

    def _enforce_memory(self, now: float) -> None:
        limits = self.limits
        while (self._open_spans > limits.max_open_spans or self._open_bytes > limits.max_open_bytes) and self._by_first:
            oldest = next(iter(self._by_first))
            self._close(oldest, "memory", now)

    def _forget_closed(self, now: float) -> None:
        window = self.limits.late_window_s
        while self._closed:
            closed_at, _tps = next(iter(self._closed.values()))
            if now - closed_at < window:
                break
            self._closed.popitem(last=False)
