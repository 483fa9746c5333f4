"""JSON columns and text on the write path, with hostile values, on SQLite and PostgreSQL.

The store serializes each JSON value once: orjson first, and only when orjson refuses the value (a lone surrogate,
an int beyond 64 bits, a key that is not a ``str``, nesting deeper than 254) or its text holds a NUL, the careful
walk (``jsonable`` + an iterative encoder). Whatever the path, what is read back is what ``jsonable`` promises:
``expected`` below is that contract written out plainly (recursively: the values it is used on are shallow), and
``old_jsonable`` is the store's previous conversion, verbatim, against which the issues' stored text must not change
(the failure report groups issues by it).
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import sqlite3
import uuid
from collections.abc import Mapping
from datetime import UTC, date, datetime
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.scoring.result import FailureKind, Issue, ScoreResult
from monitor.store import JudgeJob, KeptRun, OfferedTool, SqlResultStore, StoredResult
from monitor.store.schema import issues, judge_jobs, results, run_summaries, runs, tool_definitions
from monitor.store.sql import MAX_JSON_DEPTH, _issue_json_postgres, _issue_json_sqlite, _json, jsonable

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


class Colour(enum.Enum):
    RED = "red"
    BLUE = 2


class Mixed(str, enum.Enum):  # noqa: UP042 (on purpose: str() of a member is "Mixed.A", its value "a")
    A = "a"


@dataclasses.dataclass(frozen=True)
class Usage:
    model: str
    _private: int = 7  # orjson's own dataclass support would leave this field out


# --- the contract, written out plainly ------------------------------------------------------------------------


def clean(text: str) -> str:
    return "".join("\ufffd" if c == "\x00" or "\ud800" <= c <= "\udfff" else c for c in text)


def expected(value: Any) -> Any:
    """What reading back a stored JSON value gives (shallow values: no depth cut, no cycles)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return clean(value)
    if isinstance(value, enum.Enum):
        return expected(value.value)
    if isinstance(value, Mapping):
        out: dict[str, Any] = {}
        for k, v in value.items():
            out[clean(k) if type(k) is str else clean(str(k))] = v
        return {k: expected(v) for k, v in out.items()}
    if isinstance(value, list | tuple):
        return [expected(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((expected(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return expected(dataclasses.asdict(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    return clean(str(value))


def _old_text(value: str) -> str:
    return value.replace("\x00", "\ufffd") if "\x00" in value else value


def old_jsonable(value: Any) -> Any:
    """The store's conversion before orjson (verbatim): what it wrote, through ``json.dumps``."""
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return _old_text(value)
    if isinstance(value, enum.Enum):
        return old_jsonable(value.value)
    if isinstance(value, Mapping):
        return {_old_text(str(k)): old_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [old_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((old_jsonable(v) for v in value), key=repr)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return old_jsonable(dataclasses.asdict(value))
    if isinstance(value, datetime | date):
        return value.isoformat()
    return _old_text(str(value))


def has_surrogate(value: Any) -> bool:
    return any("\ud800" <= c <= "\udfff" for c in json.dumps(old_jsonable(value), ensure_ascii=False))


# --- hostile values -------------------------------------------------------------------------------------------

_nasty_text = st.text(
    alphabet=st.characters(exclude_categories=())
    | st.sampled_from(["\x00", "\ud800", "\udfff", "é", "\u2028", '"', "\\"]),
    max_size=8,
)
_numbers = (
    st.integers(-(2**70), 2**70)
    | st.integers(2**64, 2**200)
    | st.integers(-(2**200), -(2**63) - 1)
    | st.floats()  # NaN, infinities
    | st.sampled_from([1e16, 1e-7, -0.0, 5e-324, 1.7976931348623157e308])
)
_scalars = (
    st.none()
    | st.booleans()
    | _numbers
    | _nasty_text
    | st.sampled_from([Colour.RED, Colour.BLUE, Mixed.A, FailureKind.LOOP, Usage("m")])
    | st.datetimes(timezones=st.just(UTC))
    | st.dates()
)
_keys = (
    _nasty_text
    | st.integers(-(2**70), 2**70)
    | st.booleans()
    | st.none()
    | st.floats(allow_nan=False)
    | st.sampled_from([Colour.RED, Mixed.A, (1, "a")])
)
hostile = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4)
        | st.tuples(children, children)
        | st.dictionaries(_keys, children, max_size=4)
        | st.frozensets(st.integers(-5, 5) | st.text(max_size=2) | st.none(), max_size=4)
    ),
    max_leaves=16,
)


def nested(depth: int, leaf: Any) -> Any:
    """``depth`` lists, one inside the other, around ``leaf``."""
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def unwrap_text(text: str) -> tuple[int, Any]:
    """:func:`unwrap` of the JSON text of nested lists (without parsing the nesting: it may be too deep for
    ``json.loads``)."""
    depth = len(text) - len(text.lstrip("["))
    assert text.endswith("]" * depth)
    return depth, json.loads(text[depth : len(text) - depth])


def unwrap(value: Any) -> tuple[int, Any]:
    """(how many single-item lists wrap it, what is inside them)."""
    depth = 0
    while isinstance(value, list):
        (value,) = value
        depth += 1
    return depth, value


# --- the serializer itself ------------------------------------------------------------------------------------


@settings(max_examples=400, deadline=None)
@given(value=hostile)
def test_json_text_reads_back_as_the_contract_says(value: Any) -> None:
    assert json.loads(_json(value)) == expected(value)
    assert jsonable(value) == expected(value)


json_data = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
).filter(lambda v: "\\u0000" not in json.dumps(v))


@settings(max_examples=300, deadline=None)
@given(value=json_data)
def test_plain_json_is_written_by_orjson_as_it_is(value: Any) -> None:
    assert _json(value) == orjson.dumps(value).decode()


@settings(max_examples=400, deadline=None)
@given(value=hostile)
def test_issue_text_is_the_text_the_store_always_wrote(value: Any) -> None:
    """Byte for byte what ``json.dumps(jsonable(value))`` gave before (SQLite; PostgreSQL: UTF-8), except that a
    lone surrogate, which made the write fail on PostgreSQL, is now U+FFFD there and on SQLite."""
    old = old_jsonable(value)
    if has_surrogate(value):
        assert json.loads(_issue_json_sqlite(value) or "null") == expected(value)
        return
    assert _issue_json_sqlite(value) == (None if old is None else json.dumps(old))
    assert _issue_json_postgres(value) == (None if old is None else json.dumps(old, ensure_ascii=False))


def test_nesting_deeper_than_the_limit_keeps_the_rest_as_its_json_text() -> None:
    for depth in (200, 254, 255, MAX_JSON_DEPTH, MAX_JSON_DEPTH + 1, 3000):
        value = {"v": nested(depth, "x\x00")}  # the dict is at depth 1, the lists from 2
        back = json.loads(_json(value))["v"]
        kept, inside = unwrap(back)
        if depth + 1 <= MAX_JSON_DEPTH:
            assert (kept, inside) == (depth, "x\ufffd")
        else:
            assert kept == MAX_JSON_DEPTH - 1 and isinstance(inside, str)
            rest_depth, leaf = unwrap_text(inside)
            assert (kept + rest_depth, leaf) == (depth, "x\ufffd")


def test_circular_values_and_unprintable_objects_do_not_fail() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    ring: dict[str, Any] = {"a": 1}
    ring["self"] = {"again": ring}

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no")

    assert json.loads(_json(loop)) == [1, "[circular reference]"]
    assert json.loads(_json(ring)) == {"a": 1, "self": {"again": "[circular reference]"}}
    assert json.loads(_json([Unprintable()])) == ["<unprintable Unprintable>"]
    shared = [1, 2]
    assert json.loads(_json([shared, shared])) == [[1, 2], [1, 2]]  # shared, not circular


# --- through the store ----------------------------------------------------------------------------------------


def _result(trace: str, run: str, value: Any, *, reason: str | None = None) -> StoredResult:
    issue = Issue(FailureKind.WRONG_VALUE, tool="t\ud800", parameter="/p", expected=value, actual=value)
    return StoredResult(
        result=ScoreResult(
            scorer="tool_eval",
            scorer_kind="tool_eval",
            scorer_version=1,
            status="scored",
            score=0.5,
            threshold=1,  # an int where the column is a float
            passed=False,
            reason=reason,
            issues=(issue, Issue(FailureKind.LOOP, detail={"v": value})),
            details={"v": value},
            params={"v": value},
            params_hash=uuid.uuid4().hex[:12],  # parameters are serialized once per hash
            trace_id=trace,
            run_id=run,
            agent="a\x00gent",
            scored_at="2026-11-24T12:00:00Z",
        ),
        run_start_ns=1_764_000_000_000_000_000,
        tools=("get\ud800", "b"),
    )


def sqlite_reads(text: str | None) -> tuple[Any, str | None]:
    """What SQLite gives back for JSON ``text`` written to a column declared ``JSON``: the value read through
    SQLAlchemy's JSON type and ``CAST(… AS TEXT)``. The declared type gives the column NUMERIC affinity, so a bare
    number is stored as an SQLite number: an integer literal beyond int64 becomes a float, ``1.0`` the integer 1,
    ``1e+16`` the integer 10000000000000000 (docs/store.md). Asked of SQLite itself, not re-implemented here."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE TABLE t (j JSON)")
        conn.execute("INSERT INTO t VALUES (?)", (text,))
        raw, cast = conn.execute("SELECT j, CAST(j AS TEXT) FROM t").fetchone()
    finally:
        conn.close()
    return (json.loads(raw) if isinstance(raw, str) else raw), cast


def _read(store: SqlResultStore, trace: str) -> dict[str, Any]:
    with store.engine.connect() as conn:
        result = conn.execute(sa.select(results).where(results.c.trace_id == trace)).one()
        found = conn.execute(
            sa.select(issues, sa.cast(issues.c.actual, sa.Text).label("actual_text"))
            .where(issues.c.result_id == result.id)
            .order_by(issues.c.id)
        ).all()
        run = conn.execute(sa.select(runs).where(runs.c.trace_id == trace)).one()
        kept = conn.execute(sa.select(run_summaries).where(run_summaries.c.trace_id == trace)).one()
        tool = conn.execute(sa.select(tool_definitions).where(tool_definitions.c.agent == trace)).one()
        job = conn.execute(sa.select(judge_jobs).where(judge_jobs.c.trace_id == trace)).one()
    return {"result": result, "issues": found, "run": run, "kept": kept, "tool": tool, "job": job}


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=hostile)
def test_hostile_values_round_trip_through_every_json_column(store: SqlResultStore, value: Any) -> None:
    trace = uuid.uuid4().hex
    job = JudgeJob(
        key=f"{trace}|r1|judge|1",
        trace_id=trace,
        run_id="r1",
        agent=None,
        scorer="judge",
        scorer_kind="judge",
        scorer_version=1,
        params={"v": value},
        run={"v": value},
        run_start_ns=None,
        flagged=True,
        enqueued_at=NOW,
    )
    kept = KeptRun(trace, "r1", None, "hi\ud800", None, "ok", 1, 2, {"v": value})
    tool = OfferedTool(trace, "get", "h" * 64, "d\x00", value, NOW)
    flags = store.write_all([_result(trace, "r1", value)], jobs=[job], kept=[kept], tools=[tool])
    assert flags == [True]
    assert store.write_all([_result(trace, "r1", value)], jobs=[job], kept=[kept], tools=[tool]) == [False]
    got = _read(store, trace)
    want = expected(value)
    assert got["result"].details == {"v": want} and got["result"].params == {"v": want}
    assert got["result"].agent == "a\ufffdgent" and got["result"].threshold == 1.0
    wrong, loop = got["issues"]
    # a bare value in a JSON column: on SQLite a number is stored as an SQLite number (sqlite_reads)
    want_issue, want_text = sqlite_reads(_issue_json_sqlite(value)) if store.dialect == "sqlite" else (want, None)
    want_schema = sqlite_reads(_json(value))[0] if store.dialect == "sqlite" else want
    assert (wrong.expected, wrong.actual, wrong.tool, loop.detail) == (want_issue, want_issue, "t\ufffd", {"v": want})
    if not has_surrogate(value):  # the report groups values by this text: as the store always wrote it
        old = old_jsonable(value)
        dumps = json.dumps(old) if store.dialect == "sqlite" else json.dumps(old, ensure_ascii=False)
        assert _issue_json_sqlite(value) == (None if old is None else json.dumps(old))
        assert wrong.actual_text == (None if old is None else want_text if store.dialect == "sqlite" else dumps)
    assert got["run"].tools == ["get\ufffd", "b"]
    assert got["kept"].run == {"v": want} and got["kept"].user_text == "hi\ufffd"
    assert got["tool"].input_schema == want_schema and got["tool"].description == "d\ufffd"
    assert got["job"].params == {"v": want} and got["job"].run == {"v": want}


def test_deep_values_are_stored_and_read_back_whole_to_the_limit(store: SqlResultStore) -> None:
    """Nesting the old recursive conversion could not take (it failed the write: the trace was dead-lettered)."""
    trace = uuid.uuid4().hex
    deep = nested(2000, "leaf")
    item = _result(trace, "r1", deep)
    assert store.write_all([item]) == [True]
    with store.engine.connect() as conn:
        details = conn.execute(sa.select(results.c.details).where(results.c.trace_id == trace)).scalar_one()
    kept, inside = unwrap(details["v"])
    assert kept == MAX_JSON_DEPTH - 1
    rest, leaf = unwrap_text(inside)
    assert (kept + rest, leaf) == (2000, "leaf")


@pytest.mark.parametrize("value", [{"a": [1, "é", None, 2.5]}, "text", 3, [True, {"k": "v"}]])
def test_issue_text_in_the_database_is_unchanged(store: SqlResultStore, value: Any) -> None:
    trace = uuid.uuid4().hex
    store.write([_result(trace, "r1", value)])
    with store.engine.connect() as conn:
        text = conn.execute(
            sa.select(sa.cast(issues.c.actual, sa.Text))
            .select_from(issues.join(results))
            .where(results.c.trace_id == trace, issues.c.actual.is_not(None))
        ).scalar_one()
    assert text == (json.dumps(value) if store.dialect == "sqlite" else json.dumps(value, ensure_ascii=False))


def test_text_with_lone_surrogates_is_stored_and_stays_idempotent(store: SqlResultStore) -> None:
    trace = "t\ud800" + uuid.uuid4().hex
    item = _result(trace, "r\udfff", {"k": 1}, reason="why\ud83d")
    assert store.write([item, item]) == [True, False]
    assert store.write([item]) == [False]
    stored = clean(trace)
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(results).where(results.c.trace_id == stored)).one()
    assert (row.run_id, row.reason) == ("r\ufffd", "why\ufffd")
