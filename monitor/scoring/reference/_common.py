"""Helpers shared by the reference-based scorers (SCORING.md §2)."""

from __future__ import annotations

from typing import Any

from monitor.scoring.base import NotScored
from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.trajectory.model import ABSENT

__all__ = ["as_dict", "expected_calls_of", "peer_args"]


def expected_calls_of(reference: Expectation | None) -> tuple[ExpectedCall, ...] | NotScored:
    """The reference calls, or ``not_applicable/no_reference`` when none are given (§2.0)."""
    if reference is None or reference.expected_calls is None:
        return NotScored.na("no_reference")
    return reference.expected_calls


def peer_args(call: ExpectedCall) -> Any:
    """Reference args as the dict-based peers receive them: unspecified (ABSENT) → ``{}`` (§6.5)."""
    return {} if call.args is ABSENT else call.args


def as_dict(value: Any) -> dict[str, Any]:
    """Arguments as a dict for peers whose data model only holds dicts (Ragas, DeepEval).

    A JSON object is itself; ABSENT, ``Malformed`` and non-object JSON have no keys → ``{}``
    (the peers' pydantic models would reject them; treating them as "no arguments" gives no credit
    for any reference key and never raises).
    """
    if isinstance(value, dict):
        return value
    return {}
