"""Benchmark: the daemon end to end (broker → decoded → assembled → scored → stored → metrics) beside the
raw kafka-python consume rate of the same broker, in the same run; lag under steady load; 1, 2 and 4
members in one group.

Set-up: a Tansu broker (memory storage) on a free loopback port, one topic of ``--partitions``
partitions holding a backlog of ``--traces`` agent traces (every recorded framework fixture copied under
fresh trace ids, each trace split over two records keyed by its hex trace id, half OTLP protobuf and half
OTLP/JSON), and a results store: a throwaway PostgreSQL cluster when the binaries are there (several
replicas write to it), else one SQLite file per scenario.

* **raw**: a plain ``KafkaConsumer`` (fresh group, the daemon's ``max_poll_records``) reads the backlog;
  timed from its first record to its last.
* **e2e ×N**: N daemons (``python -m monitor run --config …``, each its own process) in a fresh group read
  the same backlog; timed from the first record any member consumed (the ``_created`` timestamp of
  ``monitor_records_consumed_total``) until the members' ``monitor_runs_sampled_total`` (counted after the
  store accepted a trace's results) reaches the number of runs. The ratio ``e2e / raw`` is the figure:
  the machine is shared and noisy, and both numbers come from the same broker in the same minute.
* **steady**: one daemon while a producer sends fresh traces at a fixed fraction of the measured
  one-member capacity; the consumer lag gauge (fetch high watermark − position, the daemon's own metric)
  is sampled every 0.25 s.

    .venv/bin/python bench/e2e.py [--traces 2000] [--partitions 8] [--steady-seconds 12] [--store auto]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from monitor.ingest.encode import encode, split_spans  # noqa: E402
from tests.support.kafka import TansuBroker, create_topics, free_port  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "frameworks"


# --------------------------------------------------------------------------- traffic


def load_templates() -> list[ExportTraceServiceRequest]:
    out = []
    for path in sorted(FIXTURES.glob("*/*.traces.pb")):
        req = ExportTraceServiceRequest()
        req.ParseFromString(path.read_bytes())
        out.append(req)
    return out


def make_records(n_traces: int, rng: random.Random) -> tuple[list[tuple[bytes, bytes]], int]:
    """``(key, value)`` records of ``n_traces`` fresh traces (each fixture is one trace, one run) and the span count."""
    templates = load_templates()
    records: list[tuple[bytes, bytes]] = []
    spans = 0
    for i in range(n_traces):
        req = ExportTraceServiceRequest()
        req.CopyFrom(templates[i % len(templates)])
        trace_id = rng.randbytes(16)
        for rs in req.resource_spans:
            for ss in rs.scope_spans:
                for span in ss.spans:
                    span.trace_id = trace_id
                    spans += 1
        key = trace_id.hex().encode()
        for j, part in enumerate(split_spans(req, 2)):
            records.append((key, encode(part, "otlp_json" if (i + j) % 2 else "otlp_proto")))
    return records, spans


def producer(bootstrap: str) -> KafkaProducer:
    return KafkaProducer(
        bootstrap_servers=bootstrap, acks=1, linger_ms=10, batch_size=512 * 1024, max_request_size=8 * 1024 * 1024
    )


def produce_all(bootstrap: str, topic: str, records: list[tuple[bytes, bytes]]) -> float:
    p = producer(bootstrap)
    start = time.perf_counter()
    for key, value in records:
        p.send(topic, key=key, value=value)
    p.flush(120)
    elapsed = time.perf_counter() - start
    p.close(5)
    return elapsed


# --------------------------------------------------------------------------- scenarios


def raw_consume(bootstrap: str, topic: str, n_records: int, max_poll_records: int) -> float:
    """Seconds from the first record to the last, for a plain group consumer."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap,
        group_id=f"bench-raw-{uuid.uuid4().hex[:8]}",
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        max_poll_records=max_poll_records,
    )
    consumer.subscribe([topic])
    seen = 0
    first = 0.0
    deadline = time.monotonic() + 120
    while seen < n_records and time.monotonic() < deadline:
        batch = consumer.poll(timeout_ms=200)
        n = sum(len(v) for v in batch.values())
        if n and not seen:
            first = time.perf_counter()
        seen += n
    elapsed = time.perf_counter() - first
    consumer.close(autocommit=False)
    if seen < n_records:
        raise RuntimeError(f"raw consumer read {seen} of {n_records} records")
    return elapsed


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2) as resp:
            text = resp.read().decode()
    except OSError:
        return None
    out: dict[tuple[str, tuple[tuple[str, str], ...]], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def total(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None, name: str) -> float:
    if not samples:
        return 0.0
    return sum(v for (n, _), v in samples.items() if n == name)


def first_consumed(samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None) -> float | None:
    if not samples:
        return None
    values = [v for (n, _), v in samples.items() if n == "monitor_records_consumed_created"]
    return min(values) if values else None


@dataclass
class Members:
    procs: list[subprocess.Popen[bytes]]
    ports: list[int]
    logs: list[Path]

    def scrape_all(self) -> list[dict[tuple[str, tuple[tuple[str, str], ...]], float] | None]:
        return [scrape(p) for p in self.ports]

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def rebalances(self) -> int:
        """Assignments beyond each member's first (the loop logs one line per assignment)."""
        counts = [log.read_text(errors="replace").count(" partitions (") for log in self.logs if log.exists()]
        return sum(max(0, c - 1) for c in counts)


def start_members(
    n: int, bootstrap: str, topic: str, group: str, store_url: str, workdir: Path, max_poll_records: int
) -> Members:
    env = dict(os.environ, PYTHONWARNINGS="ignore::DeprecationWarning")
    env.pop("MONITOR_CONFIG", None)
    procs, ports, logs = [], [], []
    for i in range(n):
        port = free_port()
        config = {
            "kafka": {
                "bootstrap_servers": bootstrap,
                "spans_topic": topic,
                "group_id": group,
                # a longer session than the tests' 6 s: Tansu holds the first JoinGroup ~session/2,
                # long enough for every member's interpreter to start and join one generation
                "session_timeout_ms": 12000,
                "heartbeat_interval_ms": 1000,
                "commit_interval_s": 1.0,
                "max_poll_records": max_poll_records,
            },
            "assembler": {"root_idle_s": 0.2, "idle_s": 1.0},
            "http": {"host": "127.0.0.1", "port": port},
            "store": {"url": store_url},
            "log_level": "INFO",
        }
        path = workdir / f"{group}-{i}.yaml"
        path.write_text(yaml.safe_dump(config))
        log = workdir / f"{group}-{i}.log"
        with log.open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "monitor", "run", "--config", str(path)],
                    cwd=REPO,
                    env=env,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                )
            )
        ports.append(port)
        logs.append(log)
    return Members(procs, ports, logs)


