"""Report fixtures: a migrated store on SQLite and on a real PostgreSQL, and the demo's traffic run through the
real pipeline (in-memory broker, real scoring with the demo's rules, SQLite store)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path

import pytest
import sqlalchemy as sa

from monitor.settings import Settings, StoreSettings, load_settings
from monitor.store import create_store_engine, open_store
from tests.support.postgres import PostgresCluster, postgres_cluster, postgres_url

__all__ = ["postgres_cluster", "postgres_url"]

WEEK = "2026-W47"
WALL = datetime(2026, 11, 18, 12, tzinfo=UTC)  # inside 2026-W47 (Monday 2026-11-16 .. 2026-11-23)
SINCE = datetime(2026, 11, 16, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A migrated, empty store of each backend."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
        open_store(StoreSettings(url=url)).close()
        yield url
        return
    cluster: PostgresCluster = request.getfixturevalue("postgres_cluster")
    url = cluster.create_database()
    open_store(StoreSettings(url=url)).close()
    yield url
    cluster.drop_database(url.rsplit("/", 1)[1])


@pytest.fixture
def engine(store_url: str) -> Iterator[sa.Engine]:
    e = create_store_engine(store_url)
    yield e
    e.dispose()


def report_settings(url: str, **extra: object) -> Settings:
    return load_settings(None, store={"url": url}, **extra)  # type: ignore[arg-type]


@dataclass
class DemoStore:
    url: str
    behaviours: Counter[tuple[str, str, str]]
    """(agent, behaviour, convention) of every simulated run."""


def _run_demo_traffic(path: Path, runs: int, seed: int) -> DemoStore:
    from monitor.app import build_loop
    from monitor.demo.traffic import TrafficGenerator
    from monitor.export.http import HealthState
    from monitor.export.metrics import Metrics
    from monitor.ingest.dlq import DeadLetterQueue
    from monitor.ingest.memory import MemoryBroker
    from monitor.rules.ruleset import RuleSet
    from monitor.sampling.sampler import Sampler
    from monitor.scoring.stage import ScoringStage
    from monitor.testing import ManualClock

    url = f"sqlite:///{path}"
    settings = load_settings(
        None,
        kafka={"spans_topic": "spans", "commit_interval_s": 1.0},
        assembler={"root_idle_s": 0.0, "idle_s": 0.5},
        store={"url": url},
        dead_letter={"enabled": False},
    )
    broker, clock = MemoryBroker(), ManualClock(1_000.0)
    broker.create_topic("spans", 2)
    behaviours: Counter[tuple[str, str, str]] = Counter()
    seen: set[bytes | None] = set()
    for record in TrafficGenerator(seed=seed, malformed_ratio=0.0).batch(runs):
        broker.produce("spans", record.value, key=record.key)
        if record.run is not None and record.key not in seen:
            seen.add(record.key)
            behaviours[(record.run.agent, record.run.behaviour, record.run.convention)] += 1
    rules = RuleSet.load(Path(str(files("monitor.demo") / "rules.yaml")))
    sampler = Sampler(settings.sampling)
    stage = ScoringStage(settings, rules, sampler, lambda: WALL)
    store = open_store(settings.store)
    loop = build_loop(
        settings,
        broker.source_factory(["spans"]),
        DeadLetterQueue(settings.kafka, settings.dead_letter),
        stage,
        store,
        Metrics(settings.metrics),
        HealthState(),
        sampler=sampler,
        clock=clock,
        wall=lambda: WALL.timestamp(),
    )
    for _ in range(60):
        loop.step()
        clock.advance(0.5)
        if loop.stats.traces_scored >= runs:
            break
    assert loop.stats.traces_scored == runs
    store.close()
    return DemoStore(url, behaviours)


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> DemoStore:
    """The demo's traffic (seed 3, 800 runs) scored with the demo's rules into a SQLite store, all in 2026-W47."""
    return _run_demo_traffic(tmp_path_factory.mktemp("demo") / "demo.db", 800, 3)
