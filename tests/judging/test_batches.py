"""``monitor.judging.batches``: judge tasks through Message Batches (``BatchJudge``) and direct Messages calls
(``DirectJudge``), with the real ``anthropic`` SDK against the shipped fake server and the batch ledger on a real
database. Assertions are on what the fake received (batch creations, polls) and on the ledger."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from monitor.judging.batches import BatchJudge, DirectJudge, estimate
from monitor.judging.budget import JudgeBudget
from monitor.scoring.judges import GoalAccuracyJudge, TrajectoryQualityJudge
from monitor.scoring.judges.cost import Usage, cost_usd
from monitor.scoring.judges.task import JudgeTask, custom_id
from monitor.settings import JudgeBudgetLimits, JudgeBudgets, JudgeSettings
from monitor.store import create_store_engine, migrate
from monitor.store.ledger import SqlBatchLedger
from monitor.testing import FakeAnthropic, Turn
from monitor.trajectory.model import Run
from tests.scoring.builders import run_with_steps
from tests.support.postgres import PostgresCluster

MODEL = "claude-sonnet-4-6"
NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def settings(**kw: Any) -> JudgeSettings:
    kw.setdefault("model", MODEL)
    kw.setdefault("batch_poll_s", 0.01)
    kw.setdefault("batch_max_wait_s", 0.001)
    return JudgeSettings(**kw)


def runs(n: int, *, fail: frozenset[int] | set[int] = frozenset()) -> list[Run]:
    """``n`` runs; run ``i`` asks ``case-i`` (``case-i fail`` for the indices in ``fail``)."""
    out = []
    for i in range(n):
        text = f"case-{i} fail" if i in fail else f"case-{i}"
        out.append(
            run_with_steps(
                [[("get_weather", {"city": "Paris"})]],
                user_text=f"{text}: weather in Paris?",
                final_response="Sunny in Paris.",
                results=["sunny"],
                trace_id=f"{i:032x}",
                run_id=f"{i:016x}",
            )
        )
    return out


def goal(verdict: int, reason: str = "ok") -> dict[str, Any]:
    return {
        "user_goal": "weather",
        "end_state": "told",
        "desired_outcome": "weather",
        "reason": reason,
        "verdict": verdict,
    }


def by_input(request: dict[str, Any]) -> Turn:
    """A goal verdict: 0 for a run whose input says ``fail``, else 1; the reason names the case."""
    text = json.dumps(request["messages"][0])
    case = text.split("case-", 1)[1].split(" ", 1)[0].split(":", 1)[0]
    return Turn(tool_uses=[("submit_verdict", goal(0 if "fail" in text else 1, f"case-{case}"))])


def tasks_for(judge: Any, rs: list[Run], transport: BatchJudge | DirectJudge) -> list[JudgeTask]:
    return [JudgeTask(judge, run, None, transport.config_for(judge)) for run in rs]


@pytest.fixture(params=["sqlite", "postgresql"])
def ledger_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'ledger.sqlite'}"
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    url = cluster.create_database()
    yield url
    cluster.drop_database(url.rsplit("/", 1)[1])


def open_ledger(url: str) -> SqlBatchLedger:
    engine = create_store_engine(url)
    migrate.upgrade(engine)
    return SqlBatchLedger(engine)


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[SqlBatchLedger]:
    led = SqlBatchLedger.open(f"sqlite:///{tmp_path / 'ledger.sqlite'}")
    yield led
    led.close()


def batch_judge(fake: FakeAnthropic, ledger: SqlBatchLedger, **kw: Any) -> BatchJudge:
    judge_settings = kw.pop("judge_settings", None) or settings()
    kw.setdefault("clock", lambda: NOW)
    return BatchJudge(fake.client(max_retries=0), ledger, judge_settings, purpose="eval", **kw)


def polls(fake: FakeAnthropic) -> int:
    return sum(1 for r in fake.requests if r.method == "GET" and r.path.count("/") == 4)


# ----------------------------------------------------------------------------- submit, poll, match


def test_one_batch_matched_by_custom_id_at_half_price(ledger: SqlBatchLedger) -> None:
    rs = runs(3, fail={1})
    with FakeAnthropic(by_input, batch_polls=2, batch_result_order="reversed") as fake:
        transport = batch_judge(fake, ledger)
        tasks = tasks_for(GoalAccuracyJudge(), rs, transport)
        results = transport.run(tasks, timeout_s=30)
        assert fake.unexpected == [] and fake.message_requests == []
        (create,) = fake.batch_creates
    assert [r["custom_id"] for r in create["requests"]] == [custom_id(t.key, 0, 0) for t in tasks]
    params = create["requests"][0]["params"]
    assert params["temperature"] == 0 and params["model"] == MODEL  # temperature goes in params, as the API takes it
    assert params["tool_choice"]["name"] == "submit_verdict"
    # matched by custom id, although the results came back in reverse order
    assert [(r.score, r.reason) for r in results] == [(1.0, "case-0"), (0.0, "case-1"), (1.0, "case-2")]
    for r in results:
        assert r.judge is not None and r.judge.batch and r.judge.requests == 1 and r.judge.latency_ms is None
        usage = Usage(
            input_tokens=r.judge.input_tokens,
            output_tokens=r.judge.output_tokens,
            cache_creation_input_tokens=r.judge.cache_creation_input_tokens,
            cache_read_input_tokens=r.judge.cache_read_input_tokens,
            requests=1,
        )
        list_price = cost_usd(usage, MODEL, settings().prices)
        assert list_price is not None and r.judge.cost_usd == pytest.approx(list_price / 2)
    (batch,) = ledger.batches()
    assert (batch.purpose, batch.model, batch.requests, batch.status) == ("eval", MODEL, 3, "ended")
    assert sorted(ledger.custom_ids(batch.id)) == sorted(r["custom_id"] for r in create["requests"])
    assert transport.stats.batches == 1 and transport.stats.succeeded == 3


def test_tasks_without_a_request_end_at_once(ledger: SqlBatchLedger) -> None:
    silent = run_with_steps([], user_text=None, final_response=None)
    with FakeAnthropic() as fake:
        transport = batch_judge(fake, ledger)
        (result,) = transport.run(tasks_for(GoalAccuracyJudge(), [silent], transport), timeout_s=5)
        assert fake.requests == []
    assert (result.status, result.reason) == ("not_applicable", "no_user_input")


def test_samples_share_a_batch_and_the_next_round_goes_in_a_later_one(ledger: SqlBatchLedger) -> None:
    rubric = {"rubrics": [{"id": "needed_tools_called", "verdict": "yes", "rationale": "r"}], "reason": "fine"}
    invalid = {"reason": "no rubrics"}
    cut = Turn(tool_uses=[("submit_verdict", {})], stop_reason="max_tokens")
    script = [
        Turn(tool_uses=[("submit_verdict", invalid)]),  # sample 0: invalid → repair round
        cut,  # sample 1: cut at max_tokens → doubled max_tokens
        Turn(tool_uses=[("submit_verdict", rubric)]),  # sample 2: fine
        Turn(tool_uses=[("submit_verdict", rubric)]),  # sample 0, repaired
        Turn(tool_uses=[("submit_verdict", rubric)]),  # sample 1, with doubled max_tokens
    ]
    judge = TrajectoryQualityJudge(
        {"style": "rubric", "num_samples": 3, "rubrics": [{"id": "needed_tools_called", "text": "t"}]}
    )
    with FakeAnthropic(script, batch_polls=1) as fake:
        transport = batch_judge(fake, ledger)
        (result,) = transport.run(tasks_for(judge, runs(1), transport), timeout_s=30)
        assert fake.unexpected == []
        first, second = fake.batch_creates
    assert len(first["requests"]) == 3 and len(second["requests"]) == 2
    repair, bigger = (r["params"] for r in second["requests"])
    assert [m["role"] for m in repair["messages"]] == ["user", "assistant", "user"]
    assert bigger["max_tokens"] == 2 * first["requests"][1]["params"]["max_tokens"]
    assert result.status == "scored" and result.score == 1.0
    assert result.judge is not None and result.judge.requests == 5 and result.details["samples"] == 3


# ----------------------------------------------------------------------------- errored, expired, lost


def test_an_errored_entry_is_retried_once_in_the_next_batch(ledger: SqlBatchLedger) -> None:
    with FakeAnthropic(by_input) as fake:
        fake.server_error(500)  # the first request of the first batch errs
        transport = batch_judge(fake, ledger)
        results = transport.run(tasks_for(GoalAccuracyJudge(), runs(2), transport), timeout_s=30)
        first, second = fake.batch_creates
    assert len(first["requests"]) == 2 and [r["custom_id"] for r in second["requests"]] == [
        first["requests"][0]["custom_id"]
    ]
    assert [r.status for r in results] == ["scored", "scored"]
    assert transport.stats.errored == 1
    # errored twice: the task fails with the API's message (judge_unavailable), never a score
    with FakeAnthropic(by_input) as fake:
        fake.server_error(500, count=2)
        transport = batch_judge(fake, ledger)
        (result,) = transport.run(tasks_for(GoalAccuracyJudge(), runs(1, fail={0}), transport), timeout_s=30)
        assert len(fake.batch_creates) == 2
    assert (result.status, result.reason, result.score) == ("error", "judge_unavailable", None)
    assert "errored twice" in result.details["message"] and "api_error" in result.details["message"]


def test_expired_entries_are_submitted_again_up_to_the_limit(ledger: SqlBatchLedger, tmp_path: Path) -> None:
    with FakeAnthropic(by_input, batch_polls=1) as fake:
        fake.expire_next_batch(processed=1)  # of 3 requests, the last 2 expire unprocessed
        transport = batch_judge(fake, ledger)
        results = transport.run(tasks_for(GoalAccuracyJudge(), runs(3), transport), timeout_s=30)
        first, second = fake.batch_creates
    assert [r["custom_id"] for r in second["requests"]] == [r["custom_id"] for r in first["requests"][1:]]
    assert [r.status for r in results] == ["scored"] * 3 and transport.stats.expired == 2
    # the first batch answered one request: it stays usable (ended); the second holds the other two now
    assert [b.status for b in ledger.batches()] == ["ended", "ended"]
    fresh = SqlBatchLedger.open(f"sqlite:///{tmp_path / 'fresh.sqlite'}")
    with FakeAnthropic(by_input) as fake:
        fake.expire_next_batch(count=5)
        transport = batch_judge(fake, fresh, max_resubmits=2)
        (result,) = transport.run(tasks_for(GoalAccuracyJudge(), runs(1), transport), timeout_s=30)
        assert len(fake.batch_creates) == 3
    assert (result.status, result.reason) == ("error", "judge_unavailable")
    assert "expired 3 times" in result.details["message"]
    assert [b.status for b in fresh.batches()] == ["expired"] * 3
    fresh.close()


def test_a_lost_batch_is_submitted_again(ledger: SqlBatchLedger) -> None:
    with FakeAnthropic(by_input, batch_polls=3) as fake:
        transport = batch_judge(fake, ledger)
        tasks = tasks_for(GoalAccuracyJudge(), runs(2), transport)
        transport.add(tasks)
        transport.step(flush=True)
        (lost,) = [b["id"] for b in fake.batches()]
        fake.drop_batch(lost)  # the API no longer knows it: 404
        results = transport.run(tasks, timeout_s=30)
        assert len(fake.batch_creates) == 2
    assert [r.status for r in results] == ["scored", "scored"] and transport.stats.lost == 1
    assert (ledger.batches()[0].id, ledger.batches()[0].status) == (lost, "lost")


# ----------------------------------------------------------------------------- the daemon's pace


def test_submit_when_full_or_old_enough_and_poll_with_backoff(ledger: SqlBatchLedger) -> None:
    with FakeAnthropic(by_input, batch_polls=3) as fake:
        transport = batch_judge(fake, ledger, max_requests=3, max_wait_s=10.0, poll_s=1.0)
        transport.add(tasks_for(GoalAccuracyJudge(), runs(2), transport))
        assert transport.step(now=0.0) == [] and transport.step(now=5.0) == []
        assert fake.batch_creates == [] and transport.queued() == 2
        transport.add(tasks_for(GoalAccuracyJudge(), runs(3)[2:], transport))
        transport.step(now=6.0)  # three requests: full
        assert len(fake.batch_creates) == 1 and transport.queued() == 0
        assert transport.next_due(6.0) == pytest.approx(7.0)
        transport.step(now=6.5)
        assert polls(fake) == 0  # not due yet
        transport.step(now=7.0)  # first poll: in progress; next in 1.5 s
        assert polls(fake) == 1 and transport.next_due(7.0) == pytest.approx(8.5)
        transport.step(now=8.0)
        assert polls(fake) == 1
        transport.step(now=8.5)  # second poll: in progress; next in 2.25 s
        assert polls(fake) == 2 and transport.next_due(8.5) == pytest.approx(10.75)
        done = transport.step(now=10.75)  # ended: results fed, every task done
        assert len(done) == 3 and not transport.busy
        # a single request waits for max_wait_s before it goes alone
        transport.add(tasks_for(GoalAccuracyJudge(), runs(4)[3:], transport))
        transport.step(now=20.0)
        transport.step(now=29.9)
        assert len(fake.batch_creates) == 1
        transport.step(now=30.0)
        assert len(fake.batch_creates) == 2 and len(fake.batch_creates[1]["requests"]) == 1


# ----------------------------------------------------------------------------- budgets


class FakeTime:
    """One clock for the budget's minute window and the transport's sleeps."""

    def __init__(self) -> None:
        self.now = 0.0

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_requests_per_minute_refusals_wait_for_the_window(ledger: SqlBatchLedger) -> None:
    time = FakeTime()
    judge_settings = settings(budgets=JudgeBudgets(total=JudgeBudgetLimits(requests_per_minute=2)))
    budget = JudgeBudget.from_settings(judge_settings, clock=lambda: NOW, monotonic=time.monotonic)
    created_at: list[float] = []

    with FakeAnthropic(by_input) as fake:
        transport = batch_judge(
            fake, ledger, judge_settings=judge_settings, budget=budget, monotonic=time.monotonic, sleep=time.sleep
        )
        original = transport.client.messages.batches.create

        def create(**kw: Any) -> Any:
            created_at.append(time.now)
            return original(**kw)

        transport.client.messages.batches.create = create  # type: ignore[method-assign]
        results = transport.run(tasks_for(GoalAccuracyJudge(), runs(5), transport), timeout_s=3600)
        sizes = [len(c["requests"]) for c in fake.batch_creates]
    assert [r.status for r in results] == ["scored"] * 5
    assert sizes == [2, 2, 1]
    assert created_at[1] - created_at[0] >= 60.0 and created_at[2] - created_at[1] >= 60.0


def test_a_spent_daily_budget_stops_requests_and_is_never_exceeded(ledger: SqlBatchLedger, tmp_path: Path) -> None:
    with FakeAnthropic(by_input) as fake:  # what one request costs (every run here renders to the same size)
        probe = SqlBatchLedger.open(f"sqlite:///{tmp_path / 'probe.sqlite'}")
        transport = batch_judge(fake, probe)
        (measured,) = transport.run(tasks_for(GoalAccuracyJudge(), runs(1), transport), timeout_s=30)
        probe.close()
    assert measured.judge is not None and measured.judge.cost_usd is not None
    one = measured.judge.cost_usd
    body = fake.batch_creates[0]["requests"][0]["params"]
    assert estimate(body, settings(), batch=True).usd > one  # type: ignore[operator]
    cap = 2.5 * one
    limited = settings(budgets=JudgeBudgets(total=JudgeBudgetLimits(usd_per_day=cap)))
    budget = JudgeBudget.from_settings(limited, clock=lambda: NOW)
    with FakeAnthropic(by_input) as fake:
        transport = batch_judge(fake, ledger, judge_settings=limited, budget=budget)
        results = transport.run(tasks_for(GoalAccuracyJudge(), runs(6), transport), timeout_s=30)
        sizes = [len(c["requests"]) for c in fake.batch_creates]
    # an estimate above the cap goes only alone: one request per batch until the day's spend reaches the cap
    assert sizes == [1, 1, 1]
    assert [r.status for r in results] == ["scored"] * 3 + ["error"] * 3
    refused = results[3:]
    assert all(r.reason == "judge_unavailable" and r.judge is None for r in refused)
    assert all("total.usd_per_day is spent" in r.details["message"] for r in refused)
    spent = budget.spent("judge_goal_accuracy")["total"]["usd_per_day"]
    assert spent == pytest.approx(3 * one)
    assert spent <= cap + one  # the budget's guarantee: at most one call beyond the cap
    assert transport.stats.refused == 3 and budget.in_flight() == 0


# ----------------------------------------------------------------------------- resume after a restart


def test_a_second_transport_resumes_the_batch_of_a_dropped_one(ledger_url: str) -> None:
    rs = runs(3, fail={2})
    with FakeAnthropic(by_input, batch_polls=2) as fake:
        first_ledger = open_ledger(ledger_url)
        first = batch_judge(fake, first_ledger)
        first.add(tasks_for(GoalAccuracyJudge(), rs, first))
        first.step(flush=True)  # submitted; then the process dies
        assert len(fake.batch_creates) == 1
        del first
        first_ledger.engine.dispose()

        second_ledger = open_ledger(ledger_url)
        try:
            second = batch_judge(fake, second_ledger)
            results = second.run(tasks_for(GoalAccuracyJudge(), rs, second), timeout_s=30)
            assert len(fake.batch_creates) == 1  # no new batch: the ledger's was polled
            assert fake.message_requests == [] and fake.unexpected == []
            assert [(r.status, r.score) for r in results] == [("scored", 1.0), ("scored", 1.0), ("scored", 0.0)]
            assert second.stats.resumed == 3 and second.stats.batches == 0
            assert [b.status for b in second_ledger.batches()] == ["ended"]
        finally:
            second_ledger.engine.dispose()


# ----------------------------------------------------------------------------- direct calls


def test_direct_judge_runs_tasks_concurrently_with_cost_and_latency() -> None:
    with FakeAnthropic(by_input) as fake:
        transport = DirectJudge(fake.client(max_retries=0), settings(concurrency=3))
        results = transport.run(tasks_for(GoalAccuracyJudge(), runs(4, fail={3}), transport))
        assert len(fake.message_requests) == 4 and fake.batch_creates == []
    assert [(r.score, r.reason) for r in results] == [
        (1.0, "case-0"),
        (1.0, "case-1"),
        (1.0, "case-2"),
        (0.0, "case-3"),
    ]
    for r in results:
        assert r.judge is not None and not r.judge.batch
        assert r.judge.cost_usd is not None and r.judge.latency_ms is not None
    assert transport.stats.requests == 4


def test_direct_judge_api_down_and_spent_budget_are_errors() -> None:
    with FakeAnthropic(by_input) as fake:
        fake.server_error(503, count=2)
        transport = DirectJudge(fake.client(max_retries=1), settings(concurrency=1))
        (down,) = transport.run(tasks_for(GoalAccuracyJudge(), runs(1), transport))
    assert (down.status, down.reason) == ("error", "judge_unavailable")
    assert "InternalServerError" in down.details["message"] or "503" in down.details["message"]
    limited = settings(budgets=JudgeBudgets(total=JudgeBudgetLimits(output_tokens_per_day=0)))
    budget = JudgeBudget.from_settings(limited, clock=lambda: NOW)
    with FakeAnthropic(by_input) as fake:
        transport = DirectJudge(fake.client(max_retries=0), limited, budget=budget)
        (spent,) = transport.run(tasks_for(GoalAccuracyJudge(), runs(1), transport))
        assert fake.requests == []
    assert (spent.status, spent.reason) == ("error", "judge_unavailable")
    assert "total.output_tokens_per_day is spent" in spent.details["message"]
