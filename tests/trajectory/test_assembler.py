"""The assembler: closing rules, late spans, the committable low watermark, bounds."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from monitor.trajectory.assembler import Assembler, AssemblerLimits
from monitor.trajectory.build import build_runs
from monitor.trajectory.spans import LogEvent
from tests.spanutil import make_span

TP = ("otlp_spans", 0)
TP1 = ("otlp_spans", 1)
T1 = "11111111111111111111111111111111"
T2 = "22222222222222222222222222222222"


def _trace(trace_id: str, n_children: int = 2) -> list:
    root = make_span(
        "invoke_agent a", span_id="a" * 16, trace_id=trace_id, **{"gen_ai__operation__name": "invoke_agent"}
    )
    kids = [
        make_span(
            f"execute_tool t{i}",
            span_id=f"{i + 1:016x}",
            parent="a" * 16,
            trace_id=trace_id,
            start=1_000 + i,
            **{"gen_ai__operation__name": "execute_tool", "gen_ai__tool__name": f"t{i}"},
        )
        for i in range(n_children)
    ]
    return [*kids, root]


def test_trace_closes_root_idle_after_its_root_arrives() -> None:
    asm = Assembler(AssemblerLimits(root_idle_s=2, idle_s=30))
    spans = _trace(T1)
    asm.add_spans(spans[:-1], TP, 0, now=0)
    assert asm.poll(now=10) == []  # children only: waits for idle_s
    asm.add_spans(spans[-1:], TP, 1, now=10)
    assert asm.poll(now=11.9) == []
    (closed,) = asm.poll(now=12)
    assert closed.reason == "complete" and not closed.forced and len(closed.spans) == 3
    assert closed.first_offsets == {TP: 0}


def test_rootless_trace_closes_after_idle() -> None:
    asm = Assembler(AssemblerLimits(root_idle_s=1, idle_s=5))
    asm.add_spans(_trace(T1)[:-1], TP, 0, now=0)
    assert asm.poll(now=4.9) == []
    (closed,) = asm.poll(now=5)
    assert closed.reason == "idle"


def test_activity_postpones_closing() -> None:
    asm = Assembler(AssemblerLimits(root_idle_s=2))
    spans = _trace(T1, 3)
    asm.add_spans([spans[-1]], TP, 0, now=0)
    asm.add_spans([spans[0]], TP, 1, now=1.5)
    assert asm.poll(now=3) == []
    assert len(asm.poll(now=3.5)[0].spans) == 2


def test_max_age_and_max_spans_force_close() -> None:
    asm = Assembler(AssemblerLimits(root_idle_s=100, idle_s=100, max_age_s=10, max_spans=3))
    asm.add_spans(_trace(T1, 5)[:3], TP, 0, now=0)  # reaches max_spans at once
    asm.add_spans(_trace(T2, 1)[:1], TP, 1, now=0)
    first = asm.poll(now=1)
    assert [(c.trace_id, c.reason, c.forced) for c in first] == [(T1, "max_spans", True)]
    for t in range(2, 10):
        asm.add_spans([], TP, 1 + t, now=t)
        asm.add_spans(_trace(T2, 3)[1:2], TP, 1 + t, now=t)  # duplicates keep it active
    (aged,) = asm.poll(now=10)
    assert aged.reason == "max_age" and aged.trace_id == T2
    assert asm.stats.duplicate_spans == 7


def test_late_spans_of_a_closed_trace_are_counted_not_reemitted() -> None:
    asm = Assembler(AssemblerLimits(root_idle_s=0))
    spans = _trace(T1, 2)
    asm.add_spans(spans[1:], TP, 0, now=0)
    assert len(asm.poll(now=1)) == 1
    asm.add_spans(spans[:1], TP, 1, now=2)
    assert asm.poll(now=100) == []
    assert asm.stats.late_spans == 1 and asm.open_traces == 0


def test_low_watermark_holds_back_open_traces_per_partition() -> None:
    asm = Assembler(AssemblerLimits(root_idle_s=5, idle_s=5))
    asm.add_spans(_trace(T1)[:1], TP, 10, now=0)  # T1 open from offset 10
    asm.add_spans(_trace(T2), TP, 11, now=0)  # T2 complete in record 11
    asm.add_spans([], TP1, 40, now=0)
    assert asm.committable() == {TP: 10, TP1: 41}
    asm.add_spans(_trace(T1)[1:], TP, 12, now=3)
    asm.poll(now=5)  # T2 closes (root idle 5 s)
    assert asm.committable() == {TP: 10, TP1: 41}
    closed = asm.poll(now=8)
    assert [c.trace_id for c in closed] == [T1]
    assert asm.committable() == {TP: 13, TP1: 41}


def test_revocation_drops_open_traces_of_lost_partitions() -> None:
    asm = Assembler()
    asm.add_spans(_trace(T1)[:1], TP, 0, now=0)
    asm.add_spans(_trace(T2)[:1], TP1, 0, now=0)
    assert asm.revoke([TP]) == 1
    assert asm.open_traces == 1 and TP not in asm.committable()
    assert asm.stats.dropped_traces == 1


def test_revocation_forgets_the_closed_traces_of_lost_partitions_so_their_records_reassemble() -> None:
    """A closed trace the caller could not store before the revocation is re-read from the watermark: its spans
    are a trace to assemble again, not late spans of one already closed. Closed traces of kept partitions stay
    remembered."""
    asm = Assembler(AssemblerLimits(root_idle_s=0))
    asm.add_spans(_trace(T1), TP, 0, now=0)
    asm.add_spans(_trace(T2), TP1, 0, now=0)
    assert {c.trace_id for c in asm.poll(now=1)} == {T1, T2}
    assert asm.revoke([TP]) == 0
    asm.add_spans(_trace(T1), TP, 0, now=2)  # re-read after the partition came back
    asm.add_spans(_trace(T2)[:1], TP1, 1, now=2)  # a late span on the partition kept
    (again,) = asm.poll(now=3)
    assert again.trace_id == T1 and again.span_count == 3
    assert asm.stats.late_spans == 1


def test_trace_split_across_partitions_is_counted_once() -> None:
    asm = Assembler()
    spans = _trace(T1, 3)
    asm.add_spans(spans[:1], TP, 0, now=0)
    asm.add_spans(spans[1:2], TP1, 0, now=0)
    asm.add_spans(spans[2:3], TP1, 1, now=0)
    asm.add_logs([LogEvent(T1, "a" * 16, "gen_ai.user.message", 1, {}, {"content": "hi"})], ("otlp_logs", 0), 0, 0)
    assert asm.stats.split_traces == 1


def test_memory_bound_forces_out_the_oldest_traces() -> None:
    asm = Assembler(AssemblerLimits(max_open_spans=5, root_idle_s=100, idle_s=100))
    asm.add_spans(_trace(T1, 3)[:3], TP, 0, now=0)
    asm.add_spans(_trace(T2, 3)[:3], TP, 1, now=1)
    assert asm.open_spans <= 5
    (forced,) = asm.poll(now=1)
    assert forced.trace_id == T1 and forced.reason == "memory"


def test_a_trace_of_100k_spans_is_cut_at_max_spans_with_bounded_memory() -> None:
    asm = Assembler(AssemblerLimits(max_spans=1_000))
    root = make_span("invoke_agent a", span_id="f" * 16, trace_id=T1, **{"gen_ai__operation__name": "invoke_agent"})
    for chunk in range(100):
        spans = [
            make_span("execute_tool x", span_id=f"{chunk * 1000 + i + 1:016x}", parent="f" * 16, trace_id=T1)
            for i in range(1000)
        ]
        asm.add_spans(spans if chunk else [root, *spans[:-1]], TP, chunk, now=chunk * 0.01)
        assert asm.open_spans <= 1_000
    closed = asm.poll(now=1)
    assert [c.reason for c in closed] == ["max_spans"]
    assert asm.stats.late_spans == 99_000
    (run,) = build_runs(closed[0].spans, forced=closed[0].reason)
    assert run.forced == "max_spans" and len(run.calls) == 999


def test_drain_closes_everything_as_shutdown() -> None:
    asm = Assembler()
    asm.add_spans(_trace(T1)[:1], TP, 0, now=0)
    (closed,) = asm.drain(now=0)
    assert closed.reason == "shutdown" and closed.forced and asm.open_traces == 0


def test_logs_only_traces_produce_nothing() -> None:
    asm = Assembler(AssemblerLimits(idle_s=1))
    asm.add_logs([LogEvent(T1, "a" * 16, "gen_ai.choice", 1, {}, {})], ("otlp_logs", 0), 3, now=0)
    assert asm.poll(now=2) == [] and asm.stats.logs_only_traces == 1
    assert asm.committable() == {("otlp_logs", 0): 4}


def test_invalid_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="root_idle_s"):
        AssemblerLimits(root_idle_s=-1)
    with pytest.raises(ValueError, match="max_spans"):
        AssemblerLimits(max_spans=0)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n_records=st.integers(1, 8))
def test_any_permutation_and_split_of_records_rebuilds_the_same_runs(seed: int, n_records: int) -> None:
    rng = random.Random(seed)
    spans = _trace(T1, 4) + _trace(T2, 2)
    rng.shuffle(spans)
    records = [spans[i::n_records] for i in range(n_records)]
    asm = Assembler(AssemblerLimits(root_idle_s=1, idle_s=1))
    for offset, record in enumerate(records):
        asm.add_spans(record, TP, offset, now=offset * 0.1)
    closed = asm.poll(now=100)
    assert sorted(c.trace_id for c in closed) == [T1, T2]
    runs = [r for c in closed for r in build_runs(c.spans)]
    assert runs
    expected = build_runs(_trace(T1, 4) + _trace(T2, 2))
    assert sorted(runs, key=lambda r: r.trace_id) == sorted(expected, key=lambda r: r.trace_id)
    assert asm.committable() == {TP: n_records}
