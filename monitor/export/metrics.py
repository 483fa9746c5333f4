"""The one catalogue of every metric the daemon exports (Prometheus naming: ``monitor_`` prefix,
base units, ``_total`` counters, bounded labels).

Every metric is created here, on an injected :class:`~prometheus_client.CollectorRegistry` (a fresh
one when none is given; never the process-global ``REGISTRY``), and changed only through the
methods of :class:`Metrics`. ``docs/metrics.md`` lists the catalogue for users; keep both in step.

Label rules:

* ``agent`` and ``tool`` values pass a :class:`~monitor.export.cardinality.CardinalityGuard` each
  (known names + top N by decayed frequency, the rest ``other``; a missing name is ``unknown``);
  an issue without a tool carries ``tool="none"``.
* ``kind`` values come from the closed enums of :mod:`monitor.scoring.result`.
* reasons, outcomes and decisions are codes from the program; a :class:`CappedLabel` bounds them
  anyway (first 32 distinct values, then ``other``).
* ``topic``/``partition`` are the consumed topic partitions (bounded by the topic configuration).
* trace ids, run ids, conversation ids and arguments never become labels. The trace id (and run id
  when it fits the 128-character limit) rides as an OpenMetrics **exemplar** on the quality
  counters and the score histogram; exemplars appear only in the OpenMetrics exposition.

Quality metrics are fed by :meth:`Metrics.observe_results`, which the run loop calls only with the
results the store accepted as new, so replays after a restart never count twice.
"""

from __future__ import annotations

import platform
import threading
from collections.abc import Iterable, Mapping, Sequence
from importlib import metadata
from typing import Final, Protocol

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.process_collector import ProcessCollector

from monitor.export.cardinality import OTHER, CappedLabel, CardinalityGuard
from monitor.scoring.result import FailureKind, Issue, ScoreResult, Severity
from monitor.settings import MetricsSettings
from monitor.trajectory.model import Run

__all__ = [
    "CLOSE_OUTCOMES",
    "PARAMETER_ERROR_KINDS",
    "SAMPLING_DECISIONS",
    "SCORE_BUCKETS",
    "STORE_OUTCOMES",
    "TOOL_SELECTION_KINDS",
    "Metrics",
]

NAMESPACE: Final = "monitor"

TOOL_SELECTION_KINDS: Final[frozenset[FailureKind]] = frozenset(
    {
        FailureKind.WRONG_TOOL,
        FailureKind.MISSING_TOOL,
        FailureKind.UNNECESSARY_TOOL,
        FailureKind.HALLUCINATED_TOOL,
        FailureKind.FORBIDDEN_TOOL,
        FailureKind.WRONG_ORDER,
    }
)
"""Failure kinds counted by ``monitor_tool_selection_errors_total``."""

PARAMETER_ERROR_KINDS: Final[frozenset[FailureKind]] = frozenset(
    {
        FailureKind.MISSING_PARAMETER,
        FailureKind.UNKNOWN_PARAMETER,
        FailureKind.WRONG_TYPE,
        FailureKind.ENUM_VIOLATION,
        FailureKind.INVALID_VALUE,
        FailureKind.WRONG_VALUE,
        FailureKind.FORBIDDEN_PARAMETER,
        FailureKind.MALFORMED_ARGUMENTS,
    }
)
"""Failure kinds counted by ``monitor_parameter_errors_total``."""

CLOSE_OUTCOMES: Final = ("complete", "idle", "max_age", "max_spans", "memory", "shutdown")
STORE_OUTCOMES: Final = ("new", "duplicate", "error")
REJECT_REASONS: Final = ("too_deep", "rebuild_failed", "unstorable")
UNRECOGNIZED_SCOPES: Final = 50
"""How many instrumentation scope names ``monitor_spans_unrecognized_total`` labels before folding to ``other``."""
REPLAY_KINDS: Final = ("trace", "dead_letter")
EVENT_OUTCOMES: Final = ("exported", "dropped_queue_full", "failed")
SAMPLING_DECISIONS: Final = ("sampled", "skipped")
RESULT_STATUSES: Final = ("scored", "not_applicable", "error")