@dataclass
class E2E:
    members: int
    seconds: float
    spans_per_s: float
    rebalances: int
    max_lag: float


def e2e(n: int, bootstrap: str, topic: str, n_runs: int, n_spans: int, store_url: str, workdir: Path, mpr: int) -> E2E:
    group = f"bench-e2e{n}-{uuid.uuid4().hex[:6]}"
    members = start_members(n, bootstrap, topic, group, store_url, workdir, mpr)
    try:
        deadline = time.monotonic() + 300
        max_lag = 0.0
        while time.monotonic() < deadline:
            samples = members.scrape_all()
            max_lag = max(max_lag, sum(total(s, "monitor_consumer_lag_records") for s in samples))
            if sum(total(s, "monitor_runs_sampled_total") for s in samples) >= n_runs:
                done = time.time()
                break
            if any(p.poll() is not None for p in members.procs):
                raise RuntimeError(f"a member exited; see {members.logs}")
            time.sleep(0.05)
        else:
            raise RuntimeError(f"timed out; see {members.logs}")
        firsts = [f for f in (first_consumed(s) for s in samples) if f is not None]
        seconds = done - min(firsts)
    finally:
        members.stop()
    return E2E(n, seconds, n_spans / seconds, members.rebalances(), max_lag)


@dataclass
class Steady:
    fraction: float
    target_rps: float
    achieved_rps: float
    lag_mean: float
    lag_p95: float
    lag_max: float
    drained_s: float


def steady(
    fraction: float,
    capacity_rps: float,
    seconds: float,
    bootstrap: str,
    partitions: int,
    store_url: str,
    workdir: Path,
    mpr: int,
    rng: random.Random,
) -> Steady:
    """One daemon; a producer at ``fraction`` × capacity (records/s) for ``seconds``; lag sampled every 0.25 s."""
    rate = fraction * capacity_rps
    records, _ = make_records(max(1, int(rate * seconds / 2)), rng)
    topic = f"bench-steady-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, {topic: partitions})
    group = f"bench-steady-{uuid.uuid4().hex[:6]}"
    members = start_members(1, bootstrap, topic, group, store_url, workdir, mpr)
    lags: list[float] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # joined: /readyz needs an assignment
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{members.ports[0]}/readyz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            time.sleep(0.1)
        sent = [0]

        def send() -> None:
            p = producer(bootstrap)
            start = time.perf_counter()
            for i, (key, value) in enumerate(records):
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)  # pacing the load generator, not the daemon
                p.send(topic, key=key, value=value)
                sent[0] += 1
            p.flush(60)
            p.close(5)

        t = threading.Thread(target=send, daemon=True)
        start = time.perf_counter()
        t.start()
        while t.is_alive():
            lags.append(total(members.scrape_all()[0], "monitor_consumer_lag_records"))
            time.sleep(0.25)
        produced_s = time.perf_counter() - start
        drain_start = time.perf_counter()
        runs = len(records) // 2
        while time.perf_counter() - drain_start < 60:
            if total(members.scrape_all()[0], "monitor_runs_sampled_total") >= runs:
                break
            time.sleep(0.05)
        drained = time.perf_counter() - drain_start
    finally:
        members.stop()
    lags_sorted = sorted(lags) or [0.0]
    return Steady(
        fraction,
        rate,
        sent[0] / produced_s,
        statistics.fmean(lags_sorted),
        lags_sorted[int(0.95 * (len(lags_sorted) - 1))],
        lags_sorted[-1],
        drained,
    )


