"""Dead letters: undecodable (or unstorable) records go to ``<topic><suffix>``; too many of them stop the daemon.

:class:`DeadLetterQueue` produces a copy of the record (original key and value) to the dead-letter
topic with headers that say why and where it came from:

===============================  ==================================================
``monitor.dlq.reason``           the reason code (:data:`monitor.ingest.decode.DECODE_REASONS`, or ``unstorable``)
``monitor.dlq.detail``           a human-readable detail, cut to 512 characters
``monitor.dlq.topic``            source topic
``monitor.dlq.partition``        source partition (decimal)
``monitor.dlq.offset``           source offset (decimal)
``monitor.dlq.truncated``        ``1`` on a stub (below)
``monitor.dlq.original_size``    a stub's original value size in bytes (decimal)
``monitor.dlq.sha256``           a stub's original value SHA-256 (hex)
``monitor.dlq.trace_id``         an unstorable trace's id (its value is the trace's spans as JSON)
===============================  ==================================================

Original headers are kept after these.

**Size.** A dead letter larger than the producer's ``max_request_size`` (``dead_letter.max_request_bytes``,
else the broker's ``message.max.bytes`` / the topic's ``max.message.bytes`` when the broker tells, else
1 MiB: Kafka's default) cannot be written whole. It is replaced by a *stub*: the first KiB of the value
and of the key, the headers above and as many original headers as fit. A dead letter the broker rejects
as too large after all is re-sent as a stub too.

**Delivery.** :meth:`DeadLetterQueue.send` never raises and never blocks for long: the dead letter is
handed to the producer (or kept for a later attempt when the producer cannot take it). :meth:`poll`
collects the acknowledgements: acknowledged dead letters are returned (the run loop records them so a
restart does not send them again), failed ones are kept and sent again with a backoff (0.5 s doubling to
30 s), whatever the error; nothing is ever forgotten. :meth:`unacknowledged` gives, per source partition,
the lowest offset whose dead letter is not acknowledged yet: the run loop never commits past it.
:meth:`flush` waits for the acknowledgements (shutdown).

:class:`DeadLetterLimit` guards against systematic failure (a wrong ``encoding`` configured, a
producer writing another format): it remembers whether each of the last ``window`` records was
dead-lettered and raises :class:`DeadLetterRateExceeded` as soon as more than ``max_rate * window``
of them were. The daemon then stops with a non-zero exit instead of dead-lettering the topic. The
record that trips the limit is neither dead-lettered nor committed.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka.errors import KafkaError, MessageSizeTooLargeError

from monitor.ingest.security import build_security
from monitor.settings import DeadLetterSettings, KafkaSettings
from monitor.store.base import ReplayMark

log = logging.getLogger(__name__)

HEADER_REASON: Final = "monitor.dlq.reason"
HEADER_DETAIL: Final = "monitor.dlq.detail"
HEADER_TOPIC: Final = "monitor.dlq.topic"
HEADER_PARTITION: Final = "monitor.dlq.partition"
HEADER_OFFSET: Final = "monitor.dlq.offset"
HEADER_TRUNCATED: Final = "monitor.dlq.truncated"
HEADER_ORIGINAL_SIZE: Final = "monitor.dlq.original_size"
HEADER_SHA256: Final = "monitor.dlq.sha256"
HEADER_TRACE_ID: Final = "monitor.dlq.trace_id"
KAFKA_DEFAULT_MAX_MESSAGE_BYTES: Final = 1024 * 1024
"""Kafka's default ``message.max.bytes`` (1 MiB + record overhead): the size assumed when the broker does not say."""
STUB_BYTES: Final = 1024
"""How much of the value (and key) a stub keeps."""
_DETAIL_CHARS: Final = 512
_RECORD_OVERHEAD: Final = 512  # batch and record headers around one record, with margin
_RETRY_MIN_S: Final = 0.5
_RETRY_MAX_S: Final = 30.0
_PRODUCER_MAX_BLOCK_MS: Final = 2000
_SECURITY_PREFIXES: Final = ("security_", "ssl_", "sasl_")


class DeadLetterError(Exception):
    """The dead-letter topic cannot be used (raised at startup only; sending never raises)."""


