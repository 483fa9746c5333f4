"""Scorer throughput: runs/s of our reference scorers beside each peer's own implementation.

    .venv/bin/python bench/scorers.py [--cases 3000] [--distinct 1000] [--repeat 2] [--only TEXT] [--no-publish]

For each scorer, the same generated cases (tests/peers/cases.py: hypothesis, fixed seed;
``--distinct`` different cases cycled up to ``--cases`` runs) are scored by our scorer in this
process and by the peer's released code in its own environment (tests/peers/setup.sh), in the same
invocation. Both sides build their inputs first (our Runs and Expectations; the peer's own objects)
and time only the scoring loop, in-process, with ``time.perf_counter``; each loop runs ``--repeat``
times and the fastest pass counts. Peers run one after another, never beside a measurement.

Printed per scorer: runs/s of ours and of each peer implementation, and the ratio ours / peer
(against the peer's fastest implementation when it has two, e.g. Ragas' legacy and collections
metrics). The summary gives the ratio against the fastest peer of all and the smallest ratio; the
goal is ours ≥ 1× the fastest peer on every scorer. A case where the two sides disagree is counted and
printed (tests/peers/test_differential.py is the test that fails on it).

Our side is what the daemon pays per run: the score, the issues of every failed result (explained at
once, never deferred) and the full result record.

At the end the figures are published (:func:`bench.figures.publish`, ``bench/results/scorers.json``): per
scorer the ratio ours ÷ the fastest peer implementation, and the smallest of them. ``--only`` keeps the
scorers whose name contains the text (a development run; implies ``--no-publish``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.figures import Figure, publish  # noqa: E402
from monitor.scoring.base import ScorerConfigError  # noqa: E402
from monitor.scoring.result import ScoreResult  # noqa: E402
from tests.peers.cases import CONFIGS, Config, cases_for, our_inputs, our_scorer, peer_case, score_ours  # noqa: E402
from tests.peers.runner import run_peers  # noqa: E402


@dataclass(frozen=True)
class Bench:
    """One benchmarked scorer: its name, the configurations (ours + one per peer implementation), and the
    key and label of its published figure."""

    name: str
    configs: tuple[str, ...]
    key: str
    label: str


BENCHES = [
    Bench(
        "trajectory_match strict/exact (agentevals)",
        ("agentevals/strict/exact",),
        "trajectory_match_strict",
        "`trajectory_match` strict/exact vs agentevals",
    ),
    Bench(
        "trajectory_match superset/subset (agentevals)",
        ("agentevals/superset/subset",),
        "trajectory_match_superset",
        "`trajectory_match` superset/subset vs agentevals",
    ),
    Bench(
        "adk_tool_trajectory EXACT (ADK)",
        ("adk/trajectory/EXACT",),
        "adk_tool_trajectory_exact",
        "`adk_tool_trajectory` EXACT vs ADK",
    ),
    Bench(
        "adk_tool_trajectory ANY_ORDER (ADK)",
        ("adk/trajectory/ANY_ORDER",),
        "adk_tool_trajectory_any_order",
        "`adk_tool_trajectory` ANY_ORDER vs ADK",
    ),
    Bench(
        "adk_response_match (ADK ROUGE-1)",
        ("adk/response_match_score",),
        "adk_response_match",
        "`adk_response_match` vs ADK (rouge-score)",
    ),
    Bench(
        "ragas_tool_call_accuracy (Ragas)",
        ("ragas/legacy/tool_call_accuracy/strict_order=True", "ragas/collections/tool_call_accuracy/strict_order=True"),
        "ragas_tool_call_accuracy",
        "`ragas_tool_call_accuracy` vs Ragas",
    ),
    Bench(
        "ragas_tool_call_f1 (Ragas)",
        ("ragas/legacy/tool_call_f1", "ragas/collections/tool_call_f1"),
        "ragas_tool_call_f1",
        "`ragas_tool_call_f1` vs Ragas",
    ),
    Bench(
        "mastra_tool_call_accuracy (Mastra)",
        ("mastra/createToolCallAccuracyScorerCode",),
        "mastra_tool_call_accuracy",
        "`mastra_tool_call_accuracy` vs Mastra",
    ),
    Bench(
        "deepeval_tool_correctness names (DeepEval)",
        ("deepeval/names/default",),
        "deepeval_tool_correctness_names",
        "`deepeval_tool_correctness` names vs DeepEval",
    ),
    Bench(
        "deepeval_tool_correctness args+ordering (DeepEval)",
        ("deepeval/input_parameters/ordering",),
        "deepeval_tool_correctness_args_ordering",
        "`deepeval_tool_correctness` args + ordering vs DeepEval",
    ),
]


def _cases(config: Config, n: int, distinct: int) -> list[dict[str, Any]]:
    pool = cases_for(config.family, min(n, distinct))
    cases = [pool[i % len(pool)] for i in range(n)]
    if config.peer == "mastra":  # cases Mastra (and we) refuse at construction are not runs
        usable = []
        for case in cases:
            try:
                our_scorer(config, case)
            except ScorerConfigError:
                continue
            usable.append(case)
        cases = usable
    return cases


def _number(result: ScoreResult) -> float | str | None:
    return result.score if result.status == "scored" else f"{result.status}/{result.reason}"


def time_ours(config: Config, cases: list[dict[str, Any]], repeat: int) -> tuple[float, list[Any]]:
    """Seconds of the fastest pass over the prepared cases, and our number per case.

    Each result is built in full (score, issues of a failure, the record) and only its number is kept, as
    the peer scripts keep only the peer's float: neither side makes the garbage collector walk a growing
    list of result records while it is timed.
    """
    prepared = [(our_scorer(config, c), *our_inputs(config, c)) for c in cases]
    best = float("inf")
    scores: list[Any] = []
    for _ in range(repeat):
        start = time.perf_counter()
        scores = [_number(score_ours(scorer, runs, refs)) for scorer, runs, refs in prepared]
        best = min(best, time.perf_counter() - start)
    return best, scores


def _agree(config: Config, mine: Any, theirs: Any) -> bool:
    if isinstance(theirs, dict):
        return isinstance(mine, str)
    if isinstance(mine, str) or theirs is None:
        return False
    return abs(mine - float(theirs)) <= config.tolerance if config.tolerance else mine == float(theirs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", type=int, default=3000, help="runs per scorer (default 3000)")
    ap.add_argument("--distinct", type=int, default=1000, help="distinct generated cases, cycled (default 1000)")
    ap.add_argument("--repeat", type=int, default=2, help="timed passes per loop, fastest counts (default 2)")
    ap.add_argument("--only", help="only the scorers whose name contains this text (implies --no-publish)")
    ap.add_argument("--no-publish", action="store_true", help="print only, write no bench/results file")
    args = ap.parse_args()
    t0 = time.perf_counter()
    by_id = {c.id: c for c in CONFIGS}
    benches = [b for b in BENCHES if args.only is None or args.only in b.name]

    cases: dict[str, list[dict[str, Any]]] = {}
    for bench in benches:
        for cid in bench.configs:
            cases[cid] = _cases(by_id[cid], args.cases, args.distinct)
    t_gen = time.perf_counter() - t0

    docs: dict[str, dict[str, Any]] = {}
    for cid, cs in cases.items():
        config = by_id[cid]
        doc = docs.setdefault(config.peer, {"configs": [], "repeat": args.repeat})
        doc["configs"].append({"id": cid, "params": config.peer_params, "cases": [peer_case(config, c) for c in cs]})
    t1 = time.perf_counter()
    peers = run_peers(docs, parallel=False)
    t_peers = time.perf_counter() - t1
    for doc in peers.values():
        if isinstance(doc, Exception):
            print(f"error: {doc}", file=sys.stderr)
            return 2

    print(f"cases: {args.cases} runs per scorer ({args.distinct} distinct, cycled); best of {args.repeat} passes")
    print(f"{'scorer':52s} {'ours runs/s':>12s}  {'peer implementation':42s} {'peer runs/s':>11s} {'ratio':>8s}")
    rows: list[tuple[Bench, float, str, float]] = []
    disagreements = 0
    for bench in benches:
        first = by_id[bench.configs[0]]
        ours_s, mine = time_ours(first, cases[first.id], args.repeat)
        ours_rps = len(cases[first.id]) / ours_s
        best: tuple[float, str] | None = None
        for cid in bench.configs:
            config = by_id[cid]
            result = peers[config.peer]["by_id"][cid]
            peer_rps = len(result["scores"]) / result["elapsed_s"]
            disagreements += sum(not _agree(config, m, t) for m, t in zip(mine, result["scores"], strict=True))
            label = f"{config.peer} {cid.split('/', 1)[1]}"[:42]
            print(f"{bench.name:52s} {ours_rps:12,.0f}  {label:42s} {peer_rps:11,.0f} {ours_rps / peer_rps:7.1f}x")
            if best is None or peer_rps > best[0]:
                best = (peer_rps, label)
        assert best is not None
        rows.append((bench, ours_rps, best[1], best[0]))

    fastest = max(rows, key=lambda r: r[3])
    weakest = min(rows, key=lambda r: r[1] / r[3])
    print()
    print(
        f"fastest peer: {fastest[2]} at {fastest[3]:,.0f} runs/s; ours on that scorer {fastest[1]:,.0f} runs/s "
        f"= {fastest[1] / fastest[3]:.1f}x"
    )
    print(f"smallest ratio: {weakest[1] / weakest[3]:.2f}x ({weakest[0].name} vs {weakest[2]})")
    below = [r[0].name for r in rows if r[1] / r[3] < 1]
    print("goal ours >= 1x the peer on every scorer: " + ("met" if not below else f"NOT met for {', '.join(below)}"))
    print(f"disagreements with the peers in these runs: {disagreements}")
    print(
        f"bench wall time {time.perf_counter() - t0:.0f}s (case generation {t_gen:.0f}s, peers incl. start-up "
        f"{t_peers:.0f}s)"
    )
    if not (args.no_publish or args.only):
        publish("scorers", " ".join([".venv/bin/python bench/scorers.py", *sys.argv[1:]]), figures(rows, args.cases))
    return 1 if disagreements else 0


def figures(rows: list[tuple[Bench, float, str, float]], cases: int) -> list[Figure]:
    """Per scorer the ratio ours ÷ the fastest peer implementation on the same cases, then the smallest ratio."""
    out = [
        Figure(
            key=f"scorers_{bench.key}",
            label=bench.label,
            value=round(ours / peer, 2),
            unit="×",
            baseline=f"{label} on the same {cases:,} cases",
            goal=">= 1",
            detail=f"ours {ours:,.0f} runs/s, peer {peer:,.0f} runs/s",
        )
        for bench, ours, label, peer in rows
    ]
    bench, ours, label, peer = min(rows, key=lambda r: r[1] / r[3])
    out.append(
        Figure(
            key="scorers_smallest_ratio",
            label="Smallest ratio of a code scorer to its fastest peer",
            value=round(ours / peer, 2),
            unit="×",
            baseline=f"{label} on the same {cases:,} cases",
            goal=">= 1",
            detail=f"{bench.name}: ours {ours:,.0f} runs/s, peer {peer:,.0f} runs/s",
        )
    )
    return out


if __name__ == "__main__":
    sys.exit(main())
