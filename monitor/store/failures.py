"""What the failure analysis (:mod:`monitor.analysis`) and ``monitor report`` read from the store, on SQLite and
PostgreSQL alike.

A window is ``[since, until)`` on ``runs.first_scored_at``: a run belongs to the window in which it was first
scored, and all its results and issues go with it (a judge verdict stored an hour later included), so every
number of a window is about the same runs. The per-scorer tables (:func:`scorer_summaries`, :func:`score_buckets`)
and judge spend count the results stored in the window (``results.scored_at``, one indexed range, no join: money is
counted when it was spent); for code scorers the two coincide, a judge verdict stored after the window's end
counts in the next one. Issues of severity ``info`` (data-quality notes) are never failures and are left out.

Every function reads only: a store of an older revision works, with what it lacks reported by
:func:`features` (the report says so instead of failing). Connection errors raise
:class:`~monitor.store.base.StoreUnavailable`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

import sqlalchemy as sa

from monitor.analysis.model import (
    CATEGORY_OF,
    SELECTION_KINDS,
    AgentDay,
    IssueGroup,
    JudgeSpend,
    ScoreBucket,
    SelectionIssue,
    ToolDefinition,
    ToolUsage,
    ValueCount,
    Window,
    WindowData,
)
from monitor.store.queries import counts_of, examples_per_group, result_counts
from monitor.store.schema import issues, results, run_summaries, runs, tool_definitions
from monitor.store.sql import SqlResultStore, _unavailable_on_connection_errors

__all__ = [
    "ExampleRun",
    "ScorerSummary",
    "StoreFeatures",
    "example_runs",
    "features",
    "judge_spend",
    "load_window",
    "score_buckets",
    "scorer_summaries",
    "tool_definitions_of",
]

Source = SqlResultStore | sa.Engine

VALUE_KINDS = ("tool_error", "enum_violation", "wrong_type", "invalid_value", "unknown_parameter", "hallucinated_tool")
"""Kinds whose offending value (``issues.actual``) is worth quoting: error types, values used, invented names."""


@dataclass(frozen=True, slots=True)
class StoreFeatures:
    """What the store holds: the core tables, and the tables revision 0004 added."""

    core: bool
    run_summaries: bool
    tool_definitions: bool


@dataclass(frozen=True, slots=True)
class ScorerSummary:
    """Results of one scorer for the window's runs."""

    scorer: str
    scorer_kind: str
    results: int
    scored: int
    not_applicable: int
    errors: int
    passed: int
    failed: int
    mean_score: float | None

    @property
    def pass_rate(self) -> float | None:
        return self.passed / (self.passed + self.failed) if self.passed + self.failed else None


@dataclass(frozen=True, slots=True)
class ExampleRun:
    """A kept run (table ``run_summaries``) to show next to an example trace id."""

    trace_id: str
    run_id: str
    agent: str | None
    user_text: str | None
    final_response: str | None
    status: str
    duration_ms: float | None
    calls: int


def _engine(source: Source) -> sa.Engine:
    return source.engine if isinstance(source, SqlResultStore) else source


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def features(source: Source) -> StoreFeatures:
    """Which tables exist (a store of an older revision lacks ``run_summaries`` and ``tool_definitions``)."""
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        names = set(sa.inspect(conn).get_table_names())
    return StoreFeatures(
        core={"runs", "results", "issues"} <= names,
        run_summaries="run_summaries" in names,
        tool_definitions="tool_definitions" in names,
    )


def _in_window(window: Window) -> list[sa.ColumnElement[bool]]:
    return [runs.c.first_scored_at >= _utc(window.since), runs.c.first_scored_at < _utc(window.until)]


def _stored_in(window: Window) -> list[sa.ColumnElement[bool]]:
    return [results.c.scored_at >= _utc(window.since), results.c.scored_at < _utc(window.until)]


def _day(conn: sa.Connection, column: sa.ColumnElement[Any]) -> sa.ColumnElement[str]:
    if conn.dialect.name == "postgresql":
        return sa.func.to_char(sa.func.timezone("UTC", column), "YYYY-MM-DD", type_=sa.Text)
    return sa.func.substr(column, 1, 10, type_=sa.Text)


