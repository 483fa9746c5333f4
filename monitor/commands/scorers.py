"""``monitor scorers``: the scorer catalogue (kind, version, peer, parameters with defaults).

``--format table`` (default) prints a rich table; ``--format json`` a JSON array of
``{kind, version, peer, summary, needs, turn_mode, defaults}``. The peer column names the tool whose
numbers the scorer reproduces (SCORING.md §7); ``ours`` for our own checks.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from monitor.scoring import catalogue

__all__ = ["PEERS", "catalogue_json", "run_scorers"]

PEERS: dict[str, str] = {
    "tool_eval": "seed-000 ToolEvaluator",
    "tools_selected": "seed-001 toolsSelected",
    "tools_avoided": "seed-001 toolsAvoided",
    "tool_selection_f1": "seed-001 toolSelectionScore",
    "trajectory_match": "agentevals 0.0.9 trajectory match",
    "adk_tool_trajectory": "google-adk 2.13.0 tool_trajectory_avg_score",
    "adk_response_match": "google-adk 2.13.0 response_match_score",
    "ragas_tool_call_accuracy": "ragas 0.4.3 ToolCallAccuracy",
    "ragas_tool_call_f1": "ragas 0.4.3 ToolCallF1",
    "ragas_topic_adherence": "ragas 0.4.3 TopicAdherenceScore",
    "mastra_tool_call_accuracy": "@mastra/evals 1.10.2 tool-call-accuracy (code)",
    "deepeval_tool_correctness": "deepeval 4.3.1 ToolCorrectnessMetric",
    "judge_tool_selection": "@mastra/evals tool-call-accuracy (LLM)",
    "judge_argument_correctness": "deepeval ArgumentCorrectnessMetric",
    "judge_goal_accuracy": "ragas AgentGoalAccuracy",
    "judge_topic_adherence": "ragas TopicAdherenceScore",
    "judge_trajectory_quality": "agentevals trajectory judge / ADK rubric judges",
}


def catalogue_json() -> list[dict[str, Any]]:
    """Every registered scorer kind with its peer and default parameters."""
    out = []
    for kind, info in catalogue.catalogue().items():
        out.append(
            {
                "kind": kind,
                "version": info.version,
                "peer": PEERS.get(kind, "ours"),
                "summary": info.summary,
                "needs": list(info.needs),
                "turn_mode": info.turn_mode,
                "defaults": info.defaults,
            }
        )
    return out


def _params(defaults: dict[str, Any]) -> str:
    return "\n".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in defaults.items())


def run_scorers(fmt: str = "table", out: IO[str] | None = None) -> int:
    out = out or sys.stdout
    entries = catalogue_json()
    if fmt == "json":
        json.dump(entries, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    table = Table(show_header=True, header_style="bold", show_lines=True)
    for col in ("kind", "version", "peer", "parameters (defaults)"):
        table.add_column(col, overflow="fold")
    for e in entries:
        table.add_row(escape(e["kind"]), str(e["version"]), escape(e["peer"]), escape(_params(e["defaults"])))
    Console(file=out, width=160, highlight=False).print(table)
    return 0
