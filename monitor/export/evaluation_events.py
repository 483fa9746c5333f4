"""Evaluation results as OTLP ``gen_ai.evaluation.result`` events (docs/evaluation-events.md).

:class:`EvaluationEventExporter` turns each :class:`~monitor.scoring.result.ScoreResult` into one
OpenTelemetry log record carrying the GenAI evaluation event (semantic conventions of
``open-telemetry/semantic-conventions-genai``, ``docs/gen-ai/gen-ai-events.md``), linked to the
evaluated run by its trace id and span id (the run id is the hex id of the run's root span), and
sends the records with the OpenTelemetry SDK: a private :class:`LoggerProvider` (never the global
one), a :class:`BatchLogRecordProcessor` and the OTLP log exporter over HTTP/protobuf or gRPC.

Contract, for the pipeline step that calls it:

* :meth:`~EvaluationEventExporter.emit` never blocks on the network and never raises: it builds the
  records and appends them to the processor's bounded queue (``max_queue``). When ``max_queue``
  events are already waiting or being sent, new events are dropped and counted.
* every event ends in exactly one outcome reported to ``on_outcome(outcome, count)``:
  ``exported`` (the receiver accepted its batch), ``dropped_queue_full`` (never queued) or
  ``failed`` (its batch was refused or timed out, or it was still pending at shutdown, or it was
  emitted after shutdown).
* :meth:`~EvaluationEventExporter.force_flush` and :meth:`~EvaluationEventExporter.shutdown` return
  within their timeout even when the receiver is down.
* disabled settings create nothing: no provider, no thread, no connection.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from importlib import metadata
from typing import Final
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.sdk._logs import LoggerProvider, ReadableLogRecord
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
from opentelemetry.sdk.resources import Resource
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags, set_span_in_context
from opentelemetry.util.types import AttributeValue

from monitor.scoring.result import ScoreResult
from monitor.settings import EvaluationEventsSettings

__all__ = [
    "EVENT_NAME",
    "OUTCOMES",
    "SERVICE_NAME",
    "EvaluationEventExporter",
    "event_attributes",
]

log = logging.getLogger(__name__)

EVENT_NAME: Final = "gen_ai.evaluation.result"
SERVICE_NAME: Final = "agent-tool-monitor"
OUTCOMES: Final = ("exported", "dropped_queue_full", "failed")

# GenAI semantic conventions (the evaluation event's own attributes)
ATTR_NAME: Final = "gen_ai.evaluation.name"
ATTR_SCORE_VALUE: Final = "gen_ai.evaluation.score.value"
ATTR_SCORE_LABEL: Final = "gen_ai.evaluation.score.label"
ATTR_EXPLANATION: Final = "gen_ai.evaluation.explanation"
ATTR_ERROR_TYPE: Final = "error.type"
ATTR_AGENT_NAME: Final = "gen_ai.agent.name"
ATTR_CONVERSATION_ID: Final = "gen_ai.conversation.id"
# our own attributes: outside the semconv-owned gen_ai.* namespace, under the application's prefix
PREFIX: Final = "agent_tool_monitor."
ATTR_SCORER_VERSION: Final = PREFIX + "scorer.version"
ATTR_SCORER_KIND: Final = PREFIX + "scorer.kind"
ATTR_STATUS: Final = PREFIX + "evaluation.status"
ATTR_THRESHOLD: Final = PREFIX + "evaluation.threshold"
ATTR_DEGRADED: Final = PREFIX + "evaluation.degraded"
ATTR_PARAMS_HASH: Final = PREFIX + "evaluation.params_hash"
ATTR_ISSUE_KINDS: Final = PREFIX + "evaluation.issue_kinds"
ATTR_CASE_ID: Final = PREFIX + "case.id"

MAX_EXPLANATION_CHARS: Final = 4096
SCHEDULE_DELAY_MS: Final = 1000.0
"""A partial batch waits at most this long before it is sent."""
SHUTDOWN_GRACE_S: Final = 0.5
"""After the shutdown timeout, how long the export thread may take to notice the exporter stopped."""

DEFAULT_ENDPOINTS: Final = {"http/protobuf": "http://localhost:4318", "grpc": "http://localhost:4317"}
LOGS_PATH: Final = "/v1/logs"

_NO_LINK: Final = Context()
"""The context of an event with no (valid) trace/span id: no current span, so the ids stay zero."""


def _package_version() -> str:
    try:
        return metadata.version("agent-tool-monitor")
    except metadata.PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "0"


def _hex_id(value: str | None, digits: int) -> int:
    """The id as an int, or 0 (invalid) when it is missing or not ``digits`` hex digits."""
    if value is None or len(value) != digits:
        return 0
    try:
        return int(value, 16)
    except ValueError:
        return 0


def _link(trace_id: str | None, run_id: str | None) -> Context:
    """A context whose current span is the run's root span, so the SDK stamps its ids on the record."""
    tid, sid = _hex_id(trace_id, 32), _hex_id(run_id, 16)
    if not tid:
        return _NO_LINK
    span = SpanContext(trace_id=tid, span_id=sid, is_remote=True, trace_flags=TraceFlags(TraceFlags.SAMPLED))
    return set_span_in_context(NonRecordingSpan(span), _NO_LINK)