def _run_key(table: sa.Table) -> sa.ColumnElement[str]:
    return table.c.trace_id + sa.literal(" ") + table.c.run_id


_joined = issues.join(results, issues.c.result_id == results.c.id).join(
    runs, sa.and_(results.c.trace_id == runs.c.trace_id, results.c.run_id == runs.c.run_id)
)


def _agent_days(conn: sa.Connection, window: Window) -> list[AgentDay]:
    failed = (
        sa.select(sa.literal(1))
        .where(
            results.c.trace_id == runs.c.trace_id,
            results.c.run_id == runs.c.run_id,
            results.c.status == "scored",
            results.c.passed == sa.false(),
        )
        .exists()
    )
    day = _day(conn, runs.c.first_scored_at).label("day")
    statement = (
        sa.select(
            runs.c.agent,
            day,
            sa.func.count().label("n"),
            sa.func.coalesce(sa.func.sum(sa.case((failed, 1), else_=0)), 0).label("failed"),
        )
        .where(*_in_window(window))
        .group_by(runs.c.agent, day)
    )
    return [
        AgentDay(row.agent, date.fromisoformat(row.day), int(row.n), int(row.failed)) for row in conn.execute(statement)
    ]


def _tools(conn: sa.Connection, window: Window) -> list[ToolUsage]:
    if conn.dialect.name == "postgresql":
        called = sa.func.json_array_elements_text(runs.c.tools).table_valued("value").alias("called")
    else:
        called = sa.func.json_each(runs.c.tools).table_valued("value").alias("called")
    statement = (
        sa.select(
            runs.c.agent,
            called.c.value.label("tool"),
            sa.func.count().label("calls"),
            sa.func.count(sa.distinct(_run_key(runs))).label("runs"),
        )
        .select_from(runs.join(called, sa.true()))
        .where(*_in_window(window))
        .group_by(runs.c.agent, called.c.value)
    )
    return [
        ToolUsage(row.agent, str(row.tool), int(row.calls), int(row.runs))
        for row in conn.execute(statement)
        if row.tool is not None
    ]


def _not_notes() -> sa.ColumnElement[bool]:
    return issues.c.severity != "info"


def _issue_groups(conn: sa.Connection, window: Window, examples: int) -> list[IssueGroup]:
    where = [*_in_window(window), _not_notes(), issues.c.kind.not_in(sorted(SELECTION_KINDS))]
    key = _run_key(runs)
    group = [runs.c.agent, issues.c.kind, issues.c.tool, issues.c.parameter]
    statement = (
        sa.select(
            *group,
            sa.func.count().label("n"),
            sa.func.count(sa.distinct(key)).label("runs"),
            sa.func.count(sa.distinct(sa.case((issues.c.severity == "error", key)))).label("error_runs"),
            sa.func.count(sa.distinct(sa.case((results.c.scorer_kind.like("judge%"), key)))).label("judged"),
        )
        .select_from(_joined)
        .where(*where)
        .group_by(*group)
    )
    rows = conn.execute(statement).all()
    ex = _examples_of(conn, group, where, examples)
    return [
        IssueGroup(
            agent=row.agent,
            kind=row.kind,
            tool=row.tool,
            parameter=row.parameter,
            issues=int(row.n),
            runs=int(row.runs),
            error_runs=int(row.error_runs),
            judged_runs=int(row.judged),
            examples=ex.get((row.agent, row.kind, row.tool, row.parameter), ()),
        )
        for row in rows
    ]


def _examples_of(
    conn: sa.Connection,
    group: Sequence[sa.ColumnElement[Any]],
    where: Sequence[sa.ColumnElement[bool]],
    k: int,
) -> dict[tuple[Any, ...], tuple[str, ...]]:
    return examples_per_group(conn, group, where, k, source=_joined, trace=runs.c.trace_id)


