"""Benchmark: the store's write path (``SqlResultStore.write_all``) against the bare driver, on SQLite and PostgreSQL.

The rows are the daemon's own: every recorded framework fixture (tests/fixtures/frameworks, via
bench/decode_rebuild.py: fresh trace ids, each trace split over two records) is decoded, assembled, rebuilt,
every run sampled and scored by the real :class:`~monitor.scoring.stage.ScoringStage` (the default checks),
kept by the real :class:`~monitor.store.kept.RunKeeper`, with the replay marks of each trace
(:func:`~monitor.ingest.replay.trace_marks`); the traces go in batches of the store step's ``WRITE_BATCH``.

Timed in the same run, per backend, on a fresh migrated database each pass:

* ``ours``: ``write_all(rows, marks, kept=…, tools=…)`` per batch: everything the store does per write
  (conversion of the daemon's objects, idempotency, the returned new-flags), one transaction per batch;
* ``baseline``: the bare driver (``sqlite3`` / ``psycopg``, no SQLAlchemy) inserting the very same rows,
  converted beforehand (untimed) to tuples, one ``executemany`` of a plain ``INSERT`` per table per batch
  (tool definitions recur across batches: theirs is ``ON CONFLICT DO NOTHING``), one transaction per batch.

Printed per backend: wall µs per row (every row of every table), client CPU µs per row, and ours ÷ baseline.
The median of ``--passes`` counts (the modes alternate; one untimed warm-up pass first). SQLite is a file
(WAL, ``synchronous=NORMAL``, as the store sets it); PostgreSQL a throwaway local cluster
(tests/support/postgres.py: ``fsync`` off, so the figure is CPU and round trips, not the disk).

Published (``bench/results/store.json``, only when both backends ran): per backend the client CPU ratio, the
figure with a goal (the store write is CPU of the daemon's; the server's share, the same for both, is left out),
and the wall-time ratio (on a shared machine the noisier of the two).

    .venv/bin/python bench/store.py [--traces 600] [--passes 3] [--backend sqlite|postgresql|both] [--no-publish]
"""

from __future__ import annotations

import argparse
import dataclasses
import enum
import json
import math
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.decode_rebuild import make_records  # noqa: E402
from bench.figures import Figure, publish  # noqa: E402
from monitor.ingest.decode import decode_traces  # noqa: E402
from monitor.ingest.loop import WRITE_BATCH  # noqa: E402
from monitor.ingest.replay import trace_marks  # noqa: E402
from monitor.sampling.sampler import Sampler  # noqa: E402
from monitor.scoring.stage import ScoringStage  # noqa: E402
from monitor.settings import Settings, StoreSettings  # noqa: E402
from monitor.store import KeptRun, OfferedTool, ReplayMark, StoredResult, open_store  # noqa: E402
from monitor.store.kept import RunKeeper  # noqa: E402
from monitor.trajectory.assembler import Assembler, AssemblerLimits  # noqa: E402
from monitor.trajectory.build import build_runs  # noqa: E402

COMMAND = ".venv/bin/python bench/store.py"
GOALS = {"sqlite": "<= 3", "postgresql": "<= 2"}
"""Client CPU per row, ours ÷ the bare driver (which converts nothing: its tuples are built before timing)."""


@dataclasses.dataclass
class Batch:
    """One write of the store step: its rows as the daemon hands them over, and the same rows as tuples."""

    results: list[StoredResult]
    marks: list[ReplayMark]
    kept: list[KeptRun]
    tools: list[OfferedTool]
    tables: dict[str, list[tuple[Any, ...]]] = dataclasses.field(default_factory=dict)

    @property
    def rows(self) -> int:
        return sum(len(t) for t in self.tables.values())


