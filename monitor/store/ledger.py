"""The Message Batches ledger: which batch holds which judge request (tables ``judge_batches`` and
``judge_batch_requests``, store revision 0003).

A judge request is named by its ``custom_id`` (SHA-256 of ``key#sample#round``,
:func:`monitor.scoring.judges.task.custom_id`), which is deterministic: a process that restarts and prepares the
same run again names the same requests. Before it puts a request into a new batch, the Batches transport
(:mod:`monitor.judging.batches`) asks :meth:`SqlBatchLedger.holding` whether a batch it (or an earlier process)
submitted already holds that ``custom_id``; if so it polls that batch and takes the result from there instead of
paying for the request twice.

Batch status (the ``status`` column):

* ``in_progress`` / ``canceling`` — submitted, not ended: poll it;
* ``ended`` — processing ended; its results can be read (the API keeps them for 29 days);
* ``expired`` — ended, but none of its results is usable (every request ``expired`` or ``canceled``);
* ``lost`` — the API no longer knows the batch (404): its requests must be sent again.

Only the first three are *usable* (:data:`USABLE`). A ``custom_id`` held by several batches (a request sent
again after its batch expired or errored) is held by the most recently submitted usable one.

Everything here is SQLAlchemy Core on the store's engine, identical on SQLite and PostgreSQL; each method is one
transaction. The ledger does not create tables: migrate the database first
(:func:`monitor.store.migrate.upgrade`, or :meth:`SqlBatchLedger.open`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Literal, TypeAlias

import sqlalchemy as sa

from monitor.store.schema import judge_batch_requests, judge_batches

__all__ = [
    "BATCH_STATUSES",
    "ENDED",
    "OPEN",
    "USABLE",
    "BatchPurpose",
    "BatchStatus",
    "LedgerBatch",
    "SqlBatchLedger",
]

BatchStatus: TypeAlias = Literal["in_progress", "canceling", "ended", "expired", "lost"]
BatchPurpose: TypeAlias = Literal["daemon", "eval"]

BATCH_STATUSES: Final[tuple[BatchStatus, ...]] = ("in_progress", "canceling", "ended", "expired", "lost")
OPEN: Final[tuple[BatchStatus, ...]] = ("in_progress", "canceling")
"""Submitted and not ended: to be polled."""
USABLE: Final[tuple[BatchStatus, ...]] = ("in_progress", "canceling", "ended")
"""A batch whose results are (or will be) readable: a request it holds is not sent again."""
ENDED: Final[tuple[BatchStatus, ...]] = ("ended", "expired", "lost")
"""Nothing more will happen to the batch: :meth:`SqlBatchLedger.prune` may forget it."""

_CHUNK: Final = 500
"""Custom ids per ``IN (…)`` (SQLite allows 999 bound parameters per statement in old builds)."""


@dataclass(frozen=True, slots=True)
class LedgerBatch:
    """One row of ``judge_batches``."""

    id: str
    purpose: str
    model: str | None
    requests: int
    status: str
    submitted_at: datetime
    expires_at: datetime | None
    updated_at: datetime | None


def _chunks(items: Sequence[str], size: int = _CHUNK) -> Iterable[Sequence[str]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class SqlBatchLedger:
    """The ledger on ``engine`` (a store engine: :func:`monitor.store.create_store_engine`)."""

    def __init__(self, engine: sa.Engine) -> None:
        self.engine = engine

    @classmethod
    def open(cls, url: str) -> SqlBatchLedger:
        """A ledger on the database at ``url`` (e.g. ``sqlite:///.monitor-eval-batches.sqlite``), migrated to the
        store's head revision first (a new SQLite file is created)."""
        from monitor.store import migrate
        from monitor.store.sql import create_store_engine

        engine = create_store_engine(url)
        try:
            migrate.upgrade(engine)
        except BaseException:
            engine.dispose()
            raise
        return cls(engine)

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self.engine.dispose()

    # ----------------------------------------------------------------- reading

    def holding(self, custom_ids: Iterable[str]) -> dict[str, str]:
        """``custom_id → batch id`` for each of ``custom_ids`` held by a usable batch (:data:`USABLE`): the most
        recently submitted one when several hold it. Ids no usable batch holds are left out."""
        wanted = sorted(set(custom_ids))
        found: dict[str, tuple[datetime, str]] = {}
        if not wanted:
            return {}
        r, b = judge_batch_requests, judge_batches
        with self.engine.connect() as conn:
            for chunk in _chunks(wanted):
                rows = conn.execute(
                    sa.select(r.c.custom_id, b.c.id, b.c.submitted_at)
                    .join(b, b.c.id == r.c.batch_id)
                    .where(r.c.custom_id.in_(chunk), b.c.status.in_(USABLE))
                )
                for custom_id, batch_id, submitted_at in rows:
                    seen = found.get(custom_id)
                    if seen is None or (submitted_at, batch_id) > seen:
                        found[custom_id] = (submitted_at, batch_id)
        return {cid: batch_id for cid, (_, batch_id) in found.items()}

    def batch(self, batch_id: str) -> LedgerBatch | None:
        """The batch ``batch_id``, or None when the ledger does not know it."""
        with self.engine.connect() as conn:
            row = conn.execute(sa.select(judge_batches).where(judge_batches.c.id == batch_id)).mappings().first()
        return None if row is None else _batch(row)

    def custom_ids(self, batch_id: str) -> list[str]:
        """The custom ids of the requests in ``batch_id``, sorted."""
        r = judge_batch_requests
        with self.engine.connect() as conn:
            rows = conn.execute(sa.select(r.c.custom_id).where(r.c.batch_id == batch_id).order_by(r.c.custom_id))
            return [row[0] for row in rows]

    def open_batches(self, purpose: str | None = None) -> list[LedgerBatch]:
        """The batches still processing (:data:`OPEN`), oldest first; of ``purpose`` when given."""
        b = judge_batches
        query = sa.select(b).where(b.c.status.in_(OPEN)).order_by(b.c.submitted_at, b.c.id)
        if purpose is not None:
            query = query.where(b.c.purpose == purpose)
        with self.engine.connect() as conn:
            return [_batch(row) for row in conn.execute(query).mappings()]

    def batches(self, purpose: str | None = None) -> list[LedgerBatch]:
        """Every batch the ledger holds, oldest first; of ``purpose`` when given."""
        b = judge_batches
        query = sa.select(b).order_by(b.c.submitted_at, b.c.id)
        if purpose is not None:
            query = query.where(b.c.purpose == purpose)
        with self.engine.connect() as conn:
            return [_batch(row) for row in conn.execute(query).mappings()]

    # ----------------------------------------------------------------- writing

    def record(
        self,
        batch_id: str,
        purpose: str,
        model: str | None,
        custom_ids: Sequence[str],
        submitted_at: datetime,
        expires_at: datetime | None,
    ) -> None:
        """Record a batch just submitted (status ``in_progress``) and the custom ids it holds, in one
        transaction. Recording the same batch again is a no-op (a retried call after a lost commit answer)."""
        if purpose not in ("daemon", "eval"):
            raise ValueError(f"purpose must be 'daemon' or 'eval', got {purpose!r}")
        ids = list(dict.fromkeys(custom_ids))
        with self.engine.begin() as conn:
            exists = conn.execute(sa.select(judge_batches.c.id).where(judge_batches.c.id == batch_id)).first()
            if exists is not None:
                return
            conn.execute(
                judge_batches.insert().values(
                    id=batch_id,
                    purpose=purpose,
                    model=model,
                    requests=len(ids),
                    status="in_progress",
                    submitted_at=submitted_at,
                    expires_at=expires_at,
                    updated_at=submitted_at,
                )
            )
            if ids:
                conn.execute(judge_batch_requests.insert(), [{"batch_id": batch_id, "custom_id": c} for c in ids])

    def set_status(self, batch_id: str, status: str, at: datetime) -> bool:
        """Set the status of ``batch_id`` (one of :data:`BATCH_STATUSES`) as of ``at``; False when the ledger
        does not know the batch."""
        if status not in BATCH_STATUSES:
            raise ValueError(f"status must be one of {', '.join(BATCH_STATUSES)}, got {status!r}")
        b = judge_batches
        with self.engine.begin() as conn:
            done = conn.execute(sa.update(b).where(b.c.id == batch_id).values(status=status, updated_at=at))
            return bool(done.rowcount)

    def forget(self, batch_id: str) -> bool:
        """Delete ``batch_id`` and its requests; False when the ledger did not know it."""
        with self.engine.begin() as conn:
            conn.execute(sa.delete(judge_batch_requests).where(judge_batch_requests.c.batch_id == batch_id))
            done = conn.execute(sa.delete(judge_batches).where(judge_batches.c.id == batch_id))
            return bool(done.rowcount)

    def prune(self, before: datetime, *, purpose: str | None = None) -> int:
        """Forget the batches that ended (:data:`ENDED`: ``ended``, ``expired``, ``lost``) and were submitted
        before ``before`` (the API keeps a batch's results for 29 days: older ended batches cannot be read any
        more). Batches still processing are kept whatever their age. Returns how many were forgotten."""
        b, r = judge_batches, judge_batch_requests
        old = sa.select(b.c.id).where(b.c.status.in_(ENDED), b.c.submitted_at < before)
        if purpose is not None:
            old = old.where(b.c.purpose == purpose)
        with self.engine.begin() as conn:
            ids = [row[0] for row in conn.execute(old)]
            for chunk in _chunks(ids):
                conn.execute(sa.delete(r).where(r.c.batch_id.in_(chunk)))
                conn.execute(sa.delete(b).where(b.c.id.in_(chunk)))
        return len(ids)


def _batch(row: sa.RowMapping) -> LedgerBatch:
    return LedgerBatch(
        id=row["id"],
        purpose=row["purpose"],
        model=row["model"],
        requests=int(row["requests"]),
        status=row["status"],
        submitted_at=row["submitted_at"],
        expires_at=row["expires_at"],
        updated_at=row["updated_at"],
    )
