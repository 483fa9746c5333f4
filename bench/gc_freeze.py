"""Benchmark: CPU per span of the whole pipeline with the startup heap frozen (``gc.freeze``) beside without.

The daemon's own chain (decode → assemble → rebuild → sample → score → judge → store → observe → export →
commit, ``monitor.app.build_loop``) reads ``--traces`` agent traces from the in-memory broker into a SQLite
store, sampling every run, in a fresh subprocess per pass; passes alternate between the two modes and the
median of each counts. ``frozen`` calls :func:`monitor.app.freeze_startup_heap` once the loop is built, as
``monitor run`` does. The ratio frozen ÷ plain is the figure (the machine is shared and noisy).

    .venv/bin/python bench/gc_freeze.py [--traces 1500] [--passes 5]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def one_pass(traces: int, frozen: bool) -> float:
    """CPU seconds per span of one pass through the chain (in this process)."""
    from monitor.app import freeze_startup_heap
    from monitor.ingest.memory import MemoryBroker
    from monitor.testing import ManualClock
    from tests.steps.conftest import TOPIC, make_settings, memory_chain
    from tests.steps.test_steps import records

    settings = make_settings(Path(tempfile.mkdtemp(prefix="gc-bench-")), sampling={"rate": 1.0})
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 1)
    values = records(traces)
    for rec in values:
        broker.produce(TOPIC, rec.value, key=rec.key)
    clock = ManualClock(1_000.0)
    loop, store = memory_chain(settings, broker, clock)
    if frozen:
        freeze_startup_heap()
    started = time.process_time()
    while loop.stats.records < len(values) or loop.stats.runs < traces:
        loop.step()
        clock.advance(1.0)
    loop.commit()
    cpu = time.process_time() - started
    store.close()
    return cpu / loop.stats.spans


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=1500)
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--one", choices=("plain", "frozen"), help=argparse.SUPPRESS)  # a child pass
    ns = ap.parse_args()
    if ns.one:
        print(one_pass(ns.traces, ns.one == "frozen"))
        return
    got: dict[str, list[float]] = {"plain": [], "frozen": []}
    for _ in range(ns.passes):
        for mode in ("plain", "frozen"):
            out = subprocess.run(
                [sys.executable, __file__, "--traces", str(ns.traces), "--one", mode],
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            got[mode].append(float(out.strip().splitlines()[-1]))
    plain, frozen = statistics.median(got["plain"]), statistics.median(got["frozen"])
    print(f"{ns.traces} traces per pass, {ns.passes} passes per mode (median)")
    print(f"  plain   {plain * 1e6:7.0f} µs CPU per span")
    print(f"  frozen  {frozen * 1e6:7.0f} µs CPU per span")
    print(f"  frozen ÷ plain: {frozen / plain:.2f}")


if __name__ == "__main__":
    main()
