"""Workers: rebuild → sample → score closed traces in a pool of worker processes (``workers.processes`` > 0).

In the manner of arroyo's ``RunTaskWithMultiprocessing``: one step in place of the rebuild, sample and score steps,
so a daemon uses the CPUs of its pod before more replicas are added (replicas in one group remain the way to scale
further).

* **In the daemon's process**, each closed trace is triaged first (:func:`~monitor.steps.rebuild.triage`: a replay,
  or a trace none of whose runs could be sampled, goes on at once, nothing sent). The others are gathered into
  batches of ``workers.batch_traces`` (or what came within ``workers.linger_s``) and sent to the pool.
* **In a worker**, :class:`TraceWorker` does to each trace exactly what the three steps do in one process (the
  same functions: :func:`~monitor.steps.rebuild.rebuild_runs`, :func:`~monitor.steps.sample.decide_runs`,
  :func:`~monitor.steps.score.score_rows`, :func:`~monitor.steps.score.keep_scored`): the trace's deferred records
  are decoded there, its runs rebuilt, sampled and scored by the code scorers, and the runs kept to be looked at are
  summarized. A judge the scoring stage would submit is recorded instead (:class:`DeferredJudges`): the judge intake
  (budgets, backlog, leases) lives in the daemon's process, which submits the recorded judges when the trace comes
  back, as the score step does (``Backpressure`` there refuses the trace with the same backoff).
* **Order and offsets.** Results are forwarded in the order the traces were submitted, whatever order the workers
  finish in, so each message's committable offsets stay valid. The payloads are pickled over the pool's pipes (a
  trace goes as its records' bytes; what comes back are the runs and rows the later steps need); a shared-memory
  ring as arroyo's would save one copy of the input, which measured small beside the work.
* **Backpressure.** At ``workers.processes × workers.max_batches`` batches in flight the step refuses traces
  (``workers`` pressure: the run loop pauses fetching and keeps polling).
* **Faults.** A worker that dies (killed, out of memory) breaks the pool: the pool is started again and every batch
  in flight is sent again (their traces are still held here, nothing is lost). A batch that breaks the pool twice
  is not sent a third time: its traces are rejected as ``rebuild_failed`` (counted, offsets move on), so one
  poisonous trace cannot crash-loop the daemon. An exception raised by the work itself rejects the batch's traces
  the same way, with one error line.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import logging
import multiprocessing
import operator
import os
import pickle
import signal
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence, Set
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from monitor.ingest.replay import ReplayGuard
from monitor.rules.ruleset import RuleSet
from monitor.sampling.sampler import Sampler
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import ScoreResult
from monitor.scoring.spec import ScorerSpec
from monitor.scoring.stage import Backpressure, ScoringStage
from monitor.settings import Settings
from monitor.steps.contract import Message, MessageRejected, Step, TopicPartition
from monitor.steps.rebuild import rebuild_runs, triage
from monitor.steps.sample import decide_runs
from monitor.steps.score import Keeper, OwedJudges, append_rows, keep_scored, score_rows
from monitor.steps.work import Backoff, TraceSampling, TraceWork
from monitor.store import KeptRun, OfferedTool, StoredResult
from monitor.store.kept import RunKeeper
from monitor.trajectory.assembler import ClosedTrace
from monitor.trajectory.model import Run

__all__ = [
    "DeferredJudges",
    "JudgeRequest",
    "TraceOutcome",
    "TraceWorker",
    "WorkersStep",
    "crowded_cpus",
    "start_worker",
    "usable_cpus",
]

log = logging.getLogger(__name__)

Work = TraceWork | None


# ---------------------------------------------------------------------------------------------------- worker side


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """A judge submission the scoring stage made in a worker, to be made in the daemon's process."""

    owner: int
    run: Run
    specs: tuple[ScorerSpec, ...]
    flagged: bool
    expectation: Expectation


class DeferredJudges:
    """The scoring stage's judge submitter in a worker: records each submission and decides nothing (returns no
    result, never raises ``Backpressure``)."""

    def __init__(self) -> None:
        self.requests: list[tuple[Run, tuple[ScorerSpec, ...], bool, Expectation]] = []

    def submit(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool, expectation: Expectation
    ) -> Sequence[ScoreResult]:
        self.requests.append((run, tuple(specs), flagged, expectation))
        return ()

    def take(self, runs: Sequence[Run]) -> list[JudgeRequest]:
        """The recorded submissions, each with the index in ``runs`` of the top-level run it belongs to."""
        out: list[JudgeRequest] = []
        for run, specs, flagged, expectation in self.requests:
            owner = next((i for i, top in enumerate(runs) if any(r is run for r in top.walk())), 0)
            out.append(JudgeRequest(owner, run, specs, flagged, expectation))
        self.requests = []
        return out