def build_batches(n_traces: int, batch_size: int) -> list[Batch]:
    """The fixtures' traces decoded, rebuilt, scored and kept, in batches of ``batch_size`` traces."""
    records, _ = make_records(n_traces)
    assembler = Assembler(AssemblerLimits(root_idle_s=0.0, idle_s=0.0))
    for offset, (_, value) in enumerate(records):
        assembler.add_spans(decode_traces(value), ("otlp_spans", 0), offset, now=0.0)
    closed = assembler.poll(now=1.0)
    settings = Settings.model_validate({"store": {"url": "sqlite://"}, "sampling": {"rate": 1.0}})
    stage = ScoringStage(settings, None, Sampler(settings.sampling), lambda: datetime.now(UTC))
    keeper = RunKeeper(settings.store.summaries)
    seen_at = datetime.now(UTC)
    batches: list[Batch] = []
    for start in range(0, len(closed), batch_size):
        batch = Batch([], [], [], [])
        for trace in closed[start : start + batch_size]:
            for run in build_runs(trace.spans, trace.logs):
                by_id = {r.run_id: r for r in run.walk()}
                for result in stage.score(run):  # as monitor.steps.score.ScoreStep does
                    owner = by_id.get(result.run_id or "", run)
                    names = tuple(c.name for c in owner.calls)
                    batch.results.append(StoredResult(result=result, run_start_ns=owner.start_ns, tools=names))
                kept, offered = keeper.keep(run, seen_at)
                batch.kept.extend(kept)
                batch.tools.extend(offered)
            batch.marks.extend(trace_marks(trace))
        batch.tables = tuples_of(batch)
        batches.append(batch)
    return batches


# --- the baseline's tuples (built before timing) -------------------------------------------------------------


def _default(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset):
        return sorted(value, key=repr)
    return str(value)


def _json(value: Any) -> str | None:
    return None if value is None else json.dumps(value, ensure_ascii=False, default=_default)


def _finite(value: float | None) -> float | None:
    return value if value is None or math.isfinite(value) else None


def tuples_of(batch: Batch) -> dict[str, list[tuple[Any, ...]]]:
    """Every row ``write_all`` writes for ``batch`` (into an empty database), as plain tuples per table. Results
    carry their id (1, 2, … per batch, offset when inserted) so issues can reference them without a round trip."""
    runs: dict[tuple[str, str], tuple[Any, ...]] = {}
    results: list[tuple[Any, ...]] = []
    issues: list[tuple[Any, ...]] = []
    for number, item in enumerate(batch.results, start=1):
        r = item.result
        assert r.trace_id and r.run_id and r.scored_at
        scored_at = datetime.fromisoformat(r.scored_at).astimezone(UTC)
        start = None if item.run_start_ns is None else datetime.fromtimestamp(item.run_start_ns / 1e9, tz=UTC)
        runs.setdefault(
            (r.trace_id, r.run_id),
            (r.trace_id, r.run_id, r.agent, r.conversation_id, start, _json(list(item.tools)), scored_at, scored_at),
        )
        results.append(
            (
                number,
                r.trace_id,
                r.run_id,
                r.agent,
                r.scorer,
                r.scorer_version,
                r.scorer_kind,
                r.params_hash,
                _json(dict(r.params)),
                r.status,
                _finite(r.score),
                r.threshold,
                r.passed,
                r.reason,
                r.degraded,
                _json(r.details),
                _json(r.judge),
                scored_at,
            )
        )
        for i in r.issues:
            issues.append(
                (
                    number,
                    str(i.kind),
                    str(i.severity),
                    i.tool,
                    i.parameter,
                    i.call_index,
                    i.call_id,
                    i.turn,
                    None,
                    _json(i.expected),
                    _json(i.actual),
                    _json(i.detail),
                )
            )
    summaries = {
        (k.trace_id, k.run_id): (
            k.trace_id,
            k.run_id,
            k.agent,
            k.user_text,
            k.final_response,
            k.status,
            _finite(k.duration_ms),
            k.calls,
            _json(dict(k.run)),
        )
        for k in batch.kept
        if (k.trace_id, k.run_id) in runs
    }
    tools = {
        (t.agent, t.name, t.definition_hash): (
            t.agent,
            t.name,
            t.definition_hash,
            t.description,
            _json(t.input_schema),
            t.seen_at,
            t.seen_at,
        )
        for t in batch.tools
    }
    now = datetime.now(UTC)
    marks = {
        (m.topic, m.partition, m.kind, m.ident): (m.topic, m.partition, m.kind, m.ident, m.last_offset, now)
        for m in batch.marks
    }
    return {
        "runs": [runs[k] for k in sorted(runs)],
        "results": results,
        "issues": issues,
        "replay_marks": [marks[k] for k in sorted(marks)],
        "run_summaries": [summaries[k] for k in sorted(summaries)],
        "tool_definitions": [tools[k] for k in sorted(tools)],
    }


