"""The SQL result store (SQLAlchemy Core): SQLite (default, one file) or PostgreSQL (several replicas).

Idempotency: ``results`` has a unique key (trace_id, run_id, scorer, scorer_version); :meth:`SqlResultStore.write`
inserts with ``INSERT … ON CONFLICT DO NOTHING RETURNING`` (PostgreSQL, SQLite ≥ 3.35) so the rows returned are
exactly the ones this transaction inserted. On PostgreSQL a concurrent insert of the same key waits for the other
transaction and then does nothing, so exactly one writer sees the key as new. Rows are written in key order
(runs first, then results) so concurrent writers lock in the same order and cannot deadlock each other.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import json
import logging
import math
import os
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql as pg_dialect
from sqlalchemy.dialects import sqlite as sqlite_dialect
from sqlalchemy.pool import StaticPool

from monitor.scoring.result import Issue, ScoreResult
from monitor.store import migrate as migrations
from monitor.store.base import (
    JudgeJob,
    KeptRun,
    OfferedTool,
    ReplayMark,
    SchemaNotCurrent,
    StoredResult,
    StoreUnavailable,
)
from monitor.store.schema import issues, judge_jobs, replay_marks, results, run_summaries, runs, tool_definitions

log = logging.getLogger(__name__)

T = TypeVar("T")
Key = tuple[str, str, str, int]
"""(trace_id, run_id, scorer, scorer_version): the idempotency key of a result."""

_RETRYABLE_SQLSTATES = frozenset({"40001", "40P01"})  # serialization failure, deadlock detected
_RETRIES = 3


def normalise_url(url: str) -> sa.URL:
    """The SQLAlchemy URL to use: ``postgresql://``/``postgres://`` get the psycopg 3 driver."""
    parsed = sa.make_url(url)
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    return parsed


def _is_memory(url: sa.URL) -> bool:
    database = url.database or ""
    return database in ("", ":memory:") or database.startswith("file::memory:") or "mode=memory" in database


def create_store_engine(
    url: str, *, connect_timeout_s: float = 5.0, statement_timeout_s: float = 30.0, busy_timeout_s: float = 10.0
) -> sa.Engine:
    """An engine set up for the store.

    SQLite: WAL journal, ``foreign_keys=ON``, a busy timeout of ``busy_timeout_s``; ``sqlite://`` and
    ``sqlite:///:memory:`` share one connection (StaticPool) so every thread sees the same database.

    PostgreSQL through libpq (psycopg 3, the default, or psycopg2): no call on the engine's connections can block
    without bound, even on a server that neither answers nor drops the connection (frozen, a paused VM, a hung
    host: the kernel still ACKs, so TCP keepalives never fire):

    * connecting gives up after ``connect_timeout_s`` (libpq ``connect_timeout``: whole seconds, at least 2, per
      address the host name resolves to); waiting for a free pooled connection too (``pool_timeout``);
    * a pooled connection is checked (``SELECT 1``) when it is taken from the pool; a check without an answer
      within ``connect_timeout_s`` drops every pooled connection and a new one is made;
    * the server cancels any statement running longer than ``statement_timeout_s`` (``statement_timeout``, sent
      at connection start-up; an ``options`` parameter of the URL is kept and comes after it, so it can override
      it);
    * a connection still taken from the pool ``statement_timeout_s`` + 1 s after it was taken (the server did not
      cancel: it cannot act) has its socket shut down by a watchdog thread: the blocked call fails with an
      ``OperationalError`` and the connection is discarded. Connections are meant to be held for one transaction.
    """
    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        memory = _is_memory(parsed)
        if memory:
            engine = sa.create_engine(
                parsed, poolclass=StaticPool, connect_args={"check_same_thread": False, "timeout": busy_timeout_s}
            )
        else:
            engine = sa.create_engine(parsed, connect_args={"check_same_thread": False, "timeout": busy_timeout_s})

        @sa.event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("PRAGMA foreign_keys=ON")
                cursor.execute(f"PRAGMA busy_timeout={int(busy_timeout_s * 1000)}")
                if not memory:
                    cursor.execute("PRAGMA journal_mode=WAL")
                    cursor.execute("PRAGMA synchronous=NORMAL")
            finally:
                cursor.close()

        return engine
    timeout_arg = {"connect_timeout": max(1, math.ceil(connect_timeout_s))}
    if parsed.get_backend_name() != "postgresql" or parsed.get_driver_name() not in ("psycopg", "psycopg2"):
        # a driver without libpq (or not PostgreSQL, which the store refuses): no socket to watch, as before
        connect_args = timeout_arg if parsed.get_backend_name() == "postgresql" else {}
        return sa.create_engine(parsed, pool_pre_ping=True, pool_timeout=connect_timeout_s, connect_args=connect_args)
    options = f"-c statement_timeout={max(1, round(statement_timeout_s * 1000))}"
    given = parsed.query.get("options")
    if given:
        options += " " + (given if isinstance(given, str) else " ".join(given))
    engine = sa.create_engine(parsed, pool_timeout=connect_timeout_s, connect_args={**timeout_arg, "options": options})
    _bound_postgres_connections(engine, connect_timeout_s=connect_timeout_s, statement_timeout_s=statement_timeout_s)
    return engine


# --- conversion ---------------------------------------------------------------------------------------------


