"""Looking at stored runs: :func:`list_runs` (``monitor runs``) and :func:`get_trace` (``monitor show``).

The same statements on SQLite and PostgreSQL (SQLAlchemy Core) return the same rows in the same order:

* **a run's time** is when it started (``runs.start_time``, from its spans) or, for a run whose spans carried no
  start, when it was first scored (``runs.first_scored_at``). ``since`` is inclusive, ``until`` exclusive; naive
  datetimes are UTC. The start is what a user means by "yesterday's runs", and it does not move when a replay
  scores the run again (``last_scored_at`` does);
* **order**: newest first by that time, then trace id and run id in code-point order (PostgreSQL compares them
  with ``COLLATE "C"``, SQLite's default collation is already bytewise), so ``limit``/``offset`` pages agree;
* **filters** (each a collection: any of its values; filters combine with AND): ``agents``; ``tools`` — a tool
  the run called (an element of the ``runs.tools`` JSON array: ``json_each`` on SQLite,
  ``json_array_elements_text`` on PostgreSQL); ``kinds`` — an issue of that kind on any result of the run (notes
  of severity ``info`` included: ask for a note kind to get them); ``failed_scorers`` — a result of that scorer
  (instance id) that was scored and did not pass (``status = 'scored' AND passed = false``).

Trace ids are returned whole, never shortened. Connection errors raise
:class:`~monitor.store.base.StoreUnavailable`; :func:`check_browsable` raises :class:`SchemaTooOld` for a store
whose schema predates the kept runs (revision ``0004``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

import sqlalchemy as sa
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError

from monitor.store import migrate
from monitor.store.schema import issues, results, run_summaries, runs
from monitor.store.sql import SqlResultStore, _unavailable_on_connection_errors

__all__ = [
    "REQUIRED_REVISION",
    "IssueRow",
    "KeptSummary",
    "RunDetail",
    "RunRow",
    "SchemaTooOld",
    "ScoreRow",
    "Source",
    "check_browsable",
    "get_trace",
    "list_runs",
    "traces_starting_with",
]

Source = SqlResultStore | sa.Engine
"""What the queries read from: a store or an engine on a migrated database."""

REQUIRED_REVISION: Final = "0004"
"""The first schema revision with the kept runs (``run_summaries``)."""

_CHUNK = 500
"""Trace ids per ``IN (…)`` list when fetching a page's results."""


class SchemaTooOld(Exception):
    """The store's schema is older than :data:`REQUIRED_REVISION` (``current`` None: no monitor schema at all)."""

    def __init__(self, current: str | None) -> None:
        self.current = current
        self.required = REQUIRED_REVISION
        super().__init__(f"the store's schema is at revision {current or 'none'}, {REQUIRED_REVISION} is needed")


@dataclass(frozen=True, slots=True)
class RunRow:
    """One stored run, with what its results say about it.

    ``failed_scorers``: scorers that scored the run and did not pass; ``errored_scorers``: scorers whose result is
    an error; ``issue_kinds``: kinds of its issues of severity error or warning; ``note_kinds``: kinds of its
    ``info`` notes (data quality). All sorted. ``kept``: the store holds its trajectory (``run_summaries``), whose
    ``user_text`` is copied here (redacted and capped as kept).
    """

    trace_id: str
    run_id: str
    agent: str | None
    conversation_id: str | None
    start_time: datetime | None
    tools: tuple[str, ...]
    first_scored_at: datetime
    last_scored_at: datetime
    kept: bool
    user_text: str | None
    failed_scorers: tuple[str, ...] = ()
    errored_scorers: tuple[str, ...] = ()
    issue_kinds: tuple[str, ...] = ()
    note_kinds: tuple[str, ...] = ()

    @property
    def time(self) -> datetime:
        """The run's time as the filters and the order use it (start, else first scored)."""
        return self.start_time or self.first_scored_at


@dataclass(frozen=True, slots=True)
class IssueRow:
    """One stored issue (SCORING §5.2)."""

    kind: str
    severity: str
    tool: str | None
    parameter: str | None
    call_index: int | None
    call_id: str | None
    turn: int | None
    expected_tool: str | None
    expected: Any
    actual: Any
    detail: Any


