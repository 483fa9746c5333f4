"""Per-agent rules (SCORING.md §3.9): which expectations, tool catalogue, golden references and
scorers apply to a production run.

    rules = RuleSet.load("rules.yaml")            # or RuleSet.from_mapping(settings_dict)
    expectation = rules.expectation_for(run)      # merged rules (+ reference), catalogue filled
    reference = rules.reference_for(run)          # golden reference by run attribute, or None
    specs = rules.scorers_for(run.agent)          # ScorerSpec(id, kind, params) → spec.build()

Scorer kinds are checked against :mod:`monitor.scoring.catalogue` when the rules load.
"""

from __future__ import annotations

from monitor.rules.config import (
    ExpectConfig,
    ExpectedCallConfig,
    MatchConfig,
    ReferencesConfig,
    RuleConfig,
    RulesConfig,
    RulesConfigError,
    RulesProblem,
    ScorerConfig,
    ToolDefConfig,
    ToolScorerConfig,
)
from monitor.rules.ruleset import RuleSet, ScorerSpec, merge_expect

__all__ = [
    "ExpectConfig",
    "ExpectedCallConfig",
    "MatchConfig",
    "ReferencesConfig",
    "RuleConfig",
    "RuleSet",
    "RulesConfig",
    "RulesConfigError",
    "RulesProblem",
    "ScorerConfig",
    "ScorerSpec",
    "ToolDefConfig",
    "ToolScorerConfig",
    "merge_expect",
]
