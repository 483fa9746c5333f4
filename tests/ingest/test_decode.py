"""Decoding Kafka record values: both Collector encodings, logs, and every kind of bad input."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import Status, StatusCode

from monitor.ingest.decode import (
    DECODE_REASONS,
    TRUNCATED_KEY,
    DecodeError,
    decode_logs,
    decode_traces,
    decode_traces_batch,
    detect_encoding,
)
from monitor.ingest.encode import encode, split_by_trace, split_spans, to_otlp_json
from tests.spanutil import Recorder, agent_run, span


def _weather(city: str) -> dict[str, object]:
    return {"city": city, "temp": 18}


@pytest.fixture()
def request_with_agent() -> ExportTraceServiceRequest:
    rec = Recorder()
    tracer = rec.tracer()
    agent_run(tracer, {"get_weather": _weather}, [("get_weather", {"city": "Paris"})])
    with span(tracer, "typed", b=True, i=7, f=1.5, arr=["x", "y"], ints=[1, 2]) as s:
        s.set_status(Status(StatusCode.ERROR, "boom"))
        s.add_event("exception", {"exception.type": "ValueError", "exception.message": "bad"})
    return rec.request()


def test_proto_and_json_records_decode_to_the_same_spans(request_with_agent: ExportTraceServiceRequest) -> None:
    from_proto = decode_traces(encode(request_with_agent, "otlp_proto"))
    from_json = decode_traces(encode(request_with_agent, "otlp_json"))
    assert from_proto == from_json
    assert len(from_proto) == 5  # invoke_agent, 2 chat, 1 execute_tool, typed
    typed = next(s for s in from_proto if s.name == "typed")
    assert typed.attributes["b"] is True and typed.attributes["i"] == 7 and typed.attributes["f"] == 1.5
    assert typed.attributes["arr"] == ["x", "y"] and typed.attributes["ints"] == [1, 2]
    assert typed.status_code == 2 and typed.status_message == "boom"
    assert typed.events[0].name == "exception" and typed.events[0].attributes["exception.type"] == "ValueError"
    assert typed.resource["service.name"] == "test-agent" and typed.scope_name == "tests"
    root = next(s for s in from_proto if s.name.startswith("invoke_agent"))
    assert root.parent_span_id is None and len(root.trace_id) == 32 and len(root.span_id) == 16


def test_otlp_json_uses_hex_ids_and_string_int64(request_with_agent: ExportTraceServiceRequest) -> None:
    doc = json.loads(to_otlp_json(request_with_agent))
    span0 = doc["resourceSpans"][0]["scopeSpans"][0]["spans"][0]
    assert len(span0["traceId"]) == 32 and int(span0["traceId"], 16) >= 0
    assert isinstance(span0["startTimeUnixNano"], str) and isinstance(span0["kind"], int)


def test_json_accepts_numbers_uppercase_ids_snake_case_and_structured_values() -> None:
    doc = {
        "resource_spans": [
            {
                "scopeSpans": [
                    {
                        "scope": {"name": "x"},
                        "spans": [
                            {
                                "traceId": "5B8EFFF798038103D269B633813FC60C",
                                "spanId": "EEE19B7EC3C1B174",
                                "name": "execute_tool f",
                                "startTimeUnixNano": 1581452772000000321,
                                "endTimeUnixNano": "1581452773000000789",
                                "kind": 1,
                                "attributes": [
                                    {
                                        "key": "gen_ai.tool.call.arguments",
                                        "value": {
                                            "kvlistValue": {
                                                "values": [
                                                    {"key": "city", "value": {"stringValue": "Paris"}},
                                                    {"key": "days", "value": {"intValue": "3"}},
                                                ]
                                            }
                                        },
                                    },
                                    {"key": "blob", "value": {"bytesValue": base64.b64encode(b"\x00\x01").decode()}},
                                    {"key": "d", "value": {"doubleValue": 2}},
                                ],
                            }
                        ],
                    }
                ]
            }
        ]
    }
    (s,) = decode_traces(json.dumps(doc).encode())
    assert s.trace_id == "5b8efff798038103d269b633813fc60c"
    assert s.start_ns == 1581452772000000321 and s.end_ns == 1581452773000000789
    assert s.attributes["gen_ai.tool.call.arguments"] == {"city": "Paris", "days": 3}
    assert s.attributes["blob"] == b"\x00\x01" and s.attributes["d"] == 2.0


def test_logs_records_carry_genai_events_joinable_by_span_id() -> None:
    from opentelemetry.proto.logs.v1.logs_pb2 import LogRecord

    req = ExportLogsServiceRequest()
    rec: LogRecord = req.resource_logs.add().scope_logs.add().log_records.add()
    rec.trace_id = bytes.fromhex("0123456789abcdef0123456789abcdef")
    rec.span_id = bytes.fromhex("00000000000000a1")
    rec.time_unix_nano = 5
    rec.event_name = "gen_ai.user.message"
    rec.body.kvlist_value.values.add(key="content").value.string_value = "hello"
    orphan = req.resource_logs[0].scope_logs[0].log_records.add()
    orphan.body.string_value = "not an event of a span"
    for enc in ("otlp_proto", "otlp_json"):
        (event,) = decode_logs(encode(req, enc))
        assert event.name == "gen_ai.user.message" and event.body == {"content": "hello"}
        assert event.span_id == "00000000000000a1" and event.time_ns == 5


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (b"", "empty"),
        (b"\xff\xfe garbage \x00\x01", "invalid_protobuf"),
        (b"{not json", "invalid_json"),
        (b'{"resourceSpans": "nope"}', "invalid_structure"),
        (b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "x"}]}]}]}', "missing_ids"),
        (b'{"resourceSpans": []}', "no_spans"),
        (b'{"a": "\xff"}', "invalid_utf8"),
        (b'{"resourceLogs": []}', "invalid_structure"),
    ],
)
def test_bad_records_raise_one_typed_error(value: bytes, reason: str) -> None:
    with pytest.raises(DecodeError) as info:
        decode_traces(value)
    assert info.value.reason == reason
    assert reason in DECODE_REASONS


def test_truncated_protobuf_is_a_decode_error(request_with_agent: ExportTraceServiceRequest) -> None:
    data = encode(request_with_agent, "otlp_proto")
    with pytest.raises(DecodeError) as info:
        decode_traces(data[: len(data) // 2])
    assert info.value.reason in ("invalid_protobuf", "missing_ids", "no_spans")


def test_json_record_sent_as_proto_encoding_is_rejected(request_with_agent: ExportTraceServiceRequest) -> None:
    with pytest.raises(DecodeError) as info:
        decode_traces(encode(request_with_agent, "otlp_json"), "otlp_proto")
    assert info.value.reason in ("invalid_protobuf", "no_spans", "missing_ids")
    with pytest.raises(DecodeError, match="unknown_encoding"):
        decode_traces(b"x", "zipkin")


def test_spans_without_valid_ids_are_skipped_and_counted(request_with_agent: ExportTraceServiceRequest) -> None:
    bad = request_with_agent.resource_spans[0].scope_spans[0].spans.add()
    bad.name = "no ids"
    decoded = decode_traces_batch(encode(request_with_agent, "otlp_proto"))
    assert decoded.skipped["missing_ids"] == 1 and all(s.name != "no ids" for s in decoded.spans)


def test_huge_attribute_is_cut_and_marked() -> None:
    rec = Recorder()
    with span(rec.tracer(), "big", payload="x" * 10_000_000, small="ok"):
        pass
    (s,) = decode_traces(rec.record(), max_attribute_chars=1000)
    assert len(s.attributes["payload"]) == 1000 and s.attributes["small"] == "ok"
    assert s.attributes[TRUNCATED_KEY] == ["payload"]
    with pytest.raises(DecodeError, match="too_large"):
        decode_traces(rec.record(), max_record_bytes=1_000_000)


def test_detect_encoding() -> None:
    assert detect_encoding(b'  \n{"resourceSpans": []}') == "otlp_json"
    assert detect_encoding(b"\x0a\x02") == "otlp_proto"


def test_split_by_trace_keys_each_record_with_its_hex_trace_id() -> None:
    rec = Recorder()
    tracer = rec.tracer()
    for _ in range(3):
        agent_run(tracer, {"get_weather": _weather}, [("get_weather", {"city": "Oslo"})])
    parts = list(split_by_trace(rec.request()))
    assert len(parts) == 3
    for key, part in parts:
        spans = decode_traces(encode(part, "otlp_proto"))
        assert {s.trace_id for s in spans} == {key}


@settings(max_examples=300, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2048))
def test_arbitrary_bytes_never_raise_anything_but_decode_error(data: bytes) -> None:
    for enc in ("auto", "otlp_proto", "otlp_json"):
        try:
            decode_traces(data, enc)
            decode_logs(data, enc)
        except DecodeError as exc:
            assert exc.reason in DECODE_REASONS


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=20),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=10,
)


@settings(max_examples=200)
@given(json_values)
def test_arbitrary_json_documents_never_raise_anything_but_decode_error(doc: object) -> None:
    for wrapped in (doc, {"resourceSpans": doc}, {"resourceSpans": [{"scopeSpans": [{"spans": [doc]}]}]}):
        try:
            decode_traces(json.dumps(wrapped).encode())
        except DecodeError as exc:
            assert exc.reason in DECODE_REASONS


@settings(max_examples=50, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.integers(1, 6))
def test_any_split_of_a_request_decodes_to_the_same_spans(
    request_with_agent: ExportTraceServiceRequest, parts: int
) -> None:
    whole = sorted(decode_traces(encode(request_with_agent, "otlp_proto")), key=lambda s: s.span_id)
    pieces = [s for p in split_spans(request_with_agent, parts) for s in decode_traces(encode(p, "otlp_json"))]
    assert sorted(pieces, key=lambda s: s.span_id) == whole
