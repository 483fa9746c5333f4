"""One Kafka record value → span records (or GenAI log events).

Both encodings the OpenTelemetry Collector's Kafka exporter writes are accepted:

* ``otlp_proto``: a serialized ``ExportTraceServiceRequest`` (``ExportLogsServiceRequest`` on the
  logs topic);
* ``otlp_json``: OTLP/JSON of the same message, which is *not* protobuf's canonical JSON: ids are
  hex strings, 64-bit integers are decimal strings (numbers are accepted too), enums are integers,
  keys are lowerCamelCase (snake_case is accepted as well).

``encoding="auto"`` picks JSON when the first non-blank byte is ``{``, protobuf otherwise; a record that starts
with a newline and fails as JSON is tried as protobuf (whose first byte is 0x0a).

Contract: the decoder never raises anything but :class:`DecodeError`, whose ``reason`` is one of
:data:`DECODE_REASONS` (the dead-letter path uses it as the header and the metric label). Spans
that lack valid ids are skipped and counted in ``DecodedTraces.skipped``; a record whose spans are
all invalid is an error. String attribute values longer than ``max_attribute_chars`` are cut to that
length (the cut keys are listed in the span attribute ``monitor.truncated``) so one huge attribute
cannot exhaust memory.

Everything decoded is storable as it is (docs/decoding.md), and repairs are counted by kind in
``DecodedTraces.repaired`` / ``DecodedLogs.repaired`` instead of failing the record:

* every string (attribute keys and values at any depth, span, event and scope names, status
  messages, log bodies) holds no NUL and no lone surrogate: each becomes U+FFFD (``text``). A
  protobuf string cannot hold a lone surrogate (upb rejects bad UTF-8 when it parses; the record is
  then ``invalid_protobuf``), so protobuf strings are only checked for NUL; OTLP/JSON documents are
  walked only when their text holds a ``\\u0000`` or ``\\uD800``–``\\uDFFF`` escape;
* every time is an int in [0, 2**63 - 1] ns (the int64 range, up to the year 2262): a time that is
  negative, beyond int64, or not an integer (a float, text, a bool) is replaced by the span's other
  time (a zero duration, so no latency is invented), or by 0 (OTLP's "unknown") when that one is
  invalid too (``invalid_time``);
* a double that is NaN or ±Infinity becomes the string ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``
  (``non_finite``); an OTLP/JSON ``intValue`` outside int64 keeps its decimal text as a string
  (``int_out_of_range``): JSON columns (PostgreSQL's above all) accept neither.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, TypeAlias

from google.protobuf.message import DecodeError as ProtobufDecodeError
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.trajectory.sanitize import (
    REPLACEMENT,
    clean_text,
    finite_or_name,
    json_record_may_hold_unstorable_text,
    storable,
)
from monitor.trajectory.spans import STATUS_ERROR, LogEvent, SpanEvent, SpanRecord

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
INT64_MAX: Final = 2**63 - 1
INT64_MIN: Final = -(2**63)
REPAIR_KINDS: Final = ("text", "invalid_time", "non_finite", "int_out_of_range", "not_json")
"""Keys of ``DecodedTraces.repaired`` / ``DecodedLogs.repaired`` (module docstring)."""


class DecodeError(Exception):
    """A record that cannot be decoded. ``reason`` is a stable code from :data:`DECODE_REASONS`."""

    def __init__(self, reason: str, detail: str) -> None:
        detail = clean_text(detail)  # it travels as a dead-letter header: UTF-8 text
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class DecodedTraces:
    """The spans of one record; ``skipped`` counts spans left out (by reason), ``repaired`` the values
    made storable (by kind, :data:`REPAIR_KINDS`) in the spans kept."""

    spans: list[SpanRecord]
    encoding: str
    skipped: Counter[str] = field(default_factory=Counter)
    repaired: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class DecodedLogs:
    """The GenAI log events of one record; ``skipped`` and ``repaired`` as in :class:`DecodedTraces`."""

    events: list[LogEvent]
    encoding: str
    skipped: Counter[str] = field(default_factory=Counter)
    repaired: Counter[str] = field(default_factory=Counter)


def detect_encoding(value: bytes) -> str:
    """``otlp_json`` when the first non-blank byte is ``{``, else ``otlp_proto``."""
    head = value[:64].lstrip()
    return "otlp_json" if head.startswith(b"{") else "otlp_proto"


def _may_be_protobuf(value: bytes, encoding: str, detected: str) -> bool:
    """A record ``auto`` took for JSON only because of a blank before its ``{`` may be protobuf: a request's first
    byte is 0x0a (field 1, length-delimited), which is also a newline, and its length byte may be 123 (``{``)."""
    return encoding == "auto" and detected == "otlp_json" and value[:1] == b"\n"


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
    try:
        return _traces(value, enc, max_attribute_chars)
    except DecodeError as first:
        if not _may_be_protobuf(value, encoding, enc):
            raise
        try:
            return _traces(value, "otlp_proto", max_attribute_chars)
        except DecodeError:
            raise first from None


def _traces(value: bytes, enc: str, max_attribute_chars: int) -> DecodedTraces:
    skipped: Counter[str] = Counter()
    repaired: Counter[str] = Counter()
    try:
        if enc == "otlp_proto":
            spans = _ProtoTraces(max_attribute_chars, skipped, repaired).decode(value)
        else:
            spans = _JsonTraces(max_attribute_chars, skipped, repaired).decode(_load_json(value, repaired))
    except DecodeError:
        raise
    except Exception as exc:  # defensive: a decoder must never leak another exception type
        raise DecodeError("invalid_structure", f"{type(exc).__name__}: {exc}") from exc
    if not spans:
        if skipped:
            raise DecodeError("missing_ids", f"every span lacked valid ids ({sum(skipped.values())} skipped)")
        raise DecodeError("no_spans", "the record holds no spans")
    return DecodedTraces(spans, enc, skipped, repaired)


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
    try:
        return _logs(value, enc, max_attribute_chars)
    except DecodeError as first:
        if not _may_be_protobuf(value, encoding, enc):
            raise
        try:
            return _logs(value, "otlp_proto", max_attribute_chars)
        except DecodeError:
            raise first from None


def _logs(value: bytes, enc: str, max_attribute_chars: int) -> DecodedLogs:
    skipped: Counter[str] = Counter()
    repaired: Counter[str] = Counter()
    try:
        if enc == "otlp_proto":
            events = _ProtoLogs(max_attribute_chars, skipped, repaired).decode(value)
        else:
            events = _JsonLogs(max_attribute_chars, skipped, repaired).decode(_load_json(value, repaired))
    except DecodeError:
        raise
    except Exception as exc:
        raise DecodeError("invalid_structure", f"{type(exc).__name__}: {exc}") from exc
    return DecodedLogs(events, enc, skipped, repaired)


def decode_logs(value: bytes, encoding: Encoding | str = "auto", **limits: int) -> list[LogEvent]:
    return decode_logs_batch(value, encoding, **limits).events


# --------------------------------------------------------------------------- protobuf
# upb refuses bad UTF-8 in string fields when it parses (the record is then invalid_protobuf), so a
# protobuf string can never hold a lone surrogate; it may hold NUL, which is valid UTF-8.


def _no_nul(text: str, repaired: Counter[str]) -> str:
    """``text`` without NUL (each becomes U+FFFD); the membership test is a C scan."""
    if "\x00" in text:
        repaired["text"] += 1
        return text.replace("\x00", REPLACEMENT)
    return text


def _proto_time(ns: int, repaired: Counter[str]) -> int:
    """A fixed64 time in ns; above int64 (after the year 2262) it is invalid: 0 (unknown)."""
    if ns > INT64_MAX:
        repaired["invalid_time"] += 1
        return 0
    return ns


def _proto_any(value: Any, limit: int, cut: list[bool], repaired: Counter[str]) -> Any:
    which = value.WhichOneof("value")
    if which == "string_value":
        s: str = value.string_value
        if len(s) > limit:
            cut.append(True)
            s = s[:limit]
        return _no_nul(s, repaired) if "\x00" in s else s
    if which == "int_value":
        return value.int_value
    if which == "bool_value":
        return value.bool_value
    if which == "double_value":
        d: float = value.double_value
        if math.isfinite(d):
            return d
        repaired["non_finite"] += 1
        return finite_or_name(d)
    if which == "array_value":  # nesting is bounded by upb's recursion limit (100 messages)
        return [_proto_any(v, limit, cut, repaired) for v in value.array_value.values]
    if which == "kvlist_value":
        return {
            _no_nul(kv.key, repaired): _proto_any(kv.value, limit, cut, repaired) for kv in value.kvlist_value.values
        }
    if which == "bytes_value":
        return bytes(value.bytes_value[:limit])
    return None


def _proto_attributes(kvs: Any, limit: int, repaired: Counter[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    truncated: list[str] = []
    for kv in kvs:
        key: str = kv.key
        if "\x00" in key:
            key = _no_nul(key, repaired)
        value = kv.value
        which = value.WhichOneof("value")
        if which == "string_value":  # most attributes, inlined: _proto_any's first case
            text: str = value.string_value
            if len(text) > limit:
                truncated.append(key)
                text = text[:limit]
            out[key] = _no_nul(text, repaired) if "\x00" in text else text
        elif which == "int_value":
            out[key] = value.int_value
        else:
            cut: list[bool] = []
            out[key] = _proto_any(value, limit, cut, repaired)
            if cut:
                truncated.append(key)
    if truncated:
        out[TRUNCATED_KEY] = truncated
    return out


def _span_times(start: int, end: int, repaired: Counter[str]) -> tuple[int, int]:
    """Start and end in ns, each within [0, INT64_MAX]: an invalid one (given as -1 by the callers)
    takes the other's value (zero duration), or 0 when both are invalid."""
    start_ok = 0 <= start <= INT64_MAX
    end_ok = 0 <= end <= INT64_MAX
    if start_ok and end_ok:
        return start, end
    repaired["invalid_time"] += (not start_ok) + (not end_ok)
    if start_ok:
        return start, start
    if end_ok:
        return end, end
    return 0, 0


def _parse_proto_traces(value: bytes) -> ExportTraceServiceRequest:
    request = ExportTraceServiceRequest()
    try:
        request.ParseFromString(value)
    except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
        raise DecodeError("invalid_protobuf", str(exc) or "not an ExportTraceServiceRequest") from exc
    return request


class _ProtoTraces:
    def __init__(self, limit: int, skipped: Counter[str], repaired: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped
        self.repaired = repaired

    def decode(self, value: bytes, only: bytes | None = None) -> list[SpanRecord]:
        """The record's spans; with ``only`` (a raw 16-byte trace id), the spans of that trace alone (the other
        spans, their resources and scopes are not converted)."""
        request = _parse_proto_traces(value)
        limit = self.limit
        repaired = self.repaired
        out: list[SpanRecord] = []
        for rs in request.resource_spans:
            resource: dict[str, Any] | None = None
            for ss in rs.scope_spans:
                scope_name: str | None = None
                scope_version = ""
                for span in ss.spans:
                    trace_id = span.trace_id
                    if only is not None and trace_id != only:
                        continue
                    span_id = span.span_id
                    if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id):
                        self.skipped["missing_ids"] += 1
                        continue
                    if resource is None:
                        resource = _proto_attributes(rs.resource.attributes, limit, repaired)
                    if scope_name is None:
                        scope_name = _no_nul(ss.scope.name, repaired)
                        scope_version = _no_nul(ss.scope.version, repaired)
                    parent = span.parent_span_id
                    events = tuple(
                        SpanEvent(
                            _no_nul(ev.name, repaired),
                            _proto_time(ev.time_unix_nano, repaired),
                            _proto_attributes(ev.attributes, limit, repaired),
                        )
                        for ev in span.events
                    )
                    start = span.start_time_unix_nano
                    end = span.end_time_unix_nano
                    if start > INT64_MAX or end > INT64_MAX:
                        start, end = _span_times(
                            -1 if start > INT64_MAX else start, -1 if end > INT64_MAX else end, repaired
                        )
                    out.append(
                        SpanRecord(
                            trace_id=trace_id.hex(),
                            span_id=span_id.hex(),
                            parent_span_id=parent.hex() if len(parent) == 8 and any(parent) else None,
                            name=_no_nul(span.name, repaired),
                            kind=span.kind,
                            start_ns=start,
                            end_ns=end,
                            attributes=_proto_attributes(span.attributes, limit, repaired),
                            events=events,
                            status_code=span.status.code,
                            status_message=_no_nul(span.status.message, repaired),
                            resource=resource,
                            scope_name=scope_name,
                            scope_version=scope_version,
                        )
                    )
        return out


@dataclass(slots=True)
class TraceEntry:
    """What the index of one record knows of one of its traces: how many spans, whether one is a root (no
    parent), whether one has status ERROR."""

    spans: int = 0
    root: bool = False
    errored: bool = False


@dataclass(frozen=True, slots=True)
class IndexedTraces:
    """One protobuf traces record, indexed but not decoded: its traces (by lower-case hex id, in first-seen
    order) and the record itself (:class:`DeferredProtoTraces`) to decode a trace's spans when it closes."""

    traces: dict[str, TraceEntry]
    record: DeferredProtoTraces
    skipped: Counter[str] = field(default_factory=Counter)

    @property
    def spans(self) -> int:
        return sum(entry.spans for entry in self.traces.values())


class DeferredProtoTraces:
    """A protobuf traces record kept as its bytes: :meth:`spans_of` decodes one trace's spans on demand.

    The index (:func:`index_traces`) already refused every record the full decode refuses (the same
    :class:`DecodeError` reasons), and the rest of the protobuf decode repairs instead of failing, so
    :meth:`spans_of` on a trace of the index does not raise. ``repaired`` accumulates the repairs of every
    decode (module docstring)."""

    __slots__ = ("limit", "repaired", "value")

    def __init__(self, value: bytes, max_attribute_chars: int) -> None:
        self.value = value
        self.limit = max_attribute_chars
        self.repaired: Counter[str] = Counter()

    def spans_of(self, trace_id: str) -> list[SpanRecord]:
        """The spans of ``trace_id`` (lower-case hex) in this record, decoded now (spans without valid ids
        are left out, as in :func:`decode_traces_batch`)."""
        return _ProtoTraces(self.limit, Counter(), self.repaired).decode(self.value, bytes.fromhex(trace_id))


def index_traces(
    value: bytes,
    *,
    max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
    max_attribute_chars: int = DEFAULT_MAX_ATTRIBUTE_CHARS,
) -> IndexedTraces:
    """Index one protobuf traces record without converting its spans (the lazy path of the decode step).

    The record is parsed (upb, in C) and only the ids, the parent id and the status code of each span are
    read. Raises :class:`DecodeError` exactly where :func:`decode_traces_batch` would for ``otlp_proto``
    (``empty``, ``too_large``, ``invalid_protobuf``, ``missing_ids``, ``no_spans``), so a record the index
    takes is one the full decode takes."""
    _check_size(value, max_record_bytes)
    request = _parse_proto_traces(value)
    traces: dict[str, TraceEntry] = {}
    by_raw: dict[bytes, TraceEntry] = {}
    skipped: Counter[str] = Counter()
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                trace_id = span.trace_id
                entry = by_raw.get(trace_id)
                if entry is None:
                    span_id = span.span_id
                    if len(trace_id) != 16 or len(span_id) != 8 or not any(trace_id) or not any(span_id):
                        skipped["missing_ids"] += 1
                        continue
                    entry = by_raw[trace_id] = traces[trace_id.hex()] = TraceEntry()
                else:
                    span_id = span.span_id
                    if len(span_id) != 8 or not any(span_id):
                        skipped["missing_ids"] += 1
                        continue
                entry.spans += 1
                if not entry.root:
                    parent = span.parent_span_id
                    entry.root = len(parent) != 8 or not any(parent)
                if span.status.code == STATUS_ERROR:
                    entry.errored = True
    if not traces:
        if skipped:
            raise DecodeError("missing_ids", f"every span lacked valid ids ({sum(skipped.values())} skipped)")
        raise DecodeError("no_spans", "the record holds no spans")
    return IndexedTraces(traces, DeferredProtoTraces(value, max_attribute_chars), skipped)


class _ProtoLogs:
    def __init__(self, limit: int, skipped: Counter[str], repaired: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped
        self.repaired = repaired

    def decode(self, value: bytes) -> list[LogEvent]:
        request = ExportLogsServiceRequest()
        try:
            request.ParseFromString(value)
        except (ProtobufDecodeError, RuntimeError, ValueError) as exc:
            raise DecodeError("invalid_protobuf", str(exc) or "not an ExportLogsServiceRequest") from exc
        out: list[LogEvent] = []
        limit = self.limit
        repaired = self.repaired
        for rl in request.resource_logs:
            for sl in rl.scope_logs:
                for rec in sl.log_records:
                    if len(rec.trace_id) != 16 or len(rec.span_id) != 8:
                        self.skipped["no_span"] += 1
                        continue
                    attributes = _proto_attributes(rec.attributes, limit, repaired)
                    name = getattr(rec, "event_name", "") or str(attributes.get("event.name", ""))
                    cut: list[bool] = []
                    body = _proto_any(rec.body, limit, cut, repaired) if rec.HasField("body") else None
                    time_ns = _proto_time(rec.time_unix_nano, repaired) or _proto_time(
                        rec.observed_time_unix_nano, repaired
                    )
                    out.append(
                        LogEvent(
                            trace_id=rec.trace_id.hex(),
                            span_id=rec.span_id.hex(),
                            name=_no_nul(name, repaired),
                            time_ns=time_ns,
                            attributes=attributes,
                            body=body,
                        )
                    )
        return out


# --------------------------------------------------------------------------- OTLP/JSON


def _load_json(value: bytes, repaired: Counter[str]) -> Any:
    """The parsed document; when its text holds an escape that can decode to a NUL or a lone
    surrogate, every string in it (keys too) is repaired (one walk, iterative)."""
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DecodeError("invalid_utf8", f"OTLP/JSON record is not UTF-8: {exc}") from exc
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DecodeError("invalid_json", str(exc)[:200]) from exc
    if json_record_may_hold_unstorable_text(value):
        doc = storable(doc, repaired)
    return doc


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
    raise DecodeError("invalid_structure", f"{what} must be an integer, got {_short(value)}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:79] + "…"


def _json_time(value: Any) -> int:
    """A time in ns from OTLP/JSON (a number or a decimal string); -1 when it is present but not an
    int64 count of ns from the epoch (negative, beyond int64, a float, text, a bool); 0 when absent."""
    if value is None or value == "":
        return 0
    if type(value) is int:
        return value if 0 <= value <= INT64_MAX else -1
    if isinstance(value, str) and len(value) <= 19 and value.isascii() and value.isdigit():
        ns = int(value)
        return ns if ns <= INT64_MAX else -1
    return -1


def _json_instant(value: Any, repaired: Counter[str]) -> int:
    """An event or log time: invalid → 0 (unknown)."""
    ns = _json_time(value)
    if ns < 0:
        repaired["invalid_time"] += 1
        return 0
    return ns


def _json_int_value(raw: Any, limit: int, cut: list[bool], repaired: Counter[str]) -> int | str:
    """An ``intValue``: an int within int64, else (valid OTLP cannot hold it) its decimal text."""
    if isinstance(raw, str) and len(raw) > 20:
        digits = raw.strip().removeprefix("-")
        if digits.isascii() and digits.isdigit():  # too long for int64 whatever it says: never int()-ed
            repaired["int_out_of_range"] += 1
            if len(raw) > limit:
                cut.append(True)
            return raw[:limit]
    number = _json_int(raw, "intValue")
    if INT64_MIN <= number <= INT64_MAX:
        return number
    repaired["int_out_of_range"] += 1
    text = raw.strip() if isinstance(raw, str) else str(number)
    if len(text) > limit:
        cut.append(True)
    return text[:limit]


def _json_double_value(raw: Any, repaired: Counter[str]) -> float | str:
    """A ``doubleValue``: a finite float, else ``"NaN"`` / ``"Infinity"`` / ``"-Infinity"``."""
    try:
        number = float(raw)  # also "NaN", "Infinity", "-Infinity" (proto3 JSON)
    except OverflowError:  # an integer literal too large for a float
        number = math.inf if raw > 0 else -math.inf
    if math.isfinite(number):
        return number
    repaired["non_finite"] += 1
    return finite_or_name(number)


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


def _json_any(value: Any, limit: int, cut: list[bool], repaired: Counter[str]) -> Any:
    """One AnyValue. Its strings were already repaired with the whole document (``_load_json``).
    Nesting is bounded by the JSON parser's own depth limit (about 1,000 levels, 4 per AnyValue)."""
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
            return _json_int_value(raw, limit, cut, repaired)
        if key in ("boolValue", "bool_value"):
            return bool(raw)
        if key in ("doubleValue", "double_value"):
            return _json_double_value(raw, repaired)
        if key in ("arrayValue", "array_value"):
            values = _as_list(_as_obj(raw, "arrayValue").get("values"), "arrayValue.values")
            return [_json_any(v, limit, cut, repaired) for v in values]
        if key in ("kvlistValue", "kvlist_value"):
            values = _as_list(_as_obj(raw, "kvlistValue").get("values"), "kvlistValue.values")
            return {str(kv.get("key", "")): _json_any(kv.get("value"), limit, cut, repaired) for kv in values}
        if key in ("bytesValue", "bytes_value"):
            try:
                return base64.b64decode(str(raw))[:limit]
            except (binascii.Error, ValueError):
                return None
    return None


def _json_attributes(kvs: Any, limit: int, repaired: Counter[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    truncated: list[str] = []
    for kv in _as_list(kvs, "attributes"):
        kv = _as_obj(kv, "attribute")
        key = kv.get("key")
        if not isinstance(key, str):
            continue
        cut: list[bool] = []
        out[key] = _json_any(kv.get("value"), limit, cut, repaired)
        if cut:
            truncated.append(key)
    if truncated:
        out[TRUNCATED_KEY] = truncated
    return out


class _JsonTraces:
    def __init__(self, limit: int, skipped: Counter[str], repaired: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped
        self.repaired = repaired

    def decode(self, doc: Any) -> list[SpanRecord]:
        root = _as_obj(doc, "the record")
        limit = self.limit
        repaired = self.repaired
        if "resourceLogs" in root or "resource_logs" in root:
            raise DecodeError("invalid_structure", "this is an OTLP logs record, not traces")
        out: list[SpanRecord] = []
        for rs in _as_list(_get(root, "resourceSpans", "resource_spans"), "resourceSpans"):
            rs = _as_obj(rs, "resourceSpans[]")
            resource = _json_attributes(_as_obj(rs.get("resource"), "resource").get("attributes"), limit, repaired)
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
                            _json_instant(_get(ev, "timeUnixNano", "time_unix_nano"), repaired),
                            _json_attributes(ev.get("attributes"), limit, repaired),
                        )
                        for ev in _as_list(span.get("events"), "events")
                    )
                    start, end = _span_times(
                        _json_time(_get(span, "startTimeUnixNano", "start_time_unix_nano")),
                        _json_time(_get(span, "endTimeUnixNano", "end_time_unix_nano")),
                        repaired,
                    )
                    out.append(
                        SpanRecord(
                            trace_id=trace_id,
                            span_id=span_id,
                            parent_span_id=_hex_id(_get(span, "parentSpanId", "parent_span_id"), 8),
                            name=str(span.get("name", "")),
                            kind=_json_int(span.get("kind"), "kind"),
                            start_ns=start,
                            end_ns=end,
                            attributes=_json_attributes(span.get("attributes"), limit, repaired),
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
    def __init__(self, limit: int, skipped: Counter[str], repaired: Counter[str]) -> None:
        self.limit = limit
        self.skipped = skipped
        self.repaired = repaired

    def decode(self, doc: Any) -> list[LogEvent]:
        root = _as_obj(doc, "the record")
        limit = self.limit
        repaired = self.repaired
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
                    attributes = _json_attributes(rec.get("attributes"), limit, repaired)
                    name = _get(rec, "eventName", "event_name") or attributes.get("event.name") or ""
                    time_ns = _json_instant(_get(rec, "timeUnixNano", "time_unix_nano"), repaired)
                    if not time_ns:
                        time_ns = _json_instant(_get(rec, "observedTimeUnixNano", "observed_time_unix_nano"), repaired)
                    out.append(
                        LogEvent(
                            trace_id=trace_id,
                            span_id=span_id,
                            name=str(name),
                            time_ns=time_ns,
                            attributes=attributes,
                            body=_json_any(rec.get("body"), limit, [], repaired),
                        )
                    )
        return out
