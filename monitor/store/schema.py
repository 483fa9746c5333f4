"""The store's tables (SQLAlchemy Core), identical on SQLite and PostgreSQL.

The migrations in :mod:`monitor.store.migrations` build exactly this schema; a test checks that
Alembic's ``compare_metadata`` finds no difference. Change both together (a new revision per change).

Timestamps are stored in UTC (:class:`UTCDateTime`); JSON columns use the portable ``sqlalchemy.JSON`` type
(``json`` on PostgreSQL, text holding JSON on SQLite).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Dialect

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class UTCDateTime(sa.types.TypeDecorator[datetime]):
    """A timezone-aware datetime stored in UTC.

    Binds: aware datetimes are converted to UTC, naive ones are taken as UTC. Results: always aware (UTC).
    SQLite keeps the UTC wall-clock text, so comparisons stay correct there as well.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)

    def process_result_value(self, value: Any, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        assert isinstance(value, datetime)
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        return value.astimezone(UTC)


# BIGINT on PostgreSQL; INTEGER on SQLite so the column is the rowid alias (autoincrementing).
BigId = sa.BigInteger().with_variant(sa.Integer(), "sqlite")

runs = sa.Table(
    "runs",
    metadata,
    sa.Column("trace_id", sa.Text, primary_key=True, comment="W3C trace id (hex)"),
    sa.Column("run_id", sa.Text, primary_key=True, comment="id of the run inside the trace (root span id)"),
    sa.Column("agent", sa.Text, nullable=True),
    sa.Column("conversation_id", sa.Text, nullable=True),
    sa.Column("start_time", UTCDateTime, nullable=True, comment="start of the run (from the spans)"),
    sa.Column("tools", sa.JSON, nullable=False, comment="names of the tools called, in call order"),
    sa.Column("first_scored_at", UTCDateTime, nullable=False),
    sa.Column("last_scored_at", UTCDateTime, nullable=False),
    sa.Index(None, "last_scored_at"),
    sa.Index(None, "agent", "start_time"),
)

results = sa.Table(
    "results",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("trace_id", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("agent", sa.Text, nullable=True, comment="copied from the run for the report indexes"),
    sa.Column("scorer", sa.Text, nullable=False, comment="scorer instance id"),
    sa.Column("scorer_version", sa.Integer, nullable=False),
    sa.Column("scorer_kind", sa.Text, nullable=False),
    sa.Column("params_hash", sa.Text, nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("status", sa.String(16), nullable=False, comment="scored | not_applicable | error"),
    sa.Column("score", sa.Float, nullable=True),
    sa.Column("threshold", sa.Float, nullable=True),
    sa.Column("passed", sa.Boolean, nullable=True),
    sa.Column("reason", sa.Text, nullable=True),
    sa.Column("degraded", sa.Text, nullable=True),
    sa.Column("details", sa.JSON, nullable=False),
    sa.Column(
        "judge",
        sa.JSON(none_as_null=True),
        nullable=True,
        comment="judge usage (model, tokens, cost), null for code scorers",
    ),
    sa.Column("scored_at", UTCDateTime, nullable=False),
    sa.UniqueConstraint("trace_id", "run_id", "scorer", "scorer_version"),
    sa.ForeignKeyConstraint(["trace_id", "run_id"], ["runs.trace_id", "runs.run_id"], ondelete="CASCADE"),
    sa.Index(None, "scored_at", "agent", "scorer"),
    sa.Index(None, "agent", "scorer", "scored_at"),
)

issues = sa.Table(
    "issues",
    metadata,
    sa.Column("id", BigId, primary_key=True, autoincrement=True),
    sa.Column("result_id", BigId, sa.ForeignKey("results.id", ondelete="CASCADE"), nullable=False),
    sa.Column("kind", sa.String(64), nullable=False, comment="FailureKind or NoteKind"),
    sa.Column("severity", sa.String(16), nullable=False, comment="error | warning | info"),
    sa.Column("tool", sa.Text, nullable=True),
    sa.Column("parameter", sa.Text, nullable=True, comment="JSON Pointer"),
    sa.Column("call_index", sa.Integer, nullable=True),
    sa.Column("call_id", sa.Text, nullable=True),
    sa.Column("turn", sa.Integer, nullable=True),
    sa.Column("expected_tool", sa.Text, nullable=True, comment="wrong_tool: the tool that was expected"),
    sa.Column("expected", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("actual", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("detail", sa.JSON(none_as_null=True), nullable=True),
    sa.Index(None, "result_id"),
    sa.Index(None, "kind", "tool"),
)

run_summaries = sa.Table(
    "run_summaries",
    metadata,
    sa.Column("trace_id", sa.Text, primary_key=True),
    sa.Column("run_id", sa.Text, primary_key=True),
    sa.Column("agent", sa.Text, nullable=True),
    sa.Column("user_text", sa.Text, nullable=True, comment="capped like every kept text"),
    sa.Column("final_response", sa.Text, nullable=True),
    sa.Column("status", sa.String(16), nullable=False, comment="ok | error"),
    sa.Column("duration_ms", sa.Float, nullable=True),
    sa.Column("calls", sa.Integer, nullable=False, comment="calls of the run (all of them, kept or not)"),
    sa.Column("run", sa.JSON, nullable=False, comment="the run as monitor.trajectory.serialize writes it, capped"),
    sa.ForeignKeyConstraint(["trace_id", "run_id"], ["runs.trace_id", "runs.run_id"], ondelete="CASCADE"),
    comment="each scored run as it can be looked at (monitor show, reports); goes with its run (retention)",
)

tool_definitions = sa.Table(
    "tool_definitions",
    metadata,
    sa.Column("agent", sa.Text, primary_key=True, comment="'' when the run names no agent"),
    sa.Column("name", sa.Text, primary_key=True),
    sa.Column("definition_hash", sa.String(64), primary_key=True, comment="sha256 of description and schema"),
    sa.Column("description", sa.Text, nullable=True),
    sa.Column("input_schema", sa.JSON(none_as_null=True), nullable=True),
    sa.Column("first_seen", UTCDateTime, nullable=False),
    sa.Column("last_seen", UTCDateTime, nullable=False),
    sa.Index(None, "agent", "name", "last_seen"),
    comment="the tools each agent offered, as its spans carried them (recommendations quote them)",
)

judge_jobs = sa.Table(
    "judge_jobs",
    metadata,
    sa.Column("key", sa.Text, primary_key=True, comment="the verdict's idempotency key: trace|run|scorer|version"),
    sa.Column("trace_id", sa.Text, nullable=False),
    sa.Column("run_id", sa.Text, nullable=False),
    sa.Column("agent", sa.Text, nullable=True),
    sa.Column("scorer", sa.Text, nullable=False, comment="scorer instance id"),
    sa.Column("scorer_kind", sa.Text, nullable=False),
    sa.Column("scorer_version", sa.Integer, nullable=False),
    sa.Column("params", sa.JSON, nullable=False),
    sa.Column("run", sa.JSON, nullable=False, comment="the run as monitor.trajectory.serialize writes it"),
    sa.Column("run_start_ns", sa.BigInteger, nullable=True),
    sa.Column("flagged", sa.Boolean, nullable=False, comment="a code check flagged the run"),
    sa.Column("enqueued_at", UTCDateTime, nullable=False),
    sa.Column("lease_owner", sa.Text, nullable=True, comment="the daemon judging it"),
    sa.Column("lease_until", UTCDateTime, nullable=True, comment="after this another daemon may take it over"),
    sa.Column("attempts", sa.Integer, nullable=False, comment="times the API did not answer it"),
    sa.Index(None, "lease_until"),
    sa.Index(None, "enqueued_at"),
    comment="judge verdicts owed: written with the trace's code results, deleted with the verdict",
)

judge_batches = sa.Table(
    "judge_batches",
    metadata,
    sa.Column("id", sa.Text, primary_key=True, comment="provider batch id"),
    sa.Column("purpose", sa.String(16), nullable=False, comment="daemon | eval"),
    sa.Column("model", sa.Text, nullable=True),
    sa.Column("requests", sa.Integer, nullable=False, comment="requests in the batch"),
    sa.Column("status", sa.String(32), nullable=False, comment="in_progress | canceling | ended | expired | lost"),
    sa.Column("submitted_at", UTCDateTime, nullable=False),
    sa.Column("expires_at", UTCDateTime, nullable=True),
    sa.Column("updated_at", UTCDateTime, nullable=True),
    sa.Index(None, "status", "submitted_at"),
)

judge_batch_requests = sa.Table(
    "judge_batch_requests",
    metadata,
    sa.Column("batch_id", sa.Text, primary_key=True),
    sa.Column("custom_id", sa.Text, primary_key=True, comment="sha256 of key#sample#round"),
    sa.ForeignKeyConstraint(["batch_id"], ["judge_batches.id"], ondelete="CASCADE"),
    sa.Index(None, "custom_id"),
    comment="which batch holds which request, so a restart polls the batch instead of sending it again",
)

replay_marks = sa.Table(
    "replay_marks",
    metadata,
    sa.Column("topic", sa.Text, primary_key=True),
    sa.Column("partition", sa.Integer, primary_key=True),
    sa.Column("kind", sa.String(16), primary_key=True, comment="trace | dead_letter"),
    sa.Column("ident", sa.Text, primary_key=True, comment="trace id (hex), or the dead-lettered record's offset"),
    sa.Column("last_offset", sa.BigInteger, nullable=False, comment="the last record of it on this partition"),
    sa.Column("marked_at", UTCDateTime, nullable=False),
    sa.Index(None, "topic", "partition", "last_offset"),
    comment="work already done on records a restart may read again (see docs/daemon.md, Offsets and delivery)",
)
