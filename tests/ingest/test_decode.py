"""Decoding Kafka record values: both Collector encodings, logs, and every kind of bad input."""

from __future__ import annotations

import base64
import json
import math
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import Status, StatusCode

from monitor.ingest.decode import (
    DECODE_REASONS,
    REPAIR_KINDS,
    TRUNCATED_KEY,
    DecodeError,
    decode_logs,
    decode_traces,
    decode_traces_batch,
    detect_encoding,
)
from monitor.ingest.encode import encode, split_by_trace, split_spans, to_otlp_json
from monitor.trajectory.spans import SpanRecord
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


# --------------------------------------------------------------------------- storable output (docs/decoding.md)

INT64_MAX = 2**63 - 1
TRACE_HEX = "0123456789abcdef0123456789abcdef"

lone_surrogates = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
nasty_text = st.text(alphabet=st.one_of(lone_surrogates, st.just("\x00"), st.characters()), max_size=12)
proto_text = st.text(alphabet=st.one_of(st.just("\x00"), st.characters(codec="utf-8")), max_size=12)  # no surrogates
bad_times = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.integers(min_value=0, max_value=INT64_MAX).map(str),
    st.floats(),
    st.text(max_size=25),
    st.sampled_from([str(2**63), str(2**64), str(2**64 + 1), "9" * 30, "-1", "1e18", " 5", "1_000"]),
    st.booleans(),
    st.none(),
)
json_doubles = st.one_of(
    st.floats(), st.sampled_from(["NaN", "Infinity", "-Infinity"]), st.integers(-(10**400), 10**400)
)
json_ints = st.one_of(st.integers(min_value=-(2**80), max_value=2**80), st.integers().map(str), st.just("7" * 5000))


def _json_any_values(leaf_text: st.SearchStrategy[str]) -> st.SearchStrategy[dict[str, object]]:
    leaves = st.one_of(
        leaf_text.map(lambda s: {"stringValue": s}),
        json_ints.map(lambda i: {"intValue": i}),
        json_doubles.map(lambda d: {"doubleValue": d}),
        st.booleans().map(lambda b: {"boolValue": b}),
    )
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3).map(lambda vs: {"arrayValue": {"values": vs}}),
            st.lists(st.tuples(leaf_text, inner), max_size=3).map(
                lambda kvs: {"kvlistValue": {"values": [{"key": k, "value": v} for k, v in kvs]}}
            ),
        ),
        max_leaves=8,
    )


any_json_value = _json_any_values(nasty_text)
json_attributes = st.lists(
    st.tuples(nasty_text, any_json_value).map(lambda kv: {"key": kv[0], "value": kv[1]}), max_size=4
)


def _deeply_nested(depth: int, text: str) -> dict[str, object]:
    value: dict[str, object] = {"stringValue": text}
    for level in range(depth):
        value = {"kvlistValue": {"values": [{"key": f"{text}{level}", "value": value}]}}
    return value


@st.composite
def json_trace_records(draw: st.DrawFn) -> bytes:
    spans = []
    for n in range(draw(st.integers(1, 3))):
        attributes = draw(json_attributes)
        if draw(st.booleans()):
            attributes.append(
                {"key": draw(nasty_text), "value": _deeply_nested(draw(st.integers(1, 200)), draw(nasty_text))}
            )
        spans.append(
            {
                "traceId": TRACE_HEX,
                "spanId": f"{n + 1:016x}",
                "name": draw(nasty_text),
                "kind": 1,
                "startTimeUnixNano": draw(bad_times),
                "endTimeUnixNano": draw(bad_times),
                "attributes": attributes,
                "events": [
                    {"name": draw(nasty_text), "timeUnixNano": draw(bad_times), "attributes": draw(json_attributes)}
                ],
                "status": {"code": 2, "message": draw(nasty_text)},
            }
        )
    doc = {
        "resourceSpans": [
            {
                "resource": {"attributes": draw(json_attributes)},
                "scopeSpans": [{"scope": {"name": draw(nasty_text), "version": draw(nasty_text)}, "spans": spans}],
            }
        ]
    }
    return json.dumps(doc).encode()  # ensure_ascii: each lone surrogate travels as a \udXXX escape


@st.composite
def json_log_records(draw: st.DrawFn) -> bytes:
    record = {
        "traceId": TRACE_HEX,
        "spanId": "00000000000000a1",
        "eventName": draw(nasty_text),
        "timeUnixNano": draw(bad_times),
        "observedTimeUnixNano": draw(bad_times),
        "attributes": draw(json_attributes),
        "body": draw(any_json_value),
    }
    return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [record]}]}]}).encode()


