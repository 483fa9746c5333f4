"""``ragas_tool_call_accuracy`` and ``ragas_tool_call_f1``: Ragas ``ToolCallAccuracy`` / ``ToolCallF1``.

Peer: ragas 0.4.3, ``ragas/metrics/_tool_call_accuracy.py`` (``_multi_turn_ascore``,
``_get_arg_score``, ``_sorted_key_for_tool_call``, ``is_sequence_aligned``; default
``arg_comparison_metric`` = ``ExactMatch`` in ``ragas/metrics/_string.py``) and
``ragas/metrics/_tool_call_f1.py`` (``_make_hashable``, ``_multi_turn_ascore``). SCORING.md §2.5,
§2.6.

Both score the whole conversation as one list of calls (``turn_mode = "concatenate"``: Ragas
collects ``AIMessage.tool_calls`` across ``user_input``), view ``selected`` by default.

Decisions: Ragas' ``ToolCall.args`` is a dict, so predicted arguments that are not a JSON object
(:class:`~monitor.trajectory.model.Malformed`, lists) count as ``{}`` in ``ToolCallAccuracy``
(no credit for any reference key) and as their own value in ``ToolCallF1`` (never equal to a
dict); an unspecified reference ``args`` is ``{}`` (§6.5). With ``on_missing_arguments:
names_only`` the argument score of a same-name pair is 1.0 (accuracy) and calls are keyed by name
only (F1). Issues (§2.0) are produced when the score is below 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from monitor.scoring.base import (
    ArgumentParams,
    Evaluation,
    Need,
    NotScored,
    Outcome,
    Scorer,
    Threshold,
    conversation_calls,
    hashable,
    merge_expectations,
)
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import explain
from monitor.scoring.reference._common import as_dict, expected_calls_of, peer_args
from monitor.trajectory.model import Run, ToolCall
from monitor.trajectory.view import CallsSource

__all__ = [
    "RagasToolCallAccuracy",
    "RagasToolCallAccuracyParams",
    "RagasToolCallF1",
    "RagasToolCallF1Params",
    "ragas_arg_score",
]


class RagasToolCallAccuracyParams(ArgumentParams):
    strict_order: bool = True
    threshold: Threshold = 1.0
    calls_source: CallsSource = "selected"


class RagasToolCallF1Params(ArgumentParams):
    threshold: Threshold = 1.0
    calls_source: CallsSource = "selected"


def ragas_arg_score(pred: dict[str, Any], ref: dict[str, Any]) -> float:
    """Ragas ``_get_arg_score`` with ``ExactMatch``: per reference key, ``str(pred) == str(ref)``."""
    if not ref and not pred:
        return 1.0
    if not ref:
        return 0.0
    score = 0.0
    for key in ref:
        if key in pred:
            score += float(str(pred[key]) == str(ref[key]))
    return score / len(ref)


def _sort_key(name: str, args: dict[str, Any]) -> tuple[str, ...]:
    key = [name]
    for arg in sorted(args):
        key.append(arg)
        key.append(str(args[arg]))
    return tuple(key)


class _RagasBase(Scorer[Any]):
    turn_mode = "concatenate"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        return self._evaluate(self.calls(run), reference)

    def evaluate_conversation(self, runs: Sequence[Run], references: Sequence[Expectation | None]) -> Evaluation:
        calls = conversation_calls(runs, self.params.calls_source, self.params.scope)
        return self._evaluate(calls, merge_expectations(references))

    def _evaluate(self, calls: tuple[ToolCall, ...], reference: Expectation | None) -> Evaluation:
        raise NotImplementedError


class RagasToolCallAccuracy(_RagasBase):
    """Ragas ToolCallAccuracy: sequence alignment × mean per-key ``str()`` argument match."""

    kind: ClassVar[str] = "ragas_tool_call_accuracy"
    version: ClassVar[int] = 1
    Params = RagasToolCallAccuracyParams
    needs = frozenset({Need.REFERENCE, Need.ARGUMENTS})
    summary = "Ragas ToolCallAccuracy: aligned names × per-key str() argument accuracy (§2.5)"

    def variant(self) -> str | None:
        return None if self.params.strict_order else "any_order"

    def _evaluate(self, calls: tuple[ToolCall, ...], reference: Expectation | None) -> Evaluation:
        ref_calls = expected_calls_of(reference)
        if isinstance(ref_calls, NotScored):
            return ref_calls
        gate = self.arguments_gate(calls)
        if isinstance(gate, NotScored):
            return gate
        names_only = gate == "names_only"
        pred = [(c.name, as_dict(c.args)) for c in calls]
        ref = [(e.name, as_dict(peer_args(e))) for e in ref_calls]
        details: dict[str, Any] = {"predicted_calls": len(pred), "reference_calls": len(ref)}
        degraded = "names_only" if names_only else None

        if not pred and not ref:
            return Outcome(1.0, details=details, degraded=degraded)
        if not pred or not ref:
            return Outcome(0.0, details=details, issues=self._issues(calls, ref_calls, names_only), degraded=degraded)
        if not self.params.strict_order:
            pred = sorted(pred, key=lambda c: _sort_key(*c))
            ref = sorted(ref, key=lambda c: _sort_key(*c))
        pred_names = [n for n, _ in pred]
        ref_names = [n for n, _ in ref]
        aligned = int(pred_names == ref_names if self.params.strict_order else sorted(pred_names) == sorted(ref_names))
        score = 0.0
        compared = min(len(pred), len(ref))
        for (rn, ra), (pn, pa) in zip(ref, pred, strict=False):
            if rn == pn:
                score += 1.0 if names_only else ragas_arg_score(pa, ra)
        score /= len(ref)
        if compared < len(ref):
            score *= compared / len(ref)
        score = score * aligned
        details["sequence_aligned"] = bool(aligned)
        issues: tuple[Any, ...] = ()
        if score < 1.0:
            order_failed = self.params.strict_order and not aligned and sorted(pred_names) == sorted(ref_names)
            issues = self._issues(calls, ref_calls, names_only, order_failed)
        return Outcome(score, details=details, issues=issues, degraded=degraded)

    @staticmethod
    def _issues(
        calls: Sequence[ToolCall], ref: Sequence[ExpectedCall], names_only: bool, order_failed: bool = False
    ) -> tuple[Any, ...]:
        def m(a: ToolCall, e: ExpectedCall) -> bool:
            return ragas_arg_score(as_dict(a.args), as_dict(peer_args(e))) == 1.0

        return explain(calls, ref, None if names_only else m, order_failed=order_failed).issues


class RagasToolCallF1(_RagasBase):
    """Ragas ToolCallF1: F1 over the sets of (name, arguments), rounded to 4 digits."""

    kind: ClassVar[str] = "ragas_tool_call_f1"
    version: ClassVar[int] = 1
    Params = RagasToolCallF1Params
    needs = frozenset({Need.REFERENCE, Need.ARGUMENTS})
    summary = "Ragas ToolCallF1: set F1 of (name, args), both empty → 0 (§2.6)"

    def _evaluate(self, calls: tuple[ToolCall, ...], reference: Expectation | None) -> Evaluation:
        ref_calls = expected_calls_of(reference)
        if isinstance(ref_calls, NotScored):
            return ref_calls
        gate = self.arguments_gate(calls)
        if isinstance(gate, NotScored):
            return gate
        names_only = gate == "names_only"

        def key(name: str, args: Any) -> tuple[str, Any]:
            return (name, None) if names_only else (name, hashable(args))

        expected = {key(e.name, peer_args(e)) for e in ref_calls}
        actual = {key(c.name, c.args) for c in calls}
        tp = len(actual & expected)
        fp = len(actual - expected)
        fn = len(expected - actual)
        precision = tp / (tp + fp) if (tp + fp) > 0 else 0.0
        recall = tp / (tp + fn) if (tp + fn) > 0 else 0.0
        f1 = 2 * precision * recall / (precision + recall) if (precision + recall) > 0 else 0.0
        score = round(f1, 4)
        issues: tuple[Any, ...] = ()
        if score < 1.0:
            matcher = None if names_only else (lambda a, e: bool(hashable(a.args) == hashable(peer_args(e))))
            issues = explain(calls, ref_calls, matcher, exact_args=not names_only).issues
        return Outcome(
            score,
            issues=issues,
            details={"tp": tp, "fp": fp, "fn": fn, "precision": precision, "recall": recall, "f1": f1},
            degraded="names_only" if names_only else None,
        )
