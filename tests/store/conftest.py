"""Store fixtures: every store test runs on SQLite (a file) and on a real PostgreSQL (its own database)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from monitor.settings import StoreSettings
from monitor.store import SqlResultStore, open_store
from tests.support.postgres import PostgresCluster, postgres_cluster, postgres_url

__all__ = ["postgres_cluster", "postgres_url"]

BACKENDS = ["sqlite", "postgresql"]


def _new_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        yield f"sqlite:///{tmp_path / 'store.db'}"
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    url = cluster.create_database()
    yield url
    cluster.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture(params=BACKENDS)
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of an empty database of each backend (a fresh PostgreSQL database per test)."""
    yield from _new_url(request.param, request, tmp_path)


@pytest.fixture
def pg_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """URL of a fresh, empty PostgreSQL database (PostgreSQL-only tests)."""
    yield from _new_url("postgresql", request, tmp_path)


@pytest.fixture
def store(store_url: str) -> Iterator[SqlResultStore]:
    """A migrated store on each backend."""
    s = open_store(StoreSettings(url=store_url))
    yield s
    s.close()
