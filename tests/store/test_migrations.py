"""Migrations: upgrade/downgrade round trip, and the migrated schema equals the SQLAlchemy metadata."""

from __future__ import annotations

import threading

import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext

from monitor.store import create_store_engine, migrate
from monitor.store.schema import metadata

TABLES = {
    "runs",
    "results",
    "issues",
    "judge_batches",
    "judge_batch_requests",
    "judge_jobs",
    "replay_marks",
    "run_summaries",
    "tool_definitions",
}


def tables(engine: sa.Engine) -> set[str]:
    return set(sa.inspect(engine).get_table_names()) - {"alembic_version"}


def test_upgrade_downgrade_upgrade(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        assert migrate.current_revision(engine) is None
        migrate.upgrade(engine)
        assert tables(engine) == TABLES
        assert migrate.current_revision(engine) == migrate.head_revision()
        migrate.downgrade(engine, "base")
        assert tables(engine) == set()
        assert migrate.current_revision(engine) is None
        migrate.upgrade(engine)
        assert tables(engine) == TABLES
        migrate.upgrade(engine)  # at head: no-op
    finally:
        engine.dispose()


def test_migrated_schema_equals_metadata(store_url: str) -> None:
    engine = create_store_engine(store_url)
    try:
        migrate.upgrade(engine)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True, "compare_server_default": True})
            diff = compare_metadata(context, metadata)
        assert diff == []
        # the comparison does see differences
        changed = sa.MetaData()
        for table in metadata.sorted_tables:
            table.to_metadata(changed)
        sa.Table("runs", changed, sa.Column("extra", sa.Integer), extend_existing=True)
        with engine.connect() as conn:
            context = MigrationContext.configure(conn, opts={"compare_type": True})
            assert [d[0] for d in compare_metadata(context, changed)] == ["add_column"]
    finally:
        engine.dispose()


def test_replicas_migrating_together(store_url: str) -> None:
    """Several processes' stores upgrading at once: one migrates, the others find the schema current (SQLite: the
    ``BEGIN IMMEDIATE`` of each upgrade; PostgreSQL: the advisory lock)."""
    errors: list[BaseException] = []
    run_count = 4
    barrier = threading.Barrier(run_count)

    def run() -> None:
        engine = create_store_engine(store_url)
        try:
            barrier.wait()
            migrate.upgrade(engine)
        except BaseException as exc:
            errors.append(exc)
        finally:
            engine.dispose()

    threads = [threading.Thread(target=run) for _ in range(run_count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    engine = create_store_engine(store_url)
    assert migrate.current_revision(engine) == migrate.head_revision()
    engine.dispose()
