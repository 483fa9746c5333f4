"""Helpers for testing one step at a time: a terminal step that collects what reaches it (and can refuse), the
real settings, store, metrics and dead-letter producer (disabled: counted, not produced) of a pipeline; and the
whole chain on the in-memory broker (:func:`memory_chain`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Set
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Generic, TypeVar

import pytest

from monitor.app import build_loop
from monitor.export.http import HealthState
from monitor.export.metrics import Metrics
from monitor.ingest.dlq import DeadLetterQueue
from monitor.ingest.loop import RunLoop
from monitor.ingest.memory import MemoryBroker
from monitor.sampling.sampler import Sampler
from monitor.scoring.stage import ScoringStage
from monitor.settings import Settings
from monitor.steps.contract import Message, MessageRejected, TopicPartition
from monitor.steps.work import InFlight, LoopStats, StoreAvailability
from monitor.store import ResultStore, open_store
from monitor.testing import ManualClock

T = TypeVar("T")
TOPIC = "steps_spans"


class Collect(Generic[T]):
    """The end of a chain under test: keeps every message it takes; ``refuse`` makes it reject with that reason."""

    def __init__(self) -> None:
        self.messages: list[Message[T]] = []
        self.refuse: str | None = None
        self.polls = 0
        self.joins = 0
        self.forgotten: list[Set[TopicPartition]] = []

    def submit(self, message: Message[T]) -> None:
        if self.refuse is not None:
            raise MessageRejected(self.refuse)
        self.messages.append(message)

    def poll(self) -> None:
        self.polls += 1

    def join(self, timeout_s: float) -> None:
        self.joins += 1

    def forget(self, partitions: Set[TopicPartition]) -> int:
        self.forgotten.append(partitions)
        return 0

    def pressure(self) -> frozenset[str]:
        return frozenset({self.refuse}) if self.refuse else frozenset()

    def close(self) -> None:
        pass

    def terminate(self) -> None:
        pass

    @property
    def payloads(self) -> list[T]:
        return [m.payload for m in self.messages]


@dataclass
class Parts:
    """The real parts a step needs, for one test."""

    settings: Settings
    store: ResultStore
    metrics: Metrics
    health: HealthState
    dlq: DeadLetterQueue
    clock: ManualClock = field(default_factory=lambda: ManualClock(1_000.0))
    stats: LoopStats = field(default_factory=LoopStats)
    inflight: InFlight = field(default_factory=InFlight)

    @property
    def availability(self) -> StoreAvailability:
        return StoreAvailability(self.metrics, self.health, self.clock)


def make_settings(tmp_path: Path, *, topic: str = TOPIC, **sections: dict[str, Any]) -> Settings:
    """Settings of a pipeline under test: fast closes and commits, a SQLite store in ``tmp_path``, no DLQ."""
    doc: dict[str, dict[str, Any]] = {
        "kafka": {"spans_topic": topic, "commit_interval_s": 0.2},
        "assembler": {"root_idle_s": 0.0, "idle_s": 0.5},
        "store": {"url": f"sqlite:///{tmp_path / 'results.db'}"},
        "dead_letter": {"enabled": False},
    }
    for name, values in sections.items():
        doc.setdefault(name, {}).update(values)
    return Settings(**doc)  # type: ignore[arg-type]


@pytest.fixture
def parts(tmp_path: Path) -> Any:
    settings = make_settings(tmp_path)
    store = open_store(settings.store)
    p = Parts(
        settings, store, Metrics(settings.metrics), HealthState(), DeadLetterQueue(settings.kafka, settings.dead_letter)
    )
    yield p
    store.close()


def memory_chain(
    settings: Settings, broker: MemoryBroker, clock: Callable[[], float] = time.monotonic
) -> tuple[RunLoop, ResultStore]:
    """The daemon's whole chain (``build_loop``) on ``broker``'s spans topic, a store opened from ``settings``,
    the real metrics and scoring stage (no judges, no rules); the caller closes the store."""
    sampler = Sampler(settings.sampling)
    store = open_store(settings.store)
    loop = build_loop(
        settings,
        broker.source_factory([settings.kafka.spans_topic]),
        DeadLetterQueue(settings.kafka, settings.dead_letter),
        ScoringStage(settings, None, sampler, lambda: datetime.now(UTC)),
        store,
        Metrics(settings.metrics),
        HealthState(),
        sampler,
        clock=clock,
    )
    return loop, store
