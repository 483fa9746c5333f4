"""Benchmark: CPU per run of the whole scoring stage, this tree against a baseline revision, in the same invocation.

``ScoringStage.score`` (every result of a run: checks, rule scorers, nested runs) on the runs of every recorded
framework fixture (``tests/fixtures/frameworks``), cycled up to ``--runs`` runs, in two configurations:

* ``checks``: the daemon's default stage as ``bench/gc_freeze.py`` builds it (the settings' checks, no rule set,
  every run sampled);
* ``rules``: the same plus a rule matching every run with reference data and reference scorers (``tool_eval``,
  ``adk_tool_trajectory``, ``trajectory_match``, ``ragas_tool_call_accuracy``, ``deepeval_tool_correctness``,
  ``adk_response_match``), so the reference scorers and their explanations run on every run.

Each measurement runs in a fresh subprocess with its tree first on ``sys.path``: the working tree, and the
``--baseline`` revision extracted with ``git archive`` (default: the revision before results were built once and
scorers explained only when needed). After one untimed warm-up pass (the daemon's steady state: compiled
validators, stems), ``--repeat`` passes are timed with ``time.process_time`` and the fastest counts; the two
trees alternate for ``--rounds`` rounds and each keeps its best. The figure is the ratio this tree ÷ baseline
(CPU per run), since the machine is shared and noisy.

    .venv/bin/python bench/scoring_stage.py [--runs 2000] [--repeat 3] [--rounds 2] [--baseline 25f8121]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "25f8121"
"""The revision before this change: every result rebuilt by ``stamp`` (``dataclasses.replace``), issues always built."""

RULES = {
    "rules": [
        {
            "name": "reference-everywhere",
            "match": {},
            "expect": {
                "expected_calls": [{"name": "get_weather", "args": {"city": "Paris"}}, {"name": "get_forecast"}],
                "expected_response": "The weather in Paris is sunny with a high of 21 degrees.",
            },
            "scorers": {
                "tool_eval": {},
                "adk_tool_trajectory": {},
                "trajectory_match": {},
                "ragas_tool_call_accuracy": {},
                "deepeval_tool_correctness": {},
                "adk_response_match": {},
            },
        }
    ]
}
CONFIGS = ("checks", "rules")


def measure(tree: Path, runs: int, repeat: int) -> dict[str, dict[str, float]]:
    """CPU seconds per run of ``ScoringStage.score`` for each configuration (in this process, ``tree``'s code)."""
    sys.path.insert(0, str(tree))
    from datetime import UTC, datetime

    from monitor.rules import RuleSet
    from monitor.sampling import Sampler
    from monitor.scoring.stage import ScoringStage
    from monitor.settings import Settings
    from tests.scoring.test_stage import all_fixture_runs

    assert Path(sys.modules["monitor"].__file__ or "").is_relative_to(tree), "monitor imported from another tree"
    fixtures = all_fixture_runs()
    work = [fixtures[i % len(fixtures)] for i in range(runs)]
    settings = Settings.model_validate({"sampling": {"rate": 1.0}})
    out: dict[str, dict[str, float]] = {}
    for config in CONFIGS:
        ruleset = RuleSet.from_mapping(RULES) if config == "rules" else None
        stage = ScoringStage(settings, ruleset, Sampler(settings.sampling), lambda: datetime.now(UTC))
        results = 0
        for run in work:  # warm-up: compiled validators, stems, scorer instances
            results += len(stage.score(run))
        best = float("inf")
        for _ in range(repeat):
            start = time.process_time()
            for run in work:
                stage.score(run)
            best = min(best, time.process_time() - start)
        out[config] = {"cpu_per_run_s": best / len(work), "results_per_run": results / len(work)}
    return out


def extract(rev: str, into: Path) -> Path:
    """The ``monitor`` and ``tests`` trees of ``rev`` (``git archive``), under ``into``."""
    archive = into / "baseline.tar"
    with archive.open("wb") as fh:
        subprocess.run(["git", "archive", rev, "monitor", "tests"], cwd=ROOT, check=True, stdout=fh)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "tree", filter="data")
    return into / "tree"


def child(tree: Path, runs: int, repeat: int) -> dict[str, dict[str, float]]:
    cmd = [sys.executable, __file__, "--child", str(tree), "--runs", str(runs), "--repeat", str(repeat)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=tree).stdout
    doc: dict[str, dict[str, float]] = json.loads(out.strip().splitlines()[-1])
    return doc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=2000, help="runs scored per pass (fixture runs, cycled)")
    ap.add_argument("--repeat", type=int, default=3, help="timed passes per process, fastest counts")
    ap.add_argument("--rounds", type=int, default=2, help="alternating (baseline, this tree) process pairs")
    ap.add_argument("--baseline", default=BASELINE, help=f"git revision to compare against (default {BASELINE})")
    ap.add_argument("--no-publish", action="store_true", help="print only, write no bench/results file")
    ap.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    ns = ap.parse_args()
    if ns.child is not None:
        print(json.dumps(measure(ns.child, ns.runs, ns.repeat)))
        return 0

    best: dict[str, dict[str, float]] = {"baseline": {}, "current": {}}
    results_per_run: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="scoring-stage-") as tmp:
        trees = {"baseline": extract(ns.baseline, Path(tmp)), "current": ROOT}
        for _ in range(ns.rounds):
            for name, tree in trees.items():
                for config, m in child(tree, ns.runs, ns.repeat).items():
                    prev = best[name].get(config, float("inf"))
                    best[name][config] = min(prev, m["cpu_per_run_s"])
                    if name == "current":
                        results_per_run[config] = m["results_per_run"]

    print(f"{ns.runs} runs per pass, best of {ns.repeat} passes × {ns.rounds} rounds; baseline {ns.baseline}")
    rows: list[tuple[str, float, float]] = []
    for config in CONFIGS:
        before, after = best["baseline"][config] * 1e6, best["current"][config] * 1e6
        rows.append((config, before, after))
        print(
            f"  {config:7s} {results_per_run[config]:4.1f} results/run  baseline {before:7.1f} µs/run  "
            f"this tree {after:7.1f} µs/run  ratio {after / before:.2f}"
        )
    if ns.no_publish:
        return 0
    sys.path.insert(0, str(ROOT))
    from bench.figures import Figure, publish

    labels = {
        "checks": "Scoring stage CPU per run, default checks",
        "rules": "Scoring stage CPU per run, checks + reference scorers",
    }
    figures = [
        Figure(
            key=f"scoring_stage_{config}",
            label=labels[config],
            value=round(after / before, 2),
            unit="×",
            baseline=f"the stage at {ns.baseline} on the same runs",
            goal="<= 1",
            detail=f"{after:,.0f} µs vs {before:,.0f} µs per run, {results_per_run[config]:.1f} results per run",
        )
        for config, before, after in rows
    ]
    publish("scoring_stage", " ".join([".venv/bin/python bench/scoring_stage.py", *sys.argv[1:]]), figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
