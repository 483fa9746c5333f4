"""Encode OTLP requests as the OpenTelemetry Collector's Kafka exporter writes them.

Used by the demo traffic generator, by ``make demo``'s sample records and by benchmarks; the tests
check it against an independent encoder. ``otlp_proto`` is the serialized protobuf message;
``otlp_json`` is OTLP/JSON: lowerCamelCase keys, hex trace and span ids, 64-bit integers as decimal
strings, enums as integers.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


def _hex_ids(node: Any) -> Any:
    if isinstance(node, dict):
        out = {}
        for key, value in node.items():
            if key in _ID_KEYS and isinstance(value, str):
                out[key] = base64.b64decode(value).hex()
            else:
                out[key] = _hex_ids(value)
        return out
    if isinstance(node, list):
        return [_hex_ids(v) for v in node]
    return node


def to_otlp_json(message: Message) -> bytes:
    """OTLP/JSON bytes of an ``Export{Trace,Logs}ServiceRequest`` (hex ids, as the Collector writes)."""
    doc = MessageToDict(message, use_integers_for_enums=True, preserving_proto_field_name=False)
    return json.dumps(_hex_ids(doc), separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def encode(message: Message, encoding: str) -> bytes:
    if encoding == "otlp_proto":
        return bytes(message.SerializeToString())
    if encoding == "otlp_json":
        return to_otlp_json(message)
    raise ValueError(f"unknown encoding {encoding!r}: use otlp_proto or otlp_json")


def split_by_trace(request: ExportTraceServiceRequest) -> Iterator[tuple[str, ExportTraceServiceRequest]]:
    """One request per trace id, keeping resources and scopes: ``partition_traces_by_id: true``.

    Yields ``(hex trace id, request)``; the hex id is the record key the Collector sets.
    """
    by_trace: dict[bytes, ExportTraceServiceRequest] = {}
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                out = by_trace.get(span.trace_id)
                if out is None:
                    out = by_trace[span.trace_id] = ExportTraceServiceRequest()
                target_rs = _last_or_new_resource(out, rs)
                target_ss = _last_or_new_scope(target_rs, ss)
                target_ss.spans.append(span)
    for trace_id, out in by_trace.items():
        yield trace_id.hex(), out


def _last_or_new_resource(out: ExportTraceServiceRequest, rs: Any) -> Any:
    if out.resource_spans and out.resource_spans[-1].resource == rs.resource:
        return out.resource_spans[-1]
    target = out.resource_spans.add()
    target.resource.CopyFrom(rs.resource)
    target.schema_url = rs.schema_url
    return target


def _last_or_new_scope(target_rs: Any, ss: Any) -> Any:
    if target_rs.scope_spans and target_rs.scope_spans[-1].scope == ss.scope:
        return target_rs.scope_spans[-1]
    target = target_rs.scope_spans.add()
    target.scope.CopyFrom(ss.scope)
    target.schema_url = ss.schema_url
    return target


def split_spans(request: ExportTraceServiceRequest, parts: int) -> list[ExportTraceServiceRequest]:
    """Deal a request's spans round-robin into ``parts`` requests (as batching splits a trace)."""
    if parts < 1:
        raise ValueError("parts must be >= 1")
    outs = [ExportTraceServiceRequest() for _ in range(parts)]
    n = 0
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                out = outs[n % parts]
                n += 1
                _last_or_new_scope(_last_or_new_resource(out, rs), ss).spans.append(span)
    return [o for o in outs if o.resource_spans]
