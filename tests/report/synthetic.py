"""Synthetic store contents for the report's tests and ``bench/report.py``: rows written straight into the tables
(as the daemon would have written them), with the true counts of every injected failure kept on the side.

Each run picks a behaviour: correct, a confusion (called ``<agent>_tool_1`` where ``<agent>_tool_0`` was
expected, reported by ``tools_selected`` as a missing tool), a missing parameter, a tool error, a slow tool, or a
skipped tool. A share of runs also has a judge result with its usage and cost.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from monitor.store.schema import issues, results, run_summaries, runs, tool_definitions

BEHAVIOURS = {"correct": 70, "confusion": 8, "missing_parameter": 6, "tool_error": 6, "slow_tool": 5, "skipped": 5}


@dataclass
class Spec:
    since: datetime
    runs: int = 500
    days: int = 7
    agents: Sequence[str] = ("weather", "travel")
    tools_per_agent: int = 3
    judge_share: float = 0.2
    seed: int = 7
    kept: bool = True
    """Write run_summaries and tool_definitions (a store of revision 0004 or later)."""


@dataclass
class Truth:
    runs: Counter[str] = field(default_factory=Counter)
    behaviours: Counter[tuple[str, str]] = field(default_factory=Counter)
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    judge_cost: float = 0.0
    trace_ids: list[str] = field(default_factory=list)


def tool_names(agent: str, n: int) -> list[str]:
    return [f"{agent}_tool_{k}" for k in range(n)]


def populate(engine: sa.Engine, spec: Spec, *, batch: int = 20_000) -> Truth:
    """Write ``spec.runs`` runs first scored in ``[since, since + days)``; returns what was injected."""
    rng = random.Random(spec.seed)
    truth = Truth()
    run_rows: list[dict[str, Any]] = []
    result_rows: list[dict[str, Any]] = []
    issue_rows: list[dict[str, Any]] = []
    kept_rows: list[dict[str, Any]] = []
    next_result = _max_id(engine, results) + 1
    next_issue = _max_id(engine, issues) + 1
    span = timedelta(days=spec.days).total_seconds()
    names = list(BEHAVIOURS)
    weights = list(BEHAVIOURS.values())

    def flush(final: bool = False) -> None:
        if not final and len(result_rows) < batch:
            return
        with engine.begin() as conn:
            for table, rows in (
                (runs, run_rows),
                (results, result_rows),
                (issues, issue_rows),
                (run_summaries, kept_rows),
            ):
                if rows:
                    conn.execute(table.insert(), rows)
        for rows in (run_rows, result_rows, issue_rows, kept_rows):
            rows.clear()

    for i in range(spec.runs):
        agent = spec.agents[i % len(spec.agents)]
        tools = tool_names(agent, spec.tools_per_agent)
        behaviour = rng.choices(names, weights)[0]
        trace_id = hashlib.md5(f"{spec.seed}-{i}".encode()).hexdigest()
        run_id = trace_id[:16]
        at = spec.since + timedelta(seconds=rng.random() * span)
        called = {"confusion": [tools[1]], "skipped": []}.get(behaviour, [tools[0]])
        truth.runs[agent] += 1
        truth.behaviours[(agent, behaviour)] += 1
        truth.trace_ids.append(trace_id)
        for name in called:
            truth.calls[(agent, name)] += 1
        run_rows.append(
            {
                "trace_id": trace_id,
                "run_id": run_id,
                "agent": agent,
                "conversation_id": None,
                "start_time": at,
                "tools": called,
                "first_scored_at": at,
                "last_scored_at": at,
            }
        )
        if spec.kept:
            kept_rows.append(
                {
                    "trace_id": trace_id,
                    "run_id": run_id,
                    "agent": agent,
                    "user_text": f"request {i} for {agent}",
                    "final_response": f"answer {i}",
                    "status": "ok",
                    "duration_ms": 100.0 + i % 50,
                    "calls": len(called),
                    "run": {"trace_id": trace_id, "run_id": run_id, "agent": agent, "calls": []},
                }
            )
        failing = {
            "tools_selected": behaviour in ("confusion", "skipped"),
            "schema_check": behaviour == "missing_parameter",
            "tool_error_check": behaviour == "tool_error",
            "latency_check": behaviour == "slow_tool",
        }
        for scorer, failed in failing.items():
            rid = next_result
            next_result += 1
            result_rows.append(_result(rid, trace_id, run_id, agent, scorer, scorer, failed, at))
            if not failed:
                continue
            issue: dict[str, Any] = {"id": next_issue, "result_id": rid, "severity": "error", "tool": tools[0]}
            next_issue += 1
            if scorer == "tools_selected":
                issue.update(kind="missing_tool")
            elif scorer == "schema_check":
                issue.update(kind="missing_parameter", parameter="/p0", call_index=0)
            elif scorer == "tool_error_check":
                issue.update(kind="tool_error", call_index=0, actual="Timeout")
            else:
                issue.update(kind="tool_latency", call_index=0, actual=5000.0)
            issue_rows.append(_issue(issue))
        if rng.random() < spec.judge_share:
            rid = next_result
            next_result += 1
            row = _result(rid, trace_id, run_id, agent, "judge_tool_selection", "judge_tool_selection", False, at)
            cost = 0.0012
            truth.judge_cost += cost
            row["judge"] = {"model": "claude-sim", "input_tokens": 900, "output_tokens": 60, "cost_usd": cost}
            result_rows.append(row)
        flush()
    flush(final=True)
    if spec.kept:
        _definitions(engine, spec, spec.since)
    return truth


def _max_id(engine: sa.Engine, table: sa.Table) -> int:
    with engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.coalesce(sa.func.max(table.c.id), 0))).scalar_one())


def _result(
    rid: int, trace_id: str, run_id: str, agent: str, scorer: str, kind: str, failed: bool, at: datetime
) -> dict[str, Any]:
    return {
        "id": rid,
        "trace_id": trace_id,
        "run_id": run_id,
        "agent": agent,
        "scorer": scorer,
        "scorer_version": 1,
        "scorer_kind": kind,
        "params_hash": "0" * 16,
        "params": {},
        "status": "scored",
        "score": 0.0 if failed else 1.0,
        "threshold": 1.0,
        "passed": not failed,
        "reason": None,
        "degraded": None,
        "details": {},
        "judge": None,
        "scored_at": at,
    }


def _issue(values: dict[str, Any]) -> dict[str, Any]:
    row = {
        "parameter": None,
        "call_index": None,
        "call_id": None,
        "turn": None,
        "expected_tool": None,
        "expected": None,
        "actual": None,
        "detail": None,
    }
    row.update(values)
    return row


def _definitions(engine: sa.Engine, spec: Spec, seen: datetime) -> None:
    rows = []
    for agent in spec.agents:
        for k, name in enumerate(tool_names(agent, spec.tools_per_agent)):
            schema = {
                "type": "object",
                "properties": {"p0": {"type": "integer", "minimum": 1, "maximum": 14}, "q": {"type": "string"}},
                "required": ["p0"],
            }
            rows.append(
                {
                    "agent": agent,
                    "name": name,
                    "definition_hash": hashlib.sha256(f"{agent}{name}".encode()).hexdigest(),
                    "description": f"Tool number {k} of {agent}.",
                    "input_schema": schema,
                    "first_seen": seen,
                    "last_seen": seen,
                }
            )
    with engine.begin() as conn:
        conn.execute(sa.delete(tool_definitions).where(tool_definitions.c.agent.in_(list(spec.agents))))
        conn.execute(tool_definitions.insert(), rows)
