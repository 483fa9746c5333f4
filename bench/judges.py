"""Judge cost per 1,000 judged runs (naive vs cached prompts vs cached + Message Batches) and the throughput of the
daemon's async judge pool, same runs, same process, against the local server.

    .venv/bin/python bench/judges.py [--runs 200] [--tools 12] [--latency 0.2] [--concurrency 8]

The server is ``monitor.testing.FakeAnthropic`` with its prompt-cache simulation (``cache=True``: Anthropic's rules
for breakpoints, TTLs and minimum cacheable lengths; token counts are JSON length / 4). Every verdict is the
``judge_tool_selection`` judge's, on runs of a support agent offering ``--tools`` tools with descriptions and JSON
Schemas (the S2 block, cached with the instructions). Costs are priced with the settings' price table
(``claude-sonnet-4-6``: $3 / $15 per million input / output tokens, cache reads 0.1×, cache writes 1.25×, batches
0.5×), from the usage the server reported:

* **naive** — the same requests without ``cache_control``, one after the other (``run_judge``);
* **cached** — our requests (static blocks cached) through the daemon's pool (``monitor.judging.pool``);
* **cached + Batches** — our requests through the Message Batches transport (``monitor.judging.batches``).

The goal of issue 10: cached + Batches ≤ 35 % of naive. Throughput: runs judged per second by the pool with
``--concurrency`` workers against one request at a time (``run_judge``), each answer held ``--latency`` seconds by
the server; the ratio is the figure (the machine is shared: absolute rates move, ratios less).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import anthropic  # noqa: E402

from monitor.judging.batches import BatchJudge  # noqa: E402
from monitor.judging.budget import JudgeBudget  # noqa: E402
from monitor.judging.intake import JudgeIntake  # noqa: E402
from monitor.judging.pool import JudgePool, Verdict  # noqa: E402
from monitor.judging.runner import send_with, usage_cost  # noqa: E402
from monitor.scoring.expectation import Expectation  # noqa: E402
from monitor.scoring.judges import ToolSelectionJudge  # noqa: E402
from monitor.scoring.judges.base import run_judge  # noqa: E402
from monitor.scoring.judges.protocol import JudgeConfig  # noqa: E402
from monitor.scoring.judges.task import JudgeTask  # noqa: E402
from monitor.scoring.result import ScoreResult  # noqa: E402
from monitor.scoring.spec import ScorerSpec  # noqa: E402
from monitor.settings import Settings, load_settings  # noqa: E402
from monitor.store import create_store_engine, migrate  # noqa: E402
from monitor.store.ledger import SqlBatchLedger  # noqa: E402
from monitor.testing import FakeAnthropic, RecordingMetrics  # noqa: E402
from monitor.testing.fake_anthropic import Turn  # noqa: E402
from monitor.trajectory.model import Run  # noqa: E402
from monitor.trajectory.serialize import run_from_json  # noqa: E402

MODEL = "claude-sonnet-4-6"
SPEC = ScorerSpec("judge_tool_selection", "judge_tool_selection", {})
TOPICS = ("order", "refund", "shipment", "invoice", "account", "subscription", "coupon", "address", "warranty")


def tool(i: int) -> dict[str, Any]:
    topic = TOPICS[i % len(TOPICS)]
    return {
        "name": f"{['get', 'update', 'cancel', 'list'][i % 4]}_{topic}_{i}",
        "description": f"Look up or change the customer's {topic} records ({i}). Use it only when the customer "
        f"asks about their {topic}; it needs the customer id and, for changes, the {topic} id and a reason.",
        "input_schema": {
            "type": "object",
            "required": ["customer_id", f"{topic}_id"],
            "properties": {
                "customer_id": {"type": "string", "description": "the customer's id, e.g. C-1042"},
                f"{topic}_id": {"type": "string", "description": f"the {topic}'s id"},
                "reason": {"type": "string", "description": "why the change is made, in the customer's words"},
                "limit": {"type": "integer", "minimum": 1, "maximum": 50},
            },
        },
    }


def build_runs(n: int, n_tools: int) -> list[Run]:
    tools = [tool(i) for i in range(n_tools)]
    runs = []
    for i in range(n):
        called = [tools[(i + k) % n_tools] for k in range(1 + i % 3)]
        runs.append(
            run_from_json(
                {
                    "trace_id": f"{i + 1:032x}",
                    "run_id": f"{i + 1:016x}",
                    "agent": "support",
                    "user_input": f"Hi, this is customer C-{1000 + i}. Where is my {TOPICS[i % len(TOPICS)]} "
                    f"#{i * 7 % 991}? I was told it would be sorted out by Friday and nothing has happened.",
                    "final_response": f"I checked your {TOPICS[i % len(TOPICS)]}: it is on its way and should "
                    "arrive within two working days. I added a note to your account.",
                    "tools_offered": tools,
                    "calls": [
                        {
                            "name": t["name"],
                            "args": {"customer_id": f"C-{1000 + i}", "reason": "customer asked"},
                            "result": {"status": "ok", "eta_days": 2},
                            "executed": True,
                        }
                        for t in called
                    ],
                }
            )
        )
    return runs


def verdict_for(request: dict[str, Any]) -> Turn:
    text = request["messages"][0]["content"][0]["text"]
    lines = [ln for ln in text.split("<called_tools>\n", 1)[1].split("\n</called_tools>")[0].splitlines()]
    evaluations = [
        {
            "call_index": i,
            "tool": ln.split("] ", 1)[-1],
            "appropriate": i == 0,
            "reasoning": "asked" if i == 0 else "no",
        }
        for i, ln in enumerate(lines)
        if ln.startswith("[")
    ]
    return Turn(tool_uses=[("submit_verdict", {"evaluations": evaluations, "missing_tools": [], "reason": "ok"})])


def settings_for(fake: FakeAnthropic, **judge: Any) -> Settings:
    return load_settings(
        None,
        judge={
            "enabled": True,
            "base_url": fake.base_url,
            "model": MODEL,
            "timeout_s": 30.0,
            "batch_max_wait_s": 0.001,
            "batch_poll_s": 0.05,
            **judge,
        },
    )


def cost(results: list[ScoreResult]) -> float:
    return sum(r.judge.cost_usd or 0.0 for r in results if r.judge is not None)


def naive(runs: list[Run], settings: Settings, client: anthropic.Anthropic) -> list[ScoreResult]:
    """One request after the other, without cache_control (what a judge without prompt caching sends)."""
    send = send_with(client)

    def uncached(body: dict[str, Any]) -> Any:
        stripped = copy.deepcopy(body)
        for block in stripped.get("system", []):
            block.pop("cache_control", None)
        return send(stripped)

    judge = ToolSelectionJudge({})
    config = JudgeConfig.from_settings(settings, judge.kind)
    out = []
    for run in runs:
        result = run_judge(judge, run, Expectation(), config, uncached)
        assert result.judge is not None and result.status == "scored", result
        out.append(_priced(result, settings))
    return out


def sequential(runs: list[Run], settings: Settings, client: anthropic.Anthropic) -> list[ScoreResult]:
    """One request after the other, cached prompts (the synchronous runner)."""
    judge = ToolSelectionJudge({})
    config = JudgeConfig.from_settings(settings, judge.kind)
    send = send_with(client)
    return [_priced(run_judge(judge, run, Expectation(), config, send), settings) for run in runs]


def _priced(result: ScoreResult, settings: Settings) -> ScoreResult:
    assert result.judge is not None
    return dataclasses.replace(
        result, judge=dataclasses.replace(result.judge, cost_usd=usage_cost(result.judge, settings))
    )


def pooled(runs: list[Run], settings: Settings) -> tuple[list[ScoreResult], float]:
    metrics = RecordingMetrics()
    budget = JudgeBudget.from_settings(settings.judge, clock=lambda: datetime.now(UTC))
    pool = JudgePool(settings.judge, budget, metrics).start()
    intake = JudgeIntake(settings, budget, pool, metrics, owner="bench")
    try:
        for run in runs:
            intake.submit(run, [SPEC], flagged=True, expectation=Expectation())
        jobs = intake.drain()
        started = time.perf_counter()
        pool.offer(jobs)
        got: list[Verdict] = []
        while len(got) < len(jobs):
            got += pool.finished()
            time.sleep(0.005)
        elapsed = time.perf_counter() - started
    finally:
        pool.stop()
    results = [v.result for v in got if v.result is not None]
    assert len(results) == len(runs) and all(r.status == "scored" for r in results), results[:1]
    return results, elapsed


def batched(runs: list[Run], settings: Settings, client: anthropic.Anthropic) -> list[ScoreResult]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_store_engine(f"sqlite:///{tmp}/ledger.db")
        migrate.upgrade(engine)
        try:
            transport = BatchJudge(client, SqlBatchLedger(engine), settings.judge, purpose="eval")
            judge = ToolSelectionJudge({})
            tasks = [JudgeTask(judge, run, Expectation(), transport.config_for(judge)) for run in runs]
            return transport.run(tasks, timeout_s=600)
        finally:
            engine.dispose()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--tools", type=int, default=12)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    os.environ.setdefault("ANTHROPIC_API_KEY", "bench-key")  # the local server takes any key
    runs = build_runs(args.runs, args.tools)

    print(f"judge_tool_selection on {args.runs} runs, {args.tools} tools offered, model {MODEL}")
    with FakeAnthropic(verdict_for, cache=True) as fake:
        settings = settings_for(fake)
        client = anthropic.Anthropic(api_key="bench", base_url=fake.base_url, max_retries=0)
        naive_results = naive(runs, settings, client)
        fake.clear_cache()
        cached_results, _ = pooled(runs, settings)
        fake.clear_cache()
        batch_results = batched(runs, settings, client)
    per_k = 1000 / args.runs
    base = cost(naive_results)
    rows = [("naive", naive_results), ("cached", cached_results), ("cached + Batches", batch_results)]
    print(f"{'path':<18} {'USD / 1,000 runs':>16} {'ratio to naive':>15} {'cache reads':>12} {'cache writes':>13}")
    for name, results in rows:
        reads = sum(r.judge.cache_read_input_tokens for r in results if r.judge is not None)
        writes = sum(r.judge.cache_creation_input_tokens for r in results if r.judge is not None)
        print(f"{name:<18} {cost(results) * per_k:>16.4f} {cost(results) / base:>15.3f} {reads:>12} {writes:>13}")
    ratio = cost(batch_results) / base
    print(f"goal cached + Batches ≤ 0.35 × naive: {ratio:.3f} {'met' if ratio <= 0.35 else 'NOT met'}")

    with FakeAnthropic(verdict_for, cache=True, latency=args.latency) as fake:
        client = anthropic.Anthropic(api_key="bench", base_url=fake.base_url, max_retries=0)
        sample = runs[: max(8, min(len(runs), 10 * args.concurrency))]
        started = time.perf_counter()
        sequential(sample[: max(4, len(sample) // 4)], settings_for(fake), client)
        one_rate = max(4, len(sample) // 4) / (time.perf_counter() - started)
        _, elapsed = pooled(sample, settings_for(fake, concurrency=args.concurrency))
        pool_rate = len(sample) / elapsed
    print(
        f"throughput ({args.latency:g} s per answer): one at a time {one_rate:.2f} runs/s, pool of "
        f"{args.concurrency} {pool_rate:.2f} runs/s, ratio {pool_rate / one_rate:.2f} (ideal {args.concurrency})"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
