"""The store under faults that used to block or lose data silently, with real parts.

PostgreSQL frozen (postmaster and backends SIGSTOPped: the kernel still accepts and ACKs, nothing answers) or
slow (a lock held elsewhere): every store call gives up with :class:`StoreUnavailable` within its bound, and the
same store object works again once the server does. A SQLite file whose directory is moved away, removed or
whose file is replaced: the store is unavailable instead of writing into a file that is no longer at its path,
and works again once the original file is back.

Calls that may block run in a thread with a time limit, so a regression fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from monitor.settings import StoreSettings
from monitor.store import SqlResultStore, StoreUnavailable, open_store
from tests.store.builders import result
from tests.support.postgres import PostgresCluster, PostgresUnavailable, unavailable

CONNECT_S = 1.0
STATEMENT_S = 2.0
BOUND_S = 3 * (STATEMENT_S + CONNECT_S)
"""What a single call may take on a frozen or slow server: generous, the real bound is about S + C + 1 s."""


@dataclass
class Outcome:
    finished: bool
    elapsed: float
    value: Any = None
    error: BaseException | None = None


def bounded(call: Callable[[], Any], limit: float = BOUND_S) -> Outcome:
    """Run ``call`` in a thread for at most ``limit`` seconds (a call still blocked is left to finish later)."""
    out: dict[str, Any] = {}
    began = time.monotonic()

    def target() -> None:
        try:
            out["value"] = call()
        except BaseException as exc:
            out["error"] = exc
        out["elapsed"] = time.monotonic() - began

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(limit)
    if thread.is_alive():
        return Outcome(False, time.monotonic() - began)
    return Outcome(True, out["elapsed"], out.get("value"), out.get("error"))


def assert_unavailable(outcome: Outcome, what: str) -> StoreUnavailable:
    assert outcome.finished, f"{what}: still blocked after {outcome.elapsed:.1f}s"
    assert isinstance(outcome.error, StoreUnavailable), f"{what}: {outcome.error!r} / {outcome.value!r}"
    assert outcome.elapsed < BOUND_S
    return outcome.error


def settings(url: str) -> StoreSettings:
    return StoreSettings(url=url, connect_timeout_s=CONNECT_S, statement_timeout_s=STATEMENT_S)


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A local cluster of this test's own (it gets frozen), whatever server the session uses."""
    try:
        cluster = PostgresCluster()
        cluster.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    yield cluster
    cluster.destroy()  # thaws first


# --- PostgreSQL frozen --------------------------------------------------------------------------------------


def test_frozen_postgres_mid_transaction_write_is_unavailable_within_the_bound(own_cluster: PostgresCluster) -> None:
    store = open_store(settings(own_cluster.create_database()))
    assert store.write([result("t1")]) == [True]
    froze = threading.Event()

    def freeze_on_first_statement(*_: Any) -> None:
        if not froze.is_set():
            froze.set()
            own_cluster.freeze()  # the statement about to be sent reaches a server that no longer answers

    sa.event.listen(store.engine, "before_cursor_execute", freeze_on_first_statement)
    try:
        outcome = bounded(lambda: store.write([result("t2")]))
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", freeze_on_first_statement)
        own_cluster.thaw()
    assert froze.is_set()
    error = assert_unavailable(outcome, "write to a server frozen mid-transaction")
    assert "store.statement_timeout_s" in str(error)
    assert outcome.elapsed >= STATEMENT_S  # the server-side timeout cannot act: the client bound did

    # the same object, no reopen: the abandoned transaction was not committed
    assert store.write([result("t2"), result("t1")]) == [True, False]
    store.close()


def test_frozen_postgres_pooled_and_new_connections_purge_and_migrate_are_bounded(
    own_cluster: PostgresCluster,
) -> None:
    url = own_cluster.create_database()
    store = open_store(settings(url))
    assert store.write([result("t1")]) == [True]  # leaves an idle pooled connection
    with own_cluster.frozen():
        # the pooled connection's check hangs, then a new connection cannot be made
        error = assert_unavailable(bounded(lambda: store.write([result("t2")])), "write on a pooled connection")
        assert "store.connect_timeout_s" in str(error) or "timeout" in str(error)
        # the pool was dropped: this one has to connect
        assert_unavailable(bounded(lambda: store.write([result("t3")])), "write on a new connection")
        assert_unavailable(bounded(lambda: store.purge_older_than(datetime(2030, 1, 1, tzinfo=UTC))), "purge")
        assert_unavailable(bounded(lambda: open_store(settings(url))), "open_store (migrate)")
    assert store.write([result("t2"), result("t3"), result("t1")]) == [True, True, False]
    store.close()