@dataclass(slots=True)
class TraceOutcome:
    """What a worker sends back for one trace: the fields of :class:`TraceWork` it filled, and the judges to submit."""

    runs: list[Run]
    rejected: str | None
    sampled: list[bool]
    rows: list[StoredResult]
    owners: list[int]
    kept: list[KeptRun]
    tools: list[OfferedTool]
    unrecognized: Counter[str]
    judges: list[JudgeRequest] = field(default_factory=list)


class TraceWorker:
    """Rebuild → sample → score of one closed trace, as the three steps do it (module docstring); one per worker
    process, built from the daemon's settings."""

    def __init__(self, settings: Settings) -> None:
        ruleset = RuleSet.load(settings.rules_file) if settings.rules_file is not None else None
        self.sampler = Sampler(settings.sampling)
        self.judges = DeferredJudges() if settings.judge.enabled else None
        self.stage = ScoringStage(settings, ruleset, self.sampler, lambda: datetime.now(UTC), submitter=self.judges)
        self.keeper: Keeper | None = RunKeeper(settings.store.summaries) if settings.store.summaries.enabled else None
        self.max_depth = settings.rebuild.max_depth
        self.max_agent_depth = settings.rebuild.max_agent_depth

    def handle(self, closed: ClosedTrace) -> TraceOutcome:
        work = TraceWork(closed)
        rebuild_runs(work, self.max_depth, self.max_agent_depth)
        decide_runs(work, self.sampler)
        if work.runs:
            work.rows, work.owners = score_rows(work, self.stage)
            if self.keeper is not None:
                keep_scored(work, self.keeper, time.time())
        judges = self.judges.take(work.runs) if self.judges is not None else []
        return TraceOutcome(
            work.runs,
            work.rejected,
            work.sampled,
            work.rows,
            work.owners,
            work.kept,
            work.tools,
            work.unrecognized,
            judges,
        )


_worker: TraceWorker | None = None


PARENT_CHECK_S = 1.0
"""How often a worker checks that the daemon's process is still its parent."""


def start_worker(settings: Settings) -> None:
    """A worker process's initializer: leave the stopping to the daemon's process, build its :class:`TraceWorker`,
    then move the startup heap out of the collector's way (as the daemon does).

    * SIGINT and SIGTERM are ignored. A terminal's Ctrl-C reaches the whole process group and systemd's default
      ``KillMode`` signals every process of the unit: a worker dying of it would break the pool in the middle of the
      daemon's drain (the pool restarted, its batches sent again or rejected). The daemon's process drains through
      its workers, then shuts the pool down.
    * A worker whose parent is gone (the daemon killed with SIGKILL, or out of memory) exits within
      :data:`PARENT_CHECK_S`: its pipes stay open while the other workers hold them, so it would otherwise wait for
      work forever.
    """
    import gc

    global _worker
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _exit_with_parent(os.getppid())
    _worker = TraceWorker(settings)
    gc.collect()
    gc.freeze()


def _exit_with_parent(parent: int) -> None:
    """Exit this process (at once, nothing to flush: its work is held by the daemon) when ``parent`` stops being its
    parent process."""

    def watch() -> None:
        while True:
            time.sleep(PARENT_CHECK_S)
            if os.getppid() != parent:
                os._exit(0)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def _started() -> int:
    assert _worker is not None, "the worker was not started"
    return os.getpid()


def _handle_batch(batch: list[ClosedTrace]) -> bytes:
    assert _worker is not None, "the worker was not started"
    return compact_dumps([_worker.handle(closed) for closed in batch])


_REDUCERS: dict[type, Callable[[Any], tuple[Any, ...]] | None] = {}


def _reducer(cls: type) -> Callable[[Any], tuple[Any, ...]] | None:
    """A dataclass whose fields are all positional ``__init__`` arguments pickles as ``(cls, field values)``, read
    by one C-level ``attrgetter``; anything else pickles as usual (None)."""
    if not dataclasses.is_dataclass(cls):
        return None
    fields = dataclasses.fields(cls)
    if not fields or any(not f.init or f.kw_only for f in fields):
        return None
    if len(fields) == 1:
        name = fields[0].name
        return lambda obj: (getattr(obj, name),)
    return operator.attrgetter(*(f.name for f in fields))


