"""schema_check (SCORING.md §3.1)."""

from __future__ import annotations

import unicodedata
from typing import Any

import pytest

from monitor.scoring.checks.schema_check import (
    SchemaCheck,
    compile_schema,
    validator_cache_clear,
    validator_cache_info,
)
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, NoteKind, ScoreResult, Severity
from monitor.trajectory.model import ABSENT, Malformed
from tests.scoring.checks.builders import C, c, make_run, tool

WEATHER = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "minLength": 1},
        "days": {"type": "integer", "minimum": 1, "maximum": 16},
        "units": {"enum": ["metric", "imperial"]},
    },
    "required": ["city"],
}


def check(run: Any, exp: Expectation | None = None, **params: Any) -> ScoreResult:
    return SchemaCheck(params).score(run, exp)


def kinds(result: ScoreResult) -> list[tuple[str, str | None, str]]:
    return [(str(i.kind), i.parameter, str(i.severity)) for i in result.issues]


def weather_run(*calls: Any, schema: Any = WEATHER) -> Any:
    return make_run(list(calls), tools=[tool("get_weather", schema)])


def test_valid_call_scores_one_with_details() -> None:
    r = check(weather_run(c("get_weather", {"city": "Hanoi", "days": 3})))
    assert r.status == "scored" and r.score == 1.0 and r.passed is True and r.threshold == 1.0
    assert r.issues == ()
    assert r.details == {
        "checked": 1,
        "invalid": 0,
        "unchecked_no_args": 0,
        "unchecked_no_schema": 0,
        "unchecked_schema_invalid": 0,
        "dialect_counts": {"2020-12": 1},
    }


def test_missing_required_one_issue_per_name() -> None:
    schema = {**WEATHER, "required": ["city", "days"]}
    r = check(weather_run(c("get_weather", {}), schema=schema))
    assert r.score == 0.0 and r.passed is False
    assert kinds(r) == [("missing_parameter", "/city", "error"), ("missing_parameter", "/days", "error")]
    assert r.issues[0].tool == "get_weather" and r.issues[0].call_index == 0
    assert r.issues[0].expected == ["city", "days"] and r.issues[0].actual is None


def test_nested_required_pointer_is_parent_plus_name() -> None:
    schema = {
        "type": "object",
        "properties": {"filter": {"type": "object", "required": ["op"], "properties": {"op": {"type": "string"}}}},
    }
    r = check(weather_run(c("get_weather", {"filter": {}}), schema=schema))
    assert kinds(r) == [("missing_parameter", "/filter/op", "error")]


def test_wrong_type_numeric_string() -> None:
    r = check(weather_run(c("get_weather", {"city": "Hanoi", "days": "5"})))
    (issue,) = r.issues
    assert issue.kind is FailureKind.WRONG_TYPE and issue.parameter == "/days"
    assert issue.expected == "integer" and issue.actual == "5"
    assert "is not of type 'integer'" in issue.detail


def test_bool_is_not_an_integer_and_float_integral_is() -> None:
    r = check(weather_run(c("get_weather", {"city": "x", "days": True}), c("get_weather", {"city": "x", "days": 3.0})))
    assert [(i.kind, i.call_index) for i in r.issues] == [(FailureKind.WRONG_TYPE, 0)]
    assert r.score == 0.5


def test_enum_and_const_violation() -> None:
    schema = {**WEATHER, "properties": {**WEATHER["properties"], "lang": {"const": "en"}}}
    r = check(weather_run(c("get_weather", {"city": "x", "units": "kelvin", "lang": "vi"}), schema=schema))
    assert sorted(kinds(r)) == [("enum_violation", "/lang", "error"), ("enum_violation", "/units", "error")]
    units = next(i for i in r.issues if i.parameter == "/units")
    assert units.expected == ["metric", "imperial"] and units.actual == "kelvin"


def test_unicode_values_compare_code_points() -> None:
    nfc = unicodedata.normalize("NFC", "Hà Nội")
    nfd = unicodedata.normalize("NFD", "Hà Nội")
    schema = {"type": "object", "properties": {"city": {"enum": [nfc]}}}
    r = check(weather_run(c("get_weather", {"city": nfc}), c("get_weather", {"city": nfd}), schema=schema))
    assert [(i.kind, i.call_index) for i in r.issues] == [(FailureKind.ENUM_VIOLATION, 1)]
    r2 = check(weather_run(c("get_weather", {"city": "東京 🌧"})))
    assert r2.score == 1.0


@pytest.mark.parametrize(
    ("args", "parameter"),
    [
        ({"city": "x", "days": 0}, "/days"),  # minimum
        ({"city": "x", "days": 17}, "/days"),  # maximum
        ({"city": ""}, "/city"),  # minLength
    ],
)
def test_other_keywords_are_invalid_value(args: dict[str, Any], parameter: str) -> None:
    r = check(weather_run(c("get_weather", args)))
    assert kinds(r) == [("invalid_value", parameter, "error")]


