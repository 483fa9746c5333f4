"""``monitor eval``: score golden datasets and gate CI on the result (SCORING.md §6).

Exit codes (§6.7): ``0`` suite passed and no case errored; ``1`` suite failed (pass rate,
``min_mean`` or a baseline regression; takes precedence); ``2`` usage, configuration or dataset
error, nothing scored; ``3`` no quality failure but a gated criterion could not run (a judge while judges are not
configured; ``--no-judges`` skips such criteria instead), some case errored, or no case produced a verdict.

Judges (SCORING.md §4, docs/eval.md "Offline: monitor eval with judges, Message Batches"): unless ``--no-judges``,
when some dataset has a judge scorer, the monitor's settings are loaded (``$MONITOR_CONFIG`` and ``MONITOR_*``
variables: the ``judge`` section) and, when an API key is found (``judge.api_key_file`` or the variable
``judge.api_key_env``, default ``ANTHROPIC_API_KEY``), the judges run on the real SDK with the settings' budgets:
directly (``monitor.judging.batches.DirectJudge``, ``judge.concurrency`` at once) or, with ``--judge-batch`` (or
``judge.batch: true``), through the Message Batches API at half price (``BatchJudge``), the batches in flight kept
in the SQLite file ``--batch-state`` so that a killed run, started again, resumes them instead of paying twice.
Without a key, judge criteria cannot run: exit 3 when one is gated. A judge that errs (API unavailable, budget
spent, invalid output) errs its case: exit 3, never a pass.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from monitor.evaluation.console import EvalConsole
from monitor.evaluation.engine import (
    EvalOptions,
    JudgeDriver,
    PreparedDataset,
    evaluate_datasets,
    missing_sources,
    prepare,
    utc_now,
)
from monitor.evaluation.gate import DatasetVerdict, SuiteVerdict, suite_verdict
from monitor.evaluation.gate_config import apply_gate_config, load_gate_config
from monitor.evaluation.report import BaselineError, junit_xml, load_baseline, report_json
from monitor.evaluation.traces import TraceIndex, TraceLoadError, load_traces
from monitor.rules.datasets.loader import load_paths
from monitor.rules.datasets.model import DatasetError
from monitor.scoring.judges.base import Judge

if TYPE_CHECKING:
    from monitor.evaluation.runners import Runner
    from monitor.settings import Settings

__all__ = ["DEFAULT_BATCH_STATE", "EvalArgs", "run_eval"]

DEFAULT_BATCH_STATE = Path(".monitor-eval-batches.sqlite")
"""Where ``--judge-batch`` keeps its batches in flight unless ``--batch-state`` says otherwise (working directory)."""

BATCH_RESULTS_DAYS = 29
"""The API keeps a batch's results this long: older ended batches are forgotten from the state file."""


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
    judge_batch: bool | None = None
    """``--judge-batch`` / ``--no-judge-batch``; None: the ``judge.batch`` setting."""
    batch_state: Path | None = None
    """``--batch-state``: the SQLite ledger of the batches in flight (default :data:`DEFAULT_BATCH_STATE`)."""
    batch_timeout: float | None = None
    """``--batch-timeout``: seconds to wait for the batches (default 25 hours: a batch expires after 24)."""
    settings: Settings | None = None
    """The monitor's settings (the ``judge`` section); None: loaded from ``$MONITOR_CONFIG`` and the environment
    when a judge has to run."""
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


class _JudgeSetup:
    """The judge driver of one ``monitor eval`` run and what it must close."""

    def __init__(self) -> None:
        self.driver: JudgeDriver | None = None
        self.closers: list[Any] = []
        self.stats: Any = None
        self.batched = False

    def close(self) -> None:
        for close in reversed(self.closers):
            close()


def _needs_judges(prepared: Sequence[PreparedDataset]) -> bool:
    return any(isinstance(s, Judge) for p in prepared for s in p.scorers)


