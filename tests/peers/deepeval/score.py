"""deepeval 4.3.1 peer script: ``ToolCorrectnessMetric`` (no ``available_tools``) on every case.

Run by tests/peers/test_differential.py and bench/scorers.py in .peer-venvs/deepeval (protocol:
tests/peers/_protocol.py). Parameters per configuration: ``evaluation_params`` (list of
``input_parameters`` / ``output``), ``should_exact_match``, ``should_consider_ordering``,
``strict_mode`` (DeepEval's own names). The metric is given a model object whose methods raise, so
any attempt to call an LLM is a loud error; telemetry is switched off by the environment
(tests/peers/_protocol.py). ``measure`` runs with ``async_mode=False`` and no progress indicator.

A case has one turn: ``tools_called`` are the calls of every step, in order (``args`` →
``input_parameters``, ``result`` → ``output``, ``type``), ``expected_tools`` the expected calls
(unspecified ``args``/``output`` → ``None``, DeepEval's defaults).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _protocol
from deepeval.metrics import ToolCorrectnessMetric
from deepeval.models import DeepEvalBaseLLM
from deepeval.test_case import LLMTestCase, ToolCall, ToolCallParams
from deepeval.test_case.llm_test_case import ToolCallType


class NeverCalledModel(DeepEvalBaseLLM):
    """A judge model that must never be used: ToolCorrectness without available_tools is pure code."""

    def __init__(self) -> None:
        super().__init__(model="never-called")

    def load_model(self, *args: Any, **kwargs: Any) -> Any:
        return self

    def generate(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("DeepEval tried to call the judge model")

    async def a_generate(self, *args: Any, **kwargs: Any) -> str:
        raise AssertionError("DeepEval tried to call the judge model")

    def get_model_name(self, *args: Any, **kwargs: Any) -> str:
        return "never-called"


_PARAMS = {"input_parameters": ToolCallParams.INPUT_PARAMETERS, "output": ToolCallParams.OUTPUT}


def _metric(params: dict[str, Any]) -> ToolCorrectnessMetric:
    return ToolCorrectnessMetric(
        model=NeverCalledModel(),
        evaluation_params=[_PARAMS[p] for p in params.get("evaluation_params", [])],
        should_exact_match=params.get("should_exact_match", False),
        should_consider_ordering=params.get("should_consider_ordering", False),
        strict_mode=params.get("strict_mode", False),
        async_mode=False,
        include_reason=True,
    )


_METRICS: dict[str, ToolCorrectnessMetric] = {}


def prepare(params: dict[str, Any], case: dict[str, Any]) -> Any:
    key = repr(sorted((k, repr(v)) for k, v in params.items()))
    metric = _METRICS.get(key) or _METRICS.setdefault(key, _metric(params))
    (turn,) = case["turns"]
    called = [
        ToolCall(
            name=c["name"],
            input_parameters=c["args"],
            output=c.get("result"),
            type=ToolCallType(c.get("type", "FUNCTION")),
        )
        for group in turn["steps"]
        for c in group
    ]
    expected = [
        ToolCall(
            name=c["name"],
            input_parameters=c.get("args"),
            output=c.get("output"),
            type=ToolCallType(c.get("type", "FUNCTION")),
        )
        for c in turn["expected"]
    ]
    test_case = LLMTestCase(
        input=turn.get("user") or "hi",
        actual_output=turn.get("final") or "",
        tools_called=called,
        expected_tools=expected,
    )

    def score() -> float:
        return metric.measure(test_case, _show_indicator=False)

    return score


if __name__ == "__main__":
    _protocol.run("deepeval", ["deepeval"], prepare)
