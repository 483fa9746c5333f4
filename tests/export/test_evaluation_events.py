"""EvaluationEventExporter against a real OTLP receiver (tests/support/otlp_receiver.py), gRPC and HTTP."""

from __future__ import annotations

import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator

import grpc
import pytest

from monitor.export.evaluation_events import EVENT_NAME, SERVICE_NAME, EvaluationEventExporter, event_attributes
from monitor.scoring.result import FailureKind, Issue, NoteKind, ScoreResult, Severity
from monitor.settings import EvaluationEventsSettings, Settings
from tests.support.otlp_receiver import OtlpReceiver

TRACE = "0af7651916cd43dd8448eb211c80319c"
RUN = "b7ad6b7169203331"
PROTOCOLS = ["grpc", "http/protobuf"]


class Outcomes:
    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, outcome: str, count: int) -> None:
        with self.lock:
            self.counts[outcome] += count

    def wait(self, outcome: str, count: int, timeout_s: float = 10.0) -> None:
        deadline = time.monotonic() + timeout_s
        while self.counts[outcome] < count and time.monotonic() < deadline:
            time.sleep(0.02)
        assert self.counts[outcome] == count, dict(self.counts)


def results() -> list[ScoreResult]:
    common = {"trace_id": TRACE, "run_id": RUN, "agent": "weather", "conversation_id": "conv-1"}
    return [
        ScoreResult("tool_error_check", "code", 1, "scored", score=1.0, threshold=1.0, passed=True, **common),
        ScoreResult(
            "tool_selection",
            "code",
            3,
            "scored",
            score=0.25,
            threshold=0.8,
            passed=False,
            params_hash="abc123",
            scored_at="2025-06-01T12:00:00+00:00",
            issues=(
                Issue(FailureKind.MISSING_PARAMETER, tool="get_forecast", parameter="days", actual="secret"),
                Issue(FailureKind.WRONG_TOOL, tool="search"),
                Issue(NoteKind.TOOL_SCHEMA_INVALID, severity=Severity.INFO, tool="x"),
            ),
            **common,
        ),
        ScoreResult("argument_match", "code", 1, "not_applicable", reason="no_reference", **common),
        ScoreResult("goal_judge", "judge", 2, "error", reason="judge_unavailable", degraded="fallback", **common),
    ]


def settings(protocol: str, endpoint: str, **kw: object) -> EvaluationEventsSettings:
    return EvaluationEventsSettings.model_validate({"enabled": True, "protocol": protocol, "endpoint": endpoint, **kw})