def _judge_setup(args: EvalArgs, err: IO[str]) -> _JudgeSetup:
    """The driver that runs the judges (None when no key is configured). Raises :class:`UsageError` for bad
    settings, an unreadable key file or an unusable ``--batch-state``."""
    setup = _JudgeSetup()
    settings = args.settings
    if settings is None:
        from monitor.settings import SettingsError, load_settings

        try:
            settings = load_settings()
        except SettingsError as exc:
            raise UsageError(f"the judge settings are invalid:\n{exc}") from None
    judge = settings.judge
    try:
        key = judge.api_key()
    except OSError as exc:
        raise UsageError(f"cannot read the judge API key file {judge.api_key_file}: {exc.strerror or exc}") from None
    if key is None:
        where = f"judge.api_key_file ({judge.api_key_file})" if judge.api_key_file else f"${judge.api_key_env}"
        print(
            f"monitor eval: no judge API key ({where} is empty): judge criteria cannot run; set the key, or pass "
            "--no-judges to skip them",
            file=err,
        )
        return setup
    import anthropic

    from monitor.judging.batches import BatchJudge, DirectJudge
    from monitor.judging.budget import JudgeBudget

    client = anthropic.Anthropic(
        api_key=key.get_secret_value(),
        base_url=judge.base_url,
        timeout=judge.timeout_s,
        max_retries=judge.max_retries,
    )
    setup.closers.append(client.close)
    budget = JudgeBudget.from_settings(judge, clock=lambda: datetime.now(UTC))
    batched = judge.batch if args.judge_batch is None else args.judge_batch
    if not batched:
        direct = DirectJudge(client, judge, budget=budget)
        setup.driver, setup.stats = direct, direct.stats
        return setup
    from monitor.store.ledger import SqlBatchLedger

    path = args.batch_state or DEFAULT_BATCH_STATE
    try:
        ledger = SqlBatchLedger.open(f"sqlite:///{path}")
    except Exception as exc:  # a directory, no permission, not a SQLite file, a newer schema
        setup.close()
        raise UsageError(f"cannot open the batch state file {path}: {exc}") from None
    setup.closers.append(ledger.close)
    ledger.prune(datetime.now(UTC) - timedelta(days=BATCH_RESULTS_DAYS), purpose="eval")
    batches = BatchJudge(client, ledger, judge, purpose="eval", budget=budget)
    if args.batch_timeout is not None:
        batches.timeout_s = args.batch_timeout
    setup.driver, setup.stats, setup.batched = batches, batches.stats, True
    return setup


def _judge_summary(setup: _JudgeSetup) -> str | None:
    stats = setup.stats
    if stats is None or not (stats.requests or stats.resumed or stats.refused or stats.batches):
        return None
    parts = [f"{stats.requests} request{'s' if stats.requests != 1 else ''}"]
    if setup.batched:
        parts.append(f"{stats.batches} new batch{'es' if stats.batches != 1 else ''}")
        if stats.resumed:
            parts.append(f"{stats.resumed} resumed from earlier batches")
    if stats.refused:
        parts.append(f"{stats.refused} stopped by the budget")
    cost = "cost unknown (a model without a price)" if stats.usd is None else f"${stats.usd:.4f}"
    return f"judges: {', '.join(parts)}, {cost}{' (batch price)' if setup.batched else ''}"


@contextmanager
def _judges(args: EvalArgs, prepared: Sequence[PreparedDataset], err: IO[str]) -> Iterator[_JudgeSetup]:
    setup = _judge_setup(args, err) if args.judges and _needs_judges(prepared) else _JudgeSetup()
    try:
        yield setup
    finally:
        setup.close()


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
    if args.batch_timeout is not None and args.batch_timeout <= 0:
        print(f"monitor eval: --batch-timeout must be positive, got {args.batch_timeout}", file=err)
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
    try:
        with _judges(args, prepared, err) as setup:
            options.judge = setup.driver
            with console.progress(total) as hook:
                options.progress = hook
                verdicts = evaluate_datasets(prepared, options)
            summary = _judge_summary(setup)
    except UsageError as exc:
        print(f"monitor eval: {exc}", file=err)
        return 2
    if summary is not None:
        print(summary, file=err)
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
