"""monitor.rules (SCORING.md §3.9): loading, validation errors, matching, merge, catalogue,
references and scorer selection."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monitor.rules import RulesConfigError, RuleSet, ScorerSpec
from monitor.scoring.base import ScorerConfigError
from monitor.scoring.checks import CHECKS, ForbiddenToolCheck, NoToolNeededCheck, RepetitionCheck, SchemaCheck
from monitor.scoring.expectation import Expectation
from monitor.trajectory.model import ABSENT
from tests.scoring.checks.builders import c, make_run

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}

RULES_YAML = """
rules:
  - name: everyone
    expect:
      forbidden_tools: [drop_*]
      max_tool_calls: 10
      tool_latency_budget_ms: {"*": 5000}
    scorers:
      - schema_check
      - repetition_check
  - name: faq-greetings
    match: {agent: faq, input_regex: "^(hi|hello|thanks)\\\\b"}
    expect: {no_tools: true}
    scorers:
      no_tool_needed_check: {}
  - name: weather
    match: {agent_glob: "weather*"}
    expect:
      forbidden_tools: [delete_city, drop_*]
      max_tool_calls: 4
      max_calls_per_tool: {get_forecast: 2}
      tool_latency_budget_ms: {"*": 2000, get_forecast: 8000}
      allowed_tools: [final_result]
      expected_tools: [get_forecast]
    scorers:
      schema_check: {params: {undeclared_parameters: error}}
      repetition_check:
        threshold: 0.5
        tools: {roll_die: {params: {max_identical_calls: 10}}}
catalogue:
  weather: [{name: get_forecast, input_schema: {type: object, properties: {city: {type: string}}}}]
  "support-*": [{name: open_ticket}]
references:
  key: monitor.eval.case_id
  path: refs.yaml
  cases:
    inline-1: {expected_calls: [{name: get_forecast, args: {city: Hanoi}}]}
"""

REFS_YAML = """
key: monitor.eval.case_id
cases:
  42:
    expected_calls: [{name: get_weather}, {name: get_forecast, args: null}]
    expected_response: "Sunny"
    max_tool_calls: 2
