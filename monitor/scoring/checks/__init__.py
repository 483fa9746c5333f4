"""Reference-free checks (SCORING.md §3): cheap, pure, run on 100 % of production traffic.

One module per check; :data:`CHECKS` maps each ``kind`` to its scorer class. Every check accepts
the view parameters (``calls_source``, ``scope``), ``threshold`` (default 1.0) and the
``tools`` / ``exclude_tools`` call filter, and reads its rules from the run's
:class:`~monitor.scoring.expectation.Expectation` (built by :mod:`monitor.rules`).
"""

from __future__ import annotations

from typing import Any

from monitor.scoring.base import Scorer
from monitor.scoring.checks._common import CheckParams, call_error
from monitor.scoring.checks.call_budget_check import CallBudgetCheck
from monitor.scoring.checks.forbidden_tool_check import ForbiddenToolCheck
from monitor.scoring.checks.latency_check import LatencyCheck
from monitor.scoring.checks.no_tool_needed_check import NoToolNeededCheck
from monitor.scoring.checks.repetition_check import RepetitionCheck
from monitor.scoring.checks.schema_check import SchemaCheck
from monitor.scoring.checks.tool_error_check import ToolErrorCheck
from monitor.scoring.checks.unknown_tool_check import UnknownToolCheck

__all__ = [
    "CHECKS",
    "CallBudgetCheck",
    "CheckParams",
    "ForbiddenToolCheck",
    "LatencyCheck",
    "NoToolNeededCheck",
    "RepetitionCheck",
    "SchemaCheck",
    "ToolErrorCheck",
    "UnknownToolCheck",
    "call_error",
    "default_checks",
]

CHECKS: dict[str, type[Scorer[Any]]] = {
    cls.kind: cls
    for cls in (
        SchemaCheck,
        UnknownToolCheck,
        ToolErrorCheck,
        RepetitionCheck,
        CallBudgetCheck,
        LatencyCheck,
        NoToolNeededCheck,
        ForbiddenToolCheck,
    )
}
"""Every §3 check by ``kind``, in the order of SCORING.md."""


def default_checks() -> tuple[Scorer[Any], ...]:
    """One instance of every check with default parameters (what runs on every closed run)."""
    return tuple(cls() for cls in CHECKS.values())