def _text(value: str) -> str:
    """PostgreSQL text cannot hold NUL: replaced (identically on every backend) by U+FFFD."""
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def _opt_text(value: str | None) -> str | None:
    return None if value is None else _text(str(value))


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data, identical on every backend.

    Dicts get string keys; tuples, lists, sets become lists; enums their value; dataclasses dicts; dates ISO
    text; NaN and infinities ``None``; NUL characters U+FFFD; anything else its ``str()``.
    """
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, Mapping):
        return {_text(str(k)): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((jsonable(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    return _text(str(value))


def parse_timestamp(value: str | None) -> datetime:
    """An RFC 3339 timestamp as an aware UTC datetime; None → now. Naive timestamps are taken as UTC."""
    if value is None:
        return datetime.now(UTC)
    parsed = datetime.fromisoformat(value)
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _expected_tool(issue: Issue) -> str | None:
    detail = issue.detail
    if isinstance(detail, Mapping) and isinstance(detail.get("expected_tool"), str):
        return _text(detail["expected_tool"])
    expected = issue.expected
    if str(issue.kind) == "wrong_tool" and isinstance(expected, Mapping) and isinstance(expected.get("name"), str):
        return _text(expected["name"])
    return None


def _issue_row(issue: Issue) -> dict[str, Any]:
    return {
        "kind": str(issue.kind),
        "severity": str(issue.severity),
        "tool": _opt_text(issue.tool),
        "parameter": _opt_text(issue.parameter),
        "call_index": issue.call_index,
        "call_id": _opt_text(issue.call_id),
        "turn": issue.turn,
        "expected_tool": _expected_tool(issue),
        "expected": jsonable(issue.expected),
        "actual": jsonable(issue.actual),
        "detail": jsonable(issue.detail),
    }


@dataclasses.dataclass(frozen=True, slots=True)
class _Prepared:
    key: Key
    run_key: tuple[str, str]
    result_row: dict[str, Any]
    issue_rows: list[dict[str, Any]]
    run_row: dict[str, Any]


_PARAMS_CACHE: dict[str, Any] = {}
_PARAMS_CACHE_MAX = 4096


def _params_json(params_hash: str, params: Mapping[str, Any]) -> Any:
    """A scorer instance's parameters are the same on every result it returns: convert them once per
    ``params_hash`` (the hash of their canonical JSON, so equal hashes mean equal parameters)."""
    if not params_hash:
        return jsonable(params)
    cached = _PARAMS_CACHE.get(params_hash)
    if cached is None:
        if len(_PARAMS_CACHE) >= _PARAMS_CACHE_MAX:
            _PARAMS_CACHE.clear()
        cached = _PARAMS_CACHE[params_hash] = jsonable(params)
    return cached


def _prepare(item: StoredResult) -> _Prepared:
    res: ScoreResult = item.result
    if not res.trace_id or not res.run_id:
        raise ValueError(f"result of scorer {res.scorer!r} has no trace_id/run_id: it cannot be stored")
    trace_id, run_id, scorer = _text(res.trace_id), _text(res.run_id), _text(res.scorer)
    scored_at = parse_timestamp(res.scored_at)
    agent = _opt_text(res.agent)
    start_time = datetime.fromtimestamp(item.run_start_ns / 1e9, tz=UTC) if item.run_start_ns is not None else None
    result_row = {
        "trace_id": trace_id,
        "run_id": run_id,
        "agent": agent,
        "scorer": scorer,
        "scorer_version": int(res.scorer_version),
        "scorer_kind": _text(res.scorer_kind),
        "params_hash": _text(res.params_hash),
        "params": _params_json(res.params_hash, res.params),
        "status": res.status,
        "score": res.score if res.score is None or math.isfinite(res.score) else None,
        "threshold": res.threshold,
        "passed": res.passed,
        "reason": _opt_text(res.reason),
        "degraded": _opt_text(res.degraded),
        "details": jsonable(res.details),
        "judge": jsonable(res.judge) if res.judge is not None else None,
        "scored_at": scored_at,
    }
    run_row = {
        "trace_id": trace_id,
        "run_id": run_id,
        "agent": agent,
        "conversation_id": _opt_text(res.conversation_id),
        "start_time": start_time,
        "tools": [_text(t) for t in item.tools],
        "first_scored_at": scored_at,
        "last_scored_at": scored_at,
    }
    return _Prepared(
        key=(trace_id, run_id, scorer, int(res.scorer_version)),
        run_key=(trace_id, run_id),
        result_row=result_row,
        issue_rows=[_issue_row(i) for i in res.issues],
        run_row=run_row,
    )


def _mark_rows(marks: Sequence[ReplayMark]) -> list[dict[str, Any]]:
    """Rows of the ``replay_marks`` table, one per distinct key, in key order (lock order across writers)."""
    now = datetime.now(UTC)
    rows: dict[tuple[str, int, str, str], dict[str, Any]] = {}
    for m in marks:
        key = (m.topic, m.partition, m.kind, m.ident)
        known = rows.get(key)
        if known is None or m.last_offset > known["last_offset"]:
            rows[key] = {
                "topic": m.topic,
                "partition": m.partition,
                "kind": m.kind,
                "ident": m.ident,
                "last_offset": m.last_offset,
                "marked_at": now,
            }
    return [rows[k] for k in sorted(rows)]


@dataclasses.dataclass(frozen=True, slots=True)
class _Extras:
    kept: list[dict[str, Any]]
    tools: list[dict[str, Any]]


def _kept_rows(kept: Sequence[KeptRun]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for k in kept:
        rows.setdefault(
            (_text(k.trace_id), _text(k.run_id)),
            {
                "trace_id": _text(k.trace_id),
                "run_id": _text(k.run_id),
                "agent": _opt_text(k.agent),
                "user_text": _opt_text(k.user_text),
                "final_response": _opt_text(k.final_response),
                "status": k.status,
                "duration_ms": k.duration_ms if k.duration_ms is None or math.isfinite(k.duration_ms) else None,
                "calls": k.calls,
                "run": jsonable(dict(k.run)),
            },
        )
    return [rows[key] for key in sorted(rows)]


def _tool_rows(tools: Sequence[OfferedTool]) -> list[dict[str, Any]]:
    rows: dict[tuple[str, str, str], dict[str, Any]] = {}
    for t in tools:
        key = (_text(t.agent), _text(t.name), t.definition_hash)
        known = rows.get(key)
        if known is not None:
            known["last_seen"] = max(known["last_seen"], t.seen_at)
            known["first_seen"] = min(known["first_seen"], t.seen_at)
            continue
        rows[key] = {
            "agent": key[0],
            "name": key[1],
            "definition_hash": t.definition_hash,
            "description": _opt_text(t.description),
            "input_schema": jsonable(t.input_schema),
            "first_seen": t.seen_at,
            "last_seen": t.seen_at,
        }
    return [rows[key] for key in sorted(rows)]


def _job_rows(jobs: Sequence[JudgeJob]) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for job in jobs:
        rows.setdefault(
            job.key,
            {
                "key": _text(job.key),
                "trace_id": job.trace_id,
                "run_id": job.run_id,
                "agent": _opt_text(job.agent),
                "scorer": _text(job.scorer),
                "scorer_kind": job.scorer_kind,
                "scorer_version": job.scorer_version,
                "params": jsonable(dict(job.params)),
                "run": jsonable(dict(job.run)),
                "run_start_ns": job.run_start_ns,
                "flagged": job.flagged,
                "enqueued_at": job.enqueued_at,
                "lease_owner": job.lease_owner,
                "lease_until": job.lease_until,
                "attempts": 0,
            },
        )
    return [rows[key] for key in sorted(rows)]


def _job_from_row(row: Any) -> JudgeJob:
    return JudgeJob(
        key=row.key,
        trace_id=row.trace_id,
        run_id=row.run_id,
        agent=row.agent,
        scorer=row.scorer,
        scorer_kind=row.scorer_kind,
        scorer_version=row.scorer_version,
        params=row.params or {},
        run=row.run or {},
        run_start_ns=row.run_start_ns,
        flagged=bool(row.flagged),
        enqueued_at=row.enqueued_at,
        lease_owner=row.lease_owner,
        lease_until=row.lease_until,
    )


def _merge_run(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    merged = dict(a)
    merged["first_scored_at"] = min(a["first_scored_at"], b["first_scored_at"])
    merged["last_scored_at"] = max(a["last_scored_at"], b["last_scored_at"])
    for column in ("agent", "conversation_id", "start_time"):
        if merged[column] is None:
            merged[column] = b[column]
    if not merged["tools"]:
        merged["tools"] = b["tools"]
    return merged


def _b(name: str) -> sa.BindParameter[Any]:
    return sa.bindparam(f"b_{name}", type_=runs.c[name].type)


_RUN_UPDATE = (
    sa.update(runs)
    .where(runs.c.trace_id == _b("trace_id"), runs.c.run_id == _b("run_id"))
    .values(
        first_scored_at=sa.case(
            (_b("first_scored_at") < runs.c.first_scored_at, _b("first_scored_at")), else_=runs.c.first_scored_at
        ),
        last_scored_at=sa.case(
            (_b("last_scored_at") > runs.c.last_scored_at, _b("last_scored_at")), else_=runs.c.last_scored_at
        ),
        agent=sa.func.coalesce(runs.c.agent, _b("agent")),
        conversation_id=sa.func.coalesce(runs.c.conversation_id, _b("conversation_id")),
        start_time=sa.func.coalesce(runs.c.start_time, _b("start_time")),
    )
)
"""Widen a pre-existing run with the new results of a write (bind names: ``b_`` + column)."""


# --- the store ----------------------------------------------------------------------------------------------


class SqlResultStore:
    """:class:`~monitor.store.base.ResultStore` on SQLite or PostgreSQL (thread-safe).

    ``purge_batch`` bounds the rows one retention transaction deletes.
    """

    def __init__(
        self,
        url: str,
        *,
        purge_batch: int = 1000,
        connect_timeout_s: float = 5.0,
        statement_timeout_s: float = 30.0,
        engine: sa.Engine | None = None,
    ) -> None:
        """Open (lazily: nothing connects yet) the store at ``url``, or on ``engine`` when given.

        PostgreSQL: every call gives up with :class:`StoreUnavailable` instead of blocking, even on a frozen
        server: connecting after ``connect_timeout_s``, a transaction after ``statement_timeout_s`` (+ 1 s), so one
        call blocks for about ``statement_timeout_s + connect_timeout_s`` at most (see :func:`create_store_engine`;
        an ``engine`` given is used as it is).

        SQLite file: the file's identity (device, inode) is remembered when it is first opened. Before and after
        every transaction the file at the path must still be that one: if it vanished (its directory removed or
        moved) or was replaced, the call raises :class:`StoreUnavailable` (also after a commit that raced with the
        removal: what it wrote is not reported as stored) and no new file is created at the path. The store works
        again once the same file is back at the path; if it is gone for good, a new process (a restart) creates and
        migrates a new file.
        """
        if purge_batch < 1:
            raise ValueError("purge_batch must be >= 1")
        self.url = normalise_url(url)
        self.engine = engine or create_store_engine(
            url, connect_timeout_s=connect_timeout_s, statement_timeout_s=statement_timeout_s
        )
        self.dialect = self.engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {self.dialect!r}: use sqlite or postgresql")
        self._file = _SqliteFile.watch(self.engine)
        self.purge_batch = purge_batch
        # SQLite has one writer at a time anyway; serialising here keeps the shared in-memory connection safe.
        self._lock: contextlib.AbstractContextManager[Any] = (
            threading.RLock() if self.dialect == "sqlite" else contextlib.nullcontext()
        )

    def __repr__(self) -> str:
        return f"SqlResultStore({self.url.render_as_string(hide_password=True)!r})"

    # --- schema -----------------------------------------------------------------------------------------------
    def migrate(self) -> None:
        """Bring the schema to this version's head (no-op when current). Raises StoreUnavailable."""
        with self._lock, _unavailable_on_connection_errors():
            migrations.upgrade(self.engine)

    def check_schema(self) -> None:
        """Raise :class:`SchemaNotCurrent` unless the database is at this version's head revision."""
        with self._lock, _unavailable_on_connection_errors():
            current = migrations.current_revision(self.engine)
        head = migrations.head_revision()
        if current != head:
            raise SchemaNotCurrent(
                f"store schema is at {current or 'nothing'}, this version needs {head}: enable store.migrate_on_start"
            )

    # --- writes -----------------------------------------------------------------------------------------------
    def _insert(self) -> Callable[[sa.Table], Any]:
        return pg_dialect.insert if self.dialect == "postgresql" else sqlite_dialect.insert

    def write(self, results: Sequence[StoredResult], marks: Sequence[ReplayMark] = ()) -> list[bool]:
        """See :meth:`monitor.store.base.ResultStore.write`."""
        return self._write(results, marks, (), ())

    def write_judged(
        self, results: Sequence[StoredResult], *, jobs: Sequence[JudgeJob] = (), settled: Sequence[str] = ()
    ) -> list[bool]:
        """See :meth:`monitor.store.base.ResultStore.write_judged`."""
        return self._write(results, (), jobs, settled)

    def write_all(
        self,
        results: Sequence[StoredResult],
        marks: Sequence[ReplayMark] = (),
        *,
        jobs: Sequence[JudgeJob] = (),
        settled: Sequence[str] = (),
        kept: Sequence[KeptRun] = (),
        tools: Sequence[OfferedTool] = (),
    ) -> list[bool]:
        """:meth:`write` and :meth:`write_judged` in one transaction (the pipeline's store step), with the runs
        ``kept`` to be looked at (only those with a result in this write are kept; a run kept before stays as it
        was) and the tool definitions its runs offered (``last_seen`` moves forward)."""
        return self._write(results, marks, jobs, settled, kept, tools)

    def _write(
        self,
        results: Sequence[StoredResult],
        marks: Sequence[ReplayMark],
        jobs: Sequence[JudgeJob],
        settled: Sequence[str],
        kept: Sequence[KeptRun] = (),
        tools: Sequence[OfferedTool] = (),
    ) -> list[bool]:
        mark_rows = _mark_rows(marks)
        job_rows = _job_rows(jobs)
        settled_keys = sorted(set(settled))
        extras = _Extras(_kept_rows(kept), _tool_rows(tools))
        if not results:
            if mark_rows or job_rows or settled_keys or extras.tools:
                self._retrying(lambda: self._write_once([], [], mark_rows, job_rows, settled_keys, extras))
            return []
        prepared = [_prepare(item) for item in results]
        first_of: dict[Key, int] = {}
        for index, item in enumerate(prepared):
            first_of.setdefault(item.key, index)
        unique = sorted((prepared[i] for i in first_of.values()), key=lambda p: p.key)
        run_rows: dict[tuple[str, str], dict[str, Any]] = {}
        for item in unique:
            known = run_rows.get(item.run_key)
            run_rows[item.run_key] = item.run_row if known is None else _merge_run(known, item.run_row)
        ordered_runs = [run_rows[k] for k in sorted(run_rows)]

        new_ids = self._retrying(
            lambda: self._write_once(ordered_runs, unique, mark_rows, job_rows, settled_keys, extras)
        )
        return [item.key in new_ids and first_of[item.key] == index for index, item in enumerate(prepared)]

    # --- judge jobs -------------------------------------------------------------------------------------------
    def _insert_jobs(self, conn: sa.Connection, job_rows: list[dict[str, Any]]) -> None:
        """Insert jobs owed, leaving out keys already owed or already judged (a result exists)."""
        keys = [(r["trace_id"], r["run_id"], r["scorer"], r["scorer_version"]) for r in job_rows]
        judged: set[tuple[str, str, str, int]] = set()
        for start in range(0, len(keys), 200):
            chunk = keys[start : start + 200]
            query = sa.select(results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version).where(
                sa.tuple_(results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version).in_(chunk)
            )
            judged.update((r.trace_id, r.run_id, r.scorer, r.scorer_version) for r in conn.execute(query))
        fresh = [row for row, key in zip(job_rows, keys, strict=True) if key not in judged]
        if fresh:
            conn.execute(self._insert()(judge_jobs).on_conflict_do_nothing(index_elements=[judge_jobs.c.key]), fresh)

    def claim_judge_jobs(
        self, owner: str, now: datetime, lease_until: datetime, limit: int, *, own: bool = False
    ) -> list[JudgeJob]:
        """See :meth:`monitor.store.base.ResultStore.claim_judge_jobs`. On PostgreSQL the candidates are locked
        with ``FOR UPDATE SKIP LOCKED`` and the lease is checked again on the locked row, so two daemons claiming
        at once never take the same job."""
        if limit <= 0:
            return []
        free = judge_jobs.c.lease_until.is_(None) | (judge_jobs.c.lease_until < now)
        claimable = (free | (judge_jobs.c.lease_owner == owner)) if own else free
        candidates = sa.select(judge_jobs.c.key).where(claimable).order_by(judge_jobs.c.enqueued_at).limit(limit)
        if self.dialect == "postgresql":
            candidates = candidates.with_for_update(skip_locked=True)
        statement = (
            sa.update(judge_jobs)
            .where(judge_jobs.c.key.in_(candidates.scalar_subquery()), claimable)
            .values(lease_owner=owner, lease_until=lease_until)
            .returning(*judge_jobs.c)
        )

        def claim() -> list[JudgeJob]:
            with self.engine.begin() as conn:
                rows = conn.execute(statement).all()
            return sorted((_job_from_row(row) for row in rows), key=lambda j: (j.enqueued_at, j.key))

        return self._retrying(claim)

    def renew_judge_jobs(self, owner: str, keys: Sequence[str], lease_until: datetime) -> int:
        """See :meth:`monitor.store.base.ResultStore.renew_judge_jobs`."""
        if not keys:
            return 0
        ordered = sorted(set(keys))

        def renew() -> int:
            total = 0
            with self.engine.begin() as conn:
                for start in range(0, len(ordered), 500):
                    statement = (
                        sa.update(judge_jobs)
                        .where(judge_jobs.c.key.in_(ordered[start : start + 500]), judge_jobs.c.lease_owner == owner)
                        .values(lease_until=lease_until)
                    )
                    total += conn.execute(statement).rowcount
            return total

        return self._retrying(renew)

    def count_judge_jobs(self) -> int:
        """See :meth:`monitor.store.base.ResultStore.count_judge_jobs`."""

        def count() -> int:
            with self.engine.connect() as conn:
                return int(conn.execute(sa.select(sa.func.count()).select_from(judge_jobs)).scalar_one())

        return self._retrying(count)

    def _write_marks(self, mark_rows: list[dict[str, Any]], conn: sa.Connection | None = None) -> None:
        """Insert replay marks (already present ones are kept as they are)."""
        if conn is None:
            with self.engine.begin() as own:
                self._write_marks(mark_rows, own)
            return
        if self.dialect == "postgresql":
            _pg_unnest_insert(conn, replay_marks, mark_rows, conflict=["topic", "partition", "kind", "ident"])
        else:
            conn.execute(self._insert()(replay_marks).on_conflict_do_nothing(), mark_rows)

    def load_marks(self, topic: str, partition: int) -> list[ReplayMark]:
        """See :meth:`monitor.store.base.ResultStore.load_marks`."""
        query = sa.select(replay_marks.c.kind, replay_marks.c.ident, replay_marks.c.last_offset).where(
            replay_marks.c.topic == topic, replay_marks.c.partition == partition
        )

        def load() -> list[ReplayMark]:
            with self.engine.connect() as conn:
                return [
                    ReplayMark(topic, partition, row.kind, row.ident, row.last_offset) for row in conn.execute(query)
                ]

        return self._retrying(load)

    def forget_marks(self, topic: str, partition: int, below: int) -> int:
        """See :meth:`monitor.store.base.ResultStore.forget_marks`."""
        statement = sa.delete(replay_marks).where(
            replay_marks.c.topic == topic,
            replay_marks.c.partition == partition,
            replay_marks.c.last_offset < below,
        )

        def forget() -> int:
            with self.engine.begin() as conn:
                return conn.execute(statement).rowcount

        return self._retrying(forget)

    def _write_once(
        self,
        run_rows: list[dict[str, Any]],
        unique: list[_Prepared],
        mark_rows: list[dict[str, Any]],
        job_rows: list[dict[str, Any]],
        settled: list[str],
        extras: _Extras | None = None,
    ) -> dict[Key, int]:
        insert = self._insert()
        run_stmt = (
            insert(runs)
            .on_conflict_do_nothing(index_elements=[runs.c.trace_id, runs.c.run_id])
            .returning(runs.c.trace_id, runs.c.run_id)
        )
        result_stmt = (
            insert(results)
            .on_conflict_do_nothing(
                index_elements=[results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version]
            )
            .returning(results.c.id, results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version)
        )
        postgres = self.dialect == "postgresql"
        with self.engine.begin() as conn:
            # 0. judge verdicts owed (before results: a verdict in this batch settles its own job below)
            if job_rows:
                self._insert_jobs(conn, job_rows)
            if not unique:
                if mark_rows:
                    self._write_marks(mark_rows, conn)
                if settled:
                    conn.execute(sa.delete(judge_jobs).where(judge_jobs.c.key.in_(settled)))
                if extras is not None:
                    self._write_tools(conn, extras.tools)
                return {}
            # 1. runs not seen before (their results in this batch are all new: results reference runs)
            if postgres:
                run_keys = ["trace_id", "run_id"]
                created = set(_pg_unnest_insert(conn, runs, run_rows, conflict=run_keys, returning=run_keys))
            else:
                created = {(row.trace_id, row.run_id) for row in conn.execute(run_stmt, run_rows)}
            # 2. results; the rows returned are exactly the ones inserted now
            result_rows = [p.result_row for p in unique]
            inserted: Sequence[Any]
            if postgres:
                key_cols = ["trace_id", "run_id", "scorer", "scorer_version"]
                inserted = [
                    _KeyRow(*row)
                    for row in _pg_unnest_insert(
                        conn, results, result_rows, conflict=key_cols, returning=["id", *key_cols]
                    )
                ]
            else:
                inserted = conn.execute(result_stmt, result_rows).all()
            new_ids: dict[Key, int] = {
                (row.trace_id, row.run_id, row.scorer, row.scorer_version): row.id for row in inserted
            }
            # 3. runs seen before: widen first/last scored_at and fill blanks from their NEW results only
            updates: dict[tuple[str, str], dict[str, Any]] = {}
            for p in unique:
                if p.key in new_ids and p.run_key not in created:
                    known = updates.get(p.run_key)
                    updates[p.run_key] = p.run_row if known is None else _merge_run(known, p.run_row)
            if updates:
                conn.execute(_RUN_UPDATE, [{f"b_{k}": v for k, v in updates[key].items()} for key in sorted(updates)])
            issue_rows = [
                {"result_id": new_ids[p.key], **row} for p in unique if p.key in new_ids for row in p.issue_rows
            ]
            if issue_rows:
                if postgres:
                    _pg_unnest_insert(conn, issues, issue_rows)
                else:
                    conn.execute(sa.insert(issues), issue_rows)
            if mark_rows:
                self._write_marks(mark_rows, conn)
            # 4. judge jobs settled (their verdict is written above, or they were dropped)
            if settled:
                conn.execute(sa.delete(judge_jobs).where(judge_jobs.c.key.in_(settled)))
            # 5. the runs kept to be looked at (runs of this write only: the rows exist), the tools they offered
            if extras is not None:
                written = {(row["trace_id"], row["run_id"]) for row in run_rows}
                kept = [row for row in extras.kept if (row["trace_id"], row["run_id"]) in written]
                if kept:
                    keys = [run_summaries.c.trace_id, run_summaries.c.run_id]
                    conn.execute(self._insert()(run_summaries).on_conflict_do_nothing(index_elements=keys), kept)
                self._write_tools(conn, extras.tools)
        return new_ids

    def _write_tools(self, conn: sa.Connection, rows: list[dict[str, Any]]) -> None:
        """Insert new tool definitions; a known one gets the later ``last_seen``."""
        if not rows:
            return
        insert = self._insert()(tool_definitions)
        upsert = insert.on_conflict_do_update(
            index_elements=[tool_definitions.c.agent, tool_definitions.c.name, tool_definitions.c.definition_hash],
            set_={
                "last_seen": sa.case(
                    (insert.excluded.last_seen > tool_definitions.c.last_seen, insert.excluded.last_seen),
                    else_=tool_definitions.c.last_seen,
                )
            },
        )
        conn.execute(upsert, rows)

    def _retrying(self, action: Callable[[], T]) -> T:
        """Run one transaction, retried on deadlock/serialization failures; connection errors → StoreUnavailable.

        On a SQLite file the file must still be at its path once the transaction ended, else StoreUnavailable:
        a commit into a file that is no longer there must not count as stored (the caller retries it later).
        """
        for attempt in range(_RETRIES):
            try:
                with self._lock, _unavailable_on_connection_errors():
                    outcome = action()
                    if self._file is not None:
                        self._file.check(after=True)
                    return outcome
            except StoreUnavailable as exc:
                cause = exc.__cause__
                orig = getattr(cause, "orig", None)
                if getattr(orig, "sqlstate", None) in _RETRYABLE_SQLSTATES and attempt < _RETRIES - 1:
                    log.info("store transaction conflict, retrying: %s", orig)
                    continue
                raise
        raise AssertionError("unreachable")

    # --- retention --------------------------------------------------------------------------------------------
    def purge_older_than(self, cutoff: datetime) -> int:
        """See :meth:`monitor.store.base.ResultStore.purge_older_than`; issues go with their result (cascade)."""
        cutoff = cutoff.replace(tzinfo=UTC) if cutoff.tzinfo is None else cutoff.astimezone(UTC)
        batch = self.purge_batch
        old_results = (
            sa.select(results.c.id).where(results.c.scored_at < cutoff).order_by(results.c.id).limit(batch)
        ).scalar_subquery()
        delete_results = sa.delete(results).where(results.c.id.in_(old_results))
        has_results = (
            sa.select(sa.literal(1))
            .where(results.c.trace_id == runs.c.trace_id, results.c.run_id == runs.c.run_id)
            .exists()
        )
        old_runs = (
            sa.select(runs.c.trace_id, runs.c.run_id).where(runs.c.last_scored_at < cutoff, ~has_results).limit(batch)
        )
        delete_runs = sa.delete(runs).where(sa.tuple_(runs.c.trace_id, runs.c.run_id).in_(old_runs))

        def one_batch(statement: sa.Delete) -> int:
            with self.engine.begin() as conn:
                return conn.execute(statement).rowcount

        deleted = 0
        while True:
            n = self._retrying(lambda: one_batch(delete_results))
            deleted += n
            if n < batch:
                break
        while self._retrying(lambda: one_batch(delete_runs)) >= batch:
            pass
        self._retrying(lambda: one_batch(sa.delete(judge_jobs).where(judge_jobs.c.enqueued_at < cutoff)))
        self._retrying(lambda: one_batch(sa.delete(tool_definitions).where(tool_definitions.c.last_seen < cutoff)))
        return deleted

    def close(self) -> None:
        """Dispose of the engine's connections."""
        self.engine.dispose()

    def __enter__(self) -> SqlResultStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True, slots=True)
