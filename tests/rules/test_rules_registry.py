"""Rules files name scorers of the one registry: a kind it does not know (judges included) is a
configuration error when the rules load, with a did-you-mean, and so are unknown parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from monitor.rules import RulesConfigError, RuleSet
from monitor.rules.config import RulesProblem


def problems_of(obj: Any) -> list[RulesProblem | str]:
    with pytest.raises(RulesConfigError) as info:
        RuleSet.from_mapping(obj)
    return list(info.value.issues)


@pytest.mark.parametrize(
    ("scorers", "key", "problem", "fix"),
    [
        ({"shema_check": {}}, "rules[0].scorers.shema_check", "unknown scorer kind 'shema_check'", "'schema_check'"),
        (
            {"strict": {"kind": "shema_check"}},
            "rules[0].scorers.strict.kind",
            "unknown scorer kind 'shema_check'",
            "'schema_check'",
        ),
        (
            {"tool_eval:lit": {"params": {"variant": "literal"}}, "judge_goal_acuracy": {}},
            "rules[0].scorers.judge_goal_acuracy",
            "unknown scorer kind 'judge_goal_acuracy'",
            "'judge_goal_accuracy'",
        ),
        (["repetition_check", "latency_chek"], "rules[0].scorers.latency_chek", "unknown", "'latency_check'"),
    ],
)
def test_a_misspelled_kind_is_an_error_at_load_with_did_you_mean(
    scorers: Any, key: str, problem: str, fix: str
) -> None:
    (issue,) = problems_of({"rules": [{"match": {"agent": "a"}, "scorers": scorers}]})
    assert isinstance(issue, RulesProblem)
    assert issue.key == key and problem in issue.problem
    assert issue.fix is not None and issue.fix.startswith("did you mean") and fix in issue.fix
    assert str(issue) == f"{issue.key}: {issue.problem}; {issue.fix}"


def test_a_kind_with_no_close_match_points_at_the_catalogue() -> None:
    (issue,) = problems_of({"rules": [{"scorers": {"zzz": {}}}]})
    assert isinstance(issue, RulesProblem) and issue.fix == "use a kind that `monitor scorers` lists"


def test_registered_judges_and_reference_scorers_load() -> None:
    rs = RuleSet.from_mapping(
        {
            "rules": [
                {
                    "scorers": {
                        "judge_tool_selection": {"params": {"model": "m"}},
                        "judge_goal_accuracy": {"threshold": 1.0},
                        "tool_eval:literal": {"params": {"variant": "literal"}},
                    }
                }
            ]
        }
    )
    assert [(s.id, s.kind) for s in rs.scorers_for(None)] == [
        ("judge_tool_selection", "judge_tool_selection"),
        ("judge_goal_accuracy", "judge_goal_accuracy"),
        ("tool_eval:literal", "tool_eval"),
    ]


def test_parameters_are_checked_for_every_kind() -> None:
    issues = problems_of(
        {
            "rules": [
                {"scorers": {"tool_eval": {"params": {"varient": "literal"}}}},
                {"scorers": {"judge_goal_accuracy": {"params": {"threshold": 3}}}},
                {"scorers": {"judge_goal_accuracy": {"tools": {"x": {}}}}},
            ]
        }
    )
    text = [str(i) for i in issues]
    assert text[0].startswith("rules[0].scorers.tool_eval.params: unknown parameter 'varient'")
    assert "did you mean 'variant'?" in text[0]
    assert text[1].startswith("rules[1].scorers.judge_goal_accuracy.params: parameter 'threshold' = 3 is invalid")
    assert text[2].startswith("rules[2].scorers.judge_goal_accuracy.tools: scorer kind 'judge_goal_accuracy' has no")


def test_a_rules_file_with_a_misspelled_scorer_does_not_load(tmp_path: Path) -> None:
    path = tmp_path / "rules.yaml"
    path.write_text("rules:\n  - match: {agent: planner}\n    scorers: {shema_check: {}}\n")
    with pytest.raises(RulesConfigError) as info:
        RuleSet.load(path)
    assert str(path) in str(info.value)
    assert info.value.problems == (
        "rules[0].scorers.shema_check: unknown scorer kind 'shema_check'; did you mean 'schema_check'?",
    )
