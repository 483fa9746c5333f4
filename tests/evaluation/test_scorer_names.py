"""Scorer names in datasets, gate files and ADK criteria are checked against the one scorer registry
before anything is scored: the real ``monitor eval`` / ``monitor score`` exit 2 naming the file, the
JSON path, the bad name and the closest registered one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "datasets"
NATIVE = EXAMPLES / "native" / "weather.monitor.yaml"
ADK = EXAMPLES / "adk"


def monitor(*args: str, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """``python -m monitor ARGS`` to completion."""
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith("MONITOR_")}
    env["PYTHONWARNINGS"] = "ignore::DeprecationWarning"
    return subprocess.run(
        [sys.executable, "-m", "monitor", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def native(tmp_path: Path, edit: Any) -> Path:
    doc = yaml.safe_load(NATIVE.read_text())
    edit(doc)
    path = tmp_path / "weather.monitor.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _set_kind(index: int, kind: str) -> Any:
    def edit(doc: dict[str, Any]) -> None:
        doc["scorers"][index]["kind"] = kind

    return edit


@pytest.mark.parametrize(
    ("edit", "where", "problem"),
    [
        (
            _set_kind(2, "shema_check"),
            "$.scorers[2].kind",
            "unknown scorer kind 'shema_check'; did you mean 'schema_check'?",
        ),
        (  # a judge kind is checked too (it used to become judges_disabled silently)
            lambda doc: doc["scorers"].append({"id": "goal", "kind": "judge_goal_acuracy"}),
            "$.scorers[4].kind",
            "unknown scorer kind 'judge_goal_acuracy'; did you mean 'judge_goal_accuracy'?",
        ),
        (
            lambda doc: doc["scorers"][1]["params"].update({"strict_ordr": True}),
            "$.scorers[1].params",
            "scorer 'acc': unknown parameter 'strict_ordr': remove it (did you mean 'strict_order'?)",
        ),
        (
            lambda doc: doc["gate"]["scorers"].update({"trj": {"threshold": 1.0}}),
            "$.gate.scorers.trj",
            "gate names scorer 'trj', which is not among the scorers (traj, acc, schema, forbidden); "
            "did you mean 'traj'?",
        ),
    ],
    ids=["kind", "judge_kind", "parameter", "gate_id"],
)
def test_a_misspelled_scorer_in_a_dataset_is_exit_2_with_did_you_mean(
    tmp_path: Path, edit: Any, where: str, problem: str
) -> None:
    path = native(tmp_path, edit)
    done = monitor("eval", str(path), "--no-judges", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.strip() == f"dataset error: {path}: {where}: {problem}"
    assert done.stdout == "" and "Traceback" not in done.stderr


def test_a_misspelled_scorer_in_a_gate_file_is_exit_2_naming_the_gate_file(tmp_path: Path) -> None:
    gate = tmp_path / "gate.yaml"
    gate.write_text(yaml.safe_dump({"scorers": [{"id": "traj", "kind": "trajectory_mach"}]}))
    done = monitor("eval", str(NATIVE), "--config", str(gate), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"dataset error: {gate}: $.scorers[0].kind: unknown scorer kind 'trajectory_mach'; "
        "did you mean 'trajectory_match'?"
    )
    gate.write_text(yaml.safe_dump({"gate": {"scorers": {"shcema": {"threshold": 1.0}}}}))
    done = monitor("eval", str(NATIVE), "--config", str(gate), cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"dataset error: {gate}: $.gate.scorers.shcema: no dataset has a scorer with id 'shcema'; "
        "did you mean 'schema'?"
    )


def test_a_misspelled_adk_criterion_is_exit_2_with_did_you_mean(tmp_path: Path) -> None:
    shutil.copy(ADK / "weather.evalset.json", tmp_path / "weather.evalset.json")
    (tmp_path / "test_config.json").write_text(
        json.dumps({"criteria": {"tool_trajectory_avg_scor": 1.0, "response_match_score": 0.8}})
    )
    done = monitor("eval", str(tmp_path / "weather.evalset.json"), cwd=tmp_path)
    assert done.returncode == 2
    assert "$.criteria.tool_trajectory_avg_scor: ADK metric 'tool_trajectory_avg_scor': unknown metric; " in (
        done.stderr
    )
    assert "did you mean 'tool_trajectory_avg_score'?" in done.stderr


def test_monitor_score_rejects_a_misspelled_scorer(tmp_path: Path) -> None:
    doc = {"run": {"calls": [{"name": "get_weather", "args": {}}]}, "scorers": [{"kind": "forbiden_tool_check"}]}
    done = monitor("score", cwd=tmp_path, stdin=json.dumps(doc))
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.strip() == (
        "monitor score: <stdin>: $.scorers[0].kind: unknown scorer kind 'forbiden_tool_check'; "
        "did you mean 'forbidden_tool_check'?"
    )