class _KeyRow:
    id: int
    trace_id: str
    run_id: str
    scorer: str
    scorer_version: int


_PG_TYPES: dict[tuple[str, str], str] = {}


def _pg_array_type(table: sa.Table, column: str, dialect: sa.Dialect) -> str:
    """The PostgreSQL element type to ``unnest`` a column's values as (JSON travels as text, then cast)."""
    key = (table.name, column)
    cached = _PG_TYPES.get(key)
    if cached is None:
        col_type = table.c[column].type
        cached = "text" if isinstance(col_type, sa.JSON) else col_type.compile(dialect=dialect)
        _PG_TYPES[key] = cached
    return cached


def _pg_value(table: sa.Table, column: str, value: Any) -> Any:
    col_type = table.c[column].type
    if isinstance(col_type, sa.JSON):
        if value is None and col_type.none_as_null:
            return None
        return json.dumps(value, ensure_ascii=False, allow_nan=False)
    return value


def _pg_unnest_insert(
    conn: sa.Connection,
    table: sa.Table,
    rows: Sequence[Mapping[str, Any]],
    *,
    conflict: Sequence[str] | None = None,
    returning: Sequence[str] | None = None,
) -> list[tuple[Any, ...]]:
    """Insert many rows on PostgreSQL as one statement with one array parameter per column.

    ``INSERT … SELECT … FROM unnest(%(c1)s::t1[], …)`` keeps the statement short and identical for every
    batch size, instead of one placeholder per value (which the driver re-parses for every batch).
    Semantics are those of the SQLAlchemy ``insert`` path: ``ON CONFLICT (conflict) DO NOTHING`` and
    ``RETURNING`` the inserted rows only.
    """
    if not rows:
        return []
    columns = list(rows[0])
    params = {f"p{i}": [_pg_value(table, c, row[c]) for row in rows] for i, c in enumerate(columns)}
    select = ", ".join(f"{c}::json" if isinstance(table.c[c].type, sa.JSON) else c for c in columns)
    sources = ", ".join(f"%(p{i})s::{_pg_array_type(table, c, conn.dialect)}[]" for i, c in enumerate(columns))
    names = ", ".join(columns)  # our own schema's names: plain lower-case identifiers, no quoting needed
    sql = f"INSERT INTO {table.name} ({names}) SELECT {select} FROM unnest({sources}) AS t({names})"
    if conflict is not None:
        sql += " ON CONFLICT (" + ", ".join(conflict) + ") DO NOTHING"
    if returning:
        sql += " RETURNING " + ", ".join(returning)
        return [tuple(row) for row in conn.exec_driver_sql(sql, params)]
    conn.exec_driver_sql(sql, params)
    return []


