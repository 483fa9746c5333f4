"""The daemon's lifecycle: startup → run loop → graceful drain → teardown.

Startup, in this order (each step only after the previous one succeeded, torn down in reverse):

1. settings (given, already validated), then :func:`monitor.preflight.preflight`: every check of the
   configuration (rules file, scorer names, topic names, store URL and driver, HTTP host and port)
   and the broker check, **before** anything is opened, migrated or bound;
2. the dead-letter producer: its topics must exist or be created on demand, and its record size limit is
   read from the broker (:meth:`~monitor.ingest.dlq.DeadLetterQueue.check_topics`);
3. the results store (``open_store``; migrates when ``store.migrate_on_start``);
4. metrics catalogue and the HTTP server (``/metrics``, ``/healthz``, ``/readyz``);
5. rules (``rules_file``), sampler and scoring stage;
6. the Kafka consumer (joins the group on the first poll).

Stopping. :meth:`App.stop` (or the first SIGTERM/SIGINT when :meth:`App.install_signal_handlers`
was called) asks the loop to stop; it then drains (see :mod:`monitor.ingest.loop`): fetching stops,
traces that already closed are scored, stored and committed within ``shutdown.drain_deadline_s``.
Open traces are **not** force-closed (they would be scored incomplete); the committed low watermark
stays at or below their first record so the next process re-reads them. A second signal exits at
once (``os._exit(128 + signum)``) without committing: at-least-once delivery makes that safe, the
records since the last commit are read again.

Exit codes of :meth:`App.run`: :data:`EXIT_OK` after a requested stop; :data:`EXIT_CONFIG` when the
preflight found configuration problems (all of them logged as one error record, in the
:class:`~monitor.settings.SettingsError` format) or the HTTP port was taken between the check and the
bind; :data:`EXIT_FATAL` when the daemon stopped itself (dead-letter rate exceeded, the dead-letter
topic missing on a broker that does not create topics, the store not reachable at startup);
:data:`EXIT_BROKERS_UNREACHABLE` when no bootstrap server answered within
``kafka.startup_timeout_s`` (one error line). Any other exception propagates (a bug: the process dies
non-zero and nothing past the last commit is lost). ``error`` then holds the exception behind the code.
"""

from __future__ import annotations

import gc
import logging
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import FrameType
from typing import Any, Final

from monitor.export.evaluation_events import EvaluationEventExporter
from monitor.export.http import HealthState, HttpServer
from monitor.export.metrics import Metrics
from monitor.export.patterns import PatternExporter
from monitor.ingest.consumer import KafkaSource, PartitionsCallback, Source
from monitor.ingest.dlq import DeadLetterError, DeadLetterQueue, DeadLetterRateExceeded
from monitor.ingest.loop import (
    CLOSE_BATCH,
    MAX_DEAD_LETTER_BYTES_PENDING,
    MAX_DEAD_LETTERS_PENDING,
    MAX_HELD,
    WORK_BUDGET_S,
    WRITE_BATCH,
    RunLoop,
)
from monitor.ingest.replay import ReplayGuard
from monitor.judging.batch_pool import BatchPool
from monitor.judging.budget import TOTAL, JudgeBudget
from monitor.judging.intake import JudgeIntake
from monitor.judging.pool import JudgePool
from monitor.judging.startup import cache_prefix_warnings, configured_judges
from monitor.preflight import EXIT_BROKERS_UNREACHABLE, EXIT_CONFIG, EXIT_OK, configure_logging, preflight
from monitor.rules.ruleset import RuleSet
from monitor.sampling.sampler import Sampler
from monitor.scoring.stage import ScoringStage
from monitor.settings import Settings, SettingsError, format_problem, mask_url, setting_label
from monitor.steps.assemble import AssembleStep
from monitor.steps.commit import CommitStep
from monitor.steps.contract import Step
from monitor.steps.decode import DecodeStep
from monitor.steps.export import ExportStep
from monitor.steps.judge import JudgeStep, Pool
from monitor.steps.observe import ObserveStep
from monitor.steps.rebuild import RebuildStep
from monitor.steps.sample import SampleStep
from monitor.steps.score import ScoreStep
from monitor.steps.store import StoreStep
from monitor.steps.work import (
    Health,
    InFlight,
    LoopStats,
    PipelineMetrics,
    ResultSink,
    Sampling,
    Scoring,
    Store,
    StoreAvailability,
    TraceWork,
)
from monitor.steps.workers import WorkersStep, start_worker
from monitor.store import SqlResultStore, StoreUnavailable, open_store
from monitor.store.kept import RunKeeper
from monitor.store.ledger import SqlBatchLedger
from monitor.trajectory.assembler import AssemblerLimits

