"""The public API in ``monitor/__init__.py`` and ``assert_tools``: thin entry points that give the same answers as
the daemon and the commands."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import monitor
from monitor.commands.score import score_document
from monitor.rules.datasets.model import DatasetError
from monitor.scoring.expectation import ExpectedCall
from monitor.testing import RunCapture, assert_tools
from tests.spanutil import Recorder, agent_run

REPO = Path(__file__).resolve().parents[1]
NATIVE = REPO / "examples" / "datasets" / "native"


def recorded_agent() -> Recorder:
    rec = Recorder(service="weather-svc")
    agent_run(
        rec.tracer(),
        {"get_weather": lambda city: "sunny", "get_time": lambda tz: "noon"},
        [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})],
    )
    return rec


HAND_WRITTEN: dict[str, Any] = {
    "agent": "travel",
    "calls": [
        {"name": "search_flights", "args": {"to": "Rome", "passengers": 2}},
        {"name": "get_weather", "args": {"city": "Rome"}},
        {"name": "book_flight", "args": {"flight": "AZ 610"}},
    ],
}


# --------------------------------------------------------------------------- building runs


def test_runs_from_spans_and_from_their_otlp_record_are_the_same_runs() -> None:
    rec = recorded_agent()
    from_spans = monitor.runs_from_spans(rec.spans())
    from_record = monitor.runs_from_otlp(rec.record())
    assert from_spans == from_record == monitor.runs_from_otlp([rec.record()])
    (run,) = from_spans
    assert run.agent == "weather" and [c.name for c in run.calls] == ["get_weather", "get_time"]
    with RunCapture(rec.provider) as capture:
        agent_run(rec.tracer(), {"get_weather": lambda city: "sunny"}, [("get_weather", {"city": "Oslo"})])
    assert [c.args for c in capture.run().calls] == [{"city": "Oslo"}], "the capture rebuilds runs the same way"


def test_runs_from_files_reads_what_monitor_inspect_reads(tmp_path: Path) -> None:
    files = sorted((REPO / "examples" / "records").glob("*"))
    runs = monitor.runs_from_files(files)
    assert runs and all(r.trace_id for r in runs)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad\.jsonl"):
        monitor.runs_from_files([bad])


def test_run_from_dict_reads_a_hand_written_run_as_the_commands_do() -> None:
    run = monitor.run_from_dict(HAND_WRITTEN, user_input="Book me a flight to Rome")
    assert run.agent == "travel" and run.user_text == "Book me a flight to Rome"
    assert [(c.name, c.step) for c in run.calls] == [("search_flights", 0), ("get_weather", 1), ("book_flight", 2)]
    with pytest.raises(DatasetError, match="my-case"):
        monitor.run_from_dict({"calls": "nope"}, source="my-case")


# --------------------------------------------------------------------------- scoring


def test_score_against_gives_what_monitor_score_gives() -> None:
    run = monitor.run_from_dict(HAND_WRITTEN)
    expect = {"calls": [{"name": "search_flights"}, {"name": "book_flight"}], "forbidden_tools": ["book_*"]}
    scorers = ["forbidden_tool_check", {"kind": "trajectory_match", "params": {"trajectory_match_mode": "superset"}}]
    got = monitor.score_against(run, expect, scorers, now="2026-01-01T00:00:00Z")
    doc = {
        "run": HAND_WRITTEN,
        "expect": expect,
        "scorers": [{"kind": "forbidden_tool_check"}, scorers[1]],
    }
    assert got == score_document(
        json.loads(json.dumps(doc)), "<score_against>", judges=False, now="2026-01-01T00:00:00Z"
    )
    by_kind = {r.scorer_kind: r for r in got}
    assert by_kind["forbidden_tool_check"].passed is False
    assert by_kind["trajectory_match"].status == "scored"


def test_score_runs_the_daemons_checks_and_rules() -> None:
    run = monitor.run_from_dict(HAND_WRITTEN)
    rules = {"rules": [{"match": {"agent": "travel"}, "expect": {"forbidden_tools": ["book_flight"]}}]}
    settings = {"scoring": {"checks": ["forbidden_tool_check", "repetition_check"]}}
    results = monitor.score(run, settings=settings, rules=rules)
    kinds = {r.scorer_kind: r for r in results}
    assert set(kinds) == {"forbidden_tool_check", "repetition_check"}
    assert kinds["forbidden_tool_check"].passed is False
    assert all(r.run_id == run.run_id for r in results)
    without_rules = {r.scorer_kind: r for r in monitor.score(run, settings=settings)}
    assert without_rules["forbidden_tool_check"].status != "scored" or without_rules["forbidden_tool_check"].passed


# --------------------------------------------------------------------------- datasets and the gate


def test_load_dataset_and_run_gate_match_monitor_eval(tmp_path: Path) -> None:
    (dataset,) = monitor.load_dataset(NATIVE)
    assert dataset.name == "weather-native" and len(dataset.cases) == 2
    result = monitor.run_gate(NATIVE)
    assert result.passed and result.exit_code == 0 and result.report is not None
    assert "gate passed" in result.output
    failing = tmp_path / "fail.monitor.yaml"
    text = (NATIVE / "weather.monitor.yaml").read_text(encoding="utf-8").replace("days: 5}}]", "days: 6}}]", 1)
    failing.write_text(text, encoding="utf-8")
    assert monitor.run_gate(failing).exit_code == 1
    missing = monitor.run_gate(tmp_path / "nothing-here")
    assert missing.exit_code == 2 and missing.report is None and missing.errors


def test_types_are_importable_from_the_package_lazily() -> None:
    from monitor import Run, ScoreResult, ToolCall

    assert Run.__name__ == "Run" and ToolCall.__name__ == "ToolCall" and ScoreResult.__name__ == "ScoreResult"
    with pytest.raises(AttributeError):
        monitor.not_there  # noqa: B018


# --------------------------------------------------------------------------- assert_tools


def test_assert_tools_accepts_names_pairs_dicts_and_expected_calls() -> None:
    run = monitor.run_from_dict(HAND_WRITTEN)
    result = assert_tools(
        run,
        [
            "search_flights",
            {"name": "get_weather", "args": {"city": "Rome"}},
            ExpectedCall("book_flight", {"flight": "AZ 610"}),
        ],
    )
    assert result.passed and result.scorer == "assert_tools"
    assert_tools(run, [("get_weather", {"city": "Rome"}), ExpectedCall("book_flight")], order="any_order")
    assert_tools(run, [("search_flights", {"to": "Rome"})], order="in_order", args="subset")
    assert_tools(run, [], order="any_order")
    with pytest.raises(AssertionError, match="not expected"):
        assert_tools(run, [])


def test_assert_tools_exact_lets_parallel_calls_of_one_step_come_in_any_order() -> None:
    (run,) = monitor.runs_from_spans(recorded_agent().spans())
    assert run.calls[0].step == run.calls[1].step, "one model step emitted both"
    assert_tools(run, ["get_time", "get_weather"])
    assert_tools(run, ["get_weather", "get_time"])


def test_assert_tools_reports_every_difference() -> None:
    run = monitor.run_from_dict(HAND_WRITTEN)
    with pytest.raises(AssertionError) as info:
        assert_tools(run, [("search_flights", {"to": "Paris", "passengers": 2, "class": "eco"}), "book_flight"])
    message = str(info.value)
    assert "call #0 search_flights: argument 'to' expected 'Paris', got 'Rome'" in message
    assert "call #0 search_flights: argument 'class' is missing (expected 'eco')" in message
    assert "call #1 get_weather(city='Rome'): not expected" in message
    with pytest.raises(AssertionError, match=r"unexpected argument 'passengers'=2"):
        assert_tools(run, [("search_flights", {"to": "Rome"})], order="any_order")
    with pytest.raises(AssertionError, match=r"missing: cancel\(…\) was not called"):
        assert_tools(run, ["cancel"], order="in_order")


def test_assert_tools_refuses_to_compare_arguments_that_were_not_captured() -> None:
    run = monitor.run_from_dict({"agent": "a", "calls": [{"name": "lookup"}]})
    assert_tools(run, ["lookup"])
    with pytest.raises(AssertionError, match=r"arguments_not_captured.*enable content capture"):
        assert_tools(run, [("lookup", {"id": 1})])
    assert_tools(run, [("lookup", {"id": 1})], args="ignore")


def test_assert_tools_rejects_bad_arguments() -> None:
    run = monitor.run_from_dict(HAND_WRITTEN)
    with pytest.raises(ValueError, match="order"):
        assert_tools(run, [], order="sorted")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="args"):
        assert_tools(run, [], args="loose")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected call"):
        assert_tools(run, [42])  # type: ignore[list-item]
