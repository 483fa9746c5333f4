"""Soak: one daemon under a steady stream of fresh agent traces for an hour; its memory, lag and open traces stay flat.

Set-up: a Tansu broker (memory storage) on a free loopback port, one topic of ``--partitions`` partitions, one
daemon (``python -m monitor run --config …``, the configuration of bench/e2e.py: ``root_idle_s`` 0.2 s,
``idle_s`` 1 s, commits every second) writing to a SQLite file (``--store postgres``: a throwaway PostgreSQL
cluster from tests/support/postgres.py). A producer thread sends ``--rate`` traces per second for
``--minutes``: the e2e record mix (every recorded framework fixture in turn, each trace over two records keyed
by its hex trace id, alternately OTLP protobuf and OTLP/JSON) under a fresh trace id per trace. ``--rate``
is absolute (``40``) or a fraction of the one-member capacity measured first on the same broker with a
backlog (``0.2x``, the default: bench/e2e.py's one-member scenario).

Every ``--sample-s`` seconds the daemon's ``/metrics`` is read: ``process_resident_memory_bytes``,
``process_cpu_seconds_total``, ``monitor_consumer_lag_records`` (summed over partitions),
``monitor_traces_open``, ``monitor_spans_open``, ``monitor_open_trace_bytes``, ``monitor_runs_sampled_total``,
``monitor_spans_decoded_total`` (the broker's resident memory is printed beside them: Tansu's memory storage
keeps every record, so it grows with the traffic; it is not the daemon's). After the load the producer stops
and the daemon must drain: every trace counted, lag 0, no trace open.

Printed: the RSS slope over the second half (bytes per minute, least squares), the RSS growth over the second
half (that slope × the half's length) ÷ the mean RSS of the first half, the lag's maximum and its value at
the end of the load, the maximum of open traces, CPU seconds per decoded span. Verdicts (exit code 1 when
one fails):

* **RSS flat**: growth over the second half < ``RSS_GROWTH_MAX`` = 5 % of the first half's level;
* **lag bounded**: the last quarter's maximum ≤ ``TREND_FACTOR`` (2) × the first quarter's maximum +
  ``TREND_SLACK_S`` (5) seconds of traffic, **and** after the producer stops the lag is back to 0, every
  trace counted and none open within ``DRAIN_S`` (30) seconds;
* **open traces bounded**: the last quarter's maximum of ``monitor_traces_open`` ≤ ``TREND_FACTOR`` × the
  first quarter's + ``TREND_SLACK_S`` seconds of traces (and none left open after the drain, above).

Warm-up: the daemon remembers closed trace ids for ``assembler.late_window_s`` (600 s by default) to count late
spans, so its RSS rises for the first ten minutes and then levels (in the hour-long run it stays within
±3 MiB of ~179 MiB from minute 20 on); the RSS verdict is meaningful once the second half starts after that
window, i.e. from 20 minutes on. The broker is no part of the verdicts: Tansu's memory storage has no retention
(nor DeleteRecords), so it holds every record sent, about 70 MiB per hour per trace/s.

Only a run of at least ``PUBLISH_MIN_MINUTES`` (10) minutes publishes its figures (bench/results/soak.json;
``--publish`` forces it). tests/integration/test_soak.py runs :func:`soak` for two minutes and asserts the
same verdicts.

    .venv/bin/python bench/soak.py [--minutes 60] [--rate 0.2x] [--store sqlite|postgres] [--partitions 8]
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import sqlalchemy as sa  # noqa: E402
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest  # noqa: E402

from bench.e2e import (  # noqa: E402
    IDLE_S,
    ROOT_IDLE_S,
    e2e,
    load_templates,
    make_records,
    produce_all,
    producer,
    scrape,
    start_members,
    total,
)
from bench.figures import Figure, publish  # noqa: E402
from monitor.demo.broker import TansuBroker  # noqa: E402
from monitor.ingest.decode import decode_traces  # noqa: E402
from monitor.ingest.encode import encode, split_spans  # noqa: E402
from monitor.trajectory.build import build_runs  # noqa: E402
from tests.support.kafka import create_topics  # noqa: E402

RSS_GROWTH_MAX = 0.05
TREND_FACTOR = 2.0
TREND_SLACK_S = 5.0
DRAIN_S = 30.0
PUBLISH_MIN_MINUTES = 10.0
DEFAULT_RATE = "0.2x"


# --------------------------------------------------------------------------- traffic


class TraceMix:
    """The e2e record mix under fresh trace ids, cheaply: each fixture is encoded once (both encodings, both
    halves) under a sentinel trace id that :meth:`records` replaces by a fresh one, bytes for protobuf and hex
    for OTLP/JSON (the same records bench/e2e.py's ``make_records`` builds, without re-encoding per trace)."""

    def __init__(self, seed: int = 7) -> None:
        self._rng = random.Random(seed)
        self._sentinel = random.Random(0x50AC).randbytes(16)
        self._templates: list[tuple[list[tuple[bytes, bytes]], int]] = []
        self._runs: list[tuple[int, int]] = []
        for template in load_templates():
            req = ExportTraceServiceRequest()
            req.CopyFrom(template)
            spans = 0
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    for span in ss.spans:
                        span.trace_id = self._sentinel
                        spans += 1
            parts = [(encode(p, "otlp_proto"), encode(p, "otlp_json")) for p in split_spans(req, 2)]
            for proto, json_ in parts:
                if self._sentinel not in proto or self._sentinel.hex().encode() not in json_:
                    raise AssertionError("a template part lost its trace id")
            # the runs the daemon stores of one such trace (one row each, nested runs included: score_children)
            top = build_runs([span for proto, _ in parts for span in decode_traces(proto)])
            self._templates.append((parts, spans))
            self._runs.append((len(top), sum(len(list(r.walk())) for r in top)))
        self.i = 0

    def runs(self, traces: int) -> tuple[int, int]:
        """(top-level runs, runs with the nested ones) of the first ``traces`` traces :meth:`records` made."""
        n = len(self._runs)
        full, rest = divmod(traces, n)
        return (
            full * sum(t for t, _ in self._runs) + sum(t for t, _ in self._runs[:rest]),
            full * sum(a for _, a in self._runs) + sum(a for _, a in self._runs[:rest]),
        )

    def records(self) -> tuple[bytes, list[bytes], int]:
        """The next trace: ``(key, values, spans)``; the key is the fresh hex trace id."""
        parts, spans = self._templates[self.i % len(self._templates)]
        trace_id = self._rng.randbytes(16)
        hex_id = trace_id.hex().encode()
        values = []
        for j, (proto, json_) in enumerate(parts):
            if (self.i + j) % 2:
                values.append(json_.replace(self._sentinel.hex().encode(), hex_id))
            else:
                values.append(proto.replace(self._sentinel, trace_id))
        self.i += 1
        return hex_id, values, spans


class Producer(threading.Thread):
    """Sends ``rate`` traces per second (absolute schedule: a late send is caught up, not dropped) until stopped."""

    def __init__(self, bootstrap: str, topic: str, rate: float) -> None:
        super().__init__(name="soak-producer", daemon=True)
        self.bootstrap, self.topic, self.rate = bootstrap, topic, rate
        self.mix = TraceMix()
        self.stop_event = threading.Event()
        self.traces = self.spans = self.records = 0
        self.seconds = 0.0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            p = producer(self.bootstrap)
            start = time.perf_counter()
            while not self.stop_event.is_set():
                delay = start + self.traces / self.rate - time.perf_counter()
                if delay > 0 and self.stop_event.wait(delay):  # pacing the load generator, not the daemon
                    break
                key, values, spans = self.mix.records()
                for value in values:
                    p.send(self.topic, key=key, value=value)
                self.traces += 1
                self.records += len(values)
                self.spans += spans
            self.seconds = time.perf_counter() - start
            p.flush(60)
            p.close(5)
        except BaseException as exc:  # reported by soak()
            self.error = exc


# --------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class Sample:
    t: float  # seconds since the load started (negative: before it)
    rss: float
    cpu: float
    lag: float
    traces_open: float
    spans_open: float
    bytes_open: float
    runs_sampled: float
    spans_decoded: float
    broker_rss: float


def broker_rss(pid: int | None) -> float:
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return float(line.split()[1]) * 1024
    except OSError:
        pass
    return 0.0


def take_sample(port: int, t: float, broker_pid: int | None) -> Sample | None:
    m = scrape(port)
    if m is None:
        return None
    return Sample(
        t=t,
        rss=total(m, "process_resident_memory_bytes"),
        cpu=total(m, "process_cpu_seconds_total"),
        lag=total(m, "monitor_consumer_lag_records"),
        traces_open=total(m, "monitor_traces_open"),
        spans_open=total(m, "monitor_spans_open"),
        bytes_open=total(m, "monitor_open_trace_bytes"),
        runs_sampled=total(m, "monitor_runs_sampled_total"),
        spans_decoded=total(m, "monitor_spans_decoded_total"),
        broker_rss=broker_rss(broker_pid),
    )


# --------------------------------------------------------------------------- the run


@dataclass
class Soak:
    """What one soak measured: the samples under load (``t`` in [0, seconds]), the drain after it."""

    rate: float
    seconds: float
    samples: list[Sample]
    traces: int
    records: int
    spans: int
    top_runs: int  # top-level runs of the traces sent (each counted once in monitor_runs_sampled_total)
    runs: int  # rows the store's runs table should end with (nested runs included)
    produce_seconds: float
    drain_s: float | None  # None: not drained within DRAIN_S
    after: Sample | None  # the last sample of the drain
    exit_code: int | None
    log: Path
    store_url: str


def wait_ready(port: int, timeout: float = 60.0) -> None:
    """Until ``/readyz`` answers 200 (partitions assigned)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the daemon on port {port} did not become ready in {timeout:.0f}s")


def soak(
    bootstrap: str,
    *,
    rate: float,
    seconds: float,
    store_url: str,
    workdir: Path,
    partitions: int = 8,
    sample_s: float = 5.0,
    broker_pid: int | None = None,
    max_poll_records: int = 500,
    progress: Callable[[Sample], None] | None = None,
) -> Soak:
    """One daemon on a fresh topic and group; ``rate`` traces/s for ``seconds``; then the drain; then SIGTERM."""
    topic = f"soak-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, {topic: partitions})
    members = start_members(1, bootstrap, topic, f"soak-{uuid.uuid4().hex[:6]}", store_url, workdir, max_poll_records)
    port, proc = members.ports[0], members.procs[0]
    samples: list[Sample] = []
    after: Sample | None = None
    drain_s: float | None = None
    prod = Producer(bootstrap, topic, rate)
    try:
        wait_ready(port)
        first = take_sample(port, 0.0, broker_pid)
        if first is not None:
            samples.append(first)
        start = time.monotonic()
        prod.start()
        next_at = start + sample_s
        while True:
            now = time.monotonic()
            if now - start >= seconds:
                break
            time.sleep(max(0.0, min(next_at, start + seconds) - now))
            if proc.poll() is not None:
                raise RuntimeError(f"the daemon exited with {proc.returncode}; see {members.logs[0]}")
            if prod.error is not None:
                raise RuntimeError(f"the producer failed: {prod.error!r}")
            if time.monotonic() >= next_at:
                s = take_sample(port, time.monotonic() - start, broker_pid)
                if s is not None:
                    samples.append(s)
                    if progress is not None:
                        progress(s)
                next_at += sample_s
        s = take_sample(port, time.monotonic() - start, broker_pid)
        if s is not None:
            samples.append(s)
        prod.stop_event.set()
        prod.join(90)
        if prod.error is not None:
            raise RuntimeError(f"the producer failed: {prod.error!r}")
        top_runs, _ = prod.mix.runs(prod.traces)
        stopped = time.monotonic()
        while time.monotonic() - stopped < DRAIN_S:
            after = take_sample(port, time.monotonic() - start, broker_pid)
            if (
                after is not None
                and after.runs_sampled >= top_runs
                and after.lag == 0
                and after.traces_open == 0
                and after.spans_decoded >= prod.spans
            ):
                drain_s = time.monotonic() - stopped
                break
            time.sleep(0.25)
    finally:
        prod.stop_event.set()
        members.stop()
    return Soak(
        rate=rate,
        seconds=seconds,
        samples=samples,
        traces=prod.traces,
        records=prod.records,
        spans=prod.spans,
        top_runs=prod.mix.runs(prod.traces)[0],
        runs=prod.mix.runs(prod.traces)[1],
        produce_seconds=prod.seconds,
        drain_s=drain_s,
        after=after,
        exit_code=proc.returncode,
        log=members.logs[0],
        store_url=store_url,
    )


# --------------------------------------------------------------------------- analysis


@dataclass(frozen=True)
class Verdict:
    name: str
    ok: bool
    detail: str


@dataclass
class Analysis:
    rss_first_half: float  # mean bytes
    rss_slope: float  # bytes per minute over the second half (least squares)
    rss_growth: float  # slope × the second half's length ÷ rss_first_half
    lag_max: float
    lag_end: float  # at the end of the load
    lag_first_quarter_max: float
    lag_last_quarter_max: float
    open_traces_max: float
    open_first_quarter_max: float
    open_last_quarter_max: float
    open_spans_max: float
    open_bytes_max: float
    cpu_per_span: float  # CPU seconds per decoded span over the load
    cpu_per_span_halves: float  # second half ÷ first half
    broker_rss_end: float
    verdicts: list[Verdict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(v.ok for v in self.verdicts)


def _slope_per_minute(samples: Sequence[Sample]) -> float:
    if len(samples) < 3:
        return 0.0
    return statistics.linear_regression([s.t / 60 for s in samples], [s.rss for s in samples]).slope


def _cpu_per_span(a: Sample, b: Sample) -> float:
    spans = b.spans_decoded - a.spans_decoded
    return (b.cpu - a.cpu) / spans if spans > 0 else 0.0


def analyse(run: Soak) -> Analysis:
    """The figures and the verdicts of a soak (thresholds: the module constants, stated in its docstring)."""
    s = run.samples
    if len(s) < 8:
        raise ValueError(f"{len(s)} samples: too few for a verdict (run longer or sample more often)")
    t_end = s[-1].t
    first_half = [x for x in s if x.t < t_end / 2]
    second_half = [x for x in s if x.t >= t_end / 2]
    first_q = [x for x in s if x.t < t_end / 4]
    last_q = [x for x in s if x.t >= 3 * t_end / 4]
    level = statistics.fmean(x.rss for x in first_half)
    slope = _slope_per_minute(second_half)
    growth = slope * (t_end - second_half[0].t) / 60 / level
    records_per_trace = run.records / run.traces if run.traces else 2.0
    lag_slack = run.rate * records_per_trace * TREND_SLACK_S
    open_slack = run.rate * TREND_SLACK_S
    mid = min(s, key=lambda x: abs(x.t - t_end / 2))
    a = Analysis(
        rss_first_half=level,
        rss_slope=slope,
        rss_growth=growth,
        lag_max=max(x.lag for x in s),
        lag_end=s[-1].lag,
        lag_first_quarter_max=max(x.lag for x in first_q),
        lag_last_quarter_max=max(x.lag for x in last_q),
        open_traces_max=max(x.traces_open for x in s),
        open_first_quarter_max=max(x.traces_open for x in first_q),
        open_last_quarter_max=max(x.traces_open for x in last_q),
        open_spans_max=max(x.spans_open for x in s),
        open_bytes_max=max(x.bytes_open for x in s),
        cpu_per_span=_cpu_per_span(s[0], s[-1]),
        cpu_per_span_halves=_cpu_per_span(mid, s[-1]) / max(_cpu_per_span(s[0], mid), 1e-12),
        broker_rss_end=s[-1].broker_rss,
    )
    lag_bound = TREND_FACTOR * a.lag_first_quarter_max + lag_slack
    open_bound = TREND_FACTOR * a.open_first_quarter_max + open_slack
    drained = run.drain_s is not None
    a.verdicts = [
        Verdict(
            "RSS flat",
            growth < RSS_GROWTH_MAX,
            f"growth over the second half {growth:+.2%} of the first half's {level / 2**20:.1f} MiB "
            f"(slope {slope / 1024:+.1f} KiB/min; threshold {RSS_GROWTH_MAX:.0%})",
        ),
        Verdict(
            "lag bounded",
            a.lag_last_quarter_max <= lag_bound and drained,
            f"last-quarter max {a.lag_last_quarter_max:.0f} ≤ {lag_bound:.0f} "
            f"({TREND_FACTOR:g} × first-quarter max {a.lag_first_quarter_max:.0f} + {TREND_SLACK_S:g} s of records); "
            + (f"drained to 0 in {run.drain_s:.1f} s" if drained else f"NOT drained within {DRAIN_S:.0f} s"),
        ),
        Verdict(
            "open traces bounded",
            a.open_last_quarter_max <= open_bound and drained,
            f"last-quarter max {a.open_last_quarter_max:.0f} ≤ {open_bound:.0f} "
            f"({TREND_FACTOR:g} × first-quarter max {a.open_first_quarter_max:.0f} + {TREND_SLACK_S:g} s of traces)"
            + ("; none open after the drain" if drained else "; still open after the drain"),
        ),
    ]
    return a


def stored_runs(url: str) -> tuple[int, int]:
    """(rows, distinct trace ids) of the store's ``runs`` table."""
    engine = sa.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        with engine.connect() as conn:
            rows, traces = conn.execute(sa.text("SELECT count(*), count(DISTINCT trace_id) FROM runs")).one()
        return int(rows), int(traces)
    finally:
        engine.dispose()


def report(run: Soak, a: Analysis) -> None:
    mib = 2**20
    print(
        f"\nload: {run.traces:,} traces ({run.spans:,} spans, {run.records:,} records) in {run.produce_seconds:.0f} s "
        f"= {run.traces / max(run.produce_seconds, 1e-9):.1f} traces/s (target {run.rate:.1f}); "
        f"root_idle_s {ROOT_IDLE_S:g}, idle_s {IDLE_S:g}"
    )
    print(
        f"RSS: first-half mean {a.rss_first_half / mib:.1f} MiB, end {run.samples[-1].rss / mib:.1f} MiB; "
        f"second-half slope {a.rss_slope:+,.0f} B/min ({a.rss_slope / 1024:+.1f} KiB/min), "
        f"growth over the second half {a.rss_growth:+.2%} of the first half's level"
    )
    print(
        f"lag: max {a.lag_max:.0f} records, at the end of the load {a.lag_end:.0f}, "
        f"first-quarter max {a.lag_first_quarter_max:.0f}, last-quarter max {a.lag_last_quarter_max:.0f}; "
        + (f"drained in {run.drain_s:.1f} s" if run.drain_s is not None else "not drained")
    )
    print(
        f"open: traces max {a.open_traces_max:.0f} (first quarter {a.open_first_quarter_max:.0f}, "
        f"last {a.open_last_quarter_max:.0f}), spans max {a.open_spans_max:.0f}, "
        f"bytes max {a.open_bytes_max / 1024:.0f} KiB"
    )
    print(
        f"CPU: {a.cpu_per_span * 1e6:.0f} µs per span over the load; second half ÷ first half "
        f"{a.cpu_per_span_halves:.2f}; broker RSS at the end {a.broker_rss_end / mib:.0f} MiB (memory storage)"
    )
    if run.after is not None:
        print(
            f"runs counted {run.after.runs_sampled:,.0f} of {run.top_runs:,} top-level runs sent; "
            f"daemon exit code {run.exit_code}"
        )
    for v in a.verdicts:
        print(f"  {'ok  ' if v.ok else 'FAIL'} {v.name}: {v.detail}")


def figures(run: Soak, a: Analysis) -> list[Figure]:
    minutes = run.seconds / 60
    load = f"{minutes:.0f} min at {run.traces / max(run.produce_seconds, 1e-9):.0f} traces/s"
    return [
        Figure(
            key="soak_rss_growth",
            label="soak: daemon RSS growth over the second half",
            value=round(a.rss_growth * 100, 2),
            unit="%",
            baseline="mean RSS of the first half",
            goal=f"< {RSS_GROWTH_MAX * 100:g}",
            detail=f"{load}; slope {a.rss_slope / 1024:+.1f} KiB/min, first half {a.rss_first_half / 2**20:.0f} MiB",
        ),
        Figure(
            key="soak_lag_max",
            label="soak: consumer lag, maximum",
            value=a.lag_max,
            unit="records",
            detail=(
                f"{load}; at the end {a.lag_end:.0f}, last-quarter max {a.lag_last_quarter_max:.0f} vs first "
                f"{a.lag_first_quarter_max:.0f}; drained in {run.drain_s if run.drain_s is not None else -1:.1f} s"
            ),
        ),
        Figure(
            key="soak_open_traces_max",
            label="soak: open traces, maximum",
            value=a.open_traces_max,
            unit="traces",
            detail=f"{load}; last-quarter max {a.open_last_quarter_max:.0f} vs first {a.open_first_quarter_max:.0f}",
        ),
        Figure(
            key="soak_cpu_per_span_halves",
            label="soak: CPU per span, second half",
            value=round(a.cpu_per_span_halves, 2),
            unit="×",
            baseline="first half",
            detail=f"{load}; {a.cpu_per_span * 1e6:.0f} µs per span over the whole load",
        ),
    ]


# --------------------------------------------------------------------------- main


def measure_capacity(bootstrap: str, partitions: int, workdir: Path, traces: int) -> float:
    """One member's traces/s through a backlog of ``traces`` (bench/e2e.py's one-member scenario)."""
    records, n_spans = make_records(traces, random.Random(7))
    topic = f"soak-capacity-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, {topic: partitions})
    produce_all(bootstrap, topic, records)
    r = e2e(1, bootstrap, topic, traces, n_spans, f"sqlite:///{workdir / 'capacity.db'}", workdir, 500)
    return traces / r.seconds


def parse_rate(text: str) -> tuple[float, bool]:
    """``'40'`` → (40, False) traces/s; ``'0.2x'`` → (0.2, True), a fraction of the measured capacity."""
    if text.endswith("x"):
        return float(text[:-1]), True
    return float(text), False


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--rate", default=DEFAULT_RATE, help="traces/s, or a fraction of one member's capacity: 0.2x")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--sample-s", type=float, default=5.0)
    parser.add_argument("--capacity-traces", type=int, default=1000)
    parser.add_argument("--publish", action="store_true", help=f"publish even under {PUBLISH_MIN_MINUTES:g} minutes")
    args = parser.parse_args(argv)

    workdir = Path(tempfile.mkdtemp(prefix="bench-soak."))
    broker = TansuBroker(workdir)
    broker.start()
    cluster = None
    try:
        if args.store == "postgres":
            from tests.support.postgres import PostgresCluster

            cluster = PostgresCluster()
            cluster.start()
            store_url = cluster.create_database(f"soak_{uuid.uuid4().hex[:6]}")
        else:
            store_url = f"sqlite:///{workdir / 'soak.db'}"
        value, relative = parse_rate(args.rate)
        rate = value
        if relative:
            capacity = measure_capacity(broker.bootstrap, args.partitions, workdir, args.capacity_traces)
            rate = value * capacity
            print(f"one-member capacity {capacity:.0f} traces/s; soak rate {value:g} × that = {rate:.1f} traces/s")
        print(
            f"soak: {args.minutes:g} min at {rate:.1f} traces/s, {args.partitions} partitions, store {args.store}, "
            f"sampled every {args.sample_s:g} s; logs in {workdir}",
            flush=True,
        )
        minute = [0]

        def progress(s: Sample) -> None:
            if s.t // 60 > minute[0]:
                minute[0] = int(s.t // 60)
                print(
                    f"  {s.t / 60:5.1f} min  RSS {s.rss / 2**20:6.1f} MiB  CPU {s.cpu:7.1f} s  lag {s.lag:5.0f}  "
                    f"open {s.traces_open:4.0f}  runs {s.runs_sampled:9,.0f}  broker {s.broker_rss / 2**20:6.0f} MiB",
                    flush=True,
                )

        run = soak(
            broker.bootstrap,
            rate=rate,
            seconds=args.minutes * 60,
            store_url=store_url,
            workdir=workdir,
            partitions=args.partitions,
            sample_s=args.sample_s,
            broker_pid=broker.proc.pid if broker.proc is not None else None,
            progress=progress,
        )
        rows, traces = stored_runs(store_url)
    finally:
        broker.stop()
        if cluster is not None:
            cluster.destroy()
    a = analyse(run)
    report(run, a)
    stored_ok = traces == run.traces and rows == run.runs
    print(
        f"  {'ok  ' if stored_ok else 'FAIL'} stored once: {rows:,} runs of {traces:,} traces in the store; "
        f"sent {run.runs:,} runs of {run.traces:,} traces"
    )
    if args.minutes >= PUBLISH_MIN_MINUTES or args.publish:
        publish("soak", shlex.join([".venv/bin/python", "bench/soak.py", *argv]), figures(run, a))
    else:
        print(f"(a run under {PUBLISH_MIN_MINUTES:g} minutes is not published; --publish forces it)")
    return 0 if a.ok and stored_ok and run.exit_code == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
