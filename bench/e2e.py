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

Scale: CPU per span of each e2e scenario is the sum over its members of ``process_cpu_seconds_total`` at the
end minus at the member's last scrape before it consumed anything, ÷ the backlog's spans; printed as the
ratio N members ÷ 1 member (flat is the goal), beside the throughput ratio.

Latency (steady scenario): span-to-metric p50/p99, from the Kafka timestamp of a trace's last record (the
producer sets it) to its results counted, read from the daemon's ``monitor_record_to_result_seconds`` buckets
(deltas over the window, PromQL's ``histogram_quantile`` interpolation: the bucket bounds limit the resolution)
and, as a cross-check outside the daemon, from the store (``runs.first_scored_at`` minus that timestamp). A
trace closes ``ROOT_IDLE_S`` (0.2 s here; 5 s by default) after its last span: the floor of both.

The figures go to bench/results/e2e.json (``--no-publish``: print only).

    .venv/bin/python bench/e2e.py [--traces 2000] [--partitions 8] [--steady-seconds 12] [--store auto]
"""

from __future__ import annotations

import argparse
import os
import random
import shlex
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
from datetime import UTC, datetime
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import yaml  # noqa: E402
from kafka import KafkaConsumer, KafkaProducer  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from bench.traffic import alternate, fixture_traces, load_templates  # noqa: E402, F401
from tests.support.kafka import TansuBroker, create_topics, free_port  # noqa: E402

FIXTURES = REPO / "tests" / "fixtures" / "frameworks"
# --client: the daemons' consumer client (kafka.client); bench/consume.py sets it to run the daemon with each
DAEMON_CLIENT = "kafka-python"
# The bench daemons' assembler: a trace closes ``ROOT_IDLE_S`` after its last span once its root span ended
# (rootless: after ``IDLE_S``), so this is a floor of the span-to-metric latency; reported beside it.
ROOT_IDLE_S = 0.2
IDLE_S = 1.0
LATENCY_METRIC = "monitor_record_to_result_seconds"


# --------------------------------------------------------------------------- traffic


def make_records(n_traces: int, rng: random.Random) -> tuple[list[tuple[bytes, bytes]], int]:
    """``(key, value)`` records of ``n_traces`` fresh traces (each fixture is one trace, one run) and the span count."""
    records: list[tuple[bytes, bytes]] = []
    spans = 0
    for trace_id, n, parts in fixture_traces(n_traces, rng, alternate):
        key = trace_id.hex().encode()
        records.extend((key, value) for _, value in parts)
        spans += n
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
                "client": DAEMON_CLIENT,
            },
            "assembler": {"root_idle_s": ROOT_IDLE_S, "idle_s": IDLE_S},
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
    cpu_s: float = 0.0  # the members' process_cpu_seconds_total, summed, over the consumption (CpuMeter)

    def cpu_per_span(self, n_spans: int) -> float:
        return self.cpu_s / n_spans if n_spans else 0.0


class CpuMeter:
    """CPU seconds the members spent on the backlog: per member, ``process_cpu_seconds_total`` at the end minus its
    value at the member's last scrape that had consumed nothing yet (start-up and the group join left out)."""

    def __init__(self, n: int) -> None:
        self.start: list[float | None] = [None] * n
        self.last: list[float | None] = [None] * n

    def observe(self, samples: list[dict[tuple[str, tuple[tuple[str, str], ...]], float] | None]) -> None:
        for i, s in enumerate(samples):
            if not s:
                continue
            cpu = total(s, "process_cpu_seconds_total")
            if self.start[i] is None or total(s, "monitor_records_consumed_total") == 0:
                self.start[i] = cpu
            self.last[i] = cpu

    def seconds(self) -> float:
        return sum(b - a for a, b in zip(self.start, self.last, strict=True) if a is not None and b is not None)


def e2e(n: int, bootstrap: str, topic: str, n_runs: int, n_spans: int, store_url: str, workdir: Path, mpr: int) -> E2E:
    group = f"bench-e2e{n}-{uuid.uuid4().hex[:6]}"
    members = start_members(n, bootstrap, topic, group, store_url, workdir, mpr)
    cpu = CpuMeter(n)
    try:
        deadline = time.monotonic() + 300
        max_lag = 0.0
        while time.monotonic() < deadline:
            samples = members.scrape_all()
            cpu.observe(samples)
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
    return E2E(n, seconds, n_spans / seconds, members.rebalances(), max_lag, cpu.seconds())


@dataclass
class Steady:
    fraction: float
    target_rps: float
    achieved_rps: float
    lag_mean: float
    lag_p95: float
    lag_max: float
    drained_s: float
    latency: Latency | None = None


@dataclass
class Latency:
    """Span-to-metric latency of a steady window, seconds: from the Kafka timestamp of a trace's last record until
    its results were counted. ``source``: ``histogram`` (the daemon's ``monitor_record_to_result_seconds``, bucket
    deltas over the window, interpolated as PromQL's ``histogram_quantile``) or ``store`` (measured outside the
    daemon: the store's ``runs.first_scored_at`` of each trace minus the timestamp the producer gave its last
    record; scoring precedes the store write and the count by a few milliseconds)."""

    source: str
    p50: float
    p99: float
    count: int
    external_p50: float | None = None  # the store-based figures, also when the histogram is there
    external_p99: float | None = None


def histogram_buckets(
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None, name: str
) -> dict[float, float]:
    """``{le: cumulative count}`` of histogram ``name`` (summed over any other labels); empty when absent."""
    out: dict[float, float] = {}
    for (sample, labels), value in (samples or {}).items():
        if sample == name + "_bucket":
            le = float(dict(labels)["le"])
            out[le] = out.get(le, 0.0) + value
    return out


def histogram_quantile(q: float, buckets: dict[float, float]) -> float:
    """PromQL's ``histogram_quantile`` on cumulative ``{le: count}`` buckets: linear within the bucket holding the
    rank (from 0 for the first bucket); the highest finite bound when the rank falls in ``+Inf``; NaN when empty."""
    bounds = sorted(buckets)
    if not bounds or bounds[-1] != float("inf") or buckets[bounds[-1]] <= 0:
        return float("nan")
    rank = q * buckets[bounds[-1]]
    prev_le, prev_count = 0.0, 0.0
    for le in bounds:
        count = buckets[le]
        if count >= rank:
            if le == float("inf"):
                return prev_le
            if count == prev_count:
                return le
            return prev_le + (le - prev_le) * (rank - prev_count) / (count - prev_count)
        prev_le, prev_count = le, count
    return prev_le


def quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile of ``values`` (linear between the closest ranks); NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def store_latencies(store_url: str, last_sent: dict[bytes, float]) -> list[float]:
    """Per trace sent: its first ``runs.first_scored_at`` in the store minus the timestamp of its last record."""
    import sqlalchemy as sa

    engine = sa.create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT trace_id, min(first_scored_at) FROM runs GROUP BY trace_id")).all()
    finally:
        engine.dispose()
    out = []
    for trace_id, scored in rows:
        sent = last_sent.get(str(trace_id).encode())
        if sent is None:
            continue
        if isinstance(scored, str):  # SQLite through text(): the stored UTC wall-clock text
            scored = datetime.fromisoformat(scored)
        if scored.tzinfo is None:
            scored = scored.replace(tzinfo=UTC)
        out.append(scored.timestamp() - sent)
    return out


def span_to_metric(
    before: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None,
    after: dict[tuple[str, tuple[tuple[str, str], ...]], float] | None,
    last_sent: dict[bytes, float],
    store_url: str,
) -> Latency | None:
    """p50/p99 of the window between the two scrapes: from the daemon's histogram when it has one, else external."""
    external = store_latencies(store_url, last_sent)
    ext50, ext99 = quantile(external, 0.5), quantile(external, 0.99)
    b0, b1 = histogram_buckets(before, LATENCY_METRIC), histogram_buckets(after, LATENCY_METRIC)
    delta = {le: c - b0.get(le, 0.0) for le, c in b1.items()}
    if delta and delta.get(float("inf"), 0.0) > 0:
        p50, p99 = histogram_quantile(0.5, delta), histogram_quantile(0.99, delta)
        return Latency("histogram", p50, p99, int(delta[float("inf")]), ext50, ext99)
    if not external:
        return None
    return Latency("store", ext50, ext99, len(external), ext50, ext99)


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
        last_sent: dict[bytes, float] = {}  # trace key → the timestamp given to its last record (for the latency)
        before = members.scrape_all()[0]

        def send() -> None:
            p = producer(bootstrap)
            start = time.perf_counter()
            for i, (key, value) in enumerate(records):
                due = start + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)  # pacing the load generator, not the daemon
                ts_ms = int(time.time() * 1000)
                p.send(topic, key=key, value=value, timestamp_ms=ts_ms)
                last_sent[key] = ts_ms / 1000
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
        after = members.scrape_all()[0]
    finally:
        members.stop()
    latency = span_to_metric(before, after, last_sent, store_url)
    lags_sorted = sorted(lags) or [0.0]
    return Steady(
        fraction,
        rate,
        sent[0] / produced_s,
        statistics.fmean(lags_sorted),
        lags_sorted[int(0.95 * (len(lags_sorted) - 1))],
        lags_sorted[-1],
        drained,
        latency,
    )