__all__ = ["EXIT_BROKERS_UNREACHABLE", "EXIT_CONFIG", "EXIT_FATAL", "EXIT_OK", "App", "build_loop"]

log = logging.getLogger(__name__)

EXIT_FATAL: Final = 3


def freeze_startup_heap() -> int:
    """Collect, then move every object alive now (modules, the compiled key table, settings, scorers, metrics,
    clients) into the garbage collector's permanent generation, so that full collections traverse only what the
    pipeline allocates from then on. Returns how many objects are frozen. For a process that is the daemon's alone:
    frozen objects that later become cyclic garbage are never collected."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()


class App:
    """One daemon instance. Build it, call :meth:`run` (blocking); :meth:`stop` from anywhere.

    ``consumer_config`` / ``producer_config`` are extra kafka-python settings (tests, benchmarks).
    ``ready`` is set once startup finished (store open, HTTP serving, consumer subscribed).
    ``freeze_gc``: once started, move the startup heap out of the collector's way (:func:`freeze_startup_heap`);
    ``monitor run`` sets it, since its process is the daemon's alone.
    """

    def __init__(
        self,
        settings: Settings,
        *,
        consumer_config: dict[str, Any] | None = None,
        producer_config: dict[str, Any] | None = None,
        freeze_gc: bool = False,
    ) -> None:
        self.settings = settings
        self.freeze_gc = freeze_gc
        self.consumer_config = consumer_config or {}
        self.producer_config = producer_config or {}
        self.health = HealthState()
        self.metrics: Metrics | None = None
        self.http: HttpServer | None = None
        self.store: SqlResultStore | None = None
        self.loop: RunLoop | None = None
        self.dlq: DeadLetterQueue | None = None
        self.events: EvaluationEventExporter | None = None
        self.source: Source | None = None
        self.pool: Pool | None = None
        self.patterns: PatternExporter | None = None
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._stop_requested = threading.Event()
        self._signals = 0

    # ------------------------------------------------------------------ control

    def stop(self) -> None:
        """Request a graceful stop (thread-safe; before :meth:`run` started it makes run return at once)."""
        self._stop_requested.set()
        if self.loop is not None:
            self.loop.stop()

    def install_signal_handlers(self) -> None:
        """SIGTERM/SIGINT: the first stops gracefully, the second exits at once. Main thread only."""
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        self._signals += 1
        if self._signals > 1:
            os.write(2, f"monitor: second signal ({signal.Signals(signum).name}): exiting now\n".encode())
            os._exit(128 + signum)
        log.info("%s received: draining (a second signal exits at once)", signal.Signals(signum).name)
        self.stop()

    @property
    def http_port(self) -> int:
        if self.http is None:
            raise RuntimeError("the HTTP server is not running")
        return self.http.port

    # ------------------------------------------------------------------ lifecycle

    def run(self) -> int:
        """Check, start, loop until stopped, drain, tear down. Returns the exit code (see the module
        docstring); the preflight runs before the store is opened or the port bound."""
        report = preflight(self.settings, client_config=self.consumer_config)
        if report.exit_code != EXIT_OK:
            self.error = report.error()
            log.error("%s", report.render())
            self.health.set_alive(False)
            return report.exit_code
        try:
            self._start()
        except SettingsError as exc:
            log.error("%s", exc)
            self.error = exc
            self._teardown()
            return EXIT_CONFIG
        except DeadLetterError as exc:
            log.error("%s", exc)
            self.error = exc
            self._teardown()
            return EXIT_FATAL
        except StoreUnavailable as exc:
            log.error("the results store is not reachable at startup: %s", exc)
            self.error = exc
            self._teardown()
            return EXIT_FATAL
        except BaseException:
            self._teardown()
            raise
        assert self.loop is not None
        if self.freeze_gc:
            log.info("froze %d startup objects out of the garbage collector's way", freeze_startup_heap())
        code = EXIT_OK
        try:
            if self._stop_requested.is_set():
                self.loop.stop()
            self.ready.set()
            self.loop.run()
        except DeadLetterRateExceeded as exc:
            self.error = exc
            log.error("stopping: %s", exc)
            code = EXIT_FATAL
        finally:
            stats = self.loop.stats
            log.info(
                "stopped: %d records, %d spans, %d traces scored, %d new results, %d duplicates, %d dead letters",
                stats.records,
                stats.spans,
                stats.traces_scored,
                stats.results_new,
                stats.results_duplicate,
                sum(stats.dead_letters.values()),
            )
            self._teardown()
        return code

    def _start(self) -> None:
        s = self.settings
        self.dlq = DeadLetterQueue(s.kafka, s.dead_letter, **self.producer_config)
        self.dlq.check_topics([s.kafka.spans_topic] + ([s.kafka.logs_topic] if s.kafka.logs_topic else []))
        self.store = open_store(s.store)
        self.metrics = Metrics(s.metrics)
        self.http = HttpServer(s.http, self.metrics, self.health)
        try:
            self.http.start()
        except OSError as exc:  # taken since the preflight checked it
            self.http = None
            fix = f"stop what listens there or set {setting_label(('http', 'port'))} to a free port (0 = any)"
            raise SettingsError(
                [format_problem(("http", "port"), s.http.port, f"cannot listen: {exc.strerror or exc}", fix)],
                s.source,
            ) from exc
        ruleset = RuleSet.load(s.rules_file) if s.rules_file is not None else None
        sampler = Sampler(s.sampling)
        judges = self._start_judges(ruleset) if s.judge.enabled else None
        stage = ScoringStage(
            s, ruleset, sampler, lambda: datetime.now(UTC), submitter=judges.intake if judges is not None else None
        )

        def make_source(on_revoked: PartitionsCallback, on_assigned: PartitionsCallback) -> Source:
            if s.kafka.client == "confluent":  # optional package: imported only when chosen
                from monitor.ingest.consumer_confluent import ConfluentSource

                self.source = ConfluentSource(s.kafka, on_revoked, on_assigned, **self.consumer_config)
            else:
                self.source = KafkaSource(s.kafka, on_revoked, on_assigned, **self.consumer_config)
            return self.source

        assert self.dlq is not None
        metrics = self.metrics
        sinks: list[ResultSink] = []
        if s.evaluation_events.enabled:
            self.events = EvaluationEventExporter(s.evaluation_events, on_outcome=metrics.evaluation_events)
            sinks.append(self.events)
        self.loop = build_loop(
            s, make_source, self.dlq, stage, self.store, metrics, self.health, sampler, sinks=sinks, judges=judges
        )
        self.patterns = PatternExporter(self.store, s.report, metrics).start()
        log.info(
            "started: topics %s, group %s, store %s, HTTP port %d",
            [s.kafka.spans_topic] + ([s.kafka.logs_topic] if s.kafka.logs_topic else []),
            s.kafka.group_id,
            mask_url(s.store.url),
            self.http.port,
        )

    def _start_judges(self, ruleset: RuleSet | None) -> Judges:
        """The judge pool (its thread started), budget and intake; says which judges cannot cache."""
        s = self.settings
        assert self.metrics is not None
        budget = JudgeBudget.from_settings(s.judge, clock=lambda: datetime.now(UTC))
        assert self.store is not None
        if s.judge.batch:  # half price, verdicts within hours; batches in flight kept in the store's ledger
            self.pool = BatchPool(s.judge, budget, self.metrics, SqlBatchLedger(self.store.engine)).start()
        else:
            self.pool = JudgePool(s.judge, budget, self.metrics).start()
        owner = s.judge.owner or socket.gethostname()
        intake = JudgeIntake(s, budget, self.pool, self.metrics, owner=owner, ruleset=ruleset)
        rule_scorers = (
            [(sid, sc.kind, dict(sc.params)) for rule in ruleset.config.rules for sid, sc in rule.scorers.items()]
            if ruleset is not None
            else []
        )
        for warning in cache_prefix_warnings(s, configured_judges(s, rule_scorers)):
            log.warning("%s", warning)
        self.metrics.set_judge_budget_remaining(budget.remaining(TOTAL))
        how = "Message Batches" if s.judge.batch else f"{s.judge.concurrency} requests at once"
        log.info("judges on: model %s, %s, owner %s", s.judge.model, how, owner)
        return Judges(self.pool, intake, owner)

    def _teardown(self) -> None:
        self.health.set_alive(False)
        steps: list[tuple[str, Callable[[], None] | None]] = [
            ("pipeline steps (worker processes)", self.loop.head.close if self.loop else None),
            ("judge pool", self.pool.stop if self.pool else None),
            ("failure patterns", self.patterns.stop if self.patterns else None),
            ("consumer", self.source.close if self.source else None),
            ("dead-letter producer", self.dlq.close if self.dlq else None),
            ("evaluation-event exporter", (lambda: events.shutdown(5.0)) if (events := self.events) else None),
            ("HTTP server", self.http.stop if self.http else None),
            ("store", self.store.close if self.store else None),
        ]
        for name, fn in steps:
            if fn is None:
                continue
            try:
                fn()
            except Exception:
                log.warning("error closing the %s", name, exc_info=True)
        self.source = None
        self.pool = None
        self.patterns = None
        self.dlq = None
        self.events = None
        self.http = None
        self.store = None


@dataclass(frozen=True, slots=True)
class Judges:
    """The judge parts the pipeline needs: the pool, the intake (which also resumes jobs owed) and this daemon's
    name on its leases."""

    pool: Pool
    intake: JudgeIntake
    owner: str


def start_pool_worker(settings: Settings) -> None:
    """A worker process of ``workers.processes``: the daemon's logging, then its :class:`TraceWorker`."""
    configure_logging(settings, sys.stderr)
    start_worker(settings)


