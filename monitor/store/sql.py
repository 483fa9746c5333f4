"""The SQL result store (SQLAlchemy Core): SQLite (default, one file) or PostgreSQL (several replicas).

Idempotency: ``results`` has a unique key (trace_id, run_id, scorer, scorer_version); :meth:`SqlResultStore.write`
inserts with ``INSERT … ON CONFLICT DO NOTHING`` and learns exactly the rows this transaction inserted: on
PostgreSQL from ``RETURNING``, on SQLite (which holds its write lock from the transaction's start, ``BEGIN
IMMEDIATE``) as the rows above the largest rowid before. On PostgreSQL a concurrent insert of the same key waits for
the other transaction and then does nothing, so exactly one writer sees the key as new. Rows are written in key
order (runs first, then results) so concurrent writers lock in the same order and cannot deadlock each other.

The write path is lean: one statement per table per write (SQLite: an ``executemany`` of one ``INSERT``;
PostgreSQL: one ``INSERT … SELECT … FROM unnest(…)`` with binary array parameters), on rows converted once, with no
SQLAlchemy processing per row; JSON columns are serialized once by orjson, and only a value orjson refuses takes the
careful walk (:func:`jsonable`). ``bench/store.py`` measures it against the bare driver.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import functools
import logging
import math
import os
import re
import socket
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, date, datetime
from json.encoder import encode_basestring, encode_basestring_ascii
from typing import Any, Final, TypeVar

import orjson
import sqlalchemy as sa
from sqlalchemy import exc as sa_exc
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
#
# The write path hands the driver plain tuples, built once per row: text, numbers, datetimes (SQLite: the text
# SQLAlchemy stores them as) and JSON columns serialized once, as text. No SQLAlchemy type processing runs per row
# (statements go through ``exec_driver_sql``, so engine events still see them); the read side is unchanged (the
# schema keeps ``sa.JSON``, whose result processing parses the text back).

MAX_JSON_DEPTH: Final = 256
"""Containers nested deeper than this in a JSON value are stored as a string holding their compact JSON text, so
every stored document can be read back by a recursive parser (Python's ``json``, PostgreSQL's) within its limits."""

_UNSTORABLE_CHARS: Final = re.compile("[\x00\ud800-\udfff]")
_REPLACEMENT: Final = "\ufffd"
_CIRCULAR: Final = "[circular reference]"


def _text(value: str) -> str:
    """Text every backend stores: NUL (PostgreSQL text cannot hold it) and lone UTF-16 surrogates (UTF-8 cannot
    encode them, so no driver takes them) become U+FFFD, one per code point, identically on every backend.
    ``str.isascii`` is O(1), so ASCII text (ids, names) costs one scan for NUL at most."""
    if value.isascii():
        return value.replace("\x00", _REPLACEMENT) if "\x00" in value else value
    return _UNSTORABLE_CHARS.sub(_REPLACEMENT, value)


def _opt_text(value: str | None) -> str | None:
    if value is None:
        return None
    return _text(value if type(value) is str else str(value))


def _opt_float(value: float | None) -> float | None:
    """A float column's value: ``None`` for NaN and infinities (as before), a float even when given an int (the
    PostgreSQL array of a column holds one type)."""
    return None if value is None or not math.isfinite(value) else float(value)


def _str(value: Any) -> str:
    try:
        return _text(str(value))
    except Exception:  # a __str__ that raises must not fail the write
        return f"<unprintable {type(value).__name__}>"


class _Exit:
    """Marks, on :func:`jsonable`'s stack, the end of a container's children (it is no longer an ancestor). Holds
    the container: a temporary one (a dataclass's ``asdict``) must live on, or its id could be reused meanwhile."""

    __slots__ = ("container", "ident")

    def __init__(self, container: object) -> None:
        self.container = container
        self.ident = id(container)


def jsonable(value: Any) -> Any:
    """``value`` as plain JSON data, identical on every backend; never raises (short of memory), at any depth.

    Dicts get string keys (``str(key)``; when two keys give the same string the later value wins); tuples, lists
    become lists, sets and frozensets lists sorted by the ``repr`` of their converted items; enums their value;
    dataclasses dicts (``dataclasses.asdict``); dates and datetimes ISO text; NaN and infinities ``None``; NUL and
    lone surrogates U+FFFD (in keys too); a container that contains itself the string ``"[circular reference]"``
    where it recurs; anything else its ``str()`` (its type name when ``str()`` raises). Iterative: nesting depth is
    bounded by memory only (the encoder, :func:`_encode`, bounds what it writes).
    """
    root: list[Any] = [None]
    ancestors: set[int] = set()
    stack: list[Any] = [(value, root, 0)]
    while stack:
        entry = stack.pop()
        if type(entry) is _Exit:
            ancestors.discard(entry.ident)
            continue
        item, holder, slot = entry
        while True:  # unwrap what converts to another value (enums, dataclasses, mappings that are not dicts)
            if item is None or isinstance(item, bool | int):
                break
            if isinstance(item, float):
                item = item if math.isfinite(item) else None
                break
            if isinstance(item, str):
                item = _text(item)
                break
            if isinstance(item, enum.Enum):
                item = item.value
                continue
            if isinstance(item, Mapping | list | tuple | set | frozenset):
                break
            if dataclasses.is_dataclass(item) and not isinstance(item, type):
                try:
                    item = dataclasses.asdict(item)
                    continue
                except Exception:
                    item = _str(item)
                    break
            item = item.isoformat() if isinstance(item, datetime | date) else _str(item)
            break
        if not isinstance(item, Mapping | list | tuple | set | frozenset):
            holder[slot] = item
            continue
        ident = id(item)
        if ident in ancestors:
            holder[slot] = _CIRCULAR
            continue
        if isinstance(item, set | frozenset):
            holder[slot] = _sorted_set(item)
            continue
        ancestors.add(ident)
        stack.append(_Exit(item))
        if isinstance(item, Mapping):
            pending: dict[str, Any] = {}
            for k, v in item.items():
                pending[k if type(k) is str and k.isascii() and "\x00" not in k else _key(k)] = v
            out: dict[str, Any] = dict.fromkeys(pending)
            holder[slot] = out
            stack.extend((v, out, k) for k, v in pending.items())
        else:
            items: list[Any] = list(item)
            holder[slot] = items
            stack.extend((v, items, i) for i, v in enumerate(items))
    return root[0]


def _key(key: Any) -> str:
    return _text(key) if type(key) is str else _str(key)


def _sorted_set(items: set[Any] | frozenset[Any]) -> list[Any]:
    plain = [jsonable(v) for v in items]
    try:
        return sorted(plain, key=repr)
    except Exception:  # a repr too deep to take: the order of the JSON text instead (deterministic as well)
        return sorted(plain, key=_encode)


def _encode(
    plain: Any,
    *,
    ascii: bool = False,
    item_sep: str = ",",
    key_sep: str = ":",
    max_depth: int = MAX_JSON_DEPTH,
) -> str:
    """The JSON text of ``plain`` (what :func:`jsonable` returns), written iteratively (any depth).

    With ``ascii=True, item_sep=", ", key_sep=": "`` it is exactly ``json.dumps(plain)``: strings through the same C
    encoders, ints and floats through ``int.__repr__`` / ``float.__repr__``. A container nested deeper than
    ``max_depth`` (the outermost is at depth 1) is written as a string holding its compact JSON text.
    """
    quote = encode_basestring_ascii if ascii else encode_basestring
    out: list[str] = []
    stack: list[tuple[Any, int]] = [(plain, 1)]  # depth 0: a literal token
    while stack:
        item, depth = stack.pop()
        if depth == 0:
            out.append(item)
        elif item is None:
            out.append("null")
        elif item is True:
            out.append("true")
        elif item is False:
            out.append("false")
        elif isinstance(item, str):
            out.append(quote(item))
        elif isinstance(item, int):
            out.append(int.__repr__(item))
        elif isinstance(item, float):
            out.append(float.__repr__(item) if math.isfinite(item) else "null")
        elif isinstance(item, dict | list) and depth > max_depth:
            out.append(quote(_encode(item, max_depth=sys.maxsize)))
        elif isinstance(item, dict):
            if not item:
                out.append("{}")
                continue
            out.append("{")
            stack.append(("}", 0))
            entries = list(item.items())
            for i in range(len(entries) - 1, -1, -1):
                k, v = entries[i]
                stack.append((v, depth + 1))
                stack.append(((item_sep if i else "") + quote(k) + key_sep, 0))
        elif isinstance(item, list):
            if not item:
                out.append("[]")
                continue
            out.append("[")
            stack.append(("]", 0))
            for i in range(len(item) - 1, -1, -1):
                stack.append((item[i], depth + 1))
                if i:
                    stack.append((item_sep, 0))
        else:  # not plain data: what jsonable makes of it
            stack.append((jsonable(item), depth))
    return "".join(out)


def _careful_json(
    value: Any, *, ascii: bool = False, item_sep: str = ",", key_sep: str = ":", nullable: bool = False
) -> str | None:
    """JSON text of ``value`` by the careful walk (:func:`jsonable`, then :func:`_encode`); with ``nullable``, None
    (SQL NULL) when it converts to ``None``. Never raises (short of memory): a value even that walk cannot take
    (sets nested past the interpreter's recursion limit) is stored as a string naming its type."""
    try:
        plain = jsonable(value)
        if plain is None and nullable:
            return None
        return _encode(plain, ascii=ascii, item_sep=item_sep, key_sep=key_sep)
    except Exception as exc:
        log.warning("store: a %s value cannot be written as JSON (%s): stored as its type name", type(value), exc)
        return encode_basestring(f"<unstorable {type(value).__name__}>")


def _orjson_default(value: Any) -> Any:
    """What the fast path gives orjson for what it does not take itself: the same as :func:`jsonable`."""
    if isinstance(value, float):  # a float subclass
        return float(value) if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, list | tuple):  # named tuples
        return list(value)
    if isinstance(value, set | frozenset):
        return _sorted_set(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):  # orjson itself skips "_" fields
        return dataclasses.asdict(value)
    if isinstance(value, datetime | date):  # orjson's own form differs from isoformat() for some
        return value.isoformat()
    return _str(value)


