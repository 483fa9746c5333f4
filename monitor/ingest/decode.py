"""One Kafka record value → span records (or GenAI log events).

Both encodings the OpenTelemetry Collector's Kafka exporter writes are accepted:

* ``otlp_proto``: a serialized ``ExportTraceServiceRequest`` (``ExportLogsServiceRequest`` on the
  logs topic);
* ``otlp_json``: OTLP/JSON of the same message, which is *not* protobuf's canonical JSON: ids are
  hex strings, 64-bit integers are decimal strings (numbers are accepted too), enums are integers,
  keys are lowerCamelCase (snake_case is accepted as well).

``encoding="auto"`` picks JSON when the first non-blank byte is ``{``, protobuf otherwise.

Contract: the decoder never raises anything but :class:`DecodeError`, whose ``reason`` is one of
:data:`DECODE_REASONS` (the dead-letter path uses it as the header and the metric label). Spans
that lack valid ids are skipped and counted in ``DecodedTraces.skipped``; a record whose spans are
all invalid is an error. String attribute values longer than ``max_attribute_chars`` are cut to that
length (the cut keys are listed in the span attribute ``monitor.truncated``) so one huge attribute
cannot exhaust memory.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.trajectory.spans import LogEvent, SpanEvent, SpanRecord

Encoding: TypeAlias = Literal["auto", "otlp_proto", "otlp_json"]

DECODE_REASONS: Final = (
    "empty",
    "too_large",
    "invalid_protobuf",
    "invalid_json",
    "invalid_utf8",
    "invalid_structure",
    "no_spans",
    "missing_ids",
    "unknown_encoding",
)
TRUNCATED_KEY: Final = "monitor.truncated"
DEFAULT_MAX_RECORD_BYTES: Final = 64 * 1024 * 1024
DEFAULT_MAX_ATTRIBUTE_CHARS: Final = 1024 * 1024


class DecodeError(Exception):
    """A record that cannot be decoded. ``reason`` is a stable code from :data:`DECODE_REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class DecodedTraces:
    spans: list[SpanRecord]
    encoding: str
    skipped: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class DecodedLogs:
    events: list[LogEvent]
    encoding: str
    skipped: Counter[str] = field(default_factory=Counter)


def detect_encoding(value: bytes) -> str:
    """``otlp_json`` when the first non-blank byte is ``{``, else ``otlp_proto``."""
    head = value[:64].lstrip()
    return "otlp_json" if head.startswith(b"{") else "otlp_proto"


def _check_size(value: bytes, max_record_bytes: int) -> None:
    if not value:
        raise DecodeError("empty", "the record value is empty")
    if len(value) > max_record_bytes:
        raise DecodeError("too_large", f"{len(value)} bytes exceeds the limit of {max_record_bytes}")


def _resolve(value: bytes, encoding: str) -> str:
    if encoding == "auto":
        return detect_encoding(value)
    if encoding not in ("otlp_proto", "otlp_json"):
        raise DecodeError("unknown_encoding", f"encoding {encoding!r} is not otlp_proto, otlp_json or auto")
    return encoding


def decode_traces_batch(
    value: bytes,
    encoding: Encoding | str = "auto",
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    max_attribute_chars: int = DEFAULT_MAX_ATTRIBUTE_CHARS,
) -> DecodedTraces:
    """Decode one traces record; see the module docstring for the contract."""
    _check_size(value, max_record_bytes)
    enc = _resolve(value, encoding)
    skipped: Counter[str] = Counter()
    try:
        if enc == "otlp_proto":
            spans = _ProtoTraces(max_attribute_chars, skipped).decode(value)
        else:
            spans = _JsonTraces(max_attribute_chars, skipped).decode(_load_json(value))
    except DecodeError:
        raise
    except Exception as exc:  # defensive: a decoder must never leak another exception type
        raise DecodeError("invalid_structure", f"{type(exc).__name__}: {exc}") from exc
    if not spans:
        if skipped:
            raise DecodeError("missing_ids", f"every span lacked valid ids ({sum(skipped.values())} skipped)")
        raise DecodeError("no_spans", "the record holds no spans")
    return DecodedTraces(spans, enc, skipped)


def decode_traces(value: bytes, encoding: Encoding | str = "auto", **limits: int) -> list[SpanRecord]:
    """The spans of one traces record (invalid spans skipped); raises :class:`DecodeError`."""
    return decode_traces_batch(value, encoding, **limits).spans


def decode_logs_batch(
    value: bytes,
    encoding: Encoding | str = "auto",
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    max_attribute_chars: int = DEFAULT_MAX_ATTRIBUTE_CHARS,
) -> DecodedLogs:
    """Decode one logs record into GenAI events joined later to their spans.

    Log records without a trace/span id cannot be joined and are skipped (``skipped["no_span"]``).
    An empty result is not an error: a logs topic carries much more than GenAI events.
    """
    _check_size(value, max_record_bytes)
    enc = _resolve(value, encoding)
    skipped: Counter[str] = Counter()
    try:
        if enc == "otlp_proto":
            events = _ProtoLogs(max_attribute_chars, skipped).decode(value)
        else:
            events = _JsonLogs(max_attribute_chars, skipped).decode(_load_json(value))
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError("invalid_structure", f"{type(exc).__name__}: {exc}") from exc
    return DecodedLogs(events, enc, skipped)


def decode_logs(value: bytes, encoding: Encoding | str = "auto", **limits: int) -> list[LogEvent]:
    return decode_logs_batch(value, encoding, **limits).events


# --------------------------------------------------------------------------- protobuf


def _proto_any(value: Any, limit: int, cut: list[bool]) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        s: str = value.string_value
        if len(s) > limit:
            cut.append(True)
            return s[:limit]
        return s
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        return value.double_value
    if which == "array_value":
        return [_proto_any(v, limit, cut) for v in value.array_value.values]
    if which == "kvlist_value":
        return {kv.key: _proto_any(kv.value, limit, cut) for kv in value.kvlist_value.values}
    if which == "bytes_value":
        return bytes(value.bytes_value[:limit])
    return None


def _proto_attributes(kvs: Any, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    truncated: list[str] = []
    for kv in kvs:
        cut: list[bool] = []
        out[kv.key] = _proto_any(kv.value, limit, cut)
        if cut:
            truncated.append(kv.key)
    if truncated:
        out[TRUNCATED_KEY] = truncated
    return out


class _ProtoTraces:
    def __init__(self, limit: int, skipped: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped

    def decode(self, value: bytes) -> list[SpanRecord]:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(value)
        except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
            raise DecodeError("invalid_protobuf", str(exc) or "not an ExportTraceServiceRequest") from exc
        limit = self.limit
        out: list[SpanRecord] = []
        for rs in request.resource_spans:
            resource = _proto_attributes(rs.resource.attributes, limit)
            for ss in rs.scope_spans:
                scope_name = ss.scope.name
                scope_version = ss.scope.version
                for span in ss.spans:
                    trace_id = span.trace_id
                    span_id = span.span_id
                    if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id):
                        self.skipped["missing_ids"] += 1
                        continue
                    parent = span.parent_span_id
                    events = tuple(
                        SpanEvent(ev.name, ev.time_unix_nano, _proto_attributes(ev.attributes, limit))
                        for ev in span.events
                    )
                    out.append(
                        SpanRecord(
                            trace_id=trace_id.hex(),
                            span_id=span_id.hex(),
                            parent_span_id=parent.hex() if len(parent) == 8 and any(parent) else None,
                            name=span.name,
                            kind=span.kind,
                            start_ns=span.start_time_unix_nano,
                            end_ns=span.end_time_unix_nano,
                            attributes=_proto_attributes(span.attributes, limit),
                            events=events,
                            status_code=span.status.code,
                            status_message=span.status.message,
                            resource=resource,
                            scope_name=scope_name,
                            scope_version=scope_version,
                        )
                    )
        return out


class _ProtoLogs:
    def __init__(self, limit: int, skipped: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped

    def decode(self, value: bytes) -> list[LogEvent]:
        request = ExportLogsServiceRequest()
        try:
            request.ParseFromString(value)
        except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
            raise DecodeError("invalid_protobuf", str(exc) or "not an ExportLogsServiceRequest") from exc
        out: list[LogEvent] = []
        limit = self.limit
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    if len(rec.trace_id) != 16 or len(rec.span_id) != 8:
                        self.skipped["no_span"] += 1
                        continue
                    attributes = _proto_attributes(rec.attributes, limit)
                    name = getattr(rec, "event_name", "") or str(attributes.get("event.name", ""))
                    cut: list[bool] = []
                    body = _proto_any(rec.body, limit, cut) if rec.HasField("body") else None
                    out.append(
                        LogEvent(
                            trace_id=rec.trace_id.hex(),
                            span_id=rec.span_id.hex(),
                            name=name,
                            time_ns=rec.time_unix_nano or rec.observed_time_unix_nano,
                            attributes=attributes,
                            body=body,
                        )
                    )
        return out


# --------------------------------------------------------------------------- OTLP/JSON


def _load_json(value: bytes) -> Any:
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError("invalid_utf8", f"OTLP/JSON record is not UTF-8: {exc}") from exc
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise DecodeError("invalid_json", str(exc)) from exc


def _get(obj: Mapping[str, Any], camel: str, snake: str) -> Any:
    v = obj.get(camel)
    return obj.get(snake) if v is None else v


def _as_list(value: Any, what: str) -> Sequence[Any]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise DecodeError("invalid_structure", f"{what} must be a JSON array")
    return value


def _as_obj(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise DecodeError("invalid_structure", f"{what} must be a JSON object")
    return value


def _json_int(value: Any, what: str) -> int:
    if value is None or value == "":
        return 0
    if isinstance(value, bool):
        raise DecodeError("invalid_structure", f"{what} must be an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise DecodeError("invalid_structure", f"{what} must be an integer, got {value!r}")


def _hex_id(value: Any, size: int) -> str | None:
    """A lower-case hex id of ``size`` bytes, or None when absent / all zero / malformed."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip().lower()
    if len(text) == size * 2:
        try:
            raw = bytes.fromhex(text)
        except ValueError:
            return None
    else:  # tolerate protobuf-canonical base64 ids written by generic JSON encoders
        try:
            raw = base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return None
        if len(raw) != size:
            return None
    return raw.hex() if any(raw) else None


def _json_any(value: Any, limit: int, cut: list[bool]) -> Any:
    if not isinstance(value, dict):
        return None
    for key, raw in value.items():
        if key in ("stringValue", "string_value"):
            s = str(raw)
            if len(s) > limit:
                cut.append(True)
                return s[:limit]
            return s
        if key in ("intValue", "int_value"):
            return _json_int(raw, "intValue")
        if key in ("boolValue", "bool_value"):
            return bool(raw)
        if key in ("doubleValue", "double_value"):
            if isinstance(raw, str):  # "NaN", "Infinity" per proto3 JSON
                return float(raw)
            return float(raw)
        if key in ("arrayValue", "array_value"):
            values = _as_list(_as_obj(raw, "arrayValue").get("values"), "arrayValue.values")
            return [_json_any(v, limit, cut) for v in values]
        if key in ("kvlistValue", "kvlist_value"):
            values = _as_list(_as_obj(raw, "kvlistValue").get("values"), "kvlistValue.values")
            return {str(kv.get("key", "")): _json_any(kv.get("value"), limit, cut) for kv in values}
        if key in ("bytesValue", "bytes_value"):
            try:
                return base64.b64decode(str(raw))[:limit]
            except (binascii.Error, ValueError):
                return None
    return None


def _json_attributes(kvs: Any, limit: int) -> dict[str, Any]:
    out: dict[str, Any] = {}
    truncated: list[str] = []
    for kv in _as_list(kvs, "attributes"):
        kv = _as_obj(kv, "attribute")
        key = kv.get("key")
        if not isinstance(key, str):
            continue
        cut: list[bool] = []
        out[key] = _json_any(kv.get("value"), limit, cut)
        if cut:
            truncated.append(key)
    if truncated:
        out[TRUNCATED_KEY] = truncated
    return out


class _JsonTraces:
    def __init__(self, limit: int, skipped: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped

    def decode(self, doc: Any) -> list[SpanRecord]:
        root = _as_obj(doc, "the record")
        limit = self.limit
        if "resourceLogs" in root or "resource_logs" in root:
            raise DecodeError("invalid_structure", "this is an OTLP logs record, not traces")
        out: list[SpanRecord] = []
        for rs in _as_list(_get(root, "resourceSpans", "resource_spans"), "resourceSpans"):
            rs = _as_obj(rs, "resourceSpans[]")
            resource = _json_attributes(_as_obj(rs.get("resource"), "resource").get("attributes"), limit)
            for ss in _as_list(_get(rs, "scopeSpans", "scope_spans"), "scopeSpans"):
                ss = _as_obj(ss, "scopeSpans[]")
                scope = _as_obj(ss.get("scope"), "scope")
                for span in _as_list(ss.get("spans"), "spans"):
                    span = _as_obj(span, "span")
                    trace_id = _hex_id(_get(span, "traceId", "trace_id"), 16)
                    span_id = _hex_id(_get(span, "spanId", "span_id"), 8)
                    if trace_id is None or span_id is None:
                        self.skipped["missing_ids"] += 1
                        continue
                    status = _as_obj(span.get("status"), "status")
                    events = tuple(
                        SpanEvent(
                            str(_as_obj(ev, "event").get("name", "")),
                            _json_int(_get(ev, "timeUnixNano", "time_unix_nano"), "timeUnixNano"),
                            _json_attributes(ev.get("attributes"), limit),
                        )
                        for ev in _as_list(span.get("events"), "events")
                    )
                    out.append(
                        SpanRecord(
                            trace_id=trace_id,
                            span_id=span_id,
                            parent_span_id=_hex_id(_get(span, "parentSpanId", "parent_span_id"), 8),
                            name=str(span.get("name", "")),
                            kind=_json_int(span.get("kind"), "kind"),
                            start_ns=_json_int(_get(span, "startTimeUnixNano", "start_time_unix_nano"), "start"),
                            end_ns=_json_int(_get(span, "endTimeUnixNano", "end_time_unix_nano"), "end"),
                            attributes=_json_attributes(span.get("attributes"), limit),
                            events=events,
                            status_code=_json_int(status.get("code"), "status.code"),
                            status_message=str(status.get("message", "")),
                            resource=resource,
                            scope_name=str(scope.get("name", "")),
                            scope_version=str(scope.get("version", "")),
                        )
                    )
        return out


class _JsonLogs:
    def __init__(self, limit: int, skipped: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped

    def decode(self, doc: Any) -> list[LogEvent]:
        root = _as_obj(doc, "the record")
        limit = self.limit
        out: list[LogEvent] = []
        for rl in _as_list(_get(root, "resourceLogs", "resource_logs"), "resourceLogs"):
            for sl in _as_list(_get(_as_obj(rl, "resourceLogs[]"), "scopeLogs", "scope_logs"), "scopeLogs"):
                for rec in _as_list(_get(_as_obj(sl, "scopeLogs[]"), "logRecords", "log_records"), "logRecords"):
                    rec = _as_obj(rec, "logRecord")
                    trace_id = _hex_id(_get(rec, "traceId", "trace_id"), 16)
                    span_id = _hex_id(_get(rec, "spanId", "span_id"), 8)
                    if trace_id is None or span_id is None:
                        self.skipped["no_span"] += 1
                        continue
                    attributes = _json_attributes(rec.get("attributes"), limit)
                    name = _get(rec, "eventName", "event_name") or attributes.get("event.name") or ""
                    time_ns = _json_int(_get(rec, "timeUnixNano", "time_unix_nano"), "timeUnixNano")
                    if not time_ns:
                        time_ns = _json_int(_get(rec, "observedTimeUnixNano", "observed_time_unix_nano"), "t")
                    out.append(
                        LogEvent(
                            trace_id=trace_id,
                            span_id=span_id,
                            name=str(name),
                            time_ns=time_ns,
                            attributes=attributes,
                            body=_json_any(rec.get("body"), limit, []),
                        )
                    )
        return out
