"""Judge jobs owed and the requests of each Message Batch (issue 10: judges online and in batches).

``judge_jobs``: verdicts owed, written with the trace's code results and deleted with the verdict, so a restart
resumes them. ``judge_batches`` loses its JSON list of custom ids for ``judge_batch_requests`` (one row per
request, indexed by custom id) and gains the batch's purpose, model, size and expiry.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "judge_jobs",
        sa.Column("key", sa.Text(), nullable=False, comment="the verdict's idempotency key: trace|run|scorer|version"),
        sa.Column("trace_id", sa.Text(), nullable=False),
        sa.Column("run_id", sa.Text(), nullable=False),
        sa.Column("agent", sa.Text(), nullable=True),
        sa.Column("scorer", sa.Text(), nullable=False, comment="scorer instance id"),
        sa.Column("scorer_kind", sa.Text(), nullable=False),
        sa.Column("scorer_version", sa.Integer(), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("run", sa.JSON(), nullable=False, comment="the run as monitor.trajectory.serialize writes it"),
        sa.Column("run_start_ns", sa.BigInteger(), nullable=True),
        sa.Column("flagged", sa.Boolean(), nullable=False, comment="a code check flagged the run"),
        sa.Column("enqueued_at", _TS, nullable=False),
        sa.Column("lease_owner", sa.Text(), nullable=True, comment="the daemon judging it"),
        sa.Column("lease_until", _TS, nullable=True, comment="after this another daemon may take it over"),
        sa.Column("attempts", sa.Integer(), nullable=False, comment="times the API did not answer it"),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_judge_jobs")),
        comment="judge verdicts owed: written with the trace's code results, deleted with the verdict",
    )
    op.create_index(op.f("ix_judge_jobs_lease_until"), "judge_jobs", ["lease_until"])
    op.create_index(op.f("ix_judge_jobs_enqueued_at"), "judge_jobs", ["enqueued_at"])

    op.execute(sa.text("DELETE FROM judge_batches"))  # never written before this revision; new columns are NOT NULL
    with op.batch_alter_table("judge_batches") as batch:
        batch.drop_column("custom_ids")
        batch.add_column(sa.Column("purpose", sa.String(length=16), nullable=False, comment="daemon | eval"))
        batch.add_column(sa.Column("model", sa.Text(), nullable=True))
        batch.add_column(sa.Column("requests", sa.Integer(), nullable=False, comment="requests in the batch"))
        batch.add_column(sa.Column("expires_at", _TS, nullable=True))
        batch.alter_column(
            "status",
            existing_type=sa.String(length=32),
            existing_nullable=False,
            comment="in_progress | canceling | ended | expired | lost",
        )

    op.create_table(
        "judge_batch_requests",
        sa.Column("batch_id", sa.Text(), nullable=False),
        sa.Column("custom_id", sa.Text(), nullable=False, comment="sha256 of key#sample#round"),
        sa.ForeignKeyConstraint(
            ["batch_id"],
            ["judge_batches.id"],
            name=op.f("fk_judge_batch_requests_batch_id_judge_batches"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("batch_id", "custom_id", name=op.f("pk_judge_batch_requests")),
        comment="which batch holds which request, so a restart polls the batch instead of sending it again",
    )
    op.create_index(op.f("ix_judge_batch_requests_custom_id"), "judge_batch_requests", ["custom_id"])


def downgrade() -> None:
    op.drop_index(op.f("ix_judge_batch_requests_custom_id"), table_name="judge_batch_requests")
    op.drop_table("judge_batch_requests")
    op.execute(sa.text("DELETE FROM judge_batches"))
    with op.batch_alter_table("judge_batches") as batch:
        batch.alter_column("status", existing_type=sa.String(length=32), existing_nullable=False, comment=None)
        batch.drop_column("expires_at")
        batch.drop_column("requests")
        batch.drop_column("model")
        batch.drop_column("purpose")
        batch.add_column(
            sa.Column("custom_ids", sa.JSON(), nullable=False, comment="custom ids of the requests in the batch")
        )
    op.drop_index(op.f("ix_judge_jobs_enqueued_at"), table_name="judge_jobs")
    op.drop_index(op.f("ix_judge_jobs_lease_until"), table_name="judge_jobs")
    op.drop_table("judge_jobs")
