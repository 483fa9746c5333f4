"""The scoring stage end to end on runs rebuilt from real framework spans
(tests/fixtures/frameworks), with rules from YAML; errors, caching, judges seam, sampling."""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, ClassVar

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.ingest.decode import decode_logs, decode_traces
from monitor.rules import RuleSet, ScorerSpec
from monitor.sampling import Sampler
from monitor.scoring.base import Evaluation, ScorerConfigError
from monitor.scoring.catalogue import catalogue
from monitor.scoring.checks import SchemaCheck, ToolErrorCheck
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import ScoreResult
from monitor.scoring.stage import Backpressure, JudgeSubmitter, ScoringStage, has_reference
from monitor.settings import Settings
from monitor.trajectory.build import build_runs
from monitor.trajectory.model import Run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
NOW = datetime(2026, 11, 5, 12, 30, tzinfo=UTC)
DEFAULT_CHECKS = Settings.model_validate({}).scoring.checks


@cache
def fixture_runs(framework: str, name: str) -> tuple[Run, ...]:
    traces = FIXTURES / framework / f"{name}.traces.pb"
    logs = traces.with_name(f"{name}.logs.pb")
    spans = decode_traces(traces.read_bytes())
    events = decode_logs(logs.read_bytes()) if logs.exists() else []
    return tuple(build_runs(spans, events))


@cache
def all_fixture_runs() -> tuple[Run, ...]:
    out: list[Run] = []
    for path in sorted(FIXTURES.glob("*/*.traces.pb")):
        out.extend(fixture_runs(path.parent.name, path.name.removesuffix(".traces.pb")))
    return tuple(out)


def one(framework: str, name: str) -> Run:
    (run,) = fixture_runs(framework, name)
    return run


def make_stage(
    rules: str | None = None,
    *,
    sampling: dict[str, Any] | None = None,
    scoring: dict[str, Any] | None = None,
    **kw: Any,
) -> ScoringStage:
    s = Settings.model_validate({"sampling": sampling or {}, "scoring": scoring or {}})
    ruleset = None if rules is None else RuleSet.from_mapping(yaml.safe_load(rules))
    return ScoringStage(s, ruleset, Sampler(s.sampling), lambda: NOW, **kw)


def summary(results: Sequence[ScoreResult]) -> dict[tuple[str | None, str], tuple[Any, ...]]:
    """(agent, scorer) → (status, reason or score, sorted (issue kind, tool) pairs)."""
    out: dict[tuple[str | None, str], tuple[Any, ...]] = {}
    for r in results:
        key = (r.agent, r.scorer)
        assert key not in out, f"duplicate result {key}"
        value = r.reason if r.status != "scored" else r.score
        out[key] = (r.status, value, tuple(sorted((str(i.kind), i.tool or "") for i in r.issues)))
    return out


RULES = """
rules:
  - name: travel-policy
    match: {agent: travel_agent}
    expect:
      forbidden_tools: ["search_*"]
      max_tool_calls: 1
      max_calls_per_tool: {get_weather: 0}
  - name: weather-answers-directly
    match: {agent: weather_agent}
    expect:
      no_tools: true
      tool_latency_budget_ms: {"*": 0.001}
  - name: travel-scorers
    match: {agent: travel_agent}
    scorers:
      tool_eval: {}
      judge_tool_selection: {}
references:
  key: monitor.eval.case_id
  cases:
    case-1: {expected_calls: [{name: search_flights}, {name: get_weather}]}
"""

NA_NO_RULE = ("not_applicable", "no_rule", ())
OK = ("scored", 1.0, ())


# --------------------------------------------------------------------------- end to end


def test_rules_on_a_strands_run_with_a_failing_tool() -> None:
    run = one("strands", "tool_error_default")  # travel_agent: search_flights (error), get_weather
    results = make_stage(RULES).score(run)
    assert summary(results) == {
        ("travel_agent", "schema_check"): ("not_applicable", "no_tool_definitions", ()),
        ("travel_agent", "unknown_tool_check"): OK,
        ("travel_agent", "tool_error_check"): ("scored", 0.5, (("tool_error", "search_flights"),)),
        ("travel_agent", "repetition_check"): OK,
        ("travel_agent", "call_budget_check"): ("scored", 0.0, (("excess_calls", ""), ("excess_calls", "get_weather"))),
        ("travel_agent", "latency_check"): NA_NO_RULE,
        ("travel_agent", "no_tool_needed_check"): NA_NO_RULE,
        ("travel_agent", "forbidden_tool_check"): ("scored", 0.0, (("forbidden_tool", "search_flights"),)),
        ("travel_agent", "tool_eval"): ("not_applicable", "no_reference", ()),  # rules alone are no reference
        ("travel_agent", "judge_tool_selection"): ("not_applicable", "judges_disabled", ()),
    }
    assert [r.scorer for r in results][:8] == DEFAULT_CHECKS  # checks first, in settings order


