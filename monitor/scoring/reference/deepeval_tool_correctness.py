"""``deepeval_tool_correctness``: DeepEval ``ToolCorrectnessMetric``, code part (SCORING.md §2.8).

Peer: deepeval 4.3.1, ``deepeval/metrics/tool_correctness/tool_correctness.py``
(``_calculate_score``, ``_calculate_exact_match_score``, ``_calculate_non_exact_match_score``,
``_compute_weighted_lcs``, ``_compare_dicts``) and ``deepeval/test_case/llm_test_case.py``
(``ToolCall.__eq__``/``__hash__``: equal on name, input_parameters and output; ``ToolCallType``).

Reproduced quirks: partial credit only for nested dicts; the LCS total summed along DeepEval's
backtrack (not ``dp[m][n]``); "used" called calls tested **by value**, so a second identical call
never matches; a best weight of 0 adds nothing and marks nothing; ``strict_mode`` forces the
threshold to 1 and zeroes a score below it. ``available_tools`` (DeepEval's LLM tool-selection
part) is not reproduced.

Decisions: ``_compare_dicts`` sums in the key order of the expected arguments (DeepEval iterates
a ``set``, see §2.8); arguments that are not both dicts (DeepEval would raise on ``None.keys()``)
score 1.0 when equal, else 0.0. The "used" value of a called call is (name, args, result). An
unspecified expected ``args`` is ``None`` (DeepEval's default), an unset expected ``output`` is
``None``. DeepEval test cases are single-turn: multi-turn cases take the mean over turns.
Issues (§2.0) are produced when the score is below 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar, Literal

import pydantic

from monitor.scoring.base import ArgumentParams, Evaluation, Need, NotScored, Outcome, Scorer, Threshold
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.explain import explain
from monitor.scoring.reference._common import expected_calls_of
from monitor.trajectory.model import ABSENT, Run, ToolCall

__all__ = ["DeepEvalToolCorrectness", "DeepEvalToolCorrectnessParams", "deepeval_compare_dicts"]


class DeepEvalToolCorrectnessParams(ArgumentParams):
    evaluation_params: list[Literal["input_parameters", "output"]] = pydantic.Field(default_factory=list)
    should_exact_match: bool = False
    should_consider_ordering: bool = False
    strict_mode: bool = False
    threshold: Threshold = 0.5

    @pydantic.model_validator(mode="before")
    @classmethod
    def _strict_threshold(cls, data: Any) -> Any:
        """DeepEval: ``self.threshold = 1 if strict_mode else threshold``."""
        if isinstance(data, dict) and data.get("strict_mode") is True:
            return {**data, "threshold": 1.0}
        return data

    @pydantic.field_validator("evaluation_params")
    @classmethod
    def _dedupe(cls, value: list[str]) -> list[str]:
        return sorted(set(value))


def deepeval_compare_dicts(d1: Any, d2: Any) -> float:
    """DeepEval ``_compare_dicts`` (d1 = expected, d2 = called), summed in d1's key order."""
    if d1 == d2:
        return 1.0
    if not isinstance(d1, dict) or not isinstance(d2, dict):
        return 0.0
    total_keys = len(set(d1) | set(d2))
    score = 0.0
    for key in d1:
        if key not in d2:
            continue
        if d1[key] == d2[key]:
            score += 1 / total_keys
        elif isinstance(d1[key], dict) and isinstance(d2[key], dict):
            score += deepeval_compare_dicts(d1[key], d2[key]) / total_keys
    return score


def _type_of_call(call: ToolCall) -> str:
    return "MCP" if call.kind == "mcp" else "FUNCTION"


def _type_of_expected(call: ExpectedCall) -> str:
    return call.type.upper() if call.type else "FUNCTION"


def _e_args(e: ExpectedCall) -> Any:
    return None if e.args is ABSENT else e.args


def _e_output(e: ExpectedCall) -> Any:
    return None if e.output is ABSENT else e.output


