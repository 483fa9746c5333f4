"""Each step of the pipeline alone, on the real parts (SQLite store, Prometheus metrics, the real decoder, assembler,
rebuild, sampler and scoring stage), ended by a collecting step; then the chain as :func:`monitor.app.build_loop`
builds it."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from prometheus_client import generate_latest

from monitor.ingest.memory import MemoryBroker, MemoryRecord
from monitor.ingest.replay import ReplayGuard
from monitor.rules.ruleset import RuleSet, ScorerSpec
from monitor.sampling.sampler import Sampler
from monitor.scoring.result import ScoreResult
from monitor.scoring.stage import Backpressure, ScoringStage
from monitor.steps.assemble import AssembleStep
from monitor.steps.commit import CommitStep
from monitor.steps.contract import Message, MessageRejected
from monitor.steps.decode import DecodeStep
from monitor.steps.export import ExportStep
from monitor.steps.observe import ObserveStep
from monitor.steps.rebuild import RebuildStep
from monitor.steps.sample import SampleStep
from monitor.steps.score import ScoreStep
from monitor.steps.store import StoreStep
from monitor.steps.work import Decoded, TraceWork
from monitor.store import open_store
from monitor.testing import ManualClock
from monitor.trajectory.assembler import AssemblerLimits
from monitor.trajectory.model import Run
from tests.spanutil import Recorder, span
from tests.steps.conftest import TOPIC, Collect, Parts, make_settings, memory_chain
from tests.support.daemon import agent_traffic

Work = TraceWork | None
TP = (TOPIC, 0)


def metric(parts: Parts, line_start: str) -> float:
    for line in generate_latest(parts.metrics.registry).decode().splitlines():
        if line.startswith(line_start):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def records(n_traces: int, *, parts_per_trace: int = 2, seed: int = 5) -> list[MemoryRecord]:
    traffic = agent_traffic(n_traces, seed=seed, parts=parts_per_trace, json_share=0.0)
    return [MemoryRecord(TOPIC, 0, i, key, value) for i, (key, value) in enumerate(traffic.records)]


def decode_step(parts: Parts, end: Any) -> DecodeStep:
    return DecodeStep(
        end, parts.settings, dlq=parts.dlq, guard=ReplayGuard(parts.store), metrics=parts.metrics, stats=parts.stats
    )


def assemble_step(parts: Parts, end: Any, **limits: Any) -> AssembleStep:
    return AssembleStep(
        end,
        AssemblerLimits(root_idle_s=0.0, idle_s=0.5, **limits),
        clock=parts.clock,
        inflight=parts.inflight,
        metrics=parts.metrics,
        stats=parts.stats,
        close_batch=2000,
        work_budget_s=10.0,
        max_held=5000,
    )


def closed_traces(parts: Parts, n: int) -> list[TraceWork]:
    """``n`` closed traces of the agent traffic, as the assemble step hands them on."""
    end: Collect[Work] = Collect()
    assemble = assemble_step(parts, end)
    decode = decode_step(parts, assemble)
    for rec in records(n):
        decode.submit(Message(rec))
    decode.poll()
    return [w for w in end.payloads if w is not None]


def rebuilt(parts: Parts, n: int) -> list[TraceWork]:
    """``n`` closed traces with their runs, as the rebuild step hands them on."""
    works = closed_traces(parts, n)
    rebuild = RebuildStep(Collect(), parts.settings, guard=ReplayGuard(parts.store))
    for work in works:
        rebuild.submit(Message(work))
    return works


# ---------------------------------------------------------------------------------------------------- contract


def test_a_step_keeps_what_the_next_refused_and_refuses_more_until_it_went_through(parts: Parts) -> None:
    end: Collect[Work] = Collect()
    observe = ObserveStep(end, metrics=parts.metrics, stats=parts.stats)
    end.refuse = "store"
    observe.submit(Message(None, {TP: 3}))  # taken, carried over
    with pytest.raises(MessageRejected) as rejected:
        observe.submit(Message(None, {TP: 4}))
    assert rejected.value.reason == "store"
    assert end.messages == [] and observe.pressure() == {"store"}
    observe.poll()  # still refused: still carried
    end.refuse = None
    observe.poll()
    assert [dict(m.committable) for m in end.messages] == [{TP: 3}]
    observe.submit(Message(None, {TP: 4}))
    assert [dict(m.committable) for m in end.messages] == [{TP: 3}, {TP: 4}]


def test_forget_drops_what_a_step_carries_for_a_revoked_partition(parts: Parts) -> None:
    [work] = closed_traces(parts, 1)
    end: Collect[Work] = Collect()
    observe = ObserveStep(end, metrics=parts.metrics, stats=parts.stats)
    end.refuse = "store"
    observe.submit(Message(work, {TP: 2}))
    assert observe.forget({(TOPIC, 1)}) == 0 and observe.carried is not None
    assert observe.forget({TP}) == 1 and observe.carried is None
    assert end.forgotten == [{(TOPIC, 1)}, {TP}]


# ---------------------------------------------------------------------------------------------------- decode


@pytest.mark.parametrize("lazy", [True, False])
def test_decode_hands_on_spans_and_dead_letters_a_bad_record_keeping_its_offset(parts: Parts, lazy: bool) -> None:
    """A protobuf record is indexed (lazy, the default) or decoded; a bad one is dead-lettered either way."""
    parts.settings = parts.settings.model_copy(
        update={"decode": parts.settings.decode.model_copy(update={"lazy": lazy})}
    )
    end: Collect[Decoded] = Collect()
    decode = decode_step(parts, end)
    good = records(1, parts_per_trace=1)[0]
    decode.submit(Message(good))
    decode.submit(Message(MemoryRecord(TOPIC, 0, 1, b"k", b"{not json")))
    decode.submit(Message(MemoryRecord(TOPIC, 0, 2, b"k", b"\x0a\x05garbage")))
    first, bad, bad_proto = end.payloads
    assert first.offset == 0 and first.nbytes == len(good.value or b"")
    if lazy:
        assert first.spans is None and first.indexed is not None and first.indexed.spans
        n = first.indexed.spans
    else:
        assert first.spans and first.indexed is None
        n = len(first.spans)
    for dead in (bad, bad_proto):
        assert dead.spans is None and dead.logs is None and dead.indexed is None
    assert (bad.offset, bad_proto.offset) == (1, 2)
    assert parts.stats.dead_letters == {"invalid_json": 1, "invalid_protobuf": 1}
    assert metric(parts, 'monitor_records_invalid_total{reason="invalid_json"}') == 1
    assert parts.stats.spans == n


# ---------------------------------------------------------------------------------------------------- assemble


def test_assemble_offsets_never_pass_a_trace_still_on_its_way(parts: Parts) -> None:
    """Two traces of two records each, interleaved (A B A B): each closed trace leaves with offsets below every
    trace after it; when only a dead letter moves the watermark, an offsets-only message carries it."""
    recs = records(2)  # A0 A1 B0 B1 as produced: interleave them
    a0, a1, b0, b1 = recs
    order = [a0, b0, a1, b1]
    end: Collect[Work] = Collect()
    assemble = assemble_step(parts, end)
    decode = decode_step(parts, assemble)
    for offset, rec in enumerate(order):
        decode.submit(Message(MemoryRecord(TOPIC, 0, offset, rec.key, rec.value)))
    decode.poll()
    works = [m for m in end.messages if m.payload is not None]
    assert len(works) == 2
    firsts = [w.payload.closed.first_offsets[TP] for w in works if w.payload is not None]
    assert sorted(firsts) == [0, 1]
    assert dict(works[0].committable)[TP] <= firsts[1]  # never past the trace still on its way
    assert dict(works[-1].committable) == {TP: 4}
    assert parts.inflight.traces == 2
    decode.submit(Message(MemoryRecord(TOPIC, 0, 4, b"x", b"\x00garbage")))
    decode.poll()
    assert end.messages[-1].payload is None and dict(end.messages[-1].committable) == {TP: 5}
    decode.poll()
    assert end.messages[-1].committable == {TP: 5} and len(end.messages) == 3  # no repeat while nothing moved


def test_assemble_reports_backlog_pressure_by_bytes_until_half_is_gone(parts: Parts) -> None:
    end: Collect[Work] = Collect()
    recs = records(6, parts_per_trace=1)
    size = max(len(r.value or b"") for r in recs)
    assemble = assemble_step(parts, end, max_open_bytes=size * 3)
    end.refuse = "store"
    for rec in recs:  # all close at once: six traces on their way, more bytes than the budget
        assemble.submit(Message(decoded(parts, rec)))
    assemble.poll()
    assert parts.inflight.traces == 6
    assert "backlog" in assemble.pressure() and "store" in assemble.pressure()
    end.refuse = None
    assemble.poll()
    for message in end.messages:  # the commit step's part: they are done
        if message.payload is not None:
            parts.inflight.done(message.payload.closed)
    assemble.poll()
    assert assemble.pressure() == frozenset()


def decoded(parts: Parts, rec: MemoryRecord) -> Decoded:
    """``rec`` through the decode step (indexed: protobuf records are lazy by default)."""
    end: Collect[Decoded] = Collect()
    decode_step(parts, end).submit(Message(rec))
    return end.payloads[0]


# ---------------------------------------------------------------------------------------------------- rebuild


def test_rebuild_builds_runs_and_refuses_a_trace_deeper_than_the_limit(parts: Parts, tmp_path: Path) -> None:
    [work] = closed_traces(parts, 1)
    end: Collect[Work] = Collect()
    RebuildStep(end, parts.settings, guard=ReplayGuard(parts.store)).submit(Message(work))
    assert work.runs and work.rejected is None
    rec = Recorder(service="deep")
    tracer = rec.tracer()
    with contextlib.ExitStack() as stack:
        for depth in range(4):
            attrs = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"level{depth}"}
            stack.enter_context(span(tracer, f"invoke_agent level{depth}", **attrs))
    end_asm: Collect[Work] = Collect()
    assemble = assemble_step(parts, end_asm)
    value = bytes(encode_spans(rec.spans()).SerializeToString())
    assemble.submit(Message(decoded(parts, MemoryRecord(TOPIC, 0, 0, b"d", value))))
    assemble.poll()
    [deep] = [w for w in end_asm.payloads if w is not None]
    strict = make_settings(tmp_path, rebuild={"max_agent_depth": 2})
    RebuildStep(end, strict, guard=ReplayGuard(parts.store)).submit(Message(deep))
    assert deep.rejected == "too_deep" and deep.runs == []
    assert len(end.messages) == 2  # both go on: their offsets move


def test_rebuild_and_observe_count_the_spans_of_a_framework_no_convention_reads_per_scope(parts: Parts) -> None:
    rec = Recorder(service="acme")
    tracer = rec.provider.get_tracer("acme.agents", "0.3")
    with span(tracer, "acme.run"), span(tracer, "acme.step"):
        pass  # no key of any convention, no generic evidence: no run at all
    end_asm: Collect[Work] = Collect()
    assemble = assemble_step(parts, end_asm)
    value = bytes(encode_spans(rec.spans()).SerializeToString())
    assemble.submit(Message(decoded(parts, MemoryRecord(TOPIC, 0, 0, b"a", value))))
    assemble.poll()
    [work] = [w for w in end_asm.payloads if w is not None]
    end: Collect[Work] = Collect()
    observe = ObserveStep(end, metrics=parts.metrics, stats=parts.stats)
    RebuildStep(observe, parts.settings, guard=ReplayGuard(parts.store)).submit(Message(work))
    assert work.runs == [] and work.rejected is None
    assert metric(parts, 'monitor_spans_unrecognized_total{scope="acme.agents"}') == 2
    [known] = rebuilt(parts, 1)  # the agent traffic speaks known conventions: nothing counted
    assert known.runs and not known.unrecognized


# ---------------------------------------------------------------------------------------------------- sample + score


def test_sample_decides_once_and_score_scores_only_what_was_sampled(tmp_path: Path, parts: Parts) -> None:
    settings = make_settings(tmp_path, sampling={"rate": 0.0, "always_if_errored": False})
    works = rebuilt(parts, 4)
    end: Collect[Work] = Collect()
    stage = ScoringStage(settings, None, Sampler(settings.sampling), lambda: datetime.now(UTC))
    chain = SampleStep(ScoreStep(end, stage, clock=parts.clock), Sampler(settings.sampling))
    for work in works:
        chain.submit(Message(work))
    assert all(w.runs and w.sampled == [False] * len(w.runs) and w.rows == [] for w in works)
    everything = make_settings(tmp_path)
    chain = SampleStep(
        ScoreStep(
            end,
            ScoringStage(everything, None, Sampler(everything.sampling), lambda: datetime.now(UTC)),
            clock=parts.clock,
        ),
        Sampler(everything.sampling),
    )
    again = rebuilt(parts, 1)[0]
    chain.submit(Message(again))
    assert again.sampled == [True] and again.rows and all(o == 0 for o in again.owners)


class FullJudgePool:
    """The judge seam refusing work (a full pool) until ``open``."""

    def __init__(self) -> None:
        self.open = False
        self.accepted: list[str] = []

    def submit(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool = False, expectation: object = None
    ) -> list[object]:
        if not self.open:
            raise Backpressure("judge pool full")
        self.accepted.append(run.run_id)
        return []


def test_score_refuses_while_the_judges_push_back_and_backs_off(parts: Parts) -> None:
    settings = parts.settings
    rules = RuleSet.from_mapping({"rules": [{"match": {}, "scorers": {"judge_tool_selection": {}}}]})
    pool = FullJudgePool()
    stage = ScoringStage(settings, rules, Sampler(settings.sampling), lambda: datetime.now(UTC), submitter=pool)
    end: Collect[Work] = Collect()
    score = ScoreStep(end, stage, clock=parts.clock)
    [work] = rebuilt(parts, 1)
    work.sampled = [True] * len(work.runs)
    with pytest.raises(MessageRejected) as rejected:
        score.submit(Message(work))
    assert rejected.value.reason == "scoring" and score.pressure() == {"scoring"}
    pool.open = True
    with pytest.raises(MessageRejected):  # within the backoff: refused without scoring again
        score.submit(Message(work))
    assert pool.accepted == []
    parts.clock.advance(0.2)
    score.submit(Message(work))
    assert pool.accepted and work.rows and score.pressure() == frozenset()


# ---------------------------------------------------------------------------------------------------- store


def store_step(parts: Parts, end: Any, store: Any = None) -> StoreStep:
    return StoreStep(
        end,
        parts.settings,
        store=store or parts.store,
        dlq=parts.dlq,
        guard=ReplayGuard(parts.store),
        availability=parts.availability,
        metrics=parts.metrics,
        stats=parts.stats,
        clock=parts.clock,
        wall=lambda: datetime.now(UTC).timestamp(),
        write_batch=3,
    )


def scored(parts: Parts, n: int) -> list[TraceWork]:
    works = rebuilt(parts, n)
    end: Collect[Work] = Collect()
    s = parts.settings
    chain = SampleStep(
        ScoreStep(end, ScoringStage(s, None, Sampler(s.sampling), lambda: datetime.now(UTC)), clock=parts.clock),
        Sampler(s.sampling),
    )
    for work in works:
        chain.submit(Message(work))
    return works


def test_store_writes_full_batches_at_once_and_the_rest_on_poll(parts: Parts) -> None:
    works = scored(parts, 4)
    end: Collect[Work] = Collect()
    step = store_step(parts, end)
    for work in works:
        step.submit(Message(work))
    assert len(end.messages) == 0 and len(step.written) == 3  # a batch of 3 written, handed on at the next poll
    step.poll()
    assert [m.payload for m in end.messages] == works
    assert all(w.new and all(w.new) for w in works)


def test_store_holds_its_batch_through_an_outage_and_refuses_more(tmp_path: Path, parts: Parts) -> None:
    """The store's directory is moved away (its file is gone: StoreUnavailable), then back."""
    data = tmp_path / "data"
    data.mkdir()
    settings = make_settings(tmp_path, store={"url": f"sqlite:///{data / 'r.db'}"})
    store = open_store(settings.store)
    try:
        works = scored(parts, 2)
        end: Collect[Work] = Collect()
        step = store_step(parts, end, store)
        shutil.move(data, tmp_path / "away")
        step.submit(Message(works[0]))
        step.poll()
        assert step.pressure() == {"store"} and step.held == 1 and end.messages == []
        assert metric(parts, 'monitor_store_writes_total{outcome="error"}') == 1
        with pytest.raises(MessageRejected):
            step.submit(Message(works[1]))
        shutil.move(tmp_path / "away", data)
        parts.clock.advance(0.2)  # past the backoff
        step.poll()
        assert step.pressure() == frozenset() and [m.payload for m in end.messages] == [works[0]]
    finally:
        store.close()


