"""The run loop's bounds and backstops: bytes of open traces, work per iteration, a stop whatever the
backlog, traces the store rejects. The loop, assembler, store (SQLite), metrics and dead-letter producer
(on the real broker) are the real ones; spans come from the in-memory broker shipped with the package."""

from __future__ import annotations

import contextlib
import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from prometheus_client import generate_latest

from monitor.app import build_loop
from monitor.export.http import HealthState
from monitor.export.metrics import Metrics
from monitor.ingest.dlq import DeadLetterQueue
from monitor.ingest.loop import CLOSE_BATCH, RunLoop
from monitor.ingest.memory import MemoryBroker
from monitor.sampling.sampler import Sampler
from monitor.scoring.stage import ScoringStage
from monitor.settings import Settings
from monitor.store import open_store
from tests.spanutil import Recorder, span
from tests.steps.conftest import make_settings
from tests.support.daemon import agent_traffic
from tests.support.kafka import read_all

TOPIC = "bounds_spans"


def settings_for(tmp_path: Path, **sections: dict[str, object]) -> Settings:
    return make_settings(tmp_path, topic=TOPIC, **sections)  # type: ignore[arg-type]


def make_loop(settings: Settings, broker: MemoryBroker, clock=time.monotonic) -> RunLoop:  # type: ignore[no-untyped-def]
    sampler = Sampler(settings.sampling)
    stage = ScoringStage(settings, None, sampler, lambda: datetime.now(UTC))
    return build_loop(
        settings,
        broker.source_factory([TOPIC]),
        DeadLetterQueue(settings.kafka, settings.dead_letter),
        stage,
        open_store(settings.store),
        Metrics(settings.metrics),
        HealthState(),
        sampler=sampler,
        clock=clock,
    )


def rootless_record(i: int, payload_bytes: int = 0) -> tuple[bytes, bytes]:
    """One record holding one child span of its own trace (the root never comes: it closes on idle)."""
    rec = Recorder(service="bulk")
    tracer = rec.tracer()
    with span(tracer, "root"), span(tracer, "execute_tool t", **{"gen_ai.operation.name": "execute_tool"}) as s:
        if payload_bytes:
            s.set_attribute("gen_ai.tool.call.arguments", json.dumps({"blob": "x" * payload_bytes, "i": i}))
    child = [sp for sp in rec.spans() if sp.parent is not None]
    return format(child[0].context.trace_id, "032x").encode(), bytes(encode_spans(child).SerializeToString())


def test_open_traces_are_bounded_in_bytes_not_only_in_spans(tmp_path: Path) -> None:
    """300 open traces of one 64 KB span each (19 MB of records) against a 2 MiB byte budget and a span
    budget they never reach: the oldest are forced out (``memory``) and the open bytes stay in budget."""
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 1)
    for i in range(300):
        key, value = rootless_record(i, 64 * 1024)
        broker.produce(TOPIC, value, key=key)
    budget = 2 * 1024 * 1024
    settings = settings_for(tmp_path, assembler={"idle_s": 600.0, "max_open_bytes": budget})
    loop = make_loop(settings, broker)
    peak = 0
    for _ in range(20):
        loop.step()
        peak = max(peak, loop.assembler.open_bytes)
    assert 0 < peak <= budget
    assert loop.assembler.stats.closed.get("memory", 0) >= 300 - budget // (64 * 1024)
    assert loop.assembler.open_spans < 300
    text = generate_latest(loop.metrics.registry).decode()
    assert "monitor_open_trace_bytes" in text


