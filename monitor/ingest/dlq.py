"""Dead letters: undecodable records go to ``<topic><suffix>``, and too many of them stop the daemon.

:class:`DeadLetterQueue` produces a copy of the record (original key and value) to the dead-letter
topic with headers that say why and where it came from:

==========================  ==================================================
``monitor.dlq.reason``      the decode reason code (:data:`monitor.ingest.decode.DECODE_REASONS`)
``monitor.dlq.detail``      a human-readable detail, cut to 512 characters
``monitor.dlq.topic``       source topic
``monitor.dlq.partition``   source partition (decimal)
``monitor.dlq.offset``      source offset (decimal)
==========================  ==================================================

Original headers are kept after these. :meth:`DeadLetterQueue.send` is asynchronous: it returns once
the record is buffered in the producer. :meth:`DeadLetterQueue.flush` blocks until every buffered
record is acknowledged and raises :class:`DeadLetterError` if any failed; the run loop flushes
**before** committing offsets, so an offset is never committed past a dead letter that was lost.

:class:`DeadLetterLimit` guards against systematic failure (a wrong ``encoding`` configured, a
producer writing another format): it remembers whether each of the last ``window`` records was
dead-lettered and raises :class:`DeadLetterRateExceeded` as soon as more than ``max_rate * window``
of them were. The daemon then stops with a non-zero exit instead of dead-lettering the topic. The
record that trips the limit is neither dead-lettered nor committed.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Sequence
from typing import Any, Final

from kafka import KafkaProducer
from kafka.errors import KafkaError

from monitor.settings import DeadLetterSettings, KafkaSettings

log = logging.getLogger(__name__)

HEADER_REASON: Final = "monitor.dlq.reason"
HEADER_DETAIL: Final = "monitor.dlq.detail"
HEADER_TOPIC: Final = "monitor.dlq.topic"
HEADER_PARTITION: Final = "monitor.dlq.partition"
HEADER_OFFSET: Final = "monitor.dlq.offset"
_DETAIL_CHARS: Final = 512


class DeadLetterError(Exception):
    """A dead letter could not be written: the daemon must not commit past it."""


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


class DeadLetterQueue:
    """The dead-letter producer. ``enabled=False`` counts and skips without producing.

    Extra keyword arguments go to ``KafkaProducer``.
    """

    def __init__(self, kafka: KafkaSettings, settings: DeadLetterSettings, **producer_config: Any) -> None:
        self.suffix = kafka.dead_letter_suffix
        self.enabled = settings.enabled
        self._producer: KafkaProducer | None = None
        self._bootstrap = kafka.bootstrap_servers.split(",")
        self._config = producer_config
        self._pending: list[Any] = []

    def _get_producer(self) -> KafkaProducer:
        if self._producer is None:
            config: dict[str, Any] = {
                "bootstrap_servers": self._bootstrap,
                "acks": "all",
                "linger_ms": 20,
                "client_id": "monitor-dlq",
            }
            config.update(self._config)
            self._producer = KafkaProducer(**config)
        return self._producer

    def topic_for(self, source_topic: str) -> str:
        return source_topic + self.suffix

    def send(
        self,
        *,
        topic: str,
        partition: int,
        offset: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]] | None,
        reason: str,
        detail: str,
    ) -> bool:
        """Buffer one dead letter; returns False when dead-lettering is disabled (nothing sent)."""
        if not self.enabled:
            return False
        out_headers: list[tuple[str, bytes]] = [
            (HEADER_REASON, reason.encode()),
            (HEADER_DETAIL, detail[:_DETAIL_CHARS].encode("utf-8", "replace")),
            (HEADER_TOPIC, topic.encode()),
            (HEADER_PARTITION, str(partition).encode()),
            (HEADER_OFFSET, str(offset).encode()),
        ]
        out_headers.extend((k, v if v is not None else b"") for k, v in headers or ())
        try:
            future = self._get_producer().send(self.topic_for(topic), key=key, value=value, headers=out_headers)
        except KafkaError as exc:
            raise DeadLetterError(f"cannot dead-letter {topic}/{partition}@{offset}: {exc}") from exc
        self._pending.append(future)
        return True

    def flush(self, timeout_s: float = 30.0) -> int:
        """Block until every buffered dead letter is acknowledged; returns how many were.

        Raises :class:`DeadLetterError` when one failed or the timeout passed; the failed ones are
        forgotten, so the caller must not commit the offsets they cover (the records are re-read).
        """
        pending, self._pending = self._pending, []
        if not pending or self._producer is None:
            return 0
        try:
            self._producer.flush(timeout=timeout_s)
        except KafkaError as exc:
            raise DeadLetterError(f"flushing {len(pending)} dead letters failed: {exc}") from exc
        failed = [f for f in pending if not f.is_done or f.failed()]
        if failed:
            first = failed[0].exception if failed[0].is_done else "timeout"
            raise DeadLetterError(f"{len(failed)} of {len(pending)} dead letters were not written: {first}")
        return len(pending)

    def close(self) -> None:
        if self._producer is not None:
            try:
                self._producer.close(timeout=5)
            except Exception:
                log.warning("error closing the dead-letter producer", exc_info=True)
            self._producer = None
