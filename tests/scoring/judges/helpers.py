"""Shared helpers of the judge tests: a canned response dict and a scripted ``send``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from monitor.scoring.judges.base import JudgeUnavailable


def response(
    verdict: Mapping[str, Any] | None, *, stop_reason: str = "tool_use", usage: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """What the API answers a forced ``submit_verdict`` request (``None``: a text answer, no tool use)."""
    content: list[dict[str, Any]] = (
        [{"type": "text", "text": "I think…"}]
        if verdict is None
        else [{"type": "tool_use", "id": "toolu_1", "name": "submit_verdict", "input": dict(verdict)}]
    )
    return {
        "content": content,
        "stop_reason": stop_reason,
        "usage": dict(usage or {"input_tokens": 100, "output_tokens": 10, "cache_read_input_tokens": 5}),
    }


class Script:
    """A ``send`` answering from a list (an ``Exception`` item is raised); records the bodies."""

    def __init__(self, answers: Sequence[dict[str, Any] | Exception]) -> None:
        self.answers = list(answers)
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> Mapping[str, Any]:
        self.bodies.append(body)
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def unavailable() -> JudgeUnavailable:
    return JudgeUnavailable("APIConnectionError: connection refused")
