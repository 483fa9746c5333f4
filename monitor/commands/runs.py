"""``monitor runs`` and ``monitor show``: the scored runs in the store, to be looked at.

``monitor runs`` lists stored runs, newest first, filtered by agent, tool called, failure kind, failed scorer and
time (the run's start; see :mod:`monitor.store.browse`), as a table or JSON lines. ``monitor show TRACE_ID`` prints
every run of one trace as ``monitor inspect`` prints a run (rebuilt from the trajectory the store kept, redacted
and capped by ``store.summaries``), followed by its scores and issues, and the link to the tracing UI
(``tracing.url_template``). Trace ids are always printed whole.

Exit codes: ``0`` success (``runs`` also when nothing matches); ``1`` (``show``) the trace is not in the store,
or none of its runs' trajectories was kept (its scores are printed all the same); ``2`` a bad argument, invalid
settings, a SQLite store file that does not exist, or a store whose schema predates the kept runs (revision
0004); ``3`` the store cannot be reached.

Both commands only read: they never migrate the store nor create a SQLite file.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import sqlalchemy as sa
from rich.console import Console
from rich.table import Table
from rich.text import Text

from monitor.commands.inspect import run_tree
from monitor.scoring.result import FailureKind, NoteKind
from monitor.settings import Settings, SettingsError, load_settings, mask_url
from monitor.store import SqlResultStore, StoreUnavailable
from monitor.store.browse import (
    REQUIRED_REVISION,
    RunDetail,
    RunRow,
    SchemaTooOld,
    ScoreRow,
    check_browsable,
    get_trace,
    list_runs,
    traces_starting_with,
)
from monitor.store.sql import normalise_url
from monitor.trajectory.model import Run
from monitor.trajectory.serialize import run_from_json

__all__ = ["EXIT_NOT_FOUND", "EXIT_UNAVAILABLE", "EXIT_USAGE", "RunsArgs", "parse_when", "run_runs", "run_show"]

EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3

MAX_LIMIT = 10_000
"""``--limit`` at most (page with ``--offset``)."""

_TABLE_WIDTH = 100_000
"""The run list is as wide as its cells: trace ids and links are never cut, whatever the terminal."""
_SHOW_WIDTH = 160
"""As ``monitor inspect``."""
_MAX_NAME = 120
"""Agent and tool names longer than this are shortened in the run list (JSON lines keep them whole)."""

KINDS = frozenset(k.value for k in FailureKind) | frozenset(k.value for k in NoteKind)

_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


class UsageError(Exception):
    """A bad argument or setting (exit 2)."""


@dataclass
class RunsArgs:
    """The parsed ``monitor runs`` arguments (see ``monitor runs --help``)."""

    agents: Sequence[str] | None = None
    tools: Sequence[str] | None = None
    kinds: Sequence[str] | None = None
    failed_scorers: Sequence[str] | None = None
    since: str | None = None
    until: str | None = None
    limit: int = 50
    offset: int = 0
    format: str = "table"
    config: Path | None = None
    settings: Settings | None = None
    """Settings to use instead of loading them from ``config`` / the environment."""


def parse_when(text: str, now: datetime) -> datetime:
    """``--since``/``--until``: an ISO 8601 date (midnight UTC) or date-time (naive: UTC; ``Z`` or an offset), or a
    duration before ``now`` such as ``90m``, ``24h``, ``7d``, ``2w``. Raises :class:`UsageError`."""
    value = text.strip()
    match = _DURATION.fullmatch(value)
    try:
        if match:
            return now - timedelta(**{_UNITS[match.group(2)]: float(match.group(1))})
        parsed = datetime.fromisoformat(value)
    except OverflowError:
        raise UsageError(f"{text!r} is too far back") from None
    except ValueError:
        raise UsageError(
            f"{text!r} is neither an ISO 8601 date or date-time (2026-11-24, 2026-11-24T08:00:00Z) nor a duration "
            "before now (90m, 24h, 7d, 2w)"
        ) from None
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def _when(text: str | None, option: str, now: datetime) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_when(text, now)
    except UsageError as exc:
        raise UsageError(f"{option}: {exc}") from None


def _settings(given: Settings | None, config: Path | None) -> Settings:
    if given is not None:
        return given
    try:
        return load_settings(config)
    except SettingsError as exc:
        raise UsageError(str(exc)) from None


class _SchemaMessage(Exception):
    """The store cannot be browsed as it is (exit 2)."""


@contextmanager
def _store(settings: Settings) -> Iterator[SqlResultStore]:
    """The store of ``settings``, read only: no migration, no new SQLite file. Raises :class:`UsageError` (bad URL,
    no such file), :class:`_SchemaMessage` and :class:`StoreUnavailable`."""
    url = settings.store.url
    shown = mask_url(url)
    try:
        parsed = normalise_url(url)
    except sa.exc.ArgumentError as exc:
        raise UsageError(f"store.url = {shown!r} is not a database URL: {exc}") from None
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        plain_file = database not in ("", ":memory:") and not database.startswith("file:")  # not memory, not a URI
        if plain_file and not Path(database).is_file():
            raise UsageError(
                f"there is no store at {shown}: the file {database} does not exist (the daemon creates it when it "
                "first runs). Fix: point store.url at the daemon's store (--config FILE, or MONITOR_STORE__URL)"
            )
    try:
        store = SqlResultStore(
            url,
            connect_timeout_s=settings.store.connect_timeout_s,
            statement_timeout_s=settings.store.statement_timeout_s,
        )
    except (ValueError, ImportError, sa.exc.ArgumentError) as exc:
        raise UsageError(f"store.url = {shown!r}: {exc}") from None
    try:
        check_browsable(store)
        yield store
    except SchemaTooOld as exc:
        if exc.current is None:
            found = f"the store at {shown} has no monitor schema (no revision: never migrated, or not a store)"
        else:
            found = f"the store's schema is at revision {exc.current}"
        raise _SchemaMessage(
            f"{found}; looking at runs needs revision {REQUIRED_REVISION} or later. Fix: run `monitor run` once "
            "with store.migrate_on_start: true (the default) to migrate it; runs scored before the migration "
            "have no kept trajectory"
        ) from None
    except StoreUnavailable as exc:
        raise StoreUnavailable(f"{shown}: {exc}") from exc  # the driver's message names no password
    finally:
        store.close()


def _guarded(prog: str, err: IO[str], body: Callable[[], int]) -> int:
    """Run ``body()`` (returns the exit code), turning the expected failures into a message and an exit code."""
    try:
        code = body()
    except UsageError as exc:
        print(f"{prog}: {exc}", file=err)
        return EXIT_USAGE
    except _SchemaMessage as exc:
        print(f"{prog}: {exc}", file=err)
        return EXIT_USAGE
    except StoreUnavailable as exc:
        print(f"{prog}: cannot reach the store at {exc}", file=err)
        return EXIT_UNAVAILABLE
    return code


# ----------------------------------------------------------------------------- monitor runs


def _names(values: Sequence[str] | None, option: str) -> list[str] | None:
    if values is None:
        return None
    cleaned = [v.strip() for v in values]
    if any(not v for v in cleaned):
        raise UsageError(f"{option} needs a value")
    return cleaned


def _check_kinds(kinds: list[str] | None) -> None:
    for kind in kinds or ():
        if kind not in KINDS:
            raise UsageError(
                f"--kind {kind!r} is not a failure kind; the kinds (SCORING §5.3) are: "
                + ", ".join(sorted(k.value for k in FailureKind))
                + "; notes: "
                + ", ".join(sorted(k.value for k in NoteKind))
            )


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.isoformat()


def _tool_counts(tools: Sequence[str]) -> str:
    counts: dict[str, int] = {}
    for name in tools:
        counts[name] = counts.get(name, 0) + 1
    return ", ".join(_cut(n) if c == 1 else f"{_cut(n)} ×{c}" for n, c in counts.items())


def _cut(name: str) -> str:
    return name if len(name) <= _MAX_NAME else name[: _MAX_NAME - 1] + "…"


def run_json(row: RunRow, link: str | None) -> dict[str, Any]:
    """One line of ``monitor runs --format json``."""
    return {
        "trace_id": row.trace_id,
        "run_id": row.run_id,
        "agent": row.agent,
        "conversation_id": row.conversation_id,
        "start_time": _iso(row.start_time),
        "first_scored_at": _iso(row.first_scored_at),
        "last_scored_at": _iso(row.last_scored_at),
        "tools": list(row.tools),
        "failed_scorers": list(row.failed_scorers),
        "errored_scorers": list(row.errored_scorers),
        "issue_kinds": list(row.issue_kinds),
        "note_kinds": list(row.note_kinds),
        "kept": row.kept,
        "user_text": row.user_text,
        "link": link,
    }


def _runs_table(rows: Sequence[RunRow], settings: Settings) -> Table:
    linked = settings.tracing.url_template is not None
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    table.add_column("trace id", no_wrap=True)
    table.add_column("run", no_wrap=True)
    table.add_column("agent", overflow="fold", max_width=40)
    table.add_column("start (UTC)", no_wrap=True)
    table.add_column("tools called", overflow="fold", max_width=60)
    table.add_column("failed scorers", overflow="fold", max_width=50)
    table.add_column("issues", overflow="fold", max_width=50)
    table.add_column("kept", no_wrap=True)
    if linked:
        table.add_column("link", no_wrap=True)
    for row in rows:
        failed = Text(", ".join(row.failed_scorers), style="red")
        if row.errored_scorers:
            failed.append((", " if row.failed_scorers else "") + ", ".join(f"{s} (error)" for s in row.errored_scorers))
        issues = Text(", ".join(row.issue_kinds))
        if row.note_kinds:
            issues.append((", " if row.issue_kinds else "") + ", ".join(f"note: {k}" for k in row.note_kinds), "dim")
        cells: list[Text | str] = [
            Text(row.trace_id),
            Text(row.run_id),
            Text(_cut(row.agent) if row.agent is not None else "-"),
            row.time.strftime("%Y-%m-%d %H:%M:%S") + ("" if row.start_time else " *"),
            Text(_tool_counts(row.tools) or "-"),
            failed,
            issues,
            "yes" if row.kept else "no",
        ]
        if linked:
            cells.append(Text(settings.tracing.link(row.trace_id, row.run_id) or ""))
        table.add_row(*cells)
    return table


def run_runs(args: RunsArgs, out: IO[str] | None = None, err: IO[str] | None = None) -> int:
    """Run ``monitor runs``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr

    def body() -> int:
        if args.format not in ("table", "json"):
            raise UsageError(f"--format must be table or json, got {args.format!r}")
        if not 1 <= args.limit <= MAX_LIMIT:
            raise UsageError(f"--limit must be between 1 and {MAX_LIMIT}, got {args.limit}")
        if args.offset < 0:
            raise UsageError(f"--offset must not be negative, got {args.offset}")
        agents = _names(args.agents, "--agent")
        tools = _names(args.tools, "--tool")
        failed_scorers = _names(args.failed_scorers, "--failed-scorer")
        kinds = _names(args.kinds, "--kind")
        _check_kinds(kinds)
        now = datetime.now(UTC)
        since = _when(args.since, "--since", now)
        until = _when(args.until, "--until", now)
        if since is not None and until is not None and since >= until:
            raise UsageError(f"--since ({since.isoformat()}) must be before --until ({until.isoformat()})")
        settings = _settings(args.settings, args.config)
        with _store(settings) as store:
            rows = list_runs(
                store,
                agents=agents,
                tools=tools,
                kinds=kinds,
                failed_scorers=failed_scorers,
                since=since,
                until=until,
                limit=args.limit,
                offset=args.offset,
            )
        if args.format == "json":
            for row in rows:
                line = run_json(row, settings.tracing.link(row.trace_id, row.run_id))
                out.write(json.dumps(line, ensure_ascii=False) + "\n")
            return 0
        console = Console(file=out, width=_TABLE_WIDTH, soft_wrap=False, highlight=False)
        if not rows:
            console.print("no stored run matches" + (" on this page (--offset)" if args.offset else ""), markup=False)
            return 0
        console.print(_runs_table(rows, settings))
        first, last = args.offset + 1, args.offset + len(rows)
        more = f"; next page: --offset {last}" if len(rows) == args.limit else ""
        note = "; * no start in the spans: time first scored" if any(r.start_time is None for r in rows) else ""
        console.print(f"runs {first}-{last}, newest first{more}{note}", markup=False)
        console.print("look at one: monitor show TRACE_ID", markup=False)
        return 0

    return _guarded("monitor runs", err, body)


