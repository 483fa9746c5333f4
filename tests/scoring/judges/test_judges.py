"""The five judges of SCORING.md §4.1–§4.5: golden renders on fixture runs, not-applicable inputs, and every
branch of each rule from verdict to score (hand-written verdicts, no model)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from monitor.scoring import catalogue
from monitor.scoring.base import NotScored
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.judges import JUDGES, Judge, JudgeConfig, Prepared, run_judge
from monitor.scoring.judges.argument_correctness import ArgumentCorrectnessJudge
from monitor.scoring.judges.goal_accuracy import GoalAccuracyJudge
from monitor.scoring.judges.tool_selection import ToolSelectionJudge
from monitor.scoring.judges.topic_adherence import TopicAdherenceJudge
from monitor.scoring.judges.trajectory_quality import TrajectoryQualityJudge, majority
from monitor.scoring.result import FailureKind, ScoreResult
from monitor.trajectory.model import ABSENT, Run
from tests.scoring.builders import run_with_steps
from tests.scoring.judges.helpers import Script, response
from tests.scoring.test_stage import one

GOLDEN = Path(__file__).parent / "golden"
CONFIG = JudgeConfig(model="claude-test")


def prepared(judge: Judge[Any], run: Run, ref: Expectation | None = None, config: JudgeConfig = CONFIG) -> Prepared:
    p = judge.prepare([run], ref, config)
    assert isinstance(p, Prepared), p
    return p


def na_reason(p: object) -> str:
    assert isinstance(p, NotScored), p
    return p.reason


def judged(judge: Judge[Any], run: Run, *verdicts: dict[str, Any], ref: Expectation | None = None) -> ScoreResult:
    return run_judge(judge, run, ref, CONFIG, Script([response(v) for v in verdicts]))


# --------------------------------------------------------------------------- registry and golden renders


def test_the_judges_are_the_registry_entries() -> None:
    for cls in JUDGES:
        info, major = catalogue.lookup(cls.kind), cls.major
        assert info.cls is cls and info.implemented and info.kind_class == "judge"
        assert info.version == cls.version and info.version // 100_000_000 == major
    assert catalogue.build("judge_tool_selection", {"model": "m"}).params_json["model"] == "m"


def test_inline_a_judge_is_judges_disabled() -> None:
    result = ToolSelectionJudge().score(run_with_steps([["a"]]), None)
    assert (result.status, result.reason) == ("not_applicable", "judges_disabled")


GOLDEN_CASES: dict[str, tuple[Judge[Any], tuple[str, str], Expectation | None]] = {
    "judge_tool_selection": (ToolSelectionJudge(), ("adk1", "sequential_content"), None),
    "judge_argument_correctness": (ArgumentCorrectnessJudge(), ("adk1", "sequential_content"), None),
    "judge_goal_accuracy": (
        GoalAccuracyJudge(),
        ("adk1", "tool_error_handled"),
        Expectation(reference_outcome="The user knows the weather in Paris and that the flight search failed."),
    ),
    "judge_topic_adherence": (
        TopicAdherenceJudge(),
        ("adk1", "sequential_content"),
        Expectation(reference_topics=("weather", "travel")),
    ),
    "judge_trajectory_quality": (TrajectoryQualityJudge(), ("adk1", "tool_error_handled"), None),
    "judge_trajectory_quality-rubric": (
        TrajectoryQualityJudge({"style": "rubric"}),
        ("adk1", "tool_error_handled"),
        Expectation(expected_calls=(ExpectedCall("search_flights"), ExpectedCall("get_weather", {"city": "Paris"}))),
    ),
}


@pytest.mark.parametrize("name", sorted(GOLDEN_CASES))
def test_golden_render(name: str) -> None:
    judge, (framework, fixture), ref = GOLDEN_CASES[name]
    body = prepared(judge, one(framework, fixture), ref).body
    again = prepared(judge, one(framework, fixture), ref).body
    text = json.dumps(body, indent=1, ensure_ascii=False) + "\n"
    assert json.dumps(again, indent=1, ensure_ascii=False) + "\n" == text  # same run → same bytes
    path = GOLDEN / f"{name}.json"
    if os.environ.get("UPDATE_GOLDEN") or not path.exists():
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8"), f"render changed: UPDATE_GOLDEN=1 to accept ({path})"


# --------------------------------------------------------------------------- §4.1 tool selection


def ev(i: int, tool: str, ok: bool) -> dict[str, Any]:
    return {"call_index": i, "tool": tool, "appropriate": ok, "reasoning": "r"}


def test_tool_selection_scores_like_mastra() -> None:
    run = run_with_steps([["a"], ["b"], ["c"], ["d"], ["e"], ["f"], ["g"], ["h"]], user_text="do a")
    evaluations = [ev(0, "a", True)] + [ev(i, n, False) for i, n in enumerate("bcdefgh", 1)]
    r = judged(ToolSelectionJudge(), run, {"evaluations": evaluations, "missing_tools": [], "reason": "one of 8"})
    assert r.score == 0.13 and r.passed is False and r.reason == "one of 8"  # 0.125 rounds half-up
    assert [i.kind for i in r.issues] == [FailureKind.UNNECESSARY_TOOL] * 7
    two = run_with_steps([["a"], ["b"], ["c"]], user_text="x")
    r = judged(
        ToolSelectionJudge(),
        two,
        {"evaluations": [ev(0, "a", True), ev(1, "b", True), ev(2, "c", False)], "missing_tools": ["z"], "reason": "r"},
    )
    assert r.score == 0.67 and r.passed  # missing tools do not lower a non-empty score
    (issue,) = r.issues
    assert (issue.kind, issue.tool, issue.call_index, issue.detail) == (
        FailureKind.WRONG_TOOL,
        "c",
        2,
        {"expected_tool": "z"},
    )
    r = judged(ToolSelectionJudge({"variant": "penalize_missing"}), two, r.details["verdict"])
    assert r.score == pytest.approx(2 / 4) and r.scorer == "judge_tool_selection:penalize_missing"


def test_tool_selection_without_calls() -> None:
    none = run_with_steps([], user_text="weather in Paris?")
    body = prepared(ToolSelectionJudge(), none).body
    assert "<called_tools>\nNone\n</called_tools>" in body["messages"][0]["content"][0]["text"]
    missed = judged(ToolSelectionJudge(), none, {"evaluations": [], "missing_tools": ["get_weather"], "reason": "r"})
    assert missed.score == 0.0 and missed.issues[0].kind == FailureKind.MISSING_TOOL
    clarified = {"evaluations": [], "missing_tools": [], "clarification_requested": True, "reason": "asked"}
    assert judged(ToolSelectionJudge(), none, clarified).score == 1.0
    r = ToolSelectionJudge().prepare([run_with_steps([["a"]], user_text=None)], None, CONFIG)
    assert getattr(r, "reason", None) == "no_user_input"


# --------------------------------------------------------------------------- §4.2 argument correctness


def verdict(i: int, v: str, parameter: str | None = None) -> dict[str, Any]:
    return {"call_index": i, "verdict": v, "parameter": parameter, "reason": None if v == "yes" else "wrong"}


def test_argument_correctness_keys_verdicts_by_call_index() -> None:
    run = run_with_steps([[("a", {"x": 1}), ("b", ABSENT)], [("c", {"y": 2})]], user_text="do")
    body = prepared(ArgumentCorrectnessJudge(), run).body
    text = body["messages"][0]["content"][0]["text"]
    assert '[0] a {"x":1}' in text and "[1] b" not in text and '[2] c {"y":2}' in text  # ABSENT args not rendered
    verdicts = [verdict(0, "yes"), verdict(0, "no"), verdict(1, "no"), verdict(7, "no"), verdict(2, "no", "y")]
    r = judged(ArgumentCorrectnessJudge(), run, {"verdicts": verdicts, "reason": "half"})
    assert r.score == 0.5 and r.passed and r.threshold == 0.5
    assert r.details["dropped_indices"] == [0, 1, 7]  # duplicate, not rendered, unknown
    (issue,) = r.issues
    assert (issue.kind, issue.call_index, issue.parameter) == (FailureKind.WRONG_VALUE, 2, "/y")
    strict = judged(ArgumentCorrectnessJudge({"strict_mode": True}), run, {"verdicts": verdicts, "reason": "x"})
    assert (strict.score, strict.threshold, strict.passed) == (0.0, 1.0, False)
    none_kept = judged(ArgumentCorrectnessJudge(), run, {"verdicts": [verdict(9, "yes")], "reason": "x"})
    assert (none_kept.status, none_kept.reason) == ("error", "judge_output_invalid")


def test_argument_correctness_not_applicable() -> None:
    no_calls = run_with_steps([], user_text="hi")
    r = run_judge(ArgumentCorrectnessJudge(), no_calls, None, CONFIG, Script([]))
    assert (r.status, r.reason) == ("not_applicable", "no_tool_calls")
    r = run_judge(ArgumentCorrectnessJudge({"empty_score": 1.0}), no_calls, None, CONFIG, Script([]))
    assert (r.status, r.score) == ("scored", 1.0)
    absent = run_with_steps([[("a", ABSENT)]], user_text="hi")
    r = run_judge(ArgumentCorrectnessJudge(), absent, None, CONFIG, Script([]))
    assert (r.status, r.reason) == ("not_applicable", "arguments_not_captured")


# --------------------------------------------------------------------------- §4.3 goal accuracy


def goal(v: int, desired: str = "the goal") -> dict[str, Any]:
    return {"user_goal": "g", "end_state": "e", "desired_outcome": desired, "reason": "because", "verdict": v}


def test_goal_accuracy_verdict_is_the_score() -> None:
    run = run_with_steps([["a"]], user_text="do it")
    assert judged(GoalAccuracyJudge(), run, goal(1)).score == 1.0
    r = judged(GoalAccuracyJudge(), run, goal(0))
    assert (r.score, r.passed, r.threshold) == (0.0, False, 1.0)
    assert r.issues[0].kind == FailureKind.GOAL_NOT_MET


def test_goal_accuracy_reference_mismatch_is_repaired() -> None:
    run = run_with_steps([["a"]], user_text="do it")
    ref = Expectation(reference_outcome="Booked  the flight.")
    send = Script([response(goal(1, "something else")), response(goal(1, "Booked the flight."))])
    r = run_judge(GoalAccuracyJudge(), run, ref, CONFIG, send)
    assert r.status == "scored" and r.judge is not None and r.judge.requests == 2
    assert "desired_outcome must be the exact text" in json.dumps(send.bodies[1]["messages"][-1])
    assert "<reference_outcome>" in send.bodies[0]["messages"][0]["content"][0]["text"]
    twice = Script([response(goal(1, "x")), response(goal(1, "y"))])
    assert run_judge(GoalAccuracyJudge(), run, ref, CONFIG, twice).reason == "judge_output_invalid"


def test_goal_accuracy_needs_input_and_output() -> None:
    assert na_reason(GoalAccuracyJudge().prepare([run_with_steps([], user_text=None)], None, CONFIG)) == (
        "no_user_input"
    )
    silent = run_with_steps([], user_text="hi", final_response=None)
    assert na_reason(GoalAccuracyJudge().prepare([silent], None, CONFIG)) == "no_output"


# --------------------------------------------------------------------------- §4.4 topic adherence


def topic(name: str, refused: bool, on_topic: bool) -> dict[str, Any]:
    return {"topic": name, "refused": refused, "on_topic": on_topic, "reason": "r"}


def test_topic_adherence_labels_feed_the_code_form() -> None:
    run = run_with_steps([], user_text="weather and stocks?")
    ref = Expectation(reference_topics=("weather",))
    labels = [topic("weather", False, True), topic("stocks", False, False), topic("rain", True, True)]
    r = judged(TopicAdherenceJudge(), run, {"topics": labels, "reason": "r"}, ref=ref)
    p = 1 / (2 + 1e-10)
    rec = 1 / (2 + 1e-10)
    assert r.score == pytest.approx(2 * p * rec / (p + rec + 1e-10))
    assert [i.kind for i in r.issues] == [FailureKind.OFF_TOPIC, FailureKind.OVER_REFUSAL]
    assert (r.details["tp"], r.details["fp"], r.details["fn"]) == (1, 1, 1)
    precision = judged(TopicAdherenceJudge({"mode": "precision"}), run, {"topics": labels, "reason": "r"}, ref=ref)
    assert precision.score == pytest.approx(p)
    empty = judged(TopicAdherenceJudge(), run, {"topics": [], "reason": "r"}, ref=ref)
    assert (empty.status, empty.reason) == ("not_applicable", "no_topics")
    zero = judged(TopicAdherenceJudge({"empty_score": 0.0}), run, {"topics": [], "reason": "r"}, ref=ref)
    assert zero.score == 0.0
    assert na_reason(TopicAdherenceJudge().prepare([run], None, CONFIG)) == "no_reference"


# --------------------------------------------------------------------------- §4.5 trajectory quality


def test_agentevals_style_boolean_continuous_and_choices() -> None:
    run = run_with_steps([["a"]], user_text="x")
    r = judged(TrajectoryQualityJudge(), run, {"reasoning": "fine", "score": True})
    assert (r.score, r.threshold, r.passed, r.reason) == (1.0, 1.0, True, "fine")
    r = judged(TrajectoryQualityJudge(), run, {"reasoning": "bad", "score": False})
    assert r.score == 0.0 and r.issues[0].kind == FailureKind.POOR_TRAJECTORY
    cont = TrajectoryQualityJudge({"continuous": True})
    r = judged(cont, run, {"reasoning": "ok", "score": 0.85})
    assert (r.score, r.threshold, r.passed) == (0.85, 0.8, True)
    choices = TrajectoryQualityJudge({"choices": [0.0, 0.5, 1.0]})
    assert prepared(choices, run).body["tools"][0]["input_schema"]["properties"]["score"] == {"enum": [0.0, 0.5, 1.0]}
    bad = judged(choices, run, {"reasoning": "x", "score": 0.7}, {"reasoning": "x", "score": 0.7})
    assert bad.reason == "judge_output_invalid"


def test_agentevals_with_reference_renders_it() -> None:
    run = run_with_steps([["a"]], user_text="x")
    ref = Expectation(expected_calls=(ExpectedCall("a", {"k": 1}),))
    body = prepared(TrajectoryQualityJudge(), run, ref).body
    assert "semantically equivalent" in body["system"][0]["text"]
    assert '<reference_trajectory>\n[0] a {"k":1}\n</reference_trajectory>' in body["messages"][0]["content"][0]["text"]


def rubric_verdict(**verdicts: str) -> dict[str, Any]:
    return {"rubrics": [{"id": k, "verdict": v, "rationale": "r"} for k, v in verdicts.items()], "reason": "r"}


def test_rubric_style_majority_with_ties_to_no() -> None:
    assert majority(["yes", "no"]) == "no" and majority(["yes", "yes", "no"]) == "yes" and majority([]) == "no"
    run = run_with_steps([["a"]], user_text="x")
    rubrics = [{"id": "r1", "text": "one"}, {"id": "r2", "text": "two", "kind": "missing_tool"}]
    judge = TrajectoryQualityJudge({"style": "rubric", "rubrics": rubrics, "num_samples": 2})
    r = judged(judge, run, rubric_verdict(r1="yes", r2="yes"), rubric_verdict(r1="yes", r2="no", zz="no"))
    assert r.score == 0.5 and r.threshold == 0.8 and r.judge is not None and r.judge.requests == 2
    assert r.details["rubric_verdicts"] == {"r1": "yes", "r2": "no"}  # 1–1 tie → no; unknown id dropped
    assert [(i.kind, i.detail["rubric"]) for i in r.issues] == [(FailureKind.MISSING_TOOL, "r2")]
    three = TrajectoryQualityJudge({"style": "rubric", "rubrics": rubrics, "num_samples": 3})
    r = judged(three, run, rubric_verdict(r1="no"), rubric_verdict(r1="yes"), rubric_verdict(r1="yes"))
    assert r.score == 1.0 and r.details["rubric_verdicts"] == {"r1": "yes"}  # r2 never judged: left out
    # the verdict says which rubric text it answered
    edited = [{"id": "r1", "text": "one, edited"}, rubrics[1]]
    again = TrajectoryQualityJudge({"style": "rubric", "rubrics": edited, "num_samples": 1})
    r2 = judged(again, run, rubric_verdict(r1="yes"))
    assert len(r.details["rubric_version"]) == 12 and r2.details["rubric_version"] != r.details["rubric_version"]


def test_rubric_style_reads_the_expectation_rubrics_then_the_defaults() -> None:
    run = run_with_steps([["a"]], user_text="x")
    judge = TrajectoryQualityJudge({"style": "rubric"})
    text = prepared(judge, run, Expectation(rubrics=(("mine", "Be brief."),))).body["messages"][0]["content"][0]
    assert "<rubrics>\nmine: Be brief.\n</rubrics>" in text["text"]
    default = prepared(judge, run).body["messages"][0]["content"][0]["text"]
    assert "needed_tools_called:" in default and "errors_handled:" in default
    r = judged(judge, run, rubric_verdict(unknown="no"))
    assert (r.status, r.reason) == ("error", "judge_output_invalid")
