"""``call_issue``: the one builder of an issue about a call (SCORING.md §5.2)."""

from __future__ import annotations

import ast
from pathlib import Path

from monitor.scoring.result import FailureKind, Issue, NoteKind, Severity, call_issue
from monitor.trajectory.model import ToolCall

SCORING = Path(__file__).resolve().parents[2] / "monitor" / "scoring"


def test_the_call_gives_tool_index_and_id() -> None:
    call = ToolCall(index=3, name="search", call_id="call_1", args={"q": 1})
    issue = call_issue(FailureKind.WRONG_VALUE, call, parameter="/q", expected=2, actual=1, detail={"d": 1})
    assert issue == Issue(
        FailureKind.WRONG_VALUE,
        Severity.ERROR,
        tool="search",
        parameter="/q",
        call_index=3,
        call_id="call_1",
        expected=2,
        actual=1,
        detail={"d": 1},
    )
    assert issue.turn is None


def test_severity_and_the_tool_can_be_given() -> None:
    call = ToolCall(index=0, name="fetch")
    note = call_issue(NoteKind.TOOL_SCHEMA_INVALID, call, severity=Severity.INFO, detail="bad schema")
    assert (note.severity, note.tool, note.call_index, note.call_id) == (Severity.INFO, "fetch", 0, None)
    assert call_issue(FailureKind.EXCESS_CALLS, call, tool=None).tool is None  # a budget on the whole run
    assert call_issue(FailureKind.WRONG_ORDER, call, tool="search").tool == "search"


def test_no_scorer_builds_a_call_issue_by_hand() -> None:
    """Every ``Issue(...)`` in monitor/scoring that names a call index goes through ``call_issue``."""
    offenders = []
    for path in sorted(SCORING.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Issue"):
                continue
            if any(kw.arg in ("call_index", "call_id") or kw.arg is None for kw in node.keywords):
                offenders.append(f"{path.relative_to(SCORING)}:{node.lineno}")
    assert not offenders, offenders
