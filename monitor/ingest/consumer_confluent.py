"""The optional consumer backend on confluent-kafka (librdkafka): :class:`ConfluentSource`, a
:class:`~monitor.ingest.consumer.Source` chosen with ``kafka.client: confluent``.

It keeps the contract of :mod:`monitor.ingest.consumer` point by point (tests/contract/test_source_contract.py runs
the same suite on both backends against the real broker). How each point is met on librdkafka:

* **Join.** The group is subscribed at the first :meth:`ConfluentSource.poll`, not at construction. The rebalance
  callbacks run on the calling thread inside ``poll()`` (and ``close()``): librdkafka serves them from
  ``consume()``/``poll()``, never from its own threads. The assignment strategy is eager (``range,roundrobin``, as
  kafka-python's default), so a rebalance revokes everything and then assigns. librdkafka runs no
  revocation callback before a first join; the adapter does (``revoked([])`` before any assignment that no
  revocation preceded), as kafka-python 3 does on every eager join.
* **Poll** returns at most ``kafka.max_poll_records`` records, in offset order per partition, and blocks at most
  ``timeout_ms`` (plus what a rebalance takes): first ``consume(n, 0)`` takes what is fetched already; only when
  that is empty does it wait on ``poll(timeout)`` for one record and then take what else is queued (librdkafka's
  ``consume(n, timeout)`` would wait the whole timeout for ``n`` records). Fetch errors and other events are not
  records: they are logged. Each record is a :class:`ConfluentRecord` with ``timestamp``: the Kafka record
  timestamp in milliseconds since the epoch, -1 when the broker gave none.
* **Pause / resume / seek** act on assigned partitions only (``KeyError`` / ``ValueError`` otherwise, as
  kafka-python). librdkafka drops what it had fetched for a partition when it is paused or sought, so nothing
  fetched before a pause or a seek is returned after it. Inside the assignment callback the partitions are not
  assigned in librdkafka yet (a seek there fails with ``_STATE``): the adapter records the seeks, pauses and
  resumes the callback makes, then assigns with those offsets and pauses what must stay paused, before ``poll``
  can return a record.
* **Where a partition starts.** One revoked and assigned back to this member in one rebalance keeps its position
  (the offset after the last record returned, or the last seek) and its paused flag, as with kafka-python; any
  other starts at the group's committed offset (asked once per rebalance, in the assignment, so that its position
  is known at once), else where ``kafka.auto_offset_reset`` says. librdkafka keeps a partition's paused flag across
  ``unassign()`` and ``assign()``: every assigned partition that is not to stay paused is resumed.
* **Commit** (:meth:`ConfluentSource.commit`) is synchronous (``commit(offsets, asynchronous=False)``) and raises
  :class:`~monitor.ingest.consumer.CommitError` when librdkafka reports a failure, for the whole request or one
  partition. Called from the revocation callback it commits at once, before the member rejoins, so it is where
  the new owner starts. After a forced eviction (``on_lost``) the revocation callback runs and its commit is
  refused with ``CommitError``. Without a group coordinator librdkafka holds the commit until it gives up
  (``_WAIT_COORD``, measured about 6 s with Tansu): the loop's commit timer waits that long, then retries.
* **Lag** is the high watermark cached from the last Fetch response (``get_watermark_offsets(cached=True)``,
  never ListOffsets: Tansu answers ListOffsets(latest) wrongly) minus the position; it never blocks. A partition
  has no entry until both are known: fetched at least once, and a position (a committed offset at assignment, a
  record returned, a seek). So a partition without a committed offset has none until its first record, where
  kafka-python, which resolves ``auto_offset_reset`` with ListOffsets, reports 0 for an empty one. A paused
  partition's high watermark is not refreshed.
* **Close** leaves the group after running the revocation callback (from librdkafka's ``close()``), commits
  nothing, and may be called again.

Settings: :func:`librdkafka_config` maps the same :class:`~monitor.settings.KafkaSettings` that
:class:`~monitor.ingest.consumer.KafkaSource` uses (brokers, group, ``auto_offset_reset``, session and heartbeat
times, TLS and SASL through :func:`~monitor.ingest.security.build_security`, which checks files and reads the
secrets), plus what kafka-python does by default and librdkafka does not: read uncommitted records, check CRCs.
Two things differ from kafka-python's security: librdkafka has no property for a minimum TLS version (kafka-python's
context asks for TLS 1.2; here the bundled OpenSSL's defaults apply), and an OAUTHBEARER token is asked of the token
provider every ~48 s (:data:`OAUTH_TOKEN_LIFETIME_S`), not at each connection; librdkafka's debug contexts are not
tied to ``log_client_debug`` (give ``debug="cgrp,fetch"`` as an extra argument).
Extra keyword arguments are librdkafka properties (dotted names) or the kafka-python names of
:data:`KAFKA_PYTHON_NAMES`, translated, so tests and benchmarks tune both backends alike. librdkafka's log lines
go to the ``kafka.librdkafka`` logger (held at the ``kafka`` loggers' floor, secrets scrubbed by the same filter as
kafka-python's), the same line at most once every :data:`REPEAT_LOG_S` seconds; no configuration value is logged.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Final, Literal, NamedTuple, cast

from confluent_kafka import (
    OFFSET_INVALID,
    TIMESTAMP_NOT_AVAILABLE,
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from monitor.ingest.consumer import CommitError, PartitionsCallback, Record
from monitor.ingest.security import build_security
from monitor.settings import KafkaSettings
from monitor.trajectory.assembler import TopicPartition as TP

log = logging.getLogger(__name__)
client_log = logging.getLogger("kafka.librdkafka")
"""librdkafka's own log lines (a child of ``kafka``: the same level floor and secret filter as kafka-python's)."""

REPEAT_LOG_S: Final = 30.0
"""The same librdkafka log line or client error is logged at most once in this many seconds (an unreachable
broker is reported every reconnect attempt)."""

OAUTH_TOKEN_LIFETIME_S: Final = 60.0
"""The lifetime announced to librdkafka for an OAUTHBEARER token: librdkafka asks the token provider again at 80%
of it; the provider returns its cached token until its own refresh margin (or the token file changed)."""

KAFKA_PYTHON_NAMES: Final[Mapping[str, str]] = {
    "bootstrap_servers": "bootstrap.servers",
    "client_id": "client.id",
    "group_id": "group.id",
    "auto_offset_reset": "auto.offset.reset",
    "session_timeout_ms": "session.timeout.ms",
    "heartbeat_interval_ms": "heartbeat.interval.ms",
    "max_poll_interval_ms": "max.poll.interval.ms",
    "fetch_max_wait_ms": "fetch.wait.max.ms",
    "fetch_min_bytes": "fetch.min.bytes",
    "fetch_max_bytes": "fetch.max.bytes",
    "max_partition_fetch_bytes": "max.partition.fetch.bytes",
    "request_timeout_ms": "socket.timeout.ms",
    "receive_buffer_bytes": "socket.receive.buffer.bytes",
    "reconnect_backoff_ms": "reconnect.backoff.ms",
    "reconnect_backoff_max_ms": "reconnect.backoff.max.ms",
    "retry_backoff_ms": "retry.backoff.ms",
    "metadata_max_age_ms": "topic.metadata.refresh.interval.ms",
    "connections_max_idle_ms": "connections.max.idle.ms",
    "check_crcs": "check.crcs",
    "isolation_level": "isolation.level",
}
"""kafka-python ``KafkaConsumer`` arguments accepted as extra keyword arguments, and their librdkafka names.
``max_poll_records`` is accepted too (it is the ``num_messages`` of ``consume``, not a librdkafka property)."""

COMMITTED_TIMEOUT_S: Final = 5.0
"""How long the assignment waits for the group's committed offsets (one OffsetFetch per rebalance)."""