# ------------------------------------------------------------------------------------ observe, export, commit


class Sink:
    def __init__(self) -> None:
        self.results: list[ScoreResult] = []

    def emit(self, results: Sequence[ScoreResult]) -> None:
        self.results.extend(results)

    def shutdown(self, timeout_s: float) -> None:
        pass


def test_observe_and_export_count_and_send_what_the_store_took_as_new_once(parts: Parts) -> None:
    sink = Sink()
    end: Collect[Work] = Collect()
    tail = ObserveStep(ExportStep(end, [sink]), metrics=parts.metrics, stats=parts.stats)
    step = store_step(parts, tail)
    first = scored(parts, 2)
    for work in first:
        step.submit(Message(work))
    step.poll()
    n = sum(len(w.rows) for w in first)
    assert n and len(sink.results) == n and parts.stats.results_new == n
    # the same traces read again (a replay the marks did not catch): the store has their results
    again = [TraceWork(w.closed, runs=w.runs, sampled=w.sampled, rows=w.rows, owners=w.owners) for w in first]
    for work in again:
        step.submit(Message(work))
    step.poll()
    assert len(sink.results) == n and parts.stats.results_duplicate == n
    assert metric(parts, 'monitor_store_writes_total{outcome="duplicate"}') == n
    assert parts.stats.traces_scored == 4


