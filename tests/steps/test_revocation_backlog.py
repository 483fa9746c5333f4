"""A revocation while the store is down leaves no phantom backlog.

The backlog (closed traces between the assembler and the commit, :class:`monitor.steps.work.InFlight`) gates the
closing of traces and pauses fetching (``backlog``). While the store is down the store step holds the traces it
could not write (and with workers on, the worker step holds the ones behind them). A revocation drops them
there: they are re-read by whoever gets the partitions. They must leave the backlog count too, or the daemon keeps
counting traces nobody holds: after a few rebalances during an outage it would stop closing traces and pause
for good.

Real parts: the daemon's chain (``build_loop``) on the in-memory broker, a SQLite store whose directory is moved
away (the store vanishes) and back; with workers, real worker processes.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest
import sqlalchemy as sa

from monitor.ingest.memory import MemoryBroker
from tests.steps.conftest import TOPIC, make_settings, memory_chain
from tests.support.daemon import agent_traffic

PARTITIONS = [(TOPIC, 0), (TOPIC, 1)]


@pytest.mark.parametrize("processes", [0, 1])
def test_traces_dropped_by_a_revocation_during_a_store_outage_leave_the_backlog(tmp_path: Path, processes: int) -> None:
    n = 24
    traffic = agent_traffic(n, seed=5, parts=2, json_share=0.0)
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 2)
    first = 4  # the records of the first two traces: stored before the outage (partitions assigned, marks loaded)
    for key, value in traffic.records[:first]:
        broker.produce(TOPIC, value, key=key)
    db, gone = tmp_path / "db", tmp_path / "gone"
    db.mkdir()
    settings = make_settings(
        db,
        assembler={"root_idle_s": 0.0},
        store={"url": f"sqlite:///{db / 'results.db'}"},
        workers={"processes": processes, "batch_traces": 2},
    )
    loop, store = memory_chain(settings, broker)
    try:
        deadline = time.monotonic() + 60
        while loop.stats.traces_scored < 2 and time.monotonic() < deadline:
            loop.step()
        shutil.move(db, gone)  # the store vanishes; the rest of the traffic arrives
        for key, value in traffic.records[first:]:
            broker.produce(TOPIC, value, key=key)
        while not ("store" in loop.head.pressure() and loop.inflight.traces >= 4) and time.monotonic() < deadline:
            loop.step()
        held = loop.inflight.traces
        assert "store" in loop.head.pressure() and held >= 4, (held, loop.head.pressure())

        loop.source.revoke(PARTITIONS)  # as a rebalance does, while the store is still down
        assert (loop.inflight.traces, loop.inflight.nbytes) == (0, 0)
        assert "backlog" not in loop.head.pressure()

        shutil.move(gone, db)  # the store is back; the partitions come back with the next rebalance
        broker.rebalance()
        deadline = time.monotonic() + 120
        while loop.stats.traces_scored < n and time.monotonic() < deadline:
            loop.step()
        loop.drain(time.monotonic() + 10)
        assert loop.stats.traces_scored == n
        assert (loop.inflight.traces, loop.inflight.nbytes) == (0, 0)
        assert dict(broker.committed["memory"]) == broker.end_offsets(TOPIC)
        with store.engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT trace_id, COUNT(*) FROM runs GROUP BY trace_id")).all()
        assert sorted(t for t, _ in runs) == sorted(traffic.trace_ids)
        assert all(count == 1 for _, count in runs)
    finally:
        loop.head.close()
        store.close()
