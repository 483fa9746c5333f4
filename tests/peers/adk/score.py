"""google-adk 2.13.0 peer script: ``TrajectoryEvaluator`` and ``RougeEvaluator`` on every case.

Run by tests/peers/test_differential.py and bench/scorers.py in .peer-venvs/adk (protocol:
tests/peers/_protocol.py). Parameters per configuration: ``metric`` = ``tool_trajectory_avg_score``
(with ``match_type`` = ``EXACT`` | ``IN_ORDER`` | ``ANY_ORDER`` and ``ignore_args``) or
``response_match_score``. Each case turn becomes one ``Invocation`` pair (actual, expected); the
score is the evaluator's ``overall_score`` (mean over the invocations).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _protocol
from google.adk.evaluation.eval_case import IntermediateData, Invocation
from google.adk.evaluation.eval_metrics import EvalMetric, ToolTrajectoryCriterion
from google.adk.evaluation.final_response_match_v1 import RougeEvaluator
from google.adk.evaluation.trajectory_evaluator import TrajectoryEvaluator
from google.genai import types


def _content(text: str | None, role: str) -> types.Content | None:
    if text is None:
        return None
    return types.Content(role=role, parts=[types.Part(text=text)])


def _evaluator(params: dict[str, Any]) -> Any:
    metric = params["metric"]
    if metric == "response_match_score":
        return RougeEvaluator(EvalMetric(metric_name=metric, threshold=params.get("threshold", 0.8)))
    criterion = ToolTrajectoryCriterion(
        threshold=params.get("threshold", 1.0),
        match_type=params.get("match_type", "EXACT"),
        ignore_args=params.get("ignore_args", False),
    )
    return TrajectoryEvaluator(eval_metric=EvalMetric(metric_name=metric, criterion=criterion))


_EVALUATORS: dict[str, Any] = {}


def prepare(params: dict[str, Any], case: dict[str, Any]) -> Any:
    key = repr(sorted(params.items()))
    evaluator = _EVALUATORS.get(key) or _EVALUATORS.setdefault(key, _evaluator(params))
    actual: list[Invocation] = []
    expected: list[Invocation] = []
    for t, turn in enumerate(case["turns"]):
        user = types.Content(role="user", parts=[types.Part(text=turn.get("user") or "hi")])
        if params["metric"] == "response_match_score":
            actual.append(
                Invocation(invocation_id=f"a{t}", user_content=user, final_response=_content(turn["response"], "model"))
            )
            expected.append(
                Invocation(
                    invocation_id=f"e{t}", user_content=user, final_response=_content(turn["reference"], "model")
                )
            )
            continue
        tool_uses = [types.FunctionCall(name=c["name"], args=c.get("args")) for group in turn["steps"] for c in group]
        expected_uses = [types.FunctionCall(name=c["name"], args=c.get("args")) for c in turn["expected"]]
        actual.append(
            Invocation(
                invocation_id=f"a{t}", user_content=user, intermediate_data=IntermediateData(tool_uses=tool_uses)
            )
        )
        expected.append(
            Invocation(
                invocation_id=f"e{t}", user_content=user, intermediate_data=IntermediateData(tool_uses=expected_uses)
            )
        )

    def score() -> float:
        return evaluator.evaluate_invocations(actual, expected).overall_score

    return score


if __name__ == "__main__":
    _protocol.run("adk", ["google-adk", "rouge-score", "nltk"], prepare)
