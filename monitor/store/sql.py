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
import threading
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
from monitor.store.base import SchemaNotCurrent, StoredResult, StoreUnavailable
from monitor.store.schema import issues, results, runs

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


def create_store_engine(url: str, *, connect_timeout_s: float = 5.0, busy_timeout_s: float = 10.0) -> sa.Engine:
    """An engine set up for the store.

    SQLite: WAL journal, ``foreign_keys=ON``, a busy timeout of ``busy_timeout_s``; ``sqlite://`` and
    ``sqlite:///:memory:`` share one connection (StaticPool) so every thread sees the same database.
    PostgreSQL (psycopg 3): connections are pinged on checkout (``pool_pre_ping``), so a restarted server is
    reconnected to transparently; connecting gives up after ``connect_timeout_s``.
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
    connect_args: dict[str, Any] = {}
    if parsed.get_backend_name() == "postgresql":
        connect_args["connect_timeout"] = max(1, math.ceil(connect_timeout_s))
    return sa.create_engine(parsed, pool_pre_ping=True, pool_timeout=connect_timeout_s, connect_args=connect_args)


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
        engine: sa.Engine | None = None,
    ) -> None:
        if purge_batch < 1:
            raise ValueError("purge_batch must be >= 1")
        self.url = normalise_url(url)
        self.engine = engine or create_store_engine(url, connect_timeout_s=connect_timeout_s)
        self.dialect = self.engine.dialect.name
        if self.dialect not in ("sqlite", "postgresql"):
            raise ValueError(f"unsupported database {self.dialect!r}: use sqlite or postgresql")
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

    def write(self, results: Sequence[StoredResult]) -> list[bool]:
        """See :meth:`monitor.store.base.ResultStore.write`."""
        if not results:
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

        new_ids = self._retrying(lambda: self._write_once(ordered_runs, unique))
        return [item.key in new_ids and first_of[item.key] == index for index, item in enumerate(prepared)]

    def _write_once(self, run_rows: list[dict[str, Any]], unique: list[_Prepared]) -> dict[Key, int]:
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
        return new_ids

    def _retrying(self, action: Callable[[], T]) -> T:
        """Run one transaction, retried on deadlock/serialization failures; connection errors → StoreUnavailable."""
        for attempt in range(_RETRIES):
            try:
                with self._lock, _unavailable_on_connection_errors():
                    return action()
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
    """Map "cannot reach / use the database right now" errors to StoreUnavailable; others pass through."""
    try:
        yield
    except (sa_exc.OperationalError, sa_exc.InterfaceError, sa_exc.TimeoutError) as exc:
        raise StoreUnavailable(str(exc).splitlines()[0]) from exc
    except sa_exc.DBAPIError as exc:
        if exc.connection_invalidated:
            raise StoreUnavailable(str(exc).splitlines()[0]) from exc
        raise
