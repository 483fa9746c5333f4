"""Runs you can look at: each scored run's trajectory (capped, redacted) and the tools each agent offered.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "run_summaries",
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("user_text", sa.Text(), nullable=True, comment="capped like every kept text"),
        sa.Column("final_response", sa.Text(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False, comment="ok | error"),
        sa.Column("duration_ms", sa.Float(), nullable=True),
        sa.Column("calls", sa.Integer(), nullable=False, comment="calls of the run (all of them, kept or not)"),
        sa.Column(
            "run", sa.JSON(), nullable=False, comment="the run as monitor.trajectory.serialize writes it, capped"
        ),
        sa.ForeignKeyConstraint(
            ["trace_id", "run_id"],
            ["runs.trace_id", "runs.run_id"],
            name=op.f("fk_run_summaries_trace_id_run_id_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("trace_id", "run_id", name=op.f("pk_run_summaries")),
        comment="each scored run as it can be looked at (monitor show, reports); goes with its run (retention)",
    )
    op.create_table(
        "tool_definitions",
        sa.Column("agent", sa.Text(), nullable=False, comment="'' when the run names no agent"),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("definition_hash", sa.String(length=64), nullable=False, comment="sha256 of description and schema"),
        sa.Column("description", sa.Text(), nullable=True),
        sa.Column("input_schema", sa.JSON(none_as_null=True), nullable=True),
        sa.Column("first_seen", _TS, nullable=False),
        sa.Column("last_seen", _TS, nullable=False),
        sa.PrimaryKeyConstraint("agent", "name", "definition_hash", name=op.f("pk_tool_definitions")),
        comment="the tools each agent offered, as its spans carried them (recommendations quote them)",
    )
    op.create_index(
        op.f("ix_tool_definitions_agent_name_last_seen"), "tool_definitions", ["agent", "name", "last_seen"]
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_tool_definitions_agent_name_last_seen"), table_name="tool_definitions")
    op.drop_table("tool_definitions")
    op.drop_table("run_summaries")