# ----------------------------------------------------------------------------- monitor show


def _rebuilt(details: Sequence[RunDetail]) -> tuple[list[Run], dict[str, str]]:
    """The kept runs of a trace as run trees (a nested run under its parent when both were kept), and why a kept
    run could not be read back (a redaction hook may have changed its shape), by run id."""
    docs: dict[str, dict[str, Any]] = {}
    own: dict[str, Run] = {}
    unreadable: dict[str, str] = {}
    for detail in details:
        if detail.summary is None:
            continue
        run_id, doc = detail.run.run_id, detail.summary.run
        try:
            own[run_id] = run_from_json({**doc, "children": []})  # the kept run lists its nested runs by id
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            unreadable[run_id] = f"{type(exc).__name__}: {exc}"
            continue
        docs[run_id] = doc

    def tree(run_id: str, seen: frozenset[str]) -> Run:
        child_ids = [c for c in docs[run_id].get("children", ()) if isinstance(c, str) and c in own and c not in seen]
        children = tuple(tree(c, seen | {c}) for c in child_ids)
        return dataclasses.replace(own[run_id], children=children)

    nested = {c for doc in docs.values() for c in doc.get("children", ()) if isinstance(c, str) and c in own}
    return [tree(run_id, frozenset({run_id})) for run_id in own if run_id not in nested], unreadable


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _short_json(value: Any, limit: int = 120) -> str:
    if value is None:
        return ""
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _scores_table(scores: Sequence[ScoreRow]) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("scorer", "status", "score", "passed", "reason"):
        table.add_column(column, overflow="fold")
    for s in scores:
        passed = "-" if s.passed is None else ("[green]yes[/green]" if s.passed else "[red]no[/red]")
        scorer = s.scorer if s.scorer_version == 1 else f"{s.scorer} v{s.scorer_version}"
        table.add_row(Text(scorer), Text(s.status), _number(s.score), passed, Text(s.reason or ""))
    return table