JUDGE_REQUEST_OUTCOMES: Final = (
    "ok",
    "rate_limited",
    "overloaded",
    "server_error",
    "timeout",
    "connection",
    "unauthorized",
    "rejected",
)
JUDGE_DROP_REASONS: Final = ("not_flagged", "budget_priority", "backlog", "too_large", "budget", "expired")
JUDGE_TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_write")
JUDGE_LATENCY_BUCKETS: Final = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0, 120.0)
"""Seconds; a judge request usually takes 1–10 s."""

RECORD_TO_RESULT_BUCKETS: Final = (
    *(0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0),
    *(5.0, 5.5, 6.0, 7.0, 8.0, 10.0, 15.0, 20.0, 30.0, 60.0, 120.0, 300.0),
)
"""Seconds from a trace's last record to its results counted; a trace closes ``root_idle`` (5 s by default) after
its last span, so most of the mass sits a little above that setting."""

SCORE_BUCKETS: Final = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0)
"""Histogram buckets for scores in [0, 1]: ``le="0.0"`` counts exact zeros, ``le="1.0"`` everything."""

NO_TOOL: Final = "none"
"""``tool`` label value of an issue that names no tool (e.g. ``goal_not_met``)."""

EXEMPLAR_MAX_CHARS: Final = 128
"""OpenMetrics limit on the combined length of an exemplar's label names and values."""


class JudgeTokens(Protocol):
    """Token counts of a judge request (``monitor.scoring.judges.cost.Usage``)."""

    @property
    def input_tokens(self) -> int: ...
    @property
    def output_tokens(self) -> int: ...
    @property
    def cache_read_input_tokens(self) -> int: ...
    @property
    def cache_creation_input_tokens(self) -> int: ...


def _passed_label(result: ScoreResult) -> str:
    if result.passed is None:
        return "none"
    return "true" if result.passed else "false"


def _exemplar(trace_id: str | None, run_id: str | None) -> dict[str, str] | None:
    """``{"trace_id": …, "run_id": …}`` within the OpenMetrics 128-character limit, else less, else None."""
    if not trace_id:
        return None
    ex = {"trace_id": trace_id}
    if run_id:
        ex["run_id"] = run_id
    for candidate in (ex, {"trace_id": trace_id}):
        if sum(len(k) + len(v) for k, v in candidate.items()) <= EXEMPLAR_MAX_CHARS:
            return candidate
    return None


