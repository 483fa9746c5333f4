"""Report queries over the store, identical on SQLite and PostgreSQL.

Every function takes the store (or its engine), a time range on ``scored_at`` — ``since`` inclusive, ``until``
exclusive, either may be None (open); naive datetimes are UTC — and optional filters. Results come back in a
deterministic order (sorted here, not by the database, so both backends agree, NULLs included). Connection
errors raise :class:`~monitor.store.base.StoreUnavailable`.

Issues of severity ``info`` are data-quality notes, not agent failures (SCORING §5.2): :func:`issue_counts`
leaves them out unless ``include_notes``.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

from monitor.store.schema import issues, results
from monitor.store.sql import SqlResultStore, _unavailable_on_connection_errors

Source = SqlResultStore | sa.Engine
"""What the queries read from: a store or an engine on a migrated database."""


@dataclass(frozen=True, slots=True)
class ScorerStats:
    """One (agent, scorer) over the range.

    ``results`` counts every stored result; ``scored``/``not_applicable``/``errors`` split them by status;
    ``passed``/``failed`` count scored results with a verdict. ``pass_rate`` = passed / (passed + failed) and
    ``mean_score`` = mean score of scored results; both None when there is nothing to average.
    """

    agent: str | None
    scorer: str
    results: int
    scored: int
    not_applicable: int
    errors: int
    passed: int
    failed: int
    pass_rate: float | None
    mean_score: float | None


@dataclass(frozen=True, slots=True)
class IssueCount:
    """Issues of one (kind, agent, tool, parameter): how many, in how many distinct runs, recent example traces."""

    kind: str
    agent: str | None
    tool: str | None
    parameter: str | None
    issues: int
    runs: int
    example_trace_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ConfusionPair:
    """``wrong_tool`` issues of one agent: ``called`` was used where ``expected`` was expected."""

    agent: str | None
    called: str | None
    expected: str | None
    issues: int
    runs: int
    example_trace_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class ResultRow:
    """One stored result (without its issues and details)."""

    trace_id: str
    run_id: str
    agent: str | None
    scorer: str
    scorer_version: int
    status: str
    score: float | None
    passed: bool | None
    reason: str | None
    scored_at: datetime


def _engine(source: Source) -> sa.Engine:
    return source.engine if isinstance(source, SqlResultStore) else source


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _filters(
    since: datetime | None,
    until: datetime | None,
    agents: Collection[str] | None,
    scorers: Collection[str] | None = None,
) -> list[sa.ColumnElement[bool]]:
    where: list[sa.ColumnElement[bool]] = []
    if since is not None:
        where.append(results.c.scored_at >= _utc(since))
    if until is not None:
        where.append(results.c.scored_at < _utc(until))
    if agents is not None:
        where.append(results.c.agent.in_(list(agents)))
    if scorers is not None:
        where.append(results.c.scorer.in_(list(scorers)))
    return where


def _nulls_last(value: str | None) -> tuple[bool, str]:
    return (value is None, value or "")


def _count_if(condition: sa.ColumnElement[bool]) -> sa.ColumnElement[Any]:
    return sa.func.coalesce(sa.func.sum(sa.case((condition, 1), else_=0)), 0)


def _run_key() -> sa.ColumnElement[Any]:
    return sa.func.count(sa.distinct(results.c.trace_id + sa.literal(" ") + results.c.run_id))


def result_counts() -> list[sa.Label[Any]]:
    """Aggregate columns over ``results`` rows: ``n``, ``scored``, ``not_applicable``, ``errors``, ``passed``,
    ``failed`` and ``mean`` (of scored results' scores); shared by the report queries."""
    scored = results.c.status == "scored"
    return [
        sa.func.count().label("n"),
        _count_if(scored).label("scored"),
        _count_if(results.c.status == "not_applicable").label("not_applicable"),
        _count_if(results.c.status == "error").label("errors"),
        _count_if(sa.and_(scored, results.c.passed == sa.true())).label("passed"),
        _count_if(sa.and_(scored, results.c.passed == sa.false())).label("failed"),
        sa.func.avg(sa.case((scored, results.c.score), else_=None)).label("mean"),
    ]


def counts_of(row: Any) -> dict[str, Any]:
    """A row selected with :func:`result_counts` as the keyword arguments of a counts record: ``results``,
    ``scored``, ``not_applicable``, ``errors``, ``passed``, ``failed`` and ``mean_score``."""
    return {
        "results": int(row.n),
        "scored": int(row.scored),
        "not_applicable": int(row.not_applicable),
        "errors": int(row.errors),
        "passed": int(row.passed),
        "failed": int(row.failed),
        "mean_score": float(row.mean) if row.mean is not None else None,
    }


def scorer_stats(
    source: Source,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    agents: Collection[str] | None = None,
    scorers: Collection[str] | None = None,
) -> list[ScorerStats]:
    """Pass rate and mean score per (agent, scorer), sorted by agent (None last) then scorer."""
    statement = (
        sa.select(
            results.c.agent,
            results.c.scorer,
            *result_counts(),
        )
        .where(*_filters(since, until, agents, scorers))
        .group_by(results.c.agent, results.c.scorer)
    )
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
    stats = [
        ScorerStats(
            agent=row.agent,
            scorer=row.scorer,
            pass_rate=int(row.passed) / (int(row.passed) + int(row.failed)) if row.passed + row.failed else None,
            **counts_of(row),
        )
        for row in rows
    ]
    return sorted(stats, key=lambda s: (_nulls_last(s.agent), s.scorer))


def examples_per_group(
    conn: sa.Connection,
    group: Sequence[sa.ColumnElement[Any]],
    where: Sequence[sa.ColumnElement[bool]],
    k: int,
    *,
    source: sa.FromClause | None = None,
    trace: sa.ColumnElement[str] | None = None,
) -> dict[tuple[Any, ...], tuple[str, ...]]:
    """Up to ``k`` distinct trace ids per group, most recently scored first (ties: smaller trace id). ``source``:
    the join to select from (default issues ⋈ results), ``trace``: its trace id column (default results')."""
    if k <= 0:
        return {}
    source = issues.join(results, issues.c.result_id == results.c.id) if source is None else source
    trace_id = results.c.trace_id if trace is None else trace
    labelled = [c.label(f"g{i}") for i, c in enumerate(group)]
    per_trace = (
        sa.select(*labelled, trace_id.label("trace_id"), sa.func.max(results.c.scored_at).label("last"))
        .select_from(source)
        .where(*where)
        .group_by(*group, trace_id)
        .subquery()
    )
    keys = [per_trace.c[f"g{i}"] for i in range(len(group))]
    ranked = sa.select(
        *keys,
        per_trace.c.trace_id,
        sa.func.row_number()
        .over(partition_by=keys, order_by=[per_trace.c["last"].desc(), per_trace.c.trace_id])
        .label("rn"),
    ).subquery()
    rows = conn.execute(
        sa.select(ranked).where(ranked.c.rn <= k).order_by(*[ranked.c[f"g{i}"] for i in range(len(group))], "rn")
    ).all()
    found: dict[tuple[Any, ...], list[tuple[int, str]]] = {}
    for row in rows:
        found.setdefault(tuple(row[: len(group)]), []).append((int(row.rn), row.trace_id))
    return {key: tuple(t for _, t in sorted(values)) for key, values in found.items()}


def issue_counts(
    source: Source,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    agents: Collection[str] | None = None,
    kinds: Collection[str] | None = None,
    tools: Collection[str] | None = None,
    include_notes: bool = False,
    examples: int = 3,
    limit: int | None = None,
) -> list[IssueCount]:
    """Issue counts by (kind, agent, tool, parameter), most affected runs first, with example trace ids.

    Order: runs desc, issues desc, then kind, agent, tool, parameter (None last). ``limit`` keeps the first N.
    """
    where = _filters(since, until, agents)
    if kinds is not None:
        where.append(issues.c.kind.in_(list(kinds)))
    if tools is not None:
        where.append(issues.c.tool.in_(list(tools)))
    if not include_notes:
        where.append(issues.c.severity != "info")
    group = [issues.c.kind, results.c.agent, issues.c.tool, issues.c.parameter]
    statement = (
        sa.select(*group, sa.func.count().label("n"), _run_key().label("runs"))
        .select_from(issues.join(results, issues.c.result_id == results.c.id))
        .where(*where)
        .group_by(*group)
    )
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
        ex = examples_per_group(conn, group, where, examples)
    counts = [
        IssueCount(
            kind=row.kind,
            agent=row.agent,
            tool=row.tool,
            parameter=row.parameter,
            issues=int(row.n),
            runs=int(row.runs),
            example_trace_ids=ex.get((row.kind, row.agent, row.tool, row.parameter), ()),
        )
        for row in rows
    ]
    counts.sort(
        key=lambda c: (
            -c.runs,
            -c.issues,
            c.kind,
            _nulls_last(c.agent),
            _nulls_last(c.tool),
            _nulls_last(c.parameter),
        )
    )
    return counts[:limit] if limit is not None else counts


def confusion_pairs(
    source: Source,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    agents: Collection[str] | None = None,
    examples: int = 3,
) -> list[ConfusionPair]:
    """``wrong_tool`` issues grouped by (agent, called tool, expected tool), most frequent first.

    The called tool is the issue's ``tool``; the expected one its ``detail.expected_tool`` (SCORING §2.0 step 3).
    """
    where = [*_filters(since, until, agents), issues.c.kind == "wrong_tool"]
    group = [results.c.agent, issues.c.tool, issues.c.expected_tool]
    statement = (
        sa.select(*group, sa.func.count().label("n"), _run_key().label("runs"))
        .select_from(issues.join(results, issues.c.result_id == results.c.id))
        .where(*where)
        .group_by(*group)
    )
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
        ex = examples_per_group(conn, group, where, examples)
    pairs = [
        ConfusionPair(
            agent=row.agent,
            called=row.tool,
            expected=row.expected_tool,
            issues=int(row.n),
            runs=int(row.runs),
            example_trace_ids=ex.get((row.agent, row.tool, row.expected_tool), ()),
        )
        for row in rows
    ]
    pairs.sort(key=lambda p: (-p.issues, -p.runs, _nulls_last(p.agent), _nulls_last(p.called), _nulls_last(p.expected)))
    return pairs


def list_results(
    source: Source,
    since: datetime | None = None,
    until: datetime | None = None,
    *,
    agents: Collection[str] | None = None,
    scorers: Collection[str] | None = None,
    statuses: Collection[str] | None = None,
    passed: bool | None = None,
    limit: int = 1000,
) -> list[ResultRow]:
    """Stored results in the range, newest first (ties: key order); ``passed`` filters on the verdict."""
    where = _filters(since, until, agents, scorers)
    if statuses is not None:
        where.append(results.c.status.in_(list(statuses)))
    if passed is not None:
        where.append(results.c.passed == (sa.true() if passed else sa.false()))
    statement = (
        sa.select(
            results.c.trace_id,
            results.c.run_id,
            results.c.agent,
            results.c.scorer,
            results.c.scorer_version,
            results.c.status,
            results.c.score,
            results.c.passed,
            results.c.reason,
            results.c.scored_at,
        )
        .where(*where)
        .order_by(
            results.c.scored_at.desc(),
            results.c.trace_id,
            results.c.run_id,
            results.c.scorer,
            results.c.scorer_version,
        )
        .limit(limit)
    )
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
    return [
        ResultRow(
            trace_id=row.trace_id,
            run_id=row.run_id,
            agent=row.agent,
            scorer=row.scorer,
            scorer_version=int(row.scorer_version),
            status=row.status,
            score=row.score,
            passed=None if row.passed is None else bool(row.passed),
            reason=row.reason,
            scored_at=row.scored_at,
        )
        for row in rows
    ]
