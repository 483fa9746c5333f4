"""Alembic environment of the store's migrations.

Runs inside :func:`monitor.store.migrate.upgrade` / :func:`~monitor.store.migrate.downgrade`, which pass an open
connection in ``config.attributes["connection"]``; no ``alembic.ini`` is needed. For development
(``alembic revision --autogenerate``), ``sqlalchemy.url`` in the config (or ``MONITOR_STORE__URL``) is used.
"""

from __future__ import annotations

import os

import sqlalchemy as sa
from alembic import context

from monitor.store.schema import metadata

config = context.config


def _run(connection: sa.Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


connection = config.attributes.get("connection")
if isinstance(connection, sa.Connection):
    _run(connection)
else:
    url = config.get_main_option("sqlalchemy.url") or os.environ.get("MONITOR_STORE__URL", "sqlite:///monitor.db")
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            _run(conn)
    finally:
        engine.dispose()