# --- PostgreSQL slow but alive ------------------------------------------------------------------------------


def test_slow_postgres_statement_is_cancelled_by_the_server(pg_url: str) -> None:
    store = open_store(settings(pg_url))
    assert store.write([result("t1")]) == [True]
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1)) as locker:
        locker.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")  # held until this transaction ends
        try:
            outcome = bounded(lambda: store.write([result("t2")]))
        finally:
            locker.rollback()
    error = assert_unavailable(outcome, "write behind a lock")
    assert "statement timeout" in str(error)  # the server cancelled it (the connection stays usable)
    assert store.write([result("t2"), result("t1")]) == [True, False]
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SHOW statement_timeout").scalar() == "2s"
    store.close()


# --- SQLite file gone ---------------------------------------------------------------------------------------


def sqlite_store(tmp_path: Path) -> tuple[SqlResultStore, Path]:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "results.db"
    store = open_store(StoreSettings(url=f"sqlite:///{path}"))
    assert store.write([result("t1")]) == [True]
    return store, path


def stored_traces(path: Path) -> list[str]:
    with sqlite3.connect(path) as conn:
        return [row[0] for row in conn.execute("SELECT trace_id FROM results ORDER BY trace_id")]


def test_sqlite_directory_moved_away_is_unavailable_until_it_is_back(tmp_path: Path) -> None:
    store, path = sqlite_store(tmp_path)
    away = tmp_path / "away"
    path.parent.rename(away)
    with pytest.raises(StoreUnavailable, match=r"results\.db"):
        store.write([result("t2")])
    with pytest.raises(StoreUnavailable):
        store.purge_older_than(datetime(2000, 1, 1, tzinfo=UTC))
    assert stored_traces(away / "results.db") == ["t1"]  # nothing went into the moved file
    away.rename(path.parent)
    assert store.write([result("t2"), result("t1")]) == [True, False]
    store.close()
    assert stored_traces(path) == ["t1", "t2"]


def test_sqlite_directory_removed_stays_unavailable_and_no_new_file_is_made(tmp_path: Path) -> None:
    store, path = sqlite_store(tmp_path)
    shutil.rmtree(path.parent)
    with pytest.raises(StoreUnavailable, match="restart"):
        store.write([result("t2")])
    path.parent.mkdir()  # e.g. an empty volume mounted again at the same place
    with pytest.raises(StoreUnavailable):
        store.write([result("t2")])
    assert os.listdir(path.parent) == []  # no fresh, empty database made behind the daemon's back
    store.close()


def test_sqlite_file_replaced_is_unavailable(tmp_path: Path) -> None:
    store, path = sqlite_store(tmp_path)
    copy = path.with_name("copy.db")
    with sqlite3.connect(path) as src, sqlite3.connect(copy) as dst:
        src.backup(dst)
    os.replace(copy, path)  # same content, another file: what the store holds open is no longer at the path
    with pytest.raises(StoreUnavailable, match="replaced"):
        store.write([result("t2")])
    assert stored_traces(path) == ["t1"]
    store.close()


def test_sqlite_write_racing_with_the_removal_is_not_reported_as_stored(tmp_path: Path) -> None:
    store, path = sqlite_store(tmp_path)
    away = tmp_path / "away"

    def move_before_commit(_conn: Any) -> None:
        if path.parent.exists():
            path.parent.rename(away)  # the commit lands in a file that is no longer at the path

    sa.event.listen(store.engine, "commit", move_before_commit)
    try:
        with pytest.raises(StoreUnavailable):
            store.write([result("t2")])
    finally:
        sa.event.remove(store.engine, "commit", move_before_commit)
    away.rename(path.parent)
    # retried once the file is back: stored exactly once (the raced commit did land in it, so it is a replay)
    assert store.write([result("t2")]) == [False]
    store.close()
    assert stored_traces(path) == ["t1", "t2"]
