"""Capture spans of code run in-process with the real OTel SDK, and encode them as the Collector's Kafka exporter does.

    with capture() as cap:
        agent = Agent(..., instrument=InstrumentationSettings(tracer_provider=cap.provider))
        agent.run_sync("hi")
    request = cap.request()                       # ExportTraceServiceRequest, via the OTLP exporter's encode_spans
    records = to_records(request, "otlp_json", parts=3, rng=random.Random(1))   # Kafka record values, shuffled

Each capture has a fresh ``TracerProvider`` (``cap.provider``) for instrumentations that take a provider. Code that
reads the *global* provider (which OTel lets a process set only once) is captured too: the first capture installs
one global SDK provider whose processor forwards finished spans to the capture that is active, so every capture sees
only the spans that ended while it was open.

This module is an independent reference encoder for the tests; the product has its own.
"""

from __future__ import annotations

import base64
import itertools
import json
import random
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

from google.protobuf import json_format
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = [
    "GLOBAL_RESOURCE",
    "SpanCapture",
    "capture",
    "global_provider",
    "merge_requests",
    "split_request",
    "to_otlp_json",
    "to_records",
]

Encoding = Literal["otlp_proto", "otlp_json"]
OtlpRequest = ExportTraceServiceRequest | ExportLogsServiceRequest

GLOBAL_RESOURCE = {"service.name": "monitor-tests-global"}
_ID_KEYS = frozenset({"traceId", "spanId", "parentSpanId"})


# --------------------------------------------------------------------------- capture