def build_loop(
    settings: Settings,
    make_source: Callable[[PartitionsCallback, PartitionsCallback], Source],
    dlq: DeadLetterQueue,
    scoring: Scoring,
    store: Store,
    metrics: PipelineMetrics,
    health: Health,
    sampler: Sampling,
    *,
    sinks: Sequence[ResultSink] = (),
    judges: Judges | None = None,
    clock: Callable[[], float] = time.monotonic,
    wall: Callable[[], float] = time.time,
) -> RunLoop:
    """The pipeline, built back to front (each step holds the next), and the run loop that drives it::

        decode → assemble → rebuild → sample → score → judge → store → observe → export → commit

    With ``judges`` the scoring stage must have ``judges.intake`` as its submitter; without, the judge step
    passes messages through.
    ``clock`` is monotonic seconds (assembler timing, backoffs, timers), ``wall`` epoch seconds (commit times,
    retention). Tests build the same chain with the in-memory source and a manual clock.
    """
    stats = LoopStats()
    inflight = InFlight()
    guard = ReplayGuard(store)
    availability = StoreAvailability(metrics, health, clock)
    a = settings.assembler
    limits = AssemblerLimits(
        root_idle_s=a.root_idle_s,
        idle_s=a.idle_s,
        max_age_s=a.max_age_s,
        max_spans=a.max_spans,
        max_open_spans=a.max_open_spans,
        max_open_bytes=a.max_open_bytes,
        late_window_s=a.late_window_s,
    )
    commit = CommitStep(
        dlq=dlq,
        store=store,
        guard=guard,
        availability=availability,
        inflight=inflight,
        metrics=metrics,
        stats=stats,
        clock=clock,
        wall=wall,
        max_pending=MAX_DEAD_LETTERS_PENDING,
        max_pending_bytes=MAX_DEAD_LETTER_BYTES_PENDING,
    )
    export = ExportStep(commit, sinks)
    observe = ObserveStep(export, metrics=metrics, stats=stats, wall=wall)
    stored = StoreStep(
        observe,
        settings,
        store=store,
        dlq=dlq,
        guard=guard,
        availability=availability,
        metrics=metrics,
        stats=stats,
        clock=clock,
        wall=wall,
        write_batch=WRITE_BATCH,
    )
    judge = JudgeStep(
        stored,
        pool=judges.pool if judges is not None else None,
        resume=judges.intake if judges is not None else None,
        store=store if judges is not None else None,
        owner=judges.owner if judges is not None else "",
        lease_s=settings.judge.lease_s,
        max_backlog=settings.judge.max_backlog,
        clock=clock,
        wall=wall,
    )
    keeper = RunKeeper(settings.store.summaries) if settings.store.summaries.enabled else None
    score = ScoreStep(
        judge, scoring, clock=clock, judges=judges.intake if judges is not None else None, keeper=keeper, wall=wall
    )
    sample = SampleStep(score, sampler)
    rebuild = RebuildStep(sample, settings, guard=guard, sampling=sampler)
    head: Step[TraceWork | None] = rebuild
    if settings.workers.processes > 0:  # in place of rebuild → sample → score, in worker processes
        head = workers = WorkersStep(
            judge,
            settings,
            guard=guard,
            sampling=sampler,
            clock=clock,
            judges=judges.intake if judges is not None else None,
            decider=scoring if judges is not None and isinstance(scoring, ScoringStage) else None,
            keeper=keeper,
            initializer=start_pool_worker,
            wall=wall,
        )
        workers.start()
    assemble = AssembleStep(
        head,
        limits,
        clock=clock,
        inflight=inflight,
        metrics=metrics,
        stats=stats,
        close_batch=CLOSE_BATCH,
        work_budget_s=WORK_BUDGET_S,
        max_held=MAX_HELD,
    )
    decode = DecodeStep(
        assemble,
        settings,
        dlq=dlq,
        guard=guard,
        metrics=metrics,
        stats=stats,
        flag_errors=sampler.needs_error_flags,
    )
    return RunLoop(
        settings,
        make_source,
        decode,
        assemble=assemble,
        committer=commit,
        guard=guard,
        availability=availability,
        inflight=inflight,
        stats=stats,
        dlq=dlq,
        store=store,
        metrics=metrics,
        health=health,
        clock=clock,
        wall=wall,
    )
