"""Decode: one Kafka record in, its spans or log events out (:class:`~monitor.steps.work.Decoded`).

* Records of the spans topic decode as ``ExportTraceServiceRequest``, the others as ``ExportLogsServiceRequest``
  (OTLP protobuf or JSON per ``kafka.encoding``; :mod:`monitor.ingest.decode`).
* **Lazy records.** With ``decode.lazy`` (the default), a protobuf record is only indexed
  (:func:`~monitor.ingest.decode.index_traces`: ids, roots, error statuses) and kept undecoded; its traces'
  spans are decoded when they close, and only if the trace is sampled (the rebuild step). OTLP/JSON records
  are decoded at once: their structure is checked by the decode itself.
* With ``flag_errors`` (the sampling can leave traces out and always keeps errored ones), every record is also
  searched for tool-error markers (``Decoded.flagged``), so the decision before the rebuild knows which traces may
  hold an errored run without decoding them.
* Spans and events of traces an earlier reading already handled are dropped here (replay marks), counted in
  ``monitor_replays_skipped_total{kind="trace"}``.
* A record that does not decode is dead-lettered with its reason (``monitor_records_invalid_total``) unless an
  earlier reading dead-lettered it already (``replays_skipped{kind="dead_letter"}``); it goes on as a
  :class:`Decoded` without content so its offset still moves. Past ``dead_letter.max_rate`` the step raises
  :class:`~monitor.ingest.dlq.DeadLetterRateExceeded` before sending (the daemon drains and exits 3).
"""

from __future__ import annotations

from monitor.ingest.consumer import Record
from monitor.ingest.decode import (
    DecodeError,
    IndexedTraces,
    decode_logs_batch,
    decode_traces_batch,
    detect_encoding,
    index_traces,
)
from monitor.ingest.dlq import DeadLetterLimit, DeadLetterQueue, make_dead_letter
from monitor.ingest.replay import ReplayGuard, dead_letter_ident
from monitor.settings import Settings
from monitor.steps.contract import Message, Step, TransformStep
from monitor.steps.work import Decoded, LoopStats, PipelineMetrics
from monitor.store import ReplayMark
from monitor.trajectory.keytable import tool_error_markers

ERROR_MARKERS = tool_error_markers()


def holds_error_marker(value: bytes) -> bool:
    """Whether ``value`` holds every byte string of some group of :data:`ERROR_MARKERS` (C substring scans)."""
    return any(all(part in value for part in group) for group in ERROR_MARKERS)


class DecodeStep(TransformStep[Record, Decoded]):
    """Records → :class:`Decoded`; see the module docstring."""

    def __init__(
        self,
        next_step: Step[Decoded],
        settings: Settings,
        *,
        dlq: DeadLetterQueue,
        guard: ReplayGuard,
        metrics: PipelineMetrics,
        stats: LoopStats,
        flag_errors: bool = True,
    ) -> None:
        super().__init__(next_step)
        self.flag_errors = flag_errors
        self.dlq = dlq
        self.guard = guard
        self.metrics = metrics
        self.stats = stats
        self.limit = DeadLetterLimit(settings.dead_letter.max_rate, settings.dead_letter.window)
        self._spans_topic = settings.kafka.spans_topic
        self._encoding = settings.kafka.encoding
        self._max_record_bytes = settings.decode.max_record_bytes
        self._max_attribute_chars = settings.decode.max_attribute_chars
        self.lazy = settings.decode.lazy

    def process(self, message: Message[Record]) -> Message[Decoded]:
        return Message(self._decode(message.payload), message.committable)

    def _decode(self, rec: Record) -> Decoded:
        tp = (rec.topic, rec.partition)
        value = rec.value or b""
        timestamp = getattr(rec, "timestamp", -1)
        timestamp_ms = timestamp if isinstance(timestamp, int) else -1
        try:
            if rec.topic == self._spans_topic:
                flagged = self.flag_errors and holds_error_marker(value)
                if self.lazy and self._encoding != "otlp_json" and detect_encoding(value) == "otlp_proto":
                    return self._index(rec, value, timestamp_ms, flagged)
                traces = decode_traces_batch(
                    value,
                    self._encoding,
                    max_record_bytes=self._max_record_bytes,
                    max_attribute_chars=self._max_attribute_chars,
                )
                kept, replayed = self.guard.drop_handled(tp, traces.spans)
                self._count_replays(replayed)
                n = len(traces.spans)
                if n:
                    self.stats.spans += n
                    self.metrics.spans_decoded(n)
                self.limit.good(1)
                return Decoded(tp, rec.offset, kept, None, len(value), timestamp_ms, flagged)
            logs = decode_logs_batch(
                value,
                self._encoding,
                max_record_bytes=self._max_record_bytes,
                max_attribute_chars=self._max_attribute_chars,
            )
            events, replayed = self.guard.drop_handled(tp, logs.events)
            self._count_replays(replayed)
            self.limit.good(1)
            return Decoded(tp, rec.offset, None, events, len(value), timestamp_ms)
        except DecodeError as exc:
            self._dead_letter(rec, exc)
            return Decoded(tp, rec.offset, None, None, len(value), timestamp_ms)

    def _index(self, rec: Record, value: bytes, timestamp_ms: int, flagged: bool) -> Decoded:
        """The lazy path: the record indexed, not decoded (raises :class:`DecodeError` as the decode would)."""
        tp = (rec.topic, rec.partition)
        indexed = index_traces(
            value, max_record_bytes=self._max_record_bytes, max_attribute_chars=self._max_attribute_chars
        )
        n = indexed.spans
        kept, replayed = self.guard.drop_handled_ids(tp, indexed.traces)
        self._count_replays(replayed)
        if n:
            self.stats.spans += n
            self.metrics.spans_decoded(n)
        self.limit.good(1)
        if kept is not indexed.traces:
            indexed = IndexedTraces(dict(kept), indexed.record, indexed.skipped)
        return Decoded(tp, rec.offset, None, None, len(value), timestamp_ms, flagged, indexed)

    def _count_replays(self, n: int) -> None:
        if n:
            self.stats.replayed_traces += n
            self.metrics.replays_skipped("trace", n)

    def _dead_letter(self, rec: Record, exc: DecodeError) -> None:
        tp = (rec.topic, rec.partition)
        ident = dead_letter_ident(rec.offset, rec.key, rec.value)
        if self.guard.dead_lettered(tp, ident):  # sent and acknowledged by an earlier reading
            self.stats.replayed_dead_letters += 1
            self.metrics.replays_skipped("dead_letter")
            return
        self.limit.check_bad(exc.reason)  # raises DeadLetterRateExceeded: stop before sending this one
        self.metrics.record_invalid(exc.reason)
        self.stats.dead_letters[exc.reason] += 1
        self.dlq.send(
            make_dead_letter(
                topic=rec.topic,
                partition=rec.partition,
                offset=rec.offset,
                key=rec.key,
                value=rec.value,
                headers=rec.headers,
                reason=exc.reason,
                detail=exc.detail,
                marks=[ReplayMark(rec.topic, rec.partition, "dead_letter", ident, rec.offset)],
            )
        )