class _CompactPickler(pickle.Pickler):
    """Pickles the runs and results a worker sends back several times faster than the dataclasses' own
    ``__getstate__`` (which calls ``dataclasses.fields`` for every object)."""

    def reducer_override(self, obj: Any) -> Any:
        cls = type(obj)
        try:
            reduce = _REDUCERS[cls]
        except KeyError:
            reduce = _REDUCERS[cls] = _reducer(cls)
        if reduce is None:
            return NotImplemented
        return cls, reduce(obj)


def compact_dumps(obj: Any) -> bytes:
    """``obj`` pickled with :class:`_CompactPickler` (``pickle.loads`` reads it)."""
    buffer = io.BytesIO()
    _CompactPickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


# ---------------------------------------------------------------------------------------------------- CPUs


def usable_cpus(cgroup: Path = Path("/sys/fs/cgroup")) -> float:
    """The CPUs this process may use: the CPUs it may run on (its affinity), capped by a CPU quota of its cgroup
    (v2 ``cpu.max``, v1 ``cpu/cpu.cfs_quota_us`` over ``cfs_period_us``), which is what Kubernetes makes of a pod's
    CPU limit. ``os.cpu_count()`` counts the node's CPUs instead."""
    cpus = float(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1)
    quota: float | None = None
    with contextlib.suppress(OSError, ValueError):
        limit, period = (cgroup / "cpu.max").read_text().split()[:2]
        if limit != "max":
            quota = int(limit) / int(period)
    if quota is None:
        with contextlib.suppress(OSError, ValueError):
            limit_us = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
            if limit_us > 0:
                quota = limit_us / int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
    return min(cpus, quota) if quota is not None and quota > 0 else cpus


def crowded_cpus(processes: int, cpus: float) -> str | None:
    """The warning for ``workers.processes`` workers on ``cpus`` CPUs, None while the workers do not outnumber the
    CPUs. Past that they only take turns (each holding its own interpreter's memory); up to it they still gain, as
    the daemon's own process is not busy all the time (2 workers on 2 CPUs gave 1.27× one, ``bench/pipeline.py``)."""
    if processes <= cpus:
        return None
    fit = max(1, int(cpus))
    return (
        f"workers.processes is {processes}, but this process may use {cpus:g} CPUs: the workers take turns on them "
        f"and each holds an interpreter's memory. Set workers.processes to {fit}, or give the pod "
        f"{processes + 1} CPUs (workers.processes + 1)"
    )


# ---------------------------------------------------------------------------------------------------- daemon side


class JudgeDecider(Protocol):
    """The daemon's scoring stage, for the judges a worker recorded (:meth:`ScoringStage.judge`)."""

    def judge(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool, expectation: Expectation
    ) -> list[ScoreResult]: ...


@dataclass(slots=True)
class _Batch:
    traces: list[ClosedTrace] = field(default_factory=list)
    entries: list[_Entry] = field(default_factory=list)
    started: float = 0.0
    future: Future[bytes] | None = None
    breaks: int = 0


@dataclass(slots=True)
class _Entry:
    message: Message[Work]
    batch: _Batch | None = None  # None: nothing to do in a worker
    outcome: TraceOutcome | None = None
    applied: bool = False