def test_commit_takes_the_offsets_of_the_latest_message_and_forgets_revoked_partitions(parts: Parts) -> None:
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 2)
    source = broker.source_factory([TOPIC])(lambda tps: None, lambda tps: None)
    source.poll(0)
    commit = CommitStep(
        dlq=parts.dlq,
        store=parts.store,
        guard=ReplayGuard(parts.store),
        availability=parts.availability,
        inflight=parts.inflight,
        metrics=parts.metrics,
        stats=parts.stats,
        clock=parts.clock,
        wall=lambda: 0.0,
        max_pending=10,
        max_pending_bytes=1 << 20,
    )
    commit.submit(Message(None, {TP: 3, (TOPIC, 1): 7}))
    commit.submit(Message(None, {TP: 5}))
    assigned = {TP, (TOPIC, 1)}
    assert commit.committable(assigned) == {TP: 5, (TOPIC, 1): 7}
    assert commit.commit(source, assigned) and broker.committed["memory"] == {TP: 5, (TOPIC, 1): 7}
    commit.forget({(TOPIC, 1)})
    assert commit.committable(assigned) == {TP: 5}


# ---------------------------------------------------------------------------------------------------- the chain


def test_the_chain_commits_past_traces_sampled_out(tmp_path: Path) -> None:
    """Sampling at rate 0: no trace is rebuilt (each is counted as unsampled before its rebuild, its protobuf records
    never decoded), and the offsets still reach the end."""
    settings = make_settings(tmp_path, sampling={"rate": 0.0, "always_if_errored": False})
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 1)
    for rec in records(5):
        broker.produce(TOPIC, rec.value, key=rec.key)
    clock = ManualClock(1_000.0)
    loop, store = memory_chain(settings, broker, clock)
    try:
        for _ in range(5):
            loop.step()
            clock.advance(1.0)
        loop.commit()
        assert loop.stats.runs == 0 and loop.stats.results_new == 0 and loop.held == 0
        assert loop.stats.traces_scored == 5
        assert broker.committed["memory"] == {TP: 10}
        text = generate_latest(loop.metrics.registry).decode()  # type: ignore[attr-defined]
        assert "monitor_traces_unsampled_total 5.0" in text
        assert 'monitor_runs_sampled_total{decision="skipped"} 0.0' in text
        assert "monitor_record_to_result_seconds_count 5.0" in text
    finally:
        store.close()