def _issues_table(scores: Sequence[ScoreRow]) -> Table | None:
    rows = [(s.scorer, i) for s in scores for i in s.issues]
    if not rows:
        return None
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False)
    for column in ("scorer", "kind", "severity", "tool", "parameter", "call", "expected", "actual", "detail"):
        table.add_column(column, overflow="fold")
    for scorer, i in rows:
        expected = i.expected_tool if i.expected_tool is not None and i.expected is None else i.expected
        table.add_row(
            Text(scorer),
            Text(i.kind, style="dim" if i.severity == "info" else "red" if i.severity == "error" else "yellow"),
            Text(i.severity),
            Text(i.tool or ""),
            Text(i.parameter or ""),
            "" if i.call_index is None else str(i.call_index),
            Text(_short_json(expected)),
            Text(_short_json(i.actual)),
            Text(_short_json(i.detail)),
        )
    return table


def show_json(detail: RunDetail, link: str | None) -> dict[str, Any]:
    """One line of ``monitor show --format json``: a run, its kept trajectory (``run``: null when not kept) and its
    scores with their issues."""
    row = detail.run
    return {
        "trace_id": row.trace_id,
        "run_id": row.run_id,
        "agent": row.agent,
        "conversation_id": row.conversation_id,
        "start_time": _iso(row.start_time),
        "tools": list(row.tools),
        "link": link,
        "kept": detail.summary is not None,
        "run": None if detail.summary is None else detail.summary.run,
        "scores": [
            {
                "scorer": s.scorer,
                "scorer_version": s.scorer_version,
                "scorer_kind": s.scorer_kind,
                "status": s.status,
                "score": s.score,
                "threshold": s.threshold,
                "passed": s.passed,
                "reason": s.reason,
                "degraded": s.degraded,
                "scored_at": _iso(s.scored_at),
                "details": s.details,
                "judge": s.judge,
                "issues": [dataclasses.asdict(i) for i in s.issues],
            }
            for s in detail.scores
        ],
    }