_SECRET_KEYS: Final = frozenset({"sasl.password", "ssl.key.password", "oauth_cb"})

_RevocationMode = Literal["revoked", "lost", "assigned"]
_Headers = Sequence[tuple[str, bytes | None]]


class ConfluentRecord(NamedTuple):
    """A consumed record: the fields of :class:`~monitor.ingest.consumer.Record` and the record ``timestamp``
    (milliseconds since the epoch, -1 when unknown). ``headers`` is ``()`` when the record has none."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]]
    timestamp: int


def _translate(name: str) -> str:
    if "." in name or name == "debug":  # librdkafka's own names ("debug": its debug contexts, e.g. "cgrp,fetch")
        return name
    try:
        return KAFKA_PYTHON_NAMES[name]
    except KeyError:
        raise ValueError(
            f"{name!r} is not a consumer setting the confluent backend can translate: give the librdkafka property "
            f"(a dotted name such as 'fetch.wait.max.ms') or one of {sorted(KAFKA_PYTHON_NAMES)}"
        ) from None


def _key_password(settings: KafkaSettings) -> str | None:
    """The private key's password (``build_security`` already checked that it is there and decrypts the key)."""
    tls = settings.tls
    if tls.key_password_file is not None:
        return Path(tls.key_password_file).read_text(encoding="utf-8").strip()
    if tls.key_password_env is not None:
        return os.environ.get(tls.key_password_env, "").strip() or None
    return None