def assert_storable(value: object) -> None:
    """Every string encodes as UTF-8 and holds no NUL, every float is finite; walked without recursion."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            item.encode("utf-8")
            assert "\x00" not in item
        elif isinstance(item, float):
            assert math.isfinite(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            assert item is None or isinstance(item, bool | int | bytes), type(item)


def assert_valid_time(ns: object) -> None:
    assert type(ns) is int and 0 <= ns <= INT64_MAX
    datetime.fromtimestamp(ns / 1e9, tz=UTC)  # what the store does with a run's start


def assert_storable_spans(spans: list[SpanRecord]) -> None:
    for s in spans:
        assert_storable([s.trace_id, s.span_id, s.parent_span_id, s.name, s.status_message, s.scope_name])
        assert_storable([s.scope_version, s.resource, s.attributes])
        assert_valid_time(s.start_ns)
        assert_valid_time(s.end_ns)
        for ev in s.events:
            assert_storable([ev.name, ev.attributes, ev.body])
            assert_valid_time(ev.time_ns)
        json.dumps([s.attributes, s.resource], allow_nan=False, default=bytes.hex)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(json_trace_records())
def test_otlp_json_spans_decode_to_storable_strings_numbers_and_times(record: bytes) -> None:
    try:
        decoded = decode_traces_batch(record)
    except DecodeError as exc:  # only a kind or code this strategy never breaks could cause one
        raise AssertionError(f"record rejected: {exc}") from exc
    assert_storable_spans(decoded.spans)
    assert set(decoded.repaired) <= set(REPAIR_KINDS)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(json_log_records())
def test_otlp_json_log_events_decode_to_storable_values(record: bytes) -> None:
    (event,) = decode_logs(record)
    assert_storable([event.name, event.attributes, event.body])
    assert_valid_time(event.time_ns)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    texts=st.lists(proto_text, min_size=6, max_size=6),
    times=st.lists(st.integers(min_value=0, max_value=2**64 - 1), min_size=3, max_size=3),
    double=st.floats(),
    nesting=st.integers(0, 25),  # upb refuses messages nested deeper than 100 (about 31 kvlist levels here)
)
def test_protobuf_spans_decode_to_storable_strings_numbers_and_times(
    texts: list[str], times: list[int], double: float, nesting: int
) -> None:
    req = ExportTraceServiceRequest()
    rs = req.resource_spans.add()
    rs.resource.attributes.add(key=texts[0]).value.string_value = texts[1]
    ss = rs.scope_spans.add()
    ss.scope.name = texts[2]
    s = ss.spans.add(trace_id=bytes.fromhex(TRACE_HEX), span_id=b"\x00" * 7 + b"\x01", name=texts[3])
    s.start_time_unix_nano, s.end_time_unix_nano = times[0], times[1]
    s.status.message = texts[4]
    s.attributes.add(key="d").value.double_value = double
    value = s.attributes.add(key=texts[5]).value
    for level in range(nesting):
        value = value.kvlist_value.values.add(key=f"{texts[5]}{level}").value
    value.string_value = texts[0]
    s.events.add(name=texts[1], time_unix_nano=times[2]).attributes.add(key=texts[2]).value.string_value = texts[3]
    assert_storable_spans(decode_traces(req.SerializeToString()))


def test_protobuf_strings_cannot_hold_a_lone_surrogate_so_upb_rejects_the_record() -> None:
    """The claim the fast protobuf path rests on (protobuf 7 / upb): bad UTF-8 in any string field, a
    UTF-8-encoded surrogate included, fails the parse; only NUL needs checking in protobuf strings."""
    req = ExportTraceServiceRequest()
    s = (
        req.resource_spans.add()
        .scope_spans.add()
        .spans.add(trace_id=bytes.fromhex(TRACE_HEX), span_id=b"\x00" * 7 + b"\x01", name="MARK")
    )
    s.attributes.add(key="k").value.string_value = "v"
    raw = req.SerializeToString()
    with pytest.raises(DecodeError) as info:
        decode_traces(raw.replace(b"MARK", b"\xed\xa0\x80\x41"))  # U+D800 as (invalid) UTF-8 bytes, same length
    assert info.value.reason == "invalid_protobuf"
    (nul,) = decode_traces_batch(raw.replace(b"MARK", b"M\x00RK")).spans
    assert nul.name == "M\ufffdRK"


def _record_with(name: str, agent: str, tool: str, conversation: str, arguments: str, start: object) -> bytes:
    def attr(key: str, value: str) -> dict[str, object]:
        return {"key": key, "value": {"stringValue": value}}

    agent_span = {
        "traceId": TRACE_HEX,
        "spanId": "00000000000000a1",
        "name": name,
        "startTimeUnixNano": start,
        "endTimeUnixNano": "2000",
        "attributes": [
            attr("gen_ai.operation.name", "invoke_agent"),
            attr("gen_ai.agent.name", agent),
            attr("gen_ai.conversation.id", conversation),
        ],
    }
    tool_span = {
        "traceId": TRACE_HEX,
        "spanId": "00000000000000a2",
        "parentSpanId": "00000000000000a1",
        "name": f"execute_tool {tool}",
        "startTimeUnixNano": "1500",
        "endTimeUnixNano": "1600",
        "attributes": [
            attr("gen_ai.operation.name", "execute_tool"),
            attr("gen_ai.tool.name", tool),
            attr("gen_ai.tool.call.arguments", arguments),
        ],
    }
    return json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [agent_span, tool_span]}]}]}).encode()


@pytest.mark.parametrize("start", [-5, 2**64, "99999999999999999999999", 1.5e18, "soon", True])
def test_a_record_with_lone_surrogates_and_a_bad_start_time_rebuilds_a_storable_run(start: object) -> None:
    """Issue #8: a lone surrogate in an agent, tool, conversation id or argument, or a start time outside
    the datetime range, made both stores raise; now they are repaired at decode and the run is stored."""
    from monitor.trajectory.build import build_runs

    record = _record_with(
        "invoke_agent a\ud800", "a\ud800gent", "look\udfffup", "conv\x00\ud83d", '{"q": "x\\ud800y", "n": NaN}', start
    )
    decoded = decode_traces_batch(record)
    assert decoded.repaired["text"] >= 4 and decoded.repaired["invalid_time"] == 1
    (run,) = build_runs(decoded.spans)
    assert run.agent == "a\ufffdgent" and run.conversation_id == "conv\ufffd\ufffd"
    (call,) = run.calls
    assert call.name == "look\ufffdup" and call.args == {"q": "x\ufffdy", "n": "NaN"}
    assert run.start_ns == 2000 and run.end_ns == 2000  # the invalid start takes the end: zero duration
    assert_valid_time(run.start_ns)
    json.dumps([run.agent, run.conversation_id, call.name, call.args], allow_nan=False).encode("utf-8")


def test_numbers_json_columns_refuse_become_text() -> None:
    attributes = [
        {"key": "nan", "value": {"doubleValue": "NaN"}},
        {"key": "inf", "value": {"doubleValue": "Infinity"}},
        {"key": "big", "value": {"intValue": str(2**70)}},
        {"key": "huge", "value": {"intValue": "7" * 5000}},
        {"key": "ok", "value": {"intValue": str(INT64_MAX)}},
    ]
    span = {"traceId": TRACE_HEX, "spanId": "00000000000000a1", "name": "s", "attributes": attributes}
    decoded = decode_traces_batch(json.dumps({"resourceSpans": [{"scopeSpans": [{"spans": [span]}]}]}).encode())
    (s,) = decoded.spans
    assert s.attributes == {"nan": "NaN", "inf": "Infinity", "big": str(2**70), "huge": "7" * 5000, "ok": INT64_MAX}
    assert decoded.repaired == Counter({"non_finite": 2, "int_out_of_range": 2})


def test_auto_reads_a_protobuf_record_whose_first_length_byte_is_an_opening_brace() -> None:
    """A request's first byte is 0x0a (a newline to a JSON sniffer); when the first resource_spans is 123 bytes long
    the next byte is ``{``: ``auto`` tries JSON, fails, and reads it as the protobuf it is (found by hypothesis)."""
    for pad in range(200):
        req = ExportTraceServiceRequest()
        rs = req.resource_spans.add()
        rs.resource.attributes.add(key="service.name").value.string_value = "x" * pad
        rs.scope_spans.add().spans.add(trace_id=bytes.fromhex(TRACE_HEX), span_id=b"\x00" * 7 + b"\x01", name="s")
        value = req.SerializeToString()
        if value[:2] == b"\n{":
            break
    else:
        raise AssertionError("no padding gives a first length of 123")
    spans = decode_traces(value)
    assert [s.name for s in spans] == ["s"]
    with pytest.raises(DecodeError) as bad:
        decode_traces(b"\n{not json")  # neither: the JSON error is the one reported
    assert bad.value.reason in ("invalid_json", "invalid_utf8")
