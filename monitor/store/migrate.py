"""Versioned schema migrations (Alembic), run programmatically: no ``alembic.ini`` at runtime.

The revisions live in ``monitor/store/migrations/versions``. Replicas starting together migrate once: the others
wait, then find the schema at head. On PostgreSQL an upgrade holds a transaction-level advisory lock; on SQLite it
runs in one ``BEGIN IMMEDIATE`` transaction, which takes the file's write lock at once (the others wait for it
within the busy timeout). Without it the sqlite3 module runs each DDL statement in autocommit, so a second
process saw the first one's tables before its ``alembic_version`` row and failed with ``table runs already
exists``. DDL is transactional on both, so a failed upgrade leaves the previous schema.
"""

from __future__ import annotations

from pathlib import Path

import sqlalchemy as sa
from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).parent / "migrations"
_PG_LOCK_KEY = 0x6D6F6E73746F7265  # "monstore": pg_advisory_xact_lock key for migrations


def alembic_config(connection: sa.Connection | None = None) -> Config:
    """An Alembic config for the packaged migrations; ``connection`` is used by ``env.py`` when given."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if connection is not None:
        cfg.attributes["connection"] = connection
    return cfg


def head_revision() -> str:
    """The newest revision shipped with this version of the package."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


def current_revision(engine: sa.Engine) -> str | None:
    """The revision the database is at (None: never migrated)."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def upgrade(engine: sa.Engine, revision: str = "head") -> None:
    """Apply the migrations up to ``revision`` (one transaction, serialised across processes)."""
    with engine.begin() as conn:
        _serialise(conn)
        command.upgrade(alembic_config(conn), revision)


def downgrade(engine: sa.Engine, revision: str = "base") -> None:
    """Revert the migrations down to ``revision`` (``base``: drop every table of the store)."""
    with engine.begin() as conn:
        _serialise(conn)
        command.downgrade(alembic_config(conn), revision)


def _serialise(conn: sa.Connection) -> None:
    """Make this transaction the only one migrating the database until it ends (module docstring)."""
    if conn.dialect.name == "postgresql":
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _PG_LOCK_KEY})
    elif conn.dialect.name == "sqlite":
        conn.exec_driver_sql("BEGIN IMMEDIATE")