_COLUMNS = {
    "runs": "trace_id, run_id, agent, conversation_id, start_time, tools, first_scored_at, last_scored_at",
    "results": "id, trace_id, run_id, agent, scorer, scorer_version, scorer_kind, params_hash, params, status, "
    "score, threshold, passed, reason, degraded, details, judge, scored_at",
    "issues": "result_id, kind, severity, tool, parameter, call_index, call_id, turn, expected_tool, expected, "
    "actual, detail",
    "replay_marks": "topic, partition, kind, ident, last_offset, marked_at",
    "run_summaries": "trace_id, run_id, agent, user_text, final_response, status, duration_ms, calls, run",
    "tool_definitions": "agent, name, definition_hash, description, input_schema, first_seen, last_seen",
}
_ORDER = ["runs", "results", "issues", "replay_marks", "run_summaries", "tool_definitions"]


def _sql(table: str, placeholder: str) -> str:
    n = _COLUMNS[table].count(",") + 1
    sql = f"INSERT INTO {table} ({_COLUMNS[table]}) VALUES ({', '.join([placeholder] * n)})"
    return sql + (" ON CONFLICT DO NOTHING" if table == "tool_definitions" else "")


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):  # SQLAlchemy's SQLite DATETIME text, in UTC
        return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    return value


def _with_ids(table: str, rows: list[tuple[Any, ...]], offset: int) -> list[tuple[Any, ...]]:
    if table in ("results", "issues"):
        return [(row[0] + offset, *row[1:]) for row in rows]
    return rows


# --- the timed writers ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Timing:
    wall: float
    cpu: float


def _timed(action: Callable[[], None]) -> Timing:
    wall, cpu = time.perf_counter(), time.process_time()
    action()
    return Timing(time.perf_counter() - wall, time.process_time() - cpu)


def ours(url: str, batches: Sequence[Batch]) -> Timing:
    """``write_all`` of every batch into a fresh migrated database at ``url``."""
    store = open_store(StoreSettings.model_validate({"url": url}))
    try:

        def write() -> None:
            for b in batches:
                flags = store.write_all(b.results, b.marks, kept=b.kept, tools=b.tools)
                assert all(flags), "a fresh database: every result is new"

        return _timed(write)
    finally:
        store.close()


def baseline_sqlite(path: Path, batches: Sequence[Batch]) -> Timing:
    """The same rows through ``sqlite3`` directly (the store's pragmas), one executemany per table per batch."""
    open_store(StoreSettings.model_validate({"url": f"sqlite:///{path}"})).close()  # the schema
    prepared = []
    offset = 0
    for b in batches:
        tables = {
            t: [tuple(_sqlite_value(v) for v in row) for row in _with_ids(t, b.tables[t], offset)] for t in _ORDER
        }
        prepared.append(tables)
        offset += len(b.tables["results"])
    conn = sqlite3.connect(path, isolation_level=None)
    for pragma in ("foreign_keys=ON", "journal_mode=WAL", "synchronous=NORMAL"):
        conn.execute(f"PRAGMA {pragma}")
    statements = {t: _sql(t, "?") for t in _ORDER}

    def write() -> None:
        for tables in prepared:
            conn.execute("BEGIN")
            for table in _ORDER:
                if tables[table]:
                    conn.executemany(statements[table], tables[table])
            conn.execute("COMMIT")

    try:
        timing = _timed(write)
        (stored,) = conn.execute("SELECT count(*) FROM results").fetchone()
        assert stored == offset, f"the baseline stored {stored} results of {offset}"
        return timing
    finally:
        conn.close()


def baseline_postgres(url: str, batches: Sequence[Batch]) -> Timing:
    """The same rows through ``psycopg`` directly, one executemany per table per batch."""
    import psycopg

    open_store(StoreSettings.model_validate({"url": url})).close()  # the schema
    prepared = []
    offset = 0
    for b in batches:
        prepared.append({t: _with_ids(t, b.tables[t], offset) for t in _ORDER})
        offset += len(b.tables["results"])
    conn = psycopg.connect(url.replace("postgresql+psycopg://", "postgresql://", 1))
    statements = {t: _sql(t, "%s") for t in _ORDER}

    def write() -> None:
        for tables in prepared:
            with conn.transaction(), conn.cursor() as cur:
                for table in _ORDER:
                    if tables[table]:
                        cur.executemany(statements[table], tables[table])

    try:
        timing = _timed(write)
        row = conn.execute("SELECT count(*) FROM results").fetchone()
        assert row is not None and row[0] == offset, f"the baseline stored {row} results of {offset}"
        return timing
    finally:
        conn.close()


