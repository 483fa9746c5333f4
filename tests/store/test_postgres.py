"""PostgreSQL only: a server that goes away and comes back; replicas as separate processes."""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Iterator

import pytest

from monitor.settings import StoreSettings
from monitor.store import StoreUnavailable, open_store, queries
from tests.store.builders import result
from tests.support.postgres import PostgresCluster, PostgresUnavailable, unavailable


@pytest.fixture
def own_cluster() -> Iterator[PostgresCluster]:
    """A local cluster of this test's own (it gets stopped), whatever server the session uses."""
    try:
        cluster = PostgresCluster()
        cluster.start()
    except PostgresUnavailable as exc:
        unavailable(str(exc))
    yield cluster
    cluster.destroy()


def test_server_restart_raises_store_unavailable_then_recovers(own_cluster: PostgresCluster) -> None:
    store = open_store(StoreSettings(url=own_cluster.create_database()))
    assert store.write([result("t1")]) == [True]

    own_cluster.stop()
    began = time.monotonic()
    with pytest.raises(StoreUnavailable):
        store.write([result("t2")])
    with pytest.raises(StoreUnavailable):
        queries.scorer_stats(store)
    assert time.monotonic() - began < 15

    own_cluster.start()  # same port, same data
    assert store.write([result("t2"), result("t1")]) == [True, False]  # the same store object, no reopen
    assert [s.results for s in queries.scorer_stats(store)] == [2]
    store.close()


def test_open_store_on_a_down_server_is_unavailable(own_cluster: PostgresCluster) -> None:
    url = own_cluster.create_database()
    own_cluster.stop()
    with pytest.raises(StoreUnavailable):
        open_store(StoreSettings(url=url))


def _replica(url: str, offset: int, out: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    store = open_store(StoreSettings(url=url))
    base = [result(f"t{i % 60}", scorer=f"s{i // 60}") for i in range(120)]  # 120 distinct keys
    batch = base[offset:] + base[:offset]  # each replica in its own order
    new: list[str] = []
    for start in range(0, len(batch), 20):
        chunk = batch[start : start + 20]
        new += [f"{i.result.trace_id}/{i.result.scorer}" for i, ok in zip(chunk, store.write(chunk), strict=True) if ok]
    store.close()
    out.put(new)


def test_replica_processes_see_each_result_new_exactly_once(pg_url: str) -> None:
    ctx = multiprocessing.get_context("fork")  # the children open their own engines
    out: multiprocessing.Queue = ctx.Queue()  # type: ignore[type-arg]
    procs = [ctx.Process(target=_replica, args=(pg_url, k * 17, out)) for k in range(3)]
    for p in procs:
        p.start()
    news = [out.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    everything = [key for new in news for key in new]
    assert len(everything) == len(set(everything))  # nobody saw a key as new twice
    assert len(everything) == 120  # every key new exactly once, in some replica