class _Router(SpanProcessor):
    """Forwards spans ended on the global provider to the active capture's exporter."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.active: list[InMemorySpanExporter] = []

    def on_end(self, span: ReadableSpan) -> None:
        with self.lock:
            targets = list(self.active)
        for exporter in targets:
            exporter.export([span])

    def shutdown(self) -> None:
        pass

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True


_ROUTER = _Router()
_INSTALLED: TracerProvider | None = None
_INSTALL_LOCK = threading.Lock()


def global_provider() -> TracerProvider:
    """The process-wide SDK provider the router is attached to (installed on first use).

    When another SDK provider was already set globally, the router is added to it instead.
    """
    global _INSTALLED
    with _INSTALL_LOCK:
        if _INSTALLED is not None:
            return _INSTALLED
        current = trace.get_tracer_provider()
        if isinstance(current, TracerProvider):
            provider = current
        else:
            provider = TracerProvider(resource=Resource.create(GLOBAL_RESOURCE))
            trace.set_tracer_provider(provider)
            if trace.get_tracer_provider() is not provider:  # someone else won the race: use theirs
                other = trace.get_tracer_provider()
                if not isinstance(other, TracerProvider):
                    raise RuntimeError(f"global tracer provider is not an SDK provider: {other!r}")
                provider = other
        provider.add_span_processor(_ROUTER)
        _INSTALLED = provider
        return provider


class SpanCapture:
    """Spans that ended while the capture was open, from ``provider`` and from the global provider."""

    def __init__(self, resource: Mapping[str, Any] | None = None) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create(dict(resource or {"service.name": "monitor-tests"})))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def tracer(self, name: str = "monitor.tests", version: str | None = None) -> trace.Tracer:
        return self.provider.get_tracer(name, version)

    def spans(self) -> list[ReadableSpan]:
        """Finished spans in end order."""
        return list(self.exporter.get_finished_spans())

    def clear(self) -> None:
        self.exporter.clear()

    def request(self) -> ExportTraceServiceRequest:
        """The finished spans as the OTLP exporter encodes them (``encode_spans``)."""
        return encode_spans(self.spans())


@contextmanager
def capture(resource: Mapping[str, Any] | None = None) -> Iterator[SpanCapture]:
    """Open a capture. Spans of the global provider are routed to it while it is open."""
    global_provider()
    cap = SpanCapture(resource)
    with _ROUTER.lock:
        _ROUTER.active.append(cap.exporter)
    try:
        yield cap
    finally:
        with _ROUTER.lock:
            _ROUTER.active.remove(cap.exporter)
        cap.provider.force_flush()
        cap.provider.shutdown()


# --------------------------------------------------------------------------- splitting


def _layout(request: OtlpRequest) -> tuple[str, str, str]:
    if isinstance(request, ExportTraceServiceRequest):
        return "resource_spans", "scope_spans", "spans"
    if isinstance(request, ExportLogsServiceRequest):
        return "resource_logs", "scope_logs", "log_records"
    raise TypeError(f"not an OTLP export request: {type(request).__name__}")


def _items(request: OtlpRequest) -> list[tuple[int, int, int]]:
    res_f, scope_f, item_f = _layout(request)
    return [
        (r, s, i)
        for r, rs in enumerate(getattr(request, res_f))
        for s, ss in enumerate(getattr(rs, scope_f))
        for i in range(len(getattr(ss, item_f)))
    ]


def _assemble(request: OtlpRequest, chosen: Iterable[tuple[int, int, int]]) -> OtlpRequest:
    """A request with only the ``chosen`` items, each under a copy of its own resource and scope."""
    res_f, scope_f, item_f = _layout(request)
    wanted = set(chosen)
    out = type(request)()
    for r, rs in enumerate(getattr(request, res_f)):
        new_rs = None
        for s, ss in enumerate(getattr(rs, scope_f)):
            items = [item for i, item in enumerate(getattr(ss, item_f)) if (r, s, i) in wanted]
            if not items:
                continue
            if new_rs is None:
                new_rs = getattr(out, res_f).add()
                new_rs.resource.CopyFrom(rs.resource)
                new_rs.schema_url = rs.schema_url
            new_ss = getattr(new_rs, scope_f).add()
            new_ss.scope.CopyFrom(ss.scope)
            new_ss.schema_url = ss.schema_url
            getattr(new_ss, item_f).extend(items)
    return out


def split_request(request: OtlpRequest, parts: int, rng: random.Random) -> list[OtlpRequest]:
    """Distribute the spans (or log records) of ``request`` over ``parts`` requests at random.

    Every part is non-empty (fewer parts when there are fewer items); resource and scope (with their schema URLs)
    are kept on every part that holds one of their items. The parts come back in random order.
    """
    items = _items(request)
    if not items:
        return [request]
    parts = max(1, min(parts, len(items)))
    rng.shuffle(items)
    cuts = sorted(rng.sample(range(1, len(items)), parts - 1)) if parts > 1 else []
    bounds = [0, *cuts, len(items)]
    out = [_assemble(request, items[a:b]) for a, b in itertools.pairwise(bounds)]
    rng.shuffle(out)
    return out


def merge_requests(requests: Sequence[OtlpRequest]) -> OtlpRequest:
    """Concatenate requests of one type (resource/scope groups kept as they are)."""
    if not requests:
        raise ValueError("nothing to merge")
    res_f, _, _ = _layout(requests[0])
    out = type(requests[0])()
    for request in requests:
        getattr(out, res_f).extend(getattr(request, res_f))
    return out


# --------------------------------------------------------------------------- serialising


def _ids_to_hex(value: Any) -> Any:
    if isinstance(value, dict):
        out = {}
        for key, item in value.items():
            if key in _ID_KEYS and isinstance(item, str):
                out[key] = base64.b64decode(item).hex()
            else:
                out[key] = _ids_to_hex(item)
        return out
    if isinstance(value, list):
        return [_ids_to_hex(item) for item in value]
    return value


def to_otlp_json(request: OtlpRequest) -> dict[str, Any]:
    """OTLP/JSON as the Collector writes it: camelCase, hex ids, int64 as strings, enums as ints.

    ``bytesValue`` attribute values stay base64 (only trace/span ids are hex in OTLP/JSON).
    """
    as_dict = json_format.MessageToDict(request, use_integers_for_enums=True, preserving_proto_field_name=False)
    return _ids_to_hex(as_dict)


def serialize(request: OtlpRequest, encoding: Encoding) -> bytes:
    if encoding == "otlp_proto":
        return request.SerializeToString()
    if encoding == "otlp_json":
        return json.dumps(to_otlp_json(request), separators=(",", ":")).encode()
    raise ValueError(f"unknown encoding {encoding!r}")


def to_records(
    request: OtlpRequest, encoding: Encoding = "otlp_proto", parts: int = 1, rng: random.Random | None = None
) -> list[bytes]:
    """Kafka record values for ``request``: its spans split over ``parts`` requests, serialised, shuffled."""
    rng = rng or random.Random(0)
    return [serialize(part, encoding) for part in split_request(request, parts, rng)]
