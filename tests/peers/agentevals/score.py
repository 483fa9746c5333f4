"""agentevals 0.0.9 peer script: ``create_trajectory_match_evaluator`` on every case.

Run by tests/peers/test_differential.py and bench/scorers.py in .peer-venvs/agentevals (protocol:
tests/peers/_protocol.py). Parameters per configuration: ``trajectory_match_mode``,
``tool_args_match_mode``, ``tool_args_match_overrides`` (agentevals' own names and values).

The actual trajectory is given as OpenAI chat messages built from the case's steps: the leading
``system`` messages and the ``user`` message of the reference (when it has them), then per LLM step
one assistant message carrying that step's tool calls (``arguments`` as JSON text) and one tool
message per call, then the final assistant message. The reference is the case's ``ref_messages``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _protocol
from agentevals.trajectory.match import create_trajectory_match_evaluator


def _tool_call(call: dict[str, Any], call_id: str) -> dict[str, Any]:
    args = call.get("args", {})
    return {"id": call_id, "type": "function", "function": {"name": call["name"], "arguments": json.dumps(args)}}


def _messages_from_steps(turn: dict[str, Any], ref: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for m in ref:
        if m["role"] != "system":
            break
        out.append({"role": "system", "content": "You are an agent."})
    if any(m["role"] == "user" for m in ref):
        out.append({"role": "user", "content": turn.get("user") or ""})
    n = 0
    for group in turn["steps"]:
        if not group:
            out.append({"role": "assistant", "content": "thinking"})
            continue
        ids = [f"call_{n + k}" for k in range(len(group))]
        n += len(group)
        out.append(
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [_tool_call(c, i) for c, i in zip(group, ids, strict=True)],
            }
        )
        out.extend({"role": "tool", "content": "ok", "tool_call_id": i} for i in ids)
    if turn.get("final") is not None:
        out.append({"role": "assistant", "content": turn["final"]})
    return out


def _reference(ref: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    n = 0
    for m in ref:
        msg: dict[str, Any] = {"role": m["role"], "content": "x"}
        calls = m.get("tool_calls")
        if calls:
            msg["tool_calls"] = [_tool_call(c, f"ref_{n + k}") for k, c in enumerate(calls)]
            n += len(calls)
        if m["role"] == "tool":
            msg["tool_call_id"] = f"ref_{max(n - 1, 0)}"
        out.append(msg)
    return out


def prepare(params: dict[str, Any], case: dict[str, Any]) -> Any:
    evaluator = create_trajectory_match_evaluator(
        trajectory_match_mode=params["trajectory_match_mode"],
        tool_args_match_mode=params["tool_args_match_mode"],
        tool_args_match_overrides=params.get("tool_args_match_overrides") or None,
    )
    (turn,) = case["turns"]
    ref = turn["ref_messages"]
    outputs = _messages_from_steps(turn, ref)
    reference = _reference(ref)

    def score() -> float:
        result = evaluator(outputs=outputs, reference_outputs=reference)
        return 1.0 if result["score"] is True else 0.0 if result["score"] is False else float(result["score"])

    return score


if __name__ == "__main__":
    _protocol.run("agentevals", ["agentevals", "langchain-core"], prepare)
