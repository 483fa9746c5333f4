"""Where scored runs go: SQLite by default (one file), PostgreSQL for several replicas (DESIGN §3 Store).

The same schema and queries on both (SQLAlchemy Core), versioned migrations (Alembic, shipped in the package),
retention. :func:`open_store` is the entry point; :mod:`monitor.store.queries` holds the report queries.
"""

from __future__ import annotations

from monitor.settings import StoreSettings
from monitor.store import migrate
from monitor.store.base import (
    JudgeJob,
    KeptRun,
    OfferedTool,
    ReplayMark,
    ResultStore,
    SchemaNotCurrent,
    StoredResult,
    StoreUnavailable,
)
from monitor.store.sql import SqlResultStore, create_store_engine

__all__ = [
    "JudgeJob",
    "KeptRun",
    "OfferedTool",
    "ReplayMark",
    "ResultStore",
    "SchemaNotCurrent",
    "SqlResultStore",
    "StoreUnavailable",
    "StoredResult",
    "create_store_engine",
    "migrate",
    "open_store",
]


def open_store(settings: StoreSettings) -> SqlResultStore:
    """Open the store at ``settings.url``; migrate it to head when ``settings.migrate_on_start``.

    Without ``migrate_on_start`` the schema must already be current (:class:`SchemaNotCurrent` otherwise).
    Raises :class:`StoreUnavailable` when the database cannot be reached. ``connect_timeout_s`` and
    ``statement_timeout_s`` bound every call of the store, even on a server that stopped answering (see
    :class:`SqlResultStore`).
    """
    store = SqlResultStore(
        settings.url, connect_timeout_s=settings.connect_timeout_s, statement_timeout_s=settings.statement_timeout_s
    )
    try:
        if settings.migrate_on_start:
            store.migrate()
        else:
            store.check_schema()
    except BaseException:
        store.close()
        raise
    return store
