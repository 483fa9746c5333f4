"""The judge pool (``monitor.judging.pool``) on the real ``anthropic`` SDK against the shipped local server:
verdicts, the concurrency bound, retries (429 with retry-after, 529, 5xx) within the budget, permanent errors,
daily budgets that hold, deadlines."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from monitor.judging.budget import JudgeBudget
from monitor.judging.intake import JudgeIntake
from monitor.judging.pool import JudgePool, PoolJob, Verdict
from monitor.scoring.expectation import Expectation
from monitor.scoring.spec import ScorerSpec
from monitor.settings import Settings, load_settings
from monitor.testing import FakeAnthropic, RecordingMetrics
from monitor.testing.fake_anthropic import Error, Turn
from monitor.trajectory.model import Run
from tests.scoring.test_stage import one

VERDICT = {"evaluations": [], "missing_tools": [], "reason": "nothing was needed"}
SPEC = ScorerSpec("judge_tool_selection", "judge_tool_selection", {})
KIND = "judge_tool_selection"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-pool-0000")


def settings_for(fake: FakeAnthropic, **judge: Any) -> Settings:
    return load_settings(None, judge={"enabled": True, "base_url": fake.base_url, "timeout_s": 5.0, **judge})


def runs(n: int) -> list[Run]:
    base = one("adk1", "sequential_content")
    from dataclasses import replace

    return [replace(base, trace_id=f"{i:032x}", run_id=f"{i:016x}") for i in range(1, n + 1)]


class Harness:
    def __init__(self, settings: Settings, **pool: Any) -> None:
        self.settings = settings
        self.metrics = RecordingMetrics()
        self.budget = JudgeBudget.from_settings(settings.judge, clock=lambda: datetime.now(UTC))
        self.pool = JudgePool(settings.judge, self.budget, self.metrics, backoff_s=0.05, **pool)
        self.intake = JudgeIntake(settings, self.budget, self.pool, self.metrics, owner="test")

    def jobs(self, items: list[Run]) -> list[PoolJob]:
        for run in items:
            assert self.intake.submit(run, [SPEC], flagged=True, expectation=Expectation()) == []
        return self.intake.drain()

    def wait(self, n: int, timeout_s: float = 30.0) -> list[Verdict]:
        got: list[Verdict] = []
        deadline = time.monotonic() + timeout_s
        while len(got) < n and time.monotonic() < deadline:
            got += self.pool.finished()
            time.sleep(0.02)
        assert len(got) == n, f"{len(got)} of {n} verdicts"
        return got

    def outcomes(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for call in self.metrics.calls("judge_request"):
            out[call.arguments["outcome"]] = out.get(call.arguments["outcome"], 0) + 1
        return out


@pytest.fixture
def harness_factory() -> Iterator[Any]:
    made: list[Harness] = []

    def make(settings: Settings, **pool: Any) -> Harness:
        h = Harness(settings, **pool)
        h.pool.start()
        made.append(h)
        return h

    yield make
    for h in made:
        h.pool.stop()


def verdict_turn(usage: dict[str, int] | None = None, delay: float = 0.0) -> Turn:
    return Turn(tool_uses=[("submit_verdict", VERDICT)], usage=usage, delay=delay)


def test_every_job_gets_its_verdict_with_usage_cost_and_latency(harness_factory: Any) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 2000}
    with FakeAnthropic(default=verdict_turn(usage)) as fake:
        h = harness_factory(settings_for(fake, model="claude-sonnet-4-6"))
        jobs = h.jobs(runs(5))
        assert h.pool.offer(jobs) == 5 and h.pool.offer(jobs) == 0  # a key already in the pool is ignored
        verdicts = h.wait(5)
    assert {v.job.key for v in verdicts} == {j.key for j in jobs}
    for v in verdicts:
        assert v.result is not None and v.result.status == "scored" and v.result.score == 1.0
        judge = v.result.judge
        assert judge is not None and judge.requests == 1 and judge.model == "claude-sonnet-4-6"
        assert judge.input_tokens == 1000 and judge.cache_read_input_tokens == 2000
        # $3/MTok input, $15/MTok output, cache reads 0.1 × input (the built-in table, SCORING §4.0)
        assert judge.cost_usd == pytest.approx((1000 * 3 + 100 * 15 + 2000 * 0.3) / 1e6)
        assert judge.latency_ms is not None and judge.latency_ms > 0
    assert h.outcomes() == {"ok": 5}
    assert h.pool.backlog() == 0
    tokens = h.metrics.calls("judge_usage")
    assert sum(c.arguments["usage"].cache_read_input_tokens for c in tokens) == 10_000
    spent = h.budget.spent(KIND)["total"]["usd_per_day"]
    assert spent == pytest.approx(5 * (1000 * 3 + 100 * 15 + 2000 * 0.3) / 1e6)


def test_no_more_than_concurrency_requests_are_in_flight(harness_factory: Any) -> None:
    """Each answer is held 0.4 s after its request arrived: with 3 workers, no 0.35 s window sees more than 3
    arrivals, and the pool does use its 3."""
    arrivals: list[float] = []

    def answer(request: dict[str, Any]) -> Turn:
        arrivals.append(time.monotonic())
        return verdict_turn(delay=0.4)

    with FakeAnthropic(answer) as fake:
        h = harness_factory(settings_for(fake, concurrency=3))
        h.pool.offer(h.jobs(runs(12)))
        h.wait(12)
    arrivals.sort()
    windows = [sum(1 for t in arrivals if start <= t < start + 0.35) for start in arrivals]
    assert max(windows) == 3


def test_429_with_retry_after_529_and_5xx_are_retried_until_answered(harness_factory: Any) -> None:
    with FakeAnthropic(default=verdict_turn()) as fake:
        fake.rate_limit(retry_after=1.0)
        fake.overloaded(count=2)
        fake.server_error(status=503)
        h = harness_factory(settings_for(fake, concurrency=1))
        started = time.monotonic()
        h.pool.offer(h.jobs(runs(1)))
        (verdict,) = h.wait(1)
        elapsed = time.monotonic() - started
    assert verdict.result is not None and verdict.result.status == "scored"
    assert h.outcomes() == {"rate_limited": 1, "overloaded": 2, "server_error": 1, "ok": 1}
    assert elapsed >= 1.0  # the 429's retry-after was honoured
    assert len(fake.message_requests) == 5
    assert verdict.result.judge is not None and verdict.result.judge.requests == 1  # only answers are usage


def test_a_request_the_api_refuses_is_an_error_not_a_score(harness_factory: Any) -> None:
    with FakeAnthropic([Error(400, "messages: bad request", retry_after_ms=None)]) as fake:
        h = harness_factory(settings_for(fake))
        h.pool.offer(h.jobs(runs(1)))
        (verdict,) = h.wait(1)
    assert verdict.result is not None
    assert (verdict.result.status, verdict.result.reason) == ("error", "judge_unavailable")
    assert "400" in verdict.result.details["message"]
    assert h.outcomes() == {"rejected": 1}


def test_a_daily_usd_cap_holds_and_the_rest_is_dropped_and_said(
    harness_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    usage = {"input_tokens": 1000, "output_tokens": 100}
    per_call = (1000 * 3 + 100 * 15) / 1e6
    cap = 3.5 * per_call
    with FakeAnthropic(default=verdict_turn(usage)) as fake:
        settings = settings_for(fake, max_tokens=100, budgets={"total": {"usd_per_day": cap}}, concurrency=2)
        h = harness_factory(settings)
        jobs = h.jobs(runs(12))  # the intake's budget priority admits them all (flagged)
        with caplog.at_level(logging.WARNING, logger="monitor.judging.pool"):
            h.pool.offer(jobs)
            verdicts = h.wait(12)
    judged = [v for v in verdicts if v.result is not None]
    dropped = [v for v in verdicts if v.result is None]
    assert 3 <= len(judged) <= 4 and all(v.dropped == "budget" for v in dropped)
    spent = h.budget.spent(KIND)["total"]["usd_per_day"]
    assert spent <= cap + per_call  # the stated bound: at most one call beyond the cap
    assert len(fake.message_requests) == len(judged)
    assert sum(c.arguments["n"] for c in h.metrics.calls("judge_dropped")) == len(dropped)
    assert [r.message for r in caplog.records].count(next(r.message for r in caplog.records)) == 1
    assert "total.usd_per_day" in caplog.records[0].message and "code scoring goes on" in caplog.records[0].message


def test_a_judge_down_past_the_deadline_drops_the_job_as_expired(harness_factory: Any) -> None:
    with FakeAnthropic(default=Error(529)) as fake:
        h = harness_factory(settings_for(fake, max_wait_s=1.0))
        h.pool.offer(h.jobs(runs(2)))
        verdicts = h.wait(2, timeout_s=10)
    assert [v.dropped for v in verdicts] == ["expired", "expired"]
    assert h.outcomes().get("overloaded", 0) >= 2 and "ok" not in h.outcomes()
    assert h.budget.spent(KIND)["total"]["usd_per_day"] == 0


def test_stop_cancels_what_is_in_flight_promptly(harness_factory: Any) -> None:
    with FakeAnthropic(default=verdict_turn(delay=30.0)) as fake:
        h = harness_factory(settings_for(fake))
        h.pool.offer(h.jobs(runs(3)))
        time.sleep(0.3)
        started = time.monotonic()
        h.pool.stop(5.0)
        assert time.monotonic() - started < 3.0
        assert h.pool.finished() == []


def test_a_borderline_verdict_is_judged_again_and_the_mean_is_stored(harness_factory: Any) -> None:
    half = {
        "evaluations": [
            {"call_index": 0, "tool": "get_weather", "appropriate": True, "reasoning": "asked"},
            {"call_index": 1, "tool": "get_forecast", "appropriate": False, "reasoning": "not asked"},
        ],
        "missing_tools": [],
        "reason": "one of two",
    }
    both = {**half, "evaluations": [{**e, "appropriate": True} for e in half["evaluations"]], "reason": "both"}
    with FakeAnthropic() as fake:
        fake.script_verdict("submit_verdict", half)
        fake.script_verdict("submit_verdict", both)
        h = harness_factory(settings_for(fake, rejudge_borderline=0.1))
        h.pool.offer(h.jobs(runs(1)))
        (verdict,) = h.wait(1)
    result = verdict.result
    assert result is not None and result.score == 0.75 and result.passed is True
    assert result.details["rejudged"]["scores"] == [0.5, 1.0]
    assert result.judge is not None and result.judge.requests == 2
    ids = {q.body["messages"][0]["content"][0]["text"] for q in fake.requests}
    assert len(fake.message_requests) == 2 and len(ids) == 1  # the same request, judged twice


def test_a_yes_or_no_verdict_is_never_borderline(harness_factory: Any) -> None:
    with FakeAnthropic(default=verdict_turn()) as fake:
        h = harness_factory(settings_for(fake, rejudge_borderline=0.5))
        h.pool.offer(h.jobs(runs(1)))
        (verdict,) = h.wait(1)
    assert verdict.result is not None and verdict.result.score == 1.0 and len(fake.message_requests) == 1
