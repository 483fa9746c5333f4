"""The whole daemon against fuzzed records on the real Tansu broker, then restarted over the same topic.

A few hundred records are drawn from :mod:`tests.fuzz.strategies` with a fixed seed (agent runs in three
conventions, split and merged records, GenAI log events on a logs topic, hostile content, bad records, some over
1 MiB), produced to fresh topics with the producer's real partitioner, and consumed by the daemon
(:func:`tests.support.daemon.daemon_thread`: real App, kafka-python consumer group, dead-letter producer, SQLite
store, HTTP server). Then:

* the daemon stays alive the whole time and ``/healthz``/``/metrics`` answer (200, parseable);
* every record is accounted for: each record the decoder rejects is read back from ``<topic>.dlq`` exactly once
  with its ``monitor.dlq.reason`` / partition / offset headers; no record that decodes is dead-lettered; every
  well-formed run of a record that decoded is in the store; the counters agree;
* the committed offsets reach the end offsets of both topics;
* the store has no duplicate result key and only valid UTF-8;
* a restart over the same topic and group stores nothing new and sends no new dead letter.

``MONITOR_FUZZ_DAEMON_RECORDS`` (default 300) sets how many records are drawn; ``MONITOR_FUZZ_SEED`` the seed.
"""

from __future__ import annotations

import os
import time
import urllib.request
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, seed, settings
from kafka import KafkaProducer
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_openmetrics

from monitor.ingest.decode import DECODE_REASONS
from tests.fuzz.strategies import MAX_RECORD_BYTES, OK, Batch, FuzzRecord, batches
from tests.fuzz.test_fuzz_pipeline import Outcome, decode_outcome, missing_runs, scan_store
from tests.support.daemon import (
    daemon_settings,
    daemon_thread,
    http_status,
    metric_sum,
    names,
    scrape,
    wait_for,
)
from tests.support.kafka import committed, create_topics, end_offsets, read_all

RECORDS = int(os.environ.get("MONITOR_FUZZ_DAEMON_RECORDS", "300"))
SEED = int(os.environ.get("MONITOR_FUZZ_SEED", "8"))
SPANS_PARTITIONS = 4
LOGS_PARTITIONS = 2
HEADER_INDEX = "fuzz.record"


