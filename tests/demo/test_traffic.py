"""The demo's simulated agents: real SDK spans in five conventions that rebuild into the planned runs."""

from __future__ import annotations

import random
from collections import Counter

from monitor.demo.agents import BEHAVIOURS, CONVENTIONS, plan_run
from monitor.demo.traffic import TrafficGenerator
from monitor.ingest.decode import DecodeError, decode_traces
from monitor.trajectory.build import build_runs
from monitor.trajectory.model import ABSENT


def _decode(records: list) -> tuple[list, int]:  # type: ignore[type-arg]
    spans, bad = [], 0
    for r in records:
        try:
            spans.extend(decode_traces(r.value))
        except DecodeError:
            bad += 1
    return spans, bad


def test_generator_is_deterministic_for_a_seed() -> None:
    a = [(r.run.behaviour if r.run else None) for r in TrafficGenerator(seed=5).batch(50)]
    b = [(r.run.behaviour if r.run else None) for r in TrafficGenerator(seed=5).batch(50)]
    assert a == b


def test_every_convention_rebuilds_the_planned_calls() -> None:
    rng = random.Random(9)
    for convention in CONVENTIONS:
        gen = TrafficGenerator(seed=1, malformed_ratio=0.0)
        gen.rng = rng
        for _ in range(10):
            planned = plan_run(rng, convention)
            from monitor.demo.agents import emit

            gen.exporter.clear()
            emit(gen.tracer, planned, start_ns=1_000_000_000)
            from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

            (run,) = build_runs(decode_traces(encode_spans(gen.exporter.get_finished_spans()).SerializeToString()))
            assert run.agent == planned.agent, convention
            assert [c.name for c in run.calls] == [c.name for s in planned.steps for c in s], convention
            if convention == "genai_nocontent":
                assert all(c.args is ABSENT for c in run.calls)
            else:
                assert [c.args for c in run.calls] == [c.args for s in planned.steps for c in s], convention
                assert run.user_text == planned.user_text and run.final_response == planned.answer, convention
            assert [c.error is not None for c in run.calls] == [c.error is not None for s in planned.steps for c in s]


def test_a_batch_mixes_behaviours_encodings_and_malformed_records() -> None:
    records = TrafficGenerator(seed=2, malformed_ratio=0.05).batch(300)
    spans, bad = _decode(records)
    assert bad == sum(1 for r in records if r.run is None) > 0
    assert len(build_runs(spans)) == 300
    behaviours = Counter(r.run.behaviour for r in records if r.run)
    assert set(behaviours) == set(BEHAVIOURS)
    assert any(r.value.lstrip().startswith(b"{") for r in records if r.run)
    assert all(r.key is not None and len(r.key) == 32 for r in records if r.run)