def free_port() -> int:
    """A loopback port nothing listens on (connection refused: the receiver is down)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(params=PROTOCOLS)
def receiver(request: pytest.FixtureRequest) -> Iterator[OtlpReceiver]:
    rx = OtlpReceiver.grpc() if request.param == "grpc" else OtlpReceiver.http()
    with rx:
        yield rx


def test_events_reach_the_receiver_with_semconv_attributes_and_run_ids(receiver: OtlpReceiver) -> None:
    outcomes = Outcomes()
    exporter = EvaluationEventExporter(
        settings(receiver.protocol, receiver.endpoint, headers={"authorization": "Bearer s3cret"}),
        on_outcome=outcomes,
    )
    try:
        exporter.emit(results())
        assert exporter.force_flush(10)
        records = receiver.wait_for(4)
    finally:
        exporter.shutdown(5)
    assert dict(outcomes.counts) == {"exported": 4}
    assert receiver.headers[0]["authorization"] == "Bearer s3cret"
    assert len(records) == 4
    for rec in records:
        assert rec.event_name == EVENT_NAME
        assert (rec.trace_id, rec.span_id) == (TRACE, RUN)
        assert rec.resource["service.name"] == SERVICE_NAME
        assert rec.attributes["gen_ai.agent.name"] == "weather"
        assert rec.attributes["gen_ai.conversation.id"] == "conv-1"
    by_name = {r.attributes["gen_ai.evaluation.name"]: r for r in records}
    ok, bad, na, err = (by_name[n] for n in ("tool_error_check", "tool_selection", "argument_match", "goal_judge"))
    assert ok.attributes["gen_ai.evaluation.score.value"] == 1.0
    assert ok.attributes["gen_ai.evaluation.score.label"] == "pass"
    assert "gen_ai.evaluation.explanation" not in ok.attributes
    assert bad.attributes == {
        "gen_ai.evaluation.name": "tool_selection",
        "gen_ai.evaluation.score.value": 0.25,
        "gen_ai.evaluation.score.label": "fail",
        "gen_ai.evaluation.explanation": "missing_parameter(get_forecast.days); wrong_tool(search)",
        "gen_ai.agent.name": "weather",
        "gen_ai.conversation.id": "conv-1",
        "agent_tool_monitor.scorer.version": 3,
        "agent_tool_monitor.scorer.kind": "code",
        "agent_tool_monitor.evaluation.status": "scored",
        "agent_tool_monitor.evaluation.threshold": 0.8,
        "agent_tool_monitor.evaluation.params_hash": "abc123",
        "agent_tool_monitor.evaluation.issue_kinds": ["missing_parameter", "wrong_tool"],
    }
    assert bad.time_unix_nano == 1_748_779_200 * 10**9  # scored_at
    assert na.attributes["gen_ai.evaluation.score.label"] == "not_applicable"
    assert na.attributes["gen_ai.evaluation.explanation"] == "no_reference"
    assert "gen_ai.evaluation.score.value" not in na.attributes
    assert err.attributes["gen_ai.evaluation.score.label"] == "error"
    assert err.attributes["error.type"] == "judge_unavailable"
    assert err.attributes["agent_tool_monitor.evaluation.degraded"] == "fallback"


def test_results_without_valid_ids_still_leave_unlinked(receiver: OtlpReceiver) -> None:
    exporter = EvaluationEventExporter(settings(receiver.protocol, receiver.endpoint))
    try:
        exporter.emit(
            [
                ScoreResult("a", "code", 1, "scored", score=0.5, case_id="case-7"),
                ScoreResult("b", "code", 1, "scored", score=0.5, trace_id="zz", run_id="nothex!!nothex!!"),
                ScoreResult("c", "code", 1, "scored", score=0.5, trace_id=TRACE),
            ]
        )
        assert exporter.force_flush(10)
        records = {r.attributes["gen_ai.evaluation.name"]: r for r in receiver.wait_for(3)}
    finally:
        exporter.shutdown(5)
    assert (records["a"].trace_id, records["a"].span_id) == ("", "")
    assert records["a"].attributes["agent_tool_monitor.case.id"] == "case-7"
    assert (records["b"].trace_id, records["b"].span_id) == ("", "")
    assert records["c"].trace_id == TRACE


@pytest.fixture
def black_hole() -> Iterator[str]:
    """A receiver that hangs: it listens (connections complete in the backlog) but never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.mark.parametrize("protocol", PROTOCOLS)
@pytest.mark.parametrize("down", ["refused", "hanging"])
def test_receiver_down_never_blocks_counts_failed_and_shuts_down_in_time(
    protocol: str, down: str, black_hole: str
) -> None:
    outcomes = Outcomes()
    endpoint = black_hole if down == "hanging" else f"http://127.0.0.1:{free_port()}"
    exporter = EvaluationEventExporter(
        settings(protocol, endpoint, timeout_s=0.5, batch_size=10, max_queue=100), on_outcome=outcomes
    )
    batch = results() * 5  # 20 events: two export requests
    started = time.perf_counter()
    exporter.emit(batch)
    assert time.perf_counter() - started < 0.5  # queued, not sent
    started = time.perf_counter()
    flushed = exporter.force_flush(0.2)
    assert time.perf_counter() - started < 1.0
    if down == "hanging":
        assert flushed is False  # each request waits for its 0.5 s timeout
    outcomes.wait("failed", 20)
    assert exporter.pending == 0
    exporter.emit(batch[:3])  # still accepted while the receiver stays down
    started = time.perf_counter()
    exporter.shutdown(0.2)
    assert time.perf_counter() - started < 1.5
    assert outcomes.counts == Counter({"failed": 23})
    exporter.emit(batch[:2])  # after shutdown: counted, never raises
    assert outcomes.counts == Counter({"failed": 25})
    exporter.shutdown(1.0)  # twice is fine


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_receiver_refusing_requests_counts_failed(protocol: str) -> None:
    rx = OtlpReceiver.grpc() if protocol == "grpc" else OtlpReceiver.http()
    rx.status = grpc.StatusCode.INVALID_ARGUMENT if protocol == "grpc" else 400  # not retryable
    outcomes = Outcomes()
    with rx:
        exporter = EvaluationEventExporter(settings(protocol, rx.endpoint, timeout_s=2), on_outcome=outcomes)
        exporter.emit(results())
        exporter.force_flush(5)
        outcomes.wait("failed", 4)
        exporter.shutdown(2)
    assert rx.refused >= 1
    assert rx.records() == []
    assert outcomes.counts == Counter({"failed": 4})


