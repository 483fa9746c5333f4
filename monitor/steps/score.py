"""Score: the result rows of the sampled runs of a trace (:class:`~monitor.scoring.stage.ScoringStage`).

The stage scores each sampled top-level run and, per its settings, the runs nested in it; every result becomes a
:class:`~monitor.store.StoredResult` row of the run that produced it. When the stage reports
:class:`~monitor.scoring.stage.Backpressure` (the judge pool is full) the step refuses the trace (nothing taken:
the results of the attempt are discarded, they are recomputed identically) and keeps refusing, cheaply, for a
capped exponential backoff (0.1 s → 5 s) before it tries again; meanwhile it reports ``scoring`` pressure.
The judge verdicts the trace's runs are owed (taken by the judge intake while the stage scored them) go in
``TraceWork.owed``; with a keeper, the scored runs as they are kept to be looked at (redacted, capped) and the
tool definitions they offered go in ``TraceWork.kept`` and ``tools``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from monitor.judging.pool import PoolJob
from monitor.scoring.result import ScoreResult
from monitor.scoring.stage import Backpressure
from monitor.steps.contract import Message, MessageRejected, Step, TransformStep
from monitor.steps.work import Backoff, Scoring, TraceWork
from monitor.store import KeptRun, OfferedTool, StoredResult
from monitor.trajectory.model import Run

log = logging.getLogger(__name__)

Work = TraceWork | None


class OwedJudges(Protocol):
    """The judge intake (:class:`~monitor.judging.intake.JudgeIntake`): the verdicts the runs just scored are owed."""

    def drain(self) -> list[PoolJob]: ...


class Keeper(Protocol):
    """:class:`~monitor.store.kept.RunKeeper`: a scored run tree as it is kept to be looked at."""

    def keep(self, root: Run, seen_at: datetime) -> tuple[list[KeptRun], list[OfferedTool]]: ...


class ScoreStep(TransformStep[Work, Work]):
    """Fills ``TraceWork.rows``, ``owners``, ``owed``, ``kept`` and ``tools``; see the module docstring."""

    def __init__(
        self,
        next_step: Step[Work],
        scoring: Scoring,
        *,
        clock: Callable[[], float],
        judges: OwedJudges | None = None,
        keeper: Keeper | None = None,
        wall: Callable[[], float] = time.time,
    ) -> None:
        super().__init__(next_step)
        self.scoring = scoring
        self.clock = clock
        self.judges = judges
        self.keeper = keeper
        self.wall = wall
        self._backoff = Backoff(clock)
        self._refusing = False

    def process(self, message: Message[Work]) -> Message[Work]:
        work = message.payload
        if work is None or not work.runs:
            return message
        if self._refusing and not self._backoff.due():
            raise MessageRejected("scoring")
        try:
            rows, owners = score_rows(work, self.scoring)
        except Backpressure as exc:
            if self.judges is not None:
                self.judges.drain()  # the attempt's jobs go with its results: the trace is scored again later
            self._refuse(exc)
            raise MessageRejected("scoring") from exc
        self._accept()
        work.rows = rows
        work.owners = owners
        if self.judges is not None:
            work.owed = self.judges.drain()
        if self.keeper is not None:
            keep_scored(work, self.keeper, self.wall())
        return message

    def _refuse(self, exc: Exception) -> None:
        if not self._refusing:
            log.warning("scoring refuses work (%s): pausing consumption, retrying with a backoff", exc)
        self._refusing = True
        self._backoff.failed()

    def _accept(self) -> None:
        if self._refusing:
            log.info("scoring takes work again: resuming")
            self._refusing = False
            self._backoff.succeeded()

    def pressure(self) -> frozenset[str]:
        below = self.next.pressure()
        return below | {"scoring"} if self._refusing else below


def score_rows(work: TraceWork, scoring: Scoring) -> tuple[list[StoredResult], list[int]]:
    """The result rows of the sampled top-level runs of ``work`` (and of the runs nested in them, per the stage's
    settings) and, for each row, the index of its top-level run. Raises only the stage's ``Backpressure``."""
    rows: list[StoredResult] = []
    owners: list[int] = []
    for i, run in enumerate(work.runs):
        if not work.sampled or not work.sampled[i]:
            continue
        append_rows(rows, owners, i, run, scoring.score(run))
    return rows, owners


def append_rows(
    rows: list[StoredResult], owners: list[int], index: int, run: Run, results: Sequence[ScoreResult]
) -> None:
    """Append one row per result of the top-level ``run`` (``index`` in its trace's runs): each row names the
    run of the tree that produced it (its start and its tools)."""
    by_id: dict[str, Run] | None = None
    tools: dict[str, tuple[str, ...]] = {}  # per run of the tree, built once
    for result in results:
        if result.run_id == run.run_id or result.run_id is None:
            owner = run
        else:
            if by_id is None:
                by_id = {r.run_id: r for r in run.walk()}
            owner = by_id.get(result.run_id, run)
        names = tools.get(owner.run_id)
        if names is None:
            names = tools[owner.run_id] = tuple(c.name for c in owner.calls)
        rows.append(StoredResult(result=result, run_start_ns=owner.start_ns, tools=names))
        owners.append(index)


def keep_scored(work: TraceWork, keeper: Keeper, now_s: float) -> None:
    """Fill ``work.kept`` and ``work.tools``: the top-level runs with rows, as they are kept to be looked at."""
    if not work.rows or work.kept:
        return
    seen_at = datetime.fromtimestamp(now_s, UTC)
    for i in sorted(set(work.owners)):
        kept, offered = keeper.keep(work.runs[i], seen_at)
        work.kept.extend(kept)
        work.tools.extend(offered)
