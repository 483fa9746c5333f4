"""Conformance tests for seed-001 ``tools_selected`` / ``tools_avoided`` / ``tool_selection_f1`` (SCORING.md §2.2)."""

from __future__ import annotations

import pytest

from monitor.scoring.expectation import Expectation
from monitor.scoring.reference.tool_selection import ToolsAvoided, ToolSelectionF1, ToolsSelected
from tests.scoring.builders import run_with_calls, run_with_steps


def ref(
    category: str, expected: tuple[str, ...] | None = None, forbidden: tuple[str, ...] | None = None
) -> Expectation:
    return Expectation(category=category, expected_tools=expected, forbidden_tools=forbidden)  # type: ignore[arg-type]


def test_tools_selected() -> None:
    s = ToolsSelected()
    assert s.score(run_with_calls(["readFile"]), ref("golden", ("readFile",))).score == 1.0
    assert s.score(run_with_calls(["listFiles"]), ref("golden", ("readFile",))).score == 0.0
    assert s.score(run_with_calls([]), ref("golden", ())).score == 1.0
    assert s.score(run_with_calls([]), ref("secondary", ("a",))).reason == "no_rule"
    assert ToolsSelected({"gated_out_score": 1.0}).score(run_with_calls([]), ref("secondary", ("a",))).score == 1.0
    assert ToolsSelected({"gate_by_category": False}).score(run_with_calls([]), ref("secondary", ("a",))).score == 0.0


def test_tools_avoided() -> None:
    s = ToolsAvoided()
    assert s.score(run_with_calls(["deleteFile"]), ref("negative", forbidden=("deleteFile",))).score == 0.0
    assert s.score(run_with_calls(["readFile"]), ref("negative", forbidden=("deleteFile",))).score == 1.0
    assert s.score(run_with_calls(["deleteFile"]), ref("negative")).score == 1.0


@pytest.mark.parametrize(
    ("names", "expected", "variant", "want", "raw"),
    [
        (["listFiles", "listFiles", "readFile"], ("listFiles",), "literal", 1.0, 4 / 3),
        (["listFiles", "listFiles", "readFile"], ("listFiles",), "distinct", 2 / 3, 2 / 3),
        ([], (), "distinct", 1.0, None),
        (["a"], (), "distinct", 0.5, None),
        ([], ("a",), "distinct", 0.0, 0.0),
        (["a", "b"], ("a", "c"), "distinct", 0.5, 0.5),
    ],
)
def test_f1(names: list, expected: tuple, variant: str, want: float, raw: float | None) -> None:
    r = ToolSelectionF1({"variant": variant}).score(run_with_calls(names), ref("secondary", expected))
    assert r.score == pytest.approx(want)
    if raw is not None:
        assert r.details["raw"] == pytest.approx(raw)


def test_first_step_scope() -> None:
    run = run_with_steps([["readFile"], ["deleteFile"]])
    r = ToolsAvoided({"selection_scope": "first_step"}).score(run, ref("negative", forbidden=("deleteFile",)))
    assert r.score == 1.0
    assert ToolsAvoided().score(run, ref("negative", forbidden=("deleteFile",))).score == 0.0


def test_thresholds() -> None:
    r = ToolSelectionF1().score(run_with_calls(["a", "b"]), ref("secondary", ("a", "c")))
    assert r.threshold == 0.5 and r.passed is True