@dataclass(frozen=True, slots=True)
class ScoreRow:
    """One stored result of a run with its issues (in the order the scorer reported them)."""

    scorer: str
    scorer_version: int
    scorer_kind: str
    status: str
    score: float | None
    threshold: float | None
    passed: bool | None
    reason: str | None
    degraded: str | None
    details: Any
    judge: Any
    scored_at: datetime
    issues: tuple[IssueRow, ...]


@dataclass(frozen=True, slots=True)
class KeptSummary:
    """A run's kept trajectory: ``run`` is :func:`monitor.trajectory.summary.summarize`'s document (redacted,
    capped; its ``children`` are run ids), ``calls`` the run's call count (kept or not)."""

    user_text: str | None
    final_response: str | None
    status: str
    duration_ms: float | None
    calls: int
    run: dict[str, Any]


@dataclass(frozen=True, slots=True)
class RunDetail:
    """One run of a trace: the run, its kept trajectory (None when not kept) and its results."""

    run: RunRow
    summary: KeptSummary | None
    scores: tuple[ScoreRow, ...]


def _engine(source: Source) -> sa.Engine:
    return source.engine if isinstance(source, SqlResultStore) else source


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def check_browsable(source: Source) -> str | None:
    """The store's schema revision; raises :class:`SchemaTooOld` unless it has the kept runs.

    A revision this version does not know (a newer monitor migrated the store) is accepted: revisions only add.
    """
    with _unavailable_on_connection_errors():
        current = migrate.current_revision(_engine(source))
    if current is None:
        raise SchemaTooOld(None)
    script = ScriptDirectory.from_config(migrate.alembic_config())
    try:
        known = {rev.revision for rev in script.iterate_revisions(current, "base")}
    except RevisionError:
        return current
    if REQUIRED_REVISION not in known:
        raise SchemaTooOld(current)
    return current


def _bytewise(column: sa.ColumnElement[str], dialect: str) -> sa.ColumnElement[str]:
    return column.collate("C") if dialect == "postgresql" else column


def _run_time() -> sa.ColumnElement[datetime]:
    return sa.func.coalesce(runs.c.start_time, runs.c.first_scored_at)


def _called(dialect: str, tools: Collection[str]) -> sa.ColumnElement[bool]:
    """The run called one of ``tools``: an element of its ``tools`` JSON array is one of them."""
    function = sa.func.json_array_elements_text if dialect == "postgresql" else sa.func.json_each
    elements = function(runs.c.tools).table_valued("value").alias("called")
    return sa.exists(sa.select(sa.literal(1)).select_from(elements).where(elements.c.value.in_(list(tools))))


def _filters(
    dialect: str,
    *,
    agents: Collection[str] | None,
    tools: Collection[str] | None,
    kinds: Collection[str] | None,
    failed_scorers: Collection[str] | None,
    since: datetime | None,
    until: datetime | None,
) -> list[sa.ColumnElement[bool]]:
    where: list[sa.ColumnElement[bool]] = []
    if agents is not None:
        where.append(runs.c.agent.in_(list(agents)))
    if tools is not None:
        where.append(_called(dialect, tools))
    # the runs with such an issue or failure, found once (IN): an EXISTS per run costs one probe per stored run
    run_key = sa.tuple_(runs.c.trace_id, runs.c.run_id)
    if kinds is not None:
        with_issue = (
            sa.select(results.c.trace_id, results.c.run_id)
            .select_from(issues.join(results, issues.c.result_id == results.c.id))
            .where(issues.c.kind.in_(list(kinds)))
        )
        where.append(run_key.in_(with_issue))
    if failed_scorers is not None:
        failed = sa.select(results.c.trace_id, results.c.run_id).where(
            results.c.scorer.in_(list(failed_scorers)),
            results.c.status == "scored",
            results.c.passed == sa.false(),
        )
        where.append(run_key.in_(failed))
    if since is not None:
        where.append(_run_time() >= _utc(since))
    if until is not None:
        where.append(_run_time() < _utc(until))
    return where


_RUN_COLUMNS = (
    runs.c.trace_id,
    runs.c.run_id,
    runs.c.agent,
    runs.c.conversation_id,
    runs.c.start_time,
    runs.c.tools,
    runs.c.first_scored_at,
    runs.c.last_scored_at,
    run_summaries.c.trace_id.is_not(None).label("kept"),
    run_summaries.c.user_text,
)
_RUNS_AND_KEPT = runs.outerjoin(
    run_summaries, sa.and_(run_summaries.c.trace_id == runs.c.trace_id, run_summaries.c.run_id == runs.c.run_id)
)


