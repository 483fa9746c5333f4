"""Property tests over every §3 check: never an exception, scores in [0, 1], pass ⇔ no error issue."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.scoring.checks import CHECKS, default_checks
from monitor.scoring.expectation import Budgets, Expectation
from monitor.scoring.result import FailureKind, NoteKind, Severity
from monitor.trajectory.model import ABSENT, Malformed
from tests.scoring.checks.builders import C, c, make_run, tool

NAMES = ["get_weather", "search", "fetch", "delete_file", "Get_Weather", "ünïcødé", ""]

SCHEMAS: list[Any] = [
    None,
    {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]},
    {
        "type": "object",
        "properties": {"q": {"$ref": "#/$defs/q"}},
        "$defs": {"q": {"type": "string"}},
        "additionalProperties": False,
    },
    {"type": "object", "properties": {"q": {"$ref": "#/$defs/nope"}}},
    {"type": "objectx"},
    {
        "$schema": "http://json-schema.org/draft-04/schema#",
        "type": "object",
        "properties": {"n": {"type": "number", "maximum": 3, "exclusiveMaximum": True}},
    },
    {
        "type": "object",
        "properties": {"x": {"anyOf": [{"type": "integer"}, {"type": "string", "format": "email"}]}},
        "unevaluatedProperties": False,
    },
    True,
    "garbage",
]

json_scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)
json_value = st.recursive(
    json_scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=5), inner, max_size=3)),
    max_leaves=8,
)
args_strategy = st.one_of(
    st.just(ABSENT),
    st.builds(Malformed, st.text(max_size=10)),
    json_value,
    st.dictionaries(st.sampled_from(["city", "days", "q", "n", "x", "zz", "city/x"]), json_value, max_size=4),
)
result_strategy = st.one_of(
    st.just(ABSENT),
    json_value,
    st.fixed_dictionaries({"isError": st.booleans(), "content": json_value}),
)
call_strategy = st.builds(
    C,
    name=st.sampled_from(NAMES),
    args=args_strategy,
    error=st.one_of(st.none(), st.sampled_from(["TimeoutError", "_OTHER"])),
    message=st.text(max_size=20),
    result=result_strategy,
    executed=st.booleans(),
    duration_ms=st.floats(min_value=0, max_value=5000),
    step=st.one_of(st.none(), st.integers(min_value=0, max_value=2)),
)
tools_strategy = st.one_of(
    st.none(),
    st.lists(st.builds(tool, st.sampled_from(NAMES), st.sampled_from(SCHEMAS)), max_size=5),
)
expectation_strategy = st.one_of(
    st.none(),
    st.builds(
        Expectation,
        forbidden_tools=st.one_of(st.none(), st.lists(st.sampled_from(["delete_*", "search", "[", "*"])).map(tuple)),
        no_tools=st.booleans(),
        allowed_tools=st.lists(st.sampled_from(["fetch", "g*"]), max_size=2).map(tuple),
        catalogue=st.one_of(st.none(), tools_strategy.map(lambda t: tuple(t) if t is not None else None)),
        budgets=st.builds(
            Budgets,
            max_tool_calls=st.one_of(st.none(), st.integers(0, 5)),
            max_calls_per_tool=st.dictionaries(st.sampled_from(NAMES), st.integers(0, 3), max_size=2),
            tool_latency_budget_ms=st.dictionaries(st.sampled_from(["*", "search"]), st.floats(0.5, 1000), max_size=2),
            run_latency_budget_ms=st.one_of(st.none(), st.floats(1, 10_000)),
            max_identical_calls=st.one_of(st.none(), st.integers(1, 3)),
            max_identical_calls_per_tool=st.dictionaries(st.sampled_from(NAMES), st.integers(1, 3), max_size=2),
        ),
    ),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    calls=st.lists(call_strategy, max_size=12),
    tools=tools_strategy,
    step_tools=st.lists(
        st.one_of(st.none(), st.lists(st.builds(tool, st.sampled_from(NAMES), st.sampled_from(SCHEMAS)), max_size=3)),
        max_size=3,
    ),
    exp=expectation_strategy,
    with_child=st.booleans(),
)
def test_checks_never_raise_and_scores_are_bounded(
    calls: list[C], tools: Any, step_tools: Any, exp: Expectation | None, with_child: bool
) -> None:
    children = [make_run(calls[:3], agent="child", run_id="c" * 16, tools=tools)] if with_child else []
    run = make_run(calls, tools=tools, steps=step_tools, children=children)
    for check in default_checks():
        result = check.score(run, exp)
        assert result.status != "error", (check.kind, result.details)
        if result.status == "scored":
            assert result.score is not None and 0.0 <= result.score <= 1.0
            has_error_issue = any(i.severity is Severity.ERROR for i in result.issues)
            assert result.passed is (not has_error_issue), (check.kind, result)
            assert (result.score == 1.0) is (not has_error_issue), (check.kind, result)
            assert all(i.severity is Severity.INFO for i in result.issues if isinstance(i.kind, NoteKind))
        else:
            assert result.score is None and result.passed is None and result.reason


def test_every_section_3_kind_is_produced() -> None:
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 0}, "e": {"enum": [1]}},
        "required": ["r"],
        "additionalProperties": False,
    }
    run = make_run(
        [
            c("t", {"n": "x", "e": 2, "zz": 1}),
            c("t", {"n": -1}),
            C("t", Malformed("{")),
            c("ghost", executed=False),
            c("undefined"),
            c("bad_schema"),
            c("fail", error="E", duration_ms=50),
            c("delete_x"),
            *[c("loop", {"i": 1})] * 3,
        ],
        tools=[
            tool("t", schema),
            tool("fail"),
            tool("delete_x"),
            tool("loop"),
            tool("bad_schema", {"type": 1}),
            tool("t", {"type": "object"}),
        ],
        run_ms=10_000,
    )
    exp = Expectation(
        no_tools=True,
        forbidden_tools=("delete_*",),
        budgets=Budgets(max_tool_calls=1, tool_latency_budget_ms={"fail": 1}, run_latency_budget_ms=1),
    )
    produced = {i.kind for check in default_checks() for i in check.score(run, exp).issues}
    section_3 = {
        FailureKind.MISSING_PARAMETER,
        FailureKind.UNKNOWN_PARAMETER,
        FailureKind.WRONG_TYPE,
        FailureKind.ENUM_VIOLATION,
        FailureKind.INVALID_VALUE,
        FailureKind.MALFORMED_ARGUMENTS,
        FailureKind.HALLUCINATED_TOOL,
        FailureKind.TOOL_ERROR,
        FailureKind.REPEATED_CALL,
        FailureKind.LOOP,
        FailureKind.EXCESS_CALLS,
        FailureKind.TOOL_LATENCY,
        FailureKind.RUN_LATENCY,
        FailureKind.UNNECESSARY_TOOL,
        FailureKind.FORBIDDEN_TOOL,
        NoteKind.TOOL_SCHEMA_INVALID,
        NoteKind.TOOL_DEFINITIONS_CONFLICT,
        NoteKind.TOOL_DEFINITIONS_INCOMPLETE,
    }
    assert section_3 <= produced, section_3 - produced


def test_registry_and_identity() -> None:
    assert list(CHECKS) == [
        "schema_check",
        "unknown_tool_check",
        "tool_error_check",
        "repetition_check",
        "call_budget_check",
        "latency_check",
        "no_tool_needed_check",
        "forbidden_tool_check",
    ]
    for check in default_checks():
        r = check.score(make_run([]), None)
        assert r.scorer == check.kind and r.params_hash == check.params_hash and len(r.params_hash) == 12
        assert r.params["threshold"] == 1.0
