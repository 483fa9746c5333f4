"""Lazy traces and the sampling before the rebuild, on every recorded framework fixture.

* The index of a protobuf record (:func:`monitor.ingest.decode.index_traces`) knows the traces, span counts, roots
  and error statuses the full decode finds, refuses exactly the records the full decode refuses (same reason), and
  :meth:`DeferredProtoTraces.spans_of` gives each trace's spans as the full decode does.
* An assembler fed indexed records closes the same traces as one fed decoded spans, and their materialized spans
  rebuild the same runs, whatever the split and order of the records.
* The decision before the rebuild never leaves out a trace one of whose runs the run-level decision would sample
  (rates, per-agent rates, errored runs), on the fixtures' real runs.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from monitor.ingest.decode import DecodeError, decode_traces_batch, index_traces
from monitor.sampling.sampler import Sampler
from monitor.settings import SamplingSettings
from monitor.steps.decode import holds_error_marker
from monitor.trajectory.assembler import Assembler, AssemblerLimits, ClosedTrace
from monitor.trajectory.build import build_runs
from monitor.trajectory.errors import call_error
from tests.support.capture import to_records

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "frameworks"
TRACE_FILES = sorted(FIXTURES.glob("*/*.traces.pb"))
IDS = [f"{p.parent.name}/{p.name.removesuffix('.traces.pb')}" for p in TRACE_FILES]
OPEN = AssemblerLimits(root_idle_s=1e9, idle_s=1e9, max_age_s=1e9)


def _request(path: Path) -> ExportTraceServiceRequest:
    req = ExportTraceServiceRequest()
    req.ParseFromString(path.read_bytes())
    return req


def _records(path: Path, parts: int, seed: int) -> list[bytes]:
    return to_records(_request(path), "otlp_proto", parts, random.Random(seed))  # type: ignore[arg-type]


def _closed(values: list[bytes], *, lazy: bool) -> dict[str, ClosedTrace]:
    asm = Assembler(OPEN)
    for offset, value in enumerate(values):
        flagged = holds_error_marker(value)
        if lazy:
            indexed = index_traces(value)
            asm.add_deferred(
                indexed.record, indexed.traces, ("t", 0), offset, 0.0, len(value), timestamp_ms=offset, flagged=flagged
            )
        else:
            spans = decode_traces_batch(value, "otlp_proto").spans
            asm.add_spans(spans, ("t", 0), offset, 0.0, len(value), timestamp_ms=offset, flagged=flagged)
    return {c.trace_id: c for c in asm.drain(0.0)}


@pytest.mark.parametrize("path", TRACE_FILES, ids=IDS)
def test_the_index_knows_what_the_decode_finds(path: Path) -> None:
    for value in _records(path, 3, 7):
        spans = decode_traces_batch(value, "otlp_proto").spans
        indexed = index_traces(value)
        assert set(indexed.traces) == {s.trace_id for s in spans}
        for trace_id, entry in indexed.traces.items():
            own = [s for s in spans if s.trace_id == trace_id]
            assert entry.spans == len(own)
            assert entry.root == any(s.parent_span_id is None for s in own)
            assert entry.errored == any(s.is_error for s in own)
            assert indexed.record.spans_of(trace_id) == own


@pytest.mark.parametrize("path", TRACE_FILES, ids=IDS)
def test_lazy_and_decoded_assemblers_close_the_same_traces_and_rebuild_the_same_runs(path: Path) -> None:
    @settings(max_examples=4, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(parts=st.integers(1, 6), seed=st.integers(0, 2**32 - 1), data=st.data())
    def prop(parts: int, seed: int, data: st.DataObject) -> None:
        values = data.draw(st.permutations(_records(path, parts, seed)), label="record order")
        lazy, eager = _closed(values, lazy=True), _closed(values, lazy=False)
        assert lazy.keys() == eager.keys()
        for trace_id, closed in lazy.items():
            other = eager[trace_id]
            assert closed.spans == () and closed.deferred
            # bytes may differ: the decoded path does not charge a duplicated span id, the lazy one charges it
            assert (closed.flagged, closed.last_record_ms) == (other.flagged, other.last_record_ms)
            assert sorted(closed.materialize(), key=lambda s: s.span_id) == sorted(
                other.materialize(), key=lambda s: s.span_id
            )
            assert build_runs(closed.materialize()) == build_runs(other.materialize())

    prop()


def test_a_record_produced_twice_gives_each_span_once() -> None:
    values = _records(TRACE_FILES[0], 2, 1)
    lazy = _closed([*values, *values], lazy=True)
    eager = _closed(values, lazy=False)
    for trace_id, closed in lazy.items():
        assert sorted(s.span_id for s in closed.materialize()) == sorted(s.span_id for s in eager[trace_id].spans)


@given(st.binary(max_size=400))
@settings(max_examples=300, deadline=None)
def test_the_index_refuses_exactly_what_the_decode_refuses(value: bytes) -> None:
    try:
        decode_traces_batch(value, "otlp_proto")
        decoded_reason = None
    except DecodeError as exc:
        decoded_reason = exc.reason
    try:
        index_traces(value)
        indexed_reason = None
    except DecodeError as exc:
        indexed_reason = exc.reason
    assert indexed_reason == decoded_reason


def test_the_index_refuses_records_without_spans_or_ids() -> None:
    empty = ExportTraceServiceRequest()
    empty.resource_spans.add().scope_spans.add()
    with pytest.raises(DecodeError) as info:
        index_traces(empty.SerializeToString())
    assert info.value.reason == "no_spans"
    no_ids = ExportTraceServiceRequest()
    no_ids.resource_spans.add().scope_spans.add().spans.add(name="x")
    with pytest.raises(DecodeError) as info:
        index_traces(no_ids.SerializeToString())
    assert info.value.reason == "missing_ids"
    with pytest.raises(DecodeError) as info:
        index_traces(b"")
    assert info.value.reason == "empty"


def _fixture_traces() -> list[ClosedTrace]:
    out: list[ClosedTrace] = []
    for path in TRACE_FILES:
        out.extend(_closed(_records(path, 2, 3), lazy=True).values())
    return out


@pytest.mark.parametrize(
    "sampling",
    [
        {"rate": 0.0},
        {"rate": 0.3, "salt": "a"},
        {"rate": 0.0, "per_agent": {"weather_agent": 0.5, "support": 0.2}, "salt": "b"},
        {"rate": 0.1, "always_if_errored": False},
    ],
)
def test_the_decision_before_the_rebuild_never_leaves_out_a_run_the_run_decision_samples(
    sampling: dict[str, object],
) -> None:
    sampler = Sampler(SamplingSettings(**sampling))  # type: ignore[arg-type]
    left_out = errored_kept = 0
    for closed in _fixture_traces():
        runs = build_runs(closed.materialize())
        if not sampler.trace_needed(closed.trace_id, closed.flagged):
            left_out += 1
            assert not any(sampler.should_score(run).sampled for run in runs), closed.trace_id
        elif any(Sampler.errored(run) for run in runs):
            errored_kept += 1
    assert left_out  # the fixtures hold traces the decision leaves out
    if sampling.get("always_if_errored", True):
        assert errored_kept  # and errored runs it keeps at any rate


def test_every_errored_fixture_run_is_flagged_before_its_rebuild() -> None:
    """The markers and the statuses see every run :meth:`Sampler.errored` finds (and its tool errors)."""
    errored = 0
    for closed in _fixture_traces():
        for run in build_runs(closed.materialize()):
            if Sampler.errored(run):
                errored += 1
                assert closed.flagged, (closed.trace_id, [call_error(c) for r in run.walk() for c in r.calls])
    assert errored > 10


@pytest.mark.parametrize(
    ("sampling", "needed"),
    [
        ({"rate": 1.0}, False),  # every trace is rebuilt: the markers would change nothing
        ({"rate": 0.1}, True),
        ({"rate": 0.1, "always_if_errored": False}, False),
        ({"rate": 0.1, "always_attributes": {"k": "v"}}, False),  # attribute rules keep every trace
    ],
)
def test_the_decode_step_searches_for_error_markers_only_when_the_decision_reads_them(
    sampling: dict[str, object], needed: bool
) -> None:
    sampler = Sampler(SamplingSettings(**sampling))  # type: ignore[arg-type]
    assert sampler.needs_error_flags is needed
    if not needed:  # then no trace can be left out because of a missing flag
        assert sampler.every_trace or not sampler.settings.always_if_errored