def _not_found(trace_id: str, store: SqlResultStore, settings: Settings) -> str:
    message = (
        f"trace {trace_id} is not in the store ({mask_url(settings.store.url)}): it was never scored there (not "
        "sampled, not closed yet, or scored by a daemon with another store), or it is older than "
        f"store.retention_days ({settings.store.retention_days:g} days) and was removed"
    )
    similar = traces_starting_with(store, trace_id) if len(trace_id) < 32 else []
    if similar:
        message += ". Trace ids starting with it: " + ", ".join(similar)
    return message


def _print_show(details: Sequence[RunDetail], settings: Settings, out: IO[str]) -> None:
    console = Console(file=out, width=_SHOW_WIDTH, soft_wrap=False, highlight=False)
    trees, unreadable = _rebuilt(details)
    for run in trees:
        console.print(run_tree(run))
        console.print()
    for detail in details:
        row, summary = detail.run, detail.summary
        head = Text(f"run {row.run_id} ({row.agent or 'unnamed agent'})", style="bold")
        if summary is None:
            head.append("  its trajectory was not kept", style="yellow")
        elif row.run_id in unreadable:
            head.append(f"  its kept trajectory cannot be read back ({unreadable[row.run_id]})", style="yellow")
        else:
            kept = summary.run.get("calls_kept", summary.calls)
            calls = f"{summary.calls} call{'' if summary.calls == 1 else 's'}"
            calls += f", first {kept} kept (store.summaries.max_calls)" if kept != summary.calls else ""
            duration = "" if summary.duration_ms is None else f", {summary.duration_ms:.0f} ms"
            head.append(f"  status {summary.status}, {calls}{duration}")
        console.print(head, soft_wrap=True)
        if detail.scores:
            console.print(_scores_table(detail.scores))
        else:
            console.print("no results", style="dim")
        issues = _issues_table(detail.scores)
        if issues is not None:
            console.print(Text("issues", style="bold"))
            console.print(issues)
        link = settings.tracing.link(row.trace_id, row.run_id)
        if link is not None and (link != settings.tracing.link(row.trace_id, None) or detail is details[-1]):
            console.print(Text(f"tracing UI: {link}"), soft_wrap=True)
        console.print()


