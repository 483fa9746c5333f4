"""Observe: count what the store took, once.

For each trace that reached the store (or was handled before): ``monitor_traces_rejected_total`` for a rejected
trace, ``monitor_replays_skipped_total{kind="trace"}`` for a replayed one, ``monitor_spans_unrecognized_total``
for the spans of a trace no known convention reads; the quality metrics of every result the
store took as **new** (``Metrics.observe_results``, per top-level run), ``monitor_store_writes_total`` (new /
duplicate) and ``monitor_runs_sampled_total`` (sampled / skipped), or ``monitor_traces_unsampled_total`` for a
trace sampled out before its rebuild; and ``monitor_record_to_result_seconds``, from the Kafka timestamp of the
trace's last record to now (``wall``, Unix seconds). A replay therefore never counts twice.
Judge verdicts: the quality metrics of the new ones (``Metrics.observe_verdicts``: the run and its calls are not
counted again) and ``monitor_store_writes_total``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from monitor.scoring.result import ScoreResult
from monitor.steps.contract import Message, Step, TransformStep
from monitor.steps.work import LoopStats, PipelineMetrics, TraceWork, VerdictWork

Work = TraceWork | VerdictWork | None


class ObserveStep(TransformStep[Work, Work]):
    """Metrics and stats of stored traces; never rejects unless the next step does."""

    def __init__(
        self,
        next_step: Step[Work],
        *,
        metrics: PipelineMetrics,
        stats: LoopStats,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(next_step)
        self.metrics = metrics
        self.stats = stats
        self.wall = wall

    def process(self, message: Message[Work]) -> Message[Work]:
        work = message.payload
        if isinstance(work, VerdictWork):
            self._observe_verdicts(work)
        elif work is not None:
            self._observe(work)
        return message

    def _observe_verdicts(self, work: VerdictWork) -> None:
        new_by_run: dict[int, list[ScoreResult]] = {}
        for row, owner, new in zip(work.rows, work.owners, work.new, strict=True):
            if new:
                new_by_run.setdefault(owner, []).append(row.result)
        for owner, results in new_by_run.items():
            self.metrics.observe_verdicts(work.runs[owner], results)
        n_new = sum(len(results) for results in new_by_run.values())
        if n_new:
            self.metrics.store_write("new", n_new)
        if len(work.rows) - n_new:
            self.metrics.store_write("duplicate", len(work.rows) - n_new)
        self.stats.verdicts_new += n_new
        self.stats.results_new += n_new
        self.stats.results_duplicate += len(work.rows) - n_new

    def _observe(self, work: TraceWork) -> None:
        stats, metrics = self.stats, self.metrics
        if work.replayed:
            stats.replayed_traces += 1
            metrics.replays_skipped("trace")
            return
        if work.closed.last_record_ms >= 0:
            metrics.record_to_result(self.wall() - work.closed.last_record_ms / 1000)
        if work.unsampled:
            metrics.traces_unsampled()
        if work.rejected is not None:
            stats.rejected[work.rejected] += 1
            metrics.traces_rejected(work.rejected)
        for scope, n in work.unrecognized.items():
            metrics.spans_unrecognized(scope, n)
        new_by_run: dict[int, list[ScoreResult]] = {}
        for row, owner, new in zip(work.rows, work.owners, work.new, strict=True):
            if new:
                new_by_run.setdefault(owner, []).append(row.result)
        for owner, results in new_by_run.items():
            metrics.observe_results(work.runs[owner], results)
        n_rows = len(work.rows)
        n_new = sum(len(results) for results in new_by_run.values())
        if n_new:
            metrics.store_write("new", n_new)
        if n_rows - n_new:
            metrics.store_write("duplicate", n_rows - n_new)
        sampled = sum(work.sampled)
        if sampled:
            metrics.runs_sampled("sampled", sampled)
        if len(work.runs) - sampled:
            metrics.runs_sampled("skipped", len(work.runs) - sampled)
        stats.traces_scored += 1
        stats.runs += len(work.runs)
        stats.results_new += n_new
        stats.results_duplicate += n_rows - n_new