def test_full_queue_drops_and_counts_without_blocking() -> None:
    outcomes = Outcomes()
    endpoint = f"http://127.0.0.1:{free_port()}"
    exporter = EvaluationEventExporter(
        settings("http/protobuf", endpoint, timeout_s=0.5, max_queue=6, batch_size=6), on_outcome=outcomes
    )
    try:
        started = time.perf_counter()
        exporter.emit(results() * 2)  # 8 events, room for 6
        exporter.emit(results()[:1])  # queue still full: dropped
        assert time.perf_counter() - started < 0.5
        assert outcomes.counts["dropped_queue_full"] == 3
        assert exporter.pending <= 6
    finally:
        exporter.shutdown(1.0)
    assert outcomes.counts["dropped_queue_full"] + outcomes.counts["failed"] == 9
    assert outcomes.counts["exported"] == 0


def test_outcome_callback_errors_never_reach_the_caller(receiver: OtlpReceiver) -> None:
    def broken(outcome: str, count: int) -> None:
        raise RuntimeError("counter bug")

    exporter = EvaluationEventExporter(
        settings(receiver.protocol, receiver.endpoint, max_queue=1, batch_size=1), on_outcome=broken
    )
    exporter.emit(results())  # 3 dropped: the callback raises, emit does not
    assert exporter.force_flush(10)
    exporter.shutdown(5)
    assert len(receiver.records()) == 1


def test_disabled_creates_nothing() -> None:
    before = {t.ident for t in threading.enumerate()}
    outcomes = Outcomes()
    exporter = EvaluationEventExporter(EvaluationEventsSettings(), on_outcome=outcomes)
    exporter.emit(results())
    assert exporter.force_flush(1)
    exporter.shutdown(1)
    assert not exporter.enabled
    assert exporter._provider is None and exporter._otlp is None
    assert {t.ident for t in threading.enumerate()} <= before
    assert not outcomes.counts


def test_header_values_are_masked_and_settings_validated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MONITOR_EVALUATION_EVENTS__HEADERS", '{"x-honeycomb-team": "hc-key-123"}')
    monkeypatch.setenv("MONITOR_EVALUATION_EVENTS__ENABLED", "true")
    s = Settings()
    dumped = s.masked_dump()["evaluation_events"]
    assert dumped["headers"] == {"x-honeycomb-team": "***"}
    assert dumped["enabled"] is True and dumped["protocol"] == "http/protobuf"
    assert "hc-key-123" not in repr(s)
    assert s.evaluation_events.headers["x-honeycomb-team"].get_secret_value() == "hc-key-123"
    with pytest.raises(ValueError, match="http:// or https://"):
        EvaluationEventsSettings(endpoint="collector:4317")
    with pytest.raises(ValueError, match="batch_size"):
        EvaluationEventsSettings(max_queue=10, batch_size=11)
    assert not EvaluationEventsSettings().enabled


def test_emit_cost_per_result_is_small() -> None:
    """A loose bound (shared CI cores); the measured figure is in docs/evaluation-events.md."""
    endpoint = f"http://127.0.0.1:{free_port()}"
    exporter = EvaluationEventExporter(settings("http/protobuf", endpoint, timeout_s=0.2, max_queue=20_000))
    batch = results() * 500
    try:
        started = time.perf_counter()
        exporter.emit(batch)
        per_result_us = (time.perf_counter() - started) / len(batch) * 1e6
    finally:
        exporter.shutdown(0.5)
    assert per_result_us < 500, per_result_us
    assert event_attributes(batch[1])["gen_ai.evaluation.score.label"] == "fail"
