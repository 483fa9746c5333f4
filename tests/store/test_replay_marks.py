"""Replay marks: written with the results in one transaction, loaded per partition, forgotten below a commit."""

from __future__ import annotations

import pytest

from monitor.store import ReplayMark, SqlResultStore, StoreUnavailable
from tests.store.builders import result


def test_marks_are_written_with_the_results_and_loaded_per_partition(store: SqlResultStore) -> None:
    marks = [
        ReplayMark("spans", 0, "trace", "a" * 32, 7),
        ReplayMark("spans", 0, "dead_letter", "9:0000abcd", 9),
        ReplayMark("spans", 1, "trace", "b" * 32, 3),
    ]
    assert store.write([result("t1", "r1")], marks) == [True]
    assert sorted(store.load_marks("spans", 0), key=lambda m: m.ident) == sorted(marks[:2], key=lambda m: m.ident)
    assert store.load_marks("spans", 1) == [marks[2]]
    assert store.load_marks("other", 0) == []
    # idempotent: the same marks again (a replayed write) change nothing; marks alone can be written
    assert store.write([result("t1", "r1")], marks) == [False]
    store.write([], [ReplayMark("spans", 1, "trace", "c" * 32, 5)])
    assert {m.ident for m in store.load_marks("spans", 1)} == {"b" * 32, "c" * 32}


def test_marks_below_the_committed_offset_are_forgotten(store: SqlResultStore) -> None:
    store.write([], [ReplayMark("spans", 0, "trace", f"{i:032x}", i) for i in range(10)])
    assert store.forget_marks("spans", 0, 6) == 6
    assert sorted(m.last_offset for m in store.load_marks("spans", 0)) == [6, 7, 8, 9]
    assert store.forget_marks("spans", 1, 100) == 0


def test_a_failing_result_write_leaves_no_mark(store: SqlResultStore) -> None:
    """Results and marks share one transaction: a rejected batch stores neither."""
    bad = result("t1", "")  # no run id: refused before anything is written
    with pytest.raises(ValueError):
        store.write([bad], [ReplayMark("spans", 0, "trace", "d" * 32, 4)])
    assert store.load_marks("spans", 0) == []


def test_marks_of_an_unreachable_store_raise_store_unavailable() -> None:
    store = SqlResultStore("postgresql+psycopg://nobody@127.0.0.1:9/none", connect_timeout_s=1)
    try:
        with pytest.raises(StoreUnavailable):
            store.load_marks("spans", 0)
    finally:
        store.close()