@contextlib.contextmanager
def _unavailable_on_connection_errors() -> Iterator[None]:
    """Map "cannot reach / use the database right now" errors to StoreUnavailable; others pass through.

    Includes connect and pool timeouts, statements the server cancelled (``statement_timeout``) and connections
    the watchdog abandoned (the message then says which timeout expired). :class:`StoreUnavailable` raised inside
    (a SQLite file gone) passes unchanged.
    """
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as exc:
        raise StoreUnavailable(_unavailable_reason(exc)) from exc
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(_unavailable_reason(exc)) from exc
        raise


def _unavailable_reason(exc: BaseException) -> str:
    """The first line of the error, after the timeout the watchdog enforced on this thread's connection, if any."""
    first = str(exc).splitlines()[0]
    expired = _WATCHDOG.take_expired()
    return f"{expired}: connection abandoned ({first})" if expired else first


# --- bounded waits (PostgreSQL) -----------------------------------------------------------------------------

_WATCHDOG_GRACE_S = 1.0
"""A connection is abandoned this long after ``statement_timeout_s``: a server that is merely slow cancels the
statement itself first (a clean error that keeps the connection usable)."""
_ARMED = "monitor.watchdog"
_FRESH = "monitor.fresh"


@dataclasses.dataclass(eq=False, slots=True)
class _Armed:
    """One connection being watched: a duplicate of its socket descriptor (ours to close) and its deadline."""

    fd: int
    deadline: float
    what: str
    thread: int


