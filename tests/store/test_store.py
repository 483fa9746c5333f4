"""The result store on both backends: idempotent writes, one transaction, round trip, retention."""

from __future__ import annotations

import math
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.scoring.result import FailureKind, Issue, JudgeUsage, NoteKind, Severity
from monitor.settings import StoreSettings
from monitor.store import (
    ResultStore,
    SchemaNotCurrent,
    SqlResultStore,
    StoredResult,
    StoreUnavailable,
    open_store,
)
from monitor.store.schema import issues, results, runs
from tests.store.builders import missing_param, result, wrong_tool


def rows(store: SqlResultStore, table: sa.Table) -> list[sa.Row[Any]]:
    with store.engine.connect() as conn:
        return list(conn.execute(sa.select(table).order_by(*table.primary_key.columns)).all())


def count(store: SqlResultStore, table: sa.Table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def test_is_a_result_store(store: SqlResultStore) -> None:
    assert isinstance(store, ResultStore)


def test_write_returns_true_only_for_new_results(store: SqlResultStore) -> None:
    a, b = result("t1", scorer="s1"), result("t1", scorer="s2")
    assert store.write([a, b, a]) == [True, True, False]  # a repeated in one call: first occurrence only
    assert store.write([b, a]) == [False, False]  # replay
    assert store.write([result("t1", scorer="s1", version=2), a]) == [True, False]  # new scorer version
    assert store.write([]) == []
    assert count(store, results) == 3
    assert count(store, runs) == 1


def test_round_trip(store: SqlResultStore) -> None:
    judge = JudgeUsage(model="claude-x", input_tokens=10, output_tokens=3, requests=1, cost_usd=0.001)
    item = result(
        "trace-a",
        "run-a",
        "goal_judge",
        3,
        agent="travel",
        score=0.25,
        passed=False,
        reason="the goal was not met",
        scored_at="2025-03-01T14:00:00+02:00",
        issues=(wrong_tool("search_flights", "book_flight"), missing_param("book_flight", "/date")),
        details={"precision": 0.5, "raw": float("nan"), "nested": {"tuple": (1, 2)}},
        judge=judge,
        tools=("search_flights", "book_flight"),
        run_start_ns=1_740_830_400_123_000_000,
        conversation_id="conv-1",
    )
    assert store.write([item]) == [True]
    [row] = rows(store, results)
    assert (row.trace_id, row.run_id, row.scorer, row.scorer_version) == ("trace-a", "run-a", "goal_judge", 3)
    assert (row.agent, row.scorer_kind, row.status, row.params_hash) == ("travel", "goal_judge", "scored", "abc123")
    assert (row.score, row.threshold, row.passed, row.reason, row.degraded) == (
        0.25,
        0.5,
        False,
        "the goal was not met",
        None,
    )
    assert row.details == {"precision": 0.5, "raw": None, "nested": {"tuple": [1, 2]}}
    assert row.params == {"threshold": 0.5}
    assert row.judge["model"] == "claude-x" and row.judge["input_tokens"] == 10 and row.judge["cost_usd"] == 0.001
    assert row.scored_at == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)

    [wrong, missing] = rows(store, issues)
    assert wrong.result_id == row.id and missing.result_id == row.id
    assert (wrong.kind, wrong.severity, wrong.tool, wrong.expected_tool, wrong.call_index) == (
        "wrong_tool",
        "error",
        "search_flights",
        "book_flight",
        0,
    )
    assert wrong.detail == {"expected_tool": "book_flight"}
    assert wrong.expected is None and wrong.actual is None
    assert (missing.kind, missing.tool, missing.parameter, missing.expected) == (
        "missing_parameter",
        "book_flight",
        "/date",
        3,
    )

    [run] = rows(store, runs)
    assert (run.trace_id, run.run_id, run.agent, run.conversation_id) == ("trace-a", "run-a", "travel", "conv-1")
    assert run.tools == ["search_flights", "book_flight"]
    assert run.start_time == datetime(2025, 3, 1, 12, 0, 0, 123000, tzinfo=UTC)
    assert run.first_scored_at == run.last_scored_at == datetime(2025, 3, 1, 12, 0, tzinfo=UTC)


def test_run_row_tracks_first_and_last_scored_at(store: SqlResultStore) -> None:
    store.write([result(scorer="b", scored_at="2025-03-02T00:00:00Z", agent=None)])
    store.write([result(scorer="a", scored_at="2025-03-01T00:00:00Z"), result(scorer="c", scored_at=None)])
    store.write([result(scorer="a", scored_at="2020-01-01T00:00:00Z")])  # replay: no change
    [run] = rows(store, runs)
    assert run.first_scored_at == datetime(2025, 3, 1, tzinfo=UTC)
    assert run.last_scored_at > datetime(2025, 3, 2, tzinfo=UTC)  # scored_at None → now
    assert run.agent == "weather"  # filled in by a later result


