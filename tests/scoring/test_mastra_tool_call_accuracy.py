"""Conformance tests for ``mastra_tool_call_accuracy`` (SCORING.md §2.7, @mastra/evals 1.10.2)."""

from __future__ import annotations

import pytest

from monitor.scoring.base import ScorerConfigError
from monitor.scoring.reference.mastra_tool_call_accuracy import MastraToolCallAccuracy
from tests.scoring.builders import run_with_calls


def score(names: list, **params: object) -> float | None:
    return MastraToolCallAccuracy(params).score(run_with_calls(names), None).score


@pytest.mark.parametrize(
    ("names", "params", "want"),
    [
        ([], {"expected_tool_order": []}, 0.0),
        (["a"], {"expected_tool_order": []}, 0.0),  # empty order given, no expected tool → 0
        (["weather", "search", "weather"], {"expected_tool_order": ["search", "weather"]}, 0.0),
        (["a", "b", "a"], {"expected_tool_order": ["a", "b", "a"]}, 0.0),
        (["a", "b", "a"], {"expected_tool_order": ["a", "b", "a"], "strict_mode": True}, 1.0),
        (["a", "x", "b"], {"expected_tool_order": ["a", "b"]}, 1.0),
        (["a", "x", "b"], {"expected_tool_order": ["a", "b"], "strict_mode": True}, 0.0),
        (["x", "a"], {"expected_tool": "a"}, 1.0),
        (["x", "a"], {"expected_tool": "a", "strict_mode": True}, 0.0),
        (["a"], {"expected_tool": "a", "strict_mode": True}, 1.0),
        (["b"], {"expected_tool": "a"}, 0.0),
    ],
)
def test_rules(names: list, params: dict, want: float) -> None:
    assert score(names, **params) == want


def test_construction_requires_an_expectation() -> None:
    with pytest.raises(ScorerConfigError):
        MastraToolCallAccuracy({})
    with pytest.raises(ScorerConfigError):
        MastraToolCallAccuracy({"expected_tool": ""})
    MastraToolCallAccuracy({"expected_tool_order": []})


def test_input_output_checks() -> None:
    s = MastraToolCallAccuracy({"expected_tool": "a"})
    assert s.score(run_with_calls(["a"], user_text=None), None).reason == "no_user_input"
    assert s.score(run_with_calls([], final_response=None), None).reason == "no_output"
    r = s.score(run_with_calls([], final_response=""), None)
    assert r.status == "scored" and r.score == 0.0


def test_issues() -> None:
    s = MastraToolCallAccuracy({"expected_tool_order": ["a", "b"]})
    assert [str(i.kind) for i in s.score(run_with_calls(["b", "a"]), None).issues] == ["wrong_order"]
    assert [str(i.kind) for i in s.score(run_with_calls(["a"]), None).issues] == ["missing_tool"]
    strict = MastraToolCallAccuracy({"expected_tool": "a", "strict_mode": True})
    assert [str(i.kind) for i in strict.score(run_with_calls(["a", "z"]), None).issues] == ["unnecessary_tool"]