_ORJSON_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_DATETIME


def _json(value: Any) -> str:
    """The JSON text of a JSON column: compact UTF-8, the same data as ``jsonable(value)``.

    Fast path: one ``orjson.dumps`` (C, no Python walk; NaN and infinities come out as ``null`` as in
    :func:`jsonable`). It refuses lone surrogates, ints beyond 64 bits, keys that are not exactly ``str``,
    nesting deeper than 254; and a ``\\u0000`` escape in its output means a NUL somewhere (or the text
    ``\\u0000``: harmless). Then, and only for that value, the careful walk (:func:`_careful_json`) writes it.
    """
    try:
        out = orjson.dumps(value, default=_orjson_default, option=_ORJSON_OPTIONS)
    except Exception:  # orjson.JSONEncodeError (a TypeError) and whatever _orjson_default raised
        out = None
    if out is None or b"\\u0000" in out:
        return _careful_json(value) or "null"  # not nullable: never None
    return out.decode()


def _opt_json(value: Any) -> str | None:
    """A nullable JSON column (``none_as_null``): SQL NULL for ``None`` and what converts to it (NaN)."""
    if value is None:
        return None
    text = _json(value)
    return None if text == "null" else text


def _issue_json_sqlite(value: Any) -> str | None:
    """An issue's JSON on SQLite: the very text the store always wrote there (``json.dumps(jsonable(value))``:
    ASCII, ``", "`` and ``": "``). The failure report groups issues by this text (``CAST(actual AS TEXT)``), so a
    value must keep its text across versions. Issues are few and small: the careful walk is fast enough."""
    return None if value is None else _careful_json(value, ascii=True, item_sep=", ", key_sep=": ", nullable=True)


