"""``mastra_tool_call_accuracy``: Mastra ``createToolCallAccuracyScorerCode`` (SCORING.md §2.7).

Peer: @mastra/evals 1.10.2, ``dist/scorers/prebuilt/index.js`` (source
``src/scorers/code/tool-call-accuracy/index.ts``: ``checkToolOrder``, ``calculateAccuracy``,
the preprocess input/output check) and ``dist/scorers/utils.js`` (``extractToolCalls``: tool
invocations in states ``call``, ``result``, ``output-error`` = our ``auto`` view).

Reproduced quirks: the expectations are scorer parameters (JavaScript truthiness decides whether
one is given: ``expected_tool_order: []`` counts, ``expected_tool: ""`` does not); no calls → 0
even for an empty order; non-strict order uses the **first occurrence** of each expected name,
so a repeated name in the order always fails; Mastra throws without input or output messages,
here ``not_applicable/no_user_input`` and ``not_applicable/no_output``.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pydantic

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer, Threshold, ViewParams
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, call_issue
from monitor.trajectory.model import Run

__all__ = ["MastraToolCallAccuracy", "MastraToolCallAccuracyParams", "mastra_accuracy"]


class MastraToolCallAccuracyParams(ViewParams):
    expected_tool: str | None = None
    strict_mode: bool = False
    expected_tool_order: list[str] | None = None
    threshold: Threshold = 1.0

    @pydantic.model_validator(mode="after")
    def _one_expectation(self) -> MastraToolCallAccuracyParams:
        if not self.expected_tool and self.expected_tool_order is None:
            raise ValueError("give 'expected_tool' (non-empty) or 'expected_tool_order' (Mastra requires one)")
        return self


def _check_order(actual: list[str], order: list[str], strict: bool) -> bool:
    if strict:
        return actual == order
    indices: list[int] = []
    for name in order:
        if name not in actual:
            return False
        indices.append(actual.index(name))
    return all(indices[i] > indices[i - 1] for i in range(1, len(indices)))


def mastra_accuracy(actual: list[str], expected_tool: str | None, strict: bool, order: list[str] | None) -> float:
    """Mastra ``calculateAccuracy``."""
    if not actual:
        return 0.0
    if order:
        return 1.0 if _check_order(actual, order, strict) else 0.0
    if not expected_tool:
        return 0.0
    if strict:
        return 1.0 if len(actual) == 1 and actual[0] == expected_tool else 0.0
    return 1.0 if expected_tool in actual else 0.0


class MastraToolCallAccuracy(Scorer[MastraToolCallAccuracyParams]):
    """Mastra code tool-call accuracy: expected tool present (or alone), or expected order."""

    kind: ClassVar[str] = "mastra_tool_call_accuracy"
    version: ClassVar[int] = 1
    Params = MastraToolCallAccuracyParams
    needs = frozenset({Need.USER_INPUT, Need.FINAL_RESPONSE})
    turn_mode = "mean"
    summary = "Mastra createToolCallAccuracyScorerCode: expected tool / first-occurrence order (§2.7)"

    def variant(self) -> str | None:
        return "strict" if self.params.strict_mode else None

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        if not run.user_input:
            return NotScored.na("no_user_input")
        calls = self.calls(run)
        if not calls and run.final_response is None:
            return NotScored.na("no_output")
        names = [c.name for c in calls]
        p = self.params
        score = mastra_accuracy(names, p.expected_tool, p.strict_mode, p.expected_tool_order)
        issues: list[Issue] = []
        if score < 1.0:
            wanted = p.expected_tool_order if p.expected_tool_order else ([p.expected_tool] if p.expected_tool else [])
            missing = [n for n in dict.fromkeys(wanted) if n not in names]
            issues.extend(Issue(FailureKind.MISSING_TOOL, tool=n) for n in missing)
            if not missing and p.expected_tool_order:
                issues.append(
                    Issue(FailureKind.WRONG_ORDER, expected=list(p.expected_tool_order), actual=names, tool=None)
                )
            if p.strict_mode and not missing:
                allowed = set(wanted)
                extras = [c for c in calls if c.name not in allowed]
                if not p.expected_tool_order and p.expected_tool in names and len(names) > 1:
                    first = names.index(p.expected_tool)
                    extras = [c for k, c in enumerate(calls) if k != first]
                issues.extend(call_issue(FailureKind.UNNECESSARY_TOOL, c) for c in extras)
        details: dict[str, Any] = {"actual_tools": names}
        return Outcome(score, issues=tuple(issues), details=details)
