"""The worker pool (``workers.processes``): the same results as one process, in order, through faults.

Real parts: the daemon's chain (``build_loop``) on the in-memory broker, a SQLite store, real worker processes
(``spawn``). The inline chain is the reference: with workers, every stored result, kept run and offset must be the
same; a worker killed with SIGKILL mid-stream loses nothing; a full pool refuses work (``workers`` pressure)
rather than buffering without bound.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from monitor.ingest.memory import MemoryBroker
from monitor.settings import Settings
from monitor.steps.contract import Message, MessageRejected
from monitor.steps.workers import WorkersStep
from monitor.store import open_store
from tests.steps.conftest import TOPIC, Collect, make_settings, memory_chain
from tests.support.daemon import agent_traffic

TP = (TOPIC, 0)


def _brokers(n_traces: int, seed: int = 9) -> tuple[MemoryBroker, MemoryBroker]:
    """Two brokers holding the same records (the traffic's ids are random: it is made once)."""
    records = agent_traffic(n_traces, seed=seed, parts=2, json_share=0.25).records
    out = []
    for _ in range(2):
        broker = MemoryBroker()
        broker.create_topic(TOPIC, 1)
        for key, value in records:
            broker.produce(TOPIC, value, key=key)
        out.append(broker)
    return out[0], out[1]


def _settings(path: Path, **sections: dict[str, Any]) -> Settings:
    path.mkdir(parents=True, exist_ok=True)
    return make_settings(path, assembler={"root_idle_s": 0.2}, **sections)


def _run(settings: Settings, broker: MemoryBroker, n_traces: int, *, kill_after: int | None = None) -> dict[str, Any]:
    loop, store = memory_chain(settings, broker)
    killed = False
    deadline = time.monotonic() + 120
    try:
        while loop.stats.traces_scored < n_traces and time.monotonic() < deadline:
            loop.step()
            head = loop.head.next  # decode → assemble → (workers | rebuild)
            if kill_after is not None and not killed and loop.stats.records >= kill_after:
                workers = head.next
                assert isinstance(workers, WorkersStep)
                pids = workers.worker_pids()
                if pids:
                    os.kill(pids[0], signal.SIGKILL)
                    killed = True
        loop.drain(time.monotonic() + 10)
        assert loop.stats.traces_scored == n_traces, loop.stats
        with store.engine.connect() as conn:
            results = sorted(
                conn.execute(sa.text("SELECT trace_id, run_id, scorer, status, score, passed FROM results")).all()
            )
            kept = sorted(conn.execute(sa.text("SELECT trace_id, run_id, agent FROM runs")).all())
        out = {
            "results": results,
            "kept": kept,
            "committed": dict(broker.committed["memory"]),
            "new": loop.stats.results_new,
            "killed": killed,
        }
        if kill_after is not None:
            out["restarts"] = loop.head.next.next.restarts
        return out
    finally:
        loop.head.close()
        store.close()


def test_workers_store_exactly_what_one_process_stores(tmp_path: Path) -> None:
    n = 60
    one, two = _brokers(n)
    inline = _run(_settings(tmp_path / "a"), one, n)
    pooled = _run(_settings(tmp_path / "b", workers={"processes": 2, "batch_traces": 4}), two, n)
    assert inline["results"] and inline["kept"]
    assert pooled["results"] == inline["results"]
    assert pooled["kept"] == inline["kept"]
    assert pooled["committed"] == inline["committed"] == {TP: 2 * n}
    assert pooled["new"] == inline["new"] == len(inline["results"])


def test_a_worker_killed_mid_stream_loses_nothing(tmp_path: Path) -> None:
    n = 80
    one, two = _brokers(n, seed=3)
    reference = _run(_settings(tmp_path / "a"), one, n)
    got = _run(
        _settings(tmp_path / "b", workers={"processes": 2, "batch_traces": 2, "linger_s": 0.5}), two, n, kill_after=40
    )
    assert got["killed"] and got["restarts"] >= 1
    assert got["results"] == reference["results"]
    assert got["committed"] == {TP: 2 * n}


def test_a_full_pool_refuses_work_and_forwards_in_submission_order(tmp_path: Path) -> None:
    """One worker, one batch of one trace in flight: the second trace is refused (``workers``), nothing is taken;
    once the first is back both go on, in order."""
    from monitor.ingest.replay import ReplayGuard
    from monitor.steps.work import TraceWork
    from monitor.trajectory.assembler import Assembler, AssemblerLimits

    settings = make_settings(tmp_path, workers={"processes": 1, "batch_traces": 1, "max_batches": 1})
    store = open_store(settings.store)
    asm = Assembler(AssemblerLimits(root_idle_s=1e9, idle_s=1e9))
    from monitor.ingest.decode import index_traces

    for offset, (_key, value) in enumerate(agent_traffic(3, seed=1, parts=1, json_share=0.0).records):
        indexed = index_traces(value)
        asm.add_deferred(indexed.record, indexed.traces, TP, offset, 0.0, len(value))
    closed = asm.drain(0.0)
    end: Collect[Any] = Collect()
    step = WorkersStep(end, settings, guard=ReplayGuard(store), sampling=None, clock=time.monotonic)
    try:
        step.submit(Message(TraceWork(closed[0]), {TP: 1}))
        refused = False
        try:
            step.submit(Message(TraceWork(closed[1]), {TP: 2}))
        except MessageRejected as exc:
            refused = exc.reason == "workers"
        assert refused and "workers" in step.pressure()
        deadline = time.monotonic() + 60
        while not end.messages and time.monotonic() < deadline:
            step.poll()
            time.sleep(0.01)
        step.submit(Message(TraceWork(closed[1]), {TP: 2}))
        step.submit(Message(None, {TP: 3}))
        step.join(60)
        assert [m.committable for m in end.messages] == [{TP: 1}, {TP: 2}, {TP: 3}]
        works = [m.payload for m in end.messages[:2]]
        assert [w.closed.trace_id for w in works] == [closed[0].trace_id, closed[1].trace_id]
        assert all(w.runs and w.rows and w.sampled == [True] * len(w.runs) for w in works)
    finally:
        step.close()
        store.close()


def test_what_a_worker_sends_back_reads_back_equal(tmp_path: Path) -> None:
    """Every recorded fixture's outcome (runs, rows, kept runs, tools) survives the worker's compact pickling."""
    import pickle

    from monitor.ingest.decode import index_traces
    from monitor.steps.workers import TraceWorker, compact_dumps
    from monitor.trajectory.assembler import Assembler, AssemblerLimits

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
    asm = Assembler(AssemblerLimits(root_idle_s=1e9, idle_s=1e9))
    for offset, path in enumerate(sorted(fixtures.glob("*/*.traces.pb"))):
        value = path.read_bytes()
        indexed = index_traces(value)
        asm.add_deferred(indexed.record, indexed.traces, TP, offset, 0.0, len(value))
    worker = TraceWorker(make_settings(tmp_path))
    outcomes = [worker.handle(closed) for closed in asm.drain(0.0)]
    assert sum(len(o.rows) for o in outcomes) > 500 and sum(len(o.kept) for o in outcomes) > 50
    assert pickle.loads(compact_dumps(outcomes)) == outcomes


def test_usable_cpus_reads_the_cgroup_quota_kubernetes_sets_from_a_cpu_limit(tmp_path: Path) -> None:
    from monitor.steps.workers import usable_cpus

    affinity = float(len(os.sched_getaffinity(0)))
    v2 = tmp_path / "v2"
    v2.mkdir()
    (v2 / "cpu.max").write_text("50000 100000\n")  # limits.cpu: 500m
    assert usable_cpus(v2) == min(affinity, 0.5)
    (v2 / "cpu.max").write_text("max 100000\n")  # no limit
    assert usable_cpus(v2) == affinity
    v1 = tmp_path / "v1"
    (v1 / "cpu").mkdir(parents=True)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("25000\n")
    (v1 / "cpu" / "cpu.cfs_period_us").write_text("100000\n")
    assert usable_cpus(v1) == min(affinity, 0.25)
    (v1 / "cpu" / "cpu.cfs_quota_us").write_text("-1\n")  # v1: no limit
    assert usable_cpus(v1) == affinity
    assert usable_cpus(tmp_path / "none") == affinity  # no cgroup files: the affinity alone


def test_more_workers_than_cpus_is_warned_at_start_with_the_key_the_value_and_the_fix(
    tmp_path: Path, caplog: Any
) -> None:
    from monitor.steps.workers import crowded_cpus, usable_cpus

    assert crowded_cpus(2, 2.0) is None and crowded_cpus(1, 0.5) is not None
    message = crowded_cpus(4, 2.0)
    assert message is not None and "workers.processes is 4" in message and "Set workers.processes to 2" in message
    from monitor.ingest.replay import ReplayGuard

    processes = int(usable_cpus()) + 1  # one more than this machine gives the test
    settings = make_settings(tmp_path, workers={"processes": processes})
    store = open_store(settings.store)
    step = WorkersStep(Collect(), settings, guard=ReplayGuard(store), sampling=None, clock=time.monotonic)
    try:
        with caplog.at_level("WARNING", logger="monitor.steps.workers"):
            step.start()
        assert [r.getMessage() for r in caplog.records if "workers.processes is" in r.getMessage()] == [
            crowded_cpus(processes, usable_cpus())
        ]
    finally:
        step.close()
        store.close()