def _selection(conn: sa.Connection, window: Window) -> list[SelectionIssue]:
    statement = (
        sa.select(
            runs.c.trace_id,
            runs.c.run_id,
            runs.c.agent,
            runs.c.tools,
            results.c.scorer,
            results.c.scorer_kind,
            results.c.scored_at,
            issues.c.kind,
            issues.c.severity,
            issues.c.tool,
            issues.c.expected_tool,
            issues.c.call_index,
        )
        .select_from(_joined)
        .where(*_in_window(window), _not_notes(), issues.c.kind.in_(sorted(SELECTION_KINDS)))
    )
    out: list[SelectionIssue] = []
    called_cache: dict[tuple[str, str], tuple[str, ...]] = {}
    for row in conn.execute(statement):
        run_key = (row.trace_id, row.run_id)
        called = called_cache.get(run_key)
        if called is None:
            tools = row.tools
            if isinstance(tools, str):  # a JSON column read raw (never on a current store; harmless)
                tools = json.loads(tools)
            called = tuple(str(t) for t in tools) if isinstance(tools, list) else ()
            called_cache[run_key] = called
        out.append(
            SelectionIssue(
                trace_id=row.trace_id,
                run_id=row.run_id,
                agent=row.agent,
                scorer=row.scorer,
                judge=str(row.scorer_kind).startswith("judge"),
                kind=row.kind,
                severity=row.severity,
                tool=row.tool,
                expected_tool=row.expected_tool,
                call_index=row.call_index,
                called=called,
                scored_at=row.scored_at,
            )
        )
    return out


def _values(conn: sa.Connection, window: Window) -> list[ValueCount]:
    value = sa.cast(issues.c.actual, sa.Text).label("value")
    group = [runs.c.agent, issues.c.kind, issues.c.tool, issues.c.parameter, value]
    statement = (
        sa.select(*group, sa.func.count().label("n"))
        .select_from(_joined)
        .where(*_in_window(window), _not_notes(), issues.c.kind.in_(VALUE_KINDS), issues.c.actual.is_not(None))
        .group_by(*group)
    )
    out: list[ValueCount] = []
    for row in conn.execute(statement):
        if row.value is None:
            continue
        out.append(ValueCount(row.agent, row.kind, row.tool, row.parameter, _value_text(row.value), int(row.n)))
    return out


def _value_text(raw: str) -> str:
    try:
        value = json.loads(raw)
    except ValueError:
        return raw
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def _category_runs(conn: sa.Connection, window: Window) -> dict[tuple[str | None, str], int]:
    category = sa.case({str(k): str(v) for k, v in CATEGORY_OF.items()}, value=issues.c.kind, else_="outcome").label(
        "category"
    )
    statement = (
        sa.select(runs.c.agent, category, sa.func.count(sa.distinct(_run_key(runs))).label("runs"))
        .select_from(_joined)
        .where(*_in_window(window), _not_notes())
        .group_by(runs.c.agent, category)
    )
    return {(row.agent, row.category): int(row.runs) for row in conn.execute(statement)}


def load_window(source: Source, since: datetime, until: datetime, *, examples: int = 3) -> WindowData:
    """Everything :func:`monitor.analysis.analyze` needs about the runs first scored in ``[since, until)``."""
    window = Window(_utc(since), _utc(until))
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        return WindowData(
            window=window,
            agent_days=_agent_days(conn, window),
            tools=_tools(conn, window),
            issue_groups=_issue_groups(conn, window, examples),
            selection=_selection(conn, window),
            values=_values(conn, window),
            category_runs=_category_runs(conn, window),
        )


def tool_definitions_of(source: Source, agents: Iterable[str | None] | None = None) -> list[ToolDefinition]:
    """The tool definitions agents offered (every version: :class:`~monitor.analysis.DefinitionIndex` keeps the
    latest); empty on a store older than revision 0004."""
    if not features(source).tool_definitions:
        return []
    statement = sa.select(
        tool_definitions.c.agent,
        tool_definitions.c.name,
        tool_definitions.c.description,
        tool_definitions.c.input_schema,
        tool_definitions.c.last_seen,
    )
    if agents is not None:
        statement = statement.where(tool_definitions.c.agent.in_(sorted({a or "" for a in agents})))
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
    return [
        ToolDefinition(row.agent or None, row.name, row.description, row.input_schema, row.last_seen) for row in rows
    ]


