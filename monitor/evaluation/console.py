"""Console output of ``monitor eval`` (rich): progress, one line per case, the scorer table, the totals.

Numbers compared with a bound (a score with its threshold, a mean with ``min_mean`` or a baseline)
are printed with enough digits that a failing value never reads as equal to its bound; values in
issues are JSON (``"42"`` the string, ``42`` the number).

The last line is always ``N passed, N failed`` with ``, N errored`` appended when non-zero.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from monitor.evaluation.gate import CaseVerdict, SuiteVerdict
from monitor.evaluation.report import bound_text, pair_text, score_text

__all__ = ["EvalConsole"]

_STATUS = {"passed": "[green]PASS [/green]", "failed": "[red]FAIL [/red]", "errored": "[yellow]ERROR[/yellow]"}


class EvalConsole:
    """Writes the human-readable output of an evaluation to ``out``."""

    def __init__(self, out: IO[str], *, width: int | None = None) -> None:
        if width is None and not (hasattr(out, "isatty") and out.isatty()):
            width = 160
        self.console = Console(file=out, soft_wrap=True, width=width, highlight=False)

    @contextmanager
    def progress(self, total: int) -> Iterator[ProgressHook]:
        """A progress bar over ``total`` cases (transient; nothing is drawn when not a terminal)."""
        bar = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        with bar:
            task = bar.add_task("cases", total=total)
            yield ProgressHook(self, bar, task)

    def case_line(self, case: CaseVerdict) -> None:
        line = f"{_STATUS[case.status]} {escape(case.dataset)}/{escape(case.case_id)}"
        failing = case.failing
        if failing:
            line += "  " + escape("; ".join(pair_text(p) for p in failing))
        self.console.print(line)

    def summary(self, suite: SuiteVerdict) -> None:
        table = Table(title=None, show_header=True, header_style="bold", box=None, pad_edge=False)
        for col in ("dataset", "scorer", "kind", "gate", "mean", "pass rate", "passed", "failed", "errored", "n/a"):
            table.add_column(
                col, justify="right" if col in ("mean", "pass rate", "passed", "failed", "errored", "n/a") else "left"
            )
        for d in suite.datasets:
            for s in d.scorers:
                rate = s.pass_rate
                mean = "-" if s.mean is None else f"{s.mean:.3f}"
                if s.min_mean is not None:
                    if s.mean is not None and (float(mean) >= s.min_mean) != (s.mean >= s.min_mean):
                        mean = score_text(s.mean, s.min_mean, digits=4)
                    mean += f" (min {bound_text(s.min_mean)}{'' if s.min_mean_ok else ' [red]✗[/red]'})"
                table.add_row(
                    escape(d.name),
                    escape(s.scorer),
                    escape(s.kind),
                    "yes" if s.gated else "-",
                    mean,
                    "-" if rate is None else f"{float(rate):.1%}",
                    str(s.passed),
                    str(s.failed),
                    str(s.errored),
                    str(s.not_applicable),
                )
        self.console.print()
        self.console.print(table)
        for d in suite.datasets:
            rate = d.pass_rate
            shown = "no verdict" if rate is None else f"{d.passed}/{d.passed + d.failed} ({float(rate):.1%})"
            verdict = "[green]passed[/green]" if d.suite_passed else "[red]FAILED[/red]"
            why = ""
            if d.cannot_run and not suite.judges_off and d.suite_passed:
                verdict = "[yellow]NOT RUN[/yellow]"
                why = " (a gated criterion cannot run)"
            if not d.rate_ok:
                why = f" (below min_pass_rate {d.gate.min_pass_rate:g})"
            elif not d.min_mean_ok:
                why = " (a scorer's mean is below its min_mean)"
            self.console.print(f"{escape(d.name)}: pass rate {shown}, gate {verdict}{why}")
        for d in suite.datasets:
            if d.cannot_run and suite.judges_off:
                self.console.print(f"{escape(d.name)}: not gated (--no-judges): {escape(', '.join(d.cannot_run))}")
        for dataset, sid in suite.cannot_run:
            self.console.print(
                f"[yellow]error[/yellow] {escape(dataset)}: gated criterion {escape(sid)!r} cannot run: LLM judges are "
                "not configured (judges_disabled on every case). Configure a judge (ANTHROPIC_API_KEY, docs/eval.md), "
                "or pass --no-judges to skip judge criteria, or remove it from gate.scorers"
            )
        for r in suite.regressions:
            self.console.print(
                f"[red]regression[/red] {escape(r.dataset)}/{escape(r.scorer)}: mean "
                f"{score_text(r.current, r.baseline - r.tolerance, digits=4)} < baseline {bound_text(r.baseline)} "
                f"(tolerance {bound_text(r.tolerance)})"
            )
        last = f"{suite.passed} passed, {suite.failed} failed"
        if suite.errored:
            last += f", {suite.errored} errored"
        self.console.print(last)


class ProgressHook:
    """Called once per finished case: prints its line and advances the bar."""

    def __init__(self, owner: EvalConsole, bar: Progress, task: object) -> None:
        self.owner = owner
        self.bar = bar
        self.task = task

    def __call__(self, case: CaseVerdict) -> None:
        self.owner.case_line(case)
        self.bar.advance(self.task)  # type: ignore[arg-type]