def _issue_json_postgres(value: Any) -> str | None:
    """An issue's JSON on PostgreSQL: the very text the store always wrote there (UTF-8, ``", "`` and ``": "``)."""
    return None if value is None else _careful_json(value, item_sep=", ", key_sep=": ", nullable=True)


def _sqlite_time(value: datetime) -> str:
    """A timestamp as SQLAlchemy's SQLite ``DATETIME`` stores it for :class:`~monitor.store.schema.UTCDateTime`:
    UTC, ``YYYY-MM-DD HH:MM:SS.ffffff`` (naive values are UTC). Text order is time order."""
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat(" ", "microseconds")


def _postgres_time(value: datetime) -> datetime:
    """A timestamp for a PostgreSQL ``timestamptz`` parameter: aware (naive values are UTC, as UTCDateTime)."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value


@dataclasses.dataclass(frozen=True, slots=True)
class _Codec:
    """How one backend's driver takes the values of the write path."""

    time: Callable[[datetime], Any]
    issue_json: Callable[[Any], str | None]


_SQLITE_CODEC: Final = _Codec(_sqlite_time, _issue_json_sqlite)
_POSTGRES_CODEC: Final = _Codec(_postgres_time, _issue_json_postgres)


def _opt_time(codec: _Codec, value: datetime | None) -> Any:
    return None if value is None else codec.time(value)


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


def _issue_row(codec: _Codec, issue: Issue) -> tuple[Any, ...]:
    """An ``issues`` row without its leading ``result_id`` (known once the result is inserted)."""
    return (
        str(issue.kind),
        str(issue.severity),
        _opt_text(issue.tool),
        _opt_text(issue.parameter),
        issue.call_index,
        _opt_text(issue.call_id),
        issue.turn,
        _expected_tool(issue),
        codec.issue_json(issue.expected),
        codec.issue_json(issue.actual),
        codec.issue_json(issue.detail),
    )


