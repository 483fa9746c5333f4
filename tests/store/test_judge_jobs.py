"""Judge verdicts owed (table ``judge_jobs``) on SQLite and PostgreSQL: written with results in one transaction, never
owed twice nor owed once judged, settled with the verdict, claimed by one daemon at a time, leases renewed."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa

from monitor.settings import StoreSettings
from monitor.store import JudgeJob, SqlResultStore, open_store
from monitor.store.schema import judge_jobs
from tests.store.builders import result

NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def job(
    trace: str, *, owner: str | None = "pod-a", lease_s: float = 600, scorer: str = "judge_tool_selection"
) -> JudgeJob:
    return JudgeJob(
        key=f"{trace}|r1|{scorer}|7",
        trace_id=trace,
        run_id="r1",
        agent="weather",
        scorer=scorer,
        scorer_kind="judge_tool_selection",
        scorer_version=7,
        params={"variant": "mastra"},
        run={"trace_id": trace, "run_id": "r1", "user_text": "weather in Paris?\x00", "calls": []},
        run_start_ns=1,
        flagged=True,
        enqueued_at=NOW,
        lease_owner=owner,
        lease_until=None if owner is None else NOW + timedelta(seconds=lease_s),
    )


def owed(store: SqlResultStore) -> dict[str, str | None]:
    with store.engine.connect() as conn:
        return {row.key: row.lease_owner for row in conn.execute(sa.select(judge_jobs.c.key, judge_jobs.c.lease_owner))}


def test_jobs_ride_with_results_and_are_settled_with_their_verdict(store: SqlResultStore) -> None:
    flags = store.write_all([result("t1")], jobs=[job("t1"), job("t2"), job("t1")])
    assert flags == [True]
    assert owed(store) == {"t1|r1|judge_tool_selection|7": "pod-a", "t2|r1|judge_tool_selection|7": "pod-a"}
    # the verdict of t1 and the settling of its job in one write
    verdict = result("t1", scorer="judge_tool_selection", version=7)
    assert store.write_judged([verdict], settled=["t1|r1|judge_tool_selection|7"]) == [True]
    assert list(owed(store)) == ["t2|r1|judge_tool_selection|7"]
    # a replay owes nothing already judged, and nothing twice
    store.write_all([result("t1")], jobs=[job("t1"), job("t2")])
    assert list(owed(store)) == ["t2|r1|judge_tool_selection|7"]
    # a dropped job is settled with no result
    store.write_judged([], settled=["t2|r1|judge_tool_selection|7"])
    assert owed(store) == {} and store.count_judge_jobs() == 0


def test_a_job_reads_back_as_it_was_written(store: SqlResultStore) -> None:
    store.write_all([], jobs=[job("t9")])
    (back,) = store.claim_judge_jobs("pod-a", NOW, NOW + timedelta(minutes=10), 5, own=True)
    assert back.run["user_text"] == "weather in Paris?\ufffd"  # NUL cannot be stored: U+FFFD on both backends
    assert (back.params, back.flagged, back.run_start_ns, back.enqueued_at) == ({"variant": "mastra"}, True, 1, NOW)


def test_claims_take_expired_leases_and_with_own_a_restarts_own(store: SqlResultStore) -> None:
    store.write_all([], jobs=[job("a1"), job("a2", lease_s=10), job("b1", owner="pod-b"), job("n1", owner=None)])
    later = NOW + timedelta(seconds=60)
    # pod-c sees what nobody holds: the lease that ran out and the job never leased
    taken = store.claim_judge_jobs("pod-c", later, later + timedelta(minutes=10), 10)
    assert sorted(j.trace_id for j in taken) == ["a2", "n1"]
    # pod-a after a restart takes its own back at once, not pod-b's
    mine = store.claim_judge_jobs("pod-a", later, later + timedelta(minutes=10), 10, own=True)
    assert [j.trace_id for j in mine] == ["a1"]
    assert sorted(owed(store).values(), key=str) == ["pod-a", "pod-b", "pod-c", "pod-c"]
    # at most ``limit`` at a time
    assert len(store.claim_judge_jobs("pod-d", later + timedelta(hours=1), later + timedelta(hours=2), 1)) == 1


def test_renewing_keeps_a_lease_only_for_its_owner(store: SqlResultStore) -> None:
    store.write_all([], jobs=[job("a1", lease_s=10), job("b1", owner="pod-b", lease_s=10)])
    keys = ["a1|r1|judge_tool_selection|7", "b1|r1|judge_tool_selection|7"]
    assert store.renew_judge_jobs("pod-a", keys, NOW + timedelta(hours=1)) == 1
    later = NOW + timedelta(minutes=5)
    assert [j.trace_id for j in store.claim_judge_jobs("pod-c", later, later + timedelta(minutes=10), 10)] == ["b1"]


def test_retention_drops_jobs_owed_past_it(store: SqlResultStore) -> None:
    store.write_all([], jobs=[job("old")])
    store.purge_older_than(NOW + timedelta(seconds=1))
    assert store.count_judge_jobs() == 0


def test_two_daemons_claiming_at_once_never_take_the_same_job(pg_url: str) -> None:
    """PostgreSQL: ``FOR UPDATE SKIP LOCKED`` and the lease checked again on the locked row."""
    stores = [open_store(StoreSettings(url=pg_url)) for _ in range(4)]
    try:
        stores[0].write_all([], jobs=[job(f"t{i:03d}", owner=None) for i in range(200)])
        taken: dict[str, list[str]] = {}
        barrier = threading.Barrier(len(stores))

        def claim(i: int) -> None:
            barrier.wait()
            got: list[str] = []
            while batch := stores[i].claim_judge_jobs(f"pod-{i}", NOW, NOW + timedelta(minutes=10), 7):
                got += [j.key for j in batch]
            taken[f"pod-{i}"] = got

        threads = [threading.Thread(target=claim, args=(i,)) for i in range(len(stores))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        every = [k for keys in taken.values() for k in keys]
        assert len(every) == len(set(every)) == 200
        assert sum(1 for keys in taken.values() if keys) >= 2  # they did run at the same time
    finally:
        for s in stores:
            s.close()
