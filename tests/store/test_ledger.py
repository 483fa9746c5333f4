"""The Message Batches ledger (``monitor.store.ledger``) on SQLite and on a real PostgreSQL: which batch holds
which custom id, statuses, the newest usable batch wins, forgetting and pruning."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from monitor.store import create_store_engine, migrate
from monitor.store.ledger import SqlBatchLedger
from monitor.store.schema import judge_batch_requests

T0 = datetime(2026, 11, 24, 9, 0, tzinfo=UTC)


@pytest.fixture
def ledger(store_url: str) -> Iterator[SqlBatchLedger]:
    engine = create_store_engine(store_url)
    migrate.upgrade(engine)
    yield SqlBatchLedger(engine)
    engine.dispose()


def test_record_then_holding_finds_the_batch_of_each_custom_id(ledger: SqlBatchLedger) -> None:
    ledger.record("msgbatch_a", "eval", "claude-x", ["c1", "c2"], T0, T0 + timedelta(hours=24))
    ledger.record("msgbatch_b", "daemon", None, ["c3"], T0, None)
    assert ledger.holding(["c1", "c2", "c3", "c4"]) == {"c1": "msgbatch_a", "c2": "msgbatch_a", "c3": "msgbatch_b"}
    assert ledger.holding([]) == {}
    batch = ledger.batch("msgbatch_a")
    assert batch is not None
    assert (batch.purpose, batch.model, batch.requests, batch.status) == ("eval", "claude-x", 2, "in_progress")
    assert batch.submitted_at == T0 and batch.expires_at == T0 + timedelta(hours=24)
    assert ledger.custom_ids("msgbatch_a") == ["c1", "c2"]
    assert ledger.batch("msgbatch_nope") is None
    # recording the same batch again (a retried call) changes nothing
    ledger.record("msgbatch_a", "eval", "claude-x", ["c1", "c2", "c9"], T0, None)
    assert ledger.custom_ids("msgbatch_a") == ["c1", "c2"]


def test_only_usable_batches_hold_and_the_newest_wins(ledger: SqlBatchLedger) -> None:
    ledger.record("old", "eval", None, ["c1", "c2"], T0, None)
    ledger.record("new", "eval", None, ["c1"], T0 + timedelta(minutes=5), None)
    assert ledger.holding(["c1", "c2"]) == {"c1": "new", "c2": "old"}
    assert ledger.set_status("new", "lost", T0 + timedelta(minutes=6))
    assert ledger.holding(["c1"]) == {"c1": "old"}
    assert ledger.set_status("old", "ended", T0 + timedelta(minutes=7))  # ended: results still readable
    assert ledger.holding(["c1", "c2"]) == {"c1": "old", "c2": "old"}
    assert ledger.set_status("old", "expired", T0 + timedelta(minutes=8))
    assert ledger.holding(["c1", "c2"]) == {}
    assert not ledger.set_status("nope", "ended", T0)
    with pytest.raises(ValueError):
        ledger.set_status("old", "done", T0)
    with pytest.raises(ValueError):
        ledger.record("x", "nightly", None, [], T0, None)


def test_open_batches_by_purpose(ledger: SqlBatchLedger) -> None:
    ledger.record("e1", "eval", None, ["a"], T0, None)
    ledger.record("d1", "daemon", None, ["b"], T0 + timedelta(seconds=1), None)
    ledger.record("e2", "eval", None, ["c"], T0 + timedelta(seconds=2), None)
    ledger.set_status("e2", "canceling", T0 + timedelta(seconds=3))
    assert [b.id for b in ledger.open_batches()] == ["e1", "d1", "e2"]
    assert [b.id for b in ledger.open_batches("eval")] == ["e1", "e2"]
    ledger.set_status("e1", "ended", T0 + timedelta(seconds=4))
    assert [b.id for b in ledger.open_batches("eval")] == ["e2"]
    assert [b.status for b in ledger.batches("eval")] == ["ended", "canceling"]
    updated = ledger.batch("e1")
    assert updated is not None and updated.updated_at == T0 + timedelta(seconds=4)


def test_forget_and_prune_drop_the_requests_too(ledger: SqlBatchLedger) -> None:
    ids = [f"c{i:04d}" for i in range(1200)]  # more than one IN (…) chunk
    ledger.record("big", "eval", None, ids, T0, None)
    assert len(ledger.holding(ids)) == 1200
    ledger.record("young", "eval", None, ["y"], T0 + timedelta(days=20), None)
    ledger.record("running", "daemon", None, ["r"], T0, None)
    ledger.set_status("big", "ended", T0 + timedelta(hours=1))
    ledger.set_status("young", "ended", T0 + timedelta(days=20))
    # ended before the cut-off → forgotten; running batches are kept whatever their age
    assert ledger.prune(T0 + timedelta(days=10)) == 1
    assert [b.id for b in ledger.batches()] == ["running", "young"]
    assert ledger.holding(ids) == {}
    with ledger.engine.connect() as conn:
        left = conn.execute(sa.select(sa.func.count()).select_from(judge_batch_requests)).scalar_one()
    assert left == 2
    assert ledger.forget("young") and not ledger.forget("young")
    assert ledger.prune(T0 + timedelta(days=100), purpose="eval") == 0
    assert [b.id for b in ledger.batches()] == ["running"]


def test_open_migrates_a_new_sqlite_file(tmp_path: object) -> None:
    path = f"{tmp_path}/state.sqlite"
    ledger = SqlBatchLedger.open(f"sqlite:///{path}")
    try:
        ledger.record("b", "eval", None, ["c"], T0, None)
    finally:
        ledger.close()
    again = SqlBatchLedger.open(f"sqlite:///{path}")  # reopened: migrated already, the batch is there
    try:
        assert again.holding(["c"]) == {"c": "b"}
    finally:
        again.close()
