"""``tool_eval``: seed-000's ToolEvaluator (SCORING.md §2.1).

Peer: ``shared/seeds/000_22aaf10f93605b4c.txt``, ``ToolEvaluator._score_results`` and
``_score_params``. The printed code raises NameError (``called_calls`` is undefined) whenever
``expected_tool_calls`` is non-empty; variant ``literal`` reads it as ``called_names``.

Variants:

* ``clipped`` (default, ours): correct calls clipped per name (``min(count_A, count_E)``), each
  actual call used by one expected call for parameter accuracy (the best-scoring unused one);
* ``literal``: the article — every call whose name is expected counts (duplicates twice, so
  recall and the overall can exceed 1; the reported score is clamped to 1), parameter accuracy
  reads the first call of each expected name.

Decisions where the article is silent:

* arguments that are not a JSON object (:class:`~monitor.trajectory.model.Malformed`, a list…)
  have no keys: every required parameter is missing;
* ``param_validators`` values are JSON Schemas (validated with the dialect named by ``$schema``,
  default Draft 2020-12) or, from the Python API, callables; a callable that raises fails;
* budgets: ``budgets.max_tool_calls`` / ``budgets.run_latency_budget_ms`` of the expectation, else
  the TestCase defaults 5 and 10000 ms; budget issues are warnings (never change score or pass);
* ``on_missing_arguments``: the gate applies when an expected call has parameter items and a call
  of its name (a candidate for step 4) has ABSENT arguments. With ``names_only`` the
  param-accuracy weight is dropped and the others renormalised (equal weights if they are all 0).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Literal

import jsonschema
import pydantic

from monitor.scoring.base import ArgumentParams, Evaluation, Need, NotScored, Outcome, Scorer, Threshold
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import explain, pointer
from monitor.scoring.result import FailureKind, Issue, Severity, call_issue
from monitor.trajectory.model import Run, ToolCall

__all__ = ["ToolEval", "ToolEvalParams", "ToolEvalWeights"]

DEFAULT_MAX_TOOL_CALLS = 5
DEFAULT_MAX_LATENCY_MS = 10000.0


class ToolEvalWeights(pydantic.BaseModel):
    """Weights of the overall score; non-negative and summing to 1."""

    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)

    precision: float = pydantic.Field(default=0.3, ge=0.0, allow_inf_nan=False)
    recall: float = pydantic.Field(default=0.3, ge=0.0, allow_inf_nan=False)
    param_accuracy: float = pydantic.Field(default=0.3, ge=0.0, allow_inf_nan=False)
    content: float = pydantic.Field(default=0.1, ge=0.0, allow_inf_nan=False)

    @pydantic.model_validator(mode="after")
    def _sum_to_one(self) -> ToolEvalWeights:
        total = self.precision + self.recall + self.param_accuracy + self.content
        if abs(total - 1.0) > 1e-9:
            raise ValueError(f"weights must sum to 1 (they sum to {total!r}): adjust them")
        return self


class ToolEvalParams(ArgumentParams):
    variant: Literal["clipped", "literal"] = "clipped"
    weights: ToolEvalWeights = pydantic.Field(default_factory=ToolEvalWeights)
    threshold: Threshold = 0.8


def _validator_passes(spec: Any, value: Any) -> bool:
    if callable(spec):
        try:
            return bool(spec(value))
        except Exception:
            return False
    cls = jsonschema.validators.validator_for(spec, default=jsonschema.Draft202012Validator)
    return bool(cls(spec).is_valid(value))


def _required(expected: ExpectedCall) -> Mapping[str, Any]:
    if expected.required_params is not None:
        return expected.required_params
    return expected.args if isinstance(expected.args, dict) else {}


def _has_items(expected: ExpectedCall) -> bool:
    return bool(_required(expected)) or bool(expected.forbidden_params) or bool(expected.param_validators)


def _param_score(expected: ExpectedCall, call: ToolCall) -> tuple[float, list[Issue]]:
    """Seed-000 ``_score_params``: mean of per-parameter items (1.0 if none) and their issues."""
    args = call.args if isinstance(call.args, dict) else {}
    scores: list[float] = []
    issues: list[Issue] = []
    for param, value in _required(expected).items():
        if param not in args:
            scores.append(0.0)
            issues.append(call_issue(FailureKind.MISSING_PARAMETER, call, parameter=pointer(param), expected=value))
        elif value is not None and args[param] != value:
            scores.append(0.5)
            issues.append(
                call_issue(FailureKind.WRONG_VALUE, call, parameter=pointer(param), expected=value, actual=args[param])
            )
        else:
            scores.append(1.0)
    for param in expected.forbidden_params:
        if param in args:
            scores.append(0.0)
            issues.append(
                call_issue(FailureKind.FORBIDDEN_PARAMETER, call, parameter=pointer(param), actual=args[param])
            )
    for param, spec in expected.param_validators.items():
        if param in args and not _validator_passes(spec, args[param]):
            scores.append(0.0)
            issues.append(
                call_issue(
                    FailureKind.INVALID_VALUE,
                    call,
                    parameter=pointer(param),
                    expected=spec if not callable(spec) else None,
                    actual=args[param],
                )
            )
    total = 0.0
    for s in scores:
        total += s
    return (total / len(scores) if scores else 1.0), issues


def _no_tools_outcome(calls: Sequence[ToolCall], budget_issues: list[Issue]) -> Outcome:
    """§2.1 step 1: ``should_not_call_tools`` and calls were made: 0, one ``unnecessary_tool`` each."""
    issues = [call_issue(FailureKind.UNNECESSARY_TOOL, c, detail={"rule": "no_tools"}) for c in calls]
    zeros = {"precision": 0.0, "recall": 0.0, "param_accuracy": 0.0}
    return Outcome(0.0, passed=False, issues=(*issues, *budget_issues), details={**zeros, "branch": "no_tools"})


def _content(response: str, keywords: Sequence[str]) -> tuple[float, list[Issue]]:
    """§2.1 step 5: the fraction of keywords in the response (case-insensitive; 1.0 without keywords)
    and a ``response_mismatch`` issue per missing keyword."""
    lowered = response.lower()
    found = [kw for kw in keywords if kw.lower() in lowered]
    missing = [kw for kw in keywords if kw.lower() not in lowered]
    content = len(found) / len(keywords) if keywords else 1.0
    return content, [
        Issue(FailureKind.RESPONSE_MISMATCH, expected=kw, detail={"missing_keyword": kw}) for kw in missing
    ]


def _content_only_outcome(content: float, content_issues: list[Issue], budget_issues: list[Issue]) -> Outcome:
    """§2.1 step 2: nothing expected: 1.0 when every keyword is in the response, else 0.5."""
    content_ok = not content_issues
    return Outcome(
        1.0 if content_ok else 0.5,
        passed=content_ok,
        issues=(*content_issues, *budget_issues),
        details={
            "precision": 1.0,
            "recall": 1.0,
            "param_accuracy": 1.0,
            "content": round(content, 3),
            "branch": "no_expected_calls",
        },
    )


def _precision_recall(names: Sequence[str], exp_names: Sequence[str], literal: bool) -> tuple[int, float, float]:
    """§2.1 step 3: ``correct`` (every call of an expected name in ``literal``; clipped per name
    otherwise), precision (1.0 without calls) and recall."""
    if literal:
        exp_set = set(exp_names)
        correct = sum(1 for n in names if n in exp_set)
    else:
        ca, ce = Counter(names), Counter(exp_names)
        correct = sum(min(ca[n], ce[n]) for n in ce)
    precision = correct / len(names) if names else 1.0
    recall = correct / len(exp_names)
    return correct, precision, recall


def _parameter_accuracy(
    calls: Sequence[ToolCall], expected: Sequence[ExpectedCall], literal: bool
) -> tuple[float, list[float], list[Issue]]:
    """§2.1 step 4: per expected call, the param score of its chosen call (``literal``: the first of
    its name; clipped: the best unused one, earliest on ties; none: 0.0); their left-to-right mean."""
    param_issues: list[Issue] = []
    param_scores: list[float] = []
    used: set[int] = set()
    for e in expected:
        candidates = [c for c in calls if c.name == e.name]
        chosen: tuple[float, list[Issue]] | None = None
        if literal:
            if candidates:
                chosen = _param_score(e, candidates[0])
        else:
            best_idx: int | None = None
            for c in candidates:
                if c.index in used:
                    continue
                scored = _param_score(e, c)
                if chosen is None or scored[0] > chosen[0]:
                    chosen, best_idx = scored, c.index
            if best_idx is not None:
                used.add(best_idx)
        if chosen is None:
            param_scores.append(0.0)
        else:
            param_scores.append(chosen[0])
            param_issues.extend(chosen[1])
    total = 0.0
    for s in param_scores:
        total += s
    return total / len(param_scores), param_scores, param_issues


def _overall(
    w: ToolEvalWeights, precision: float, recall: float, param_accuracy: float, content: float, names_only: bool
) -> float:
    """§2.1 step 6 (and 8): the weighted sum in the article's order; without parameter accuracy
    (``names_only``) the other weights renormalised (equal when they are all 0)."""
    if names_only:
        rest = w.precision + w.recall + w.content
        wp, wr, wc = (w.precision / rest, w.recall / rest, w.content / rest) if rest > 0 else (1 / 3,) * 3
        return precision * wp + recall * wr + content * wc
    return precision * w.precision + recall * w.recall + param_accuracy * w.param_accuracy + content * w.content


class ToolEval(Scorer[ToolEvalParams]):
    """Seed-000 ToolEvaluator: precision, recall, parameter accuracy and content, weighted."""

    kind: ClassVar[str] = "tool_eval"
    version: ClassVar[int] = 1
    Params = ToolEvalParams
    needs = frozenset({Need.REFERENCE, Need.ARGUMENTS, Need.FINAL_RESPONSE})
    turn_mode = "mean"
    summary = "seed-000 ToolEvaluator: weighted precision / recall / parameter accuracy / content (§2.1)"

    def variant(self) -> str | None:
        return "literal" if self.params.variant == "literal" else None

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        """SCORING.md §2.1, steps 1–8 (step 7, the budget issues, first: every branch reports them)."""
        if reference is None:
            return NotScored.na("no_reference")
        calls = self.calls(run)
        expected = reference.expected_calls or ()
        budget_issues = self._budget_issues(run, calls, reference)  # step 7
        if reference.no_tools and calls:  # step 1
            return _no_tools_outcome(calls, budget_issues)
        content, content_issues = _content(run.final_response or "", reference.expected_keywords or ())  # step 5
        if not expected:  # step 2
            return _content_only_outcome(content, content_issues, budget_issues)
        gate = self.arguments_gate([c for e in expected if _has_items(e) for c in calls if c.name == e.name])  # 8
        if isinstance(gate, NotScored):
            return gate
        names_only = gate == "names_only"
        literal = self.params.variant == "literal"
        names = [c.name for c in calls]
        correct, precision, recall = _precision_recall(names, [e.name for e in expected], literal)  # step 3
        param_scores: list[float] = []
        param_issues: list[Issue] = []
        param_accuracy = math.nan
        if not names_only:  # step 4
            param_accuracy, param_scores, param_issues = _parameter_accuracy(calls, expected, literal)
        overall = _overall(self.params.weights, precision, recall, param_accuracy, content, names_only)  # step 6
        passed, score = self._verdict(overall, names, expected)
        exp_names = [e.name for e in expected]
        # §2.0 by name: explained only when the name multisets differ (else every call matches, no issue)
        name_issues = (
            () if sorted(names) == sorted(exp_names) else explain(calls, list(map(ExpectedCall, exp_names))).issues
        )
        details: dict[str, Any] = {
            "variant": self.params.variant,
            "precision": round(precision, 3),
            "recall": round(recall, 3),
            "param_accuracy": None if names_only else round(param_accuracy, 3),
            "content": round(content, 3),
            "correct": correct,
            "param_scores": param_scores,
            "raw_overall": overall,
        }
        return Outcome(
            score,
            passed=passed,
            issues=(*name_issues, *param_issues, *content_issues, *budget_issues),
            details=details,
            degraded="names_only" if names_only else None,
        )

    def _verdict(self, overall: float, names: Sequence[str], expected: Sequence[ExpectedCall]) -> tuple[bool, float]:
        """§2.1 step 6, the verdict: ``passed`` on the unrounded overall and no expected name missing;
        the score rounded to 3 places (clamped to 1 in ``literal``)."""
        name_set = set(names)
        missing_expected = [e.name for e in expected if e.name not in name_set]
        passed = overall >= self.params.threshold and not missing_expected
        rounded = round(overall, 3)
        return passed, (min(1.0, rounded) if self.params.variant == "literal" else rounded)

    @staticmethod
    def _budget_issues(run: Run, calls: Sequence[ToolCall], reference: Expectation) -> list[Issue]:
        """§2.1 step 7: ``run_latency`` and ``excess_calls`` warnings (never change score or pass)."""
        issues: list[Issue] = []
        max_calls = reference.budgets.max_tool_calls
        max_calls = DEFAULT_MAX_TOOL_CALLS if max_calls is None else max_calls
        max_latency = reference.budgets.run_latency_budget_ms
        max_latency = DEFAULT_MAX_LATENCY_MS if max_latency is None else max_latency
        duration = run.duration_ms
        if duration is not None and duration > max_latency:
            issues.append(
                Issue(FailureKind.RUN_LATENCY, severity=Severity.WARNING, expected=max_latency, actual=duration)
            )
        if len(calls) > max_calls:
            issues.append(
                Issue(FailureKind.EXCESS_CALLS, severity=Severity.WARNING, expected=max_calls, actual=len(calls))
            )
        return issues
