"""Benchmark: spans/s through decode + normalize + assemble + rebuild, against the bare parse rate.

The record mix is every recorded framework fixture (ADK 1.x/2.x, strands, pydantic-ai, OpenAI
instrumentations, openai-agents, OpenLLMetry), copied under fresh trace ids, each trace split over
two records, half of the records OTLP protobuf and half OTLP/JSON, shuffled. The baseline is the
bare parse of the very same records in the same run (``ExportTraceServiceRequest.ParseFromString``
for protobuf, ``json.loads`` for JSON): the ratio is the figure, since the machine is shared and
noisy. Also reported: resident memory per open span in the assembler (tracemalloc).

    .venv/bin/python bench/decode_rebuild.py [--traces 3000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
import tracemalloc
from pathlib import Path

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.traffic import alternate, fixture_traces
from monitor.ingest.decode import decode_traces
from monitor.trajectory.assembler import Assembler, AssemblerLimits
from monitor.trajectory.build import build_runs

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "frameworks"


def make_records(n_traces: int, seed: int = 7) -> tuple[list[tuple[str, bytes]], int]:
    """``(encoding, value)`` records of ``n_traces`` fresh traces, half of them OTLP/JSON, shuffled."""
    rng = random.Random(seed)
    records: list[tuple[str, bytes]] = []
    spans = 0
    for _, n, parts in fixture_traces(n_traces, rng, alternate):
        records.extend(parts)
        spans += n
    rng.shuffle(records)
    return records, spans


def bare_parse(records: list[tuple[str, bytes]]) -> float:
    start = time.perf_counter()
    for enc, value in records:
        if enc == "otlp_proto":
            ExportTraceServiceRequest().ParseFromString(value)
        else:
            json.loads(value)
    return time.perf_counter() - start


def pipeline(records: list[tuple[str, bytes]]) -> tuple[float, int]:
    asm = Assembler(AssemblerLimits(root_idle_s=0.0, idle_s=0.0))
    runs = 0
    start = time.perf_counter()
    for offset, (_, value) in enumerate(records):
        asm.add_spans(decode_traces(value), ("otlp_spans", 0), offset, now=0.0)
    for closed in asm.poll(now=1.0):
        runs += len(build_runs(closed.spans, closed.logs))
    return time.perf_counter() - start, runs


def memory_per_open_span(records: list[tuple[str, bytes]]) -> tuple[float, int]:
    gc.collect()
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    asm = Assembler(AssemblerLimits(root_idle_s=1e9, idle_s=1e9, max_age_s=1e9))
    for offset, (_, value) in enumerate(records):
        asm.add_spans(decode_traces(value), ("otlp_spans", 0), offset, now=0.0)
    gc.collect()
    used = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    return used / max(asm.open_spans, 1), asm.open_spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=3000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    records, n_spans = make_records(args.traces)
    size = sum(len(v) for _, v in records)
    print(
        f"records: {len(records)} ({size / 1e6:.1f} MB), spans: {n_spans}, "
        f"traces: {args.traces}, cpus: {os.cpu_count()}"
    )
    bare, full = [], []
    runs = 0
    for _ in range(args.repeat):
        bare.append(bare_parse(records))
        elapsed, runs = pipeline(records)
        full.append(elapsed)
    bare_rate = n_spans / statistics.median(bare)
    full_rate = n_spans / statistics.median(full)
    print(f"bare parse (protobuf / json.loads):          {bare_rate:12,.0f} spans/s")
    print(f"decode + normalize + assemble + rebuild:     {full_rate:12,.0f} spans/s  ({runs} runs)")
    print(f"ratio pipeline / bare parse:                 {full_rate / bare_rate:12.3f}")
    per_span, open_spans = memory_per_open_span(records[: min(len(records), 4000)])
    print(f"memory per open span (assembler, {open_spans} spans): {per_span:8,.0f} bytes")


if __name__ == "__main__":
    main()