class _Watchdog:
    """Shuts down the socket of a connection still in use at its deadline; one thread per process, started on
    first use, asleep until the earliest deadline.

    libpq waits on its socket without a time limit, and a frozen server answers nothing without resetting the
    connection. Shutting the socket down makes the blocked call fail at once (psycopg raises
    ``OperationalError``, SQLAlchemy discards the connection). The watchdog holds its own duplicate of the
    descriptor while armed, so it shuts down that very socket even if libpq has closed its descriptor (and the
    number was reused) meanwhile. Cost per transaction: a ``dup``, a ``close`` and two short critical sections.
    """

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._armed: set[_Armed] = set()
        self._wake_at = math.inf  # the deadline the thread sleeps towards
        self._expired: dict[int, str] = {}  # thread id -> the timeout that expired on its connection
        self._thread: threading.Thread | None = None

    def arm(self, fd: int, timeout_s: float, what: str) -> _Armed:
        """Watch socket ``fd`` for ``timeout_s`` seconds (``what`` names the timeout, for the error message)."""
        entry = _Armed(os.dup(fd), time.monotonic() + timeout_s, what, threading.get_ident())
        with self._cond:
            self._expired.pop(entry.thread, None)
            self._armed.add(entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="store-watchdog", daemon=True)
                self._thread.start()
            if entry.deadline < self._wake_at:
                self._wake_at = entry.deadline
                self._cond.notify()
        return entry

    def rearm(self, entry: _Armed, timeout_s: float, what: str) -> None:
        """Move the deadline of a still armed ``entry`` to ``timeout_s`` from now (no-op once it expired)."""
        with self._cond:
            if entry in self._armed:
                entry.deadline = time.monotonic() + timeout_s
                entry.what = what
                if entry.deadline < self._wake_at:
                    self._wake_at = entry.deadline
                    self._cond.notify()

    def disarm(self, entry: _Armed) -> None:
        """Stop watching ``entry`` and close its descriptor (no-op once it expired: the watchdog closed it)."""
        with self._cond:
            if entry in self._armed:
                self._armed.discard(entry)
                os.close(entry.fd)

    def take_expired(self) -> str | None:
        """What expired on the calling thread's connection since it last armed one (once), else None."""
        if not self._expired:
            return None
        with self._cond:
            return self._expired.pop(threading.get_ident(), None)

    def _run(self) -> None:
        while True:
            with self._cond:
                while True:
                    now = time.monotonic()
                    due = [entry for entry in self._armed if entry.deadline <= now]
                    if due:
                        break
                    self._wake_at = min((entry.deadline for entry in self._armed), default=math.inf)
                    self._cond.wait(None if self._wake_at == math.inf else self._wake_at - now)
                for entry in due:
                    self._armed.discard(entry)
                    self._expired[entry.thread] = entry.what
            for entry in due:
                log.warning("store: %s: abandoning the connection", entry.what)
                try:
                    sock = socket.socket(fileno=entry.fd)
                except OSError:
                    os.close(entry.fd)
                    continue
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                sock.close()

    def after_fork_in_child(self) -> None:
        """A forked child has no watchdog thread and no connection of the parent to watch: start afresh."""
        for entry in self._armed:
            with contextlib.suppress(OSError):
                os.close(entry.fd)
        self._reset()


