"""The daemon's judge pool: a bounded asyncio pool on the real ``anthropic`` SDK (SCORING.md §4.0, DESIGN §3).

:class:`JudgePool` runs one asyncio loop on a thread of its own with ``judge.concurrency`` workers and one
``AsyncAnthropic`` client (``max_retries=0``: the pool retries itself, so that every attempt goes through the
budget). The pipeline hands it :class:`PoolJob` s (:meth:`JudgePool.offer`, thread-safe, deduplicated by key)
and collects :class:`Verdict` s (:meth:`JudgePool.finished`); nothing here touches the store or Kafka, so the
judge can never stall ingestion: a job waits in the pool's queue, not in the pipeline.

**One job** drives its :class:`~monitor.scoring.judges.task.JudgeTask`: the pending requests of every sample go
out together; each answer is fed back until the task is done. **One request**:

1. *Budget.* :meth:`~monitor.judging.budget.JudgeBudget.admit` with :func:`~monitor.judging.budget.estimate`:
   input = JSON body / 3.5 characters a token, output = the body's ``max_tokens``, USD with every input token
   priced as a cache write (an upper bound). Refused by ``requests_per_minute`` → wait (1 s steps) and ask
   again; by a daily limit → the job is dropped (``budget``), the pool says so once per day in a log line, and the
   refusal is counted.
2. *Send.* 429 (``retry-after`` / ``retry-after-ms`` honoured, at most :data:`MAX_DELAY_S`), 529 overloaded,
   5xx, timeouts and connection errors are retried with capped exponential backoff and full jitter; 401/403
   too (a key being rotated) but logged as an error. Each retry is admitted by the budget again (requests per
   minute count attempts; tokens and USD only what was answered). Any other 4xx ends the task as
   ``error/judge_unavailable`` with the status and message.
3. *Deadline.* A job older than ``judge.max_wait_s`` (counted from when its run was scored, so a job resumed
   after a restart keeps its age) is dropped (``expired``) at its next attempt.
4. *Account.* Answered: the budget records usage and cost; the metrics count the request by outcome, its
   latency, tokens by kind and cost. The verdict's ``judge`` object gets the summed ``cost_usd`` and the
   exchange's ``latency_ms``.
5. *Borderline* (``judge.rejudge_borderline``): a verdict within that margin of its threshold (and strictly
   between 0 and 1) is judged once more (:meth:`~monitor.scoring.judges.task.JudgeTask.again`) and the stored
   score is the mean of the two (:func:`~monitor.scoring.judges.task.rejudged`).

**Bounds.** At most ``judge.concurrency`` jobs are judged at once; :meth:`JudgePool.backlog` counts the jobs
queued, judged and finished-but-not-collected; the caller refuses new jobs beyond ``judge.max_backlog``
(:mod:`monitor.judging.intake`). :meth:`JudgePool.stop` cancels what is in flight: those jobs stay owed in the
store and are resumed by the next process.
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
import email.utils
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Protocol

import anthropic

from monitor.judging.budget import Admission, JudgeBudget, estimate
from monitor.judging.runner import split_body, usage_cost
from monitor.scoring.judges.cost import Usage, cost_usd
from monitor.scoring.judges.task import JudgeRequest, JudgeTask, borderline, rejudged
from monitor.scoring.result import ScoreResult
from monitor.settings import JudgeSettings
from monitor.store import JudgeJob
from monitor.trajectory.model import Run

__all__ = [
    "MAX_DELAY_S",
    "JudgeMetrics",
    "JudgePool",
    "PoolBase",
    "PoolJob",
    "Verdict",
]

log = logging.getLogger(__name__)

MAX_DELAY_S: Final = 60.0
"""The longest wait between two attempts of a request (a ``retry-after`` above it is cut to it)."""


class JudgeMetrics(Protocol):
    """What the pool reports (``monitor.export.metrics.Metrics`` implements it; thread-safe)."""

    def judge_request(self, judge: str, model: str, outcome: str, seconds: float | None) -> None: ...
    def judge_usage(self, judge: str, model: str, usage: Usage, usd: float | None) -> None: ...
    def judge_dropped(self, judge: str, reason: str, n: int = 1) -> None: ...
    def set_judge_backlog(self, n: int) -> None: ...
    def set_judge_budget_remaining(self, remaining: Mapping[str, Mapping[str, float]]) -> None: ...


@dataclass(slots=True)
class PoolJob:
    """One verdict owed: the task to drive, the row that keeps it owed in the store, the run it judges
    (for the metrics and the result's identity) and the run's tool names (for the store's ``runs`` row)."""

    task: JudgeTask
    row: JudgeJob
    run: Run
    tools: tuple[str, ...]
    started_mono: float | None = None

    @property
    def key(self) -> str:
        return self.row.key

    @property
    def kind(self) -> str:
        return self.row.scorer_kind


@dataclass(frozen=True, slots=True)
class Verdict:
    """What became of a job: its ``result`` (a §5.1 record, also an ``error`` one), or ``None`` with the
    ``dropped`` reason (``budget``, ``expired``)."""

    job: PoolJob
    result: ScoreResult | None
    dropped: str | None = None


@dataclass(slots=True)
class _Attempt:
    number: int = 0
    reason: str = ""
    unauthorized_logged: bool = field(default=False)


class _Drop(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class PoolBase:
    """The bookkeeping every judge pool shares (:class:`JudgePool`, ``monitor.judging.batch_pool.BatchPool``): the
    jobs it holds by key (queued, being judged, or finished and not collected: the backlog, whose leases the judge
    step renews) and the verdicts waiting to be collected. Thread-safe. Subclasses implement :meth:`_accept` (start
    judging jobs just taken) and :meth:`stop`."""

    def __init__(self, metrics: JudgeMetrics) -> None:
        self.metrics = metrics
        self._lock = threading.Lock()
        self._jobs: dict[str, PoolJob] = {}
        self._done: collections.deque[Verdict] = collections.deque()

    def offer(self, jobs: Sequence[PoolJob]) -> int:
        """Take ``jobs`` (a key already held is ignored); returns how many were taken."""
        fresh: list[PoolJob] = []
        with self._lock:
            for job in jobs:
                if job.key not in self._jobs:
                    self._jobs[job.key] = job
                    fresh.append(job)
            backlog = len(self._jobs)
        if fresh:
            self._accept(fresh)
        self.metrics.set_judge_backlog(backlog)
        return len(fresh)

    def finished(self) -> list[Verdict]:
        """The verdicts since the last call (their jobs leave the pool)."""
        out: list[Verdict] = []
        with self._lock:
            while self._done:
                verdict = self._done.popleft()
                self._jobs.pop(verdict.job.key, None)
                out.append(verdict)
            backlog = len(self._jobs)
        if out:
            self.metrics.set_judge_backlog(backlog)
        return out

    def backlog(self) -> int:
        """Jobs queued, being judged, or finished and not yet collected."""
        with self._lock:
            return len(self._jobs)

    def keys(self) -> list[str]:
        """The keys of :meth:`backlog` (to renew their leases)."""
        with self._lock:
            return list(self._jobs)

    def holds(self, key: str) -> bool:
        with self._lock:
            return key in self._jobs

    def job(self, key: str) -> PoolJob | None:
        with self._lock:
            return self._jobs.get(key)

    def _finish(self, verdict: Verdict) -> None:
        with self._lock:
            self._done.append(verdict)

    def _accept(self, jobs: Sequence[PoolJob]) -> None:
        raise NotImplementedError

    def stop(self, timeout_s: float = 5.0) -> None:
        raise NotImplementedError


class JudgePool(PoolBase):
    """See the module docstring.

    ``client_factory`` makes the ``AsyncAnthropic`` client inside the pool's loop (default: from the settings,
    ``max_retries=0``); ``wall`` is the UTC clock jobs' ages are measured on; ``backoff_s`` the first retry
    delay (doubling up to :data:`MAX_DELAY_S`).
    """

    def __init__(
        self,
        settings: JudgeSettings,
        budget: JudgeBudget,
        metrics: JudgeMetrics,
        *,
        client_factory: Callable[[], anthropic.AsyncAnthropic] | None = None,
        wall: Callable[[], datetime] = lambda: datetime.now(UTC),
        monotonic: Callable[[], float] = time.monotonic,
        backoff_s: float = 0.5,
        rpm_wait_s: float = 1.0,
    ) -> None:
        super().__init__(metrics)
        self.settings = settings
        self.budget = budget
        self._client_factory = client_factory or self._default_client
        self._wall = wall
        self._monotonic = monotonic
        self._backoff_s = backoff_s
        self._rpm_wait_s = rpm_wait_s
        self._loop: asyncio.AbstractEventLoop | None = None
        self._queue: asyncio.Queue[PoolJob] | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._stop: asyncio.Event | None = None
        self._spent_logged: set[tuple[str, str]] = set()
        self._random = random.Random()
        self.in_flight = 0

    # ----------------------------------------------------------------- the caller's side (any thread)

    def start(self) -> JudgePool:
        """Start the pool's thread and loop (returns once they run)."""
        if self._thread is not None:
            return self
        self._thread = threading.Thread(target=self._thread_main, name="judge-pool", daemon=True)
        self._thread.start()
        self._started.wait(10.0)
        return self

    def _accept(self, jobs: Sequence[PoolJob]) -> None:
        loop, queue = self._loop, self._queue
        if loop is None or queue is None:
            raise RuntimeError("the judge pool is not started")
        loop.call_soon_threadsafe(_put_all, queue, jobs)

    def stop(self, timeout_s: float = 5.0) -> None:
        """Cancel what is in flight and stop the thread (the jobs stay owed in the store)."""
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(stop.set)
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    # ----------------------------------------------------------------- the loop

    def _default_client(self) -> anthropic.AsyncAnthropic:
        key = self.settings.api_key()
        return anthropic.AsyncAnthropic(
            api_key=key.get_secret_value() if key is not None else None,
            base_url=self.settings.base_url,
            timeout=self.settings.timeout_s,
            max_retries=0,
        )

    def _thread_main(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception:
            log.exception("the judge pool stopped on an error")
        finally:
            self._started.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue = asyncio.Queue()
        self._stop = asyncio.Event()
        client = self._client_factory()
        workers = [asyncio.create_task(self._worker(client)) for _ in range(self.settings.concurrency)]
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            for worker in workers:
                worker.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            await client.close()

    async def _worker(self, client: anthropic.AsyncAnthropic) -> None:
        assert self._queue is not None
        while True:
            job = await self._queue.get()
            self.in_flight += 1
            try:
                verdict = await self._judge(client, job)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a bug here must not kill the worker: the verdict is error/internal
                log.exception("judge %s failed on trace %s", job.kind, job.row.trace_id)
                verdict = Verdict(job, job.task.judge._internal_error(job.run, exc))
            finally:
                self.in_flight -= 1
            self._finish(verdict)

    async def _judge(self, client: anthropic.AsyncAnthropic, job: PoolJob) -> Verdict:
        job.started_mono = self._monotonic()
        verdict = await self._drive(client, job, job.task)
        first = verdict.result
        if first is not None and borderline(first, self.settings.rejudge_borderline):
            second = await self._drive(client, job, job.task.again())
            if second.result is not None:
                verdict = Verdict(job, rejudged(first, second.result))
        if verdict.result is not None and verdict.result.judge is not None:
            usage = dataclasses.replace(
                verdict.result.judge,
                cost_usd=usage_cost(verdict.result.judge, self.settings),
                latency_ms=round((self._monotonic() - job.started_mono) * 1000, 3),
            )
            verdict = Verdict(job, dataclasses.replace(verdict.result, judge=usage))
        return verdict

    async def _drive(self, client: anthropic.AsyncAnthropic, job: PoolJob, task: JudgeTask) -> Verdict:
        """Drive ``task`` to its end (its requests through :meth:`_send`)."""
        dropped: list[str] = []
        try:
            while not task.done:
                requests = task.pending()
                if not requests:  # nothing left to send: the task ended on a failure
                    break
                async with asyncio.TaskGroup() as group:  # a drop cancels the job's other requests
                    for request in requests:
                        group.create_task(self._send(client, job, task, request))
        except* _Drop as group:
            dropped.extend(e.reason for e in group.exceptions if isinstance(e, _Drop))
        if dropped:
            self.metrics.judge_dropped(job.kind, dropped[0])
            return Verdict(job, None, dropped[0])
        return Verdict(job, task.result())

    def _expired(self, job: PoolJob) -> bool:
        age = (self._wall() - job.row.enqueued_at).total_seconds()
        return age >= self.settings.max_wait_s

    async def _send(
        self, client: anthropic.AsyncAnthropic, job: PoolJob, task: JudgeTask, request: JudgeRequest
    ) -> None:
        kind = job.kind
        model = str(request.body.get("model", task.config.model))
        bound = estimate(request.body, self.settings, batch=False)
        attempt = _Attempt()
        kwargs = split_body(client.messages.create, request.body)
        while True:
            if self._expired(job):
                raise _Drop("expired")
            admission = self.budget.admit(
                kind, bound.input_tokens, bound.usd, estimated_output_tokens=bound.output_tokens
            )
            if not admission:
                await self._refused(admission)
                continue
            started = self._monotonic()
            try:
                message = await client.messages.create(**kwargs)
            except anthropic.APIStatusError as exc:
                self.budget.cancel(admission)
                outcome = _status_outcome(exc.status_code)
                self.metrics.judge_request(kind, model, outcome, self._monotonic() - started)
                if outcome == "rejected":
                    task.fail(request.custom_id, f"{exc.status_code} {type(exc).__name__}: {exc.message}"[:500])
                    return
                if outcome == "unauthorized" and not attempt.unauthorized_logged:
                    attempt.unauthorized_logged = True
                    log.error("the judge API refused the key (%d): retrying with backoff", exc.status_code)
                await self._pause(attempt, _retry_after(exc.response.headers), job)
                continue
            except (anthropic.APITimeoutError, anthropic.APIConnectionError) as exc:
                self.budget.cancel(admission)
                outcome = "timeout" if isinstance(exc, anthropic.APITimeoutError) else "connection"
                self.metrics.judge_request(kind, model, outcome, self._monotonic() - started)
                await self._pause(attempt, None, job)
                continue
            seconds = self._monotonic() - started
            answer: dict[str, Any] = message.model_dump(mode="json", exclude_none=True)
            usage = Usage.from_api(answer.get("usage") or {}, requests=1, batch=False)
            usd = cost_usd(usage, model, self.settings.prices, self.settings.cache_ttl)
            self.budget.record(kind, usage, usd, admission=admission)
            self.metrics.judge_request(kind, model, "ok", seconds)
            self.metrics.judge_usage(kind, model, usage, usd)
            self.metrics.set_judge_budget_remaining(self.budget.remaining(kind))
            task.feed(request.custom_id, answer)
            return

    async def _refused(self, admission: Admission) -> None:
        """A budget refusal: wait for the minute window, or drop the job (a daily limit is spent)."""
        if admission.limit == "requests_per_minute":
            await asyncio.sleep(self._rpm_wait_s)
            return
        label = admission.label or "budget"
        day = self._wall().date().isoformat()
        if (day, label) not in self._spent_logged:
            self._spent_logged.add((day, label))
            log.warning(
                "judge budget %s is spent for today (UTC)%s: judges stop until it refills; code scoring goes on",
                label,
                " (the model has no price and a USD limit applies)" if admission.unpriced else "",
            )
        self.metrics.set_judge_budget_remaining(self.budget.remaining(admission.kind))
        raise _Drop("budget")

    async def _pause(self, attempt: _Attempt, retry_after: float | None, job: PoolJob) -> None:
        """Wait before the next attempt: ``retry-after`` when the API gave one, else capped exponential backoff
        with full jitter; never past the job's deadline (it is dropped there)."""
        attempt.number += 1
        if retry_after is not None:
            delay = min(retry_after, MAX_DELAY_S)
        else:
            ceiling = min(MAX_DELAY_S, self._backoff_s * 2 ** min(attempt.number - 1, 16))
            delay = self._random.uniform(ceiling / 2, ceiling)
        left = self.settings.max_wait_s - (self._wall() - job.row.enqueued_at).total_seconds()
        await asyncio.sleep(max(0.0, min(delay, left)))


def _put_all(queue: asyncio.Queue[PoolJob], jobs: Sequence[PoolJob]) -> None:
    for job in jobs:
        queue.put_nowait(job)


def _status_outcome(status: int) -> str:
    if status == 429:
        return "rate_limited"
    if status == 529:
        return "overloaded"
    if status in (401, 403):
        return "unauthorized"
    if status >= 500 or status == 408:
        return "server_error"
    return "rejected"


def _retry_after(headers: Mapping[str, str]) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), as the SDK reads them."""
    ms = headers.get("retry-after-ms")
    if ms is not None:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(value) if value else None
        if parsed is None:
            return None
        return max(0.0, (parsed - datetime.now(parsed.tzinfo or UTC)).total_seconds())
