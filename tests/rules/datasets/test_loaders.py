"""Dataset loaders (SCORING.md §6): every format, detection order and the errors they raise."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.rules.datasets import DatasetError, detect, discover, load_file, load_paths
from monitor.scoring.expectation import ExpectedCall
from monitor.trajectory.model import ABSENT

EXAMPLES = Path(__file__).resolve().parents[3] / "examples" / "datasets"


def write(path: Path, doc: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix in (".yaml", ".yml"):
        path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    elif path.suffix == ".jsonl":
        path.write_text("\n".join(json.dumps(d) for d in doc) + "\n", encoding="utf-8")
    else:
        path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def invocation(text: str, calls: list[dict[str, Any]] | None = None, answer: str | None = None) -> dict[str, Any]:
    inv: dict[str, Any] = {"invocation_id": "i", "user_content": {"role": "user", "parts": [{"text": text}]}}
    if answer is not None:
        inv["final_response"] = {"role": "model", "parts": [{"text": answer}]}
    if calls is not None:
        inv["intermediate_data"] = {"tool_uses": calls}
    return inv


def evalset(*cases: dict[str, Any]) -> dict[str, Any]:
    return {"eval_set_id": "set", "eval_cases": list(cases)}


def raises(path: Path, path_expr: str, text: str, **kwargs: Any) -> DatasetError:
    with pytest.raises(DatasetError) as info:
        load_file(path, **kwargs)
    err = info.value
    assert err.file == str(path)
    assert err.path == path_expr, err
    assert text in err.problem, err
    return err


# ----------------------------------------------------------------------------- ADK


def test_adk_sample_evalset_snake_and_camel_case() -> None:
    ds = load_file(EXAMPLES / "adk" / "weather.evalset.json")
    assert ds.source == "adk" and ds.name == "weather_agent_core"
    assert [c.id for c in ds.cases] == ["current_weather", "forecast_then_current", "small_talk"]
    first = ds.cases[0]
    assert first.turns[0].text == "What's the weather in Hanoi right now?"
    assert first.turns[0].expectation.expected_calls == (ExpectedCall("get_weather", {"city": "Hanoi"}),)
    assert first.turns[0].expectation.expected_response == "It is 31°C and sunny in Hanoi."
    assert first.config["session_input"] == {"app_name": "weather_agent", "user_id": "ci", "state": {}}
    camel = ds.cases[1]  # camelCase keys and invocation_events
    assert len(camel.turns) == 2
    assert camel.turns[0].expectation.expected_calls == (ExpectedCall("get_forecast", {"city": "Paris", "days": 3}),)
    assert camel.turns[0].session_input == {"app_name": "weather_agent", "user_id": "ci", "state": {}}
    assert ds.cases[2].turns[0].expectation.expected_calls == ()
    # test_config.json next to the file: EXACT trajectory at 1.0, ROUGE at 0.8; ADK runs twice
    kinds = {s.id: (s.kind, s.params) for s in ds.scorers}
    assert kinds["tool_trajectory_avg_score"] == (
        "adk_tool_trajectory",
        {"threshold": 1.0, "calls_source": "selected", "scope": "flatten", "match_type": "EXACT"},
    )
    assert kinds["response_match_score"] == ("adk_response_match", {"threshold": 0.8})
    assert ds.gate.runs == 2 and ds.gate.min_pass_rate == 1.0
    assert ds.gate.scorers["tool_trajectory_avg_score"].aggregate == "mean"


def test_adk_defaults_without_test_config_and_absent_args_stay_null(tmp_path: Path) -> None:
    path = write(
        tmp_path / "a.evalset.json", evalset({"eval_id": "c", "conversation": [invocation("hi", [{"name": "t"}])]})
    )
    ds = load_file(path)
    assert {s.id: s.params["threshold"] for s in ds.scorers} == {
        "tool_trajectory_avg_score": 1.0,
        "response_match_score": 0.8,
    }
    call = ds.cases[0].turns[0].expectation.expected_calls[0]  # type: ignore[index]
    assert call.args is None  # ADK FunctionCall.args None, not "unspecified"
    assert ds.cases[0].turns[0].expectation.expected_response is None


def test_adk_unknown_key_is_an_error_naming_the_path(tmp_path: Path) -> None:
    inv = invocation("hi", [])
    inv["user_contnet"] = inv.pop("user_content")
    path = write(tmp_path / "a.evalset.json", evalset({"eval_id": "c", "conversation": [inv]}))
    err = raises(path, "$.eval_cases[0].conversation[0].user_contnet", "unknown key")
    assert "user_content" in err.problem  # did-you-mean


def test_adk_invocation_events_calls_in_order(tmp_path: Path) -> None:
    inv = invocation("roll", answer="ok")
    inv["intermediate_data"] = {
        "invocation_events": [
            {
                "author": "a",
                "content": {"parts": [{"text": "x"}, {"function_call": {"name": "roll_die", "args": {"sides": 10}}}]},
            },
            {"author": "b", "content": {"parts": [{"functionCall": {"name": "check_prime", "args": {"nums": [9]}}}]}},
            {"author": "c", "content": None},
        ]
    }
    ds = load_file(write(tmp_path / "e.evalset.json", evalset({"eval_id": "c", "conversation": [inv]})))
    calls = ds.cases[0].turns[0].expectation.expected_calls
    assert [c.name for c in calls or ()] == ["roll_die", "check_prime"]


def test_adk_conversation_scenario_unsupported_unless_skipped(tmp_path: Path) -> None:
    doc = evalset(
        {"eval_id": "sim", "conversation_scenario": {"starting_prompt": "hi"}},
        {"eval_id": "ok", "conversation": [invocation("hi", [])]},
    )
    path = write(tmp_path / "s.evalset.json", doc)
    raises(path, "$.eval_cases[0].conversation_scenario", "not supported")
    ds = load_file(path, skip_unsupported=True)
    assert [c.id for c in ds.cases] == ["ok"] and ds.info["skipped"] == ["sim"]


def test_adk_test_config_mapping_and_match_type(tmp_path: Path) -> None:
    write(
        tmp_path / "test_config.json",
        {
            "criteria": {
                "tool_trajectory_avg_score": {"threshold": 0.5, "matchType": " in-order ", "ignoreArgs": True},
                "rubric_based_tool_use_quality_v1": {"threshold": 0.7, "rubrics": []},
                "multi_turn_task_success_v1": 0.6,
            }
        },
    )
    ds = load_file(write(tmp_path / "x.evalset.json", evalset({"eval_id": "c", "conversation": [invocation("q", [])]})))
    specs = {s.id: s for s in ds.scorers}
    assert specs["tool_trajectory_avg_score"].params["match_type"] == "IN_ORDER"
    assert specs["tool_trajectory_avg_score"].params["ignore_args"] is True
    assert specs["rubric_based_tool_use_quality_v1"].kind == "judge_trajectory_quality"
    assert specs["rubric_based_tool_use_quality_v1"].params == {"style": "rubric", "threshold": 0.7}
    assert specs["multi_turn_task_success_v1"].kind == "judge_goal_accuracy"
    assert ds.gate.scorers["tool_trajectory_avg_score"].threshold == 0.5


@pytest.mark.parametrize(("raw", "expected"), [(2, "ANY_ORDER"), (0, "EXACT"), ("Any Order", "ANY_ORDER")])
def test_adk_match_type_normalisation(tmp_path: Path, raw: Any, expected: str) -> None:
    write(
        tmp_path / "test_config.json", {"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "match_type": raw}}}
    )
    ds = load_file(write(tmp_path / "x.evalset.json", evalset({"eval_id": "c", "conversation": [invocation("q", [])]})))
    assert ds.scorers[0].params["match_type"] == expected


def test_adk_unsupported_metric_errors_unless_skipped(tmp_path: Path) -> None:
    config = write(tmp_path / "test_config.json", {"criteria": {"safety_v1": 0.8, "response_match_score": 0.5}})
    path = write(tmp_path / "x.evalset.json", evalset({"eval_id": "c", "conversation": [invocation("q", [])]}))
    with pytest.raises(DatasetError) as info:
        load_file(path)
    assert info.value.file == str(config) and info.value.path == "$.criteria.safety_v1"
    assert "not supported" in info.value.problem
    ds = load_file(path, skip_unsupported=True)
    assert [s.id for s in ds.scorers] == ["response_match_score"] and ds.info["skipped_metrics"] == ["safety_v1"]


def test_adk_bad_match_type(tmp_path: Path) -> None:
    config = write(
        tmp_path / "test_config.json",
        {"criteria": {"tool_trajectory_avg_score": {"threshold": 1, "match_type": "fuzzy"}}},
    )
    path = write(tmp_path / "x.evalset.json", evalset({"eval_id": "c", "conversation": [invocation("q", [])]}))
    with pytest.raises(DatasetError) as info:
        load_file(path)
    assert info.value.file == str(config) and info.value.path == "$.criteria.tool_trajectory_avg_score.match_type"


def test_adk_legacy_test_file_is_one_case_named_after_the_file(tmp_path: Path) -> None:
    rows = [
        {
            "query": "turn off device_2",
            "expected_tool_use": [{"tool_name": "set_device", "tool_input": {"id": 2}}],
            "reference": "done",
        },
        {"query": "and device_3", "expected_tool_use": [], "reference": "ok"},
    ]
    ds = load_file(write(tmp_path / "home.test.json", rows))
    assert ds.source == "adk_legacy" and [c.id for c in ds.cases] == ["home"]
    turns = ds.cases[0].turns
    assert [t.text for t in turns] == ["turn off device_2", "and device_3"]
    assert turns[0].expectation.expected_calls == (ExpectedCall("set_device", {"id": 2}),)
    assert turns[0].expectation.expected_response == "done"


def test_adk_legacy_required_keys_follow_the_criteria(tmp_path: Path) -> None:
    path = write(tmp_path / "home.test.json", [{"query": "q", "expected_tool_use": []}])
    raises(path, "$[0]", "'reference'")  # response_match_score (default) needs a reference
    write(tmp_path / "test_config.json", {"criteria": {"tool_trajectory_avg_score": 1.0}})
    assert len(load_file(path).cases) == 1


def test_adk_legacy_eval_set_list(tmp_path: Path) -> None:
    doc = [
        {
            "name": "s1",
            "data": [{"query": "a", "expected_tool_use": [], "reference": "x"}],
            "initial_session": {"state": {"k": 1}},
        },
        {"name": "s2", "data": [{"query": "b", "expected_tool_use": [], "reference": "y"}]},
    ]
    ds = load_file(write(tmp_path / "legacy.test.json", doc))
    assert [c.id for c in ds.cases] == ["s1", "s2"]
    assert ds.cases[0].turns[0].session_input == {"state": {"k": 1}}


# ----------------------------------------------------------------------------- seed-001 / seed-000


def test_seed001_sample() -> None:
    ds = load_file(EXAMPLES / "seed001" / "file-tools.json")
    assert ds.source == "seed001" and [c.id for c in ds.cases] == ["0", "1", "2", "3", "4"]
    golden = ds.cases[0]
    assert golden.turns[0].expectation.expected_tools == ("readFile",)
    assert golden.turns[0].expectation.category == "golden"
    assert [t.name for t in golden.tools or ()] == ["readFile", "writeFile", "listFiles", "deleteFile"]
    assert all(t.input_schema is None for t in golden.tools or ())
    assert ds.cases[3].turns[0].expectation.forbidden_tools == ("readFile", "writeFile", "listFiles", "deleteFile")
    assert [s.kind for s in ds.scorers] == ["tools_selected", "tools_avoided", "tool_selection_f1"]
    assert all(
        s.params == {"gate_by_category": True, "selection_scope": "first_step", "calls_source": "selected"}
        for s in ds.scorers
    )


def test_seed001_metadata_id_and_bad_category(tmp_path: Path) -> None:
    item = {"data": {"prompt": "p", "tools": ["a"]}, "target": {"category": "golden"}, "metadata": {"id": "x1"}}
    assert load_file(write(tmp_path / "s.json", [item])).cases[0].id == "x1"
    bad = {"data": {"prompt": "p", "tools": ["a"]}, "target": {"category": "gold"}}
    raises(write(tmp_path / "b.json", [item, bad]), "$[1].target.category", "golden, secondary or negative")


def test_seed000_sample_defaults_and_gate() -> None:
    ds = load_file(EXAMPLES / "seed000" / "weather.testcases.yaml")
    assert ds.source == "seed000" and len(ds.cases) == 3
    exp = ds.cases[0].turns[0].expectation
    call = (exp.expected_calls or ())[0]
    assert call.name == "get_weather" and call.args is ABSENT and call.required_params == {"city": "Hanoi"}
    assert call.param_validators == {"units": {"enum": ["celsius", "fahrenheit"]}}
    assert exp.budgets.max_tool_calls == 5 and exp.budgets.run_latency_budget_ms == 10000
    assert exp.expected_keywords == ("Hanoi", "weather")
    assert ds.cases[2].turns[0].expectation.no_tools is True
    assert [s.kind for s in ds.scorers] == ["tool_eval"] and ds.scorers[0].params == {"variant": "clipped"}
    assert ds.gate.min_pass_rate == 0.9 and ds.gate.scorers["tool_eval"].aggregate == "all"


def test_seed000_errors(tmp_path: Path) -> None:
    raises(
        write(tmp_path / "a.json", [{"id": "t", "user_message": "m", "max_calls": 3}]), "$[0].max_calls", "unknown key"
    )
    bad_schema = [
        {
            "id": "t",
            "user_message": "m",
            "expected_tool_calls": [{"tool_name": "x", "param_validators": {"p": {"type": 5}}}],
        }
    ]
    raises(write(tmp_path / "b.json", bad_schema), "$[0].expected_tool_calls[0].param_validators.p", "JSON Schema")
    two = [{"id": "t", "user_message": "m"}, {"id": "u"}]
    raises(write(tmp_path / "c.json", two), "$[1]", "'user_message'")


# ----------------------------------------------------------------------------- Ragas


def test_ragas_jsonl_conversation_is_the_actual_trajectory() -> None:
    ds = load_file(EXAMPLES / "ragas" / "weather.jsonl")
    assert ds.source == "ragas" and [c.id for c in ds.cases] == ["0", "1"]
    case = ds.cases[0]
    assert case.actual is not None and len(case.actual) == 2 == len(case.turns)
    first, second = case.actual
    assert [c.name for c in first.calls] == ["weather_check"]
    assert first.calls[0].result == "75°F, partly cloudy" and first.calls[0].step == 0
    assert first.final_response == "The current temperature in New York is 75°F and it's partly cloudy."
    assert second.user_text == "Can you translate that to Celsius?"
    assert second.calls[0].args == {"temperature_fahrenheit": 75}
    exp = case.turns[0].expectation
    assert [c.name for c in exp.expected_calls or ()] == ["weather_check", "temperature_conversion"]
    assert exp.reference_outcome == "The user learns the New York temperature in Celsius."
    assert case.turns[1].expectation.expected_calls is None
    kinds = [s.kind for s in ds.scorers]
    assert kinds[:2] == ["ragas_tool_call_accuracy", "ragas_tool_call_f1"]
    assert "judge_goal_accuracy" in kinds and "judge_topic_adherence" in kinds


def test_ragas_errors_name_line_and_field(tmp_path: Path) -> None:
    orphan = {"user_input": [{"type": "human", "content": "hi"}, {"type": "tool", "content": "x"}]}
    path = tmp_path / "r.jsonl"
    path.write_text(
        json.dumps({"user_input": [{"type": "human", "content": "a"}]}) + "\n\n" + json.dumps(orphan) + "\n"
    )
    raises(path, "$[1] (line 3).user_input[1]", "no pending tool call")
    bad_type = [{"user_input": [{"type": "human", "content": "a"}, {"type": "robot", "content": "b"}]}]
    raises(write(tmp_path / "t.json", bad_type), "$[0].user_input[1].type", "human, ai or tool")
    starts_ai = [{"user_input": [{"type": "ai", "content": "a"}]}]
    raises(write(tmp_path / "u.json", starts_ai), "$[0].user_input[0]", "start with a human")


# ----------------------------------------------------------------------------- native


def test_native_sample() -> None:
    ds = load_file(EXAMPLES / "native" / "weather.monitor.yaml")
    assert ds.source == "native" and ds.name == "weather-native"
    assert [s.id for s in ds.scorers] == ["traj", "acc", "schema", "forbidden"]
    assert ds.gate.scorers["acc"].min_mean == 0.9 and ds.gate.scorers["acc"].threshold == 0.8
    case = ds.cases[0]
    assert case.tags == ("golden",) and case.config["agent"] == "weather"
    exp = case.turns[0].expectation
    assert exp.expected_calls == (ExpectedCall("get_forecast", {"city": "Ho Chi Minh City", "days": 5}),)
    assert exp.forbidden_tools == ("delete_*",) and exp.expected_keywords == ("Ho Chi Minh City",)
    assert exp.budgets.max_tool_calls == 3
    assert exp.catalogue is not None and {t.name for t in exp.catalogue} == {"get_forecast", "get_weather"}
    assert case.actual is not None and case.actual[0].calls[0].step == 0  # hand-written call = selected
    multi = ds.cases[1]
    assert len(multi.turns) == 2 and multi.actual is not None and len(multi.actual) == 2


def native_doc(**overrides: Any) -> dict[str, Any]:
    doc: dict[str, Any] = {"format": "monitor.dataset/v1", "cases": [{"id": "a", "input": "hi"}]}
    doc.update(overrides)
    return doc


def test_native_rejects_other_versions(tmp_path: Path) -> None:
    raises(
        write(tmp_path / "x.monitor.json", native_doc(format="monitor.dataset/v2")), "$.format", "unsupported format"
    )


def test_native_schema_errors_cite_the_json_path(tmp_path: Path) -> None:
    doc = native_doc(cases=[{"id": "a", "input": "hi", "expect": {"calls": [{"name": "t", "argz": {}}]}}])
    raises(write(tmp_path / "x.monitor.yaml", doc), "$.cases[0].expect.calls[0]", "argz")
    raises(write(tmp_path / "y.monitor.json", native_doc(cases=[{"id": "a"}])), "$.cases[0]", "exactly one of")
    bad_gate = native_doc(gate={"min_pass_rate": 1.5})
    raises(write(tmp_path / "z.monitor.json", bad_gate), "$.gate.min_pass_rate", "1.5")
    unknown_gate = native_doc(scorers=[{"id": "s", "kind": "schema_check"}], gate={"scorers": {"nope": {}}})
    raises(write(tmp_path / "w.monitor.json", unknown_gate), "$.gate.scorers.nope", "not among the scorers")
    dup = native_doc(cases=[{"id": "a", "input": "x"}, {"id": "a", "input": "y"}])
    raises(write(tmp_path / "v.monitor.json", dup), "$.cases[1].id", "duplicate")


def test_native_jsonl_header_and_case_lines(tmp_path: Path) -> None:
    path = write(
        tmp_path / "d.monitor.jsonl",
        [{"format": "monitor.dataset/v1", "name": "j"}, {"id": "a", "input": "x"}, {"id": "b", "input": 5}],
    )
    raises(path, "$.cases[1].input (line 3)", "5")
    good = write(
        tmp_path / "e.monitor.jsonl",
        [{"format": "monitor.dataset/v1"}, {"id": 1, "messages": [{"role": "user", "content": "x"}]}],
    )
    ds = load_file(good)
    assert ds.cases[0].id == "1" and ds.cases[0].turns[0].text == "x"


def test_native_defaults_when_scorers_and_gate_are_omitted(tmp_path: Path) -> None:
    ds = load_file(write(tmp_path / "d.monitor.yaml", native_doc()))
    assert ds.scorers[0].kind == "trajectory_match"
    assert set(ds.gate.scorers) == {s.id for s in ds.scorers} and ds.gate.min_pass_rate == 1.0


calls_strategy = st.lists(
    st.fixed_dictionaries(
        {"name": st.from_regex(r"[a-z_]{1,8}", fullmatch=True)},
        optional={
            "args": st.dictionaries(
                st.from_regex(r"[a-z]{1,5}", fullmatch=True), st.integers() | st.text(max_size=5), max_size=3
            )
        },
    ),
    max_size=4,
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(
    cases=st.lists(
        st.fixed_dictionaries(
            {"input": st.text(min_size=1, max_size=20), "calls": calls_strategy},
            optional={
                "forbidden": st.lists(st.from_regex(r"[a-z*]{1,6}", fullmatch=True), max_size=3),
                "response": st.text(max_size=20),
            },
        ),
        min_size=1,
        max_size=5,
    ),
    suffix=st.sampled_from([".monitor.json", ".monitor.yaml", ".monitor.jsonl"]),
)
def test_native_round_trip(tmp_path: Path, cases: list[dict[str, Any]], suffix: str) -> None:
    """What is written in the native format loads back as the same cases and expectations."""
    native_cases = []
    for i, c in enumerate(cases):
        expect: dict[str, Any] = {"calls": c["calls"]}
        if "forbidden" in c:
            expect["forbidden_tools"] = c["forbidden"]
        if "response" in c:
            expect["response"] = c["response"]
        native_cases.append({"id": f"c{i}", "input": c["input"], "expect": expect})
    header = {"format": "monitor.dataset/v1", "name": "rt"}
    path = tmp_path / f"rt{suffix}"
    if suffix == ".monitor.jsonl":
        write(path, [header, *native_cases])
    else:
        write(path, {**header, "cases": native_cases})
    ds = load_file(path)
    assert [c.id for c in ds.cases] == [c["id"] for c in native_cases]
    for loaded, c in zip(ds.cases, cases, strict=True):
        exp = loaded.turns[0].expectation
        assert loaded.turns[0].text == c["input"] or not c["input"].strip() or loaded.turns[0].input[0].parts
        assert [(e.name, e.args) for e in exp.expected_calls or ()] == [
            (call["name"], call.get("args", ABSENT)) for call in c["calls"]
        ]
        assert exp.forbidden_tools == (tuple(c["forbidden"]) if "forbidden" in c else None)
        assert exp.expected_response == c.get("response")


# ----------------------------------------------------------------------------- detection and discovery


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        ({"format": "monitor.dataset/v1", "eval_cases": []}, "native"),  # native wins over ADK
        ({"evalCases": []}, "adk"),
        ([{"query": "q", "user_message": "m"}], "adk"),  # ADK before seed-000
        ([{"name": "n", "data": [], "target": {}}], "adk"),  # legacy eval set before seed-001
        ([{"user_input": [], "data": {}, "target": {}}], "ragas"),  # Ragas before seed-001
        ([{"user_input": "text", "data": {}, "target": {}}], "seed001"),  # user_input must be a list
        ([{"data": {}, "target": {}, "user_message": "m"}], "seed001"),
        ([{"user_message": "m"}], "seed000"),
        ([{"foo": 1}], None),
        ({"cases": []}, None),
    ],
)
def test_detection_order(doc: Any, expected: str | None) -> None:
    assert detect(doc) == expected


def test_unknown_format_and_unparsable_files(tmp_path: Path) -> None:
    raises(write(tmp_path / "a.json", [{"foo": 1}]), "$", "matches no dataset format")
    raises(write(tmp_path / "b.json", []), "$", "empty list")
    (tmp_path / "c.json").write_text('{"a": ')
    raises(tmp_path / "c.json", "$", "invalid JSON at line 1")
    (tmp_path / "d.monitor.yaml").write_text("a: [1,\n")
    raises(tmp_path / "d.monitor.yaml", "$", "invalid YAML")


def test_directories_are_searched_recursively(tmp_path: Path) -> None:
    write(tmp_path / "x" / "y" / "a.test.json", [{"query": "q", "expected_tool_use": [], "reference": "r"}])
    write(tmp_path / "x" / "b.evalset.json", evalset({"eval_id": "c", "conversation": [invocation("q", [])]}))
    write(tmp_path / "c.monitor.yaml", native_doc())
    write(tmp_path / "c.monitor.jsonl", [{"format": "monitor.dataset/v1"}, {"id": "a", "input": "x"}])
    write(tmp_path / "ignored.json", [{"user_message": "m", "id": "t"}])
    write(tmp_path / "x" / "test_config.json", {"criteria": {"response_match_score": 0.5}})
    found = sorted(p.relative_to(tmp_path).as_posix() for p in discover([tmp_path]))
    assert found == ["c.monitor.jsonl", "c.monitor.yaml", "x/b.evalset.json", "x/y/a.test.json"]
    assert len(load_paths([tmp_path])) == 4
    explicit = load_paths([tmp_path / "ignored.json"])
    assert explicit[0].source == "seed000"
    with pytest.raises(DatasetError, match="no such file"):
        discover([tmp_path / "missing"])