# --------------------------------------------------------------------------- scale and latency figures


def scale_and_latency(
    raw_rate: float, rows: list[E2E], steadies: list[Steady], n_spans: int, store_kind: str, *, publish_figures: bool
) -> None:
    """Print CPU per span across members (÷ one member), throughput 2 ÷ 1, the steady loads' latency; publish."""
    from bench.figures import Figure, publish

    one = next((r for r in rows if r.members == 1), rows[0])
    one_cpu = one.cpu_per_span(n_spans)
    print()
    print(f"{'members':>8}{'CPU s':>8}{'CPU µs/span':>13}{'÷ 1 member':>12}{'spans/s ÷ 1 member':>20}")
    for r in rows:
        cpu = r.cpu_per_span(n_spans)
        print(
            f"{r.members:>8}{r.cpu_s:>8.2f}{cpu * 1e6:>13.0f}{cpu / one_cpu if one_cpu else 0:>12.2f}"
            f"{r.spans_per_s / one.spans_per_s:>20.2f}"
        )
    print()
    print(f"span-to-metric latency, 1 member (root_idle_s {ROOT_IDLE_S:g}: a trace closes that long after its end)")
    print(f"{'load':>6}{'p50 ms':>9}{'p99 ms':>9}{'traces':>8}  source{'':>12}{'store p50/p99 ms':>18}")
    for st in steadies:
        lat = st.latency
        if lat is None:
            print(f"{st.fraction:>6.0%}  (no latency measured)")
            continue
        ext = (
            f"{lat.external_p50 * 1e3:.0f}/{lat.external_p99 * 1e3:.0f}"
            if lat.external_p50 is not None and lat.external_p99 is not None
            else ""
        )
        print(f"{st.fraction:>6.0%}{lat.p50 * 1e3:>9.0f}{lat.p99 * 1e3:>9.0f}{lat.count:>8}  {lat.source:<18}{ext:>18}")
    if not publish_figures:
        return
    figures = [
        Figure(
            key="e2e_raw_spans_per_s",
            label="raw kafka-python consume of the e2e backlog",
            value=round(raw_rate),
            unit="spans/s",
            detail=f"{n_spans} spans, Tansu memory storage; the baseline of the daemon ratios below",
        )
    ]
    for r in rows:
        figures.append(
            Figure(
                key=f"e2e_vs_raw_{r.members}",
                label=f"daemon end to end, {r.members} member{'s' if r.members > 1 else ''}, throughput",
                value=round(r.spans_per_s / raw_rate, 3),
                unit="×",
                baseline="raw kafka-python consume, same backlog and run",
                detail=f"{r.spans_per_s:,.0f} spans/s decoded → stored → counted ({store_kind}); {r.rebalances} rebal.",
            )
        )
    for r in rows:
        if r is one:
            continue
        figures.append(
            Figure(
                key=f"e2e_cpu_per_span_{r.members}",
                label=f"CPU per span, {r.members} members in one group",
                value=round(r.cpu_per_span(n_spans) / one_cpu, 2) if one_cpu else 0.0,
                unit="×",
                baseline="1 member, same backlog and run",
                goal="<= 1.2",
                detail=f"{r.cpu_per_span(n_spans) * 1e6:.0f} µs vs {one_cpu * 1e6:.0f} µs (Σ process CPU ÷ spans)",
            )
        )
    two = next((r for r in rows if r.members == 2), None)
    if two is not None:
        figures.append(
            Figure(
                key="e2e_scale_2",
                label="throughput, 2 members in one group",
                value=round(two.spans_per_s / one.spans_per_s, 2),
                unit="×",
                baseline="1 member, same backlog and run",
                detail=f"{two.spans_per_s:,.0f} vs {one.spans_per_s:,.0f} spans/s on {os.cpu_count()} CPUs",
            )
        )
    for st in steadies:
        pct = f"{st.fraction:.0%}"
        if st.latency is not None:
            lat = st.latency
            how = "daemon histogram" if lat.source == "histogram" else "measured outside: store scored time"
            for q, v in (("p50", lat.p50), ("p99", lat.p99)):
                figures.append(
                    Figure(
                        key=f"e2e_latency_{q}_{pct.rstrip('%')}",
                        label=f"span-to-metric latency {q} at {pct} of one member's capacity",
                        value=round(v * 1e3),
                        unit="ms",
                        detail=f"root_idle_s {ROOT_IDLE_S:g}; {lat.count} traces; {how}",
                    )
                )
        figures.append(
            Figure(
                key=f"e2e_lag_max_{pct.rstrip('%')}",
                label=f"consumer lag, maximum, at {pct} of one member's capacity",
                value=st.lag_max,
                unit="records",
                detail=(
                    f"{st.achieved_rps:,.0f} records/s; mean {st.lag_mean:.0f}, p95 {st.lag_p95:.0f}; every run "
                    f"counted {st.drained_s:.1f} s after the last record was sent"
                ),
            )
        )
    publish("e2e", shlex.join([".venv/bin/python", "bench/e2e.py", *sys.argv[1:]]), figures)


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
    parser.add_argument("--no-publish", action="store_true", help="print only, do not write bench/results/e2e.json")
    parser.add_argument(
        "--client", choices=("kafka-python", "confluent"), default="kafka-python", help="the daemons' kafka.client"
    )
    args = parser.parse_args()
    global DAEMON_CLIENT
    DAEMON_CLIENT = args.client

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
    scale_and_latency(raw_rate, rows, steadies, n_spans, store_kind, publish_figures=not args.no_publish)
    print(f"\n(total {time.monotonic() - began:.0f}s; logs in {workdir})")


if __name__ == "__main__":
    main()
