"""``monitor eval``: score golden datasets and gate CI on the result (SCORING.md §6).

Exit codes (§6.7): ``0`` suite passed and no case errored; ``1`` suite failed (pass rate,
``min_mean`` or a baseline regression; takes precedence); ``2`` usage, configuration or dataset
error, nothing scored; ``3`` no quality failure but a gated criterion could not run (a judge while judges are not
configured; ``--no-judges`` skips such criteria instead), some case errored, or no case produced a verdict.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from monitor.evaluation.console import EvalConsole
from monitor.evaluation.engine import EvalOptions, evaluate_dataset, missing_sources, prepare, utc_now
from monitor.evaluation.gate import DatasetVerdict, SuiteVerdict, suite_verdict
from monitor.evaluation.gate_config import apply_gate_config, load_gate_config
from monitor.evaluation.report import BaselineError, junit_xml, load_baseline, report_json
from monitor.evaluation.traces import TraceIndex, TraceLoadError, load_traces
from monitor.rules.datasets.loader import load_paths
from monitor.rules.datasets.model import DatasetError

if TYPE_CHECKING:
    from monitor.evaluation.runners import Runner

__all__ = ["EvalArgs", "run_eval"]


@dataclass
class EvalArgs:
    """The parsed ``monitor eval`` arguments (see ``monitor eval --help``)."""

    paths: Sequence[Path]
    config: Path | None = None
    traces: Sequence[Path] = ()
    runs: int | None = None
    judges: bool = True
    report: Path | None = None
    junit: Path | None = None
    baseline: Path | None = None
    tolerance: float = 0.0
    skip_unsupported: bool = False
    agent: str | None = None
    executor: str | None = None
    model: str | None = None
    runner: str | None = None
    case_timeout: float = 300.0
    extra: dict[str, object] = field(default_factory=dict)


class UsageError(Exception):
    """Bad command-line usage (exit 2)."""


def _runner(args: EvalArgs) -> Runner | None:
    chosen = [
        name for name, v in (("--agent", args.agent), ("--executor", args.executor), ("--runner", args.runner)) if v
    ]
    if len(chosen) > 1:
        raise UsageError(f"give only one of --agent, --executor and --runner (got {', '.join(chosen)})")
    if args.model and not args.executor:
        raise UsageError("--model goes with --executor")
    if not chosen:
        return None
    from monitor.evaluation import runners

    try:
        if args.agent:
            return runners.in_process_runner(args.agent, timeout_s=args.case_timeout)
        if args.executor:
            if not args.model:
                raise UsageError("--executor needs --model (an Anthropic model name)")
            kind = args.executor.removeprefix("anthropic-")
            if kind not in ("select", "loop"):
                raise UsageError(f"unknown executor {args.executor!r}: use anthropic-select or anthropic-loop")
            return runners.anthropic_executor("select" if kind == "select" else "loop", args.model)
        assert args.runner is not None
        return runners.command_runner(args.runner, timeout_s=args.case_timeout)
    except runners.RunnerFailed as exc:
        raise UsageError(f"cannot set up the runner: {exc}") from None


def run_eval(args: EvalArgs, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Run ``monitor eval``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    if args.runs is not None and args.runs < 1:
        print(f"monitor eval: --runs must be at least 1, got {args.runs}", file=err)
        return 2
    if args.tolerance < 0:
        print(f"monitor eval: --tolerance must not be negative, got {args.tolerance}", file=err)
        return 2
    try:
        datasets = load_paths(args.paths, skip_unsupported=args.skip_unsupported)
        if args.config is not None:
            datasets = apply_gate_config(datasets, load_gate_config(args.config))
        prepared = [prepare(ds, judges=args.judges) for ds in datasets]
        runner = _runner(args)
        traces: TraceIndex | None = load_traces(args.traces) if args.traces else None
        baseline = load_baseline(args.baseline) if args.baseline is not None else None
    except DatasetError as exc:
        print(f"dataset error: {exc}", file=err)
        return 2
    except (UsageError, TraceLoadError, BaselineError) as exc:
        print(f"monitor eval: {exc}", file=err)
        return 2
    options = EvalOptions(runs=args.runs, judges=args.judges, traces=traces, runner=runner)
    missing = missing_sources(prepared, options)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        print(
            f"monitor eval: no actual trajectory for {shown}: record one in the dataset, or give --traces, "
            "--agent, --executor or --runner",
            file=err,
        )
        return 2

    console = EvalConsole(out)
    verdicts: list[DatasetVerdict] = []
    total = sum(len(p.dataset.cases) for p in prepared)
    with console.progress(total) as hook:
        options.progress = hook
        for p in prepared:
            verdicts.append(evaluate_dataset(p, options))
    suite: SuiteVerdict = suite_verdict(verdicts, baseline, args.tolerance, judges_off=not args.judges)
    console.summary(suite)
    try:
        if args.report is not None:
            args.report.write_text(
                json.dumps(report_json(suite, created_at=utc_now()), ensure_ascii=False, indent=2, default=str) + "\n",
                encoding="utf-8",
            )
        if args.junit is not None:
            args.junit.write_bytes(junit_xml(suite))
    except OSError as exc:
        print(f"monitor eval: cannot write the report: {exc}", file=err)
        return 2
    return suite.exit_code
