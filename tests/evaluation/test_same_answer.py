"""Issue #9 item 6, through the real CLI in a subprocess: ``monitor score`` and ``monitor eval`` read
hand-written runs alike, Mastra sees a native case's input, the console never shows a failing
score equal to its threshold nor a string equal to a number, and a gated criterion that cannot run
is exit 3."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "datasets"

SCORERS = [
    {"id": "acc", "kind": "ragas_tool_call_accuracy"},
    {"id": "adk", "kind": "adk_tool_trajectory"},
    {"id": "mastra", "kind": "mastra_tool_call_accuracy", "params": {"expected_tool": "get_forecast"}},
]
CALLS = [{"name": "get_forecast", "args": {"city": "Hanoi"}}]


def monitor(*argv: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "monitor", *argv], input=stdin, capture_output=True, text=True, timeout=120
    )


def native(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "case.monitor.yaml"
    path.write_text(yaml.safe_dump({"format": "monitor.dataset/v1", "name": "same", **doc}))
    return path


def eval_scores(tmp_path: Path) -> dict[str, tuple[str, float | None]]:
    dataset = native(
        tmp_path,
        {
            "scorers": SCORERS,
            "cases": [
                {
                    "id": "c1",
                    "input": "Forecast for Hanoi",
                    "expect": {"calls": CALLS},
                    "actual": {"calls": CALLS, "final_response": "Sunny"},
                }
            ],
        },
    )
    report = tmp_path / "r.json"
    done = monitor("eval", str(dataset), "--report", str(report))
    assert done.returncode == 0, done.stdout + done.stderr
    return {r["scorer"]: (r["status"], r["score"]) for r in json.loads(report.read_text())["results"]}


def test_mastra_scores_a_recorded_native_case_that_has_an_input(tmp_path: Path) -> None:
    # the case's input stands for the recorded run's input: scored, not not_applicable/no_user_input
    assert eval_scores(tmp_path)["mastra"] == ("scored", 1.0)


def test_score_and_eval_give_the_same_scores_to_hand_written_calls(tmp_path: Path) -> None:
    by_eval = eval_scores(tmp_path)
    doc = {
        "run": {"user_input": "Forecast for Hanoi", "calls": CALLS, "final_response": "Sunny"},
        "expect": {"calls": CALLS},
        "scorers": SCORERS,
    }
    done = monitor("score", "-", stdin=json.dumps(doc))
    assert done.returncode == 0, done.stderr
    by_score = {r["scorer"]: (r["status"], r["score"]) for r in json.loads(done.stdout)}
    # Ragas and ADK read the hand-written calls as selected calls in both commands (were 0.0 in score)
    assert by_score["acc"] == by_eval["acc"] == ("scored", 1.0)
    assert by_score["adk"] == by_eval["adk"] == ("scored", 1.0)
    assert by_score == by_eval


def test_console_shows_a_failing_score_below_its_threshold_and_json_typed_values(tmp_path: Path) -> None:
    dataset = native(
        tmp_path,
        {
            "scorers": [
                {"id": "f1", "kind": "ragas_tool_call_f1"},
                {"id": "traj", "kind": "trajectory_match", "params": {"tool_args_match_mode": "exact"}},
            ],
            "gate": {"scorers": {"f1": {"threshold": 0.667}, "traj": {}}},
            "cases": [
                {  # F1 = 2/3 → 0.6667, just below the 0.667 threshold
                    "id": "near",
                    "input": "Forecast for Hanoi",
                    "expect": {"calls": CALLS},
                    "actual": {"calls": [*CALLS, {"name": "get_time", "args": {"city": "Hanoi"}}]},
                },
                {
                    "id": "typed",
                    "input": "Forecast for Hanoi",
                    "expect": {"calls": [{"name": "get_forecast", "args": {"days": 42}}]},
                    "actual": {"calls": [{"name": "get_forecast", "args": {"days": "42"}}]},
                },
            ],
        },
    )
    done = monitor("eval", str(dataset))
    assert done.returncode == 1, done.stdout + done.stderr
    near = next(line for line in done.stdout.splitlines() if "same/near" in line)
    typed = next(line for line in done.stdout.splitlines() if "same/typed" in line)
    assert ("f1 0.6667<0.667" in near, '(expected 42, got "42")' in typed) == (True, True), near + "\n" + typed


def test_a_gated_judge_without_judges_is_exit_3_and_no_judges_skips_it(tmp_path: Path) -> None:
    ragas = str(EXAMPLES / "ragas" / "weather.jsonl")
    done = monitor("eval", ragas)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "gated criterion 'judge_goal_accuracy' cannot run" in done.stdout
    assert "--no-judges" in done.stdout and "gate passed" not in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "2 passed, 0 failed"

    done = monitor("eval", ragas, "--no-judges")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "not gated (--no-judges): judge_goal_accuracy" in done.stdout