def test_nested_runs_are_scored_as_runs_of_their_own() -> None:
    run = one("adk1", "agent_tool")  # travel_agent → search_flights, weather_agent (→ get_weather)
    results = make_stage(RULES).score(run)
    assert summary(results) == {
        ("travel_agent", "schema_check"): ("not_applicable", "no_tool_definitions", ()),
        ("travel_agent", "unknown_tool_check"): OK,
        ("travel_agent", "tool_error_check"): OK,
        ("travel_agent", "repetition_check"): OK,
        # flatten view: the child's get_weather counts toward the parent's budgets
        ("travel_agent", "call_budget_check"): ("scored", 0.0, (("excess_calls", ""), ("excess_calls", "get_weather"))),
        ("travel_agent", "latency_check"): NA_NO_RULE,
        ("travel_agent", "no_tool_needed_check"): NA_NO_RULE,
        ("travel_agent", "forbidden_tool_check"): ("scored", 0.0, (("forbidden_tool", "search_flights"),)),
        ("travel_agent", "tool_eval"): ("not_applicable", "no_reference", ()),
        ("weather_agent", "schema_check"): ("not_applicable", "no_tool_definitions", ()),
        ("weather_agent", "unknown_tool_check"): OK,
        ("weather_agent", "tool_error_check"): OK,
        ("weather_agent", "repetition_check"): OK,
        ("weather_agent", "call_budget_check"): NA_NO_RULE,
        ("weather_agent", "latency_check"): ("scored", 0.0, (("tool_latency", "get_weather"),)),
        ("weather_agent", "no_tool_needed_check"): ("scored", 0.0, (("unnecessary_tool", "get_weather"),)),
        ("weather_agent", "forbidden_tool_check"): NA_NO_RULE,
        ("travel_agent", "judge_tool_selection"): ("not_applicable", "judges_disabled", ()),
    }
    child = run.children[0]
    assert {(r.run_id, r.agent) for r in results} == {(run.run_id, "travel_agent"), (child.run_id, "weather_agent")}
    only_root = make_stage(RULES, scoring={"score_children": False}).score(run)
    assert {r.agent for r in only_root} == {"travel_agent"}


def test_golden_reference_matched_by_attribute_feeds_reference_scorers() -> None:
    run = dataclasses.replace(one("adk1", "agent_tool"), attributes=(("monitor.eval.case_id", "case-1"),))
    got = summary(make_stage(RULES).score(run))
    # expected [search_flights, get_weather]; actual adds the weather_agent call (agent as tool)
    assert got[("travel_agent", "tool_eval")] == (
        "scored",
        0.9,
        (("excess_calls", ""), ("unnecessary_tool", "weather_agent")),
    )


def test_identity_fields_on_every_result() -> None:
    stage = make_stage(RULES)
    for run in all_fixture_runs():
        results = stage.score(run)
        ids = {(r.run_id, r.agent, r.conversation_id) for r in results}
        assert ids == {(x.run_id, x.agent, x.conversation_id) for x in run.walk()}
        for r in results:
            assert r.trace_id == run.trace_id
            assert r.scored_at == "2026-11-05T12:30:00+00:00"


def test_default_checks_on_every_fixture_run() -> None:
    stage = make_stage()
    for run in all_fixture_runs():
        results = stage.score(run)
        assert len(results) == len(DEFAULT_CHECKS) * len(list(run.walk()))
        for r in results:
            assert r.status in ("scored", "not_applicable"), r
            if r.status == "scored":
                assert r.score is not None and 0.0 <= r.score <= 1.0


def _walk(run: dict[str, Any]) -> list[dict[str, Any]]:
    out, stack = [], [run]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(current.get("children") or ())
    return out


def test_failing_tools_in_fixtures_are_flagged_by_tool_error_check() -> None:
    stage = make_stage()
    flagged = set()
    for path in sorted(FIXTURES.glob("*/*.traces.pb")):
        fw, name = path.parent.name, path.name.removesuffix(".traces.pb")
        for run in fixture_runs(fw, name):
            for r in stage.score(run):
                if r.scorer == "tool_error_check" and r.passed is False:
                    flagged.add(f"{fw}/{name}")
    # every recorded scenario in which a tool raised (its ground truth says so), and no other
    failing = set()
    for path in sorted(FIXTURES.glob("*/*.expected.json")):
        expected = json.loads(path.read_text())
        calls = [c for run in expected["runs"] for r in _walk(run) for c in r.get("calls") or ()]
        if any(c.get("error") for c in calls):
            failing.add(f"{path.parent.name}/{path.name.removesuffix('.expected.json')}")
    assert len(failing) >= 18
    assert flagged == failing


