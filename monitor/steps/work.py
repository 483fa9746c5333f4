"""What flows through the steps, what they share, and the ports they need from the edges.

Payloads: a :class:`Decoded` record (decode → assemble), then one :class:`TraceWork` per closed trace (assemble →
… → commit) that each step fills in: runs (rebuild), sampling decisions (sample), result rows (score), new-flags
(store). The ports are Protocols so the steps depend on behaviour, not on the store, metrics or health classes.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from monitor.ingest.decode import IndexedTraces
from monitor.ingest.replay import MarkStore
from monitor.judging.pool import PoolJob
from monitor.scoring.result import ScoreResult
from monitor.store import JudgeJob, KeptRun, OfferedTool, ReplayMark, StoredResult
from monitor.trajectory.assembler import ClosedTrace, TopicPartition
from monitor.trajectory.model import Run
from monitor.trajectory.spans import LogEvent, SpanRecord

# ---------------------------------------------------------------------------------------------------- payloads


@dataclass(slots=True)
class Decoded:
    """One record after decoding: its spans or log events, or for a protobuf record on the lazy path its index
    and the undecoded record (``indexed``); all ``None`` when it was dead-lettered or, for a replay, already
    handled. ``nbytes``: its size; ``timestamp_ms``: its Kafka timestamp (-1 unknown); ``flagged``: it holds a
    tool-error marker (:func:`monitor.trajectory.keytable.tool_error_markers`)."""

    tp: TopicPartition
    offset: int
    spans: Sequence[SpanRecord] | None
    logs: Sequence[LogEvent] | None
    nbytes: int
    timestamp_ms: int = -1
    flagged: bool = False
    indexed: IndexedTraces | None = None

    def on(self, partitions: Set[TopicPartition]) -> bool:
        return self.tp in partitions


@dataclass(slots=True)
class TraceWork:
    """One closed trace on its way to the store.

    ``rejected``: ``too_deep`` / ``rebuild_failed`` (rebuild) or ``unstorable`` (store); ``replayed``: handled by
    an earlier reading, nothing to do but move its offsets; ``unsampled``: no run of it could be sampled, so it
    was not rebuilt (the rebuild step's trace-level decision). ``sampled[i]`` is the decision for ``runs[i]``;
    ``owners[j]`` is the index in ``runs`` of the top-level run of ``rows[j]``; ``new[j]`` whether the store
    took ``rows[j]`` as new. ``owed``: judge verdicts the trace's runs are owed (score step), written with its
    rows; ``kept`` and ``tools``: its scored runs as they are kept to be looked at, and the tools they offered.
    """

    closed: ClosedTrace
    runs: list[Run] = field(default_factory=list)
    rejected: str | None = None
    replayed: bool = False
    unsampled: bool = False
    sampled: list[bool] = field(default_factory=list)
    rows: list[StoredResult] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)
    marks: list[ReplayMark] = field(default_factory=list)
    new: list[bool] = field(default_factory=list)
    owed: list[PoolJob] = field(default_factory=list)
    settled: tuple[str, ...] = ()
    kept: list[KeptRun] = field(default_factory=list)
    tools: list[OfferedTool] = field(default_factory=list)
    unrecognized: Counter[str] = field(default_factory=Counter)

    def on(self, partitions: Set[TopicPartition]) -> bool:
        """True when the trace has records on one of ``partitions``."""
        return not partitions.isdisjoint(self.closed.first_offsets)


@dataclass(slots=True)
class VerdictWork:
    """Judge verdicts on their way to the store (judge step → store → observe → export → commit): no consumed
    records, so no offsets, no replay marks and no partition. ``rows[j]`` is a verdict on ``runs[owners[j]]``;
    ``settled`` the keys of the verdicts owed that this write ends (the verdicts stored, and the jobs dropped);
    ``new[j]`` whether the store took ``rows[j]`` as new."""

    runs: list[Run] = field(default_factory=list)
    rows: list[StoredResult] = field(default_factory=list)
    owners: list[int] = field(default_factory=list)
    settled: tuple[str, ...] = ()
    new: list[bool] = field(default_factory=list)

    def on(self, partitions: Set[TopicPartition]) -> bool:
        return False


# ---------------------------------------------------------------------------------------------------- shared


@dataclass(slots=True)
class LoopStats:
    """What this pipeline did (for tests, benchmarks and the exit log line); counters only grow."""

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
    verdicts_new: int = 0


class InFlight:
    """Closed traces between the assembler and the commit (the backlog): count and encoded bytes.

    Each trace is held by identity from :meth:`add` (the assemble step) to :meth:`done` (the commit step), so a
    revocation can drop exactly the traces the steps drop (:meth:`forget`, the same ``on(partitions)`` test as
    ``TraceWork.on``) whichever step was holding them: a trace dropped by the store step during an outage, or by
    the worker step while its batch was in a worker, no longer counts against ``max_held`` / ``max_bytes``.
    ``done`` of a trace already forgotten does nothing."""

    __slots__ = ("_held", "nbytes", "traces")

    def __init__(self) -> None:
        self._held: dict[int, ClosedTrace] = {}
        self.traces = 0
        self.nbytes = 0

    def add(self, closed: ClosedTrace) -> None:
        self._held[id(closed)] = closed
        self.traces += 1
        self.nbytes += closed.nbytes

    def done(self, closed: ClosedTrace) -> None:
        if self._held.pop(id(closed), None) is not None:
            self.traces -= 1
            self.nbytes -= closed.nbytes

    def forget(self, partitions: Set[TopicPartition]) -> int:
        """Stop counting the traces with records on ``partitions`` (revoked); returns how many."""
        lost = [c for c in self._held.values() if not partitions.isdisjoint(c.first_offsets)]
        for closed in lost:
            self.done(closed)
        return len(lost)


# ---------------------------------------------------------------------------------------------------- ports


class PipelineMetrics(Protocol):
    def records_consumed(self, topic: str, partition: int, n: int = 1) -> None: ...
    def spans_decoded(self, n: int) -> None: ...
    def record_invalid(self, reason: str) -> None: ...
    def record_dead_lettered(self, reason: str) -> None: ...
    def dead_letter_error(self, error: str) -> None: ...
    def set_dead_letters_pending(self, n: int) -> None: ...
    def traces_closed(self, outcome: str, n: int = 1) -> None: ...
    def traces_rejected(self, reason: str, n: int = 1) -> None: ...
    def spans_unrecognized(self, scope: str, n: int = 1) -> None: ...
    def replays_skipped(self, kind: str, n: int = 1) -> None: ...
    def late_spans(self, n: int) -> None: ...
    def split_traces(self, n: int) -> None: ...
    def commit_done(self, topic: str, partition: int, when_s: float) -> None: ...
    def set_lag(self, topic: str, partition: int, lag: int) -> None: ...
    def paused(self, on: bool, reason: str) -> None: ...
    def store_write(self, outcome: str, n: int = 1) -> None: ...
    def set_store_available(self, available: bool) -> None: ...
    def runs_sampled(self, decision: str, n: int = 1) -> None: ...
    def traces_unsampled(self, n: int = 1) -> None: ...
    def record_to_result(self, seconds: float) -> None: ...
    def forget_partition(self, topic: str, partition: int) -> None: ...
    def observe_results(self, run: Run, results: Sequence[ScoreResult]) -> None: ...
    def observe_verdicts(self, run: Run, results: Sequence[ScoreResult]) -> None: ...
    def set_open_traces(self, n: int, spans: int, oldest_age_s: float, nbytes: int = 0) -> None: ...


class JudgeStore(Protocol):
    """The judge step's use of the store: resuming and renewing the verdicts owed."""

    def claim_judge_jobs(
        self, owner: str, now: datetime, lease_until: datetime, limit: int, *, own: bool = False
    ) -> list[JudgeJob]: ...
    def renew_judge_jobs(self, owner: str, keys: Sequence[str], lease_until: datetime) -> int: ...


class Store(MarkStore, JudgeStore, Protocol):
    def write(self, results: Sequence[StoredResult], marks: Sequence[ReplayMark] = ()) -> list[bool]: ...
    def write_all(
        self,
        results: Sequence[StoredResult],
        marks: Sequence[ReplayMark] = (),
        *,
        jobs: Sequence[JudgeJob] = (),
        settled: Sequence[str] = (),
        kept: Sequence[KeptRun] = (),
        tools: Sequence[OfferedTool] = (),
    ) -> list[bool]: ...
    def purge_older_than(self, cutoff: datetime) -> int: ...


class Scoring(Protocol):
    def score(self, run: Run) -> list[ScoreResult]: ...


class SamplingPolicy(Protocol):
    """Whether a run is scored (decided once, by the sample step)."""

    def should_score(self, run: Run) -> SamplingVerdict: ...


class TraceSampling(Protocol):
    """The trace-level decision before the rebuild: whether any run of a trace could be sampled.

    ``trace_needed`` must be True whenever :meth:`SamplingPolicy.should_score` could sample a run of the trace
    (``flagged``: a span had status ERROR or a record held a tool-error marker); ``every_trace`` is True when
    it is always True (nothing can be left out); ``needs_error_flags`` whether it reads ``flagged`` at all."""

    def trace_needed(self, trace_id: str, flagged: bool) -> bool: ...
    @property
    def every_trace(self) -> bool: ...
    @property
    def needs_error_flags(self) -> bool: ...


class Sampling(SamplingPolicy, TraceSampling, Protocol):
    """Both decisions (``monitor.sampling.Sampler``)."""


class SamplingVerdict(Protocol):
    @property
    def sampled(self) -> bool: ...


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


class Backoff:
    """A capped exponential retry delay (0.1 s doubling to 5 s) on an injected clock, never a sleep: after
    :meth:`failed` the retry is :meth:`due` once the delay has passed; :meth:`succeeded` starts over."""

    __slots__ = ("clock", "delay_s", "first_s", "max_s", "retry_at")

    def __init__(self, clock: Callable[[], float], first_s: float = 0.1, max_s: float = 5.0) -> None:
        self.clock = clock
        self.first_s = first_s
        self.max_s = max_s
        self.delay_s = first_s
        self.retry_at = 0.0

    def due(self) -> bool:
        return self.clock() >= self.retry_at

    def failed(self) -> None:
        self.retry_at = self.clock() + self.delay_s
        self.delay_s = min(self.delay_s * 2, self.max_s)

    def succeeded(self) -> None:
        self.delay_s = self.first_s
        self.retry_at = 0.0


class StoreAvailability:
    """The store's availability as the steps and the loop see it: the gauge changes on transitions, health hears
    every observation (it measures how long the store has been out)."""

    __slots__ = ("available", "clock", "health", "metrics")

    def __init__(self, metrics: PipelineMetrics, health: Health, clock: Callable[[], float]) -> None:
        self.metrics = metrics
        self.health = health
        self.clock = clock
        self.available = True

    def observe(self, available: bool) -> None:
        if available != self.available:
            self.available = available
            self.metrics.set_store_available(available)
        self.health.set_store_available(available, self.clock())
