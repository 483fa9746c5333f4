"""ragas 0.4.3 peer script: ``ToolCallAccuracy`` and ``ToolCallF1`` on every case.

Run by tests/peers/test_differential.py and bench/scorers.py in .peer-venvs/ragas (protocol:
tests/peers/_protocol.py). Parameters per configuration: ``metric`` = ``tool_call_accuracy`` (with
``strict_order``) or ``tool_call_f1``; ``api`` = ``legacy`` (``ragas.metrics.ToolCallAccuracy`` /
``ToolCallF1`` through ``multi_turn_score(MultiTurnSample)``) or ``collections``
(``ragas.metrics.collections.*`` through ``score(user_input=..., reference_tool_calls=...)``).

The conversation is every turn in order: a ``HumanMessage``, then per LLM step one ``AIMessage``
carrying that step's tool calls and one ``ToolMessage`` per call, then the final ``AIMessage``.
The reference is the expected calls of all turns, concatenated (unspecified args = ``{}``).
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _protocol

warnings.simplefilter("ignore")  # deprecation of ragas.metrics.*, and a warning per length mismatch / empty list

from ragas.dataset_schema import MultiTurnSample  # noqa: E402
from ragas.messages import AIMessage, HumanMessage, ToolCall, ToolMessage  # noqa: E402
from ragas.metrics import ToolCallAccuracy, ToolCallF1  # noqa: E402
from ragas.metrics.collections import ToolCallAccuracy as CollToolCallAccuracy  # noqa: E402
from ragas.metrics.collections import ToolCallF1 as CollToolCallF1  # noqa: E402


def _metric(params: dict[str, Any]) -> Any:
    legacy = params.get("api", "legacy") == "legacy"
    if params["metric"] == "tool_call_f1":
        return ToolCallF1() if legacy else CollToolCallF1()
    strict = params.get("strict_order", True)
    return ToolCallAccuracy(strict_order=strict) if legacy else CollToolCallAccuracy(strict_order=strict)


_METRICS: dict[str, Any] = {}


def prepare(params: dict[str, Any], case: dict[str, Any]) -> Any:
    key = repr(sorted(params.items()))
    metric = _METRICS.get(key) or _METRICS.setdefault(key, _metric(params))
    messages: list[Any] = []
    reference: list[ToolCall] = []
    for turn in case["turns"]:
        messages.append(HumanMessage(content=turn.get("user") or "hi"))
        for group in turn["steps"]:
            if not group:
                messages.append(AIMessage(content="thinking"))
                continue
            messages.append(AIMessage(content="", tool_calls=[ToolCall(name=c["name"], args=c["args"]) for c in group]))
            messages.extend(ToolMessage(content="ok") for _ in group)
        if turn.get("final") is not None:
            messages.append(AIMessage(content=turn["final"]))
        reference.extend(ToolCall(name=c["name"], args=c.get("args", {})) for c in turn["expected"])

    if params.get("api", "legacy") == "legacy":
        sample = MultiTurnSample(user_input=messages, reference_tool_calls=reference)

        def score() -> float:
            return metric.multi_turn_score(sample)

        return score

    def score_collections() -> float:
        return metric.score(user_input=messages, reference_tool_calls=reference).value

    return score_collections


if __name__ == "__main__":
    _protocol.run("ragas", ["ragas", "langchain-community"], prepare)
