"""Seed-001 tool selection by category: ``tools_selected``, ``tools_avoided``, ``tool_selection_f1``.

Peer: ``shared/seeds/001_0b4ca57cb2feb9bb.txt``, ``evals/evaluators.ts`` (``toolsSelected``,
``toolsAvoided``, ``toolSelectionScore``) and ``file-tools.eval.ts`` (the category gate of the
Laminar wrapper, which returns 1 for a gated-out case). SCORING.md §2.2.

``selection_scope: first_step`` keeps calls with ``step == 0`` of the run itself (the seed reads
the first model response only); ``run`` (default) keeps every call of the view.

Decisions: the expected names are ``expected_tools``, else the names of ``expected_calls``; a run
without expectation is ``not_applicable/no_reference``; with the gate on and a category other
than the scorer's, ``not_applicable/no_rule`` (or ``gated_out_score`` when set).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer, Threshold, ViewParams
from monitor.scoring.expectation import Category, Expectation, ExpectedCall
from monitor.scoring.explain import explain
from monitor.scoring.result import FailureKind, Issue, call_issue
from monitor.trajectory.model import Run, ToolCall

__all__ = [
    "SelectionParams",
    "ToolSelectionF1",
    "ToolSelectionF1Params",
    "ToolsAvoided",
    "ToolsSelected",
]


class SelectionParams(ViewParams):
    gate_by_category: bool = True
    gated_out_score: Threshold | None = None
    selection_scope: Literal["run", "first_step"] = "run"
    threshold: Threshold = 1.0


class ToolSelectionF1Params(SelectionParams):
    variant: Literal["distinct", "literal"] = "distinct"
    threshold: Threshold = 0.5


class _Selection(Scorer[Any]):
    category: ClassVar[Category]
    turn_mode = "mean"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        if reference is None:
            return NotScored.na("no_reference")
        if self.params.gate_by_category and reference.category != self.category:
            if self.params.gated_out_score is not None:
                return Outcome(self.params.gated_out_score, details={"gated_out": True})
            return NotScored.na("no_rule")
        calls = self.calls(run)
        if self.params.selection_scope == "first_step":
            calls = tuple(c for c in calls if c.step == 0 and c.depth == 0)
        return self.select(calls, reference)

    def select(self, calls: Sequence[ToolCall], reference: Expectation) -> Evaluation:
        raise NotImplementedError

    @staticmethod
    def expected_names(reference: Expectation) -> list[str]:
        if reference.expected_tools is not None:
            return list(reference.expected_tools)
        return [c.name for c in reference.expected_calls or ()]


class ToolsSelected(_Selection):
    """Seed-001 ``toolsSelected``: 1 iff every expected tool was selected (golden prompts)."""

    kind: ClassVar[str] = "tools_selected"
    version: ClassVar[int] = 1
    Params = SelectionParams
    category = "golden"
    needs = frozenset({Need.REFERENCE})
    summary = "seed-001 toolsSelected: all expected tools selected, golden category (§2.2)"

    def select(self, calls: Sequence[ToolCall], reference: Expectation) -> Evaluation:
        expected = self.expected_names(reference)
        selected = {c.name for c in calls}
        missing = [n for n in dict.fromkeys(expected) if n not in selected]
        issues = tuple(Issue(FailureKind.MISSING_TOOL, tool=n) for n in missing)
        return Outcome(0.0 if missing else 1.0, issues=issues, details={"selected": [c.name for c in calls]})


class ToolsAvoided(_Selection):
    """Seed-001 ``toolsAvoided``: 0 iff a forbidden tool was selected (negative prompts)."""

    kind: ClassVar[str] = "tools_avoided"
    version: ClassVar[int] = 1
    Params = SelectionParams
    category = "negative"
    needs = frozenset({Need.REFERENCE})
    summary = "seed-001 toolsAvoided: no forbidden tool selected, negative category (§2.2)"

    def select(self, calls: Sequence[ToolCall], reference: Expectation) -> Evaluation:
        forbidden = set(reference.forbidden_tools or ())
        hits = [c for c in calls if c.name in forbidden]
        issues = tuple(call_issue(FailureKind.FORBIDDEN_TOOL, c) for c in hits)
        return Outcome(0.0 if hits else 1.0, issues=issues, details={"selected": [c.name for c in calls]})


class ToolSelectionF1(_Selection):
    """Seed-001 ``toolSelectionScore``: F1 of selected vs expected names (secondary prompts)."""

    kind: ClassVar[str] = "tool_selection_f1"
    version: ClassVar[int] = 1
    Params = ToolSelectionF1Params
    category = "secondary"
    needs = frozenset({Need.REFERENCE})
    summary = "seed-001 toolSelectionScore: precision/recall F1 of names, secondary category (§2.2)"

    def variant(self) -> str | None:
        return "literal" if self.params.variant == "literal" else None

    def select(self, calls: Sequence[ToolCall], reference: Expectation) -> Evaluation:
        names = [c.name for c in calls]
        expected = self.expected_names(reference)
        if not expected:
            issues = tuple(call_issue(FailureKind.UNNECESSARY_TOOL, c) for c in calls)
            return Outcome(0.5 if names else 1.0, issues=issues, details={"selected": names})
        ex, sd = set(expected), set(names)
        hits = sum(1 for n in names if n in ex) if self.params.variant == "literal" else len(sd & ex)
        precision = hits / len(sd) if sd else 0.0
        recall = hits / len(ex)
        raw = 0.0 if precision + recall == 0 else (2 * precision * recall) / (precision + recall)
        score = min(1.0, raw)
        issues_: tuple[Issue, ...] = ()
        if raw < 1.0:
            issues_ = explain(calls, [ExpectedCall(n) for n in dict.fromkeys(expected)]).issues
        return Outcome(
            score,
            issues=issues_,
            details={"precision": precision, "recall": recall, "raw": raw, "hits": hits, "selected": names},
        )