def _explanation(result: ScoreResult) -> str | None:
    """The scorer's reason (a judge's explanation, or a reason code), else the failing issues named by
    kind, tool and parameter (never their values: those may quote user content)."""
    text = result.reason
    if not text:
        parts = []
        for issue in result.failure_issues:
            where = ".".join(p for p in (issue.tool, issue.parameter) if p)
            parts.append(f"{issue.kind}({where})" if where else str(issue.kind))
        text = "; ".join(parts) or None
    if text and len(text) > MAX_EXPLANATION_CHARS:
        text = text[: MAX_EXPLANATION_CHARS - 1] + "…"
    return text


def event_attributes(result: ScoreResult) -> dict[str, AttributeValue]:
    """The attributes of the ``gen_ai.evaluation.result`` event of one result."""
    attrs: dict[str, AttributeValue] = {
        ATTR_NAME: result.scorer,
        ATTR_SCORER_VERSION: result.scorer_version,
        ATTR_SCORER_KIND: result.scorer_kind,
        ATTR_STATUS: result.status,
    }
    if result.status == "scored":
        if result.score is not None:
            attrs[ATTR_SCORE_VALUE] = float(result.score)
        if result.passed is not None:
            attrs[ATTR_SCORE_LABEL] = "pass" if result.passed else "fail"
        if result.threshold is not None:
            attrs[ATTR_THRESHOLD] = float(result.threshold)
    else:
        attrs[ATTR_SCORE_LABEL] = result.status
        if result.status == "error":
            attrs[ATTR_ERROR_TYPE] = result.reason or "_OTHER"
    explanation = _explanation(result)
    if explanation:
        attrs[ATTR_EXPLANATION] = explanation
    kinds = sorted({str(issue.kind) for issue in result.failure_issues})
    if kinds:
        attrs[ATTR_ISSUE_KINDS] = kinds
    if result.agent:
        attrs[ATTR_AGENT_NAME] = result.agent
    if result.conversation_id:
        attrs[ATTR_CONVERSATION_ID] = result.conversation_id
    if result.degraded:
        attrs[ATTR_DEGRADED] = result.degraded
    if result.params_hash:
        attrs[ATTR_PARAMS_HASH] = result.params_hash
    if result.case_id:
        attrs[ATTR_CASE_ID] = result.case_id
    return attrs


def _timestamp_ns(scored_at: str | None, now_ns: int) -> int:
    if scored_at:
        try:
            return int(datetime.fromisoformat(scored_at).timestamp() * 1e9)
        except ValueError:
            pass
    return now_ns