# Column order of the tuples each table gets (statements are built from these).
_RUN_COLUMNS: Final = (
    "trace_id",
    "run_id",
    "agent",
    "conversation_id",
    "start_time",
    "tools",
    "first_scored_at",
    "last_scored_at",
)
_RESULT_COLUMNS: Final = (
    "trace_id",
    "run_id",
    "agent",
    "scorer",
    "scorer_version",
    "scorer_kind",
    "params_hash",
    "params",
    "status",
    "score",
    "threshold",
    "passed",
    "reason",
    "degraded",
    "details",
    "judge",
    "scored_at",
)
_ISSUE_COLUMNS: Final = (
    "result_id",
    "kind",
    "severity",
    "tool",
    "parameter",
    "call_index",
    "call_id",
    "turn",
    "expected_tool",
    "expected",
    "actual",
    "detail",
)
_MARK_COLUMNS: Final = ("topic", "partition", "kind", "ident", "last_offset", "marked_at")
_KEPT_COLUMNS: Final = (
    "trace_id",
    "run_id",
    "agent",
    "user_text",
    "final_response",
    "status",
    "duration_ms",
    "calls",
    "run",
)
_TOOL_COLUMNS: Final = ("agent", "name", "definition_hash", "description", "input_schema", "first_seen", "last_seen")
_JOB_COLUMNS: Final = (
    "key",
    "trace_id",
    "run_id",
    "agent",
    "scorer",
    "scorer_kind",
    "scorer_version",
    "params",
    "run",
    "run_start_ns",
    "flagged",
    "enqueued_at",
    "lease_owner",
    "lease_until",
    "attempts",
)
# indexes into a run row (a list while runs of one write are merged)
_R_AGENT, _R_CONVERSATION, _R_START, _R_TOOLS, _R_FIRST, _R_LAST = 2, 3, 4, 5, 6, 7


@dataclasses.dataclass(frozen=True, slots=True)
class _Prepared:
    key: Key
    run_key: tuple[str, str]
    result_row: tuple[Any, ...]
    issue_rows: list[tuple[Any, ...]]
    run_row: list[Any]


_PARAMS_CACHE: dict[str, str] = {}
_PARAMS_CACHE_MAX = 4096


def _params_json(params_hash: str, params: Mapping[str, Any]) -> str:
    """A scorer instance's parameters are the same on every result it returns: serialize them once per
    ``params_hash`` (the hash of their canonical JSON, so equal hashes mean equal parameters; the stored text is
    not compared anywhere, the hash is)."""
    if not params_hash:
        return _json(params)
    cached = _PARAMS_CACHE.get(params_hash)
    if cached is None:
        if len(_PARAMS_CACHE) >= _PARAMS_CACHE_MAX:
            _PARAMS_CACHE.clear()
        cached = _PARAMS_CACHE[params_hash] = _json(params)
    return cached


class _Preparer:
    """Builds the rows of one write; memoizes what results of one write share (their run's tool list, start and
    ``scored_at``: a run's results carry the same). A result without ``scored_at`` is scored now: one "now" per
    write."""

    def __init__(self, codec: _Codec) -> None:
        self.codec = codec
        self._stamps: dict[str | None, Any] = {}
        self._starts: dict[int, Any] = {}
        self._tools: dict[tuple[str, ...], str] = {}

    def stamp(self, value: str | None) -> Any:
        """``scored_at`` text as the driver takes it (None: now, once per write)."""
        known = self._stamps.get(value)
        if known is None:
            known = self._stamps[value] = self.codec.time(parse_timestamp(value))
        return known

    def start(self, start_ns: int | None) -> Any:
        """A run's start (Unix ns) as the driver takes it."""
        if start_ns is None:
            return None
        known = self._starts.get(start_ns)
        if known is None:
            known = self._starts[start_ns] = self.codec.time(datetime.fromtimestamp(start_ns / 1e9, tz=UTC))
        return known

    def tools(self, names: tuple[str, ...]) -> str:
        text = self._tools.get(names)
        if text is None:
            text = self._tools[names] = _json([_text(t) for t in names])
        return text

    def prepare(self, item: StoredResult) -> _Prepared:
        res: ScoreResult = item.result
        if not res.trace_id or not res.run_id:
            raise ValueError(f"result of scorer {res.scorer!r} has no trace_id/run_id: it cannot be stored")
        trace_id, run_id, scorer = _text(res.trace_id), _text(res.run_id), _text(res.scorer)
        version = int(res.scorer_version)
        scored_at = self.stamp(res.scored_at)
        agent = _opt_text(res.agent)
        start = self.start(item.run_start_ns)
        result_row = (
            trace_id,
            run_id,
            agent,
            scorer,
            version,
            _text(res.scorer_kind),
            _text(res.params_hash),
            _params_json(res.params_hash, res.params),
            res.status,
            _opt_float(res.score),
            None if res.threshold is None else float(res.threshold),
            res.passed,
            _opt_text(res.reason),
            _opt_text(res.degraded),
            _json(res.details),
            _opt_json(res.judge),
            scored_at,
        )
        run_row = [
            trace_id,
            run_id,
            agent,
            _opt_text(res.conversation_id),
            start,
            self.tools(item.tools),
            scored_at,
            scored_at,
        ]
        return _Prepared(
            key=(trace_id, run_id, scorer, version),
            run_key=(trace_id, run_id),
            result_row=result_row,
            issue_rows=[_issue_row(self.codec, i) for i in res.issues] if res.issues else [],
            run_row=run_row,
        )