def librdkafka_config(settings: KafkaSettings, **overrides: Any) -> dict[str, Any]:
    """The librdkafka consumer configuration for ``settings`` (secrets included: never log it, see :func:`redacted`).

    ``overrides`` (librdkafka properties, or the kafka-python names of :data:`KAFKA_PYTHON_NAMES`) replace what the
    settings give. Raises :class:`~monitor.ingest.security.KafkaSecurityError` when a TLS or SASL file or secret
    cannot be used (the same checks and messages as the kafka-python backend), ``ValueError`` for an override name
    it does not know.
    """
    security = build_security(settings)  # checks every file and reads the secrets, or raises naming the keys
    config: dict[str, Any] = {
        "bootstrap.servers": settings.bootstrap_servers,
        "group.id": settings.group_id,
        "client.id": f"monitor-{settings.group_id}",
        "enable.auto.commit": False,
        "enable.auto.offset.store": False,
        "auto.offset.reset": settings.auto_offset_reset,
        "session.timeout.ms": settings.session_timeout_ms,
        "heartbeat.interval.ms": settings.heartbeat_interval_ms,
        # eager protocol, kafka-python's default assignors: a rebalance revokes everything, then assigns
        "partition.assignment.strategy": "range,roundrobin",
        # kafka-python's defaults where librdkafka's differ
        "isolation.level": "read_uncommitted",
        "check.crcs": True,
        "enable.partition.eof": False,
        "log.connection.close": False,
        "security.protocol": security.protocol,
    }
    if security.tls:
        tls = settings.tls
        config["ssl.ca.location"] = str(tls.ca_file) if tls.ca_file is not None else "probe"
        config["ssl.endpoint.identification.algorithm"] = "https" if tls.check_hostname else "none"
        if tls.cert_file is not None:
            config["ssl.certificate.location"] = str(tls.cert_file)
            config["ssl.key.location"] = str(tls.key_file if tls.key_file is not None else tls.cert_file)
            password = _key_password(settings)
            if password is not None:
                config["ssl.key.password"] = password
    if security.mechanism is not None:
        config["sasl.mechanism"] = security.mechanism
        kwargs = security.kwargs()
        if security.token_provider is not None:
            config["oauth_cb"] = _oauth_callback(security.token_provider, settings.sasl.oauth.client_id)
        else:
            config["sasl.username"] = security.username
            config["sasl.password"] = kwargs["sasl_plain_password"]
    for name, value in overrides.items():
        if name == "max_poll_records":
            continue  # consume()'s batch size, taken by ConfluentSource
        config[_translate(name)] = value
    return config


