"""Initial schema: runs, results, issues, judge_batches.

Revision ID: 0001
Revises:
Create Date: 2025-01-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None

_BIG_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")
_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "runs",
        sa.Column("trace_id", sa.Text(), nullable=False, comment="W3C trace id (hex)"),
        sa.Column("run_id", sa.Text(), nullable=False, comment="id of the run inside the trace (root span id)"),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("conversation_id", sa.Text(), nullable=True),
        sa.Column("start_time", _TS, nullable=True, comment="start of the run (from the spans)"),
        sa.Column("tools", sa.JSON(), nullable=False, comment="names of the tools called, in call order"),
        sa.Column("first_scored_at", _TS, nullable=False),
        sa.Column("last_scored_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("trace_id", "run_id", name=op.f("pk_runs")),
    )
    op.create_index(op.f("ix_runs_last_scored_at"), "runs", ["last_scored_at"])
    op.create_index(op.f("ix_runs_agent_start_time"), "runs", ["agent", "start_time"])

    op.create_table(
        "results",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=True, comment="copied from the run for the report indexes"),
        sa.Column("scorer", sa.Text(), nullable=False, comment="scorer instance id"),
        sa.Column("scorer_version", sa.Integer(), nullable=False),
        sa.Column("scorer_kind", sa.Text(), nullable=False),
        sa.Column("params_hash", sa.Text(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False, comment="scored | not_applicable | error"),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("threshold", sa.Float(), nullable=True),
        sa.Column("passed", sa.Boolean(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("degraded", sa.Text(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=False),
        sa.Column(
            "judge", sa.JSON(), nullable=True, comment="judge usage (model, tokens, cost), null for code scorers"
        ),
        sa.Column("scored_at", _TS, nullable=False),
        sa.ForeignKeyConstraint(
            ["trace_id", "run_id"],
            ["runs.trace_id", "runs.run_id"],
            name=op.f("fk_results_trace_id_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_results")),
        sa.UniqueConstraint(
            "trace_id",
            "run_id",
            "scorer",
            "scorer_version",
            name=op.f("uq_results_trace_id_run_id_scorer_scorer_version"),
        ),
    )
    op.create_index(op.f("ix_results_scored_at_agent_scorer"), "results", ["scored_at", "agent", "scorer"])
    op.create_index(op.f("ix_results_agent_scorer_scored_at"), "results", ["agent", "scorer", "scored_at"])

    op.create_table(
        "issues",
        sa.Column("id", _BIG_ID, autoincrement=True, nullable=False),
        sa.Column("result_id", _BIG_ID, nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False, comment="FailureKind or NoteKind"),
        sa.Column("severity", sa.String(length=16), nullable=False, comment="error | warning | info"),
        sa.Column("tool", sa.Text(), nullable=True),
        sa.Column("parameter", sa.Text(), nullable=True, comment="JSON Pointer"),
        sa.Column("call_index", sa.Integer(), nullable=True),
        sa.Column("call_id", sa.Text(), nullable=True),
        sa.Column("turn", sa.Integer(), nullable=True),
        sa.Column("expected_tool", sa.Text(), nullable=True, comment="wrong_tool: the tool that was expected"),
        sa.Column("expected", sa.JSON(), nullable=True),
        sa.Column("actual", sa.JSON(), nullable=True),
        sa.Column("detail", sa.JSON(), nullable=True),
        sa.ForeignKeyConstraint(
            ["result_id"], ["results.id"], name=op.f("fk_issues_result_id_results"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_issues")),
    )
    op.create_index(op.f("ix_issues_result_id"), "issues", ["result_id"])
    op.create_index(op.f("ix_issues_kind_tool"), "issues", ["kind", "tool"])

    op.create_table(
        "judge_batches",
        sa.Column("id", sa.Text(), nullable=False, comment="provider batch id"),
        sa.Column("custom_ids", sa.JSON(), nullable=False, comment="custom ids of the requests in the batch"),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("submitted_at", _TS, nullable=False),
        sa.Column("updated_at", _TS, nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_judge_batches")),
    )
    op.create_index(op.f("ix_judge_batches_status_submitted_at"), "judge_batches", ["status", "submitted_at"])


def downgrade() -> None:
    op.drop_index(op.f("ix_judge_batches_status_submitted_at"), table_name="judge_batches")
    op.drop_table("judge_batches")
    op.drop_index(op.f("ix_issues_kind_tool"), table_name="issues")
    op.drop_index(op.f("ix_issues_result_id"), table_name="issues")
    op.drop_table("issues")
    op.drop_index(op.f("ix_results_agent_scorer_scored_at"), table_name="results")
    op.drop_index(op.f("ix_results_scored_at_agent_scorer"), table_name="results")
    op.drop_table("results")
    op.drop_index(op.f("ix_runs_agent_start_time"), table_name="runs")
    op.drop_index(op.f("ix_runs_last_scored_at"), table_name="runs")
    op.drop_table("runs")