class DeepEvalToolCorrectness(Scorer[DeepEvalToolCorrectnessParams]):
    """DeepEval ToolCorrectnessMetric without ``available_tools``: exact / LCS / best-match modes."""

    kind: ClassVar[str] = "deepeval_tool_correctness"
    version: ClassVar[int] = 1
    Params = DeepEvalToolCorrectnessParams
    needs = frozenset({Need.REFERENCE, Need.ARGUMENTS, Need.RESULTS})
    turn_mode = "mean"
    summary = "DeepEval ToolCorrectnessMetric (code part): exact, weighted LCS or best match (§2.8)"

    def variant(self) -> str | None:
        if self.params.should_exact_match:
            return "exact"
        return "ordered" if self.params.should_consider_ordering else None

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        exp = expected_calls_of(reference)
        if isinstance(exp, NotScored):
            return exp
        called = self.calls(run)
        use_args = "input_parameters" in self.params.evaluation_params
        use_output = "output" in self.params.evaluation_params
        degraded: str | None = None
        if use_args:
            gate = self.arguments_gate(called)
            if isinstance(gate, NotScored):
                return gate
            if gate == "names_only":
                use_args, degraded = False, "names_only"
        if use_output and any(c.result is ABSENT for c in called):
            return NotScored.na("results_not_captured")

        def same_tool(e: ExpectedCall, c: ToolCall) -> bool:
            return e.name == c.name and _type_of_expected(e) == _type_of_call(c)

        def weight(e: ExpectedCall, c: ToolCall) -> float:
            w = 1.0
            if use_args:
                w *= deepeval_compare_dicts(_e_args(e), c.args)
            if use_output and _e_output(e) != c.result:
                w = 0.0
            return w

        if self.params.should_exact_match:
            score = self._exact(exp, called, use_args, use_output)
        elif self.params.should_consider_ordering:
            score = self._lcs(exp, called, same_tool, weight)
        else:
            score = self._best_match(exp, called, same_tool, weight)
        if self.params.strict_mode and score < self.params.threshold:
            score = 0.0

        issues: tuple[Any, ...] = ()
        if score < 1.0:
            matcher = (lambda c, e: weight(e, c) == 1.0) if (use_args or use_output) else None
            issues = explain(
                called,
                exp,
                matcher,
                exact_args=use_args,
                order_failed=self.params.should_exact_match or self.params.should_consider_ordering,
            ).issues
        return Outcome(score, issues=issues, degraded=degraded, details={"expected": len(exp), "called": len(called)})

    @staticmethod
    def _exact(exp: Sequence[ExpectedCall], called: Sequence[ToolCall], use_args: bool, use_output: bool) -> float:
        if len(called) != len(exp):
            return 0.0
        if not exp:
            return 1.0
        for e, c in zip(exp, called, strict=True):
            if c.name != e.name or _type_of_call(c) != _type_of_expected(e):
                return 0.0
            if use_args and c.args != _e_args(e):
                return 0.0
            if use_output and c.result != _e_output(e):
                return 0.0
        return 1.0

    @staticmethod
    def _lcs(exp: Sequence[ExpectedCall], called: Sequence[ToolCall], same_tool: Any, weight: Any) -> float:
        m, n = len(exp), len(called)
        dp = [[0.0] * (n + 1) for _ in range(m + 1)]
        for i in range(1, m + 1):
            for j in range(1, n + 1):
                e, c = exp[i - 1], called[j - 1]
                if not same_tool(e, c):
                    dp[i][j] = max(dp[i - 1][j], dp[i][j - 1])
                    continue
                w = weight(e, c)
                dp[i][j] = max(dp[i - 1][j], dp[i][j - 1], dp[i - 1][j - 1] + w if w > 0 else 0)
        i, j, total = m, n, 0.0
        while i > 0 and j > 0:
            if dp[i][j] == dp[i - 1][j]:
                i -= 1
            elif dp[i][j] == dp[i][j - 1]:
                j -= 1
            else:
                total += dp[i][j] - dp[i - 1][j - 1]
                i, j = i - 1, j - 1
        if m == 0:
            return 1.0 if n == 0 else 0.0
        return total / m

    @staticmethod
    def _best_match(exp: Sequence[ExpectedCall], called: Sequence[ToolCall], same_tool: Any, weight: Any) -> float:
        used: list[ToolCall] = []

        def is_used(c: ToolCall) -> bool:
            return any(u.name == c.name and u.args == c.args and u.result == c.result for u in used)

        total = 0.0
        for e in exp:
            best, best_call = 0.0, None
            for c in called:
                if is_used(c) or not same_tool(e, c):
                    continue
                w = weight(e, c)
                if w > best:
                    best, best_call = w, c
            if best > 0 and best_call is not None:
                total += best
                used.append(best_call)
        if not exp:
            return 1.0 if not called else 0.0
        return total / len(exp)