def test_keyword_table_exhaustive() -> None:
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "number", "exclusiveMinimum": 0},
            "b": {"type": "number", "multipleOf": 2},
            "c": {"type": "string", "pattern": "^[a-z]+$"},
            "d": {"type": "array", "minItems": 2, "uniqueItems": True},
            "e": {"type": "array", "contains": {"type": "string"}},
            "f": {"type": "object", "minProperties": 1},
            "g": {"type": "object", "propertyNames": {"pattern": "^x"}},
            "h": {"not": {"type": "string"}},
            "i": {"type": "object", "dependentRequired": {"p": ["q"]}},
            "j": {"if": {"type": "string"}, "then": {"maxLength": 1}},
        },
    }
    args = {"a": 0, "b": 3, "c": "A1", "d": [1], "e": [1], "f": {}, "g": {"y": 1}, "h": "s", "i": {"p": 1}, "j": "ab"}
    r = check(weather_run(c("get_weather", args), schema=schema))
    assert {(str(i.kind), i.parameter) for i in r.issues} == {("invalid_value", f"/{k}") for k in args}


def test_additional_properties_false_gives_unknown_parameter_per_key() -> None:
    schema = {**WEATHER, "additionalProperties": False}
    r = check(weather_run(c("get_weather", {"city": "x", "zip": "1", "country": "VN"}), schema=schema))
    assert sorted(kinds(r)) == [("unknown_parameter", "/country", "error"), ("unknown_parameter", "/zip", "error")]
    assert r.score == 0.0


def test_unevaluated_properties_false() -> None:
    schema = {
        "type": "object",
        "allOf": [{"properties": {"a": {"type": "string"}}}],
        "unevaluatedProperties": False,
    }
    r = check(weather_run(c("get_weather", {"a": "x", "b": 1}), schema=schema))
    assert kinds(r) == [("unknown_parameter", "/b", "error")]


def test_any_of_classified_by_best_match_and_one_of_without_context() -> None:
    schema = {
        "type": "object",
        "properties": {
            "when": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "x": {"oneOf": [{"type": "integer"}, {"type": "number"}]},
        },
    }
    r = check(weather_run(c("get_weather", {"when": "soon", "x": 1}), schema=schema))
    assert sorted(kinds(r)) == [("invalid_value", "/x", "error"), ("wrong_type", "/when", "error")]


def test_nested_array_pointer_and_ref_inside_schema() -> None:
    schema = {
        "type": "object",
        "properties": {"filters": {"type": "array", "items": {"$ref": "#/$defs/filter"}}},
        "$defs": {"filter": {"type": "object", "properties": {"op": {"enum": ["eq", "ne"]}}, "required": ["op"]}},
    }
    r = check(weather_run(c("get_weather", {"filters": [{"op": "eq"}, {"op": "lt"}, {}]}), schema=schema))
    assert sorted(kinds(r)) == [
        ("enum_violation", "/filters/1/op", "error"),
        ("missing_parameter", "/filters/2/op", "error"),
    ]


def test_json_pointer_escapes() -> None:
    schema = {"type": "object", "properties": {"a/b": {"type": "object", "properties": {"c~d": {"type": "integer"}}}}}
    r = check(weather_run(c("get_weather", {"a/b": {"c~d": "x"}}), schema=schema))
    assert r.issues[0].parameter == "/a~1b/c~0d"


@pytest.mark.parametrize(
    "ref",
    ["#/$defs/missing", "http://example.com/schema.json", "other.json#/x"],
)
def test_unresolvable_ref_is_schema_invalid_and_call_unchecked(ref: str) -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": ref}}}
    r = check(weather_run(c("get_weather", {"a": 1}), schema=schema))
    assert r.status == "not_applicable" and r.reason == "no_tool_definitions"
    assert r.details["unchecked_schema_invalid"] == 1
    assert r.details["notes"][0]["kind"] == "tool_schema_invalid"
    # with another checkable call the note rides along with a score
    run = make_run([c("bad", {"a": 1}), c("good", {"city": "x"})], tools=[tool("bad", schema), tool("good", WEATHER)])
    r2 = check(run)
    assert r2.score == 1.0 and r2.passed is True
    (note,) = r2.issues
    assert note.kind is NoteKind.TOOL_SCHEMA_INVALID and note.severity is Severity.INFO and note.tool == "bad"