class DeadLetterRateExceeded(Exception):
    """More than the allowed fraction of recent records was undecodable: stop, something is systematically wrong."""

    def __init__(self, bad: int, window: int, max_rate: float, reasons: dict[str, int]) -> None:
        top = ", ".join(f"{r}={n}" for r, n in sorted(reasons.items(), key=lambda kv: -kv[1]))
        super().__init__(
            f"{bad} of the last {window} records could not be decoded (limit {max_rate:.0%}; reasons: {top}). "
            "Stopping rather than dead-lettering the topic: check kafka.encoding and what writes the topic."
        )
        self.bad = bad
        self.window = window
        self.reasons = reasons


class DeadLetterLimit:
    """A sliding window over the last ``window`` records; see the module docstring. Not thread-safe."""

    def __init__(self, max_rate: float, window: int) -> None:
        self.max_rate = max_rate
        self.window = window
        self._allowed = max_rate * window
        self._marks: deque[str | None] = deque(maxlen=window)
        self._bad = 0

    def good(self, n: int = 1) -> None:
        """``n`` records decoded fine."""
        marks = self._marks
        for _ in range(min(n, self.window)):
            if len(marks) == marks.maxlen and marks[0] is not None:
                self._bad -= 1
            marks.append(None)

    def check_bad(self, reason: str) -> None:
        """Count one undecodable record; raises :class:`DeadLetterRateExceeded` if that crosses the limit."""
        marks = self._marks
        evicted = marks[0] if len(marks) == marks.maxlen else None
        if self._bad + 1 - (evicted is not None) > self._allowed:
            reasons: dict[str, int] = {}
            for m in (*marks, reason):
                if m is not None:
                    reasons[m] = reasons.get(m, 0) + 1
            raise DeadLetterRateExceeded(self._bad + 1, len(marks) + 1, self.max_rate, reasons)
        if evicted is not None:
            self._bad -= 1
        marks.append(reason)
        self._bad += 1


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """One record (or one unstorable trace) on its way to the dead-letter topic.

    ``topic``/``partition``/``offset`` say where it came from: the offset is the one the run loop must not
    commit past until the dead letter is acknowledged.
    """

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    reason: str
    detail: str
    stub: bool = False
    marks: tuple[ReplayMark, ...] = ()
    """Replay marks to store once this dead letter is acknowledged (so a re-read does not send it again)."""
    holds: tuple[tuple[str, int, int], ...] = ()
    """(topic, partition, offset) not to commit past before the acknowledgement; default: where it came from."""

    @property
    def size(self) -> int:
        """Bytes on the wire, about (key, value, headers and the record's own overhead)."""
        return (
            len(self.key or b"")
            + len(self.value or b"")
            + sum(len(k) + len(v) for k, v in self.headers)
            + _RECORD_OVERHEAD
        )


def make_dead_letter(
    *,
    topic: str,
    partition: int,
    offset: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None]] | None,
    reason: str,
    detail: str,
    marks: Sequence[ReplayMark] = (),
    holds: Sequence[tuple[str, int, int]] = (),
    extra_headers: Sequence[tuple[str, bytes]] = (),
) -> DeadLetter:
    """A dead letter carrying the record whole, with the ``monitor.dlq.*`` headers first."""
    out: list[tuple[str, bytes]] = [
        (HEADER_REASON, reason.encode()),
        (HEADER_DETAIL, detail[:_DETAIL_CHARS].encode("utf-8", "replace")),
        (HEADER_TOPIC, topic.encode()),
        (HEADER_PARTITION, str(partition).encode()),
        (HEADER_OFFSET, str(offset).encode()),
        *extra_headers,
    ]
    out.extend((k, v if v is not None else b"") for k, v in headers or ())
    if key is None and value is None:
        value = b""  # Kafka clients refuse a record with neither: the dead letter keeps an empty value
    return DeadLetter(
        topic, partition, offset, key, value, tuple(out), reason, detail, marks=tuple(marks), holds=tuple(holds)
    )


