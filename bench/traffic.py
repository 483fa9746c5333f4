"""The benchmarks' traffic: every recorded framework fixture, copied under fresh trace ids.

Each fixture (``tests/fixtures/frameworks/*/*.traces.pb``) is one agent trace; :func:`fixture_traces` yields ``n``
copies in turn, each under a fresh random trace id, split over two records as the Collector would export a trace
that ended in two batches, each part encoded as ``encoding(i, j)`` says (trace ``i``, part ``j``).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.ingest.encode import encode, split_spans

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "frameworks"


def load_templates() -> list[ExportTraceServiceRequest]:
    """Every recorded fixture trace, in path order."""
    out = []
    for path in sorted(FIXTURES.glob("*/*.traces.pb")):
        req = ExportTraceServiceRequest()
        req.ParseFromString(path.read_bytes())
        out.append(req)
    return out


def alternate(i: int, j: int) -> str:
    """Half the records OTLP/JSON, half protobuf (the parts of one trace differ)."""
    return "otlp_json" if (i + j) % 2 else "otlp_proto"


def protobuf(i: int, j: int) -> str:
    """Every record OTLP protobuf (the Collector's Kafka exporter's default)."""
    return "otlp_proto"


def fixture_traces(
    n_traces: int, rng: random.Random, encoding: Callable[[int, int], str] = alternate, parts: int = 2
) -> Iterator[tuple[bytes, int, list[tuple[str, bytes]]]]:
    """For each of ``n_traces`` traces: its id, its span count and its records as ``(encoding, value)``."""
    templates = load_templates()
    for i in range(n_traces):
        req = ExportTraceServiceRequest()
        req.CopyFrom(templates[i % len(templates)])
        trace_id = rng.randbytes(16)
        spans = 0
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.trace_id = trace_id
                    spans += 1
        records = []
        for j, part in enumerate(split_spans(req, parts)):
            enc = encoding(i, j)
            records.append((enc, encode(part, enc)))
        yield trace_id, spans, records
