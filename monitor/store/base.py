"""The store's interface (the contract between the daemon's workers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from monitor.scoring.result import ScoreResult


@dataclass(frozen=True, slots=True)
class StoredResult:
    """One ScoreResult of one run, ready to store.

    ``result.trace_id`` and ``result.run_id`` must be set (the idempotency key is
    (trace_id, run_id, scorer, scorer_version)). ``run_start_ns`` is the run's start (Unix ns) and ``tools``
    the names of the tools the run called, in call order; both describe the run for reports.
    """

    result: ScoreResult
    run_start_ns: int | None
    tools: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class JudgeJob:
    """A judge verdict owed on one run (table ``judge_jobs``): written with the trace's code results, deleted
    (``settled``) with the verdict, or when it is dropped; a daemon that restarts resumes the jobs it owed.

    ``key`` is the verdict's idempotency key (``trace|run|scorer|version``, the ``results`` unique key);
    ``run`` the run as :func:`monitor.trajectory.serialize.run_to_json` writes it; ``params`` the scorer's.
    A job is written leased to the daemon that owes it (``lease_owner`` until ``lease_until``), so no other
    daemon takes it while that one renews the lease.
    """

    key: str
    trace_id: str
    run_id: str
    agent: str | None
    scorer: str
    scorer_kind: str
    scorer_version: int
    params: Mapping[str, Any]
    run: Mapping[str, Any]
    run_start_ns: int | None
    flagged: bool
    enqueued_at: datetime
    lease_owner: str | None = None
    lease_until: datetime | None = None


@dataclass(frozen=True, slots=True)
class KeptRun:
    """A scored run as it is kept to be looked at (table ``run_summaries``): ``run`` is
    :func:`monitor.trajectory.summary.summarize`'s document; the other fields are copied out of it for listing and
    search. Written only with (or after) a result of the run; deleted with the run."""

    trace_id: str
    run_id: str
    agent: str | None
    user_text: str | None
    final_response: str | None
    status: str
    duration_ms: float | None
    calls: int
    run: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class OfferedTool:
    """A tool definition an agent offered, seen at ``seen_at`` (table ``tool_definitions``)."""

    agent: str
    name: str
    definition_hash: str
    description: str | None
    input_schema: Any
    seen_at: datetime


MarkKind = Literal["trace", "dead_letter"]


@dataclass(frozen=True, slots=True)
class ReplayMark:
    """Work already done on records of ``topic``/``partition`` that a restart may read again.

    ``kind="trace"``: the trace ``ident`` (hex trace id) was handled (stored, skipped or dead-lettered) whole;
    a re-read that sees only its tail must not rebuild it as a new run. ``kind="dead_letter"``: the record at
    offset ``int(ident)`` was dead-lettered and acknowledged; a re-read must not send it again. ``last_offset`` is
    the last record the mark covers on this partition: once the committed offset is past it, the mark can go.
    """

    topic: str
    partition: int
    kind: MarkKind
    ident: str
    last_offset: int


class StoreUnavailable(Exception):
    """The database cannot be reached (or is locked/busy): nothing was written; retry later.

    The run loop pauses its partitions on this error and retries the same batch; the store recovers by itself
    (pooled connections are checked before use) once the database is back.
    """


class SchemaNotCurrent(RuntimeError):
    """The database schema is not at this version's head and ``migrate_on_start`` is off."""


@runtime_checkable
class ResultStore(Protocol):
    """Where scored runs go. Implementations are thread-safe."""

    def write(self, results: Sequence[StoredResult], marks: Sequence[ReplayMark] = ()) -> list[bool]:
        """Store ``results`` and ``marks`` in one transaction; idempotent on (trace_id, run_id, scorer,
        scorer_version) and on the marks' (topic, partition, kind, ident).

        Returns, per input in order, True iff that result was NEW (inserted by this call), False if it was
        already stored (a replay) or repeats an earlier input of the same call. Under concurrent writers of the
        same key exactly one sees True. Raises :class:`StoreUnavailable` when the database cannot be reached
        (then nothing was written), ``ValueError`` for a result without trace_id or run_id.
        """
        ...

    def write_judged(
        self, results: Sequence[StoredResult], *, jobs: Sequence[JudgeJob] = (), settled: Sequence[str] = ()
    ) -> list[bool]:
        """:meth:`write` ``results`` and, in the same transaction, add the judge ``jobs`` owed (a job whose key
        is already a job or already has a result is left out: a replay never owes a verdict twice) and delete the
        jobs whose keys are ``settled`` (their verdict is among ``results``, or they were dropped). Jobs are
        inserted before results are written and settled keys deleted after. Returns :meth:`write`'s flags."""
        ...

    def claim_judge_jobs(
        self, owner: str, now: datetime, lease_until: datetime, limit: int, *, own: bool = False
    ) -> list[JudgeJob]:
        """Take over up to ``limit`` jobs (oldest first) whose lease ended before ``now`` (another daemon stopped
        renewing it) and, with ``own``, the jobs already leased to ``owner`` (a restart of the same daemon): each
        is leased to ``owner`` until ``lease_until``. Raises :class:`StoreUnavailable`."""
        ...

    def renew_judge_jobs(self, owner: str, keys: Sequence[str], lease_until: datetime) -> int:
        """Extend ``owner``'s lease on the jobs ``keys`` to ``lease_until``; returns how many it still holds."""
        ...

    def count_judge_jobs(self) -> int:
        """Jobs owed (every daemon's)."""
        ...

    def load_marks(self, topic: str, partition: int) -> list[ReplayMark]:
        """Every replay mark of ``topic``/``partition``. Raises :class:`StoreUnavailable`."""
        ...

    def forget_marks(self, topic: str, partition: int, below: int) -> int:
        """Delete the marks of ``topic``/``partition`` whose ``last_offset`` is below ``below`` (the committed
        offset: those records are never read again). Returns how many went. Raises :class:`StoreUnavailable`."""
        ...

    def purge_older_than(self, cutoff: datetime) -> int:
        """Delete results (and their issues) scored before ``cutoff``, then runs with no result left whose
        last result was scored before ``cutoff``; in bounded batches (short transactions); and judge jobs
        enqueued before ``cutoff`` (still owed after the retention period: never judged).

        Returns the number of results deleted. Naive datetimes are taken as UTC.
        """
        ...

    def close(self) -> None:
        """Release the connections. The store must not be used afterwards."""
        ...