def test_write_is_one_transaction(store: SqlResultStore) -> None:
    """A failure while inserting issues leaves nothing of the batch behind."""

    def fail_on_issues(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO ISSUES"):
            raise RuntimeError("boom")

    sa.event.listen(store.engine, "before_cursor_execute", fail_on_issues)
    try:
        with pytest.raises(RuntimeError):
            store.write([result("t1"), result("t2", issues=(wrong_tool("a", "b"),))])
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", fail_on_issues)
    assert count(store, results) == count(store, runs) == count(store, issues) == 0
    assert store.write([result("t1"), result("t2", issues=(wrong_tool("a", "b"),))]) == [True, True]
    assert count(store, issues) == 1


def test_results_without_ids_are_rejected(store: SqlResultStore) -> None:
    with pytest.raises(ValueError, match="trace_id"):
        store.write([result("t1"), result("", scorer="x")])
    assert count(store, results) == 0


def test_awkward_values_are_stored_identically(store: SqlResultStore) -> None:
    """NUL characters (PostgreSQL text cannot hold them), NaN/inf, enums, sets: one portable form."""
    issue = Issue(NoteKind.TOOL_SCHEMA_INVALID, severity=Severity.INFO, tool="bad\x00tool", detail={"v": math.inf})
    item = result("t\x00", details={"s": {3, 1}, "k": FailureKind.LOOP, "n": -math.inf}, issues=(issue,))
    assert store.write([item]) == [True]
    assert store.write([item]) == [False]
    [row] = rows(store, results)
    assert row.trace_id == "t\ufffd"
    assert row.details == {"s": [1, 3], "k": "loop", "n": None}
    [stored_issue] = rows(store, issues)
    assert stored_issue.tool == "bad\ufffdtool" and stored_issue.detail == {"v": None}


def test_purge_older_than_deletes_in_batches(store_url: str) -> None:
    store = SqlResultStore(store_url, purge_batch=2)
    store.migrate()
    try:
        old = [result(f"old{i}", scored_at="2025-01-01T00:00:00Z", issues=(wrong_tool("a", "b"),)) for i in range(7)]
        mixed = [
            result("mixed", scorer="s1", scored_at="2025-01-01T00:00:00Z", issues=(wrong_tool("a", "b"),)),
            result("mixed", scorer="s2", scored_at="2025-02-01T00:00:00Z"),
        ]
        new = [result("new", scored_at="2025-03-01T00:00:00Z", issues=(wrong_tool("a", "b"),))]
        store.write(old + mixed + new)
        cutoff = datetime(2025, 1, 15, tzinfo=UTC)
        assert store.purge_older_than(cutoff) == 8
        assert sorted((r.trace_id, r.scorer) for r in rows(store, results)) == [
            ("mixed", "s2"),
            ("new", "tool_eval"),
        ]
        assert sorted(r.trace_id for r in rows(store, runs)) == ["mixed", "new"]
        assert count(store, issues) == 1  # the issues of deleted results went with them
        assert store.purge_older_than(cutoff) == 0
        # naive cutoffs are UTC
        assert store.purge_older_than(datetime(2025, 2, 15)) == 1
        assert [r.trace_id for r in rows(store, runs)] == ["new"]
        # a purged result written again is new again
        assert store.write([old[0]]) == [True]
    finally:
        store.close()


def test_open_store_without_migrations_needs_a_current_schema(store_url: str) -> None:
    with pytest.raises(SchemaNotCurrent):
        open_store(StoreSettings(url=store_url, migrate_on_start=False))
    open_store(StoreSettings(url=store_url)).close()
    store = open_store(StoreSettings(url=store_url, migrate_on_start=False))
    assert store.write([result()]) == [True]
    store.close()


def test_open_store_twice_is_a_no_op(store_url: str) -> None:
    first = open_store(StoreSettings(url=store_url))
    first.write([result()])
    second = open_store(StoreSettings(url=store_url))
    assert second.write([result()]) == [False]
    first.close()
    second.close()


def test_concurrent_writers_of_the_same_results(store_url: str) -> None:
    """Replicas (separate stores, separate connections) writing the same results: each key is new exactly once."""
    open_store(StoreSettings(url=store_url)).close()
    batch = [result(f"t{i % 40}", scorer=f"s{i % 3}") for i in range(120)]
    n_writers = 4
    stores = [SqlResultStore(store_url) for _ in range(n_writers)]
    outcomes: list[list[bool]] = [[] for _ in range(n_writers)]
    barrier = threading.Barrier(n_writers)

    def writer(k: int) -> None:
        barrier.wait()
        mine = batch[k::2] + batch[: k + 1]  # overlapping, in different orders
        for start in range(0, len(mine), 25):
            outcomes[k].extend(stores[k].write(mine[start : start + 25]))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(n_writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()

    new_keys: list[tuple[str, str]] = []
    for k in range(n_writers):
        mine = batch[k::2] + batch[: k + 1]
        assert len(outcomes[k]) == len(mine)
        new_keys += [
            (i.result.trace_id or "", i.result.scorer) for i, new in zip(mine, outcomes[k], strict=True) if new
        ]
    distinct = {(i.result.trace_id or "", i.result.scorer) for i in batch}
    assert sorted(new_keys) == sorted(distinct)  # every key new exactly once across all writers


def test_in_memory_sqlite_is_shared_across_threads() -> None:
    store = open_store(StoreSettings(url="sqlite:///:memory:"))
    outcomes: list[bool] = []

    def work(i: int) -> None:
        outcomes.extend(store.write([result(f"t{i % 5}")]))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(True) == 5
    assert count(store, results) == 5
    store.close()


def test_sqlite_file_uses_wal_and_foreign_keys(tmp_path: Any) -> None:
    store = open_store(StoreSettings(url=f"sqlite:///{tmp_path / 'm.db'}"))
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    store.close()


def test_unreachable_sqlite_file_is_unavailable(tmp_path: Any) -> None:
    with pytest.raises(StoreUnavailable):
        open_store(StoreSettings(url=f"sqlite:///{tmp_path / 'missing-dir' / 'm.db'}"))


# --- property ----------------------------------------------------------------------------------------------

_issue = st.builds(
    Issue,
    kind=st.sampled_from(list(FailureKind)),
    tool=st.none() | st.text(max_size=8),
    parameter=st.none() | st.text(max_size=8),
    detail=st.none() | st.dictionaries(st.text(max_size=4), st.integers() | st.floats() | st.text(max_size=4)),
)
_item = st.tuples(
    st.sampled_from(["t1", "t2", "t3"]),
    st.sampled_from(["r1", "r2"]),
    st.sampled_from(["tool_eval", "judge"]),
    st.integers(1, 2),
    st.floats(0, 1),
    st.lists(_issue, max_size=3),
    st.sampled_from(["2025-03-01T00:00:00Z", "2025-03-02T10:00:00+05:00", None]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(items=st.lists(_item, max_size=25))
def test_writing_twice_stores_each_key_once(
    store: SqlResultStore, items: list[tuple[str, str, str, int, float, list[Issue], str | None]]
) -> None:
    prefix = uuid.uuid4().hex[:8]  # isolates this example from earlier ones in the same database
    batch: list[StoredResult] = [
        result(f"{prefix}-{t}", r, s, v, score=score, passed=score >= 0.5, issues=tuple(iss), scored_at=at)
        for t, r, s, v, score, iss, at in items
    ]
    keys = [(t, r, s, v) for t, r, s, v, *_ in items]
    first = store.write(batch)
    expected = [keys.index(k) == i for i, k in enumerate(keys)]
    assert first == expected
    assert store.write(batch) == [False] * len(batch)
    with store.engine.connect() as conn:
        stored = conn.execute(
            sa.select(results.c.trace_id, results.c.run_id, results.c.scorer, results.c.scorer_version).where(
                results.c.trace_id.startswith(prefix)
            )
        ).all()
        n_issues = conn.execute(
            sa.select(sa.func.count()).select_from(issues.join(results)).where(results.c.trace_id.startswith(prefix))
        ).scalar_one()
    assert sorted((t.split("-", 1)[1], r, s, v) for t, r, s, v in stored) == sorted(set(keys))
    # issues of the first occurrence of each key only
    assert n_issues == sum(len(items[i][5]) for i in range(len(items)) if expected[i])


def test_old_results_cutoff_uses_utc(store: SqlResultStore) -> None:
    store.write([result("t1", scored_at="2025-03-01T01:00:00+02:00")])  # 2025-02-28T23:00Z
    assert store.purge_older_than(datetime(2025, 2, 28, 23, tzinfo=UTC) - timedelta(seconds=1)) == 0
    assert store.purge_older_than(datetime(2025, 2, 28, 23, tzinfo=UTC) + timedelta(seconds=1)) == 1
