"""``monitor eval`` / ``score`` / ``scorers`` end to end through ``monitor.cli.main``: exit codes,
the JSON report, JUnit XML, baselines and the sample datasets as docs/eval.md documents them."""

from __future__ import annotations

import io
import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from monitor.cli import main
from monitor.evaluation.report import result_from_json, result_to_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "datasets"
ADK = EXAMPLES / "adk"
ADK_TRACES = str(ADK / "traces.jsonl")


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_sample_adk_gates_with_the_failing_case(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report, junit = tmp_path / "r.json", tmp_path / "j.xml"
    code, out, _ = run(capsys, "eval", str(ADK), "--traces", ADK_TRACES, "--report", str(report), "--junit", str(junit))
    assert code == 1
    lines = out.strip().splitlines()
    assert lines[-1] == "3 passed, 1 failed"
    assert any(line.startswith("FAIL") and "fahrenheit_units" in line and "missing_parameter" in line for line in lines)
    doc = json.loads(report.read_text())
    assert doc["exit_code"] == 1 and doc["summary"]["pass_rate"] == "3/4"
    assert {c["case_id"]: c["status"] for c in doc["cases"]} == {
        "current_weather": "passed",
        "forecast_then_current": "passed",
        "small_talk": "passed",
        "fahrenheit_units": "failed",
    }
    results = doc["results"]
    # ADK pools runs × turns: 2 runs × (1 + 2 + 1 + 1) turns × 2 scorers
    assert len(results) == 20 and {r["run_no"] for r in results} == {0, 1}
    assert all(r["scored_at"] and r["case_id"] for r in results)
    assert result_to_json(result_from_json(results[0])) == results[0]
    root = ET.fromstring(junit.read_bytes())
    assert root.tag == "testsuites" and root.get("failures") == "1" and root.get("tests") == "4"
    cases = {tc.get("name"): tc for tc in root.iter("testcase")}
    failure = cases["fahrenheit_units"].find("failure")
    assert failure is not None and "tool_trajectory_avg_score" in (failure.get("message") or "")
    assert "missing_parameter" in (failure.text or "")
    assert cases["current_weather"].find("failure") is None


def test_sample_adk_all_pass_subset_exits_zero(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "eval", str(ADK / "weather.evalset.json"), "--traces", ADK_TRACES)
    assert code == 0 and out.strip().splitlines()[-1] == "3 passed, 0 failed"


@pytest.mark.parametrize(
    ("paths", "traces", "last"),
    [
        (["seed001/file-tools.json"], "seed001/traces.jsonl", "5 passed, 0 failed"),
        (["seed000/weather.testcases.yaml"], "seed000/traces.jsonl", "3 passed, 0 failed"),
        (["ragas/weather.jsonl"], None, "2 passed, 0 failed"),
        (["native"], None, "2 passed, 0 failed"),
    ],
)
def test_other_samples_pass(
    capsys: pytest.CaptureFixture[str], paths: list[str], traces: str | None, last: str
) -> None:
    argv = ["eval", *(str(EXAMPLES / p) for p in paths), "--no-judges"]
    if traces:
        argv += ["--traces", str(EXAMPLES / traces)]
    code, out, _ = run(capsys, *argv)
    assert code == 0, out
    assert out.strip().splitlines()[-1] == last


def test_judges_are_not_applicable_when_disabled(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    code, _, _ = run(capsys, "eval", str(EXAMPLES / "ragas" / "weather.jsonl"), "--no-judges", "--report", str(report))
    assert code == 0
    judged = [r for r in json.loads(report.read_text())["results"] if r["scorer_kind"].startswith("judge_")]
    assert judged and all(r["status"] == "not_applicable" and r["reason"] == "judges_disabled" for r in judged)


def test_config_override_and_baseline(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "gate.yaml"
    config.write_text(yaml.safe_dump({"gate": {"min_pass_rate": 0.0}}))
    report = tmp_path / "base.json"
    code, _, _ = run(capsys, "eval", str(ADK), "--traces", ADK_TRACES, "--config", str(config), "--report", str(report))
    assert code == 0  # the failing case no longer fails the suite
    base = json.loads(report.read_text())
    # a baseline where the regression scorer was perfect: its mean dropped by 1.0
    for s in base["summary"]["scorers"]:
        s["mean"] = 1.0
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(base))
    out_report = tmp_path / "now.json"
    argv = ["eval", str(ADK), "--traces", ADK_TRACES, "--config", str(config), "--baseline", str(baseline)]
    code, out, _ = run(capsys, *argv, "--report", str(out_report))
    assert code == 1 and "regression" in out
    regressions = json.loads(out_report.read_text())["summary"]["regressions"]
    assert [(r["dataset"], r["scorer"]) for r in regressions] == [
        ("weather_agent_regressions", "tool_trajectory_avg_score")
    ]
    assert run(capsys, *argv, "--tolerance", "1.0")[0] == 0


def test_config_unknown_scorer_is_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    config = tmp_path / "gate.yaml"
    config.write_text(yaml.safe_dump({"gate": {"scorers": {"nope": {"threshold": 0.5}}}}))
    code, _, err = run(capsys, "eval", str(ADK), "--traces", ADK_TRACES, "--config", str(config))
    assert code == 2 and "nope" in err


def test_dataset_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.monitor.yaml"
    bad.write_text("format: monitor.dataset/v1\ncases: [{id: a, input: x, expect: {calls: [{}]}}]\n")
    code, out, err = run(capsys, "eval", str(bad))
    assert code == 2 and str(bad) in err and "$.cases[0].expect.calls[0]" in err and out == ""
    bad_kind = tmp_path / "k.monitor.yaml"
    bad_kind.write_text(
        "format: monitor.dataset/v1\nscorers: [{kind: no_such}]\ncases: [{id: a, input: x, actual: {calls: []}}]\n"
    )
    code, _, err = run(capsys, "eval", str(bad_kind))
    assert code == 2 and "$.scorers[0]" in err
    assert run(capsys, "eval", str(tmp_path / "missing.json"))[0] == 2


def test_no_trajectory_source_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(capsys, "eval", str(ADK))
    assert code == 2 and "--traces" in err


def test_cases_missing_from_traces_error_exit_3(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    report = tmp_path / "r.json"
    seed = EXAMPLES / "seed001" / "file-tools.json"
    code, out, _ = run(capsys, "eval", str(seed), "--traces", ADK_TRACES, "--report", str(report))
    assert code == 3  # no case produced a verdict: every case errored
    assert out.strip().splitlines()[-1] == "0 passed, 0 failed, 5 errored"
    results = json.loads(report.read_text())["results"]
    assert {(r["status"], r["reason"]) for r in results} == {("error", "runner_failed")}


def test_some_cases_errored_exit_3_unless_allowed(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    mixed = tmp_path / "mixed.evalset.json"
    doc = json.loads((ADK / "weather.evalset.json").read_text())
    doc["eval_cases"].append(
        {
            "eval_id": "not_recorded",
            "conversation": [{"invocation_id": "x", "user_content": {"parts": [{"text": "?"}]}}],
        }
    )
    mixed.write_text(json.dumps(doc))
    (tmp_path / "test_config.json").write_text((ADK / "test_config.json").read_text())
    code, out, _ = run(capsys, "eval", str(mixed), "--traces", ADK_TRACES)
    assert code == 3 and out.strip().splitlines()[-1] == "3 passed, 0 failed, 1 errored"
    allow = tmp_path / "gate.yaml"
    allow.write_text("gate: {allow_errors: true}\n")
    assert run(capsys, "eval", str(mixed), "--traces", ADK_TRACES, "--config", str(allow))[0] == 0


def test_recorded_native_failure_exit_1_and_aggregate_all(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    doc: dict[str, Any] = {
        "format": "monitor.dataset/v1",
        "scorers": [{"id": "te", "kind": "tool_eval"}],
        "gate": {"min_pass_rate": 0.5, "scorers": {"te": {"aggregate": "all"}}},
        "cases": [
            {
                "id": "ok",
                "input": "w",
                "expect": {"calls": [{"name": "w"}]},
                "actual": {"calls": [{"name": "w", "args": {}}]},
            },
            {
                "id": "bad",
                "input": "w",
                "expect": {"calls": [{"name": "w"}]},
                "actual": {"calls": [{"name": "x", "args": {}}]},
            },
        ],
    }
    path = tmp_path / "d.monitor.json"
    path.write_text(json.dumps(doc))
    code, out, _ = run(capsys, "eval", str(path))
    assert code == 0 and out.strip().splitlines()[-1] == "1 passed, 1 failed"  # 1/2 >= 0.5
    doc["gate"]["min_pass_rate"] = 0.6
    path.write_text(json.dumps(doc))
    assert run(capsys, "eval", str(path))[0] == 1


def test_score_command(capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = {
        "run": {"trace_id": "t", "run_id": "r", "calls": [{"name": "get_weather", "args": {"city": "Hanoi"}}]},
        "expect": {"calls": [{"name": "get_weather", "args": {"city": "Hanoi"}}], "forbidden_tools": ["delete_*"]},
        "scorers": [{"kind": "trajectory_match"}, {"kind": "forbidden_tool_check"}, {"kind": "judge_goal_accuracy"}],
    }
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps(doc)))
    code, out, _ = run(capsys, "score")
    assert code == 0
    results = json.loads(out)
    assert [(r["scorer"], r["status"], r["score"]) for r in results] == [
        ("trajectory_match", "scored", 1.0),
        ("forbidden_tool_check", "scored", 1.0),
        ("judge_goal_accuracy", "not_applicable", None),
    ]
    assert results[0]["trace_id"] == "t" and results[0]["params_hash"]
    path = tmp_path / "in.json"
    path.write_text(json.dumps({"run": {"calls": []}, "expect": {"callz": []}}))
    code, _, err = run(capsys, "score", str(path))
    assert code == 2 and "$.expect" in err


def test_scorers_command(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "scorers", "--format", "json")
    assert code == 0
    entries = {e["kind"]: e for e in json.loads(out)}
    assert entries["adk_tool_trajectory"]["peer"].startswith("google-adk")
    assert entries["adk_tool_trajectory"]["defaults"]["match_type"] == "EXACT"
    assert entries["schema_check"]["peer"] == "ours"
    code, out, _ = run(capsys, "scorers")
    assert code == 0 and "tool_eval" in out and "seed-000" in out
