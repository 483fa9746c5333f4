"""``adk_tool_trajectory``: Google ADK ``tool_trajectory_avg_score`` (SCORING.md §2.4).

Peer: google-adk 2.13.0, ``google/adk/evaluation/trajectory_evaluator.py``
(``TrajectoryEvaluator._are_tool_calls_{exact,in_order,any_order}_match``),
``eval_metrics.py`` (``ToolTrajectoryCriterion``, ``_coerce_match_type``), ``evaluator.py``
(``_validate_invocation_lengths``), ``agent_evaluator.py`` (pooling over runs, ``NUM_RUNS``).

Per turn the score is 1.0 or 0.0; a case is the mean over turns (``turn_mode = "mean"``), and
over runs × turns with :meth:`~monitor.scoring.base.Scorer.score_pooled`. An expected call
without ``args`` has ``None``, which equals only ``None`` (ADK ``FunctionCall.args``).

Decisions: a turn whose expectation has no ``expected_calls`` is ``not_applicable/no_reference``
(left out of the mean); issues (§2.0, args compared unless ``ignore_args``) are produced for a
failed turn only, and ``IN_ORDER``/``ANY_ORDER`` drop ``unnecessary_tool`` (extra calls allowed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import pydantic

from monitor.scoring.base import ArgumentParams, Evaluation, Need, NotScored, Outcome, Scorer, Threshold
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import explain
from monitor.scoring.result import FailureKind, Issue
from monitor.trajectory.model import ABSENT, Run, ToolCall
from monitor.trajectory.view import CallsSource

__all__ = ["AdkToolTrajectory", "AdkToolTrajectoryParams"]

MatchType = Literal["EXACT", "IN_ORDER", "ANY_ORDER"]
_BY_INT = {0: "EXACT", 1: "IN_ORDER", 2: "ANY_ORDER"}


class AdkToolTrajectoryParams(ArgumentParams):
    threshold: Threshold = 1.0
    match_type: MatchType = "EXACT"
    ignore_args: bool = False
    calls_source: CallsSource = "selected"

    @pydantic.field_validator("match_type", mode="before")
    @classmethod
    def _coerce(cls, value: Any) -> Any:
        """ADK ``_coerce_match_type``: trimmed, case-insensitive, ``-``/space → ``_``; ints 0/1/2."""
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return _BY_INT.get(value, value)
        if isinstance(value, str):
            return value.strip().upper().replace("-", "_").replace(" ", "_")
        return value


class AdkToolTrajectory(Scorer[AdkToolTrajectoryParams]):
    """ADK TrajectoryEvaluator: EXACT / IN_ORDER / ANY_ORDER per turn, mean over turns."""

    kind: ClassVar[str] = "adk_tool_trajectory"
    version: ClassVar[int] = 1
    Params = AdkToolTrajectoryParams
    needs = frozenset({Need.REFERENCE, Need.ARGUMENTS})
    turn_mode = "mean"
    summary = "Google ADK tool_trajectory_avg_score: EXACT / IN_ORDER / ANY_ORDER, mean over turns (§2.4)"

    def variant(self) -> str | None:
        mt = self.params.match_type
        return None if mt == "EXACT" else mt.lower()

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        """Score first (ADK's loop over the two lists), explain only a failed turn."""
        if reference is None or reference.expected_calls is None:
            return NotScored.na("no_reference")
        actual = self.calls(run)
        exp = reference.expected_calls
        ignore = self.params.ignore_args
        degraded: str | None = None
        if not ignore:
            gate = self.arguments_gate(actual)
            if gate is not None:
                if isinstance(gate, NotScored):
                    return gate
                ignore, degraded = True, "names_only"

        mt = self.params.match_type
        if mt == "EXACT":
            ok = _exact(actual, exp, ignore)
        elif mt == "IN_ORDER":
            ok = _in_order(actual, exp, ignore)
        else:
            ok = _any_order(actual, exp, ignore)

        issues: tuple[Issue, ...] = ()
        if not ok:
            matcher = None if ignore else _args_equal
            found = explain(actual, exp, matcher, exact_args=not ignore, order_failed=mt != "ANY_ORDER").issues
            if mt != "EXACT":
                found = tuple(i for i in found if i.kind != FailureKind.UNNECESSARY_TOOL)
            issues = found
        return Outcome(
            1.0 if ok else 0.0,
            None,
            issues,
            {"match_type": mt, "actual_calls": len(actual), "expected_calls": len(exp)},
            degraded,
        )


def _args_equal(a: ToolCall, e: ExpectedCall) -> bool:
    """ADK's argument test: ``FunctionCall.args`` equality, an unspecified expected ``args`` being None."""
    return bool(a.args == (None if e.args is ABSENT else e.args))


def _exact(actual: Sequence[ToolCall], exp: Sequence[ExpectedCall], ignore: bool) -> bool:
    """``_are_tool_calls_exact_match``: same length, position by position same name (and args)."""
    if len(actual) != len(exp):
        return False
    for a, e in zip(actual, exp, strict=True):
        if a.name != e.name:
            return False
        if not ignore and a.args != (None if e.args is ABSENT else e.args):
            return False
    return True


def _in_order(actual: Sequence[ToolCall], exp: Sequence[ExpectedCall], ignore: bool) -> bool:
    """``_are_tool_calls_in_order_match``: one pass over the actual calls, advancing in the expected ones."""
    if not exp:
        return True
    if not actual:
        return False
    k = 0
    want = exp[0]
    for a in actual:
        if a.name == want.name and (ignore or a.args == (None if want.args is ABSENT else want.args)):
            k += 1
            if k == len(exp):
                return True
            want = exp[k]
    return False


def _any_order(actual: Sequence[ToolCall], exp: Sequence[ExpectedCall], ignore: bool) -> bool:
    """``_are_tool_calls_any_order_match``: each expected call removes the first remaining match."""
    if not exp:
        return True
    if not actual:
        return False
    remaining = list(actual)
    for e in exp:
        name = e.name
        args = None if e.args is ABSENT else e.args
        for i, a in enumerate(remaining):
            if a.name == name and (ignore or a.args == args):
                del remaining[i]
                break
        else:
            return False
    return True