def test_naive_clock_is_utc() -> None:
    s = Settings.model_validate({})
    stage = ScoringStage(s, None, Sampler(s.sampling), lambda: datetime(2026, 1, 2, 3, 4, 5))
    assert {r.scored_at for r in stage.score(one("adk1", "sequential_content"))} == {"2026-01-02T03:04:05+00:00"}


# --------------------------------------------------------------------------- rule overrides


def test_a_rule_scorer_with_a_check_id_replaces_the_default_check() -> None:
    rules = """
rules:
  - match: {agent: travel_agent}
    scorers:
      tool_error_check: {params: {count_recovered: false}}
      repetition_check:
        tools: {search_flights: {params: {max_identical_calls: 5}}}
"""
    results = make_stage(rules).score(one("strands", "tool_error_default"))
    ids = [r.scorer for r in results]
    assert ids == [
        "schema_check",
        "unknown_tool_check",
        "tool_error_check",
        "repetition_check",
        "repetition_check[search_flights]",
        "call_budget_check",
        "latency_check",
        "no_tool_needed_check",
        "forbidden_tool_check",
    ]
    (te,) = [r for r in results if r.scorer == "tool_error_check"]
    assert te.params["count_recovered"] is False
    # the failing search_flights was followed by get_weather, not by a search_flights: not recovered
    assert te.passed is False


def test_enabled_false_removes_a_default_check_for_matching_agents() -> None:
    rules = """
rules:
  - match: {agent: travel_agent}
    scorers: {tool_error_check: {enabled: false}}
"""
    stage = make_stage(rules)
    travel = [r.scorer for r in stage.score(one("strands", "tool_error_default"))]
    other = [r.scorer for r in stage.score(one("openai_agents_oi", "failing_tool"))]
    assert "tool_error_check" not in travel and len(travel) == len(DEFAULT_CHECKS) - 1
    assert "tool_error_check" in other


def test_unknown_check_kind_in_settings_is_a_config_error() -> None:
    with pytest.raises(ScorerConfigError, match="schema_chek"):
        make_stage(scoring={"checks": ["schema_chek"]})


def test_a_rule_scorer_of_unknown_kind_is_an_internal_error_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    # RuleSet.load rejects kinds the catalogue does not know; a rule set validated against another
    # registry can still hand the stage a kind it cannot build
    doc = yaml.safe_load("rules: [{scorers: {no_such_scorer: {}}}]")
    ruleset = RuleSet.from_mapping(doc, scorer_registry={"no_such_scorer": ToolErrorCheck})
    s = Settings()
    stage = ScoringStage(s, ruleset, Sampler(s.sampling), lambda: NOW)
    with caplog.at_level(logging.ERROR, logger="monitor.scoring.stage"):
        for run in all_fixture_runs()[:5]:
            bad = [r for r in stage.score(run) if r.scorer == "no_such_scorer"]
            assert [(r.status, r.reason, r.scorer_version) for r in bad] == [("error", "internal", 0)] * len(
                list(run.walk())
            )
            assert {r.run_id for r in bad} == {x.run_id for x in run.walk()}
    assert [r.message.split(":")[0] for r in caplog.records] == [
        "scorer no_such_scorer (kind no_such_scorer) cannot be built"
    ]


# --------------------------------------------------------------------------- errors


class ExplodingToolErrorCheck(ToolErrorCheck):
    """A check that raises (no ``kind`` of its own, so the catalogue does not register it)."""

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        raise RuntimeError("boom")


class RudeToolErrorCheck(ToolErrorCheck):
    """A scorer whose safe entry point itself raises (a misbehaving subclass)."""

    def score(self, run: Run, reference: Expectation | None) -> ScoreResult:  # type: ignore[override]
        raise KeyError("rude")


