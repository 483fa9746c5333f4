"""Replay marks: traces and dead letters already handled above the committed offset.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    op.create_table(
        "replay_marks",
        sa.Column("topic", sa.Text(), nullable=False),
        sa.Column("partition", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False, comment="trace | dead_letter"),
        sa.Column("ident", sa.Text(), nullable=False, comment="trace id (hex), or the dead-lettered record's offset"),
        sa.Column("last_offset", sa.BigInteger(), nullable=False, comment="the last record of it on this partition"),
        sa.Column("marked_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("topic", "partition", "kind", "ident", name=op.f("pk_replay_marks")),
        comment="work already done on records a restart may read again (see docs/daemon.md, Offsets and delivery)",
    )
    op.create_index(
        op.f("ix_replay_marks_topic_partition_last_offset"),
        "replay_marks",
        ["topic", "partition", "last_offset"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_replay_marks_topic_partition_last_offset"), table_name="replay_marks")
    op.drop_table("replay_marks")