def test_a_burst_of_traces_closing_at_once_keeps_iterations_short_and_a_stop_prompt(tmp_path: Path) -> None:
    """1. 12,000 rootless traces are read, then all reach their idle timeout in the same instant.
    2. One iteration closes at most CLOSE_BATCH of them and spends a bounded time storing.
    3. A stop requested in the middle of the backlog drains within its deadline, and the commit stays
       below every trace not stored (a second loop stores the rest, nothing twice)."""
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 1)
    n = 12_000
    template_key, template = rootless_record(0)
    for i in range(n):
        # a distinct trace id per record, same shape (the OTLP trace id bytes are replaced in place)
        trace_id = f"{i + 1:032x}"
        broker.produce(
            TOPIC,
            template.replace(bytes.fromhex(template_key.decode()), bytes.fromhex(trace_id)),
            key=trace_id.encode(),
        )
    settings = settings_for(tmp_path, assembler={"idle_s": 3600.0}, kafka={"max_poll_records": 2000})
    now = [1000.0]
    loop = make_loop(settings, broker, clock=lambda: now[0])
    while loop.stats.records < n:
        loop.step()
    assert loop.assembler.open_traces == n
    now[0] += 3601.0  # every trace is due at once
    started = time.monotonic()
    loop.step()
    first_step = time.monotonic() - started
    assert loop.assembler.open_traces == n - CLOSE_BATCH
    assert loop.stats.traces_scored < n
    loop.stop()
    started = time.monotonic()
    loop.drain(now[0])  # the deadline has passed already: no more storing, just the commit
    assert time.monotonic() - started < 5.0
    stored_first = loop.stats.traces_scored
    committed = broker.committed["memory"][(TOPIC, 0)]
    assert committed <= stored_first  # nothing past an unstored trace (one record per trace, in order)
    again = make_loop(settings, broker, clock=lambda: now[0])
    while loop.stats.records and again.stats.records < n - committed:
        again.step()
    now[0] += 3601.0
    for _ in range(40):
        again.step()
        if again.stats.traces_scored + again.stats.replayed_traces >= n - committed:
            break
    engine = sa.create_engine(settings.store.url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(DISTINCT trace_id) FROM runs")).scalar_one() == n
    engine.dispose()
    assert first_step < 30.0, f"one iteration took {first_step:.1f}s"


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_trace_the_store_rejects_is_bisected_out_and_dead_lettered(
    tmp_path: Path, kafka_bootstrap: str, backend: str, request: pytest.FixtureRequest
) -> None:
    """1. The store (SQLite and PostgreSQL) refuses one trace's run (a trigger raises for its trace id), as a
       store refuses a value it cannot hold.
    2. Its batch is bisected: every other trace of the batch is stored.
    Result: the refused trace goes to the dead-letter topic (reason ``unstorable``, its spans as JSON, its
    trace id in a header), it is counted, and the commit reaches the end."""
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 1)
    traffic = agent_traffic(12, seed=71, parts=1, json_share=0.0)
    for key, value in traffic.records:
        broker.produce(TOPIC, value, key=key)
    poison = traffic.trace_ids[5]
    topic = f"{TOPIC}-{backend}-{int(time.time() * 1000)}"
    # a database of its own: the session's postgres_url is shared by every test of the run
    url = (
        request.getfixturevalue("postgres_cluster").create_database()
        if backend == "postgresql"
        else f"sqlite:///{tmp_path / 'r.db'}"
    )
    settings = settings_for(
        tmp_path,
        kafka={"spans_topic": TOPIC, "bootstrap_servers": kafka_bootstrap, "dead_letter_suffix": f".{topic}.dlq"},
        dead_letter={"enabled": True},
        store={"url": url},
    )
    store = open_store(settings.store)
    with store.engine.begin() as conn:
        if backend == "sqlite":
            conn.execute(
                sa.text(
                    f"CREATE TRIGGER refuse BEFORE INSERT ON runs WHEN NEW.trace_id = '{poison}' "
                    "BEGIN SELECT RAISE(ABORT, 'refused by the test trigger'); END"
                )
            )
        else:
            conn.execute(
                sa.text(
                    "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                    f"IF NEW.trace_id = '{poison}' THEN RAISE EXCEPTION 'refused by the test trigger'; END IF; "
                    "RETURN NEW; END $$"
                )
            )
            conn.execute(sa.text("CREATE TRIGGER refuse BEFORE INSERT ON runs FOR EACH ROW EXECUTE FUNCTION refuse()"))
    store.close()
    loop = make_loop(settings, broker)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            loop.step()
            if broker.committed.get("memory", {}).get((TOPIC, 0)) == len(traffic.records):
                break
        assert broker.committed["memory"][(TOPIC, 0)] == len(traffic.records)
        assert loop.stats.rejected["unstorable"] == 1
        assert loop.stats.traces_scored == 12  # the refused one is handled (dead-lettered), not lost
    finally:
        with contextlib.suppress(Exception):
            loop.dlq.close()
    engine = sa.create_engine(settings.store.url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.connect() as conn:
        stored = {r[0] for r in conn.execute(sa.text("SELECT trace_id FROM runs"))}
    engine.dispose()
    assert stored == set(traffic.trace_ids) - {poison}
    dead = read_all(kafka_bootstrap, TOPIC + settings.kafka.dead_letter_suffix, expect=1)
    assert len(dead) == 1
    headers = dict(dead[0].headers)
    assert headers["monitor.dlq.reason"] == b"unstorable"
    assert headers["monitor.dlq.trace_id"] == poison.encode()
    assert b"refused by the test trigger" in headers["monitor.dlq.detail"]
    body = json.loads(dead[0].value)
    assert body["trace_id"] == poison and body["spans"]


def test_a_trace_nested_deeper_than_the_limit_is_a_counted_outcome_with_one_log_line(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """40 nested agents in one record (the limit is 32): the trace is refused as ``too_deep``, counted, logged
    in one line without a traceback, and the offsets move on; the next trace is stored as usual."""
    broker = MemoryBroker()
    broker.create_topic(TOPIC, 1)
    rec = Recorder(service="deep")
    tracer = rec.tracer()
    with contextlib.ExitStack() as stack:
        for depth in range(40):
            stack.enter_context(
                span(
                    tracer,
                    f"invoke_agent level{depth}",
                    **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": f"level{depth}"},
                )
            )
    deep = rec.spans()
    broker.produce(TOPIC, bytes(encode_spans(deep).SerializeToString()), key=b"deep")
    normal = agent_traffic(1, seed=72, parts=1, json_share=0.0)
    broker.produce(TOPIC, normal.records[0][1], key=normal.records[0][0])
    now = [1000.0]
    loop = make_loop(settings_for(tmp_path), broker, clock=lambda: now[0])
    with caplog.at_level("WARNING", logger="monitor.ingest.loop"):
        for _ in range(6):
            loop.step()
            now[0] += 1.0
    assert loop.stats.rejected == {"too_deep": 1}
    assert loop.stats.traces_scored == 2 and loop.stats.runs == 1
    assert broker.committed["memory"][(TOPIC, 0)] == 2
    lines = [r for r in caplog.records if "too_deep" in r.getMessage()]
    assert len(lines) == 1 and lines[0].exc_info is None and len(lines[0].getMessage()) < 400
    text = generate_latest(loop.metrics.registry).decode()
    assert 'monitor_traces_rejected_total{reason="too_deep"} 1.0' in text
