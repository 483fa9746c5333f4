"""A trace stored before a restart or a rebalance is never stored or counted again, under any identity.

The interleaving the field trial found, built record by record on one partition of the real broker:

    offset 0  B part 1: B's root span and its first model call
    offset 1  A part 1: A's child spans (A stays open: its root comes later)
    offset 2  B part 2: B's tool call and last model call  → B closes, is stored; A holds the commit at 1
    --- SIGTERM, kill -9 or a rebalance: the next reader starts at offset 1 and sees only B's tail ---
    offset 3  A part 2: A's root                           → A closes, is stored

Without replay marks the re-read tail of B is rebuilt as a rootless run under another run id and stored as
a third run. The kill -9 and rebalance cases also run with the confluent consumer client (``kafka.client``).
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import sqlalchemy as sa
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.trace import ReadableSpan

from tests.spanutil import Recorder, agent_run
from tests.support.daemon import (
    TOOLS,
    daemon_settings,
    daemon_thread,
    metric_sum,
    names,
    scrape,
    spawn_daemon,
    wait_for,
    write_config,
)
from tests.support.kafka import committed, create_topics, free_port, produce


def _run_spans(service: str, city: str) -> tuple[str, list[ReadableSpan], list[ReadableSpan]]:
    """(trace id, root span, child spans in end order) of one agent run of the real OTel SDK."""
    rec = Recorder(service=service)
    agent_run(rec.tracer(), TOOLS, [("get_weather", {"city": city})])
    spans = list(rec.spans())
    root = [s for s in spans if s.parent is None]
    children = [s for s in spans if s.parent is not None]
    assert len(root) == 1 and len(children) == 3
    return format(root[0].context.trace_id, "032x"), root, children


def _record(trace_id: str, spans: list[ReadableSpan]) -> tuple[bytes, bytes]:
    return trace_id.encode(), bytes(encode_spans(spans).SerializeToString())


def interleaving() -> tuple[dict[str, str], list[tuple[bytes, bytes]], tuple[bytes, bytes]]:
    a_id, a_root, a_children = _run_spans("agent-a", "Oslo")
    b_id, b_root, b_children = _run_spans("agent-b", "Lima")
    first = [
        _record(b_id, b_root + b_children[:1]),
        _record(a_id, a_children),
        _record(b_id, b_children[1:]),
    ]
    return {"A": a_id, "B": b_id}, first, _record(a_id, a_root)


def stored_runs(url: str) -> list[tuple[str, str]]:
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            return sorted((r[0], r[1]) for r in conn.execute(sa.text("SELECT trace_id, run_id FROM runs")))
    except (sa.exc.OperationalError, sa.exc.ProgrammingError):  # no file / not migrated yet
        return []
    finally:
        engine.dispose()


def _settings(bootstrap: str, topic: str, group: str, url: str, port: int = 0, client: str = "kafka-python"):  # type: ignore[no-untyped-def]
    # root_idle short, idle long: B closes as soon as its tail is in; A (rootless) stays open meanwhile
    return daemon_settings(
        bootstrap,
        topic,
        group,
        url,
        http={"port": port},
        assembler={"root_idle_s": 0.3, "idle_s": 60.0},
        kafka={"commit_interval_s": 0.3, "client": client},
    )


@pytest.mark.parametrize(
    ("stop", "backend", "client"),
    [
        ("sigterm", "sqlite", "kafka-python"),
        ("kill9", "sqlite", "kafka-python"),
        ("kill9", "postgresql", "kafka-python"),
        ("kill9", "sqlite", "confluent"),
    ],
)
def test_a_trace_stored_before_a_restart_is_not_stored_again_from_its_tail(
    kafka_bootstrap: str, tmp_path: Path, stop: str, backend: str, client: str, request: pytest.FixtureRequest
) -> None:
    """1. B closes and is stored while A holds the commit at A's first record.
    2. The daemon stops (SIGTERM: graceful drain; kill -9: no drain at all).
    3. A second daemon re-reads from A's first record: B's tail without its root.
    Result: the store holds exactly A's and B's runs; the second daemon counts B's tail as a skipped replay."""
    topic, group = names(f"replay-{stop}")
    create_topics(kafka_bootstrap, {topic: 1})
    ids, first, a_root = interleaving()
    # a database of its own: the session's postgres_url is shared by every test of the run
    url = (
        request.getfixturevalue("postgres_cluster").create_database()
        if backend == "postgresql"
        else f"sqlite:///{tmp_path / 'r.db'}"
    )
    log = tmp_path / "daemon.log"
    produce(kafka_bootstrap, topic, first, partition=0)
    port1, port2 = free_port(), free_port()
    proc = spawn_daemon(
        write_config(tmp_path / "one.yaml", _settings(kafka_bootstrap, topic, group, url, port1, client)), log
    )
    try:
        try:
            wait_for(lambda: [t for t, _ in stored_runs(url)] == [ids["B"]], 60, "B stored")
            wait_for(lambda: committed(kafka_bootstrap, group, topic, 1) == {0: 1}, 20, "commit held at A's first")
        except AssertionError as exc:
            raise AssertionError(f"{exc}\n--- daemon log ---\n{log.read_text()[-4000:]}") from None
        if stop == "sigterm":
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(30) == 0
        else:
            proc.kill()
            proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert committed(kafka_bootstrap, group, topic, 1) == {0: 1}
    produce(kafka_bootstrap, topic, [a_root], partition=0)
    proc = spawn_daemon(
        write_config(tmp_path / "two.yaml", _settings(kafka_bootstrap, topic, group, url, port2, client)), log
    )
    try:
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 1) == {0: 4}, 40, "everything committed")
        m = scrape(port2)
        proc.terminate()
        assert proc.wait(30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    runs = stored_runs(url)
    assert sorted(t for t, _ in runs) == sorted(ids.values()), f"runs stored: {runs}\n{log.read_text()[-3000:]}"
    assert metric_sum(m, "monitor_replays_skipped_total", kind="trace") == 1
    assert metric_sum(m, "monitor_runs_scored_total") == 1  # A only: B is not counted twice


@pytest.mark.parametrize("client", ["kafka-python", "confluent"])
def test_a_trace_stored_before_a_rebalance_is_not_stored_again_by_the_new_owner(
    kafka_bootstrap: str, tmp_path: Path, client: str
) -> None:
    """1. Member one stores B while A holds the commit at A's first record.
    2. Member two joins: the partition is revoked (open A dropped, commit stays at 1) and reassigned.
    3. Whoever owns it now re-reads B's tail from offset 1, then A's root arrives.
    Result: exactly A's and B's runs are stored, on PostgreSQL-free SQLite shared by both members."""
    topic, group = names("replay-rebalance")
    create_topics(kafka_bootstrap, {topic: 1})
    ids, first, a_root = interleaving()
    url = f"sqlite:///{tmp_path / 'results.db'}"
    produce(kafka_bootstrap, topic, first, partition=0)
    with daemon_thread(_settings(kafka_bootstrap, topic, group, url, client=client)) as one:
        wait_for(lambda: [t for t, _ in stored_runs(url)] == [ids["B"]], 40, "B stored")
        wait_for(lambda: committed(kafka_bootstrap, group, topic, 1) == {0: 1}, 20, "commit held at A's first")
        with daemon_thread(_settings(kafka_bootstrap, topic, group, url, client=client)) as two:
            loops = [one.app.loop, two.app.loop]
            assert all(loop is not None for loop in loops)

            def replays() -> int:
                return sum(loop.stats.replayed_traces for loop in loops if loop is not None)

            wait_for(lambda: replays() >= 1, 40, "B's tail re-read after the rebalance and skipped")
            produce(kafka_bootstrap, topic, [a_root], partition=0)
            wait_for(lambda: committed(kafka_bootstrap, group, topic, 1) == {0: 4}, 40, "everything committed")
            scored = sum(metric_sum(scrape(d.port), "monitor_runs_scored_total") for d in (one, two))
            assert two.stop() == 0
        assert one.stop() == 0
    runs = stored_runs(url)
    assert sorted(t for t, _ in runs) == sorted(ids.values()), f"runs stored: {runs}"
    assert scored == 2