class Metrics:
    """Every metric of the daemon; the only way code changes one.

    Thread-safe: counters/gauges are thread-safe in ``prometheus_client``; :meth:`observe_results`
    additionally serialises label resolution and updates, so a label value the cardinality guard
    evicts (and whose series it removes) is never recreated by a racing update.
    """

    def __init__(self, settings: MetricsSettings, registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self.registry: CollectorRegistry = registry if registry is not None else CollectorRegistry()
        reg = self.registry
        self._quality_lock = threading.Lock()
        self._agent_cache: dict[str | None, str] = {}  # per observe_results call, under _quality_lock
        self._tool_cache: dict[str | None, str] = {}
        self.agents = CardinalityGuard(settings.known_agents, settings.top_n, on_evict=self._evict_agent)
        self.tools = CardinalityGuard(settings.known_tools, settings.top_n, on_evict=self._evict_tool)
        self._reason = CappedLabel()
        self._dlq_reason = CappedLabel()
        self._outcome = CappedLabel(CLOSE_OUTCOMES)
        self._store_outcome = CappedLabel(STORE_OUTCOMES)
        self._decision = CappedLabel(SAMPLING_DECISIONS)
        self._pause_reason = CappedLabel()
        self._dlq_error = CappedLabel()
        self._rejected = CappedLabel(REJECT_REASONS)
        self._scope = CappedLabel(max_values=UNRECOGNIZED_SCOPES)
        self._replay_kind = CappedLabel(REPLAY_KINDS)
        self._event_outcome = CappedLabel(EVENT_OUTCOMES)
        self._scorer = CappedLabel(max_values=200)

        # ------------------------------------------------------------- build / process
        self.build_info = Info(
            "build", "Version of the monitor daemon and its Python.", namespace=NAMESPACE, registry=reg
        )
        self.build_info.info({"version": _version(), "python": platform.python_version()})
        ProcessCollector(registry=reg)  # standard process_* metrics (memory, CPU, fds); Linux only

        # ------------------------------------------------------------- pipeline
        self.records_consumed_total = Counter(
            "records_consumed",
            "Kafka records consumed, by topic and partition.",
            ["topic", "partition"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.spans_decoded_total = Counter(
            "spans_decoded", "Spans decoded from consumed records.", namespace=NAMESPACE, registry=reg
        )
        self.records_invalid_total = Counter(
            "records_invalid",
            "Records that could not be decoded, by reason.",
            ["reason"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.records_dead_lettered_total = Counter(
            "records_dead_lettered",
            "Records sent to the dead-letter topic, by reason.",
            ["reason"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.dead_letter_errors_total = Counter(
            "dead_letter_errors",
            "Failed attempts to write a dead letter, by error class (each is retried; none is dropped).",
            ["error"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.dead_letters_pending = Gauge(
            "dead_letters_pending",
            "Dead letters not acknowledged by the broker yet (offsets are not committed past them).",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.traces_rejected_total = Counter(
            "traces_rejected",
            "Closed traces that yield no run, by reason (too_deep, rebuild_failed, unstorable).",
            ["reason"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.spans_unrecognized_total = Counter(
            "spans_unrecognized",
            "Spans no known convention reads, in traces that gave no run of a known convention, by instrumentation "
            "scope (a framework to report; `monitor inspect --explain` shows why).",
            ["scope"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.replays_skipped_total = Counter(
            "replays_skipped",
            "Work a re-read found already done and skipped, by kind (trace, dead_letter).",
            ["kind"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.evaluation_events_total = Counter(
            "evaluation_events",
            "OTLP gen_ai.evaluation.result events, by outcome (exported, dropped_queue_full, failed).",
            ["outcome"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.store_available = Gauge(
            "store_available",
            "1 while the results store answers, 0 since its last attempt failed.",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.store_available.set(1)
        self.traces_open = Gauge("traces_open", "Traces the assembler holds open.", namespace=NAMESPACE, registry=reg)
        self.bytes_open = Gauge(
            "open_trace_bytes",
            "Encoded record bytes buffered across the open traces (bounded by assembler.max_open_bytes).",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.spans_open = Gauge(
            "spans_open", "Spans buffered across the open traces.", namespace=NAMESPACE, registry=reg
        )
        self.oldest_open_trace_age_seconds = Gauge(
            "oldest_open_trace_age_seconds",
            "Age of the oldest open trace when last reported (0 when none is open).",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.traces_closed_total = Counter(
            "traces_closed",
            "Traces closed by the assembler, by outcome (complete, idle, max_age, max_spans, memory, shutdown).",
            ["outcome"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.late_spans_total = Counter(
            "late_spans", "Spans that arrived after their trace was closed.", namespace=NAMESPACE, registry=reg
        )
        self.split_traces_total = Counter(
            "split_traces",
            "Traces whose spans arrived on more than one partition (key spans by trace id).",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.last_commit_timestamp_seconds = Gauge(
            "last_commit_timestamp_seconds",
            "Unix time of the last successful offset commit, by topic and partition.",
            ["topic", "partition"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.consumer_lag_records = Gauge(
            "consumer_lag_records",
            "Records between the consumer's position and the end of the partition.",
            ["topic", "partition"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.consumer_paused = Gauge(
            "consumer_paused",
            "1 while the consumer is paused for this reason (backpressure), else 0.",
            ["reason"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.store_writes_total = Counter(
            "store_writes",
            "Results written to the store, by outcome (new, duplicate, error).",
            ["outcome"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.runs_sampled_total = Counter(
            "runs_sampled",
            "Sampling decisions on closed runs, by decision (sampled, skipped).",
            ["decision"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.traces_unsampled_total = Counter(
            "traces_unsampled",
            "Closed traces sampled out before their rebuild (no run of them could be sampled): their runs are not "
            "rebuilt, so they are not counted in monitor_runs_sampled_total.",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.record_to_result_seconds = Histogram(
            "record_to_result_seconds",
            "Seconds from the Kafka timestamp of a trace's last record to its results counted in these metrics "
            "(the trace waits root_idle after its last span before it closes).",
            namespace=NAMESPACE,
            registry=reg,
            buckets=RECORD_TO_RESULT_BUCKETS,
        )
        self.label_values_folded_total = Counter(
            "label_values_folded",
            "Agent or tool names folded into the label value 'other' by the cardinality guard.",
            ["label"],
            namespace=NAMESPACE,
            registry=reg,
        )

        # ------------------------------------------------------------- quality
        self.runs_scored_total = Counter(
            "runs_scored",
            "Runs with at least one new scorer result, by agent.",
            ["agent"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.tool_calls_total = Counter(
            "tool_calls",
            "Tool calls of scored runs, by agent and tool.",
            ["agent", "tool"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.tool_selection_errors_total = Counter(
            "tool_selection_errors",
            "Tool-selection errors found by scorers, by kind, agent and tool.",
            ["kind", "agent", "tool"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.parameter_errors_total = Counter(
            "parameter_errors",
            "Tool-parameter errors found by scorers, by kind, agent and tool.",
            ["kind", "agent", "tool"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.failure_patterns_total = Counter(
            "failure_patterns",
            "Failures of every kind of the taxonomy found by scorers, by kind, agent and tool.",
            ["kind", "agent", "tool"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.scorer_results_total = Counter(
            "scorer_results",
            "Scorer results, by scorer, status (scored, not_applicable, error) and passed (true, false, none).",
            ["scorer", "status", "passed"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.score_ratio = Histogram(
            "score_ratio",
            "Scores in [0, 1] of scored results, by scorer.",
            ["scorer"],
            namespace=NAMESPACE,
            registry=reg,
            buckets=SCORE_BUCKETS,
        )

        # ------------------------------------------------------------- judges
        self.judge_requests_total = Counter(
            "judge_requests",
            "Judge API requests, by judge kind, model and outcome (ok, rate_limited, overloaded, server_error, "
            "timeout, connection, unauthorized, rejected).",
            ["judge", "model", "outcome"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.judge_request_duration_seconds = Histogram(
            "judge_request_duration_seconds",
            "Latency of judge API requests (answered or not), by judge kind.",
            ["judge"],
            namespace=NAMESPACE,
            registry=reg,
            buckets=JUDGE_LATENCY_BUCKETS,
        )
        self.judge_tokens_total = Counter(
            "judge_tokens",
            "Tokens of answered judge requests, by judge kind, model and kind (input, output, cache_read, "
            "cache_write).",
            ["judge", "model", "kind"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.judge_cost_usd_total = Counter(
            "judge_cost_usd",
            "USD spent on judge requests (the judge.prices table), by judge kind and model.",
            ["judge", "model"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.judge_runs_dropped_total = Counter(
            "judge_runs_dropped",
            "Runs a judge did not judge, by judge kind and reason (not_flagged, budget_priority, backlog, "
            "too_large, budget, expired).",
            ["judge", "reason"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.judge_backlog = Gauge(
            "judge_backlog",
            "Verdicts this daemon owes: queued, being judged, or judged and not yet stored.",
            namespace=NAMESPACE,
            registry=reg,
        )
        self.judge_budget_remaining = Gauge(
            "judge_budget_remaining",
            "What a judge budget still allows, by scope (total or a judge kind) and limit (requests_per_minute, "
            "input_tokens_per_day, output_tokens_per_day, usd_per_day); only configured limits.",
            ["scope", "limit"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self.failure_pattern_runs = Gauge(
            "failure_pattern_runs",
            "Runs each active failure pattern hurt over report.patterns_window_s (the report.max_active_patterns with "
            "the most impact), by agent, kind, tool, parameter and expected_tool ('' when not applicable).",
            ["agent", "kind", "tool", "parameter", "expected_tool"],
            namespace=NAMESPACE,
            registry=reg,
        )
        self._patterns_lock = threading.Lock()
        self._pattern_series: set[tuple[str, ...]] = set()
        self._judge_kind = CappedLabel(max_values=64)
        self._judge_model = CappedLabel()
        self._judge_outcome = CappedLabel(JUDGE_REQUEST_OUTCOMES)
        self._judge_reason = CappedLabel(JUDGE_DROP_REASONS)
        self._budget_scope = CappedLabel(max_values=64)

        for outcome in CLOSE_OUTCOMES:
            self.traces_closed_total.labels(outcome)
        for outcome in STORE_OUTCOMES:
            self.store_writes_total.labels(outcome)
        for decision in SAMPLING_DECISIONS:
            self.runs_sampled_total.labels(decision)
        for label in ("agent", "tool"):
            self.label_values_folded_total.labels(label)

    # ================================================================= pipeline

    def records_consumed(self, topic: str, partition: int, n: int = 1) -> None:
        """Count ``n`` records consumed from ``topic``/``partition``."""
        self.records_consumed_total.labels(topic, str(partition)).inc(n)

    def spans_decoded(self, n: int) -> None:
        """Count ``n`` spans decoded."""
        self.spans_decoded_total.inc(n)

    def record_invalid(self, reason: str) -> None:
        """Count one undecodable record. Counts only ``monitor_records_invalid_total``: the dead-letter
        producer calls :meth:`record_dead_lettered` itself when it sends the record (it may be disabled)."""
        self.records_invalid_total.labels(self._reason(reason)).inc()

    def record_dead_lettered(self, reason: str) -> None:
        """Count one record sent to the dead-letter topic."""
        self.records_dead_lettered_total.labels(self._dlq_reason(reason)).inc()

    def dead_letter_error(self, error: str) -> None:
        """Count one failed attempt to write a dead letter (it is retried)."""
        self.dead_letter_errors_total.labels(self._dlq_error(error)).inc()

    def set_dead_letters_pending(self, n: int) -> None:
        """Dead letters not acknowledged yet."""
        self.dead_letters_pending.set(n)

    def traces_rejected(self, reason: str, n: int = 1) -> None:
        """Count ``n`` closed traces that yield no run (too_deep, rebuild_failed, unstorable)."""
        self.traces_rejected_total.labels(self._rejected(reason)).inc(n)

    def spans_unrecognized(self, scope: str, n: int = 1) -> None:
        """Count ``n`` spans of instrumentation scope ``scope`` that no known convention reads (the first
        ``UNRECOGNIZED_SCOPES`` scope names are labels, later ones ``other``; no scope name is ``unknown``)."""
        self.spans_unrecognized_total.labels(self._scope(scope)).inc(n)

    def replays_skipped(self, kind: str, n: int = 1) -> None:
        """Count ``n`` units of work (trace, dead_letter) a re-read found already done."""
        self.replays_skipped_total.labels(self._replay_kind(kind)).inc(n)

    def evaluation_events(self, outcome: str, n: int) -> None:
        """Count ``n`` evaluation events with ``outcome`` (called from the exporter's thread too: thread-safe)."""
        self.evaluation_events_total.labels(self._event_outcome(outcome)).inc(n)

    def set_store_available(self, available: bool) -> None:
        """1 while the store answers, 0 once an attempt failed."""
        self.store_available.set(1 if available else 0)

    def traces_closed(self, outcome: str, n: int = 1) -> None:
        """Count ``n`` traces closed with ``outcome`` (complete|idle|max_age|max_spans|memory|shutdown)."""
        self.traces_closed_total.labels(self._outcome(outcome)).inc(n)

    def late_spans(self, n: int) -> None:
        """Count ``n`` spans that arrived after their trace closed."""
        self.late_spans_total.inc(n)

    def split_traces(self, n: int) -> None:
        """Count ``n`` traces seen on more than one partition."""
        self.split_traces_total.inc(n)

    def commit_done(self, topic: str, partition: int, when_s: float) -> None:
        """Record a successful commit on ``topic``/``partition`` at Unix time ``when_s``."""
        self.last_commit_timestamp_seconds.labels(topic, str(partition)).set(when_s)

    def set_lag(self, topic: str, partition: int, lag: int) -> None:
        """Set the consumer lag (records) of ``topic``/``partition``."""
        self.consumer_lag_records.labels(topic, str(partition)).set(lag)

    def forget_partition(self, topic: str, partition: int) -> None:
        """Drop the per-partition gauges of a revoked partition (its new owner reports them).

        Not in the first contract: optional for the run loop; without it a revoked partition keeps
        its last lag and commit time on this replica.
        """
        for gauge in (self.consumer_lag_records, self.last_commit_timestamp_seconds):
            gauge.remove_by_labels({"topic": topic, "partition": str(partition)})

    def paused(self, on: bool, reason: str) -> None:
        """Set ``monitor_consumer_paused{reason}`` to 1 (paused) or 0 (resumed)."""
        self.consumer_paused.labels(self._pause_reason(reason)).set(1 if on else 0)

    def store_write(self, outcome: str, n: int = 1) -> None:
        """Count ``n`` results written with ``outcome`` (new|duplicate|error)."""
        self.store_writes_total.labels(self._store_outcome(outcome)).inc(n)

    def runs_sampled(self, decision: str, n: int = 1) -> None:
        """Count ``n`` sampling decisions (sampled|skipped)."""
        self.runs_sampled_total.labels(self._decision(decision)).inc(n)

    def traces_unsampled(self, n: int = 1) -> None:
        """Count ``n`` traces sampled out before their rebuild."""
        self.traces_unsampled_total.inc(n)

    def record_to_result(self, seconds: float) -> None:
        """Observe the delay from a trace's last record (its Kafka timestamp) to its results counted here; a
        negative delay (clocks apart) counts as 0."""
        self.record_to_result_seconds.observe(max(0.0, seconds))

    # ================================================================= judges

    def judge_request(self, judge: str, model: str, outcome: str, seconds: float | None) -> None:
        """Count one judge API request by ``outcome`` and observe its latency (None: a batch request, whose wall
        time measures the batch's queue, is not observed)."""
        kind = self._judge_kind(judge)
        self.judge_requests_total.labels(kind, self._judge_model(model), self._judge_outcome(outcome)).inc()
        if seconds is not None:
            self.judge_request_duration_seconds.labels(kind).observe(max(0.0, seconds))

    def judge_usage(self, judge: str, model: str, usage: JudgeTokens, usd: float | None) -> None:
        """Count the tokens (by kind) and the USD of an answered judge request."""
        kind, model_label = self._judge_kind(judge), self._judge_model(model)
        for token_kind, n in (
            ("input", usage.input_tokens),
            ("output", usage.output_tokens),
            ("cache_read", usage.cache_read_input_tokens),
            ("cache_write", usage.cache_creation_input_tokens),
        ):
            if n:
                self.judge_tokens_total.labels(kind, model_label, token_kind).inc(n)
        if usd:
            self.judge_cost_usd_total.labels(kind, model_label).inc(usd)

    def judge_dropped(self, judge: str, reason: str, n: int = 1) -> None:
        """Count ``n`` runs ``judge`` did not judge, with the ``reason``."""
        self.judge_runs_dropped_total.labels(self._judge_kind(judge), self._judge_reason(reason)).inc(n)

    def set_judge_backlog(self, n: int) -> None:
        self.judge_backlog.set(n)

    def set_judge_budget_remaining(self, remaining: Mapping[str, Mapping[str, float]]) -> None:
        """``remaining``: :meth:`monitor.judging.budget.JudgeBudget.remaining` (scope → limit → amount)."""
        for scope, limits in remaining.items():
            for limit, amount in limits.items():
                self.judge_budget_remaining.labels(self._budget_scope(scope), limit).set(amount)

    def set_active_patterns(self, patterns: Sequence[tuple[Mapping[str, str], float]]) -> None:
        """Replace the series of ``monitor_failure_pattern_runs`` with ``patterns`` (labels, runs hurt); label values
        are cut to 128 characters. Bounded by the caller (``report.max_active_patterns``)."""
        names = ("agent", "kind", "tool", "parameter", "expected_tool")
        fresh = {tuple(str(labels.get(n, ""))[:128] for n in names): value for labels, value in patterns}
        with self._patterns_lock:
            for gone in self._pattern_series - fresh.keys():
                self.failure_pattern_runs.remove(*gone)
            for key, value in fresh.items():
                self.failure_pattern_runs.labels(*key).set(value)
            self._pattern_series = set(fresh)

    def observe_verdicts(self, run: Run, results: Sequence[ScoreResult]) -> None:
        """Count judge verdicts the store took as NEW: like :meth:`observe_results` but the run and its tool
        calls are not counted again (its code results counted them)."""
        if not results:
            return
        with self._quality_lock:
            try:
                self._observe(run, results, count_runs=False)
            finally:
                self._agent_cache.clear()
                self._tool_cache.clear()

    def set_open_traces(self, n: int, spans: int, oldest_age_s: float, nbytes: int = 0) -> None:
        """Report the assembler's state: open traces, buffered spans and bytes, age of the oldest open trace."""
        self.traces_open.set(n)
        self.bytes_open.set(nbytes)
        self.spans_open.set(spans)
        self.oldest_open_trace_age_seconds.set(oldest_age_s)

    # ================================================================= quality

    def observe_results(self, run: Run, results: Sequence[ScoreResult]) -> None:
        """Count the quality metrics of ``run`` for ``results`` (call ONLY with results the store
        accepted as NEW, so a replay never counts twice).

        ``run`` is the root run; ``results`` may hold results of the root and of nested runs (matched
        by ``run_id``; a result whose ``run_id`` matches no run belongs to the root). Per run of the
        tree with at least one result here: ``monitor_runs_scored_total`` +1 and its own tool calls
        count in ``monitor_tool_calls_total``; the calls of a nested run below a counted run count too
        (nested runs not scored on their own), under the nested run's agent. ``agent`` is the
        result's ``agent``, else the run's (for a call: the call's ``agent``, else its run's).
        Each distinct failure issue (severity error/warning; keyed by run, kind, tool, parameter,
        call index and turn, so the same finding from two scorers counts once) counts in
        ``monitor_failure_patterns_total`` and, by kind, in
        ``monitor_tool_selection_errors_total`` or ``monitor_parameter_errors_total``. Every result
        counts in ``monitor_scorer_results_total``; scored ones observe ``monitor_score_ratio``.
        Nothing is counted when ``results`` is empty.
        """
        if not results:
            return
        with self._quality_lock:
            try:
                self._observe(run, results)
            finally:
                self._agent_cache.clear()
                self._tool_cache.clear()

    def _observe(self, root: Run, results: Sequence[ScoreResult], *, count_runs: bool = True) -> None:
        by_id: dict[str, Run] = {}
        for r in root.walk():
            by_id.setdefault(r.run_id, r)
        grouped: dict[str, list[ScoreResult]] = {}
        for res in results:
            rid = res.run_id if res.run_id in by_id else root.run_id
            assert rid is not None
            grouped.setdefault(rid, []).append(res)

        # runs scored + tool calls
        for r in _covered(root, grouped) if count_runs else ():
            own = grouped.get(r.run_id, [])
            agent_name = next((x.agent for x in own if x.agent), None) or r.agent
            exemplar = _exemplar(r.trace_id or root.trace_id, r.run_id)
            if own:
                self.runs_scored_total.labels(self._agent(agent_name)).inc(1, exemplar)
            for call in r.calls:
                labels = (self._agent(call.agent or agent_name), self._tool(call.name))
                self.tool_calls_total.labels(*labels).inc(1, exemplar)

        # results, scores, issues
        seen: set[tuple[object, ...]] = set()
        for rid, own in grouped.items():
            r = by_id[rid]
            for res in own:
                exemplar = _exemplar(res.trace_id or r.trace_id, res.run_id or r.run_id)
                scorer = self._scorer(res.scorer)
                self.scorer_results_total.labels(scorer, res.status, _passed_label(res)).inc(1, exemplar)
                if res.status == "scored" and res.score is not None:
                    self.score_ratio.labels(scorer).observe(res.score, exemplar)
                agent_name = res.agent or r.agent
                for issue in res.issues:
                    if not isinstance(issue.kind, FailureKind) or issue.severity is Severity.INFO:
                        continue
                    key = (rid, issue.kind, issue.tool, issue.parameter, issue.call_index, issue.turn)
                    if key in seen:
                        continue
                    seen.add(key)
                    self._count_issue(issue, issue.kind, agent_name, exemplar)

    def _count_issue(
        self, issue: Issue, kind: FailureKind, agent_name: str | None, exemplar: dict[str, str] | None
    ) -> None:
        labels = (str(kind), self._agent(agent_name), self._tool(issue.tool) if issue.tool else NO_TOOL)
        self.failure_patterns_total.labels(*labels).inc(1, exemplar)
        if kind in TOOL_SELECTION_KINDS:
            self.tool_selection_errors_total.labels(*labels).inc(1, exemplar)
        elif kind in PARAMETER_ERROR_KINDS:
            self.parameter_errors_total.labels(*labels).inc(1, exemplar)

    # ================================================================= labels

    # Each distinct name is resolved (and counted by its guard) once per observe_results call, so a
    # guard's frequency is "runs mentioning the name", whatever the number of calls or issues.

    def _agent(self, name: str | None) -> str:
        value = self._agent_cache.get(name)
        if value is None:
            value = self._agent_cache[name] = self.agents.label(name)
            if value == OTHER:
                self.label_values_folded_total.labels("agent").inc()
        return value

    def _tool(self, name: str | None) -> str:
        value = self._tool_cache.get(name)
        if value is None:
            value = self._tool_cache[name] = self.tools.label(name)
            if value == OTHER:
                self.label_values_folded_total.labels("tool").inc()
        return value

    def _evict_agent(self, name: str) -> None:
        for metric in (
            self.runs_scored_total,
            self.tool_calls_total,
            self.tool_selection_errors_total,
            self.parameter_errors_total,
            self.failure_patterns_total,
        ):
            metric.remove_by_labels({"agent": name})

    def _evict_tool(self, name: str) -> None:
        for metric in (
            self.tool_calls_total,
            self.tool_selection_errors_total,
            self.parameter_errors_total,
            self.failure_patterns_total,
        ):
            metric.remove_by_labels({"tool": name})


def _covered(root: Run, grouped: dict[str, list[ScoreResult]]) -> Iterable[Run]:
    """Runs of the tree, depth first, whose tool calls count: a run with results here, and any nested
    run below a counted run (a nested run not scored on its own rides with its parent)."""

    def visit(r: Run, parent_counted: bool) -> Iterable[Run]:
        counted = r.run_id in grouped or parent_counted
        if counted:
            yield r
        for child in r.children:
            yield from visit(child, counted)

    yield from visit(root, False)


def _version() -> str:
    try:
        return metadata.version("agent-tool-monitor")
    except metadata.PackageNotFoundError:  # pragma: no cover - source checkout without install
        return "unknown"