def test_invalid_schema_is_info_note() -> None:
    run = make_run(
        [c("bad", {"a": 1}), c("bad", {"a": 2}), c("good", {"city": "x"})],
        tools=[tool("bad", {"type": "objectx"}), tool("good", WEATHER)],
    )
    r = check(run)
    assert r.score == 1.0 and r.details["checked"] == 1 and r.details["unchecked_schema_invalid"] == 2
    assert [(i.kind, i.severity) for i in r.issues] == [(NoteKind.TOOL_SCHEMA_INVALID, Severity.INFO)]
    assert "/type" in r.issues[0].detail


@pytest.mark.parametrize("schema", ["not a schema", 42, ["type", "object"], {"required": "city"}])
def test_weird_schemas_never_raise(schema: Any) -> None:
    r = check(weather_run(c("get_weather", {"city": "x"}), schema=schema))
    assert r.status == "not_applicable" and r.reason == "no_tool_definitions"


def test_boolean_schema_true_accepts_everything() -> None:
    r = check(weather_run(c("get_weather", {"anything": 1}), schema=True))
    assert r.score == 1.0


def test_dialects() -> None:
    d4 = {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 5, "exclusiveMaximum": True}},
    }
    d7 = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"n": {"$ref": "#/definitions/n"}},
        "definitions": {"n": {"type": "integer"}},
    }
    unknown = {"$schema": "https://example.com/my-dialect", "type": "object", "properties": {"n": {"type": "integer"}}}
    d3 = {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"}
    run = make_run(
        [c("a", {"n": 5}), c("b", {"n": "x"}), c("c", {"n": 1}), c("d", {"n": 1})],
        tools=[tool("a", d4), tool("b", d7), tool("c", unknown), tool("d", d3)],
    )
    r = check(run)
    assert r.details["dialect_counts"] == {"2020-12": 2, "draft-04": 1, "draft-07": 1}
    assert sorted((i.tool, str(i.kind)) for i in r.issues) == [("a", "invalid_value"), ("b", "wrong_type")]


def test_format_is_annotation_unless_asserted() -> None:
    schema = {"type": "object", "properties": {"email": {"type": "string", "format": "email"}}}
    run = weather_run(c("get_weather", {"email": "not-an-email"}), schema=schema)
    assert check(run).score == 1.0
    r = check(run, assert_formats=True)
    assert kinds(r) == [("invalid_value", "/email", "error")]


def test_absent_arguments() -> None:
    r = check(weather_run(c("get_weather", ABSENT)))
    assert r.status == "not_applicable" and r.reason == "arguments_not_captured"
    assert r.details["unchecked_no_args"] == 1
    r2 = check(weather_run(c("get_weather", ABSENT), c("get_weather", {"city": "x"})))
    assert r2.score == 1.0 and r2.details["checked"] == 1 and r2.details["unchecked_no_args"] == 1


@pytest.mark.parametrize("args", [Malformed('{"city": "Ha'), Malformed(""), [], "Hanoi", None, 3])
def test_malformed_or_non_object_arguments(args: Any) -> None:
    r = check(weather_run(C("get_weather", args)))  # C keeps a JSON null as is
    assert r.score == 0.0 and r.passed is False
    (issue,) = r.issues
    assert issue.kind is FailureKind.MALFORMED_ARGUMENTS and issue.severity is Severity.ERROR


def test_non_object_allowed_when_schema_type_is_not_object() -> None:
    r = check(weather_run(c("get_weather", "Hanoi"), schema={"type": ["object", "string"]}))
    assert r.score == 1.0


def test_empty_arguments_valid_when_nothing_required() -> None:
    r = check(weather_run(c("get_weather", {}), schema={"type": "object", "properties": {"a": {}}}))
    assert r.score == 1.0


def test_undeclared_parameters_severity() -> None:
    run = weather_run(c("get_weather", {"city": "x", "cty": "y"}))
    r = check(run)
    assert r.score == 1.0 and r.passed is True
    (issue,) = r.issues
    assert (issue.kind, issue.severity, issue.parameter) == (FailureKind.UNKNOWN_PARAMETER, Severity.WARNING, "/cty")
    assert issue.expected == ["city", "days", "units"]
    strict = check(run, undeclared_parameters="error")
    assert strict.score == 0.0 and strict.passed is False
    assert check(run, undeclared_parameters="ignore").issues == ()


def test_undeclared_respects_pattern_properties_composition_and_explicit_extras() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {}},
        "patternProperties": {"^x_": {}},
        "allOf": [{"$ref": "#/$defs/base"}],
        "$defs": {"base": {"properties": {"b": {}}}},
    }
    r = check(weather_run(c("get_weather", {"a": 1, "b": 2, "x_1": 3, "z": 4}), schema=schema))
    assert [(i.parameter, i.severity) for i in r.issues] == [("/z", Severity.WARNING)]
    opened = {"type": "object", "properties": {"a": {}}, "additionalProperties": True}
    assert check(weather_run(c("get_weather", {"z": 1}), schema=opened)).issues == ()
    no_props = {"type": "object"}
    assert check(weather_run(c("get_weather", {"z": 1}), schema=no_props)).issues == ()


