"""Failure analysis: failure patterns, wrong-tool confusions and ranked recommendations (issue 11).

Pure: no database, HTTP or file I/O (``[tool.importlinter]`` in pyproject checks it). The store returns the rows
(:mod:`monitor.store.failures`); :func:`analyze` rolls them up into patterns with rates and trends,
:func:`recommend` turns the patterns into typed fixes grounded in the tools' definitions, and
:func:`active_patterns` picks the bounded set the daemon exports as a metric. docs/report.md describes the method.
"""

from __future__ import annotations

from monitor.analysis.definitions import DefinitionIndex, state_changing
from monitor.analysis.model import (
    CATEGORY_OF,
    AgentDay,
    Category,
    IssueGroup,
    JudgeSpend,
    ScoreBucket,
    SelectionIssue,
    ToolDefinition,
    ToolUsage,
    ValueCount,
    Window,
    WindowData,
)
from monitor.analysis.patterns import (
    AgentSummary,
    Analysis,
    Confusion,
    Pattern,
    Trend,
    active_patterns,
    analyze,
    find_confusions,
    find_patterns,
)
from monitor.analysis.recommend import FIX_TYPES, FixType, Recommendation, recommend
from monitor.analysis.stats import Comparison, compare, fisher_exact, two_proportion_z

__all__ = [
    "CATEGORY_OF",
    "FIX_TYPES",
    "AgentDay",
    "AgentSummary",
    "Analysis",
    "Category",
    "Comparison",
    "Confusion",
    "DefinitionIndex",
    "FixType",
    "IssueGroup",
    "JudgeSpend",
    "Pattern",
    "Recommendation",
    "ScoreBucket",
    "SelectionIssue",
    "ToolDefinition",
    "ToolUsage",
    "Trend",
    "ValueCount",
    "Window",
    "WindowData",
    "active_patterns",
    "analyze",
    "compare",
    "find_confusions",
    "find_patterns",
    "fisher_exact",
    "recommend",
    "state_changing",
    "two_proportion_z",
]