def run_show(
    trace_id: str,
    *,
    fmt: str = "table",
    config: Path | None = None,
    settings: Settings | None = None,
    out: IO[str] | None = None,
    err: IO[str] | None = None,
) -> int:
    """Run ``monitor show TRACE_ID``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr

    def body() -> int:
        if fmt not in ("table", "json"):
            raise UsageError(f"--format must be table or json, got {fmt!r}")
        wanted = trace_id.strip()
        if not wanted:
            raise UsageError("give the trace id to show (as `monitor runs` prints it)")
        loaded = _settings(settings, config)
        with _store(loaded) as store:
            details = get_trace(store, wanted)
            if not details and wanted.lower() != wanted:
                details = get_trace(store, wanted.lower())  # W3C trace ids are lowercase hex
            if not details:
                print(f"monitor show: {_not_found(wanted, store, loaded)}", file=err)
                return EXIT_NOT_FOUND
        if fmt == "json":
            for detail in details:
                line = show_json(detail, loaded.tracing.link(detail.run.trace_id, detail.run.run_id))
                out.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
        else:
            _print_show(details, loaded, out)
        if all(d.summary is None for d in details):
            print(
                f"monitor show: trace {details[0].run.trace_id} was scored but its trajectory was not kept "
                "(store.summaries.enabled was off, its redaction hook failed, or it was scored before the store "
                "kept runs); its scores are above",
                file=err,
            )
            return EXIT_NOT_FOUND
        return 0

    return _guarded("monitor show", err, body)
