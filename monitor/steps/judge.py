"""Judge: hand the verdicts a trace is owed to the judge pool, and bring the pool's verdicts to the store.

Between score and store. The judge never holds a trace back, so it cannot stall ingestion (a judge that is down
for an hour, a spent budget): a trace goes on to the store at once with the verdicts it is owed
(``TraceWork.owed``), which the store writes as ``judge_jobs`` rows in the same transaction as its code results
(leased to this daemon); its offsets commit as usual. What happens to a verdict owed:

* :meth:`JudgeStep.process` offers the trace's jobs to the pool (:class:`~monitor.judging.pool.JudgePool`);
* :meth:`JudgeStep.poll` collects the pool's verdicts and sends them on as
  :class:`~monitor.steps.work.VerdictWork` (at most :data:`VERDICTS_PER_MESSAGE` a message): the store writes
  them and deletes their jobs in one transaction (a dropped job is deleted with no result), observe counts
  them, export sends them as evaluation events;
* every ``judge.lease_s / 3`` the step renews this daemon's lease on the jobs the pool holds;
* at its first poll, and every :data:`CLAIM_INTERVAL_S`, it claims jobs owed that nobody judges: at the first
  poll its own (a restart: same ``judge.owner``), later those whose lease ran out (another daemon stopped), up to
  the room left in ``judge.max_backlog``, and offers them to the pool (:meth:`~monitor.judging.intake.
  JudgeIntake.resume`). A job that cannot be rebuilt (its scorer is no longer configured) is settled.

So a verdict owed is judged at least once and stored exactly once (the results' unique key): kill -9 before the
store wrote the trace → the trace is read again and owes it again; after → the job is in the store and is
resumed. Without a pool (judges disabled) the step passes messages through.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Final, Protocol

from monitor.judging.pool import PoolJob, Verdict
from monitor.scoring.stage import stamp
from monitor.steps.contract import Message, Step, TransformStep
from monitor.steps.work import JudgeStore, TraceWork, VerdictWork
from monitor.store import JudgeJob, StoredResult, StoreUnavailable

__all__ = ["CLAIM_INTERVAL_S", "VERDICTS_PER_MESSAGE", "JudgeStep", "Pool", "Resume"]

log = logging.getLogger(__name__)

CLAIM_INTERVAL_S: Final = 60.0
"""Seconds between two looks for verdicts owed that no daemon judges."""
VERDICTS_PER_MESSAGE: Final = 200

In = TraceWork | None
Out = TraceWork | VerdictWork | None


class Pool(Protocol):
    """What the step needs of :class:`~monitor.judging.pool.JudgePool`."""

    def offer(self, jobs: Sequence[PoolJob]) -> int: ...
    def finished(self) -> list[Verdict]: ...
    def backlog(self) -> int: ...
    def keys(self) -> list[str]: ...
    def holds(self, key: str) -> bool: ...
    def stop(self, timeout_s: float = 5.0) -> None: ...


class Resume(Protocol):
    """:meth:`monitor.judging.intake.JudgeIntake.resume`."""

    def resume(self, row: JudgeJob) -> PoolJob | None: ...


class JudgeStep(TransformStep[In, Out]):
    """See the module docstring. ``pool`` None: a pass-through."""

    def __init__(
        self,
        next_step: Step[Out],
        *,
        pool: Pool | None,
        resume: Resume | None = None,
        store: JudgeStore | None = None,
        owner: str = "",
        lease_s: float = 600.0,
        max_backlog: int = 1000,
        clock: Callable[[], float],
        wall: Callable[[], float],
    ) -> None:
        super().__init__(next_step)
        self.pool = pool
        self.resume = resume
        self.store = store
        self.owner = owner
        self.lease_s = lease_s
        self.max_backlog = max_backlog
        self.clock = clock
        self.wall = wall
        self.verdicts: deque[VerdictWork] = deque()
        self._next_renew = clock() + lease_s / 3
        self._next_claim = 0.0
        self._claimed_own = False

    # ------------------------------------------------------------------ the contract

    def process(self, message: Message[In]) -> Message[Out]:
        work = message.payload
        if self.pool is not None and work is not None and work.owed:
            self.pool.offer(work.owed)
        return message  # type: ignore[return-value]  # Message is invariant; In ⊂ Out

    def poll(self) -> None:
        self._forward()
        if self.pool is not None:
            self._collect()
            self._send_verdicts()
            self._maintain()
        self.next.poll()

    def join(self, timeout_s: float) -> None:
        self._forward()
        if self.pool is not None:
            self._collect()
            self._send_verdicts()
        self.next.join(timeout_s)

    def close(self) -> None:
        if self.pool is not None:
            self.pool.stop()
        self.next.close()

    def terminate(self) -> None:
        if self.pool is not None:
            self.pool.stop(0.5)
        self.next.terminate()

    # ------------------------------------------------------------------ verdicts

    def _collect(self) -> None:
        assert self.pool is not None
        verdicts = self.pool.finished()
        for start in range(0, len(verdicts), VERDICTS_PER_MESSAGE):
            self.verdicts.append(self._work(verdicts[start : start + VERDICTS_PER_MESSAGE]))

    def _send_verdicts(self) -> None:
        while self.verdicts and self.carried is None:
            self._send(Message(self.verdicts.popleft()))

    def _work(self, verdicts: Sequence[Verdict]) -> VerdictWork:
        scored_at = datetime.fromtimestamp(self.wall(), UTC).isoformat()
        work = VerdictWork(settled=tuple(v.job.key for v in verdicts))
        index: dict[int, int] = {}
        for verdict in verdicts:
            if verdict.result is None:
                continue
            run = verdict.job.run
            owner = index.get(id(run))
            if owner is None:
                owner = index[id(run)] = len(work.runs)
                work.runs.append(run)
            result = stamp(run, verdict.result, scored_at)
            work.rows.append(
                StoredResult(result=result, run_start_ns=verdict.job.row.run_start_ns, tools=verdict.job.tools)
            )
            work.owners.append(owner)
        return work

    # ------------------------------------------------------------------ leases

    def _maintain(self) -> None:
        if self.store is None:
            return
        now = self.clock()
        if now >= self._next_renew:
            self._next_renew = now + self.lease_s / 3
            self._renew()
        if now >= self._next_claim:
            self._next_claim = now + CLAIM_INTERVAL_S
            self._claim()

    def _renew(self) -> None:
        assert self.pool is not None and self.store is not None
        keys = self.pool.keys()
        if not keys:
            return
        until = datetime.fromtimestamp(self.wall(), UTC) + timedelta(seconds=self.lease_s)
        try:
            self.store.renew_judge_jobs(self.owner, keys, until)
        except StoreUnavailable as exc:
            log.warning("judge leases not renewed (the store is unavailable: %s); retrying", exc)
            self._next_renew = self.clock() + 5.0

    def _claim(self) -> None:
        assert self.pool is not None and self.store is not None and self.resume is not None
        room = self.max_backlog - self.pool.backlog()
        if room <= 0:
            return
        now = datetime.fromtimestamp(self.wall(), UTC)
        try:
            rows = self.store.claim_judge_jobs(
                self.owner, now, now + timedelta(seconds=self.lease_s), room, own=not self._claimed_own
            )
        except StoreUnavailable as exc:
            log.warning("judge jobs owed not looked up (the store is unavailable: %s); retrying", exc)
            self._next_claim = self.clock() + 5.0
            return
        self._claimed_own = True
        jobs: list[PoolJob] = []
        unusable: list[str] = []
        for row in rows:
            if self.pool.holds(row.key):
                continue
            job = self.resume.resume(row)
            if job is None:
                unusable.append(row.key)
            else:
                jobs.append(job)
        if jobs:
            log.info("resuming %d judge verdicts owed", len(jobs))
            self.pool.offer(jobs)
        if unusable:
            self.verdicts.append(VerdictWork(settled=tuple(unusable)))
