"""The shipped test kit (``monitor.testing``): manual clock, recording metrics, and the pieces driving the real run
loop together (in-memory broker, manual clock as both clocks, recording metrics, SQLite store)."""

from __future__ import annotations

import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from monitor.testing import ManualClock, MemoryBroker, RecordingMetrics
from monitor.testing.metrics import pipeline_metrics_protocol

# --------------------------------------------------------------------------- import cost


def test_importing_monitor_and_the_kit_imports_nothing_heavy() -> None:
    code = (
        "import sys, monitor, monitor.testing, monitor.pytest_plugin\n"
        "heavy = [m for m in sys.modules if m.split('.')[0] in ('pydantic', 'kafka', 'sqlalchemy', 'anthropic',"
        " 'opentelemetry', 'prometheus_client')]\n"
        "ours = sorted(m for m in sys.modules if m.startswith('monitor'))\n"
        "print(heavy, ours)\n"
        "light = ['monitor', 'monitor._lazy', 'monitor.pytest_plugin', 'monitor.testing']\n"
        "assert not heavy and ours == light, (heavy, ours)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


# --------------------------------------------------------------------------- ManualClock


def test_manual_clock_moves_only_forward_and_only_when_told() -> None:
    clock = ManualClock(100.0)
    assert clock() == clock.now == 100.0
    assert clock.advance(2.5) == 102.5 and clock() == 102.5
    clock.sleep(0.5)
    assert clock.advance_to(110.0) == 110.0
    with pytest.raises(ValueError):
        clock.advance(-1)
    with pytest.raises(ValueError):
        clock.advance_to(109.0)
    assert clock.datetime() == datetime.fromtimestamp(110.0, UTC)


def test_manual_clock_default_start_is_a_plausible_epoch_for_the_wall_clock() -> None:
    assert ManualClock().datetime().year >= 2026


# --------------------------------------------------------------------------- RecordingMetrics


def test_recording_metrics_has_every_method_of_the_loops_metrics_protocol() -> None:
    protocol = pipeline_metrics_protocol()
    assert protocol is not None, "the run loop's metrics parameter names a protocol"
    methods = {n for n, v in vars(protocol).items() if callable(v) and not n.startswith("_")}
    missing = sorted(n for n in methods if n not in vars(RecordingMetrics))
    assert not missing, f"add explicit methods for {missing} to RecordingMetrics (for static type checks)"


def test_recording_metrics_records_calls_and_answers_counter_and_gauge_queries() -> None:
    m = RecordingMetrics()
    m.traces_closed("idle")
    m.traces_closed("idle", 3)
    m.traces_closed("max_age", n=2)
    m.records_consumed("spans", 0, 5)
    m.records_consumed("spans", 1)
    m.set_lag("spans", 0, 7)
    m.set_lag("spans", 0, 4)
    m.paused(True, "backlog")
    m.paused(False, "backlog")
    m.set_open_traces(3, 10, 1.5)
    assert m.total("traces_closed") == 6
    assert m.total("traces_closed", "idle") == 4 and m.count("traces_closed", "idle") == 2
    assert m.total("traces_closed", outcome="max_age") == 2
    assert m.total("records_consumed", "spans") == 6 and m.total("records_consumed", "spans", 1) == 1
    assert m.value("set_lag", "spans", 0) == 4 and m.value("set_lag", "spans", 1) is None
    assert m.value("paused", reason="backlog") is False
    last = m.last("set_open_traces")
    assert last is not None and last.arguments == {"n": 3, "spans": 10, "oldest_age_s": 1.5, "nbytes": 0}
    assert m.calls("set_lag")[0].args == ("spans", 0, 7)
    assert m.names()["traces_closed"] == 3
    assert m.total("store_write", "new") == 0
    with pytest.raises(AttributeError):
        m.no_such_metric  # noqa: B018
    m.clear()
    assert m.log == []


def test_recording_metrics_keeps_observed_results() -> None:
    m = RecordingMetrics()
    run, results = object(), [object(), object()]
    m.observe_results(run, results)
    assert m.observed == [(run, results)] and m.results == results


# --------------------------------------------------------------------------- the pieces with the real loop


def test_the_run_loop_on_the_kit_stores_every_run_and_commits_the_end(tmp_path: Path) -> None:
    from monitor.app import build_loop
    from monitor.demo.traffic import TrafficGenerator
    from monitor.export.http import HealthState
    from monitor.ingest.dlq import DeadLetterQueue
    from monitor.sampling.sampler import Sampler
    from monitor.scoring.stage import ScoringStage
    from monitor.settings import load_settings
    from monitor.store import open_store

    settings = load_settings(
        None,
        kafka={"spans_topic": "spans", "commit_interval_s": 1.0},
        assembler={"root_idle_s": 0.0, "idle_s": 0.5},
        store={"url": f"sqlite:///{tmp_path / 'results.db'}"},
        dead_letter={"enabled": False},
    )
    broker, clock, metrics = MemoryBroker(), ManualClock(), RecordingMetrics()
    start = clock()
    broker.create_topic("spans", 4)
    for record in TrafficGenerator(seed=3, malformed_ratio=0.0).batch(12):
        broker.produce("spans", record.value, key=record.key)
    sampler = Sampler(settings.sampling)
    loop = build_loop(
        settings,
        broker.source_factory(["spans"]),
        DeadLetterQueue(settings.kafka, settings.dead_letter),
        ScoringStage(settings, None, sampler, clock.datetime),
        open_store(settings.store),
        metrics,
        HealthState(),
        sampler,
        clock=clock,
        wall=clock,
    )
    for _ in range(12):
        loop.step()
        clock.advance(0.5)
    loop.drain(clock() + 5)
    ends = {tp: end for tp, end in broker.end_offsets("spans").items() if end}
    assert broker.committed["memory"] == ends
    assert metrics.total("records_consumed") == sum(ends.values())
    assert metrics.total("traces_closed") == 12
    assert metrics.total("store_write", "new") > 0 and metrics.results
    assert all(r.scored_at and r.scored_at.startswith("2027-") for r in metrics.results), "scored by the manual clock"
    commit_times = [c.arguments["when_s"] for c in metrics.calls("commit_done")]
    assert commit_times and all(start <= t <= clock() for t in commit_times), "commits stamped by the manual wall clock"


# --------------------------------------------------------------------------- FakeAnthropic: Message Batches faults


def _batch_params(i: int) -> dict[str, object]:
    return {"model": "claude-fake", "max_tokens": 8, "messages": [{"role": "user", "content": f"q{i}"}]}


def test_fake_batches_expire_err_per_request_and_answer_in_any_order() -> None:
    from monitor.testing import FakeAnthropic
    from monitor.testing.fake_anthropic import Error

    with FakeAnthropic(["a", Error(500, "boom"), "c", "d"], batch_result_order="reversed") as fake:
        client = fake.client(max_retries=0)
        requests = [{"custom_id": f"r{i}", "params": _batch_params(i)} for i in range(3)]
        batch = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        results = [(r.custom_id, r.result) for r in client.messages.batches.results(batch.id)]
        assert [cid for cid, _ in results] == ["r2", "r1", "r0"]  # matched by custom_id, not by position
        by_id = dict(results)
        assert by_id["r0"].type == "succeeded" and by_id["r2"].type == "succeeded"
        assert by_id["r0"].message.usage.service_tier == "batch"
        errored = by_id["r1"]
        assert errored.type == "errored" and errored.error.error.type == "api_error"
        assert errored.error.error.message == "boom"
        # the next batch expires after answering one request; the expired ones consume no turn
        fake.expire_next_batch(processed=1)
        expiring = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        ended = client.messages.batches.retrieve(expiring.id)
        assert ended.processing_status == "ended" and ended.expires_at == ended.ended_at
        assert (ended.request_counts.succeeded, ended.request_counts.expired) == (1, 2)
        assert [r.result.type for r in client.messages.batches.results(expiring.id)] == [
            "expired",
            "expired",
            "succeeded",
        ]
        assert fake.remaining == 0 and len(fake.batch_creates) == 2
        assert fake.unexpected == []


def test_fake_batches_can_be_finished_early_or_lost() -> None:
    import anthropic

    from monitor.testing import FakeAnthropic

    with FakeAnthropic(default="ok", batch_polls=100) as fake:
        client = fake.client(max_retries=0)
        requests = [{"custom_id": "x", "params": _batch_params(0)}]
        slow = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        assert client.messages.batches.retrieve(slow.id).processing_status == "in_progress"
        fake.finish_batch(slow.id)
        assert client.messages.batches.retrieve(slow.id).processing_status == "ended"
        lost = client.messages.batches.create(requests=requests)  # type: ignore[arg-type]
        fake.drop_batch(lost.id)
        with pytest.raises(anthropic.NotFoundError):
            client.messages.batches.retrieve(lost.id)
    with pytest.raises(ValueError):
        FakeAnthropic(batch_result_order="random")
