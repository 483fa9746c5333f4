"""Span records: the convention-agnostic form of one OTLP span, as decoded from a Kafka record.

Attribute values are plain Python values: ``str``, ``bool``, ``int``, ``float``, ``bytes``, ``list``
(OTLP ``arrayValue``) or ``dict`` (OTLP ``kvlistValue``). Ids are lower-case hex strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeAlias

AttrValue: TypeAlias = Any
Attributes: TypeAlias = Mapping[str, AttrValue]

SPAN_KIND_INTERNAL = 1
SPAN_KIND_CLIENT = 3
STATUS_UNSET = 0
STATUS_OK = 1
STATUS_ERROR = 2


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """A span event, or a GenAI log record joined to its span (then ``body`` holds the log body)."""

    name: str
    time_ns: int = 0
    attributes: Attributes = field(default_factory=dict)
    body: AttrValue = None
    from_log: bool = False


@dataclass(frozen=True, slots=True)
class SpanRecord:
    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    kind: int = 0
    start_ns: int = 0
    end_ns: int = 0
    attributes: Attributes = field(default_factory=dict)
    events: tuple[SpanEvent, ...] = ()
    status_code: int = STATUS_UNSET
    status_message: str = ""
    resource: Attributes = field(default_factory=dict)
    scope_name: str = ""
    scope_version: str = ""

    @property
    def is_error(self) -> bool:
        return self.status_code == STATUS_ERROR


@dataclass(frozen=True, slots=True)
class LogEvent:
    """An OTLP log record carrying a GenAI event (event mode), to be joined to its span."""

    trace_id: str
    span_id: str
    name: str
    time_ns: int
    attributes: Attributes
    body: AttrValue

    def as_span_event(self) -> SpanEvent:
        return SpanEvent(self.name, self.time_ns, self.attributes, self.body, from_log=True)


class DeferredSpans(Protocol):
    """A record kept undecoded while its traces are open (the lazy path): it decodes the spans of one trace
    when that trace closes. ``spans_of`` must not raise for a trace the record was indexed with."""

    def spans_of(self, trace_id: str) -> list[SpanRecord]: ...