# --------------------------------------------------------------------------- main


def open_store_factory(kind: str) -> tuple[str, object | None]:
    """('postgres' | 'sqlite', cluster or None)."""
    if kind in ("auto", "postgres"):
        try:
            from tests.support.postgres import PostgresCluster

            cluster = PostgresCluster()
            cluster.start()
            return "postgres", cluster
        except Exception as exc:
            if kind == "postgres":
                raise
            print(f"(PostgreSQL unavailable: {exc}; using SQLite)")
    return "sqlite", None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--members", default="1,2,4")
    parser.add_argument("--steady-seconds", type=float, default=12.0)
    parser.add_argument("--steady-loads", default="0.5,0.9", help="fractions of the 1-member capacity")
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--store", choices=("auto", "sqlite", "postgres"), default="auto")
    args = parser.parse_args()

    began = time.monotonic()
    rng = random.Random(7)
    workdir = Path(tempfile.mkdtemp(prefix="bench-e2e."))
    broker = TansuBroker(workdir)
    broker.start()
    store_kind, cluster = open_store_factory(args.store)

    def store_url(name: str) -> str:
        if cluster is not None:
            return str(cluster.create_database(f"bench_{name}_{uuid.uuid4().hex[:6]}"))  # type: ignore[attr-defined]
        return f"sqlite:///{workdir / (name + '.db')}"

    try:
        records, n_spans = make_records(args.traces, rng)
        n_runs = args.traces
        size = sum(len(v) for _, v in records)
        topic = f"bench-backlog-{uuid.uuid4().hex[:6]}"
        create_topics(broker.bootstrap, {topic: args.partitions})
        produce_s = produce_all(broker.bootstrap, topic, records)
        print(
            f"backlog: {len(records)} records ({size / 1e6:.1f} MB), {n_spans} spans, {n_runs} runs, "
            f"{args.partitions} partitions; produced in {produce_s:.2f}s; store: {store_kind}; cpus: {os.cpu_count()}"
        )
        raw_s = raw_consume(broker.bootstrap, topic, len(records), args.max_poll_records)
        raw_rate = n_spans / raw_s
        rows = []
        for n in (int(x) for x in args.members.split(",")):
            rows.append(
                e2e(n, broker.bootstrap, topic, n_runs, n_spans, store_url(f"e2e{n}"), workdir, args.max_poll_records)
            )
        one = next((r for r in rows if r.members == 1), rows[0])
        capacity_rps = len(records) / one.seconds
        steadies = [
            steady(
                float(f),
                capacity_rps,
                args.steady_seconds,
                broker.bootstrap,
                args.partitions,
                store_url(f"steady{i}"),
                workdir,
                args.max_poll_records,
                rng,
            )
            for i, f in enumerate(args.steady_loads.split(","))
        ]
    finally:
        broker.stop()
        if cluster is not None:
            cluster.destroy()  # type: ignore[attr-defined]

    print()
    print(f"{'scenario':<22}{'seconds':>9}{'spans/s':>11}{'vs raw':>8}{'vs 1 member':>13}{'rebal.':>8}{'max lag':>9}")
    print(f"{'raw kafka-python':<22}{raw_s:>9.2f}{raw_rate:>11,.0f}{1.0:>8.2f}{'':>13}{'':>8}{'':>9}")
    for r in rows:
        vs_raw, vs_one = r.spans_per_s / raw_rate, r.spans_per_s / one.spans_per_s
        print(
            f"{'e2e ' + str(r.members) + ' member(s)':<22}{r.seconds:>9.2f}{r.spans_per_s:>11,.0f}"
            f"{vs_raw:>8.2f}{vs_one:>13.2f}{r.rebalances:>8}{r.max_lag:>9.0f}"
        )
    print()
    print(f"steady load, 1 member (capacity {capacity_rps:,.0f} records/s measured above):")
    print(
        f"{'load':>6}{'target rec/s':>14}{'sent rec/s':>12}{'lag mean':>10}{'lag p95':>9}{'lag max':>9}{'drain s':>9}"
    )
    for s in steadies:
        print(
            f"{s.fraction:>6.0%}{s.target_rps:>14,.0f}{s.achieved_rps:>12,.0f}{s.lag_mean:>10.0f}"
            f"{s.lag_p95:>9.0f}{s.lag_max:>9.0f}{s.drained_s:>9.2f}"
        )
    print(f"\n(total {time.monotonic() - began:.0f}s; logs in {workdir})")


if __name__ == "__main__":
    main()