def _merge_run(a: list[Any], b: list[Any]) -> list[Any]:
    """One run row for two results of the run: the earliest first, the latest last scored_at, blanks filled.
    ``a`` itself when ``b`` changes nothing (the common case: a run's results share all of it); never mutated."""
    if (
        b[_R_FIRST] >= a[_R_FIRST]
        and b[_R_LAST] <= a[_R_LAST]
        and (a[_R_AGENT] is not None or b[_R_AGENT] is None)
        and (a[_R_CONVERSATION] is not None or b[_R_CONVERSATION] is None)
        and (a[_R_START] is not None or b[_R_START] is None)
        and (a[_R_TOOLS] != "[]" or b[_R_TOOLS] == "[]")
    ):
        return a
    merged = list(a)
    if b[_R_FIRST] < merged[_R_FIRST]:
        merged[_R_FIRST] = b[_R_FIRST]
    if b[_R_LAST] > merged[_R_LAST]:
        merged[_R_LAST] = b[_R_LAST]
    for column in (_R_AGENT, _R_CONVERSATION, _R_START):
        if merged[column] is None:
            merged[column] = b[column]
    if merged[_R_TOOLS] == "[]":
        merged[_R_TOOLS] = b[_R_TOOLS]
    return merged


def _mark_rows(codec: _Codec, marks: Sequence[ReplayMark]) -> list[tuple[Any, ...]]:
    """Rows of the ``replay_marks`` table, one per distinct key, in key order (lock order across writers)."""
    now = codec.time(datetime.now(UTC))
    rows: dict[tuple[str, int, str, str], tuple[Any, ...]] = {}
    for m in marks:
        key = (m.topic, m.partition, m.kind, m.ident)
        known = rows.get(key)
        if known is None or m.last_offset > known[4]:
            rows[key] = (m.topic, m.partition, m.kind, m.ident, m.last_offset, now)
    return [rows[k] for k in sorted(rows)]


@dataclasses.dataclass(frozen=True, slots=True)
class _Extras:
    kept: list[tuple[Any, ...]]
    tools: list[tuple[Any, ...]]


def _kept_rows(kept: Sequence[KeptRun]) -> list[tuple[Any, ...]]:
    rows: dict[tuple[str, str], tuple[Any, ...]] = {}
    for k in kept:
        key = (_text(k.trace_id), _text(k.run_id))
        if key in rows:
            continue
        rows[key] = (
            *key,
            _opt_text(k.agent),
            _opt_text(k.user_text),
            _opt_text(k.final_response),
            k.status,
            _opt_float(k.duration_ms),
            k.calls,
            _json(dict(k.run)),
        )
    return [rows[key] for key in sorted(rows)]


def _tool_rows(codec: _Codec, tools: Sequence[OfferedTool]) -> list[tuple[Any, ...]]:
    seen: dict[tuple[str, str, str], list[Any]] = {}
    for t in tools:
        key = (_text(t.agent), _text(t.name), t.definition_hash)
        known = seen.get(key)
        if known is not None:
            known[2] = min(known[2], t.seen_at)
            known[3] = max(known[3], t.seen_at)
            continue
        seen[key] = [_opt_text(t.description), _opt_json(t.input_schema), t.seen_at, t.seen_at]
    return [
        (*key, description, schema, codec.time(first), codec.time(last))
        for key, (description, schema, first, last) in sorted(seen.items())
    ]


