"""Benchmark: the two consumer clients (``kafka.client``) on one Tansu broker in the same run: kafka-python
(:class:`~monitor.ingest.consumer.KafkaSource`) against confluent-kafka on librdkafka
(:class:`~monitor.ingest.consumer_confluent.ConfluentSource`), raw and with the whole daemon behind them.

Set-up: a Tansu broker (memory storage) on a free loopback port and one topic of ``--partitions`` partitions holding
a backlog of ``--traces`` agent traces, built by bench/e2e.py's ``make_records`` (every recorded framework fixture
under fresh trace ids, each trace split over two records keyed by its hex trace id, half OTLP protobuf and half
OTLP/JSON), so that both scenarios read exactly what bench/e2e.py reads.

* **raw**: each client, through its ``Source`` adapter (what the daemon's run loop calls; default fetch settings,
  the daemon's ``max_poll_records``), in a fresh group, reads the whole backlog in this process and touches each
  record's value. Timed from the assignment callback (so that neither the ~3 s group join nor librdkafka's prefetch
  before the first record is left out of the window) to the last record; CPU is this process's CPU time over the
  same window (``time.process_time``: every thread, kafka-python's network thread and librdkafka's included; the
  broker is another process). ``--trials`` rounds, the two clients alternating which goes first; medians.
* **e2e**: one daemon (``python -m monitor run``, bench/e2e.py's ``e2e()``: from the first record consumed to every
  run counted after the store accepted it) with each client, in a fresh group, on the same backlog and the same
  store kind (PostgreSQL when the binaries are there, else SQLite); CPU per span from the daemon's
  ``process_cpu_seconds_total``. ``--e2e-trials`` rounds, alternating; medians.

Published (``bench/results/consume.json``): confluent ÷ kafka-python raw rate, the CPU per record of each, the
daemon's spans/s with each client and their ratio (a ratio near 1 means the consumer is not what bounds the daemon),
and the daemon's CPU per span with confluent ÷ with kafka-python (steadier than the rate on a shared machine).

    .venv/bin/python bench/consume.py [--traces 2000] [--partitions 8] [--trials 5] [--e2e-trials 3]
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import e2e as e2e_bench  # noqa: E402
from bench.figures import Figure, publish  # noqa: E402
from monitor.demo.broker import TansuBroker  # noqa: E402
from monitor.ingest.consumer import KafkaSource, PartitionsCallback, Source  # noqa: E402
from monitor.ingest.consumer_confluent import ConfluentSource  # noqa: E402
from monitor.settings import KafkaSettings  # noqa: E402
from tests.support.kafka import create_topics  # noqa: E402

Client = Literal["kafka-python", "confluent"]
CLIENTS: tuple[Client, Client] = ("kafka-python", "confluent")
SOURCES: dict[Client, Callable[[KafkaSettings, PartitionsCallback, PartitionsCallback], Source]] = {
    "kafka-python": KafkaSource,
    "confluent": ConfluentSource,
}


@dataclass(frozen=True)
class Raw:
    """One raw pass: wall seconds and CPU seconds from the assignment to the last record."""

    client: Client
    records: int
    spans: int
    seconds: float
    cpu_s: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def spans_per_s(self) -> float:
        return self.spans / self.seconds

    @property
    def cpu_per_record_us(self) -> float:
        return self.cpu_s / self.records * 1e6


def raw_pass(client: Client, bootstrap: str, topic: str, n_records: int, n_spans: int, mpr: int) -> Raw:
    """``client``'s Source reads the backlog in a fresh group; raises when it does not get every record in 120 s."""
    settings = KafkaSettings.model_validate(
        {
            "bootstrap_servers": bootstrap,
            "spans_topic": topic,
            "group_id": f"bench-consume-{client}-{uuid.uuid4().hex[:6]}",
            "client": client,
            "session_timeout_ms": 6000,
            "heartbeat_interval_ms": 500,
            "max_poll_records": mpr,
        }
    )
    start: list[float] = []

    def assigned(tps: list[tuple[str, int]]) -> None:
        if tps and not start:
            start.extend((time.perf_counter(), time.process_time()))

    source = SOURCES[client](settings, lambda tps: None, assigned)
    seen = value_bytes = 0
    try:
        deadline = time.monotonic() + 120
        while seen < n_records and time.monotonic() < deadline:
            batch = source.poll(200)
            seen += len(batch)
            value_bytes += sum(len(r.value or b"") for r in batch)
        wall, cpu = time.perf_counter(), time.process_time()
    finally:
        source.close()
    if seen != n_records or not start:
        raise RuntimeError(f"{client}: read {seen} of {n_records} records")
    assert value_bytes > 0
    return Raw(client, n_records, n_spans, wall - start[0], cpu - start[1])