def test_one_issue_per_call_kind_parameter() -> None:
    schema = {"type": "object", "allOf": [{"required": ["a"]}, {"required": ["a"]}], "required": ["a"]}
    r = check(weather_run(c("get_weather", {}), schema=schema))
    assert kinds(r) == [("missing_parameter", "/a", "error")]


def test_actual_truncated_to_200_chars() -> None:
    r = check(weather_run(c("get_weather", {"city": "x", "days": "9" * 1000})))
    assert r.issues[0].actual == "9" * 200
    r2 = check(weather_run(c("get_weather", {"city": ["y" * 50] * 10})))
    assert isinstance(r2.issues[0].actual, str) and len(r2.issues[0].actual) == 200


def test_score_is_valid_over_checked() -> None:
    run = weather_run(
        c("get_weather", {"city": "a"}),
        c("get_weather", {"days": 2}),
        c("get_weather", {"city": "b"}),
        c("get_weather", {"city": 3}),
    )
    r = check(run)
    assert r.score == 0.5 and r.details["invalid"] == 2 and r.details["checked"] == 4


def test_not_applicable_paths() -> None:
    assert check(make_run([])).reason == "no_tool_calls"
    assert check(make_run([c("x", {})])).reason == "no_tool_definitions"  # tools_offered None, no catalogue
    r = check(make_run([c("x", {})], tools=[tool("x")]))  # definition without input_schema
    assert r.reason == "no_tool_definitions" and r.details["unchecked_no_schema"] == 1
    r2 = check(make_run([c("unknown", {})], tools=[tool("x", WEATHER)]))
    assert r2.reason == "no_tool_definitions"


def test_definition_lookup_step_then_run_then_catalogue() -> None:
    strict = {"type": "object", "properties": {"a": {"type": "integer"}}}
    loose = {"type": "object", "properties": {"a": {}}}
    run = make_run(
        [c("t", {"a": "s"}, step=0), c("t", {"a": "s"}, step=1)],
        tools=[tool("t", loose)],
        steps=[[tool("t", strict)], None],
    )
    r = check(run)
    assert [(i.kind, i.call_index) for i in r.issues] == [(FailureKind.WRONG_TYPE, 0)]
    cat_run = make_run([c("t", {"a": "s"})])
    exp = Expectation(catalogue=(tool("t", strict),))
    assert check(cat_run, exp).score == 0.0
    assert check(make_run([c("t", {"a": "s"})], tools=[tool("t", loose)]), exp).score == 1.0


def test_conflicting_definitions_first_wins_with_note() -> None:
    strict = {"type": "object", "properties": {"a": {"type": "integer"}}}
    loose = {"type": "object", "properties": {"a": {}}}
    r = check(make_run([c("t", {"a": "s"}), c("t", {"a": "s"})], tools=[tool("t", loose), tool("t", strict)]))
    assert r.score == 1.0
    (note,) = r.issues
    assert note.kind is NoteKind.TOOL_DEFINITIONS_CONFLICT and note.severity is Severity.INFO


def test_nested_run_calls_use_their_own_definitions() -> None:
    strict = {"type": "object", "properties": {"a": {"type": "integer"}}}
    child = make_run(
        [c("inner", {"a": "s"}, step=0)],
        steps=[[tool("inner", strict)]],
        agent="child",
        run_id="c" * 16,
        start_ns=5 * 10**6,
    )
    parent = make_run([c("outer", {})], tools=[tool("outer", {"type": "object"})], children=[child])
    r = check(parent)
    assert r.details["checked"] == 2 and [(i.tool, i.kind) for i in r.issues] == [("inner", FailureKind.WRONG_TYPE)]
    assert check(parent, scope="own").details["checked"] == 1


def test_tools_filter() -> None:
    run = make_run(
        [c("a", {"x": "s"}), c("b", {"x": "s"})],
        tools=[
            tool("a", {"properties": {"x": {"type": "integer"}}}),
            tool("b", {"properties": {"x": {"type": "integer"}}}),
        ],
    )
    assert check(run, tools=["a"]).details["checked"] == 1
    assert check(run, exclude_tools=["a*"]).details["checked"] == 1


def test_validators_are_cached() -> None:
    validator_cache_clear()
    run = weather_run(*[c("get_weather", {"city": str(i)}) for i in range(5)])
    check(run)
    check(run)
    info = validator_cache_info()
    assert info.misses == 1 and info.currsize == 1
    # equal schemas with different key order share one compiled validator
    reordered = dict(reversed(list(WEATHER.items())))
    assert compile_schema(reordered) is compile_schema(WEATHER)