def stub_of(letter: DeadLetter, limit: int) -> DeadLetter:
    """``letter`` cut to fit ``limit`` bytes: the first KiB of key and value, the ``monitor.dlq.*`` headers,
    the original size and SHA-256 of the value, and the original headers that still fit."""
    value = letter.value or b""
    ours = [(k, v) for k, v in letter.headers if k.startswith("monitor.dlq.")]
    theirs = [(k, v) for k, v in letter.headers if not k.startswith("monitor.dlq.")]
    headers = [
        *ours,
        (HEADER_TRUNCATED, b"1"),
        (HEADER_ORIGINAL_SIZE, str(len(value)).encode()),
        (HEADER_SHA256, hashlib.sha256(value).hexdigest().encode()),
    ]
    key = letter.key[:STUB_BYTES] if letter.key is not None else None
    budget = limit - _RECORD_OVERHEAD - 2 * STUB_BYTES - sum(len(k) + len(v) for k, v in headers)
    for k, v in theirs:
        if len(k) + len(v) > budget:
            continue
        headers.append((k, v))
        budget -= len(k) + len(v)
    return replace(letter, key=key, value=value[:STUB_BYTES], headers=tuple(headers), stub=True)


@dataclass(slots=True)
class _Pending:
    letter: DeadLetter
    future: Any = None  # kafka-python FutureRecordMetadata while in flight
    attempts: int = 0
    retry_at: float = 0.0
    last_error: str = ""


