"""The Kafka side of the daemon: a consumer group member on the spans (and optional logs) topic.

:class:`KafkaSource` wraps kafka-python's ``KafkaConsumer`` with the few operations the run loop
needs, and nothing that commits by itself: ``enable_auto_commit`` is off and :meth:`commit` takes
explicit offsets (the assembler's low watermark). The :class:`Source` protocol is what the loop
depends on.

Contracts (kafka-python 3.x):

* :meth:`KafkaSource.poll` blocks at most ``timeout_ms`` (plus the time a rebalance takes). The
  rebalance callbacks run **during** ``poll()`` (and ``close()``): kafka-python 3.x runs them on its
  IO thread while the calling thread waits inside ``poll()``, so they never run concurrently with
  the loop's own code. They must not call blocking consumer APIs; :meth:`KafkaSource.commit` called
  from a revocation callback is therefore deferred and awaited by the listener before the
  rebalance goes on (see :class:`_Listener`). A revocation callback that blocks (scoring, store
  writes) delays heartbeats for that long.
* Paused partitions return no records but the member keeps polling, so it stays in the group.
  kafka-python does not pause newly assigned partitions; the loop pauses them in its assignment
  callback when it is holding work.
* :meth:`commit` is synchronous. It raises :class:`CommitError` when the commit failed (group
  rebalancing, coordinator unavailable, broker down): the offsets are not committed, and the next
  commit (the loop retries on its timer) carries them again. A successful commit does not promise
  that the records were processed by *this* member only: delivery is at least once.
* :meth:`lag` uses the high watermark the last Fetch response carried and the fetch position; it
  never sends ListOffsets (Tansu answers ListOffsets(latest) wrongly) and never blocks. A partition
  not fetched yet has no lag entry. While a partition is paused its high watermark is not refreshed.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from kafka import KafkaConsumer, TopicPartition
from kafka.consumer.subscription_state import AsyncConsumerRebalanceListener
from kafka.errors import KafkaError
from kafka.structs import OffsetAndMetadata

from monitor.ingest.security import build_security
from monitor.settings import KafkaSettings
from monitor.trajectory.assembler import TopicPartition as TP

log = logging.getLogger(__name__)

PartitionsCallback = Callable[[list[TP]], None]


class CommitError(Exception):
    """A commit that did not happen; the offsets stay uncommitted and are sent again next time."""


class Record(Protocol):
    """The fields of a consumed record the daemon reads (kafka-python's ``ConsumerRecord``)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> bytes | None: ...
    @property
    def value(self) -> bytes | None: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes | None]] | None: ...
    @property
    def timestamp(self) -> int:
        """Milliseconds since the epoch (the record's CreateTime or LogAppendTime); -1 when unknown."""
        ...


class Source(Protocol):
    """What the run loop needs from the broker. See the module docstring for the contract."""

    def poll(self, timeout_ms: int) -> list[Record]: ...
    def pause(self, partitions: Iterable[TP]) -> None: ...
    def resume(self, partitions: Iterable[TP]) -> None: ...
    def seek(self, partition: TP, offset: int) -> None: ...
    def assignment(self) -> set[TP]: ...
    def commit(self, offsets: Mapping[TP, int]) -> None: ...
    def lag(self) -> dict[TP, int]: ...
    def close(self) -> None: ...


class _Listener(AsyncConsumerRebalanceListener):  # type: ignore[misc]
    """Runs on kafka-python's IO thread while the loop thread is blocked in ``poll()`` (or ``close()``).

    kafka-python 3.x forbids blocking consumer calls there (``commit()`` raises), so the loop's
    callback runs with the source in *listener mode*: :meth:`KafkaSource.commit` only records the
    offsets, and the listener awaits the commit on the IO loop before the rebalance proceeds (so
    the new owner starts from them). After a forced eviction (``on_partitions_lost``) the member can
    no longer commit: the callback runs, its commit is refused with :class:`CommitError`.
    """

    def __init__(self, source: KafkaSource, on_revoked: PartitionsCallback, on_assigned: PartitionsCallback) -> None:
        self._source = source
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned

    async def on_partitions_revoked(self, revoked: Any) -> None:
        await self._revoke(revoked, lost=False)

    async def on_partitions_lost(self, lost: Any) -> None:
        await self._revoke(lost, lost=True)

    async def _revoke(self, partitions: Any, *, lost: bool) -> None:
        source = self._source
        source._listener_mode = "lost" if lost else "revoked"
        try:
            self._on_revoked(sorted((tp.topic, tp.partition) for tp in partitions))
        finally:
            source._listener_mode = None
        await source._flush_listener_commit()

    async def on_partitions_assigned(self, assigned: Any) -> None:
        source = self._source
        source._listener_mode = "assigned"
        try:
            self._on_assigned(sorted((tp.topic, tp.partition) for tp in assigned))
        finally:
            source._listener_mode = None


