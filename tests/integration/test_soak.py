"""The soak of bench/soak.py in its CI form: two minutes of fresh agent traces at a modest rate into one daemon
process (real Tansu broker, real ``python -m monitor run``, SQLite store); the same verdicts as the hour-long run.

* RSS flat: after the first minute (the warm-up) the RSS grows less than 5 % of the first minute's level;
* lag bounded: no upward trend between the first and the last quarter, and back to 0 once the producer stops;
* open traces bounded: likewise, and none left open after the drain;
* every run sent is stored once: the store's ``runs`` table ends with exactly the runs of the traces sent
  (nested runs included), every trace id present, no scorer result twice.

The verdict logic itself is checked on made-up samples first (a leak, a growing lag, an undrained run fail).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.soak import DRAIN_S, Sample, Soak, analyse, report, soak, stored_runs
from monitor.demo.broker import TansuBroker
from tests.support.daemon import duplicate_result_keys

SECONDS = 120.0
RATE = 15.0  # traces/s: about 140 spans/s, a small fraction of one member's capacity


def _made_up(
    *, rss_per_min: float = 0.0, lag_per_min: float = 0.0, open_per_min: float = 0.0, drained: bool = True
) -> Soak:
    samples = [
        Sample(
            t=t,
            rss=100e6 + rss_per_min * t / 60,
            cpu=t * 0.1,
            lag=(t % 7) + lag_per_min * t / 60,
            traces_open=3 + (t % 5) + open_per_min * t / 60,
            spans_open=30.0,
            bytes_open=1e5,
            runs_sampled=t * RATE,
            spans_decoded=t * RATE * 9,
            broker_rss=0.0,
        )
        for t in range(0, 601, 5)
    ]
    return Soak(
        rate=RATE,
        seconds=600.0,
        samples=samples,
        traces=int(600 * RATE),
        records=int(1200 * RATE),
        spans=int(600 * RATE * 9),
        top_runs=int(600 * RATE),
        runs=int(600 * RATE),
        produce_seconds=600.0,
        drain_s=0.5 if drained else None,
        after=None,
        exit_code=0,
        log=Path("/dev/null"),
        store_url="",
    )


def _verdicts(run: Soak) -> dict[str, bool]:
    return {v.name: v.ok for v in analyse(run).verdicts}


def test_the_soak_verdicts_pass_a_flat_run_and_fail_a_leak_a_growing_lag_and_an_undrained_run() -> None:
    flat = analyse(_made_up())
    assert flat.ok, flat.verdicts
    assert abs(flat.rss_slope) < 1 and flat.cpu_per_span == pytest.approx(0.1 / (RATE * 9))
    # 2 MB/min on 100 MB: +10 % over the second half of ten minutes
    assert _verdicts(_made_up(rss_per_min=2e6)) == {"RSS flat": False, "lag bounded": True, "open traces bounded": True}
    assert not _verdicts(_made_up(lag_per_min=100))["lag bounded"]  # 1,000 records after ten minutes
    assert not _verdicts(_made_up(open_per_min=40))["open traces bounded"]
    undrained = _verdicts(_made_up(drained=False))
    assert not undrained["lag bounded"] and not undrained["open traces bounded"]
    # a smaller leak that the threshold tolerates (+1 %) passes: the verdict is about growth, not noise
    assert _verdicts(_made_up(rss_per_min=0.2e6))["RSS flat"]


@pytest.mark.slow
@pytest.mark.timeout(SECONDS + DRAIN_S + 240)
def test_two_minutes_of_steady_traffic_keep_memory_lag_and_open_traces_flat_and_store_every_run_once(
    kafka_broker: TansuBroker, tmp_path: Path
) -> None:
    url = f"sqlite:///{tmp_path / 'soak.db'}"
    run = soak(
        kafka_broker.bootstrap,
        rate=RATE,
        seconds=SECONDS,
        store_url=url,
        workdir=tmp_path,
        partitions=4,
        sample_s=2.0,
        broker_pid=kafka_broker.proc.pid if kafka_broker.proc is not None else None,
    )
    log = run.log.read_text(errors="replace")[-3000:]
    assert run.exit_code == 0, log
    assert run.traces >= 0.9 * RATE * SECONDS, f"the producer sent {run.traces} traces"
    a = analyse(run)
    report(run, a)  # the figures, shown when an assertion fails
    for verdict in a.verdicts:
        assert verdict.ok, f"{verdict.name}: {verdict.detail}"
    assert run.after is not None and run.after.spans_decoded == run.spans
    assert run.after.runs_sampled == run.top_runs
    assert stored_runs(url) == (run.runs, run.traces)
    assert duplicate_result_keys(url) == 0
    assert a.open_traces_max > 0 and a.cpu_per_span > 0  # the gauges were read, not missing
