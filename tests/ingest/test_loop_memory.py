"""The run loop on the in-memory broker shipped with the package: offsets, backpressure, revocation, replays.

The loop, assembler, scoring stage, store (SQLite) and metrics are all the real ones; only the broker is
the in-memory :class:`~monitor.ingest.memory.MemoryBroker`, and the clock is injected so the tests step
through time instead of sleeping. Broker behaviour itself is covered against the real Tansu broker in
tests/integration.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.app import build_loop
from monitor.demo.traffic import TrafficGenerator
from monitor.export.http import HealthState
from monitor.export.metrics import Metrics
from monitor.ingest.dlq import DeadLetterQueue
from monitor.ingest.loop import RunLoop
from monitor.ingest.memory import MemoryBroker, MemorySource
from monitor.rules.ruleset import RuleSet, ScorerSpec
from monitor.sampling.sampler import Sampler
from monitor.scoring.stage import Backpressure, ScoringStage
from monitor.settings import Settings, load_settings
from monitor.store import open_store
from monitor.testing import ManualClock
from monitor.trajectory.model import Run

TOPIC = "otlp_spans"
WALL = 1.8e9  # the loop's wall clock and the results' scored_at agree (retention compares them)


class FlakyJudgePool:
    """The judge seam (a later issue): rejects the first ``reject`` submissions with Backpressure."""

    def __init__(self, reject: int) -> None:
        self.reject = reject
        self.accepted: list[str] = []

    def submit(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool = False, expectation: object = None
    ) -> list[object]:
        if self.reject > 0:
            self.reject -= 1
            raise Backpressure("judge pool full")
        self.accepted.append(run.run_id)
        return []


def settings_for(tmp_path: Path) -> Settings:
    return load_settings(
        None,
        kafka={"spans_topic": TOPIC, "commit_interval_s": 1.0},
        assembler={"root_idle_s": 0.0, "idle_s": 0.5},
        store={"url": f"sqlite:///{tmp_path / 'results.db'}"},
        dead_letter={"enabled": False},
    )


def make_loop(
    settings: Settings, broker: MemoryBroker, clock: ManualClock, *, ruleset: RuleSet | None = None, submitter=None
) -> RunLoop:  # type: ignore[no-untyped-def]
    sampler = Sampler(settings.sampling)
    stage = ScoringStage(settings, ruleset, sampler, lambda: datetime.fromtimestamp(WALL, UTC), submitter=submitter)
    return build_loop(
        settings,
        broker.source_factory([TOPIC]),
        DeadLetterQueue(settings.kafka, settings.dead_letter),
        stage,
        open_store(settings.store),
        Metrics(settings.metrics),
        HealthState(),
        sampler=sampler,
        clock=clock,
        wall=lambda: WALL,
    )


def run_steps(loop: RunLoop, clock: ManualClock, steps: int) -> None:
    for _ in range(steps):
        loop.step()
        clock.advance(0.5)


def produce_traffic(broker: MemoryBroker, runs: int, seed: int = 5) -> int:
    broker.create_topic(TOPIC, 4)
    records = TrafficGenerator(seed=seed, malformed_ratio=0.05).batch(runs)
    for record in records:
        broker.produce(TOPIC, record.value, key=record.key)
    return len(records)


def test_every_run_is_stored_once_and_the_end_is_committed(tmp_path: Path) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce_traffic(broker, 60)
    settings = settings_for(tmp_path)
    loop = make_loop(settings, broker, clock)
    run_steps(loop, clock, 10)
    assert loop.stats.traces_scored == 60 and loop.stats.results_duplicate == 0
    assert broker.committed["memory"] == broker.end_offsets(TOPIC)
    assert sum(loop.stats.dead_letters.values()) > 0  # malformed records counted (DLQ producer disabled)

    # a second member of the same group after a restart re-reads nothing: the end is committed
    again = make_loop(settings, broker, clock)
    run_steps(again, clock, 4)
    assert again.stats.records == 0 and again.stats.results_new == 0


def test_a_replay_from_offset_zero_stores_and_counts_nothing_twice(tmp_path: Path) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce_traffic(broker, 30)
    settings = settings_for(tmp_path)
    first = make_loop(settings, broker, clock)
    run_steps(first, clock, 8)
    new = first.stats.results_new
    broker.committed.clear()  # as if the commit had been lost: the whole topic is read again
    replay = make_loop(settings, broker, clock)
    run_steps(replay, clock, 8)
    assert replay.stats.traces_scored == 30
    assert replay.stats.results_new == 0 and replay.stats.results_duplicate == new


def test_backpressure_pauses_the_partitions_keeps_polling_and_loses_nothing(tmp_path: Path) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce_traffic(broker, 20)
    settings = settings_for(tmp_path)
    rules = RuleSet.from_mapping({"rules": [{"match": {}, "scorers": {"judge_tool_selection": {}}}]})
    pool = FlakyJudgePool(reject=3)
    loop = make_loop(settings, broker, clock, ruleset=rules, submitter=pool)
    source = loop.source
    assert isinstance(source, MemorySource)
    loop.step()  # joins, reads, closes traces, the judge pool rejects: paused
    assert loop.paused and source.paused == source.assignment()
    polls = source.polls
    committed_while_paused = dict(broker.committed.get("memory", {}))
    for _ in range(20):
        clock.advance(0.5)
        loop.step()
        if not loop.paused:
            break
    assert source.polls > polls  # kept polling while paused (stays in the group)
    assert not loop.paused and not source.paused
    run_steps(loop, clock, 6)
    assert loop.stats.traces_scored == 20 and loop.held == 0
    assert len(set(pool.accepted)) >= 20  # every top-level run reached the judge pool
    assert all(committed_while_paused.get(tp, 0) <= off for tp, off in broker.end_offsets(TOPIC).items())
    assert broker.committed["memory"] == broker.end_offsets(TOPIC)


def test_revocation_commits_closed_work_and_drops_open_traces(tmp_path: Path) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    settings = settings_for(tmp_path)
    broker.create_topic(TOPIC, 2)
    gen = TrafficGenerator(seed=9, malformed_ratio=0.0)
    done = gen.batch(10)
    for record in done:
        broker.produce(TOPIC, record.value, key=record.key, partition=0)
    loop = make_loop(settings, broker, clock)
    run_steps(loop, clock, 3)
    assert loop.stats.traces_scored == 10
    # a trace whose root has not arrived yet stays open on partition 1
    request = ExportTraceServiceRequest()
    request.ParseFromString(TrafficGenerator(seed=3, malformed_ratio=0.0, json_ratio=0.0).batch(1)[0].value)
    for scope in (ss for rs in request.resource_spans for ss in rs.scope_spans):
        children = [span for span in scope.spans if span.parent_span_id]
        del scope.spans[:]
        scope.spans.extend(children)
    broker.produce(TOPIC, request.SerializeToString(), key=b"open", partition=1)
    loop.step()
    first_open = broker.end_offsets(TOPIC)[(TOPIC, 1)] - 1
    source = loop.source
    assert isinstance(source, MemorySource)
    source.revoke([(TOPIC, 0), (TOPIC, 1)])
    assert broker.committed["memory"][(TOPIC, 0)] == broker.end_offsets(TOPIC)[(TOPIC, 0)]
    assert broker.committed["memory"].get((TOPIC, 1), 0) <= first_open  # the new owner re-reads it


@pytest.mark.parametrize("runs", [1, 25])
def test_drain_stores_and_commits_what_closed(tmp_path: Path, runs: int) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce_traffic(broker, runs)
    loop = make_loop(settings_for(tmp_path), broker, clock)
    run_steps(loop, clock, 4)
    loop.drain(clock.now + 5)
    assert loop.stats.traces_scored == runs
    ends = {tp: end for tp, end in broker.end_offsets(TOPIC).items() if end}  # empty partitions: nothing to commit
    assert broker.committed["memory"] == ends
