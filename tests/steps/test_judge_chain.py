"""Judges in the pipeline: the whole chain (memory broker, real SQLite store, real scoring stage, the judge pool on
the real ``anthropic`` SDK against the shipped local server).

Promises tested where they break: every judged run's verdict is stored exactly once and its job deleted with it;
the judge being down never stalls ingestion (every offset commits, code results are stored, verdicts wait owed
in the store, the backlog is bounded with counted drops); a restart resumes the verdicts owed; a daemon that
stops renewing its leases hands its verdicts to another."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
import yaml

from monitor.app import Judges, build_loop
from monitor.demo.traffic import TrafficGenerator
from monitor.export.http import HealthState
from monitor.export.metrics import Metrics
from monitor.ingest.dlq import DeadLetterQueue
from monitor.ingest.loop import RunLoop
from monitor.ingest.memory import MemoryBroker
from monitor.judging.batch_pool import BatchPool
from monitor.judging.budget import JudgeBudget
from monitor.judging.intake import JudgeIntake
from monitor.judging.pool import JudgePool
from monitor.rules.ruleset import RuleSet
from monitor.sampling.sampler import Sampler
from monitor.scoring.stage import ScoringStage
from monitor.settings import Settings, load_settings
from monitor.steps.workers import WorkersStep
from monitor.store import SqlResultStore, open_store
from monitor.store.ledger import SqlBatchLedger
from monitor.store.schema import judge_jobs, results
from monitor.testing import FakeAnthropic, ManualClock
from monitor.testing.fake_anthropic import Error, Turn

TOPIC = "otlp_spans"
JUDGE = "judge_tool_selection"
VERDICT = {"evaluations": [], "missing_tools": [], "reason": "fine"}
RULES = {"rules": [{"match": {}, "scorers": {JUDGE: {}}}]}


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-chain-0000")


class Daemon:
    """The chain as ``App`` builds it, with judges, on the memory broker."""

    def __init__(self, settings: Settings, broker: MemoryBroker, clock: ManualClock, owner: str = "pod-a") -> None:
        self.settings = settings
        self.metrics = Metrics(settings.metrics)
        self.store = open_store(settings.store)
        ruleset = RuleSet.from_mapping(RULES)
        self.budget = JudgeBudget.from_settings(settings.judge, clock=lambda: datetime.now(UTC))
        self.pool: JudgePool | BatchPool
        if settings.judge.batch:
            ledger = SqlBatchLedger(self.store.engine)
            self.pool = BatchPool(settings.judge, self.budget, self.metrics, ledger).start()
        else:
            self.pool = JudgePool(settings.judge, self.budget, self.metrics, backoff_s=0.05).start()
        self.intake = JudgeIntake(settings, self.budget, self.pool, self.metrics, owner=owner, ruleset=ruleset)
        sampler = Sampler(settings.sampling)
        stage = ScoringStage(settings, ruleset, sampler, lambda: datetime.now(UTC), submitter=self.intake)
        self.clock = clock
        self.loop: RunLoop = build_loop(
            settings,
            broker.source_factory([TOPIC]),
            DeadLetterQueue(settings.kafka, settings.dead_letter),
            stage,
            self.store,
            self.metrics,
            HealthState(),
            sampler,
            judges=Judges(self.pool, self.intake, owner),
            clock=clock,
            wall=time.time,
        )

    def step(self, n: int = 1) -> None:
        for _ in range(n):
            self.loop.step()
            self.clock.advance(0.5)

    def until(self, predicate: Any, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not predicate():
            assert time.monotonic() < deadline, "timed out"
            self.step()
            time.sleep(0.02)

    def stop(self) -> None:
        self.pool.stop()
        self.store.close()

    def metric(self, name: str, **labels: str) -> float:
        value = self.metrics.registry.get_sample_value(name, labels)
        return 0.0 if value is None else value


def count(store: SqlResultStore, table: sa.Table, *where: Any) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one())


def settings_for(tmp_path: Path, fake: FakeAnthropic, **judge: Any) -> Settings:
    return load_settings(
        None,
        kafka={"spans_topic": TOPIC, "commit_interval_s": 1.0},
        assembler={"root_idle_s": 0.0, "idle_s": 0.5},
        store={"url": f"sqlite:///{tmp_path / 'results.db'}"},
        dead_letter={"enabled": False},
        judge={"enabled": True, "base_url": fake.base_url, "timeout_s": 5.0, **judge},
    )


def produce(broker: MemoryBroker, runs: int, seed: int = 11) -> None:
    broker.create_topic(TOPIC, 2)
    for record in TrafficGenerator(seed=seed, malformed_ratio=0.0).batch(runs):
        broker.produce(TOPIC, record.value, key=record.key)


@pytest.fixture
def daemons() -> Iterator[list[Daemon]]:
    made: list[Daemon] = []
    yield made
    for d in made:
        d.stop()


def judged(store: SqlResultStore) -> int:
    return count(store, results, results.c.scorer == JUDGE, results.c.status == "scored")


@pytest.mark.parametrize("workers", [0, 1], ids=["one-process", "worker-pool"])
def test_every_run_gets_one_stored_verdict_and_its_job_goes(
    tmp_path: Path, daemons: list[Daemon], workers: int
) -> None:
    """Also with ``workers.processes``: the worker records the judge the stage would submit, the daemon's process
    submits it (the rules reach the workers through ``rules_file``)."""
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce(broker, 12)
    with FakeAnthropic(default=Turn(tool_uses=[("submit_verdict", VERDICT)])) as fake:
        settings = settings_for(tmp_path, fake)
        if workers:
            rules = tmp_path / "rules.yaml"
            rules.write_text(yaml.safe_dump(RULES))
            settings = settings.model_copy(
                update={
                    "rules_file": rules,
                    "workers": settings.workers.model_copy(update={"processes": workers, "batch_traces": 4}),
                }
            )
        d = Daemon(settings, broker, clock)
        daemons.append(d)
        assert isinstance(d.loop.head.next.next, WorkersStep) is bool(workers)  # decode → assemble → …
        d.until(lambda: d.loop.stats.traces_scored == 12 and d.pool.backlog() == 0 and not d.loop.held)
        d.step(3)
        runs = d.loop.stats.runs
        with_input = judged(d.store) + count(d.store, results, results.c.scorer == JUDGE, results.c.status != "scored")
    assert with_input == runs  # one judge result per run (a run without user text: not_applicable)
    assert judged(d.store) == len(fake.message_requests) > 0
    assert count(d.store, judge_jobs) == 0
    assert broker.committed["memory"] == broker.end_offsets(TOPIC)
    assert d.metric("monitor_judge_requests_total", judge=JUDGE, model="claude-sonnet-4-6", outcome="ok") == judged(
        d.store
    )
    assert d.metric("monitor_scorer_results_total", scorer=JUDGE, status="scored", passed="true") == judged(d.store)
    assert d.loop.stats.verdicts_new == judged(d.store)


def test_a_judge_down_never_stalls_ingestion_and_a_restart_resumes_the_verdicts_owed(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce(broker, 15)
    state = {"down": True}

    def answer(request: dict[str, Any]) -> Turn | Error:
        return Error(529) if state["down"] else Turn(tool_uses=[("submit_verdict", VERDICT)])

    with FakeAnthropic(answer) as fake:
        settings = settings_for(tmp_path, fake, max_backlog=8)
        d = Daemon(settings, broker, clock)
        daemons.append(d)
        d.until(lambda: d.loop.stats.traces_scored == 15 and not d.loop.held)
        d.step(4)
        # ingestion went on: everything committed, code results stored, never paused for the judge
        assert broker.committed["memory"] == broker.end_offsets(TOPIC)
        assert not d.loop.paused
        assert count(d.store, results, results.c.scorer != JUDGE) > 0
        owed = count(d.store, judge_jobs)
        dropped = d.metric("monitor_judge_runs_dropped_total", judge=JUDGE, reason="backlog")
        assert owed == 8 and dropped > 0  # the backlog bound, the rest counted
        assert judged(d.store) == 0
        assert d.metric("monitor_judge_requests_total", judge=JUDGE, model="claude-sonnet-4-6", outcome="overloaded")

        # kill the daemon (nothing drained), bring the API back, start again on the same store
        d.pool.stop(0.5)
        daemons.remove(d)
        d.store.close()
        state["down"] = False
        again = Daemon(settings, broker, clock)
        daemons.append(again)
        again.until(lambda: judged(again.store) == 8 and count(again.store, judge_jobs) == 0)
        again.step(2)
    assert judged(again.store) == 8  # each verdict owed, stored once
    assert again.loop.stats.records == 0  # nothing was read again: the verdicts came from the store


def test_a_daemon_that_stops_renewing_hands_its_verdicts_to_another(tmp_path: Path, daemons: list[Daemon]) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce(broker, 6)
    state = {"down": True}

    def answer(request: dict[str, Any]) -> Turn | Error:
        return Error(529) if state["down"] else Turn(tool_uses=[("submit_verdict", VERDICT)])

    with FakeAnthropic(answer) as fake:
        settings = settings_for(tmp_path, fake, lease_s=10)
        a = Daemon(settings, broker, clock, owner="pod-a")
        daemons.append(a)
        a.until(lambda: a.loop.stats.traces_scored == 6 and not a.loop.held)
        a.step(2)
        owed = count(a.store, judge_jobs)
        assert owed > 0 and count(a.store, judge_jobs, judge_jobs.c.lease_owner == "pod-a") == owed
        a.pool.stop(0.5)  # pod-a hangs: it no longer renews
        state["down"] = False

        b = Daemon(settings, broker, clock, owner="pod-b")
        daemons.append(b)
        b.step(3)
        assert judged(b.store) == 0  # pod-a's leases still hold
        with b.store.engine.begin() as conn:  # ... until they run out
            conn.execute(sa.update(judge_jobs).values(lease_until=datetime.now(UTC) - timedelta(seconds=1)))
        b.clock.advance(61.0)  # the next look for verdicts nobody judges
        b.until(lambda: judged(b.store) == owed and count(b.store, judge_jobs) == 0)


def test_with_batches_a_restart_resumes_the_batch_in_flight_instead_of_paying_twice(
    tmp_path: Path, daemons: list[Daemon]
) -> None:
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    produce(broker, 8)
    usage = {"input_tokens": 1000, "output_tokens": 100}
    with FakeAnthropic(default=Turn(tool_uses=[("submit_verdict", VERDICT)], usage=usage), batch_polls=10**6) as fake:
        settings = settings_for(tmp_path, fake, batch=True, batch_max_wait_s=0.2, batch_poll_s=0.05)
        a = Daemon(settings, broker, clock)
        daemons.append(a)
        a.until(lambda: len(fake.batches()) == 1 and a.loop.stats.traces_scored == 8 and not a.loop.held)
        a.step(2)
        owed = count(a.store, judge_jobs)
        assert owed > 0 and judged(a.store) == 0
        assert broker.committed["memory"] == broker.end_offsets(TOPIC)  # ingestion does not wait for the batch
        a.pool.stop(1.0)  # killed with the batch in flight
        daemons.remove(a)
        a.store.close()

        fake.finish_batch(fake.batches()[0]["id"])  # it ends while no daemon runs
        b = Daemon(settings, broker, clock)
        daemons.append(b)
        b.until(lambda: judged(b.store) == owed and count(b.store, judge_jobs) == 0)
        assert len(fake.batches()) == 1  # resumed from the ledger, not submitted again
        assert fake.message_requests == []  # nothing went through the Messages API
    costs = [r.judge.cost_usd for r in _stored_judge_usage(b.store)]
    assert costs == [pytest.approx((1000 * 3 + 100 * 15) / 1e6 / 2)] * owed  # batch price: half
    assert b.metric("monitor_judge_requests_total", judge=JUDGE, model="claude-sonnet-4-6", outcome="ok") == owed


def _stored_judge_usage(store: SqlResultStore) -> list[Any]:
    from types import SimpleNamespace

    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(results.c.judge).where(results.c.scorer == JUDGE)).scalars().all()
    return [SimpleNamespace(judge=SimpleNamespace(**row)) for row in rows if row]