def scorer_summaries(source: Source, since: datetime, until: datetime) -> list[ScorerSummary]:
    """Results per scorer stored in the window (``results.scored_at``: one range scan, no join), sorted by scorer."""
    window = Window(_utc(since), _utc(until))

    statement = (
        sa.select(results.c.scorer, sa.func.min(results.c.scorer_kind).label("kind"), *result_counts())
        .where(*_stored_in(window))
        .group_by(results.c.scorer)
    )
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
    out = [ScorerSummary(scorer=row.scorer, scorer_kind=row.kind, **counts_of(row)) for row in rows]
    return sorted(out, key=lambda s: s.scorer)


def score_buckets(source: Source, since: datetime, until: datetime) -> list[ScoreBucket]:
    """Scored results per scorer and tenth of the score range, stored in the window (``results.scored_at``)."""
    window = Window(_utc(since), _utc(until))
    score = results.c.score
    bucket = sa.case(*[(score < (b + 1) / 10, b) for b in range(9)], else_=9).label("bucket")
    statement = (
        sa.select(
            results.c.scorer,
            bucket,
            sa.func.count().label("n"),
            sa.func.coalesce(sa.func.sum(sa.case((results.c.passed == sa.true(), 1), else_=0)), 0).label("passed"),
        )
        .where(*_stored_in(window), results.c.status == "scored", score.is_not(None))
        .group_by(results.c.scorer, bucket)
    )
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        rows = conn.execute(statement).all()
    out = [ScoreBucket(row.scorer, int(row.bucket), int(row.n), int(row.passed)) for row in rows]
    return sorted(out, key=lambda b: (b.scorer, b.bucket))


def judge_spend(source: Source, since: datetime, until: datetime) -> list[JudgeSpend]:
    """Judge usage per (UTC day, scorer, model) of the results stored in ``[since, until)`` (``scored_at``)."""
    judge = results.c.judge
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        day = _day(conn, results.c.scored_at).label("day")
        model = judge["model"].as_string().label("model")
        cost = judge["cost_usd"].as_float()
        statement = (
            sa.select(
                day,
                results.c.scorer,
                model,
                sa.func.count().label("n"),
                sa.func.coalesce(sa.func.sum(judge["input_tokens"].as_integer()), 0).label("input_tokens"),
                sa.func.coalesce(sa.func.sum(judge["output_tokens"].as_integer()), 0).label("output_tokens"),
                sa.func.count(cost).label("priced"),
                sa.func.sum(cost).label("cost"),
            )
            .where(
                results.c.scored_at >= _utc(since),
                results.c.scored_at < _utc(until),
                judge.is_not(None),
            )
            .group_by(day, results.c.scorer, model)
        )
        rows = conn.execute(statement).all()
    out = [
        JudgeSpend(
            day=date.fromisoformat(row.day),
            scorer=row.scorer,
            model=row.model,
            results=int(row.n),
            input_tokens=int(row.input_tokens),
            output_tokens=int(row.output_tokens),
            cost_usd=float(row.cost) if row.priced else None,
        )
        for row in rows
    ]
    return sorted(out, key=lambda s: (s.day, s.scorer, s.model or ""))


def example_runs(source: Source, trace_ids: Iterable[str]) -> dict[str, ExampleRun]:
    """The kept top-level run of each trace id (the first run of the trace when it has several); empty on a store
    older than revision 0004."""
    wanted = sorted(set(trace_ids))
    if not wanted or not features(source).run_summaries:
        return {}
    found: dict[str, ExampleRun] = {}
    with _unavailable_on_connection_errors(), _engine(source).connect() as conn:
        for start in range(0, len(wanted), 500):
            chunk = wanted[start : start + 500]
            statement = (
                sa.select(
                    run_summaries.c.trace_id,
                    run_summaries.c.run_id,
                    run_summaries.c.agent,
                    run_summaries.c.user_text,
                    run_summaries.c.final_response,
                    run_summaries.c.status,
                    run_summaries.c.duration_ms,
                    run_summaries.c.calls,
                )
                .where(run_summaries.c.trace_id.in_(chunk))
                .order_by(run_summaries.c.trace_id, run_summaries.c.run_id)
            )
            for row in conn.execute(statement):
                found.setdefault(
                    row.trace_id,
                    ExampleRun(
                        row.trace_id,
                        row.run_id,
                        row.agent,
                        row.user_text,
                        row.final_response,
                        row.status,
                        row.duration_ms,
                        int(row.calls),
                    ),
                )
    return found
