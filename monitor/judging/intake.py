"""Which runs get a judge, cheapest first: the daemon's :class:`~monitor.scoring.stage.JudgeSubmitter`.

The scoring stage hands :meth:`JudgeIntake.submit` the judge specs a run's rules and checks name (after the
code checks, with their ``flagged`` answer and the run's expectation). For each judge, in this order:

1. **Only flagged** (``judge.only_flagged``): a run no code check flagged is skipped (``not_flagged``).
2. **Budget priority** (:func:`~monitor.judging.budget.judge_priority_admits`): as the judge's tightest daily
   budget fills, only suspicious runs are judged (flagged, errored — the run or one of its calls — or *rare*:
   an agent with under :data:`RARE_SHARE` of the runs seen, or a tool called under :data:`RARE_CALLS` times
   so far); at a spent budget none (``budget_priority``).
3. **Inputs.** The judge's request is rendered now (:class:`~monitor.scoring.judges.task.JudgeTask`); a judge
   whose inputs are missing answers at once (``not_applicable`` with its reason): that result is returned to
   the stage and stored with the code results, no request is made.
4. **Backlog** (``judge.max_backlog``): with that many verdicts owed in the pool and in this trace, the job is
   dropped (``backlog``) and a warning logged once per episode.
5. **Size**: a run whose JSON exceeds :data:`MAX_RUN_BYTES` is not kept owed (``too_large``).

Jobs taken wait in :meth:`JudgeIntake.drain` until the pipeline's score step attaches them to the trace: the
store writes them owed with the trace's code results (leased to this daemon) and the judge step hands them
to the pool. Every skip and drop is counted in ``monitor_judge_runs_dropped_total{judge, reason}``; none
writes a result (like a scorer sampled out), so a later replay may still judge the run.

:meth:`JudgeIntake.resume` rebuilds the job of a row the store kept owed (a restart, or a lease another daemon
stopped renewing): the run from its JSON, the expectation from the current rules.
"""

from __future__ import annotations

import collections
import json
import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Protocol

from monitor.judging.budget import JudgeBudget, judge_priority_admits
from monitor.judging.pool import JudgeMetrics, PoolJob
from monitor.scoring.base import Need, Scorer
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.base import Judge
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.judges.task import JudgeTask
from monitor.scoring.result import ScoreResult
from monitor.scoring.spec import ScorerSpec
from monitor.scoring.stage import has_reference, placeholder
from monitor.settings import Settings
from monitor.store import JudgeJob
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import Run
from monitor.trajectory.serialize import run_from_json, run_to_json

__all__ = ["MAX_RUN_BYTES", "RARE_CALLS", "RARE_SHARE", "JudgeIntake"]

log = logging.getLogger(__name__)

MAX_RUN_BYTES: Final = 4 * 1024 * 1024
"""The largest run (as JSON) kept owed for a judge; the judge itself sees at most ``judge.max_input_tokens``."""
RARE_SHARE: Final = 0.05
"""An agent with fewer than this share of the runs seen is rare (budget priority)."""
RARE_CALLS: Final = 20
"""A tool called fewer times than this so far is rare (budget priority)."""
_RARITY_MEMORY: Final = 10_000


class _Expectations(Protocol):
    def expectation_for(self, run: Run, /) -> Expectation: ...


class Backlog(Protocol):
    def backlog(self) -> int: ...


class _Rarity:
    """Counts of agents and tools seen (bounded: reset when :data:`_RARITY_MEMORY` names are held)."""

    def __init__(self) -> None:
        self.runs = 0
        self.agents: collections.Counter[str] = collections.Counter()
        self.tools: collections.Counter[str] = collections.Counter()

    def see(self, run: Run) -> bool:
        """Count ``run`` and answer whether it was rare before it was counted."""
        if len(self.agents) + len(self.tools) > _RARITY_MEMORY:
            self.__init__()  # type: ignore[misc]
        agent = run.agent or ""
        rare = self.runs >= 20 and self.agents[agent] < RARE_SHARE * self.runs
        rare = rare or any(self.tools[c.name] < RARE_CALLS for c in run.calls)
        self.runs += 1
        self.agents[agent] += 1
        for call in run.calls:
            self.tools[call.name] += 1
        return rare


