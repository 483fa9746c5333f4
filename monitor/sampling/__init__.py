"""Deterministic sampling of runs and scorers (DESIGN.md §3): see :mod:`monitor.sampling.sampler`.

sampler = Sampler(settings.sampling)
decision = sampler.should_score(run)          # SamplingDecision(sampled, reason)
sampler.scorer_enabled("judge_tool_selection", run, flagged=True)
"""

from __future__ import annotations

from monitor.sampling.sampler import SAMPLED_REASONS, Sampler, SamplingDecision, SamplingReason, unit_hash

__all__ = ["SAMPLED_REASONS", "Sampler", "SamplingDecision", "SamplingReason", "unit_hash"]