def _tools(value: Any) -> tuple[str, ...]:
    return tuple(str(t) for t in value) if isinstance(value, list) else ()


def _run_row(row: Any, **extra: Any) -> RunRow:
    return RunRow(
        trace_id=row.trace_id,
        run_id=row.run_id,
        agent=row.agent,
        conversation_id=row.conversation_id,
        start_time=row.start_time,
        tools=_tools(row.tools),
        first_scored_at=row.first_scored_at,
        last_scored_at=row.last_scored_at,
        kept=bool(row.kept),
        user_text=row.user_text,
        **extra,
    )


def _chunks(values: list[str]) -> Iterable[list[str]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def _verdicts(conn: sa.Connection, trace_ids: list[str]) -> dict[tuple[str, str], dict[str, set[str]]]:
    """Per run of these traces: failed and errored scorers, issue and note kinds."""
    found: dict[tuple[str, str], dict[str, set[str]]] = {}

    def slot(trace_id: str, run_id: str) -> dict[str, set[str]]:
        return found.setdefault(
            (trace_id, run_id), {"failed": set(), "errored": set(), "issues": set(), "notes": set()}
        )

    for chunk in _chunks(trace_ids):
        for row in conn.execute(
            sa.select(results.c.trace_id, results.c.run_id, results.c.scorer, results.c.status)
            .where(results.c.trace_id.in_(chunk))
            .where(
                sa.or_(
                    results.c.status == "error",
                    sa.and_(results.c.status == "scored", results.c.passed == sa.false()),
                )
            )
        ):
            key = "errored" if row.status == "error" else "failed"
            slot(row.trace_id, row.run_id)[key].add(row.scorer)
        for row in conn.execute(
            sa.select(results.c.trace_id, results.c.run_id, issues.c.kind, issues.c.severity)
            .select_from(issues.join(results, issues.c.result_id == results.c.id))
            .where(results.c.trace_id.in_(chunk))
            .distinct()
        ):
            slot(row.trace_id, row.run_id)["notes" if row.severity == "info" else "issues"].add(row.kind)
    return found


def _with_verdicts(conn: sa.Connection, rows: list[Any]) -> list[RunRow]:
    verdicts = _verdicts(conn, sorted({row.trace_id for row in rows}))
    out: list[RunRow] = []
    for row in rows:
        v = verdicts.get((row.trace_id, row.run_id), {})
        out.append(
            _run_row(
                row,
                failed_scorers=tuple(sorted(v.get("failed", ()))),
                errored_scorers=tuple(sorted(v.get("errored", ()))),
                issue_kinds=tuple(sorted(v.get("issues", ()))),
                note_kinds=tuple(sorted(v.get("notes", ()))),
            )
        )
    return out


def list_runs(
    source: Source,
    *,
    agents: Collection[str] | None = None,
    tools: Collection[str] | None = None,
    kinds: Collection[str] | None = None,
    failed_scorers: Collection[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: int = 50,
    offset: int = 0,
) -> list[RunRow]:
    """The stored runs matching every filter given (module docstring), newest first, ``limit`` from ``offset``."""
    if limit < 0 or offset < 0:
        raise ValueError("limit and offset must not be negative")
    engine = _engine(source)
    dialect = engine.dialect.name
    where = _filters(
        dialect,
        agents=agents,
        tools=tools,
        kinds=kinds,
        failed_scorers=failed_scorers,
        since=since,
        until=until,
    )
    # the page's keys first (a narrow sort), then their rows: sorting whole rows is several times slower
    page = (
        sa.select(runs.c.trace_id, runs.c.run_id, _run_time().label("at"))
        .where(*where)
        .order_by(_run_time().desc(), _bytewise(runs.c.trace_id, dialect), _bytewise(runs.c.run_id, dialect))
        .limit(limit)
        .offset(offset)
        .subquery("page")
    )
    statement = (
        sa.select(*_RUN_COLUMNS)
        .select_from(
            page.join(runs, sa.and_(runs.c.trace_id == page.c.trace_id, runs.c.run_id == page.c.run_id)).outerjoin(
                run_summaries,
                sa.and_(run_summaries.c.trace_id == runs.c.trace_id, run_summaries.c.run_id == runs.c.run_id),
            )
        )
        .order_by(page.c["at"].desc(), _bytewise(runs.c.trace_id, dialect), _bytewise(runs.c.run_id, dialect))
    )
    with _unavailable_on_connection_errors(), engine.connect() as conn:
        rows = list(conn.execute(statement).all())
        return _with_verdicts(conn, rows)


def _issue(row: Any) -> IssueRow:
    return IssueRow(
        kind=row.kind,
        severity=row.severity,
        tool=row.tool,
        parameter=row.parameter,
        call_index=row.call_index,
        call_id=row.call_id,
        turn=row.turn,
        expected_tool=row.expected_tool,
        expected=row.expected,
        actual=row.actual,
        detail=row.detail,
    )


def _summary(row: Any) -> KeptSummary:
    doc = row.run
    return KeptSummary(
        user_text=row.user_text,
        final_response=row.final_response,
        status=row.status,
        duration_ms=row.duration_ms,
        calls=int(row.calls),
        run=dict(doc) if isinstance(doc, Mapping) else {},
    )


def get_trace(source: Source, trace_id: str) -> list[RunDetail]:
    """Every stored run of the trace (``[]`` when it is not in the store), in run order (start, then run id), each
    with its kept trajectory and its results (by scorer and version) with their issues."""
    engine = _engine(source)
    dialect = engine.dialect.name
    with _unavailable_on_connection_errors(), engine.connect() as conn:
        rows = list(
            conn.execute(
                sa.select(*_RUN_COLUMNS)
                .select_from(_RUNS_AND_KEPT)
                .where(runs.c.trace_id == trace_id)
                .order_by(_run_time(), _bytewise(runs.c.run_id, dialect))
            ).all()
        )
        if not rows:
            return []
        kept = {
            row.run_id: _summary(row)
            for row in conn.execute(
                sa.select(
                    run_summaries.c.run_id,
                    run_summaries.c.user_text,
                    run_summaries.c.final_response,
                    run_summaries.c.status,
                    run_summaries.c.duration_ms,
                    run_summaries.c.calls,
                    run_summaries.c.run,
                ).where(run_summaries.c.trace_id == trace_id)
            )
        }
        result_rows = list(
            conn.execute(
                sa.select(results)
                .where(results.c.trace_id == trace_id)
                .order_by(_bytewise(results.c.scorer, dialect), results.c.scorer_version, results.c.id)
            ).all()
        )
        issue_rows = list(
            conn.execute(
                sa.select(issues)
                .select_from(issues.join(results, issues.c.result_id == results.c.id))
                .where(results.c.trace_id == trace_id)
                .order_by(issues.c.id)
            ).all()
        )
        runs_out = _with_verdicts(conn, rows)
    by_result: dict[int, list[IssueRow]] = {}
    for row in issue_rows:
        by_result.setdefault(int(row.result_id), []).append(_issue(row))
    scores: dict[str, list[ScoreRow]] = {}
    for row in result_rows:
        scores.setdefault(row.run_id, []).append(
            ScoreRow(
                scorer=row.scorer,
                scorer_version=int(row.scorer_version),
                scorer_kind=row.scorer_kind,
                status=row.status,
                score=row.score,
                threshold=row.threshold,
                passed=None if row.passed is None else bool(row.passed),
                reason=row.reason,
                degraded=row.degraded,
                details=row.details,
                judge=row.judge,
                scored_at=row.scored_at,
                issues=tuple(by_result.get(int(row.id), ())),
            )
        )
    return [RunDetail(run, kept.get(run.run_id), tuple(scores.get(run.run_id, ()))) for run in runs_out]


def traces_starting_with(source: Source, prefix: str, limit: int = 5) -> list[str]:
    """Up to ``limit`` stored trace ids starting with ``prefix`` (a shortened id), in code-point order."""
    if not prefix:
        return []
    engine = _engine(source)
    statement = (
        sa.select(runs.c.trace_id)
        .where(sa.func.substr(runs.c.trace_id, 1, len(prefix)) == prefix)  # not LIKE: case-insensitive on SQLite
        .group_by(runs.c.trace_id)
        .order_by(_bytewise(runs.c.trace_id, engine.dialect.name))
        .limit(limit)
    )
    with _unavailable_on_connection_errors(), engine.connect() as conn:
        return [str(t) for t in conn.execute(statement).scalars()]