_WATCHDOG = _Watchdog()
os.register_at_fork(after_in_child=_WATCHDOG.after_fork_in_child)


def _bound_postgres_connections(engine: sa.Engine, *, connect_timeout_s: float, statement_timeout_s: float) -> None:
    """Check pooled connections on checkout and watch every checked-out connection (see :func:`create_store_engine`).

    Replaces SQLAlchemy's ``pool_pre_ping``, whose check cannot be bounded: the check runs in the ``checkout``
    event under the watchdog; a failed check raises ``InvalidatePoolError``, so SQLAlchemy drops the pool and
    connects anew (a new connection is not checked).
    """
    dbapi_error: type[Exception] = engine.dialect.loaded_dbapi.Error
    check = f"the database did not answer the connection check within {connect_timeout_s:g} s (store.connect_timeout_s)"
    transaction = f"the database did not answer within {statement_timeout_s:g} s (store.statement_timeout_s)"
    transaction_s = statement_timeout_s + _WATCHDOG_GRACE_S

    @sa.event.listens_for(engine, "connect")
    def _connected(_dbapi_connection: Any, record: Any) -> None:
        record.info[_FRESH] = True

    @sa.event.listens_for(engine, "checkout")
    def _checked_out(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        fresh = record.info.pop(_FRESH, False)
        try:
            fd = dbapi_connection.fileno()
        except dbapi_error as exc:
            raise sa_exc.DisconnectionError(f"connection unusable: {exc}") from exc
        timeout_s, what = (transaction_s, transaction) if fresh else (connect_timeout_s, check)
        try:
            armed = record.info[_ARMED] = _WATCHDOG.arm(fd, timeout_s, what)
        except OSError as exc:  # no descriptor left to watch it with: do not use it unbounded
            raise StoreUnavailable(f"cannot watch the database connection: {exc}") from exc
        if fresh:  # just connected: no check needed
            return
        try:
            cursor = dbapi_connection.cursor()
            try:
                cursor.execute("SELECT 1")
            finally:
                cursor.close()
        except dbapi_error as exc:
            raise sa_exc.InvalidatePoolError(f"connection check failed: {exc}") from exc
        _WATCHDOG.rearm(armed, transaction_s, transaction)

    def _release(_dbapi_connection: Any, record: Any, *_: Any) -> None:
        armed = record.info.pop(_ARMED, None) if record is not None else None
        if armed is not None:
            _WATCHDOG.disarm(armed)

    for event in ("checkin", "invalidate", "detach"):
        sa.event.listen(engine, event, _release)


# --- SQLite file identity -----------------------------------------------------------------------------------


class _SqliteFile:
    """The identity (device, inode) of a SQLite store's file, remembered when the file is first opened.

    Open SQLite connections keep writing to the file they opened, even after it was unlinked or its directory
    removed: every write would "succeed" into a file nobody will ever read. So every transaction checks (one
    ``stat``) that the file at the path is still the one first opened: before it (pool checkout), after it
    (:meth:`SqlResultStore._retrying`) and before any new connection (so that no empty file is created in its
    place). It stays unavailable until the same file is back at the path.
    """

    def __init__(self, path: str) -> None:
        self.path = path
        self.identity: tuple[int, int] | None = None

    @classmethod
    def watch(cls, engine: sa.Engine) -> _SqliteFile | None:
        """Install the checks on a SQLite file engine; None for other databases and in-memory SQLite."""
        url = engine.url
        if url.get_backend_name() != "sqlite" or _is_memory(url):
            return None
        database = url.database or ""
        if database.startswith("file:"):  # a SQLite URI filename (``?uri=true``)
            database = urllib.parse.unquote(urllib.parse.urlsplit(database).path)
        guard = cls(os.path.abspath(database))
        sa.event.listen(engine, "do_connect", guard._before_connect)
        sa.event.listen(engine, "connect", guard._connected)
        sa.event.listen(engine, "checkout", guard._checked_out)
        return guard

    def check(self, *, after: bool = False) -> None:
        """Raise :class:`StoreUnavailable` unless the remembered file (if any yet) is at the path."""
        identity = self.identity
        if identity is None:
            return
        try:
            st = os.stat(self.path)
        except (FileNotFoundError, NotADirectoryError):
            problem = "is gone (its directory was removed or moved, or the file deleted)"
        except OSError as exc:
            problem = f"cannot be reached ({exc})"
        else:
            if (st.st_dev, st.st_ino) == identity:
                return
            problem = "was replaced by another file"
        raise StoreUnavailable(
            f"the SQLite file {self.path} {problem}"
            + (": this transaction is not counted as stored" if after else "")
            + "; the store stays unavailable until that same file is back at this path"
            " (if it is gone for good, restart the daemon: it creates and migrates a new file)"
        )

    def _before_connect(self, *_: Any) -> None:
        self.check()  # never let SQLite create a new, empty file where the store's file was

    def _connected(self, _dbapi_connection: Any, _record: Any) -> None:
        if self.identity is None:
            with contextlib.suppress(OSError):
                st = os.stat(self.path)
                self.identity = (st.st_dev, st.st_ino)
        else:
            self.check()

    def _checked_out(self, *_: Any) -> None:
        self.check()
