"""The daemon with judges on, real parts: Tansu broker, kafka-python, SQLite store, HTTP metrics, and the judge pool
on the real ``anthropic`` SDK against the shipped local server.

The load test of issue 10: while the judge API is down, ingestion never stalls (every offset commits, code
results are stored, the consumer is never paused for the judge); once it is back, verdicts are paid for within
the daily USD cap (at most one call over it, the budget's stated bound) and the rest is dropped and counted.
The API key never appears in the logs or on ``/metrics``."""

from __future__ import annotations

import logging
import threading
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from monitor.store.schema import judge_jobs, results
from monitor.testing import FakeAnthropic
from monitor.testing.fake_anthropic import Error, Turn
from tests.support.daemon import agent_traffic, daemon_settings, daemon_thread, metric_sum, names, scrape, wait_for
from tests.support.kafka import committed, create_topics, end_offsets, produce

KEY = "sk-ant-api03-judge-load-test-secret"
JUDGE = "judge_tool_selection"
VERDICT = {"evaluations": [], "missing_tools": [], "reason": "fine"}
USAGE = {"output_tokens": 200}  # = max_tokens; the input is the server's count of the request (under our estimate)


def call_cost(usage: dict[str, int]) -> float:
    """USD of one answered request at claude-sonnet-4-6 list prices."""
    return (usage["input_tokens"] * 3 + usage["output_tokens"] * 15) / 1e6


def count(url: str, table: sa.Table, *where: Any) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).select_from(table).where(*where)).scalar_one())
    finally:
        engine.dispose()


def test_judge_down_never_stalls_ingestion_and_spend_stays_under_the_cap(
    kafka_bootstrap: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    topic, group = names("judges")
    create_topics(kafka_bootstrap, {topic: 2})
    traffic = agent_traffic(40, seed=31)
    produce(kafka_bootstrap, topic, traffic.records)
    rules = tmp_path / "rules.yaml"
    rules.write_text(f"rules:\n  - match: {{}}\n    scorers:\n      {JUDGE}: {{}}\n")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    down = threading.Event()
    down.set()

    def answer(request: dict[str, Any]) -> Turn | Error:
        return Error(529) if down.is_set() else Turn(tool_uses=[("submit_verdict", VERDICT)], usage=USAGE)

    cap = 0.05
    with FakeAnthropic(answer) as fake:
        settings = daemon_settings(
            kafka_bootstrap,
            topic,
            group,
            url,
            judge={
                "enabled": True,
                "base_url": fake.base_url,
                "max_tokens": 200,
                "concurrency": 4,
                "budgets": {"total": {"usd_per_day": cap}},
            },
        ).model_copy(update={"rules_file": rules})
        with caplog.at_level(logging.INFO), daemon_thread(settings) as d:
            loop = d.app.loop
            assert loop is not None
            # the judge is down: ingestion goes on regardless
            wait_for(lambda: loop.stats.traces_scored >= traffic.runs, 60, "every trace scored while the judge is down")
            ends = end_offsets(kafka_bootstrap, topic, 2)
            wait_for(lambda: committed(kafka_bootstrap, group, topic, 2) == ends, 20, "offsets committed to the end")
            m = scrape(d.port)
            assert metric_sum(m, "monitor_consumer_paused") == 0
            assert count(url, results, results.c.scorer != JUDGE) > 0
            owed = count(url, judge_jobs)
            assert owed > 10
            assert metric_sum(m, "monitor_judge_requests_total", outcome="overloaded") > 0
            assert metric_sum(m, "monitor_judge_backlog") == owed

            down.clear()  # the API is back: the cap decides how many verdicts are paid for
            wait_for(lambda: count(url, judge_jobs) == 0, 60, "every verdict owed judged or dropped")
            m = scrape(d.port)
            answered = [q.response["usage"] for q in fake.requests if q.status == 200]
            spent = metric_sum(m, "monitor_judge_cost_usd_total")
            assert spent == pytest.approx(sum(call_cost(u) for u in answered))
            assert spent <= cap + max(call_cost(u) for u in answered)  # the budget's bound: one call over at most
            stored = count(url, results, results.c.scorer == JUDGE, results.c.status == "scored")
            assert 0 < stored == len(answered) < owed
            assert metric_sum(m, "monitor_judge_requests_total", outcome="ok") == stored
            assert metric_sum(m, "monitor_judge_runs_dropped_total", reason="budget") == owed - stored
            remaining = metric_sum(m, "monitor_judge_budget_remaining", scope="total", limit="usd_per_day")
            assert remaining <= max(call_cost(u) for u in answered) * 2
            with urllib.request.urlopen(f"http://127.0.0.1:{d.port}/metrics", timeout=5) as resp:
                assert KEY not in resp.read().decode()
            code = d.stop()
    assert code == 0
    assert any("judge budget total.usd_per_day is spent" in r.getMessage() for r in caplog.records)
    assert all(KEY not in r.getMessage() for r in caplog.records)
    sent = [q.headers.get("x-api-key", "") + q.headers.get("authorization", "") for q in fake.requests]
    assert sent and all(KEY in s for s in sent)  # the key was sent (the SDK's header), and only there