@pytest.mark.parametrize(("cls", "exc"), [(ExplodingToolErrorCheck, "RuntimeError"), (RudeToolErrorCheck, "KeyError")])
def test_a_scorer_that_raises_gives_error_internal_and_a_log_line(
    cls: type[ToolErrorCheck], exc: str, caplog: pytest.LogCaptureFixture
) -> None:
    registry = {k: i.cls for k, i in catalogue().items()} | {"tool_error_check": cls}
    stage = make_stage(registry=registry)
    run = one("strands", "tool_error_default")
    with caplog.at_level(logging.WARNING, logger="monitor.scoring.stage"):
        results = stage.score(run)
    (bad,) = [r for r in results if r.scorer == "tool_error_check"]
    assert (bad.status, bad.reason, bad.score, bad.passed) == ("error", "internal", None, None)
    assert bad.details["exception"] == exc
    assert (bad.trace_id, bad.run_id, bad.agent, bad.scored_at) == (
        run.trace_id,
        run.run_id,
        run.agent,
        NOW.isoformat(),
    )
    assert run.trace_id in caplog.text and "tool_error_check" in caplog.text
    assert len(results) == len(DEFAULT_CHECKS)  # the other checks still ran
    assert [r.scorer for r in results if r.status == "error"] == ["tool_error_check"]


# --------------------------------------------------------------------------- caching


class CountingSchemaCheck(SchemaCheck):
    built: ClassVar[int] = 0

    def __init__(self, *args: Any, **kw: Any) -> None:
        type(self).built += 1
        super().__init__(*args, **kw)


def test_scorer_instances_are_built_once_per_configuration() -> None:
    rules = """
rules:
  - match: {agent: travel_agent}
    scorers: {schema_check: {params: {undeclared_parameters: error}}}
  - match: {agent: weather_agent}
    scorers:
      schema_check:
        tools: {get_forecast: {params: {undeclared_parameters: ignore}}}
"""
    CountingSchemaCheck.built = 0
    registry = {k: i.cls for k, i in catalogue().items()} | {"schema_check": CountingSchemaCheck}
    stage = make_stage(rules, registry=registry)
    assert CountingSchemaCheck.built == 1  # the default check, at construction
    for _ in range(3):
        for run in all_fixture_runs():
            stage.score(run)
    # + travel override, + weather base (exclude get_forecast), + weather [get_forecast]
    assert CountingSchemaCheck.built == 4
    assert stage.instances_built == len(DEFAULT_CHECKS) + 3


# --------------------------------------------------------------------------- judges seam


class FakeSubmitter:
    def __init__(self, full: bool = False, broken: bool = False) -> None:
        self.full = full
        self.broken = broken
        self.calls: list[tuple[str, str, list[str]]] = []

    def submit(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool = False, expectation: object = None
    ) -> list[object]:
        if self.full:
            raise Backpressure("judge queue full")
        if self.broken:
            raise RuntimeError("queue bug")
        self.calls.append((run.trace_id, run.run_id, [s.id for s in specs]))
        return []


JUDGE_RULES = """
rules:
  - scorers: {judge_tool_selection: {}, judge_goal_accuracy: {params: {model: m}}}
"""


def test_judge_specs_go_to_the_submitter_and_produce_no_result_here() -> None:
    sub = FakeSubmitter()
    assert isinstance(sub, JudgeSubmitter)
    run = one("adk1", "agent_tool")
    results = make_stage(JUDGE_RULES, submitter=sub).score(run)
    assert not [r for r in results if r.scorer_kind.startswith("judge_")]
    assert sub.calls == [
        (run.trace_id, run.run_id, ["judge_tool_selection", "judge_goal_accuracy"]),
        (run.trace_id, run.children[0].run_id, ["judge_tool_selection", "judge_goal_accuracy"]),
    ]


def test_without_submitter_judges_are_not_applicable_judges_disabled() -> None:
    run = one("adk1", "sequential_content")
    judged = [r for r in make_stage(JUDGE_RULES).score(run) if r.scorer.startswith("judge_")]
    assert [(r.scorer, r.status, r.reason, r.scorer_version) for r in judged] == [
        ("judge_tool_selection", "not_applicable", "judges_disabled", 0),
        ("judge_goal_accuracy", "not_applicable", "judges_disabled", 0),
    ]
    assert judged[1].params == {"model": "m"} and len(judged[1].params_hash) == 12
    assert all(r.trace_id == run.trace_id and r.scored_at for r in judged)


def test_backpressure_propagates() -> None:
    with pytest.raises(Backpressure):
        make_stage(JUDGE_RULES, submitter=FakeSubmitter(full=True)).score(one("adk1", "sequential_content"))


def test_a_broken_submitter_gives_internal_errors() -> None:
    results = make_stage(JUDGE_RULES, submitter=FakeSubmitter(broken=True)).score(one("adk1", "sequential_content"))
    judged = [(r.scorer, r.status, r.reason) for r in results if r.scorer.startswith("judge_")]
    assert judged == [("judge_tool_selection", "error", "internal"), ("judge_goal_accuracy", "error", "internal")]