class WorkersStep:
    """Closed traces → rebuilt, sampled and scored (``TraceWork`` filled as by the rebuild, sample and score steps),
    in worker processes; see the module docstring."""

    def __init__(
        self,
        next_step: Step[Work],
        settings: Settings,
        *,
        guard: ReplayGuard,
        sampling: TraceSampling | None,
        clock: Callable[[], float],
        judges: OwedJudges | None = None,
        decider: JudgeDecider | None = None,
        keeper: Keeper | None = None,
        initializer: Callable[[Settings], None] = start_worker,
        wall: Callable[[], float] = time.time,
    ) -> None:
        w = settings.workers
        if w.processes < 1:
            raise ValueError("workers.processes must be >= 1 for the worker pool")
        self.next = next_step
        self.settings = settings
        self.guard = guard
        self.sampling = sampling
        self.clock = clock
        self.judges = judges
        self.decider = decider
        self.keeper = keeper
        self.initializer = initializer
        self.wall = wall
        self.processes = w.processes
        self.batch_traces = w.batch_traces
        self.linger_s = w.linger_s
        self.max_in_flight = w.processes * w.max_batches
        self.queue: deque[_Entry] = deque()
        self.open: _Batch | None = None
        self.in_flight: list[_Batch] = []
        self.carried: _Entry | None = None
        self.reason = ""
        self._pool: ProcessPoolExecutor | None = None
        self._backoff = Backoff(clock)
        self._refusing = False
        self.restarts = 0

    # ------------------------------------------------------------------ pool

    def _executor(self) -> ProcessPoolExecutor:
        if self._pool is None:
            self._pool = ProcessPoolExecutor(
                max_workers=self.processes,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=self.initializer,
                initargs=(self.settings,),
            )
        return self._pool

    def start(self) -> None:
        """Start every worker process now and wait until each has built its worker (``workers.start_timeout_s``),
        so the first traces do not wait for the imports. Raises ``TimeoutError`` when they do not start in time."""
        pool = self._executor()
        futures = [pool.submit(_started) for _ in range(self.processes * 2)]
        deadline = time.monotonic() + self.settings.workers.start_timeout_s
        pids = set()
        for future in futures:
            pids.add(future.result(timeout=max(0.0, deadline - time.monotonic())))
        log.info("%d worker processes started", len(pids))
        crowded = crowded_cpus(self.processes, usable_cpus())
        if crowded is not None:
            log.warning("%s", crowded)

    def _send(self, batch: _Batch) -> None:
        try:
            batch.future = self._executor().submit(_handle_batch, batch.traces)
        except BrokenProcessPool:
            self._restart()
            batch.future = self._executor().submit(_handle_batch, batch.traces)
        self.in_flight.append(batch)

    def _restart(self) -> None:
        """The pool broke (a worker died): start it again and send every batch in flight again."""
        self.restarts += 1
        log.error(
            "a worker process died: restarting the pool (%d batches in flight are sent again)", len(self.in_flight)
        )
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        self._pool = None
        again, self.in_flight = self.in_flight, []
        for batch in again:
            batch.breaks += 1
            if batch.breaks >= 2:
                log.error(
                    "a batch of %d traces broke the worker pool twice: its traces are rejected", len(batch.traces)
                )
                self._reject(batch)
                continue
            batch.future = self._executor().submit(_handle_batch, batch.traces)
            self.in_flight.append(batch)

    def _reject(self, batch: _Batch) -> None:
        for entry in batch.entries:
            entry.outcome = TraceOutcome([], "rebuild_failed", [], [], [], [], [], Counter())
        batch.future = None

    def _flush_open(self, force: bool) -> None:
        batch = self.open
        if batch is None:
            return
        if force or len(batch.traces) >= self.batch_traces or self.clock() - batch.started >= self.linger_s:
            self.open = None
            self._send(batch)

    def _collect(self, timeout_s: float = 0.0) -> None:
        """Take the results of the batches done (waiting up to ``timeout_s`` for the oldest)."""
        still: list[_Batch] = []
        broken = False
        for i, batch in enumerate(self.in_flight):
            future = batch.future
            assert future is not None
            if i == 0 and timeout_s > 0 and not future.done():
                with contextlib.suppress(TimeoutError):
                    future.exception(timeout=timeout_s)
            if not future.done():
                still.append(batch)
                continue
            try:
                outcomes: list[TraceOutcome] = pickle.loads(future.result())
            except BrokenProcessPool:
                broken = True
                still.append(batch)
                continue
            except Exception as exc:  # the work itself failed: reject the batch's traces, once, loudly
                log.error(
                    "a worker failed on a batch of %d traces: %s: %s",
                    len(batch.traces),
                    type(exc).__name__,
                    str(exc)[:200],
                )
                self._reject(batch)
                continue
            for entry, outcome in zip(batch.entries, outcomes, strict=True):
                entry.outcome = outcome
        self.in_flight = still
        if broken:
            self._restart()

    # ------------------------------------------------------------------ input

    def submit(self, message: Message[Work]) -> None:
        if self.carried is not None:
            raise MessageRejected(self.reason)
        if self._refusing and not self._backoff.due():
            raise MessageRejected("scoring")
        work = message.payload
        if work is None or not triage(work, self.guard, self.sampling):
            self.queue.append(_Entry(message))
            return
        if len(self.in_flight) >= self.max_in_flight and (
            self.open is None or len(self.open.traces) >= self.batch_traces
        ):
            self._collect()
            if len(self.in_flight) >= self.max_in_flight:
                raise MessageRejected("workers")
        if self.open is None:
            self.open = _Batch(started=self.clock())
        entry = _Entry(message, self.open)
        self.open.traces.append(work.closed)
        self.open.entries.append(entry)
        self.queue.append(entry)
        if len(self.open.traces) >= self.batch_traces and len(self.in_flight) < self.max_in_flight:
            self._flush_open(force=True)

    # ------------------------------------------------------------------ output

    def _ready(self, entry: _Entry) -> bool:
        return entry.batch is None or entry.outcome is not None

    def _apply(self, entry: _Entry) -> None:
        """Fill the trace's work from its outcome and submit its recorded judges; raises ``Backpressure``."""
        work = entry.message.payload
        outcome = entry.outcome
        if work is None or outcome is None or entry.applied:
            return
        rows, owners = list(outcome.rows), list(outcome.owners)
        if outcome.judges and self.decider is not None:
            for request in outcome.judges:
                results = self.decider.judge(
                    request.run, request.specs, flagged=request.flagged, expectation=request.expectation
                )
                append_rows(rows, owners, request.owner, outcome.runs[request.owner], results)
        work.runs = outcome.runs
        work.rejected = outcome.rejected
        work.sampled = outcome.sampled
        work.unrecognized = outcome.unrecognized
        work.rows, work.owners = rows, owners
        work.kept, work.tools = outcome.kept, outcome.tools
        if self.judges is not None:
            work.owed = self.judges.drain()
        if self.keeper is not None and len(rows) > len(outcome.rows):
            keep_scored(work, self.keeper, self.wall())  # judge rows only: keep the runs here
        entry.applied = True

    def _forward(self) -> None:
        if self.carried is not None:
            entry, self.carried = self.carried, None
            if not self._pass(entry):
                return
        while self.queue and self._ready(self.queue[0]):
            entry = self.queue[0]
            if self._refusing and not self._backoff.due():
                return
            try:
                self._apply(entry)
            except Backpressure as exc:
                if self.judges is not None:
                    self.judges.drain()
                if not self._refusing:
                    log.warning("scoring refuses work (%s): pausing consumption, retrying with a backoff", exc)
                self._refusing = True
                self._backoff.failed()
                return
            if self._refusing:
                log.info("scoring takes work again: resuming")
                self._refusing = False
                self._backoff.succeeded()
            self.queue.popleft()
            if not self._pass(entry):
                return

    def _pass(self, entry: _Entry) -> bool:
        try:
            self.next.submit(entry.message)
        except MessageRejected as exc:
            self.carried = entry
            self.reason = exc.reason
            return False
        return True

    def poll(self) -> None:
        if len(self.in_flight) < self.max_in_flight:
            self._flush_open(force=False)
        self._collect()
        self._forward()
        self.next.poll()

    def join(self, timeout_s: float) -> None:
        deadline = self.clock() + timeout_s
        self._flush_open(force=True)
        while True:
            self._collect(max(0.0, min(0.05, deadline - self.clock())))
            self._forward()
            if not self.in_flight or self.clock() >= deadline or self.carried is not None:
                break
        self.next.join(max(0.0, deadline - self.clock()))

    def forget(self, partitions: Set[TopicPartition]) -> int:
        dropped = 0
        kept: deque[_Entry] = deque()
        for entry in self.queue:
            work = entry.message.payload
            if work is not None and work.on(partitions):
                dropped += 1
                if entry.batch is not None and entry.batch is self.open:
                    i = entry.batch.entries.index(entry)
                    del entry.batch.entries[i]
                    del entry.batch.traces[i]
            else:
                kept.append(entry)
        self.queue = kept
        if self.open is not None and not self.open.traces:
            self.open = None
        carried = self.carried
        if carried is not None and carried.message.payload is not None and carried.message.payload.on(partitions):
            self.carried = None
            dropped += 1
        return dropped + self.next.forget(partitions)

    def pressure(self) -> frozenset[str]:
        below = self.next.pressure()
        extra = set()
        if len(self.in_flight) >= self.max_in_flight:
            extra.add("workers")
        if self._refusing:
            extra.add("scoring")
        return below | extra if extra else below

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self.next.close()

    def terminate(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None
        self.next.terminate()

    # ------------------------------------------------------------------ introspection

    @property
    def held(self) -> int:
        """Traces in this step (waiting for a batch, in a worker, or done and not yet forwarded)."""
        return sum(1 for e in self.queue if e.message.payload is not None) + (self.carried is not None)

    def worker_pids(self) -> list[int]:
        """The pids of the live worker processes (tests kill one)."""
        pool: Any = self._pool
        if pool is None or pool._processes is None:
            return []
        return [p.pid for p in pool._processes.values() if p.is_alive()]