# --- the run -------------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Result:
    backend: str
    rows: int
    results: int
    ours: list[Timing]
    baseline: list[Timing]

    def per_row(self, timings: list[Timing], what: str) -> float:
        seconds: float = statistics.median(t.wall if what == "wall" else t.cpu for t in timings)
        return seconds / self.rows * 1e6

    def ratio(self, what: str) -> float:
        return self.per_row(self.ours, what) / self.per_row(self.baseline, what)


def measure(backend: str, batches: Sequence[Batch], passes: int, databases: Iterator[str]) -> Result:
    """Warm-up pass, then ``passes`` alternating passes of both modes, each on a fresh database."""
    result = Result(backend, sum(b.rows for b in batches), sum(len(b.results) for b in batches), [], [])

    def run_ours() -> Timing:
        return ours(next(databases), batches)

    def run_baseline() -> Timing:
        url = next(databases)
        if backend == "sqlite":
            return baseline_sqlite(Path(url.removeprefix("sqlite:///")), batches)
        return baseline_postgres(url, batches)

    run_ours(), run_baseline()  # warm-up: statement compilation, caches, the server's first touches
    for i in range(passes):
        if i % 2:
            result.baseline.append(run_baseline())
            result.ours.append(run_ours())
        else:
            result.ours.append(run_ours())
            result.baseline.append(run_baseline())
    return result


def sqlite_databases(directory: Path) -> Iterator[str]:
    n = 0
    while True:
        n += 1
        yield f"sqlite:///{directory / f'bench-{n}.db'}"


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--traces", type=int, default=600, help="traces written per pass (default 600)")
    ap.add_argument("--passes", type=int, default=3, help="timed passes per mode, the median counts (default 3)")
    ap.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    ap.add_argument("--no-publish", action="store_true", help="print only (so does a single --backend)")
    args = ap.parse_args(argv)

    began = time.perf_counter()
    batches = build_batches(args.traces, WRITE_BATCH)
    counts = {t: sum(len(b.tables[t]) for b in batches) for t in _ORDER}
    print(
        f"{args.traces} traces in {len(batches)} batches of {WRITE_BATCH}: "
        + ", ".join(f"{t} {n}" for t, n in counts.items())
        + f" (built in {time.perf_counter() - began:.1f} s)"
    )
    measured: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="store-bench-") as tmp:
        if args.backend in ("sqlite", "both"):
            measured.append(measure("sqlite", batches, args.passes, sqlite_databases(Path(tmp))))
        if args.backend in ("postgresql", "both"):
            from tests.support.postgres import PostgresCluster

            with PostgresCluster.running_cluster() as cluster:
                measured.append(measure("postgresql", batches, args.passes, _pg_databases(cluster)))

    figures: list[Figure] = []
    print(f"median of {args.passes} passes; µs per row written (all tables), wall / client CPU")
    for r in measured:
        print(
            f"  {r.backend:10s} baseline {r.per_row(r.baseline, 'wall'):6.2f} / {r.per_row(r.baseline, 'cpu'):6.2f}"
            f"   ours {r.per_row(r.ours, 'wall'):6.2f} / {r.per_row(r.ours, 'cpu'):6.2f}"
            f"   ours ÷ baseline {r.ratio('wall'):5.2f}× wall, {r.ratio('cpu'):5.2f}× CPU"
        )
        name, driver = ("SQLite", "sqlite3") if r.backend == "sqlite" else ("PostgreSQL", "psycopg")
        figures.append(
            Figure(
                key=f"store_write_cpu_{r.backend}",
                label=f"store write_all on {name}, client CPU per row",
                value=round(r.ratio("cpu"), 2),
                unit="×",
                baseline=f"bare {driver} executemany of the same rows",
                goal=GOALS[r.backend],
                detail=f"ours {r.per_row(r.ours, 'cpu'):.1f} µs/row, bare {r.per_row(r.baseline, 'cpu'):.1f}; "
                f"{r.rows} rows of {args.traces} traces",
            )
        )
        figures.append(
            Figure(
                key=f"store_write_wall_{r.backend}",
                label=f"store write_all on {name}, wall time per row",
                value=round(r.ratio("wall"), 2),
                unit="×",
                baseline=f"bare {driver} executemany of the same rows",
                detail=f"ours {r.per_row(r.ours, 'wall'):.1f} µs/row, bare {r.per_row(r.baseline, 'wall'):.1f}",
            )
        )
    if not args.no_publish and args.backend == "both":
        publish("store", COMMAND, figures)
    return 0


def _pg_databases(cluster: Any) -> Iterator[str]:
    while True:
        yield cluster.create_database()


if __name__ == "__main__":
    sys.exit(main())