class JudgeIntake:
    """See the module docstring. Not thread-safe: the pipeline's thread calls it."""

    def __init__(
        self,
        settings: Settings,
        budget: JudgeBudget,
        backlog: Backlog,
        metrics: JudgeMetrics,
        *,
        owner: str,
        ruleset: _Expectations | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings = settings
        self.judge_settings = settings.judge
        self.budget = budget
        self.pool = backlog
        self.metrics = metrics
        self.owner = owner
        self.ruleset = ruleset
        self.wall = wall
        self._judges: dict[tuple[str, str, str], Judge[Any] | Exception] = {}
        self._pending: list[PoolJob] = []
        self._rarity = _Rarity()
        self._backlog_full = False

    # ----------------------------------------------------------------- the stage's side

    def submit(
        self, run: Run, specs: Sequence[ScorerSpec], *, flagged: bool, expectation: Expectation
    ) -> list[ScoreResult]:
        """Take the judges of ``specs`` for ``run`` (see the module docstring); returns the results decided
        without the API (``not_applicable``, a judge that cannot be built)."""
        results: list[ScoreResult] = []
        rare = self._rarity.see(run)
        errored = run.status == "error" or any(call_error(c) is not None for c in run.calls)
        for spec in specs:
            judge = self._judge(spec)
            if isinstance(judge, Exception):
                details = {"exception": type(judge).__name__, "message": str(judge)[:500]}
                results.append(placeholder(spec, 0, "error", "internal", details))
                continue
            if self.judge_settings.only_flagged and not flagged:
                self.metrics.judge_dropped(spec.kind, "not_flagged")
                continue
            pressure = self.budget.pressure(spec.kind)
            if not judge_priority_admits(pressure, flagged=flagged, errored=errored, rare=rare):
                self.metrics.judge_dropped(spec.kind, "budget_priority")
                continue
            reference: Expectation | None = expectation
            if Need.REFERENCE in judge.needs and not has_reference(expectation):
                reference = None
            task = self._task(judge, run, reference)
            if not task.needs_api:
                results.append(task.result())
                continue
            if self.pool.backlog() + len(self._pending) >= self.judge_settings.max_backlog:
                self.metrics.judge_dropped(spec.kind, "backlog")
                if not self._backlog_full:
                    self._backlog_full = True
                    log.warning(
                        "judge backlog full (%d verdicts owed): new runs are not judged until it drains",
                        self.judge_settings.max_backlog,
                    )
                continue
            self._backlog_full = False
            job = self._job(spec, judge, task, run, flagged)
            if job is not None:
                self._pending.append(job)
        return results

    def drain(self) -> list[PoolJob]:
        """The jobs taken since the last call (the score step attaches them to the trace)."""
        jobs, self._pending = self._pending, []
        return jobs

    # ----------------------------------------------------------------- resuming

    def resume(self, row: JudgeJob) -> PoolJob | None:
        """The job of a stored ``row`` (None, logged, when its run or scorer can no longer be rebuilt: the
        caller settles it)."""
        spec = ScorerSpec(row.scorer, row.scorer_kind, dict(row.params))
        judge = self._judge(spec)
        try:
            run = run_from_json(row.run)
        except Exception as exc:
            log.warning("judge job %s: its run cannot be read back (%s); dropped", row.key, exc)
            return None
        if isinstance(judge, Exception) or judge.version != row.scorer_version:
            log.warning(
                "judge job %s: scorer %s (version %d) is not configured so any more; dropped",
                row.key,
                row.scorer,
                row.scorer_version,
            )
            return None
        expectation = self._expectation(run)
        reference = expectation if Need.REFERENCE not in judge.needs or has_reference(expectation) else None
        task = self._task(judge, run, reference, key=row.key)
        if not task.needs_api:
            return None
        return PoolJob(task, row, run, tuple(c.name for c in run.calls))

    # ----------------------------------------------------------------- internals

    def _expectation(self, run: Run) -> Expectation:
        if self.ruleset is None:
            return Expectation()
        try:
            return self.ruleset.expectation_for(run)
        except Exception:
            log.exception("rules: expectation failed for trace %s run %s; using none", run.trace_id, run.run_id)
            return Expectation()

    def _judge(self, spec: ScorerSpec) -> Judge[Any] | Exception:
        key = (spec.id, spec.kind, json.dumps(spec.params, sort_keys=True, default=repr))
        found = self._judges.get(key)
        if found is None:
            try:
                built: Scorer[Any] = spec.build()
                if not isinstance(built, Judge):
                    raise TypeError(f"scorer kind {spec.kind!r} is not a judge")
                found = built
            except Exception as exc:
                log.error("judge %s (kind %s) cannot be built: %s", spec.id, spec.kind, exc)
                found = exc
            self._judges[key] = found
        return found

    def _task(self, judge: Judge[Any], run: Run, reference: Expectation | None, *, key: str | None = None) -> JudgeTask:
        config = JudgeConfig.from_settings(self.settings, judge.kind, getattr(judge.params, "model", None))
        return JudgeTask(judge, run, reference, config, key=key)

    def _job(self, spec: ScorerSpec, judge: Judge[Any], task: JudgeTask, run: Run, flagged: bool) -> PoolJob | None:
        as_json = run_to_json(run)
        size = len(json.dumps(as_json, ensure_ascii=False, default=str))
        if size > MAX_RUN_BYTES:
            self.metrics.judge_dropped(spec.kind, "too_large")
            return None
        now = self.wall()
        row = JudgeJob(
            key=task.key,
            trace_id=run.trace_id,
            run_id=run.run_id,
            agent=run.agent,
            scorer=spec.id,
            scorer_kind=spec.kind,
            scorer_version=judge.version,
            params=dict(spec.params),
            run=as_json,
            run_start_ns=run.start_ns,
            flagged=flagged,
            enqueued_at=now,
            lease_owner=self.owner,
            lease_until=now + timedelta(seconds=self.judge_settings.lease_s),
        )
        return PoolJob(task, row, run, tuple(c.name for c in run.calls))