@dataclass(frozen=True)
class Daemon:
    client: Client
    spans_per_s: float
    cpu_per_span_us: float


def daemon_pass(
    client: Client, bootstrap: str, topic: str, n_runs: int, n_spans: int, store_url: str, workdir: Path, mpr: int
) -> Daemon:
    e2e_bench.DAEMON_CLIENT = client  # bench/e2e.py's --client: the kafka.client of the daemons it starts
    try:
        row = e2e_bench.e2e(1, bootstrap, topic, n_runs, n_spans, store_url, workdir, mpr)
    finally:
        e2e_bench.DAEMON_CLIENT = "kafka-python"
    return Daemon(client, row.spans_per_s, row.cpu_s / n_spans * 1e6)


def alternating(trials: int) -> list[tuple[Client, Client]]:
    """The order of the two clients in each round: kafka-python first in even rounds, confluent in odd ones."""
    return [CLIENTS if i % 2 == 0 else (CLIENTS[1], CLIENTS[0]) for i in range(trials)]


def median(values: list[float]) -> float:
    return statistics.median(values)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--traces", type=int, default=2000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--trials", type=int, default=5, help="raw rounds (each reads the backlog with both)")
    parser.add_argument("--e2e-trials", type=int, default=3, help="daemon rounds (0: raw only)")
    parser.add_argument("--max-poll-records", type=int, default=500)
    parser.add_argument("--store", choices=("auto", "sqlite", "postgres"), default="auto")
    parser.add_argument("--no-publish", action="store_true", help="print only, do not write bench/results/consume.json")
    args = parser.parse_args(argv)
    command = shlex.join([".venv/bin/python", "bench/consume.py", *(argv if argv is not None else sys.argv[1:])])

    began = time.monotonic()
    workdir = Path(tempfile.mkdtemp(prefix="bench-consume."))
    broker = TansuBroker(workdir)
    broker.start()
    cluster = None
    raws: dict[Client, list[Raw]] = {c: [] for c in CLIENTS}
    daemons: dict[Client, list[Daemon]] = {c: [] for c in CLIENTS}
    try:
        records, n_spans = e2e_bench.make_records(args.traces, random.Random(7))
        size = sum(len(v) for _, v in records)
        topic = f"bench-consume-{uuid.uuid4().hex[:6]}"
        create_topics(broker.bootstrap, {topic: args.partitions})
        produce_s = e2e_bench.produce_all(broker.bootstrap, topic, records)
        print(
            f"backlog: {len(records)} records ({size / 1e6:.1f} MB), {n_spans} spans, {args.traces} runs, "
            f"{args.partitions} partitions; produced in {produce_s:.2f}s"
        )
        for round_no, order in enumerate(alternating(args.trials)):
            for client in order:
                r = raw_pass(client, broker.bootstrap, topic, len(records), n_spans, args.max_poll_records)
                raws[client].append(r)
                print(
                    f"  raw {round_no + 1}/{args.trials} {client:<13}{r.seconds:>7.3f}s {r.records_per_s:>10,.0f} "
                    f"records/s {r.spans_per_s:>10,.0f} spans/s {r.cpu_per_record_us:>7.1f} µs CPU/record"
                )
        if args.e2e_trials:
            store_kind, cluster = e2e_bench.open_store_factory(args.store)
            for round_no, order in enumerate(alternating(args.e2e_trials)):
                for client in order:
                    name = f"consume_{client.replace('-', '_')}_{round_no}_{uuid.uuid4().hex[:6]}"
                    url = (
                        str(cluster.create_database(name))  # type: ignore[attr-defined]
                        if cluster is not None
                        else f"sqlite:///{workdir / (name + '.db')}"
                    )
                    d = daemon_pass(
                        client, broker.bootstrap, topic, args.traces, n_spans, url, workdir, args.max_poll_records
                    )
                    daemons[client].append(d)
                    print(
                        f"  e2e {round_no + 1}/{args.e2e_trials} {client:<13}{d.spans_per_s:>10,.0f} spans/s "
                        f"{d.cpu_per_span_us:>7.0f} µs CPU/span ({store_kind})"
                    )
    finally:
        broker.stop()
        if cluster is not None:
            cluster.destroy()  # type: ignore[attr-defined]

    kp, cf = CLIENTS
    rate = {c: median([r.records_per_s for r in raws[c]]) for c in CLIENTS}
    span_rate = {c: median([r.spans_per_s for r in raws[c]]) for c in CLIENTS}
    cpu = {c: median([r.cpu_per_record_us for r in raws[c]]) for c in CLIENTS}
    print()
    print(f"{'raw, median of ' + str(args.trials):<22}{'records/s':>11}{'spans/s':>11}{'µs CPU/record':>15}")
    for c in CLIENTS:
        print(f"{c:<22}{rate[c]:>11,.0f}{span_rate[c]:>11,.0f}{cpu[c]:>15.1f}")
    print(f"confluent ÷ kafka-python: rate {rate[cf] / rate[kp]:.2f}×, CPU per record {cpu[cf] / cpu[kp]:.2f}×")
    figures = [
        Figure(
            key="consume_raw_rate_ratio",
            label="raw consume rate, confluent-kafka ÷ kafka-python (through the Source port)",
            value=round(rate[cf] / rate[kp], 2),
            unit="×",
            baseline="kafka-python, same backlog and broker, same run",
            detail=f"{rate[cf]:,.0f} vs {rate[kp]:,.0f} records/s, {span_rate[cf]:,.0f} vs {span_rate[kp]:,.0f} "
            f"spans/s; median of {args.trials}",
        ),
        Figure(
            key="consume_cpu_per_record_kafka_python",
            label="consumer CPU per record, kafka-python",
            value=round(cpu[kp], 1),
            unit="µs",
            detail=f"process CPU ÷ records, {len(records)} records of {size / len(records) / 1e3:.1f} kB",
        ),
        Figure(
            key="consume_cpu_per_record_confluent",
            label="consumer CPU per record, confluent-kafka",
            value=round(cpu[cf], 1),
            unit="µs",
            detail=f"{cpu[cf] / cpu[kp]:.2f}× kafka-python's; librdkafka's threads included",
        ),
    ]
    if args.e2e_trials:
        e2e_rate = {c: median([d.spans_per_s for d in daemons[c]]) for c in CLIENTS}
        e2e_cpu = {c: median([d.cpu_per_span_us for d in daemons[c]]) for c in CLIENTS}
        print()
        print(f"{'daemon, median of ' + str(args.e2e_trials):<22}{'spans/s':>11}{'µs CPU/span':>13}")
        for c in CLIENTS:
            print(f"{c:<22}{e2e_rate[c]:>11,.0f}{e2e_cpu[c]:>13.0f}")
        ratio = e2e_rate[cf] / e2e_rate[kp]
        print(f"confluent ÷ kafka-python end to end: {ratio:.2f}×")
        for c in CLIENTS:
            trials = ", ".join(f"{d.spans_per_s:,.0f}" for d in daemons[c])
            figures.append(
                Figure(
                    key=f"consume_e2e_spans_per_s_{c.replace('-', '_')}",
                    label=f"daemon end to end, kafka.client: {c}",
                    value=round(e2e_rate[c]),
                    unit="spans/s",
                    detail=f"median of {trials}; {e2e_cpu[c]:.0f} µs CPU per span; 1 member, {n_spans} spans",
                )
            )
        figures.append(
            Figure(
                key="consume_e2e_ratio",
                label="daemon end to end throughput, confluent ÷ kafka-python",
                value=round(ratio, 2),
                unit="×",
                baseline="the daemon with kafka-python, same backlog and run",
                detail=f"{e2e_rate[cf]:,.0f} vs {e2e_rate[kp]:,.0f} spans/s",
            )
        )
        figures.append(
            Figure(
                key="consume_e2e_cpu_ratio",
                label="daemon CPU per span, confluent ÷ kafka-python",
                value=round(e2e_cpu[cf] / e2e_cpu[kp], 2),
                unit="×",
                baseline="the daemon with kafka-python, same backlog and run",
                detail=f"{e2e_cpu[cf]:.0f} vs {e2e_cpu[kp]:.0f} µs (process CPU ÷ spans)",
            )
        )
    if not args.no_publish:
        publish("consume", command, figures)
    print(f"\n(total {time.monotonic() - began:.0f}s; logs in {workdir})")


if __name__ == "__main__":
    main()