def _logs_url(endpoint: str) -> str:
    """OTLP/HTTP: a URL without a path is the receiver's base URL, so the logs path is appended."""
    return endpoint.rstrip("/") + LOGS_PATH if urlsplit(endpoint).path in ("", "/") else endpoint


class _Outcomes:
    """The in-flight count (queued or being sent) and the outcome callback, shared by both threads."""

    def __init__(self, limit: int, on_outcome: Callable[[str, int], None] | None) -> None:
        self.limit = limit
        self.in_flight = 0
        self.closed = False
        self.lock = threading.Lock()
        self.idle = threading.Condition(self.lock)
        self._on_outcome = on_outcome

    def report(self, outcome: str, count: int) -> None:
        if self._on_outcome is None or count <= 0:
            return
        try:
            self._on_outcome(outcome, count)
        except Exception:  # a counting bug must not break the loop nor the export thread
            log.exception("evaluation events: on_outcome(%r, %d) raised", outcome, count)

    def settle(self, outcome: str, count: int) -> None:
        """A batch of ``count`` queued events ended with ``outcome`` (ignored once shutdown settled all)."""
        with self.lock:
            if self.closed:
                return
            self.in_flight -= count
            if self.in_flight <= 0:
                self.idle.notify_all()
        self.report(outcome, count)


class _CountingExporter(LogRecordExporter):
    """Sends through the OTLP exporter and settles each batch's events as exported or failed."""

    def __init__(self, inner: LogRecordExporter, outcomes: _Outcomes) -> None:
        self._inner = inner
        self._outcomes = outcomes

    def export(self, batch: Sequence[ReadableLogRecord]) -> LogRecordExportResult:
        result = LogRecordExportResult.FAILURE
        try:
            result = self._inner.export(batch)
        except Exception:
            log.warning("evaluation events: export of %d events raised", len(batch), exc_info=True)
        self._outcomes.settle("exported" if result is LogRecordExportResult.SUCCESS else "failed", len(batch))
        return result

    def shutdown(self) -> None:
        self._inner.shutdown()  # type: ignore[no-untyped-call]

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True