def draw_batches(min_records: int, seed_value: int) -> list[Batch]:
    """Batches from seeded Hypothesis generation runs (deterministic: seeds ``seed_value``, ``+1``, …), until
    ``min_records`` records.

    Batches whose trace ids repeat an earlier batch's are dropped (Hypothesis replays choices), so every trace
    id is produced by one batch only.
    """
    out: list[Batch] = []
    seen: set[str] = set()
    total = 0

    def one_run(seed_now: int) -> None:
        @seed(seed_now)
        @settings(
            max_examples=20,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(batches())
        def collect(batch: Batch) -> None:
            nonlocal total
            ids = {p.trace_id for p in batch.plans}
            if total >= min_records or ids & seen:
                return
            seen.update(ids)
            out.append(batch)
            total += len(batch.records)

        collect()

    for i in range(1000):
        if total >= min_records:
            break
        one_run(seed_value + i)
    return out


def openmetrics(port: int) -> str:
    """``/metrics`` as Prometheus scrapes it by default (OpenMetrics, exemplars): '' when it answers 200 and parses."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            text = resp.read().decode("utf-8")
            status = resp.status
        list(parse_openmetrics(text))
    except Exception as exc:
        return f"/metrics in OpenMetrics fails: {type(exc).__name__}: {exc}"
    return "" if status == 200 else f"/metrics in OpenMetrics answered {status}"


def describe(i: int, rec: FuzzRecord, where: tuple[str, int, int], outcome: Outcome) -> str:
    decoded = "decodes" if outcome.reason == OK else f"fails decoding ({outcome.reason}: {outcome.detail})"
    return f"record #{i} at {where[0]}/{where[1]}@{where[2]} {decoded}: {rec.describe()}"


def test_fuzzed_records_through_the_daemon_and_a_restart(kafka_bootstrap: str, tmp_path: Path) -> None:
    topic, group = names("fuzz-daemon")
    logs_topic = topic + "-logs"
    create_topics(kafka_bootstrap, {topic: SPANS_PARTITIONS, logs_topic: LOGS_PARTITIONS})
    drawn = draw_batches(RECORDS, SEED)
    records = [r for b in drawn for r in b.records]
    plans = [p for b in drawn for p in b.plans]

    # produce as the Collector does (keys through the default partitioner), remembering where each record went
    producer = KafkaProducer(
        bootstrap_servers=kafka_bootstrap, acks="all", linger_ms=5, max_request_size=4 * MAX_RECORD_BYTES
    )
    futures = []
    for i, rec in enumerate(records):
        target = topic if rec.topic == "spans" else logs_topic
        headers = [(HEADER_INDEX, str(i).encode())]
        value = rec.value if rec.value is not None or rec.key is not None else b""  # kafka-python needs one of them
        futures.append(producer.send(target, key=rec.key, value=value, headers=headers))
    producer.flush(60)
    producer.close(5)
    where: list[tuple[str, int, int]] = []
    for i, f in enumerate(futures):
        assert f.is_done and f.succeeded(), f"could not produce record #{i}: {f.exception}"
        meta = f.value
        where.append((meta.topic, meta.partition, meta.offset))

    url = f"sqlite:///{tmp_path / 'results.db'}"
    s = daemon_settings(
        kafka_bootstrap,
        topic,
        group,
        url,
        kafka={"logs_topic": logs_topic},
        decode={"max_record_bytes": MAX_RECORD_BYTES},
        assembler={"root_idle_s": 3.0, "idle_s": 5.0},
    )
    outcomes = [decode_outcome(rec, s) for rec in records]
    lines = {i: describe(i, rec, where[i], outcomes[i]) for i, rec in enumerate(records)}
    bad = {i: o.reason for i, o in enumerate(outcomes) if o.reason != OK}
    span_traces = set().union(*(o.trace_ids for r, o in zip(records, outcomes, strict=True) if r.topic == "spans"))
    ends = {
        topic: end_offsets(kafka_bootstrap, topic, SPANS_PARTITIONS),
        logs_topic: end_offsets(kafka_bootstrap, logs_topic, LOGS_PARTITIONS),
    }
    parts = {topic: SPANS_PARTITIONS, logs_topic: LOGS_PARTITIONS}

    def at_end() -> bool:
        return all(committed(kafka_bootstrap, group, t, n) == ends[t] for t, n in parts.items())

    with daemon_thread(s) as d:

        def alive_and(cond: Any) -> Any:
            def check() -> bool:
                if not d.thread.is_alive():
                    error = d.error[0] if d.error else None
                    raise AssertionError(f"the daemon died: {error!r} (exit {d.result})") from error
                return bool(cond())

            return check

        loop = d.app.loop
        assert loop is not None
        wait_for(alive_and(lambda: loop.stats.records >= len(records)), 180, f"all {len(records)} records consumed")
        try:
            wait_for(alive_and(at_end), 90, "offsets committed to the end of both topics")
        except AssertionError as exc:
            got = {t: committed(kafka_bootstrap, group, t, n) for t, n in parts.items()}
            raise AssertionError(f"{exc}\ncommitted {got}\nend       {ends}\nloop stats {loop.stats}") from exc
        status, _ = http_status(d.port, "/healthz")
        assert status == 200, "/healthz is not 200 while the daemon runs"
        m = scrape(d.port)  # 200 and parses (prometheus_client's parser)
        om = openmetrics(d.port)
        first_stats = loop.stats
        assert d.stop() == 0

    problems: list[str] = []
    if om:
        problems.append(om)
    if metric_sum(m, "monitor_records_consumed_total") != len(records):
        problems.append(f"monitor_records_consumed_total={metric_sum(m, 'monitor_records_consumed_total')}")
    by_reason = Counter(bad.values())
    for reason in DECODE_REASONS:
        got = metric_sum(m, "monitor_records_invalid_total", reason=reason)
        if got != by_reason.get(reason, 0):
            problems.append(
                f"monitor_records_invalid_total{{reason={reason}}}={got}, decoder: {by_reason.get(reason, 0)}"
            )
    if metric_sum(m, "monitor_records_invalid_total", reason="rebuild_failed") or metric_sum(
        m, "monitor_traces_rejected_total", reason="rebuild_failed"
    ):
        problems.append("the rebuild raised on some traces (rebuild_failed)")

    # dead letters, read back from the broker
    dead = read_all(kafka_bootstrap, topic + ".dlq") + read_all(kafka_bootstrap, logs_topic + ".dlq")
    by_index: dict[int, list[Any]] = {}
    for letter in dead:
        h = dict(letter.headers or [])
        if HEADER_INDEX not in h:
            if h.get("monitor.dlq.reason") != b"unstorable":
                problems.append(f"a dead letter without the record's headers: {letter.headers}")
            continue
        by_index.setdefault(int(h[HEADER_INDEX]), []).append(letter)
    for i, reason in bad.items():
        got = by_index.pop(i, [])
        if len(got) != 1:
            problems.append(f"dead-lettered {len(got)} times (want once, reason {reason}): {lines[i]}")
            continue
        h = {k: bytes(v or b"") for k, v in got[0].headers}
        want = {
            "monitor.dlq.reason": reason.encode(),
            "monitor.dlq.topic": where[i][0].encode(),
            "monitor.dlq.partition": str(where[i][1]).encode(),
            "monitor.dlq.offset": str(where[i][2]).encode(),
        }
        wrong = {k: (h.get(k), v) for k, v in want.items() if h.get(k) != v}
        if wrong:
            problems.append(f"dead letter headers (got, want) {wrong}: {lines[i]}")
    for i, extra in by_index.items():
        problems.append(f"dead-lettered ({len(extra)}x) although it decodes: {lines[i]}")

    # the store
    scan = scan_store(tmp_path / "results.db")
    problems += scan.problems
    if metric_sum(m, "monitor_store_writes_total", outcome="new") != scan.results:
        new = metric_sum(m, "monitor_store_writes_total", outcome="new")
        problems.append(f"monitor_store_writes_total{{outcome=new}}={new}, {scan.results} results stored")
    if {t for t, _ in scan.runs} - span_traces:
        problems.append("runs stored for trace ids that no record carried")
    problems += missing_runs(records, outcomes, plans, scan.runs, lines.__getitem__)
    assert not problems, (
        f"{len(problems)} problems with {len(records)} fuzzed records ({len(bad)} undecodable):\n"
        + "\n".join(problems)
        + f"\nloop stats: {first_stats}"
    )

    # a restart over the same topic and group: nothing new stored, no new dead letter
    dead_before = len(dead)
    with daemon_thread(s) as d:
        wait_for(lambda: http_status(d.port, "/readyz")[0] == 200, 60, "the restarted daemon ready")
        time.sleep(3 * s.kafka.commit_interval_s + s.assembler.root_idle_s)
        loop = d.app.loop
        assert loop is not None and d.thread.is_alive(), f"the restarted daemon died: {d.error}"
        again = loop.stats
        assert d.stop() == 0
    dead_after = len(read_all(kafka_bootstrap, topic + ".dlq")) + len(read_all(kafka_bootstrap, logs_topic + ".dlq"))
    after = scan_store(tmp_path / "results.db")
    n_runs_after, n_results_after = len(after.runs), after.results
    assert (n_runs_after, n_results_after, dead_after) == (len(scan.runs), scan.results, dead_before), (
        f"the restart changed things: runs {len(scan.runs)} -> {n_runs_after}, results {scan.results} -> "
        f"{n_results_after}, dead letters {dead_before} -> {dead_after}; the restarted loop: {again}"
    )
    assert at_end(), "the restart moved the committed offsets away from the end"