def test_per_scorer_rate_on_judges_with_always_if_flagged() -> None:
    sub = FakeSubmitter()
    stage = make_stage(JUDGE_RULES, sampling={"per_scorer": {"judge_goal_accuracy": 0.0}}, submitter=sub)
    clean = one("adk1", "sequential_content")
    failing = one("openai_agents_oi", "failing_tool")  # tool_error_check fails → flagged
    stage.score(clean)
    stage.score(failing)
    assert sub.calls == [
        (clean.trace_id, clean.run_id, ["judge_tool_selection"]),
        (failing.trace_id, failing.run_id, ["judge_tool_selection", "judge_goal_accuracy"]),
    ]
    sub.calls.clear()
    strict = make_stage(
        JUDGE_RULES,
        sampling={"per_scorer": {"judge_goal_accuracy": 0.0}, "always_if_flagged": False},
        submitter=sub,
    )
    strict.score(failing)
    assert sub.calls == [(failing.trace_id, failing.run_id, ["judge_tool_selection"])]


# --------------------------------------------------------------------------- sampling in the stage


def test_the_stage_scores_every_run_handed_in_whatever_the_run_rate() -> None:
    """Whether a run is scored is decided once, by the sample step (tests/steps); the stage never decides it again."""
    stage = make_stage(sampling={"rate": 0.0})
    assert len(stage.score(one("adk1", "sequential_content"))) == len(DEFAULT_CHECKS)


def test_nested_runs_are_scored_with_the_run_handed_in() -> None:
    run = one("adk1", "agent_tool")
    stage = make_stage(sampling={"rate": 0.0, "per_agent": {"weather_agent": 0.0}})
    assert {r.agent for r in stage.score(run)} == {"travel_agent", "weather_agent"}


def test_per_scorer_rate_on_a_check_runs_it_only_when_flagged() -> None:
    stage = make_stage(sampling={"per_scorer": {"schema_check": 0.0}})
    clean = [r.scorer for r in stage.score(one("adk1", "sequential_content"))]
    flagged = [r.scorer for r in stage.score(one("openai_agents_oi", "failing_tool"))]
    assert "schema_check" not in clean and len(clean) == len(DEFAULT_CHECKS) - 1
    assert flagged == DEFAULT_CHECKS  # rerun in pass 2, reported at its configured position


def test_has_reference() -> None:
    assert not has_reference(Expectation())
    assert not has_reference(Expectation(forbidden_tools=("x",), allowed_tools=("y",), reference_topics=("t",)))
    assert has_reference(Expectation(expected_calls=()))
    assert has_reference(Expectation(no_tools=True))
    assert has_reference(Expectation(expected_response="hi"))


# --------------------------------------------------------------------------- never raises


@st.composite
def mangled_runs(draw: st.DrawFn) -> Run:
    """A fixture run with calls shuffled and truncated (also in nested runs), steps dropped,
    definitions removed and statuses flipped at random."""

    def mangle(run: Run) -> Run:
        calls = list(draw(st.permutations(run.calls)))
        calls = calls[: draw(st.integers(0, len(calls)))]
        steps = run.steps[: draw(st.integers(0, len(run.steps)))]
        children = tuple(mangle(c) for c in run.children[: draw(st.integers(0, len(run.children)))])
        return dataclasses.replace(
            run,
            calls=tuple(calls),
            steps=steps,
            children=children,
            tools_offered=draw(st.sampled_from([run.tools_offered, None, ()])),
            status=draw(st.sampled_from(["ok", "error"])),
            start_ns=draw(st.sampled_from([run.start_ns, None])),
        )

    return mangle(draw(st.sampled_from(all_fixture_runs())))


FULL_RULES = (
    RULES.split("references:")[0]
    + """
  - scorers:
      tool_eval: {}
      trajectory_match: {}
      adk_tool_trajectory: {}
      tools_selected: {}
      ragas_tool_call_f1: {}
      judge_goal_accuracy: {}
      repetition_check: {tools: {get_weather: {params: {max_identical_calls: 1}}}}
    expect:
      expected_calls: [{name: get_weather, args: {city: Paris}}]
      max_identical_calls: 1
      run_latency_budget_ms: 1
"""
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(run=mangled_runs())
def test_the_stage_never_raises(run: Run) -> None:
    stage = _full_stage()
    results = stage.score(run)
    assert results
    for r in results:
        assert r.status in ("scored", "not_applicable", "error")
        assert r.trace_id == run.trace_id and r.run_id is not None and r.scored_at is not None
        if r.status == "error":
            raise AssertionError(f"unexpected scorer error on a well-formed run: {r}")


@cache
def _full_stage() -> ScoringStage:
    return make_stage(FULL_RULES)
