"""``monitor eval --traces``: recorded trajectories from OTLP record files, matched to cases.

Record files (any layout :mod:`monitor.ingest.files` reads) are decoded and rebuilt with the
daemon's own :func:`~monitor.trajectory.build.build_runs`. A top-level run belongs to a case when
its root span or resource carries ``monitor.eval.case_id``; ``monitor.eval.run`` (default 0)
numbers the repetition and ``monitor.eval.turn`` the turn. Runs of one (case, repetition) without
turn numbers are taken as the turns in start-time order. Runs without a case id are ignored.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from monitor.ingest.decode import DecodeError, decode_traces
from monitor.ingest.files import read_records
from monitor.trajectory.build import build_runs
from monitor.trajectory.model import Run
from monitor.trajectory.semconv import Monitor
from monitor.trajectory.spans import SpanRecord

__all__ = ["TraceIndex", "TraceLoadError", "load_traces"]


class TraceLoadError(Exception):
    """A trace file that cannot be read or decoded (exit 2)."""


def _int(value: str | None, what: str, run: Run) -> int | None:
    if value is None:
        return None
    try:
        return int(value)
    except ValueError:
        raise TraceLoadError(
            f"run {run.run_id} of trace {run.trace_id}: {what} = {value!r} is not an integer"
        ) from None


@dataclass
class TraceIndex:
    """Runs by case id → repetition number → turns (in order)."""

    cases: dict[str, dict[int, list[Run]]] = field(default_factory=dict)
    unmatched: int = 0

    @classmethod
    def from_runs(cls, runs: Sequence[Run]) -> TraceIndex:
        grouped: dict[str, dict[int, list[tuple[int | None, int, Run]]]] = defaultdict(lambda: defaultdict(list))
        unmatched = 0
        for run in runs:
            case_id = run.attribute(Monitor.CASE_ID)
            if case_id is None:
                unmatched += 1
                continue
            run_no = _int(run.attribute(Monitor.RUN), Monitor.RUN, run) or 0
            turn = _int(run.attribute(Monitor.TURN), Monitor.TURN, run)
            grouped[case_id][run_no].append((turn, run.start_ns or 0, run))
        index = cls(unmatched=unmatched)
        for case_id, reps in grouped.items():
            index.cases[case_id] = {}
            for run_no in sorted(reps):
                items = reps[run_no]
                items.sort(key=lambda t: (t[0] if t[0] is not None else -1, t[1], t[2].run_id))
                index.cases[case_id][run_no] = [r for _, _, r in items]
        return index

    def repetitions(self, case_id: str) -> list[tuple[int, list[Run]]] | None:
        """``[(run_no, runs by turn)]`` of a case, or None when the traces hold nothing for it."""
        reps = self.cases.get(case_id)
        if reps is None:
            return None
        return sorted(reps.items())


def load_traces(paths: Sequence[Path], encoding: str = "auto") -> TraceIndex:
    """Decode every record of ``paths``, rebuild the runs and index them by case id.

    An unreadable file or an undecodable record is a :class:`TraceLoadError` naming the file and
    the record number: a gate must not pass on partly read evidence.
    """
    spans: list[SpanRecord] = []
    for path in paths:
        try:
            records = read_records(path)
        except OSError as exc:
            raise TraceLoadError(f"{path}: cannot read: {exc.strerror or exc}") from None
        for number, value in enumerate(records, 1):
            try:
                spans.extend(decode_traces(value, encoding))
            except DecodeError as exc:
                raise TraceLoadError(f"{path} record {number}: {exc.reason}: {exc.detail}") from None
    return TraceIndex.from_runs(build_runs(spans))