class EvaluationEventExporter:
    """Each :class:`ScoreResult` given to :meth:`emit` leaves as a ``gen_ai.evaluation.result`` event.

    ``on_outcome(outcome, count)`` is called with ``exported``, ``dropped_queue_full`` or ``failed``
    (see :data:`OUTCOMES`), from the calling thread (drops) or the SDK's export thread; it must be
    cheap and thread-safe (a Prometheus counter's ``inc`` is).
    """

    def __init__(
        self, settings: EvaluationEventsSettings, *, on_outcome: Callable[[str, int], None] | None = None
    ) -> None:
        self.settings = settings
        self.enabled = settings.enabled
        self._outcomes = _Outcomes(settings.max_queue, on_outcome)
        self._provider: LoggerProvider | None = None
        self._otlp: LogRecordExporter | None = None
        self._last_link: tuple[str | None, str | None, Context] = (None, None, _NO_LINK)
        if not self.enabled:
            return
        version = _package_version()
        self._otlp = self._make_otlp_exporter(settings)
        resource = Resource.create({"service.version": version}).merge(Resource({"service.name": SERVICE_NAME}))
        self._provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
        self._provider.add_log_record_processor(
            BatchLogRecordProcessor(
                _CountingExporter(self._otlp, self._outcomes),
                schedule_delay_millis=SCHEDULE_DELAY_MS,
                max_export_batch_size=settings.batch_size,
                export_timeout_millis=settings.timeout_s * 1000,
                max_queue_size=settings.max_queue,
            )
        )
        self._logger = self._provider.get_logger("monitor.export.evaluation_events", version)

    @staticmethod
    def _make_otlp_exporter(settings: EvaluationEventsSettings) -> LogRecordExporter:
        endpoint = settings.endpoint or DEFAULT_ENDPOINTS[settings.protocol]
        headers = {name: value.get_secret_value() for name, value in settings.headers.items()}
        if settings.protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcExporter

            return GrpcExporter(endpoint=endpoint, headers=headers or None, timeout=settings.timeout_s)
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpExporter

        return HttpExporter(endpoint=_logs_url(endpoint), headers=headers or None, timeout=settings.timeout_s)

    # ----------------------------------------------------------------------------------- emit

    def emit(self, results: Sequence[ScoreResult]) -> None:
        """Queue one event per result; never blocks on the network, never raises."""
        if not self.enabled or not results:
            return
        try:
            self._emit(results)
        except Exception:
            log.exception("evaluation events: emit of %d results failed", len(results))

    def _emit(self, results: Sequence[ScoreResult]) -> None:
        outcomes = self._outcomes
        with outcomes.lock:
            if outcomes.closed:
                accepted = 0
            else:
                accepted = min(len(results), outcomes.limit - outcomes.in_flight)
                outcomes.in_flight += accepted
        if outcomes.closed:
            outcomes.report("failed", len(results))
            return
        outcomes.report("dropped_queue_full", len(results) - accepted)
        now = time.time_ns()
        sent = 0
        try:
            for result in results[:accepted]:
                self._logger.emit(
                    timestamp=_timestamp_ns(result.scored_at, now),
                    observed_timestamp=now,
                    context=self._context(result.trace_id, result.run_id),
                    attributes=event_attributes(result),
                    event_name=EVENT_NAME,
                )
                sent += 1
        finally:
            if sent < accepted:  # a record could not be built: give its slots back and count it
                outcomes.settle("failed", accepted - sent)

    def _context(self, trace_id: str | None, run_id: str | None) -> Context:
        last_trace, last_run, context = self._last_link
        if trace_id != last_trace or run_id != last_run:  # results of one run come together
            context = _link(trace_id, run_id)
            self._last_link = (trace_id, run_id, context)
        return context

    # ----------------------------------------------------------------------------------- lifecycle

    @property
    def pending(self) -> int:
        """Events queued or being sent."""
        with self._outcomes.lock:
            return self._outcomes.in_flight

    def force_flush(self, timeout_s: float) -> bool:
        """Send what is queued; True when every event emitted so far has an outcome within ``timeout_s``."""
        if self._provider is None:
            return True
        deadline = time.monotonic() + max(0.0, timeout_s)
        provider = self._provider
        threading.Thread(
            target=self._quietly, args=(lambda: provider.force_flush(int(timeout_s * 1000)),), daemon=True
        ).start()
        outcomes = self._outcomes
        with outcomes.lock:
            while outcomes.in_flight > 0 and not outcomes.closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                outcomes.idle.wait(remaining)
            return outcomes.in_flight <= 0

    def shutdown(self, timeout_s: float) -> None:
        """Send what is queued within ``timeout_s``, then stop; what is still pending counts as failed."""
        provider, otlp = self._provider, self._otlp
        if provider is None or otlp is None:
            return
        self._provider = None
        deadline = time.monotonic() + max(0.0, timeout_s)
        stopper = threading.Thread(target=self._quietly, args=(provider.shutdown,), daemon=True)
        stopper.start()
        stopper.join(max(0.0, deadline - time.monotonic()))
        if stopper.is_alive():  # the receiver is slow or down: cut the retries short
            self._quietly(otlp.shutdown)
            stopper.join(SHUTDOWN_GRACE_S)
        outcomes = self._outcomes
        with outcomes.lock:
            left, outcomes.in_flight, outcomes.closed = max(0, outcomes.in_flight), 0, True
            outcomes.idle.notify_all()
        outcomes.report("failed", left)

    @staticmethod
    def _quietly(call: Callable[[], object]) -> None:
        try:
            call()
        except Exception:
            log.warning("evaluation events: SDK call failed", exc_info=True)