class KafkaSource:
    """A consumer group member on ``settings.spans_topic`` (and ``settings.logs_topic`` when set).

    ``on_revoked`` / ``on_assigned`` get ``(topic, partition)`` lists and run inside :meth:`poll`.
    Constructing the source subscribes but does not join the group: the first :meth:`poll` does.
    Extra keyword arguments go to ``KafkaConsumer`` (tests and benchmarks tune fetch sizes); they override the
    security arguments :func:`~monitor.ingest.security.build_security` makes from ``settings``.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        **consumer_config: Any,
    ) -> None:
        self.topics = [settings.spans_topic] + ([settings.logs_topic] if settings.logs_topic else [])
        config: dict[str, Any] = {
            "bootstrap_servers": settings.bootstrap_servers.split(","),
            "group_id": settings.group_id,
            "enable_auto_commit": False,
            "auto_offset_reset": settings.auto_offset_reset,
            "session_timeout_ms": settings.session_timeout_ms,
            "heartbeat_interval_ms": settings.heartbeat_interval_ms,
            "max_poll_records": settings.max_poll_records,
            "client_id": f"monitor-{settings.group_id}",
            # TLS and SASL (kafka.security_protocol, kafka.tls, kafka.sasl): the same arguments as the dead-letter
            # producer and the broker probe; raises KafkaSecurityError when a secret or a file cannot be read
            **build_security(settings).kwargs(),
        }
        config.update(consumer_config)
        self._consumer = KafkaConsumer(**config)
        self._tps: dict[TP, TopicPartition] = {}
        self._listener_mode: str | None = None
        self._listener_commit: dict[TopicPartition, OffsetAndMetadata] = {}
        self._commit_timeout_ms = int(config.get("request_timeout_ms", 30_000))
        self._consumer.subscribe(self.topics, listener=_Listener(self, on_revoked, on_assigned))

    def _tp(self, tp: TP) -> TopicPartition:
        out = self._tps.get(tp)
        if out is None:
            out = self._tps[tp] = TopicPartition(tp[0], tp[1])
        return out

    def poll(self, timeout_ms: int) -> list[Record]:
        """Records from the assigned, unpaused partitions, in offset order per partition."""
        batch = self._consumer.poll(timeout_ms=timeout_ms)
        if not batch:
            return []
        if len(batch) == 1:
            return list(next(iter(batch.values())))
        out: list[Record] = []
        for records in batch.values():
            out.extend(records)
        return out

    def pause(self, partitions: Iterable[TP]) -> None:
        tps = [self._tp(tp) for tp in partitions]
        if tps:
            self._consumer.pause(*tps)

    def resume(self, partitions: Iterable[TP]) -> None:
        tps = [self._tp(tp) for tp in partitions]
        if tps:
            self._consumer.resume(*tps)

    def seek(self, partition: TP, offset: int) -> None:
        """Read ``partition`` from ``offset`` on. Safe in the assignment callback: it only sets the position.

        Needed because kafka-python keeps the fetch position (and the paused flag) of a partition that is
        revoked and assigned back to the same member in one rebalance: without a seek, records the member
        dropped on revocation (open traces) would never be read again.
        """
        self._consumer.seek(self._tp(partition), offset)

    def assignment(self) -> set[TP]:
        return {(tp.topic, tp.partition) for tp in self._consumer.assignment()}

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Commit ``offsets`` (the next offset to read, per partition) synchronously; see the module docstring."""
        if not offsets:
            return
        payload = {self._tp(tp): OffsetAndMetadata(off, "", -1) for tp, off in offsets.items()}
        if self._listener_mode == "lost":
            raise CommitError("the member was evicted from the group: its offsets cannot be committed")
        if self._listener_mode is not None:
            self._listener_commit.update(payload)  # committed by the listener before the rebalance goes on
            return
        try:
            self._consumer.commit(payload)
        except (KafkaError, AssertionError, ValueError) as exc:
            raise CommitError(f"{type(exc).__name__}: {exc}") from exc

    async def _flush_listener_commit(self) -> None:
        """On the IO thread: commit what the revocation callback asked for, before the rebalance proceeds."""
        payload, self._listener_commit = self._listener_commit, {}
        if not payload:
            return
        coordinator = self._consumer._coordinator
        try:
            # kafka-python 3.x has no public awaitable commit; this is the coroutine behind commit()
            await coordinator._commit_offsets_sync_async(payload, timeout_ms=self._commit_timeout_ms)
        except Exception as exc:  # the new owner re-reads from the previous commit: at least once
            log.warning("commit on revocation failed (%s: %s); the new owner re-reads", type(exc).__name__, exc)

    def lag(self) -> dict[TP, int]:
        out: dict[TP, int] = {}
        for tp in self._consumer.assignment():
            try:
                high = self._consumer.highwater(tp)
                if high is None:
                    continue
                position = self._consumer.position(tp, timeout_ms=0)
            except (KafkaError, AssertionError):
                continue
            if position is not None:
                out[(tp.topic, tp.partition)] = max(0, high - position)
        return out

    def close(self) -> None:
        """Leave the group (no commit: the loop committed what is safe) and close the sockets."""
        try:
            self._consumer.close(autocommit=False, timeout_ms=5000)
        except Exception:  # closing a member of a dead broker must not mask the real exit reason
            log.warning("error closing the Kafka consumer", exc_info=True)