"""


@pytest.fixture
def rules(tmp_path: Path) -> RuleSet:
    (tmp_path / "rules.yaml").write_text(RULES_YAML)
    (tmp_path / "refs.yaml").write_text(REFS_YAML)
    return RuleSet.load(tmp_path / "rules.yaml")


def errors_of(obj: Any, **kw: Any) -> list[str]:
    with pytest.raises(RulesConfigError) as info:
        RuleSet.from_mapping(obj, **kw)
    return list(info.value.problems)


# --------------------------------------------------------------------------- matching and merge


def test_merge_lists_union_budgets_min_booleans_or(rules: RuleSet) -> None:
    exp = rules.expectation_for(make_run(agent="weather"))
    assert exp.forbidden_tools == ("drop_*", "delete_city")
    assert exp.budgets.max_tool_calls == 4
    assert exp.budgets.tool_latency_budget_ms == {"*": 2000, "get_forecast": 8000}
    assert exp.budgets.max_calls_per_tool == {"get_forecast": 2}
    assert exp.allowed_tools == ("final_result",)
    assert exp.expected_tools == ("get_forecast",)
    assert exp.no_tools is False
    assert exp.catalogue is not None and [t.name for t in exp.catalogue] == ["get_forecast"]
    assert exp.catalogue[0].source == "catalogue"


def test_input_regex_and_agent(rules: RuleSet) -> None:
    assert rules.expectation_for(make_run(agent="faq", user_text="hello there")).no_tools is True
    assert rules.expectation_for(make_run(agent="faq", user_text="what is X?")).no_tools is False
    assert rules.expectation_for(make_run(agent="faq", user_text=None)).no_tools is False
    assert rules.expectation_for(make_run(agent="other", user_text="hi")).no_tools is False
    assert [r.name for r in rules.matching_rules(make_run(agent="faq", user_text="thanks"))] == [
        "everyone",
        "faq-greetings",
    ]


def test_no_matching_rule_gives_empty_expectation() -> None:
    rs = RuleSet.from_mapping({"rules": [{"match": {"agent": "x"}, "expect": {"no_tools": True}}]})
    exp = rs.expectation_for(make_run(agent="y"))
    assert exp == Expectation()
    assert ForbiddenToolCheck().score(make_run([c("a")], agent="y"), exp).reason == "no_rule"
    assert RuleSet.empty().expectation_for(make_run()) == Expectation()


def test_attribute_match_and_list_forms() -> None:
    rs = RuleSet.from_mapping(
        {
            "rules": [
                {"match": {"agent": ["a", "b"], "attributes": {"tier": 1, "prod": True}}, "expect": {"no_tools": True}},
                {"match": {"agent_glob": "z*"}, "expect": {"forbidden_tools": "rm"}},
            ]
        }
    )
    assert rs.expectation_for(make_run(agent="b", attributes=[("tier", "1"), ("prod", "true")])).no_tools
    assert not rs.expectation_for(make_run(agent="b", attributes=[("tier", "2"), ("prod", "true")])).no_tools
    assert not rs.expectation_for(make_run(agent="c", attributes=[("tier", "1"), ("prod", "true")])).no_tools
    assert rs.expectation_for(make_run(agent="zed")).forbidden_tools == ("rm",)
    assert rs.expectation_for(make_run(agent=None)).forbidden_tools is None


def test_scalar_merge_later_wins_and_expected_calls_union() -> None:
    rs = RuleSet.from_mapping(
        {
            "rules": [
                {
                    "expect": {
                        "category": "golden",
                        "expected_calls": [{"name": "a", "args": {"x": 1}}],
                        "rubrics": {"r1": "one"},
                        "max_identical_calls": 3,
                        "max_identical_calls_per_tool": {"t": 5},
                        "run_latency_budget_ms": 100,
                    }
                },
                {
                    "expect": {
                        "category": "negative",
                        "expected_calls": [{"name": "a", "args": {"x": 1}}, {"name": "b"}],
                        "rubrics": {"r1": "uno", "r2": "two"},
                        "max_identical_calls": 2,
                        "max_identical_calls_per_tool": {"t": 7, "u": 1},
                        "run_latency_budget_ms": 50,
                    }
                },
            ]
        }
    )
    exp = rs.expectation_for(make_run())
    assert exp.category == "negative"
    assert [(e.name, e.args) for e in exp.expected_calls or ()] == [("a", {"x": 1}), ("b", ABSENT)]
    assert exp.rubrics == (("r1", "uno"), ("r2", "two"))
    assert exp.budgets.max_identical_calls == 2
    assert exp.budgets.max_identical_calls_per_tool == {"t": 5, "u": 1}
    assert exp.budgets.run_latency_budget_ms == 50


# --------------------------------------------------------------------------- catalogue


def test_catalogue_exact_then_glob(rules: RuleSet) -> None:
    assert [t.name for t in rules.catalogue_for("weather") or ()] == ["get_forecast"]
    assert [t.name for t in rules.catalogue_for("support-eu") or ()] == ["open_ticket"]
    assert rules.catalogue_for("nobody") is None
    assert rules.catalogue_for(None) is None


def test_expectation_catalogue_includes_nested_agents(rules: RuleSet) -> None:
    child = make_run(agent="support-eu", run_id="c" * 16)
    exp = rules.expectation_for(make_run(agent="weather", children=[child]))
    assert [t.name for t in exp.catalogue or ()] == ["get_forecast", "open_ticket"]
    assert rules.expectation_for(make_run(agent="nobody")).catalogue is None


def test_catalogue_feeds_schema_check(rules: RuleSet) -> None:
    run = make_run([c("get_forecast", {"city": 3})], agent="weather")  # spans carried no definitions
    result = SchemaCheck().score(run, rules.expectation_for(run))
    assert result.score == 0.0 and result.issues[0].parameter == "/city"


# --------------------------------------------------------------------------- references


def test_reference_by_attribute(rules: RuleSet) -> None:
    run = make_run(agent="weather", attributes=[("monitor.eval.case_id", "42")])
    ref = rules.reference_for(run)
    assert ref is not None and ref.expected_response == "Sunny"
    assert [(e.name, e.args) for e in ref.expected_calls or ()] == [("get_weather", ABSENT), ("get_forecast", None)]
    inline = rules.reference_for(make_run(attributes=[("monitor.eval.case_id", "inline-1")]))
    assert (
        inline is not None and inline.expected_calls is not None and inline.expected_calls[0].args == {"city": "Hanoi"}
    )
    assert rules.reference_for(make_run(attributes=[("monitor.eval.case_id", "nope")])) is None
    assert rules.reference_for(make_run()) is None
    assert rules.reference_count == 2


def test_expectation_merges_reference_last(rules: RuleSet) -> None:
    run = make_run(agent="weather", attributes=[("monitor.eval.case_id", "42")])
    exp = rules.expectation_for(run)
    assert exp.budgets.max_tool_calls == 2  # min(10, 4, 2)
    assert exp.expected_response == "Sunny"
    assert [e.name for e in exp.expected_calls or ()] == ["get_weather", "get_forecast"]  # replaced
    assert exp.forbidden_tools == ("drop_*", "delete_city")
    assert rules.expectation_for(run, with_reference=False).expected_response is None


def test_reference_file_problems(tmp_path: Path) -> None:
    (tmp_path / "refs.yaml").write_text("key: other\ncases: {}\n")
    probs = errors_of({"references": {"key": "k", "path": "refs.yaml"}}, base_dir=tmp_path)
    assert "differs" in probs[0]
    (tmp_path / "refs.yaml").write_text("cases: {a: {}}\n")
    probs = errors_of({"references": {"key": "k", "path": "refs.yaml", "cases": {"a": {}}}}, base_dir=tmp_path)
    assert "['a']" in probs[0]
    (tmp_path / "refs.yaml").write_text("cases: {a: {max_tool_calls: x}}\n")
    with pytest.raises(RulesConfigError, match=r"cases\.a\.max_tool_calls"):
        RuleSet.from_mapping({"references": {"key": "k", "path": "refs.yaml"}}, base_dir=tmp_path)
    with pytest.raises(RulesConfigError, match="cannot read"):
        RuleSet.from_mapping({"references": {"key": "k", "path": "missing.yaml"}}, base_dir=tmp_path)


# --------------------------------------------------------------------------- scorers


def test_scorers_for_agent_name(rules: RuleSet) -> None:
    specs = rules.scorers_for("weather")
    assert specs == (
        ScorerSpec("schema_check", "schema_check", {"undeclared_parameters": "error"}),
        ScorerSpec("repetition_check", "repetition_check", {"threshold": 0.5, "exclude_tools": ["roll_die"]}),
        ScorerSpec(
            "repetition_check[roll_die]",
            "repetition_check",
            {"threshold": 0.5, "max_identical_calls": 10, "tools": ["roll_die"]},
        ),
    )
    # the faq rule needs input_regex: not decidable from the name alone
    assert [s.id for s in rules.scorers_for("faq")] == ["schema_check", "repetition_check"]
    faq_run = make_run(agent="faq", user_text="hi")
    assert [s.id for s in rules.scorers_for(faq_run)] == ["schema_check", "repetition_check", "no_tool_needed_check"]


def test_scorer_specs_build_check_instances(rules: RuleSet) -> None:
    built = [s.build() for s in rules.scorers_for("weather")]
    assert [type(b) for b in built] == [SchemaCheck, RepetitionCheck, RepetitionCheck]
    assert built[2].id == "repetition_check[roll_die]" and built[2].threshold == 0.5
    run = make_run([c("roll_die", {"s": 6})] * 5 + [c("x", {"a": 1})] * 3, agent="weather")
    exp = rules.expectation_for(run)
    base, per_tool = built[1].score(run, exp), built[2].score(run, exp)
    assert base.details["calls"] == 3 and per_tool.details["calls"] == 5
    assert per_tool.details["repeated_calls"] == 0
    with pytest.raises(ScorerConfigError, match="did you mean 'schema_check'"):
        ScorerSpec("x", "shema_check").build()  # the default registry is the scorer catalogue
    with pytest.raises(KeyError, match="not registered"):
        ScorerSpec("x", "tool_eval").build(CHECKS)  # an explicit registry


def test_scorer_merge_enabled_and_kind_from_id() -> None:
    rs = RuleSet.from_mapping(
        {
            "rules": [
                {
                    "scorers": {
                        "schema_check:strict": {"params": {"undeclared_parameters": "error"}},
                        "latency_check": {},
                    }
                },
                {
                    "match": {"agent": "quiet"},
                    "scorers": {
                        "latency_check": {"enabled": False},
                        "schema_check:strict": {"params": {"assert_formats": True}},
                    },
                },
            ]
        }
    )
    specs = rs.scorers_for("quiet")
    assert specs == (
        ScorerSpec("schema_check:strict", "schema_check", {"undeclared_parameters": "error", "assert_formats": True}),
    )
    assert specs[0].build().id == "schema_check:strict"
    assert [s.id for s in rs.scorers_for("loud")] == ["schema_check:strict", "latency_check"]


def test_unknown_kinds_with_and_without_registry() -> None:
    obj = {"rules": [{"scorers": {"tool_eval": {"params": {"variant": "literal"}}}}]}
    assert RuleSet.from_mapping(obj).scorers_for(None)[0].kind == "tool_eval"
    probs = errors_of(obj, scorer_registry=CHECKS)
    assert probs[0].startswith("rules[0].scorers.tool_eval: unknown scorer kind 'tool_eval'")
    probs = errors_of({"rules": [{"scorers": {"tool_eval": {"tools": {"x": {}}}}}]})
    assert "per-tool" in probs[0]


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {"rules": [{"match": {"input_regex": "(unclosed"}}]},
            "rules[0].match.input_regex: regular expression does not compile",
        ),
        (
            {"rules": [{"match": {"agnet": "faq"}}]},
            "rules[0].match.agnet: unknown key 'agnet'; remove it (did you mean 'agent'?)",
        ),
        (
            {"rules": [{}, {"expect": {"max_tool_calls": -1}}]},
            "rules[1].expect.max_tool_calls: Input should be greater than or equal to 0 (got -1)",
        ),
        (
            {"rules": [{"expect": {"max_tool_calls": "5"}}]},
            "rules[0].expect.max_tool_calls: Input should be a valid integer (got '5')",
        ),
        (
            {"rules": [{"expect": {"tool_latency_budget_ms": {"*": 0}}}]},
            "rules[0].expect.tool_latency_budget_ms.*: Input should be greater than 0",
        ),
        (
            {"rules": [{"expect": {"category": "gold"}}]},
            "rules[0].expect.category: Input should be 'golden', 'secondary' or 'negative'",
        ),
        (
            {"rules": [{"expect": {"expected_calls": [{"args": {}}]}}]},
            "rules[0].expect.expected_calls[0].name: required key is missing; add it",
        ),
        (
            {"catalogue": {"a": [{"name": "t", "input_schema": {"type": "objectx"}}]}},
            "catalogue.a[0].input_schema: not a usable JSON Schema",
        ),
        (
            {"catalogue": {"a": [{"name": "t", "input_schema": {"properties": {"x": {"$ref": "#/nope"}}}}]}},
            "unresolvable $ref",
        ),
        (
            {"rules": [{"scorers": {"repetition_check": {"params": {"max_identical_call": 3}}}}]},
            "rules[0].scorers.repetition_check.params: unknown parameter 'max_identical_call': "
            "remove it (did you mean 'max_identical_calls'?)",
        ),
        (
            {"rules": [{"scorers": {"repetition_check": {"tools": {"roll_die": {"params": {"max_period": 0}}}}}}]},
            "rules[0].scorers.repetition_check.tools.roll_die.params: parameter 'max_period' = 0 is invalid",
        ),
        (
            {"rules": [{"scorers": {"schema_check": {"threshold": 2}}}]},
            "rules[0].scorers.schema_check.threshold: Input should be less than or equal to 1",
        ),
        ({"rulez": []}, "rulez: unknown key 'rulez'; remove it (did you mean 'rules'?)"),
        ({"references": {"path": "x.yaml"}}, "references.key: required key is missing"),
    ],
)
def test_config_errors_name_path_value_and_fix(obj: Any, expected: str) -> None:
    problems = errors_of(obj)
    assert any(p.startswith(expected) or expected in p for p in problems), problems


def test_file_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("rules:\n  - match: {agent: [unclosed\n")
    with pytest.raises(RulesConfigError, match=r"line \d+ column \d+: invalid YAML") as info:
        RuleSet.load(bad)
    assert str(bad) in str(info.value)
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    with pytest.raises(RulesConfigError, match="expected a mapping"):
        RuleSet.load(tmp_path / "list.yaml")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(RulesConfigError, match="invalid JSON"):
        RuleSet.load(tmp_path / "bad.json")
    (tmp_path / "empty.yaml").write_text("")
    assert RuleSet.load(tmp_path / "empty.yaml").expectation_for(make_run()) == Expectation()
    with pytest.raises(RulesConfigError, match="cannot read"):
        RuleSet.load(tmp_path / "absent.yaml")


def test_json_rules_file(tmp_path: Path) -> None:
    p = tmp_path / "rules.json"
    p.write_text('{"rules": [{"match": {"agent": "a"}, "expect": {"no_tools": true}}]}')
    assert RuleSet.load(p).expectation_for(make_run(agent="a")).no_tools is True


# --------------------------------------------------------------------------- end to end


def test_faq_greeting_rule_drives_no_tool_needed_check(rules: RuleSet) -> None:
    run = make_run([c("search_kb", {"q": "hello"})], agent="faq", user_text="hello!")
    result = NoToolNeededCheck().score(run, rules.expectation_for(run))
    assert result.score == 0.0 and result.issues[0].detail == {"rule": "no_tools"}
    other = make_run([c("search_kb", {"q": "refund"})], agent="faq", user_text="How do refunds work?")
    assert NoToolNeededCheck().score(other, rules.expectation_for(other)).reason == "no_rule"
