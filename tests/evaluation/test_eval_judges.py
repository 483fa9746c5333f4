"""``monitor eval`` with judge criteria (issue 10 item 7), end to end through ``monitor.cli.main`` with the real
``anthropic`` SDK against the shipped fake server: scripted verdicts pass and fail the gate; a judge criterion
that cannot run (no key, the API down, the budget spent, invalid output) is exit 3, never a pass;
``--judge-batch`` sends one Message Batch at half price and a killed run resumes it; conversation cases feed
every turn to the judge."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.cli import main
from monitor.store.ledger import SqlBatchLedger
from monitor.testing import FakeAnthropic, Turn

ROOT = Path(__file__).resolve().parents[2]
ADK = ROOT / "examples" / "datasets" / "adk"

NATIVE = {
    "format": "monitor.dataset/v1",
    "name": "judged",
    "defaults": {
        "tools": [
            {
                "name": "get_weather",
                "description": "Current weather for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
            }
        ]
    },
    "scorers": [
        {"id": "goal", "kind": "judge_goal_accuracy"},
        {"id": "traj", "kind": "trajectory_match", "params": {"trajectory_match_mode": "superset"}},
    ],
    "gate": {"scorers": {"goal": {"threshold": 1.0}, "traj": {"threshold": 1.0}}},
    "cases": [
        {
            "id": city.lower(),
            "input": f"What's the weather in {city}?",
            "expect": {
                "calls": [{"name": "get_weather", "args": {"city": city}}],
                "reference_outcome": f"The user learns the weather in {city}.",
            },
            "actual": {
                "user_input": f"What's the weather in {city}?",
                "final_response": f"It is {sky} in {city}.",
                "calls": [{"name": "get_weather", "args": {"city": city}, "result": sky}],
            },
        }
        for city, sky in (("Paris", "sunny"), ("Rome", "rainy"), ("Oslo", "snowy"))
    ],
}


def blocks(request: dict[str, Any]) -> str:
    return "\n".join(b.get("text", "") for b in request["messages"][0]["content"] if isinstance(b, dict))


def verdicts(fail: tuple[str, ...] = ()) -> Any:
    """A script answering every judge kind with a valid verdict; goal verdict 0 when the input names a city of
    ``fail``."""

    def answer(request: dict[str, Any]) -> Turn:
        props = request["tools"][0]["input_schema"]["properties"]
        text = blocks(request)
        verdict: dict[str, Any]
        if "user_goal" in props:
            ref = re.search(r"<reference_outcome>\n(.*?)\n</reference_outcome>", text, re.S)
            met = not any(city in text for city in fail)
            outcome = ref.group(1) if ref else "the goal"
            verdict = {
                "user_goal": "g",
                "end_state": "e",
                "desired_outcome": outcome,
                "reason": "r",
                "verdict": int(met),
            }
        elif "topics" in props:
            verdict = {
                "topics": [{"topic": "weather", "refused": False, "on_topic": True, "reason": "r"}],
                "reason": "r",
            }
        elif "rubrics" in props:
            section = re.search(r"<rubrics>\n(.*?)\n</rubrics>", text, re.S)
            ids = [line.split(":", 1)[0] for line in (section.group(1).splitlines() if section else [])]
            verdict = {"rubrics": [{"id": i, "verdict": "yes", "rationale": "r"} for i in ids], "reason": "r"}
        else:
            verdict = {"evaluations": [], "missing_tools": [], "reason": "r"}
        return Turn(tool_uses=[("submit_verdict", verdict)])

    return answer


@pytest.fixture
def judge_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    for name in list(os.environ):
        if name.startswith("MONITOR_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    monkeypatch.setenv("MONITOR_JUDGE__MAX_RETRIES", "0")
    monkeypatch.setenv("MONITOR_JUDGE__BATCH_POLL_S", "0.01")
    monkeypatch.setenv("MONITOR_JUDGE__MODEL", "claude-sonnet-4-6")
    yield monkeypatch


def dataset(tmp_path: Path, doc: dict[str, Any] | None = None) -> str:
    path = tmp_path / "judged.monitor.yaml"
    path.write_text(yaml.safe_dump(doc or NATIVE, sort_keys=False))
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def report(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(path.read_text())
    return doc


def judged(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in doc["results"] if r["scorer_kind"].startswith("judge_")]


# ----------------------------------------------------------------------------- verdicts gate


def test_judge_criteria_pass_and_fail_on_scripted_verdicts(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, out_report = dataset(tmp_path), tmp_path / "r.json"
    with FakeAnthropic(verdicts()) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, out, err = run(capsys, "eval", path, "--report", str(out_report))
        assert fake.unexpected == [] and len(fake.message_requests) == 3
    assert code == 0, out + err
    assert out.strip().splitlines()[-1] == "3 passed, 0 failed"
    assert re.search(r"judges: 3 requests, \$\d+\.\d{4}", err)
    results = judged(report(out_report))
    assert [(r["case_id"], r["status"], r["score"], r["turn"]) for r in results] == [
        ("paris", "scored", 1.0, 0),
        ("rome", "scored", 1.0, 0),
        ("oslo", "scored", 1.0, 0),
    ]
    assert all(r["judge"]["cost_usd"] > 0 and not r["judge"]["batch"] for r in results)

    with FakeAnthropic(verdicts(fail=("Rome",))) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, out, _ = run(capsys, "eval", path, "--report", str(out_report))
    assert code == 1
    assert any(line.startswith("FAIL") and "judged/rome" in line and "goal" in line for line in out.splitlines())
    assert out.strip().splitlines()[-1] == "2 passed, 1 failed"
    assert [r["score"] for r in judged(report(out_report))] == [1.0, 0.0, 1.0]


# ----------------------------------------------------------------------------- cannot run: exit 3


def test_no_key_is_exit_3_and_no_judges_skips(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    judge_env.delenv("ANTHROPIC_API_KEY")
    path = dataset(tmp_path)
    with FakeAnthropic() as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, out, err = run(capsys, "eval", path)
        assert fake.requests == []
    assert code == 3
    assert "no judge API key ($ANTHROPIC_API_KEY is empty)" in err
    assert "gated criterion 'goal' cannot run" in out
    code, out, _ = run(capsys, "eval", path, "--no-judges")
    assert code == 0 and "not gated (--no-judges): goal" in out


def test_api_down_budget_spent_and_invalid_output_are_exit_3(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, out_report = dataset(tmp_path), tmp_path / "r.json"
    # the API down: nothing listens there
    with FakeAnthropic() as fake:
        closed = fake.base_url
    judge_env.setenv("MONITOR_JUDGE__BASE_URL", closed)
    code, out, _ = run(capsys, "eval", path, "--report", str(out_report))
    assert code == 3 and out.strip().splitlines()[-1] == "0 passed, 0 failed, 3 errored"
    assert {(r["status"], r["reason"]) for r in judged(report(out_report))} == {("error", "judge_unavailable")}
    # the API answers errors only
    with FakeAnthropic(default=None) as fake:
        fake.server_error(503, count=10)
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        assert run(capsys, "eval", path)[0] == 3
    # the day's budget is spent: nothing is sent
    with FakeAnthropic(verdicts()) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        judge_env.setenv("MONITOR_JUDGE__BUDGETS__TOTAL__OUTPUT_TOKENS_PER_DAY", "0")
        code, _, err = run(capsys, "eval", path, "--report", str(out_report))
        assert fake.requests == []
    judge_env.delenv("MONITOR_JUDGE__BUDGETS__TOTAL__OUTPUT_TOKENS_PER_DAY")
    assert code == 3 and "3 stopped by the budget" in err
    messages = {r["details"]["message"] for r in judged(report(out_report))}
    assert messages == {"judge budget total.output_tokens_per_day is spent for today (UTC)"}
    # invalid verdicts twice: judge_output_invalid
    with FakeAnthropic(default=Turn(tool_uses=[("submit_verdict", {"reason": "no verdict"})])) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, _, _ = run(capsys, "eval", path, "--report", str(out_report))
        assert len(fake.message_requests) == 6  # each verdict and its repair
    assert code == 3
    assert {r["reason"] for r in judged(report(out_report))} == {"judge_output_invalid"}


# ----------------------------------------------------------------------------- Message Batches


def test_judge_batch_sends_one_batch_at_half_price(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, direct_report, batch_report = dataset(tmp_path), tmp_path / "direct.json", tmp_path / "batch.json"
    with FakeAnthropic(verdicts(fail=("Oslo",))) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        assert run(capsys, "eval", path, "--report", str(direct_report))[0] == 1
    judge_env.chdir(tmp_path)  # the default state file goes to the working directory
    with FakeAnthropic(verdicts(fail=("Oslo",)), batch_polls=2) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, out, err = run(capsys, "eval", path, "--judge-batch", "--report", str(batch_report))
        assert fake.message_requests == [] and fake.unexpected == []
        (create,) = fake.batch_creates
    assert code == 1 and out.strip().splitlines()[-1] == "2 passed, 1 failed"
    assert len(create["requests"]) == 3 and "judges: 3 requests, 1 new batch" in err and "(batch price)" in err
    direct, batched = judged(report(direct_report)), judged(report(batch_report))
    assert [r["score"] for r in batched] == [r["score"] for r in direct] == [1.0, 1.0, 0.0]
    for d, b in zip(direct, batched, strict=True):
        assert b["judge"]["batch"] and not d["judge"]["batch"]
        assert b["judge"]["input_tokens"] == d["judge"]["input_tokens"]
        assert b["judge"]["cost_usd"] == pytest.approx(d["judge"]["cost_usd"] / 2)
        assert b["judge"]["latency_ms"] is None
    ledger = SqlBatchLedger.open(f"sqlite:///{tmp_path / '.monitor-eval-batches.sqlite'}")
    try:
        assert [(b.purpose, b.requests, b.status) for b in ledger.batches()] == [("eval", 3, "ended")]
    finally:
        ledger.close()


def recorded(state: Path) -> bool:
    """Whether the state file holds a batch (the killed run wrote it right after the API accepted the batch). Read
    only, with plain sqlite3: opening the ledger would migrate the file while the other process does."""
    if not state.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=1)) as conn:
            return bool(conn.execute("SELECT count(*) FROM judge_batches").fetchone()[0])
    except sqlite3.Error:  # being created or migrated by the other process
        return False


def test_a_killed_batch_run_resumes_its_batch(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, state = dataset(tmp_path), tmp_path / "state.sqlite"
    with FakeAnthropic(verdicts(), batch_polls=4) as fake:
        env = {**os.environ, "MONITOR_JUDGE__BASE_URL": fake.base_url, "MONITOR_JUDGE__BATCH_POLL_S": "60"}
        argv = [sys.executable, "-m", "monitor", "eval", path, "--judge-batch", "--batch-state", str(state)]
        first = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while not recorded(state) and time.monotonic() < deadline and first.poll() is None:
                time.sleep(0.05)
            assert fake.batch_creates and recorded(state), first.stderr.read().decode() if first.stderr else ""
        finally:
            first.kill()  # killed while its batch is in flight (its first poll would come in 60 s)
            first.wait()
        (batch,) = fake.batches()
        assert batch["processing_status"] == "in_progress"

        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, out, err = run(capsys, "eval", path, "--judge-batch", "--batch-state", str(state))
        assert len(fake.batch_creates) == 1  # the batch was resumed, not paid for again
        assert fake.message_requests == [] and fake.unexpected == []
    assert code == 0, out + err
    assert "0 new batches, 3 resumed from earlier batches" in err
    ledger = SqlBatchLedger.open(f"sqlite:///{state}")
    try:
        assert [(b.id, b.status) for b in ledger.batches()] == [(batch["id"], "ended")]
    finally:
        ledger.close()


def test_a_batch_still_processing_at_the_timeout_is_exit_3_and_resumed_later(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path, state = dataset(tmp_path), tmp_path / "state.sqlite"
    with FakeAnthropic(verdicts(), batch_polls=1000) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        argv = ["eval", path, "--judge-batch", "--batch-state", str(state)]
        code, out, _ = run(capsys, *argv, "--batch-timeout", "0.2", "--report", str(tmp_path / "r.json"))
        assert code == 3 and out.strip().splitlines()[-1] == "0 passed, 0 failed, 3 errored"
        messages = {r["details"]["message"] for r in judged(report(tmp_path / "r.json"))}
        assert len(messages) == 1 and "run again to resume it" in messages.pop()
        for b in fake.batches():  # the batch ends meanwhile
            fake.finish_batch(b["id"])
        code, _, err = run(capsys, *argv)
        assert code == 0 and len(fake.batch_creates) == 1 and "3 resumed" in err


# ----------------------------------------------------------------------------- conversations


def test_conversation_cases_feed_every_turn_to_the_judge(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    multi = {
        "format": "monitor.dataset/v1",
        "name": "multi",
        "scorers": [{"id": "quality", "kind": "judge_trajectory_quality", "params": {"style": "rubric"}}],
        "gate": {"scorers": {"quality": {"threshold": 0.8}}},
        "cases": [
            {
                "id": "two-turns",
                "turns": [
                    {
                        "input": "Weather in Hanoi?",
                        "actual": {
                            "user_input": "Weather in Hanoi?",
                            "final_response": "31°C in Hanoi.",
                            "calls": [{"name": "get_weather", "args": {"city": "Hanoi"}, "result": "31C"}],
                        },
                    },
                    {
                        "input": "And tomorrow?",
                        "actual": {
                            "user_input": "And tomorrow?",
                            "final_response": "Rain tomorrow.",
                            "calls": [{"name": "get_forecast", "args": {"city": "Hanoi", "days": 1}, "result": "rain"}],
                        },
                    },
                ],
            }
        ],
    }
    ragas = tmp_path / "conv.jsonl"
    sample = {
        "user_input": [
            {"type": "human", "content": "What's the weather in Lima?"},
            {"type": "ai", "content": "Checking.", "tool_calls": [{"name": "weather", "args": {"city": "Lima"}}]},
            {"type": "tool", "content": "cloudy"},
            {"type": "ai", "content": "Cloudy in Lima."},
            {"type": "human", "content": "And in Cusco?"},
            {"type": "ai", "content": "Checking.", "tool_calls": [{"name": "weather", "args": {"city": "Cusco"}}]},
            {"type": "tool", "content": "sunny"},
            {"type": "ai", "content": "Sunny in Cusco."},
        ],
        "reference": "The user learns the weather in Lima and Cusco.",
        "reference_topics": ["weather"],
    }
    ragas.write_text(json.dumps(sample) + "\n")
    native = dataset(tmp_path, multi)
    out_report = tmp_path / "r.json"
    with FakeAnthropic(verdicts()) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        code, out, err = run(capsys, "eval", native, str(ragas), "--report", str(out_report))
        texts = [blocks(r) for r in fake.message_requests]
        assert fake.unexpected == []
    assert code == 0, out + err
    # native, a `mean` judge: one request per turn; turn 1's carries turn 0 before it
    # (the judges run on a thread pool: the two requests may arrive in either order)
    quality = sorted((t for t in texts if "<rubrics>" in t), key=lambda t: "And tomorrow?" in t)
    assert len(quality) == 2
    assert "Weather in Hanoi?" in quality[0] and "And tomorrow?" not in quality[0]
    assert "Human: Weather in Hanoi?" in quality[1] and "Human: And tomorrow?" in quality[1]
    # Ragas: the conversation is one case for its judges: one request each, with both turns (topic adherence
    # renders them all) and the conversation's reference (goal accuracy)
    topics = [t for t in texts if "<reference_topics>" in t]
    goals = [t for t in texts if "<reference_outcome>" in t]
    assert len(topics) == 1 and "Lima" in topics[0] and "Cusco" in topics[0]
    assert len(goals) == 1 and "The user learns the weather in Lima and Cusco." in goals[0]
    assert "Human: What's the weather in Lima?" in goals[0] and "Human: And in Cusco?" in goals[0]  # every turn
    results = judged(report(out_report))
    by_scorer = {(r["scorer"], r["turn"]) for r in results}
    assert by_scorer == {
        ("quality", 0),
        ("quality", 1),
        ("judge_goal_accuracy", None),
        ("judge_topic_adherence", None),
    }
    assert all(r["status"] == "scored" for r in results)


def test_adk_rubric_criteria_run_per_run_and_turn(
    judge_env: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    shutil.copy(ADK / "weather.evalset.json", tmp_path / "weather.evalset.json")
    criteria = {"tool_trajectory_avg_score": 1.0, "rubric_based_tool_use_quality_v1": {"threshold": 0.8}}
    (tmp_path / "test_config.json").write_text(json.dumps({"criteria": criteria}))
    out_report = tmp_path / "r.json"
    with FakeAnthropic(verdicts()) as fake:
        judge_env.setenv("MONITOR_JUDGE__BASE_URL", fake.base_url)
        argv = ["eval", str(tmp_path / "weather.evalset.json"), "--traces", str(ADK / "traces.jsonl")]
        code, out, err = run(capsys, *argv, "--report", str(out_report))
        # ADK: 2 runs × (1 + 2 + 1) turns, one request each (default rubrics)
        assert len(fake.message_requests) == 8 and fake.unexpected == []
    assert code == 0, out + err
    results = judged(report(out_report))
    assert {(r["scorer"], r["scorer_kind"], r["status"]) for r in results} == {
        ("rubric_based_tool_use_quality_v1", "judge_trajectory_quality", "scored")
    }
    assert sorted((r["case_id"], r["run_no"], r["turn"]) for r in results) == sorted(
        [
            (c, n, t)
            for n in (0, 1)
            for c, turns in (("current_weather", 1), ("forecast_then_current", 2), ("small_talk", 1))
            for t in range(turns)
        ]
    )
