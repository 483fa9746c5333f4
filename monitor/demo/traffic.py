"""Traffic generator: simulated agents' spans as Kafka records, the way the OTel Collector writes them.

Records are one ``ExportTraceServiceRequest`` per trace (``partition_traces_by_id: true``), keyed by the
hex trace id; some traces are split over two records (as the Collector's batching does), a share is
OTLP/JSON instead of protobuf, and ``malformed_ratio`` of the records are garbage so the dead-letter
path has work to do.
"""

from __future__ import annotations

import random
import time
from collections.abc import Iterator
from dataclasses import dataclass

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from monitor.demo.agents import SimRun, emit, plan_run
from monitor.ingest.encode import encode, split_by_trace, split_spans


@dataclass(frozen=True, slots=True)
class Record:
    key: bytes | None
    value: bytes
    run: SimRun | None  # None for a malformed record


class TrafficGenerator:
    """Deterministic for a seed: the same runs, spans shapes and record layout every time."""

    def __init__(self, seed: int = 1, malformed_ratio: float = 0.02, json_ratio: float = 0.25) -> None:
        self.rng = random.Random(seed)
        self.malformed_ratio = malformed_ratio
        self.json_ratio = json_ratio
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(resource=Resource.create({"service.name": "demo-agents"}))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("demo.agents")

    def batch(self, n_runs: int) -> list[Record]:
        """``n_runs`` simulated runs as records (plus malformed ones), in production order."""
        self.exporter.clear()
        runs: list[SimRun] = []
        now = time.time_ns()
        for i in range(n_runs):
            run = plan_run(self.rng)
            emit(self.tracer, run, start_ns=now + i * 1_000_000)
            runs.append(run)
        request = encode_spans(self.exporter.get_finished_spans())
        records: list[Record] = []
        for (trace_id, part), run in zip(split_by_trace(request), runs, strict=True):
            encoding = "otlp_json" if self.rng.random() < self.json_ratio else "otlp_proto"
            pieces = split_spans(part, 2) if self.rng.random() < 0.3 else [part]
            for piece in pieces:
                records.append(Record(trace_id.encode(), encode(piece, encoding), run))
            if self.rng.random() < self.malformed_ratio:
                records.append(Record(None, self._garbage(), None))
        return records

    def _garbage(self) -> bytes:
        kind = self.rng.randrange(3)
        if kind == 0:
            return self.rng.randbytes(self.rng.randint(8, 200))
        if kind == 1:
            return b'{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": "truncated'
        return b"\xff\xfe not an OTLP record"

    def stream(self, batch_size: int = 50) -> Iterator[Record]:
        while True:
            yield from self.batch(batch_size)