def redacted(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` with its secrets (SASL password, key password, token callback) replaced by ``'***'``."""
    return {k: ("***" if k in _SECRET_KEYS else v) for k, v in config.items()}


def _oauth_callback(provider: Any, client_id: str | None) -> Callable[[str], tuple[str, float, str, dict[str, str]]]:
    principal = client_id or "agent-tool-monitor"

    def oauth_cb(_oauthbearer_config: str) -> tuple[str, float, str, dict[str, str]]:
        # raising (TokenError) makes librdkafka report the failure and ask again
        return str(provider.token()), time.time() + OAUTH_TOKEN_LIFETIME_S, principal, dict(provider.extensions())

    return oauth_cb


class _RepeatFilter(logging.Filter):
    """Lets the same message through at most once every :data:`REPEAT_LOG_S` seconds."""

    def __init__(self) -> None:
        super().__init__()
        self._last: dict[str, float] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:
            return True
        now = time.monotonic()
        if now - self._last.get(message, -REPEAT_LOG_S) < REPEAT_LOG_S:
            return False
        if len(self._last) > 1000:
            self._last.clear()
        self._last[message] = now
        return True


_REPEATS: Final = _RepeatFilter()


def _guard_client_log() -> None:
    """Rate-limit librdkafka's lines and scrub secrets with the filters the ``kafka`` logger carries (the secret
    scrubber of :mod:`monitor.ingest.security` is attached to it)."""
    if _REPEATS not in client_log.filters:
        client_log.addFilter(_REPEATS)
    for f in logging.getLogger("kafka").filters:
        if f not in client_log.filters:
            client_log.addFilter(f)


def _error_callback(err: KafkaError) -> None:
    """librdkafka's client-level errors (brokers down, authentication failed): logged, fatal ones at ERROR. A
    connection failure (``_TRANSPORT``) is not: librdkafka's own log line about it says more."""
    if err.code() == KafkaError._TRANSPORT:
        return
    level = logging.ERROR if err.fatal() else logging.WARNING
    client_log.log(level, "Kafka client error %s: %s", err.name(), err.str())


class ConfluentSource:
    """A consumer group member on ``settings.spans_topic`` (and ``settings.logs_topic`` when set), on librdkafka.

    The same :class:`~monitor.ingest.consumer.Source` contract as :class:`~monitor.ingest.consumer.KafkaSource`;
    the module docstring says how librdkafka meets each point. ``on_revoked`` / ``on_assigned`` get
    ``(topic, partition)`` lists and run inside :meth:`poll` and :meth:`close`. Extra keyword arguments are
    librdkafka properties or kafka-python names (:func:`librdkafka_config`). Not thread-safe: one thread drives it.
    """

    def __init__(
        self,
        settings: KafkaSettings,
        on_revoked: PartitionsCallback,
        on_assigned: PartitionsCallback,
        **consumer_config: Any,
    ) -> None:
        self.topics = [settings.spans_topic] + ([settings.logs_topic] if settings.logs_topic else [])
        config = librdkafka_config(settings, **consumer_config)
        self.max_poll_records = int(consumer_config.get("max_poll_records", settings.max_poll_records))
        _guard_client_log()
        config.setdefault("logger", client_log)
        config.setdefault("error_cb", _error_callback)
        self._consumer = Consumer(config)
        self._on_revoked = on_revoked
        self._on_assigned = on_assigned
        self._subscribed = False
        self._closed = False
        self._tps: dict[TP, TopicPartition] = {}
        self._assigned: set[TP] = set()
        self._paused: set[TP] = set()
        self._positions: dict[TP, int] = {}
        """The next offset to read per partition: after the last record returned, or set by a seek."""
        self._mode: _RevocationMode | None = None
        self._revoked_since_assignment = False
        self._kept: dict[TP, tuple[int | None, bool]] = {}
        """Position and paused flag of the partitions revoked in the rebalance under way."""
        self._pending_offsets: dict[TP, int | None] = {}
        self._pending_paused: set[TP] = set()

    def __repr__(self) -> str:
        return f"ConfluentSource(topics={self.topics!r}, assigned={sorted(self._assigned)!r})"

    def _tp(self, tp: TP) -> TopicPartition:
        out = self._tps.get(tp)
        if out is None:
            out = self._tps[tp] = TopicPartition(tp[0], tp[1])
        return out

    # ------------------------------------------------------------------ records

    def poll(self, timeout_ms: int) -> list[Record]:
        """Records from the assigned, unpaused partitions, in offset order per partition (see the module docstring)."""
        consumer = self._consumer
        if not self._subscribed:
            self._subscribed = True
            consumer.subscribe(self.topics, on_assign=self._assign, on_revoke=self._revoke, on_lost=self._lose)
        n = self.max_poll_records
        messages = consumer.consume(n, 0)
        if not messages and timeout_ms > 0:
            first = consumer.poll(timeout_ms / 1000)
            if first is not None:
                messages = [first]
                if n > 1:
                    messages.extend(consumer.consume(n - 1, 0))
        if not messages:
            return []
        out: list[Record] = []
        positions = self._positions
        for m in messages:
            err = m.error()
            if err is not None:
                self._event(m, err)
                continue
            topic, partition, offset = m.topic(), m.partition(), m.offset()
            assert topic is not None and partition is not None and offset is not None
            kind, ts = m.timestamp()
            out.append(
                ConfluentRecord(
                    topic,
                    partition,
                    offset,
                    m.key(),
                    m.value(),
                    cast(_Headers, m.headers()) or (),  # consumed headers: a list of (str, bytes | None)
                    ts if kind != TIMESTAMP_NOT_AVAILABLE else -1,
                )
            )
            positions[(topic, partition)] = offset + 1
        return out

    def _event(self, message: Message, err: KafkaError) -> None:
        """A fetch error or event delivered in place of a record: not a record, logged."""
        where = f"{message.topic()}/{message.partition()}" if message.topic() else "the consumer"
        if err.code() == KafkaError._PARTITION_EOF:
            return
        client_log.log(logging.ERROR if err.fatal() else logging.WARNING, "%s: %s: %s", where, err.name(), err.str())

    # ------------------------------------------------------------------ rebalance callbacks (inside poll/close)

    def _revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._take_away(consumer, sorted((p.topic, p.partition) for p in partitions), "revoked")

    def _lose(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._take_away(consumer, sorted((p.topic, p.partition) for p in partitions), "lost")

    def _take_away(self, consumer: Consumer | None, tps: list[TP], mode: _RevocationMode) -> None:
        """Run the revocation callback for ``tps`` (``mode`` lost: its commits are refused), then forget them and
        unassign them in librdkafka (not when ``consumer`` is None: the empty revocation before a first join)."""
        self._revoked_since_assignment = True
        if mode == "revoked":
            self._kept = {tp: (self._positions.get(tp), tp in self._paused) for tp in tps}
        self._mode = mode
        try:
            self._on_revoked(tps)
        finally:
            self._mode = None
            for tp in tps:
                self._assigned.discard(tp)
                self._paused.discard(tp)
                self._positions.pop(tp, None)
            if consumer is not None:
                consumer.unassign()

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        if not self._revoked_since_assignment:  # kafka-python 3 revokes what is held (nothing) before every join
            self._take_away(None, [], "revoked")
        tps = sorted((p.topic, p.partition) for p in partitions)
        kept, self._kept = self._kept, {}
        self._pending_offsets = {tp: kept[tp][0] if tp in kept else None for tp in tps}
        self._pending_offsets.update(self._committed([tp for tp, off in self._pending_offsets.items() if off is None]))
        self._pending_paused = {tp for tp in tps if tp in kept and kept[tp][1]}
        self._assigned = set(tps)
        self._mode = "assigned"
        try:
            self._on_assigned(tps)
        finally:
            self._mode = None
            self._revoked_since_assignment = False
            offsets, self._pending_offsets = self._pending_offsets, {}
            paused, self._pending_paused = self._pending_paused, set()
            consumer.assign(
                [TopicPartition(t, p, OFFSET_INVALID if off is None else off) for (t, p), off in offsets.items()]
            )
            for tp, off in offsets.items():
                if off is not None:
                    self._positions[tp] = off
            if paused:
                consumer.pause([self._tp(tp) for tp in sorted(paused)])
            if unpaused := [self._tp(tp) for tp in sorted(offsets) if tp not in paused]:
                # librdkafka keeps a partition's paused flag across unassign() and assign(): clear it
                consumer.resume(unpaused)
            self._paused = paused

    def _committed(self, tps: list[TP]) -> dict[TP, int]:
        """The group's committed offsets of ``tps`` (those that have one), asked once at assignment so that the
        position, and so the lag, is known before the first record; ``{}`` when the coordinator does not answer
        within :data:`COMMITTED_TIMEOUT_S` (librdkafka then looks them up itself)."""
        if not tps:
            return {}
        try:
            found = self._consumer.committed([self._tp(tp) for tp in tps], timeout=COMMITTED_TIMEOUT_S)
        except KafkaException as exc:
            log.info("committed offsets not known at assignment (%s); librdkafka looks them up", exc)
            return {}
        return {(tp.topic, tp.partition): tp.offset for tp in found if tp.error is None and tp.offset >= 0}

    # ------------------------------------------------------------------ pause, resume, seek

    def _unassigned(self, tps: Iterable[TP]) -> TP | None:
        return next((tp for tp in tps if tp not in self._assigned), None)

    def pause(self, partitions: Iterable[TP]) -> None:
        """Stop fetching ``partitions`` (``KeyError`` for one not assigned); what was fetched for them is dropped."""
        tps = list(partitions)
        if (missing := self._unassigned(tps)) is not None:
            raise KeyError(missing)
        if self._mode == "assigned":
            self._pending_paused.update(tps)
            return
        tps = [tp for tp in tps if tp not in self._paused]
        if tps:
            self._consumer.pause([self._tp(tp) for tp in tps])
            self._paused.update(tps)

    def resume(self, partitions: Iterable[TP]) -> None:
        """Fetch ``partitions`` again from where they stopped (``KeyError`` for one not assigned)."""
        tps = list(partitions)
        if (missing := self._unassigned(tps)) is not None:
            raise KeyError(missing)
        if self._mode == "assigned":
            self._pending_paused.difference_update(tps)
            return
        tps = [tp for tp in tps if tp in self._paused]
        if tps:
            self._consumer.resume([self._tp(tp) for tp in tps])
            self._paused.difference_update(tps)

    def seek(self, partition: TP, offset: int) -> None:
        """Read ``partition`` from ``offset`` on (``ValueError`` when not assigned or ``offset`` < 0).

        In the assignment callback the offset is where the partition starts once assigned (librdkafka cannot seek a
        partition before it is assigned)."""
        if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
            raise ValueError(f"offset must be an int >= 0, got {offset!r}")
        if partition not in self._assigned:
            raise ValueError(f"unassigned partition {partition}")
        if self._mode == "assigned":
            self._pending_offsets[partition] = offset
            return
        self._consumer.seek(TopicPartition(partition[0], partition[1], offset))
        self._positions[partition] = offset

    def assignment(self) -> set[TP]:
        return set(self._assigned)

    # ------------------------------------------------------------------ offsets

    def commit(self, offsets: Mapping[TP, int]) -> None:
        """Commit ``offsets`` (the next offset to read, per partition) synchronously; see the module docstring."""
        if not offsets:
            return
        if self._mode == "lost":
            raise CommitError("the member was evicted from the group: its offsets cannot be committed")
        payload = [TopicPartition(t, p, off) for (t, p), off in offsets.items()]
        try:
            result = self._consumer.commit(offsets=payload, asynchronous=False)
        except KafkaException as exc:
            err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            raise CommitError(f"{err.name()}: {err.str()}" if err is not None else str(exc)) from exc
        except RuntimeError as exc:  # the consumer is closed
            raise CommitError(str(exc)) from exc
        failed = [f"{tp.topic}/{tp.partition}: {tp.error}" for tp in result or [] if tp.error is not None]
        if failed:
            raise CommitError("commit refused for " + ", ".join(failed))

    def lag(self) -> dict[TP, int]:
        """High watermark of the last fetch minus the position, per partition where both are known; never blocks."""
        out: dict[TP, int] = {}
        positions = self._positions
        for tp in self._assigned:
            position = positions.get(tp)
            if position is None:
                continue
            try:
                _low, high = self._consumer.get_watermark_offsets(self._tp(tp), cached=True)
            except (KafkaException, RuntimeError):
                continue
            if high is not None and high >= 0:
                out[tp] = max(0, high - position)
        return out

    def close(self) -> None:
        """Leave the group (the revocation callback runs; no commit: the loop committed what is safe). Idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close()
        except Exception:  # closing a member of a dead broker must not mask the real exit reason
            log.warning("error closing the Kafka consumer", exc_info=True)
