"""``monitor run`` with worker processes (``workers.processes``), as the real process tree a terminal, systemd or a
container runtime signals.

* **Ctrl-C in a terminal** sends SIGINT to the whole process group, and systemd's default ``KillMode`` sends SIGTERM
  to every process of the unit: the workers get the signal too. They leave the stopping to the daemon's process,
  which drains through them (no worker dies, the pool is not restarted, nothing is rejected) and exits 0; what it
  had not stored is read again by the next process, every run stored once.
* **kill -9 of the daemon's process** leaves no worker behind: they notice their parent is gone and exit. The next
  process (with workers too) re-reads what the first had not committed and stores every run exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.support.daemon import (
    agent_traffic,
    daemon_settings,
    duplicate_result_keys,
    http_status,
    metric_sum,
    names,
    scrape,
    spawn_daemon,
    store_counts,
    wait_for,
    write_config,
)
from tests.support.kafka import committed, create_topics, end_offsets, free_port, produce

WORKERS = {"processes": 2, "batch_traces": 2, "start_timeout_s": 60.0}


def _ready(port: int) -> bool:
    try:
        return http_status(port, "/readyz")[0] == 200
    except OSError:
        return False


def _workers(proc: psutil.Process) -> list[psutil.Process]:
    """The worker processes of the daemon ``proc`` (spawned by multiprocessing; not its resource tracker)."""
    out = []
    for child in proc.children(recursive=True):
        try:
            if any("spawn_main" in part for part in child.cmdline()):
                out.append(child)
        except psutil.Error:
            continue
    return out


def _start_with_workers(config: Path, log: Path) -> tuple[subprocess.Popen[bytes], list[psutil.Process]]:
    """``monitor run`` in a process group of its own, once its two workers are up; and the workers."""
    proc = spawn_daemon(config, log, new_session=True)
    try:
        daemon = psutil.Process(proc.pid)
        wait_for(lambda: len(_workers(daemon)) == 2, 60, "two worker processes")
        return proc, _workers(daemon)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        raise


def _next_daemon_finishes(
    kafka_bootstrap: str, topic: str, group: str, url: str, config: Path, log: Path, runs: int, **sections: Any
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """A second ``monitor run`` reads what the first left: every run stored, offsets committed to the end, a clean
    stop. Returns its metrics as scraped before the stop."""
    port = free_port()
    proc = spawn_daemon(
        write_config(config, daemon_settings(kafka_bootstrap, topic, group, url, http={"port": port}, **sections)), log
    )
    try:
        wait_for(lambda: _ready(port), 60, "the next daemon ready")
        wait_for(lambda: store_counts(url)[0] == runs, 60, "every run stored")
        ends = end_offsets(kafka_bootstrap, topic, 2)
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 20, "offsets committed to the end")
        metrics = scrape(port)
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert store_counts(url)[0] == runs
    assert duplicate_result_keys(url) == 0
    return metrics


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_whole_process_group_drains_through_the_workers_and_loses_nothing(
    kafka_bootstrap: str, tmp_path: Path, signum: signal.Signals
) -> None:
    topic, group = names(f"workers-{signum.name.lower()}")
    create_topics(kafka_bootstrap, {topic: 2})
    traffic = agent_traffic(40, seed=61)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    log = tmp_path / "daemon.log"
    settings = daemon_settings(kafka_bootstrap, topic, group, url, http={"port": free_port()}, workers=WORKERS)
    proc, workers = _start_with_workers(write_config(tmp_path / "first.yaml", settings), log)
    try:
        produce(kafka_bootstrap, topic, traffic.records)
        wait_for(lambda: store_counts(url)[0] >= 5, 60, "the daemon stores runs")
        os.killpg(proc.pid, signum)  # the daemon and its workers, as Ctrl-C or systemd do
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    text = log.read_text(errors="replace")
    assert "a worker process died" not in text and "rejected" not in text, text[-3000:]
    _gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, f"workers left behind: {alive}"

    _next_daemon_finishes(kafka_bootstrap, topic, group, url, tmp_path / "second.yaml", log, traffic.runs)


def test_kill_9_of_the_daemon_leaves_no_worker_behind_and_the_next_one_stores_every_run_once(
    kafka_bootstrap: str, tmp_path: Path
) -> None:
    topic, group = names("workers-kill9")
    create_topics(kafka_bootstrap, {topic: 2})
    traffic = agent_traffic(30, seed=62)
    url = f"sqlite:///{tmp_path / 'results.db'}"
    log = tmp_path / "daemon.log"
    # the first process never reaches its commit timer: everything it stored is re-read by the second
    no_commits = {"commit_interval_s": 3600}
    first = daemon_settings(
        kafka_bootstrap, topic, group, url, http={"port": free_port()}, workers=WORKERS, kafka=no_commits
    )
    proc, workers = _start_with_workers(write_config(tmp_path / "first.yaml", first), log)
    try:
        produce(kafka_bootstrap, topic, traffic.records)
        wait_for(lambda: store_counts(url)[0] >= 5, 60, "the daemon stores runs")
        proc.kill()  # SIGKILL mid-stream, batches in the workers
        proc.wait(10)
        started = time.monotonic()
        _gone, alive = psutil.wait_procs(workers, timeout=15)
        assert not alive, f"workers still running {time.monotonic() - started:.0f} s after their parent died: {alive}"
    finally:
        if proc.poll() is None:
            proc.kill()
        for p in psutil.Process().children(recursive=True):  # nothing of this test may outlive it
            if p.pid != os.getpid() and "spawn_main" in " ".join(p.cmdline()):
                p.kill()

    stored_before = store_counts(url)[0]
    metrics = _next_daemon_finishes(
        kafka_bootstrap, topic, group, url, tmp_path / "second.yaml", log, traffic.runs, workers=WORKERS
    )
    # counted once: the second process counts only the runs the first had not stored
    assert metric_sum(metrics, "monitor_runs_scored_total") == traffic.runs - stored_before