def _job_rows(codec: _Codec, jobs: Sequence[JudgeJob]) -> list[tuple[Any, ...]]:
    rows: dict[str, tuple[Any, ...]] = {}
    for job in jobs:
        if job.key in rows:
            continue
        rows[job.key] = (
            _text(job.key),
            job.trace_id,
            job.run_id,
            _opt_text(job.agent),
            _text(job.scorer),
            job.scorer_kind,
            job.scorer_version,
            _json(dict(job.params)),
            _json(dict(job.run)),
            job.run_start_ns,
            job.flagged,
            codec.time(job.enqueued_at),
            job.lease_owner,
            _opt_time(codec, job.lease_until),
            0,
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


# --- statements ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class _Table:
    """One table of the write path: its columns (the order of the row tuples), what ``ON CONFLICT`` does
    (``conflict``: the key; ``update``: the ``SET`` clause of an upsert per dialect, else ``DO NOTHING``) and what
    PostgreSQL returns of the rows inserted."""

    table: sa.Table
    columns: tuple[str, ...]
    conflict: tuple[str, ...] = ()
    update: Mapping[str, str] = dataclasses.field(default_factory=dict)
    returning: tuple[str, ...] = ()

    def _tail(self, dialect: str) -> str:
        if not self.conflict:
            return ""
        action = f"DO UPDATE SET {self.update[dialect]}" if self.update else "DO NOTHING"
        return f" ON CONFLICT ({', '.join(self.conflict)}) {action}"

    @functools.cached_property
    def sqlite(self) -> str:
        """``INSERT … VALUES (?, …) [ON CONFLICT …]``, run with ``executemany`` (one statement, stepped per row)."""
        names = ", ".join(self.columns)
        marks = ", ".join("?" * len(self.columns))
        return f"INSERT INTO {self.table.name} ({names}) VALUES ({marks}){self._tail('sqlite')}"

    def postgres(self, dialect: sa.Dialect) -> str:
        """``INSERT … SELECT … FROM unnest(%(p0)b::t0[], …) [ON CONFLICT …] [RETURNING …]``: one statement whose text
        is the same for every batch size, one array parameter per column, sent in binary (see _pg_arrays)."""
        cached = _PG_SQL.get(self.table.name)
        if cached is None:
            names = ", ".join(self.columns)  # our own schema's names: plain lower-case identifiers
            select = ", ".join(f"{c}::json" if _is_json(self.table, c) else c for c in self.columns)
            sources = ", ".join(
                f"%(p{i})b::{_pg_array_type(self.table, c, dialect)}[]" for i, c in enumerate(self.columns)
            )
            cached = f"INSERT INTO {self.table.name} ({names}) SELECT {select} FROM unnest({sources}) AS t({names})"
            cached += self._tail("postgresql")
            if self.returning:
                cached += " RETURNING " + ", ".join(self.returning)
            _PG_SQL[self.table.name] = cached
        return cached


_PG_SQL: dict[str, str] = {}


def _is_json(table: sa.Table, column: str) -> bool:
    return isinstance(table.c[column].type, sa.JSON)


_RUNS: Final = _Table(runs, _RUN_COLUMNS, ("trace_id", "run_id"), returning=("trace_id", "run_id"))
_RESULTS: Final = _Table(
    results,
    _RESULT_COLUMNS,
    ("trace_id", "run_id", "scorer", "scorer_version"),
    returning=("id", "trace_id", "run_id", "scorer", "scorer_version"),
)
_ISSUES: Final = _Table(issues, _ISSUE_COLUMNS)
_MARKS: Final = _Table(replay_marks, _MARK_COLUMNS, ("topic", "partition", "kind", "ident"))
_KEPT: Final = _Table(run_summaries, _KEPT_COLUMNS, ("trace_id", "run_id"))
_TOOLS: Final = _Table(
    tool_definitions,
    _TOOL_COLUMNS,
    ("agent", "name", "definition_hash"),
    update={
        "sqlite": "last_seen = max(tool_definitions.last_seen, excluded.last_seen)",
        "postgresql": "last_seen = GREATEST(tool_definitions.last_seen, excluded.last_seen)",
    },
)
_JOBS: Final = _Table(judge_jobs, _JOB_COLUMNS, ("key",))

_RUN_UPDATE_SQLITE: Final = (
    "UPDATE runs SET first_scored_at = min(first_scored_at, ?), last_scored_at = max(last_scored_at, ?), "
    "agent = coalesce(agent, ?), conversation_id = coalesce(conversation_id, ?), start_time = coalesce(start_time, ?) "
    "WHERE trace_id = ? AND run_id = ?"
)
_RUN_UPDATE_POSTGRES: Final = (
    "UPDATE runs SET first_scored_at = LEAST(runs.first_scored_at, u.first_scored_at), "
    "last_scored_at = GREATEST(runs.last_scored_at, u.last_scored_at), agent = coalesce(runs.agent, u.agent), "
    "conversation_id = coalesce(runs.conversation_id, u.conversation_id), "
    "start_time = coalesce(runs.start_time, u.start_time) "
    "FROM unnest(%(p0)b::timestamptz[], %(p1)b::timestamptz[], %(p2)b::text[], %(p3)b::text[], "
    "%(p4)b::timestamptz[], %(p5)b::text[], %(p6)b::text[]) "
    "AS u(first_scored_at, last_scored_at, agent, conversation_id, start_time, trace_id, run_id) "
    "WHERE runs.trace_id = u.trace_id AND runs.run_id = u.run_id"
)
"""Widen pre-existing runs with the new results of a write: the earliest first_scored_at, the latest
last_scored_at, blanks filled. Parameters: (first, last, agent, conversation_id, start_time, trace_id, run_id)."""


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
        self._codec = _POSTGRES_CODEC if self.dialect == "postgresql" else _SQLITE_CODEC
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
        was) and the tool definitions its runs offered (``last_seen`` moves forward).

        One statement per table per write: on SQLite an ``executemany`` of one ``INSERT``, on PostgreSQL one
        ``INSERT … SELECT … FROM unnest(…)`` with binary array parameters; values are converted once per row
        (JSON columns serialized once, by orjson, see :func:`_json`), with no SQLAlchemy processing per row.
        """
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
        codec = self._codec
        mark_rows = _mark_rows(codec, marks)
        job_rows = _job_rows(codec, jobs)
        settled_keys = sorted(set(settled))
        extras = _Extras(_kept_rows(kept), _tool_rows(codec, tools))
        if not results:
            if mark_rows or job_rows or settled_keys or extras.tools:
                self._retrying(lambda: self._write_once([], [], mark_rows, job_rows, settled_keys, extras))
            return []
        preparer = _Preparer(codec)
        prepared = [preparer.prepare(item) for item in results]
        first_of: dict[Key, int] = {}
        for index, item in enumerate(prepared):
            first_of.setdefault(item.key, index)
        unique = sorted((prepared[i] for i in first_of.values()), key=lambda p: p.key)
        run_rows: dict[tuple[str, str], list[Any]] = {}
        for item in unique:
            known = run_rows.get(item.run_key)
            run_rows[item.run_key] = item.run_row if known is None else _merge_run(known, item.run_row)
        ordered_runs = [tuple(run_rows[k]) for k in sorted(run_rows)]

        new_ids = self._retrying(
            lambda: self._write_once(ordered_runs, unique, mark_rows, job_rows, settled_keys, extras)
        )
        return [item.key in new_ids and first_of[item.key] == index for index, item in enumerate(prepared)]

    def _insert(self, conn: sa.Connection, table: _Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Insert ``rows`` (tuples in ``table.columns`` order) with one statement; on PostgreSQL the rows
        ``RETURNING`` gives (those inserted now), on SQLite nothing (see :meth:`_insert_new`)."""
        if not rows:
            return []
        if self.dialect == "postgresql":
            result = conn.exec_driver_sql(table.postgres(conn.dialect), _pg_arrays(rows))
            return [tuple(row) for row in result.fetchall()] if table.returning else []
        conn.exec_driver_sql(table.sqlite, rows)
        return []

    def _insert_new(self, conn: sa.Connection, table: _Table, rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        """Insert ``rows``, keys already present left alone; the ``table.returning`` columns of exactly the rows
        inserted now.

        SQLite cannot return rows from an ``executemany``; but the write holds the database's write lock from its
        start (``BEGIN IMMEDIATE``, :meth:`_begin`), so the rows inserted now are those whose rowid is above the
        largest one before (SQLite gives a new row the largest rowid + 1; only a table that once held rowid
        2**63 - 1 would make it pick another). Measured on 600 fixture traces (5,240 results): 13.2 µs per result
        row this way against 15.5 µs for multi-row ``INSERT … VALUES (…), … RETURNING`` in chunks of 100.
        """
        if not rows:
            return []
        if self.dialect == "postgresql":
            return self._insert(conn, table, rows)
        name = table.table.name
        before = conn.exec_driver_sql(f"SELECT max(rowid) FROM {name}").scalar()
        self._insert(conn, table, rows)
        query = f"SELECT {', '.join(table.returning)} FROM {name} WHERE rowid > ?"
        return [tuple(row) for row in conn.exec_driver_sql(query, (before or 0,)).fetchall()]

    def _begin(self, conn: sa.Connection) -> None:
        """SQLite: take the write lock now (``BEGIN IMMEDIATE``): a concurrent writer waits (busy timeout) instead
        of failing when this transaction would later turn from reading to writing, and :meth:`_insert_new` may
        rely on nobody else inserting until it commits. A transaction already open is used as it is."""
        if self.dialect != "sqlite":
            return
        driver = conn.connection.driver_connection
        if driver is not None and not driver.in_transaction:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    # --- judge jobs -------------------------------------------------------------------------------------------
    def _insert_jobs(self, conn: sa.Connection, job_rows: list[tuple[Any, ...]]) -> None:
        """Insert jobs owed, leaving out keys already owed or already judged (a result exists)."""
        keys = [(r[1], r[2], r[4], r[6]) for r in job_rows]  # trace_id, run_id, scorer, scorer_version
        judged: set[tuple[str, str, str, int]] = set()
        for start in range(0, len(keys), 200):
            chunk = keys[start : start + 200]
            query = sa.select(results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version).where(
                sa.tuple_(results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version).in_(chunk)
            )
            judged.update((r.trace_id, r.run_id, r.scorer, r.scorer_version) for r in conn.execute(query))
        self._insert(conn, _JOBS, [row for row, key in zip(job_rows, keys, strict=True) if key not in judged])

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
        run_rows: list[tuple[Any, ...]],
        unique: list[_Prepared],
        mark_rows: list[tuple[Any, ...]],
        job_rows: list[tuple[Any, ...]],
        settled: list[str],
        extras: _Extras,
    ) -> dict[Key, int]:
        with self.engine.begin() as conn:
            self._begin(conn)
            # 0. judge verdicts owed (before results: a verdict in this batch settles its own job below)
            if job_rows:
                self._insert_jobs(conn, job_rows)
            if not unique:
                self._insert(conn, _MARKS, mark_rows)
                if settled:
                    conn.execute(sa.delete(judge_jobs).where(judge_jobs.c.key.in_(settled)))
                self._insert(conn, _TOOLS, extras.tools)
                return {}
            # 1. runs not seen before (their results in this batch are all new: results reference runs)
            created = {(row[0], row[1]) for row in self._insert_new(conn, _RUNS, run_rows)}
            # 2. results; the rows returned are exactly the ones inserted now
            inserted = self._insert_new(conn, _RESULTS, [p.result_row for p in unique])
            new_ids: dict[Key, int] = {(t, r, s, v): rid for rid, t, r, s, v in inserted}
            # 3. runs seen before: widen first/last scored_at and fill blanks from their NEW results only
            updates: dict[tuple[str, str], list[Any]] = {}
            for p in unique:
                if p.key in new_ids and p.run_key not in created:
                    known = updates.get(p.run_key)
                    updates[p.run_key] = p.run_row if known is None else _merge_run(known, p.run_row)
            if updates:
                rows = [
                    (r[_R_FIRST], r[_R_LAST], r[_R_AGENT], r[_R_CONVERSATION], r[_R_START], r[0], r[1])
                    for r in (updates[key] for key in sorted(updates))
                ]
                if self.dialect == "postgresql":
                    conn.exec_driver_sql(_RUN_UPDATE_POSTGRES, _pg_arrays(rows))
                else:
                    conn.exec_driver_sql(_RUN_UPDATE_SQLITE, rows)
            issue_rows = [
                (new_ids[p.key], *row) for p in unique if p.issue_rows and p.key in new_ids for row in p.issue_rows
            ]
            self._insert(conn, _ISSUES, issue_rows)
            self._insert(conn, _MARKS, mark_rows)
            # 4. judge jobs settled (their verdict is written above, or they were dropped)
            if settled:
                conn.execute(sa.delete(judge_jobs).where(judge_jobs.c.key.in_(settled)))
            # 5. the runs kept to be looked at (runs of this write only: the rows exist), the tools they offered
            written = {(row[0], row[1]) for row in run_rows}
            self._insert(conn, _KEPT, [row for row in extras.kept if (row[0], row[1]) in written])
            self._insert(conn, _TOOLS, extras.tools)
        return new_ids

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


def _pg_arrays(rows: list[tuple[Any, ...]]) -> dict[str, list[Any]]:
    """The parameters of an ``unnest`` statement: one list per column (``p0``, ``p1``, …) of ``rows``.

    The statements take them as ``%(pN)b``: psycopg sends each array in binary, its elements packed as they are
    (text as UTF-8, timestamps and numbers in binary), where the text form quoted and escaped every element
    with a regular expression. Measured on the results of 600 fixture traces (5,240 rows, client CPU per row):
    text arrays 43.3 µs, binary arrays 7.1 µs; ``COPY … FROM STDIN (FORMAT BINARY)`` into a temporary table and
    ``INSERT … SELECT … ON CONFLICT DO NOTHING RETURNING`` 5.4 µs, with the same wall time (the server's insert
    dominates, ~40 µs per row) and a temporary table created per transaction (catalog churn; a session-wide one
    breaks behind a transaction-pooling PgBouncer), so ``unnest`` stays. Preparing the statement
    (``prepare=True``) made no measurable difference: one statement per table per write.
    """
    return {f"p{i}": list(column) for i, column in enumerate(zip(*rows, strict=True))}


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
