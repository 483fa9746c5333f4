"""The store's interface (the contract between the daemon's workers)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

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

    def write(self, results: Sequence[StoredResult]) -> list[bool]:
        """Store ``results`` in one transaction; idempotent on (trace_id, run_id, scorer, scorer_version).

        Returns, per input in order, True iff that result was NEW (inserted by this call), False if it was
        already stored (a replay) or repeats an earlier input of the same call. Under concurrent writers of the
        same key exactly one sees True. Raises :class:`StoreUnavailable` when the database cannot be reached
        (then nothing was written), ``ValueError`` for a result without trace_id or run_id.
        """
        ...

    def purge_older_than(self, cutoff: datetime) -> int:
        """Delete results (and their issues) scored before ``cutoff``, then runs with no result left whose
        last result was scored before ``cutoff``; in bounded batches (short transactions).

        Returns the number of results deleted. Naive datetimes are taken as UTC.
        """
        ...

    def close(self) -> None:
        """Release the connections. The store must not be used afterwards."""
        ...
