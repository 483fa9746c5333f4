"""Session fixtures shared by the whole suite: a real Kafka broker (Tansu) and a real PostgreSQL.

``kafka_bootstrap`` is one Tansu broker for the session (memory storage, a free loopback port);
tests isolate themselves with their own topic names and group ids. Tests that stop or restart a
broker start their own :class:`tests.support.kafka.TansuBroker` instead.

``postgres_cluster`` / ``postgres_url`` come from :mod:`tests.support.postgres` (a throwaway
trust-auth cluster, or ``MONITOR_TEST_POSTGRES_URL``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.kafka import TansuBroker
from tests.support.postgres import postgres_cluster, postgres_url

__all__ = ["kafka_bootstrap", "kafka_broker", "postgres_cluster", "postgres_url"]


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TansuBroker]:
    broker = TansuBroker(tmp_path_factory.mktemp("tansu"))
    broker.start()
    yield broker
    broker.stop()


@pytest.fixture(scope="session")
def kafka_bootstrap(kafka_broker: TansuBroker) -> str:
    return kafka_broker.bootstrap