@dataclass(slots=True)
class DeadLetterStats:
    """What the queue did; counters only grow."""

    sent: int = 0
    acknowledged: int = 0
    stubs: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class DeadLetterQueue:
    """The dead-letter producer; see the module docstring. ``enabled=False`` counts and skips without producing.

    Not thread-safe: the run loop's thread calls everything. Extra keyword arguments go to ``KafkaProducer``. The
    producer and the startup checks' clients connect with the security settings of ``kafka`` (TLS, SASL:
    :func:`~monitor.ingest.security.build_security`); ``security_*``/``ssl_*``/``sasl_*`` extra arguments override them.
    ``clock`` is monotonic seconds (retry backoff).
    """

    def __init__(
        self,
        kafka: KafkaSettings,
        settings: DeadLetterSettings,
        *,
        clock: Callable[[], float] = time.monotonic,
        **producer_config: Any,
    ) -> None:
        self.suffix = kafka.dead_letter_suffix
        self.enabled = settings.enabled
        self.stats = DeadLetterStats()
        self._configured_limit = settings.max_request_bytes
        self._limit: int | None = settings.max_request_bytes
        self._producer: KafkaProducer | None = None
        self._bootstrap = kafka.bootstrap_servers.split(",")
        # TLS and SASL for the producer and the startup checks (the consumer's arguments; KafkaSecurityError when a
        # secret or a file cannot be read), then the caller's own settings over them
        self._security: dict[str, Any] = build_security(kafka).kwargs()
        self._security.update({k: v for k, v in producer_config.items() if k.startswith(_SECURITY_PREFIXES)})
        self._config = producer_config
        self._pending: deque[_Pending] = deque()
        self._clock = clock
        self._on_error: Callable[[str], None] | None = None

    # ------------------------------------------------------------------ startup

    def topic_for(self, source_topic: str) -> str:
        return source_topic + self.suffix

    def on_error(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(error_class_name)`` for every failed send attempt (metrics)."""
        self._on_error = callback

    def check_topics(self, source_topics: Iterable[str], timeout_s: float = 10.0) -> None:
        """Make sure the dead-letter topic of every source topic exists (or the broker creates it on demand),
        and learn the broker's record size limit. Raises :class:`DeadLetterError` naming the topic and the fix.

        Without this, a missing topic on a broker that does not create topics automatically would only show
        on the first bad record, as a send that can never succeed.
        """
        if not self.enabled:
            return
        wanted = [self.topic_for(t) for t in source_topics]
        if self._configured_limit is None and self._producer is None:
            self._limit = self._broker_limit(wanted, timeout_s)  # before the producer is built with it
        consumer = KafkaConsumer(
            bootstrap_servers=self._bootstrap,
            client_id="monitor-dlq-check",
            request_timeout_ms=int(timeout_s * 1000),
            **self._security,
        )
        try:
            existing = consumer.topics()
        except KafkaError as exc:
            raise DeadLetterError(f"cannot check the dead-letter topics {wanted}: {exc}") from exc
        finally:
            consumer.close()
        missing: list[str] = []
        for topic in (t for t in wanted if t not in existing):
            # what the producer does on its first send: a metadata request that may create the topic
            try:
                found = self._get_producer().partitions_for(topic)
            except KafkaError:
                found = None
            if not found:
                missing.append(topic)
        if missing:
            sources = [t.removesuffix(self.suffix) for t in missing]
            raise DeadLetterError(
                f"dead-letter topic(s) {', '.join(missing)} do not exist and the broker does not create topics "
                f"automatically. Fix: create them (as many partitions as {', '.join(sources)}), "
                "or set dead_letter.enabled: false"
            )

    def _broker_limit(self, topics: Sequence[str], timeout_s: float) -> int:
        """The smallest record size limit the broker states for ``topics``, else Kafka's default."""
        try:
            from kafka.admin import ConfigResource, ConfigResourceType

            admin = KafkaAdminClient(
                bootstrap_servers=self._bootstrap,
                client_id="monitor-dlq-check",
                request_timeout_ms=int(timeout_s * 1000),
                **self._security,
            )
        except KafkaError as exc:
            log.info("cannot ask the broker for its record size limit (%s): assuming 1 MiB", exc)
            return KAFKA_DEFAULT_MAX_MESSAGE_BYTES
        limits: list[int] = []
        try:
            answer = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, t) for t in topics])
            for value in _config_values(answer, "max.message.bytes"):
                limits.append(value)
        except (KafkaError, AttributeError, TypeError, ValueError) as exc:
            log.debug("describe_configs failed: %s", exc)
        finally:
            admin.close()
        return min(limits) if limits else KAFKA_DEFAULT_MAX_MESSAGE_BYTES

    @property
    def max_request_bytes(self) -> int:
        """The largest dead letter sent whole (see the module docstring)."""
        return self._limit or KAFKA_DEFAULT_MAX_MESSAGE_BYTES

    def _get_producer(self) -> KafkaProducer:
        if self._producer is None:
            config: dict[str, Any] = {
                "bootstrap_servers": self._bootstrap,
                "acks": "all",
                "linger_ms": 20,
                "client_id": "monitor-dlq",
                "max_request_size": self.max_request_bytes,
                "max_block_ms": _PRODUCER_MAX_BLOCK_MS,
                "retries": 3,
                # kafka-python 3.0 treats any non-retriable error of an idempotent producer as fatal for every
                # later send; dead letters are deduplicated by replay marks instead
                "enable_idempotence": False,
                **self._security,
            }
            config.update(self._config)
            self._producer = KafkaProducer(**config)
        return self._producer

    # ------------------------------------------------------------------ sending

    def send(self, letter: DeadLetter) -> bool:
        """Queue ``letter``; returns False when dead-lettering is disabled (nothing sent). Never raises."""
        if not self.enabled:
            return False
        if letter.size > self.max_request_bytes:
            letter = stub_of(letter, self.max_request_bytes)
            self.stats.stubs += 1
        pending = _Pending(letter)
        self._pending.append(pending)
        self._attempt(pending)
        return True

    def _attempt(self, pending: _Pending) -> None:
        letter = pending.letter
        pending.attempts += 1
        try:
            pending.future = self._get_producer().send(
                self.topic_for(letter.topic), key=letter.key, value=letter.value, headers=list(letter.headers)
            )
            self.stats.sent += 1
        except Exception as exc:  # a producer that cannot take it now (metadata, buffer, size): try again later
            self._failed(pending, exc)

    def _failed(self, pending: _Pending, exc: BaseException) -> None:
        name = type(exc).__name__
        self.stats.errors[name] = self.stats.errors.get(name, 0) + 1
        if self._on_error is not None:
            self._on_error(name)
        pending.future = None
        pending.last_error = f"{name}: {exc}"
        if isinstance(exc, MessageSizeTooLargeError) and not pending.letter.stub:
            limit = min(self.max_request_bytes, max(pending.letter.size // 2, STUB_BYTES * 4))
            pending.letter = stub_of(pending.letter, limit)
            self.stats.stubs += 1
            pending.retry_at = 0.0
            return
        delay = min(_RETRY_MIN_S * 2 ** (pending.attempts - 1), _RETRY_MAX_S)
        pending.retry_at = self._clock() + delay
        if pending.attempts in (1, 5) or pending.attempts % 20 == 0:
            letter = pending.letter
            log.warning(
                "dead letter of %s/%d@%d not written (attempt %d, retried in %.1fs): %s",
                letter.topic,
                letter.partition,
                letter.offset,
                pending.attempts,
                delay,
                pending.last_error,
            )

    def poll(self) -> list[DeadLetter]:
        """Collect acknowledgements and re-send failed dead letters that are due; returns those acknowledged
        since the last call, in the order they were sent. Never blocks, never raises."""
        if not self._pending:
            return []
        now = self._clock()
        acked: list[DeadLetter] = []
        keep: deque[_Pending] = deque()
        for pending in self._pending:
            future = pending.future
            if future is None:
                if now >= pending.retry_at:
                    self._attempt(pending)
                keep.append(pending)
            elif not future.is_done:
                keep.append(pending)
            elif future.failed():
                self._failed(pending, future.exception)
                keep.append(pending)
            else:
                acked.append(pending.letter)
        self._pending = keep
        self.stats.acknowledged += len(acked)
        return acked

    def flush(self, timeout_s: float) -> list[DeadLetter]:
        """Send everything pending now and wait up to ``timeout_s`` for the acknowledgements; returns the
        dead letters acknowledged. Those still pending afterwards stay pending (never forgotten)."""
        deadline = self._clock() + timeout_s
        acked = self.poll()
        while self._pending:
            for pending in self._pending:
                if pending.future is None:
                    pending.retry_at = 0.0
            acked.extend(self.poll())
            remaining = deadline - self._clock()
            if not self._pending or remaining <= 0:
                break
            if self._producer is not None:
                with contextlib.suppress(KafkaError):
                    self._producer.flush(timeout=min(remaining, 1.0))
            acked.extend(self.poll())
            if self._pending and all(p.future is None for p in self._pending):
                time.sleep(min(0.05, max(0.0, deadline - self._clock())))  # only at shutdown
        return acked

    def unacknowledged(self) -> dict[tuple[str, int], int]:
        """Per source (topic, partition), the lowest offset whose dead letter is not acknowledged yet."""
        low: dict[tuple[str, int], int] = {}
        for pending in self._pending:
            letter = pending.letter
            for topic, partition, offset in letter.holds or ((letter.topic, letter.partition, letter.offset),):
                tp = (topic, partition)
                if tp not in low or offset < low[tp]:
                    low[tp] = offset
        return low

    @property
    def pending(self) -> int:
        """Dead letters not acknowledged yet."""
        return len(self._pending)

    @property
    def pending_bytes(self) -> int:
        return sum(p.letter.size for p in self._pending)

    def forget(self, partitions: Iterable[tuple[str, int]]) -> int:
        """Drop the pending dead letters of revoked partitions (their new owner re-reads and re-sends them)."""
        lost = set(partitions)
        before = len(self._pending)
        self._pending = deque(
            p
            for p in self._pending
            if not any((t, n) in lost for t, n, _ in p.letter.holds or ((p.letter.topic, p.letter.partition, 0),))
        )
        return before - len(self._pending)

    def close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout=5)
            except Exception:
                log.warning("error closing the dead-letter producer", exc_info=True)
            self._producer = None


def _config_values(answer: Any, name: str) -> Iterable[int]:
    """Integer values of config ``name`` in a kafka-python ``describe_configs`` answer (any of its shapes)."""
    stack: list[Any] = [answer]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("name") == name or item.get("config_names") == name:
                value = item.get("value") or item.get("config_value")
                if value is not None and str(value).isdigit():
                    yield int(value)
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            if len(item) >= 2 and item[0] == name and str(item[1]).isdigit():
                yield int(item[1])
            stack.extend(item)
        elif hasattr(item, "__dict__"):
            stack.append(vars(item))
