"""The report as one JSON document (``monitor.report/v1``, :file:`report.schema.json`): the single source the HTML,
Markdown and webhook renderings are made from, so all of them show the same numbers.

:func:`gather` reads the store (:mod:`monitor.store.failures`); :func:`build` is pure: inputs → document.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from monitor.analysis import (
    Analysis,
    Category,
    DefinitionIndex,
    JudgeSpend,
    Pattern,
    Recommendation,
    ScoreBucket,
    Trend,
    Window,
    analyze,
    recommend,
)
from monitor.analysis.definitions import parameter_label
from monitor.report.window import label
from monitor.settings import Settings
from monitor.store import SqlResultStore, failures
from monitor.store.failures import ExampleRun, ScorerSummary, StoreFeatures

__all__ = ["FORMAT", "LIMITS", "ReportInputs", "build", "gather"]

FORMAT: Final = "monitor.report/v1"

LIMITS: Final = {
    "patterns": 50,
    "agents": 50,
    "agents_charted": 8,
    "confusion_agents": 6,
    "confusion_tools": 12,
    "heatmap_tools": 25,
    "scorers_charted": 12,
    "examples": 30,
    "text": 300,
}
"""Bounds that keep the report readable with thousands of tools or agents: what is left out is counted."""

PARAMETER_KINDS: Final = (
    "missing_parameter",
    "unknown_parameter",
    "wrong_type",
    "enum_violation",
    "invalid_value",
    "wrong_value",
    "forbidden_parameter",
    "malformed_arguments",
)
SELECTION_CHART_KINDS: Final = (
    "wrong_tool",
    "missing_tool",
    "unnecessary_tool",
    "forbidden_tool",
    "hallucinated_tool",
    "wrong_order",
)


@dataclass
class ReportInputs:
    """Everything read from the store for one report."""

    window: Window
    features: StoreFeatures
    backend: str
    analysis: Analysis
    definitions: DefinitionIndex
    scorers: list[ScorerSummary] = field(default_factory=list)
    buckets: list[ScoreBucket] = field(default_factory=list)
    spend: list[JudgeSpend] = field(default_factory=list)
    previous_spend: list[JudgeSpend] = field(default_factory=list)
    examples: dict[str, ExampleRun] = field(default_factory=dict)
    tool_calls: int = 0
    previous_tool_calls: int = 0
    tools_seen: int = 0


def gather(source: failures.Source, window: Window, settings: Settings) -> ReportInputs:
    """Read the window and the one before it from the store and analyse them."""
    report = settings.report
    feats = failures.features(source)
    current = failures.load_window(source, window.since, window.until, examples=max(report.examples, 1))
    previous_window = window.previous()
    previous = failures.load_window(source, previous_window.since, previous_window.until, examples=0)
    index = DefinitionIndex(failures.tool_definitions_of(source))
    analysis = analyze(current, previous, index, significance=report.significance, examples=max(report.examples, 1))
    wanted: list[str] = []
    for p in analysis.patterns[: LIMITS["patterns"]]:
        wanted.extend(p.examples[:1])
    for p in analysis.patterns[: report.max_recommendations * 2]:
        wanted.extend(p.examples)
    examples = failures.example_runs(source, dict.fromkeys(wanted))
    engine = source.engine if isinstance(source, SqlResultStore) else source
    return ReportInputs(
        window=window,
        features=feats,
        backend=engine.dialect.name,
        analysis=analysis,
        definitions=index,
        scorers=failures.scorer_summaries(source, window.since, window.until),
        buckets=failures.score_buckets(source, window.since, window.until),
        spend=failures.judge_spend(source, window.since, window.until),
        previous_spend=failures.judge_spend(source, previous_window.since, previous_window.until),
        examples=examples,
        tool_calls=sum(t.calls for t in current.tools),
        previous_tool_calls=sum(t.calls for t in previous.tools),
        tools_seen=len({(t.agent, t.tool) for t in current.tools}),
    )


# --------------------------------------------------------------------------- building the document


def _num(value: float | None, digits: int = 6) -> float | None:
    if value is None or not math.isfinite(value):
        return None
    return round(value, digits)


def _clip(text: str | None, limit: int = LIMITS["text"]) -> str | None:
    if text is None:
        return None
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _trend(t: Trend | None) -> dict[str, Any] | None:
    if t is None:
        return None
    return {
        "previous_runs": t.previous_runs,
        "previous_total": t.previous_agent_runs,
        "previous_rate": _num(t.previous_rate),
        "change": _num(t.change),
        "p_value": _num(t.p_value, 8),
        "test": t.test,
        "significant": t.significant,
        "direction": t.direction,
    }


def _metric(value: float | None, previous: float | None) -> dict[str, Any]:
    change = None
    if value is not None and previous is not None and previous != 0:
        change = _num((value - previous) / previous)
    return {"value": _num(value), "previous": _num(previous), "relative_change": change}


class _Links:
    def __init__(self, link: Callable[[str, str | None], str | None], examples: Mapping[str, ExampleRun]) -> None:
        self.link, self.examples = link, examples

    def __call__(self, trace_id: str) -> dict[str, Any]:
        run = self.examples.get(trace_id)
        return {
            "trace_id": trace_id,
            "url": self.link(trace_id, run.run_id if run else None),
            "show": f"monitor show {trace_id}",
        }


def _pattern(p: Pattern, links: _Links) -> dict[str, Any]:
    return {
        "agent": p.agent,
        "kind": p.kind,
        "category": str(p.category),
        "tool": p.tool,
        "parameter": p.parameter,
        "parameter_label": parameter_label(p.parameter),
        "expected_tool": p.expected_tool,
        "severity": p.severity,
        "issues": p.issues,
        "runs": p.runs,
        "error_runs": p.error_runs,
        "agent_runs": p.agent_runs,
        "run_rate": _num(p.run_rate),
        "tool_calls": p.tool_calls,
        "call_rate": _num(p.call_rate),
        "impact": _num(p.impact, 3),
        "state_changing": p.state_changing,
        "source": p.source,
        "by_source": [{"source": s, "runs": n} for s, n in p.by_source],
        "judged_runs": p.judged_runs,
        "trend": _trend(p.trend),
        "values": [{"value": _clip(v, 200), "count": n} for v, n in p.values],
        "instead_of": [{"tool": t, "runs": n} for t, n in p.instead_of],
        "examples": [links(t) for t in p.examples],
    }


def _recommendation(rank: int, r: Recommendation, links: _Links) -> dict[str, Any]:
    p = r.pattern
    return {
        "rank": rank,
        "fix": r.fix,
        "status": r.status,
        "title": r.title,
        "finding": r.finding,
        "cause": r.cause,
        "action": r.action,
        "suggestion": r.suggestion,
        "impact": _num(r.impact, 3),
        "agent": p.agent,
        "kind": p.kind,
        "tool": p.tool,
        "parameter": p.parameter,
        "expected_tool": p.expected_tool,
        "evidence": {
            "runs": p.runs,
            "issues": p.issues,
            "agent_runs": p.agent_runs,
            "run_rate": _num(p.run_rate),
            "tool_calls": p.tool_calls,
            "call_rate": _num(p.call_rate),
            "severity": p.severity,
            "state_changing": p.state_changing,
            "source": p.source,
            "trend": _trend(p.trend),
            "examples": [links(t) for t in p.examples],
        },
        "definitions": [
            {
                "agent": d.agent,
                "name": d.name,
                "description": d.description,
                "input_schema": d.input_schema,
            }
            for d in r.definitions
        ],
    }


def _confusions(analysis: Analysis) -> tuple[list[dict[str, Any]], int]:
    by_agent: dict[str | None, list[Any]] = defaultdict(list)
    for c in analysis.confusions:
        by_agent[c.agent].append(c)
    ordered = sorted(by_agent.items(), key=lambda kv: (-sum(c.runs for c in kv[1]), kv[0] or ""))
    out: list[dict[str, Any]] = []
    for agent, cells in ordered[: LIMITS["confusion_agents"]]:
        weight: dict[str, int] = defaultdict(int)
        for c in cells:
            weight[c.called] += c.runs
            weight[c.expected] += c.runs
        tools = sorted(weight, key=lambda t: (-weight[t], t))[: LIMITS["confusion_tools"]]
        kept = [c for c in cells if c.called in tools and c.expected in tools]
        out.append(
            {
                "agent": agent,
                "tools": tools,
                "cells": [
                    {
                        "called": c.called,
                        "expected": c.expected,
                        "runs": c.runs,
                        "by_source": [{"source": s, "runs": n} for s, n in c.by_source],
                    }
                    for c in kept
                ],
                "cells_not_shown": len(cells) - len(kept),
            }
        )
    return out, max(0, len(ordered) - LIMITS["confusion_agents"])


def _parameter_errors(patterns: Sequence[Pattern]) -> list[dict[str, Any]]:
    rows: dict[tuple[str | None, str], dict[str, Any]] = {}
    for p in patterns:
        if p.kind not in PARAMETER_KINDS or p.tool is None:
            continue
        row = rows.setdefault(
            (p.agent, p.tool),
            {"agent": p.agent, "tool": p.tool, "calls": p.tool_calls, "kinds": {k: 0 for k in PARAMETER_KINDS}},
        )
        row["kinds"][p.kind] += p.issues
    out = []
    for row in rows.values():
        total = sum(row["kinds"].values())
        calls = row["calls"]
        out.append(
            {
                "agent": row["agent"],
                "tool": row["tool"],
                "calls": calls,
                "issues": total,
                "kinds": [
                    {"kind": k, "issues": n, "rate": _num(n / calls) if calls else None}
                    for k, n in row["kinds"].items()
                ],
            }
        )
    out.sort(key=lambda r: (-r["issues"], r["agent"] or "", r["tool"]))
    return out


def _spend(spend: Sequence[JudgeSpend], previous: Sequence[JudgeSpend]) -> dict[str, Any]:
    def total(rows: Sequence[JudgeSpend]) -> float | None:
        priced = [r.cost_usd for r in rows if r.cost_usd is not None]
        return _num(math.fsum(priced), 6) if priced else None

    by_day: dict[str, dict[str, Any]] = {}
    by_scorer: dict[tuple[str, str | None], dict[str, Any]] = {}
    for r in spend:
        day = by_day.setdefault(r.day.isoformat(), {"day": r.day.isoformat(), "results": 0, "cost_usd": None})
        day["results"] += r.results
        if r.cost_usd is not None:
            day["cost_usd"] = _num((day["cost_usd"] or 0.0) + r.cost_usd)
        key = (r.scorer, r.model)
        s = by_scorer.setdefault(
            key,
            {
                "scorer": r.scorer,
                "model": r.model,
                "results": 0,
                "input_tokens": 0,
                "output_tokens": 0,
                "cost_usd": None,
            },
        )
        s["results"] += r.results
        s["input_tokens"] += r.input_tokens
        s["output_tokens"] += r.output_tokens
        if r.cost_usd is not None:
            s["cost_usd"] = _num((s["cost_usd"] or 0.0) + r.cost_usd)
    return {
        "available": bool(spend),
        "results": sum(r.results for r in spend),
        "total_cost_usd": total(spend),
        "previous_total_cost_usd": total(previous),
        "by_day": [by_day[k] for k in sorted(by_day)],
        "by_scorer": sorted(by_scorer.values(), key=lambda s: (-(s["cost_usd"] or 0.0), s["scorer"], s["model"] or "")),
    }


def build(
    inputs: ReportInputs,
    settings: Settings,
    *,
    generated_at: datetime | None = None,
) -> dict[str, Any]:
    """The report document of ``inputs`` (see :file:`report.schema.json`)."""
    report = settings.report
    a = inputs.analysis
    examples = inputs.examples
    links = _Links(settings.tracing.link, examples)
    notes: list[str] = []
    if a.runs == 0:
        notes.append(
            f"No runs were scored between {a.window.since.isoformat()} and {a.window.until.isoformat()}: there is "
            f"nothing to analyse in this window."
        )
    if not inputs.features.run_summaries or not inputs.features.tool_definitions:
        notes.append(
            "This store predates revision 0004 (no run_summaries/tool_definitions tables): examples show no user "
            "text or answer, and recommendations cannot quote the tools' definitions, so their causes stay "
            "hypotheses. Run `monitor run` with store.migrate_on_start (the default) to upgrade it."
        )
    elif a.runs and not len(inputs.definitions):
        notes.append(
            "No tool definitions were captured for these agents (their spans carry tool names only): "
            "recommendations cannot quote the definitions, so their causes stay hypotheses."
        )
    if a.runs and not inputs.spend:
        notes.append("No judge results in this window (judges off, or none sampled): there is no judge spend to show.")
    elif inputs.spend and all(s.cost_usd is None for s in inputs.spend):
        notes.append("Judge results carry no cost (a model without a known price): spend is shown in tokens only.")
    if a.previous_runs == 0 and a.runs:
        notes.append("No runs in the previous window: week-over-week changes cannot be computed.")
    reported = [p for p in a.patterns if p.runs >= report.min_runs]
    small = len(a.patterns) - len(reported)
    if a.patterns and not reported:
        notes.append(
            f"Every failure pattern hurt fewer than {report.min_runs} runs (report.min_runs): none is reported."
        )
    requests = {t: r.user_text for t, r in examples.items() if r.user_text}
    recs = recommend(
        a.patterns, inputs.definitions, limit=report.max_recommendations, min_runs=report.min_runs, requests=requests
    )
    confusions, confusion_agents_not_shown = _confusions(a)
    agents = a.agents[: LIMITS["agents"]]
    category_totals: dict[str, int] = defaultdict(int)
    previous_totals: dict[str, int] = defaultdict(int)
    for (_, category), n in a.category_runs.items():
        category_totals[category] += n
    for (_, category), n in a.previous_category_runs.items():
        previous_totals[category] += n
    spend = _spend(inputs.spend, inputs.previous_spend)
    histogram: dict[str, list[int]] = defaultdict(lambda: [0] * 10)
    for b in inputs.buckets:
        histogram[b.scorer][max(0, min(9, b.bucket))] += b.results
    shown_examples: list[str] = []
    for r in recs:
        shown_examples.extend(r.pattern.examples)
    for p in reported[: LIMITS["patterns"]]:
        shown_examples.extend(p.examples[:1])
    example_docs = []
    for trace_id in list(dict.fromkeys(shown_examples))[: LIMITS["examples"]]:
        run = examples.get(trace_id)
        doc = links(trace_id)
        doc.update(
            {
                "run_id": run.run_id if run else None,
                "agent": run.agent if run else None,
                "user_text": _clip(run.user_text) if run else None,
                "final_response": _clip(run.final_response) if run else None,
                "status": run.status if run else None,
                "duration_ms": _num(run.duration_ms, 1) if run else None,
                "calls": run.calls if run else None,
            }
        )
        example_docs.append(doc)
    failure_rate = a.failed_runs / a.runs if a.runs else None
    previous_rate = a.previous_failed_runs / a.previous_runs if a.previous_runs else None
    selection = Category.SELECTION.value
    parameters = Category.PARAMETERS.value
    return {
        "format": FORMAT,
        "title": report.title,
        "generated_at": (generated_at or datetime.now(UTC)).astimezone(UTC).isoformat(),
        "window": {"since": a.window.since.isoformat(), "until": a.window.until.isoformat(), "label": label(a.window)},
        "previous_window": {
            "since": a.previous_window.since.isoformat(),
            "until": a.previous_window.until.isoformat(),
            "label": label(a.previous_window),
        },
        "store": {
            "backend": inputs.backend,
            "run_summaries": inputs.features.run_summaries,
            "tool_definitions": inputs.features.tool_definitions,
        },
        "settings": {
            "min_runs": report.min_runs,
            "significance": report.significance,
            "max_recommendations": report.max_recommendations,
            "examples": report.examples,
        },
        "notes": notes,
        "headline": {
            "runs": _metric(a.runs, a.previous_runs),
            "failed_runs": _metric(a.failed_runs, a.previous_failed_runs),
            "failure_rate": {**_metric(failure_rate, previous_rate), "trend": _trend(a.failure_trend)},
            "tool_calls": _metric(inputs.tool_calls, inputs.previous_tool_calls),
            "selection_error_runs": _metric(category_totals.get(selection, 0), previous_totals.get(selection, 0)),
            "parameter_error_runs": _metric(category_totals.get(parameters, 0), previous_totals.get(parameters, 0)),
            "judge_cost_usd": _metric(spend["total_cost_usd"], spend["previous_total_cost_usd"]),
            "agents": len(a.agents),
            "tools": inputs.tools_seen,
            "patterns": len(reported),
        },
        "agents": [
            {
                "agent": s.agent,
                "runs": s.runs,
                "failed_runs": s.failed_runs,
                "failure_rate": _num(s.failure_rate),
                "trend": _trend(s.trend),
                "days": [
                    {"day": d.isoformat(), "runs": r, "failed_runs": f, "failure_rate": _num(f / r) if r else None}
                    for d, r, f in s.days
                ],
            }
            for s in agents
        ],
        "agents_not_shown": len(a.agents) - len(agents),
        "categories": [
            {
                "category": c.value,
                "runs": category_totals.get(c.value, 0),
                "previous_runs": previous_totals.get(c.value, 0),
            }
            for c in Category
        ],
        "selection_errors": _selection_errors(a.patterns),
        "patterns": [_pattern(p, links) for p in reported[: LIMITS["patterns"]]],
        "patterns_not_shown": max(0, len(reported) - LIMITS["patterns"]),
        "patterns_below_min_runs": small,
        "confusions": confusions,
        "confusion_agents_not_shown": confusion_agents_not_shown,
        "parameter_errors": _parameter_errors(a.patterns),
        "recommendations": [_recommendation(i, r, links) for i, r in enumerate(recs, start=1)],
        "scorers": [
            {
                "scorer": s.scorer,
                "kind": s.scorer_kind,
                "results": s.results,
                "scored": s.scored,
                "not_applicable": s.not_applicable,
                "errors": s.errors,
                "passed": s.passed,
                "failed": s.failed,
                "pass_rate": _num(s.pass_rate),
                "mean_score": _num(s.mean_score),
                "histogram": histogram.get(s.scorer, [0] * 10),
            }
            for s in inputs.scorers
        ],
        "judge_spend": spend,
        "examples": example_docs,
    }


def _selection_errors(patterns: Sequence[Pattern]) -> list[dict[str, Any]]:
    """Runs hurt per (agent, tool-selection kind), summed over the patterns (a run hurt twice counts twice)."""
    acc: dict[tuple[str | None, str], int] = defaultdict(int)
    for p in patterns:
        if p.kind in SELECTION_CHART_KINDS:
            acc[(p.agent, p.kind)] += p.runs
    return [
        {"agent": agent, "kind": kind, "runs": n}
        for (agent, kind), n in sorted(acc.items(), key=lambda kv: (kv[0][0] or "", kv[0][1]))
    ]
