"""``monitor inspect``: decode record files and show the runs we rebuild from them.

This is how a user checks that the monitor reads their framework's spans right. Undecodable
records are reported (file, record number, reason) and skipped; they never stop the command.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from rich.console import Console
from rich.markup import escape
from rich.table import Table
from rich.tree import Tree

from monitor.ingest.decode import DecodeError, decode_logs, decode_traces
from monitor.ingest.files import read_records
from monitor.trajectory.build import RebuildRejected, build_runs
from monitor.trajectory.explain import SpanNote, explain_spans
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall
from monitor.trajectory.serialize import run_to_json
from monitor.trajectory.spans import LogEvent, SpanRecord

_MAX_CELL = 120


@dataclass
class InspectResult:
    runs: list[Run]
    records: int = 0
    spans: int = 0
    errors: list[str] = field(default_factory=list)
    notes: list[SpanNote] | None = None  # with ``explain``: what the rebuild made of every span


def load_runs(
    trace_files: Sequence[Path], log_files: Sequence[Path] = (), encoding: str = "auto", *, explain: bool = False
) -> InspectResult:
    spans: list[SpanRecord] = []
    logs: list[LogEvent] = []
    result = InspectResult(runs=[])
    for path, is_logs in [*((p, False) for p in trace_files), *((p, True) for p in log_files)]:
        try:
            records = read_records(path)
        except OSError as exc:
            result.errors.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        for number, value in enumerate(records, 1):
            result.records += 1
            try:
                if is_logs:
                    logs.extend(decode_logs(value, encoding))
                else:
                    decoded = decode_traces(value, encoding)
                    spans.extend(decoded)
                    result.spans += len(decoded)
            except DecodeError as exc:
                result.errors.append(f"{path} record {number}: {exc.reason}: {exc.detail}")
    rejected: list[RebuildRejected] = []
    result.runs = build_runs(spans, logs, rejected=rejected)
    result.errors.extend(f"not rebuilt: {exc}" for exc in rejected)
    if explain:
        result.notes = explain_spans(spans, logs, result.runs)
    return result


def _short(value: Any) -> str:
    if value is ABSENT:
        return "[dim]<not captured>[/dim]"
    if isinstance(value, Malformed):
        text = f"<malformed> {value.raw}"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    text = text.replace("[", "\\[")
    return text if len(text) <= _MAX_CELL else text[: _MAX_CELL - 1] + "…"


def _calls_table(calls: Sequence[ToolCall]) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("#", "tool", "arguments", "result / error", "ms", "how"):
        table.add_column(column, overflow="fold")
    for call in calls:
        outcome = (
            f"[red]{escape(call.error.type)}: {escape(call.error.message)}[/red]" if call.error else _short(call.result)
        )
        how = "executed" if call.executed else "[yellow]selected only[/yellow]"
        if call.step is not None:
            how += f" (step {call.step}.{call.part})"
        if call.kind != "function":
            how += f" \\[{call.kind}]"
        ms = f"{call.duration_ms:.1f}" if call.duration_ms is not None else ""
        table.add_row(str(call.index), escape(call.name), _short(call.args), outcome, ms, how)
    return table


def run_tree(run: Run, tree: Tree | None = None) -> Tree:
    """``run`` (and its nested runs) as a rich tree: agent, ids, user text, tools offered, calls, answer. Every name
    from the spans is escaped, so names that look like rich markup print as they are."""
    title = (
        f"[bold]{escape(run.agent or '<unnamed agent>')}[/bold]  trace {escape(run.trace_id)}  run {escape(run.run_id)}"
        f"  status {run.status}" + (f"  [red]forced: {escape(run.forced)}[/red]" if run.forced else "")
    )
    node = tree.add(title) if tree is not None else Tree(title)
    node.add(f"user: {_short(run.user_text) if run.user_text is not None else '[dim]<not captured>[/dim]'}")
    offered = run.tools_offered
    tools = "[dim]<not captured>[/dim]" if offered is None else escape(", ".join(t.name for t in offered))
    node.add(f"tools offered: {tools}")
    conventions = escape(", ".join(run.conventions))
    node.add(f"model calls: {len(run.steps)}  model: {escape(run.model or '-')}  conventions: {conventions}")
    if run.calls:
        node.add(_calls_table(run.calls))
    else:
        node.add("[dim]no tool calls[/dim]")
    answer = _short(run.final_response) if run.final_response is not None else "[dim]<not captured>[/dim]"
    node.add(f"answer: {answer}")
    if not run.content_captured:
        node.add("[yellow]content not captured: scorers needing arguments will say not applicable[/yellow]")
    for child in run.children:
        run_tree(child, node)
    return node


def _notes_table(notes: Sequence[SpanNote]) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("trace", "span", "name", "scope", "verdict", "why"):
        table.add_column(column, overflow="fold")
    for note in notes:
        scope = note.scope + (f" {note.scope_version}" if note.scope_version else "")
        verdict = "[yellow]generic[/yellow]" if note.verdict == "generic" else "[red]not read[/red]"
        table.add_row(
            escape(note.trace_id[:8]), escape(note.span_id), escape(note.name), escape(scope or "-"), verdict,
            escape(note.reason),
        )  # fmt: skip
    return table


def _render_notes(notes: Sequence[SpanNote], console: Console) -> None:
    """The spans not read (or read from generic evidence only), then a count per verdict and scope."""
    shown = [n for n in notes if n.verdict in ("generic", "not_read")]
    console.print()
    if shown:
        console.print(f"[bold]{len(shown)} of {len(notes)} spans not read by a known convention[/bold]")
        console.print(_notes_table(shown))
    else:
        console.print(f"every one of {len(notes)} spans read by a known convention (or structure only)")
    scopes: dict[tuple[str, str], dict[str, int]] = {}
    for note in notes:
        counts = scopes.setdefault((note.scope, note.scope_version), dict.fromkeys(_VERDICTS, 0))
        counts[note.verdict] += 1
    for (scope, version), counts in sorted(scopes.items()):
        tally = ", ".join(f"{counts[v]} {label}" for v, label in _VERDICTS.items())
        console.print(f"scope {escape(scope or '-')} {escape(version)}: {tally}", highlight=False)


_VERDICTS: Final = {"read": "read", "structure": "structure only", "generic": "generic", "not_read": "not read"}


def render(result: InspectResult, fmt: str, out: IO[str]) -> None:
    if fmt == "json":
        for run in result.runs:
            out.write(json.dumps(run_to_json(run), ensure_ascii=False, default=str) + "\n")
        for note in result.notes or ():
            out.write(json.dumps({"span_note": note.as_json()}, ensure_ascii=False) + "\n")
        return
    console = Console(file=out, soft_wrap=False, width=160)
    for run in result.runs:
        console.print(run_tree(run))
        console.print()
    console.print(f"{result.records} records, {result.spans} spans, {len(result.runs)} runs")
    for error in result.errors:
        console.print(f"[red]skipped[/red] {error}", markup=True, highlight=False)
    if result.notes is not None:
        _render_notes(result.notes, console)
