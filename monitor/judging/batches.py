"""Judge verdicts through Anthropic's Message Batches API (half price), resumable across restarts; and the
direct (one Messages call per request) transport that ``monitor eval`` uses without ``--judge-batch``.

Both drive :class:`~monitor.scoring.judges.task.JudgeTask` s (SCORING.md §4.0), so a verdict is byte-identical
whichever way its requests travel, and both charge the same :class:`~monitor.judging.budget.JudgeBudget` as the
daemon's pool.

:class:`BatchJudge`
-------------------

Non-blocking, for a daemon thread: :meth:`BatchJudge.add` hands it tasks (thread-safe), :meth:`BatchJudge.step`
does what is due and returns the tasks that ended. One step:

1. **Pull.** Every request the tasks have pending (round 0 of each sample; later the repair and ``max_tokens``
   retries of §4.0, which therefore always go in a *later* batch than the answer that asked for them). Before a
   request is queued, the ledger (:class:`~monitor.store.ledger.SqlBatchLedger`) is asked whether a usable batch
   (``in_progress``, ``canceling`` or ``ended``) already holds its ``custom_id``: then it is **not sent again**;
   that batch is polled and the request's result is taken from it. Custom ids are deterministic
   (``sha256(key#sample#round)``), so this is how a process that was killed with batches in flight resumes them
   instead of paying twice.
2. **Poll** each batch in flight whose poll is due: first ``judge.batch_poll_s`` after submission (at once for
   an adopted batch), then the interval grows by a factor :data:`POLL_BACKOFF` per poll up to :data:`MAX_POLL_S` (a
   batch takes minutes to hours; most end within one). A poll that fails (5xx, connection) is retried with the
   same backoff. Once ``ended``, its results (JSONL) are read and matched to the requests by ``custom_id``:

   * ``succeeded`` — the Message is fed to its task; usage and cost (batch price: half) are recorded in the
     budget; the task's next round, if any, is pulled into the queue (so it goes in a later batch);
   * ``errored`` — the API's per-request error: sent again once (next batch), then the task fails
     (``error/judge_unavailable`` with the API's message); errored requests are not billed;
   * ``canceled`` / ``expired`` (the batch reached its 24-hour limit) and a batch that answers 404 (``lost``) —
     given back to the task (:meth:`~monitor.scoring.judges.task.JudgeTask.resend`) and submitted again, up to
     ``max_resubmits`` (:data:`MAX_RESUBMITS`) times, then the task fails.

   The ledger's status follows: ``ended``; ``expired`` when none of its results was usable (every one expired
   or canceled); ``lost`` on 404.

3. **Submit** the queue as one batch (at most ``judge.batch_max_requests`` requests; more make several) when it is
   due: it holds ``batch_max_requests`` requests, or its oldest request has waited ``judge.batch_max_wait_s``, or
   the caller flushes (:meth:`run` does: nothing else will come). ``params`` is the request body as it is,
   ``temperature`` included (the Batches API takes it there). The batch and its custom ids are written to the
   ledger in one transaction right after the API accepted it (a crash between the two loses only the resume of
   that batch). A failed create (429, 5xx, connection) leaves the requests queued and retries after a backoff
   (``batch_poll_s`` doubled per failure, at most :data:`MAX_POLL_S`); a 4xx other than 408/409/429 (the batch
   itself is refused: bad key, too large) fails its tasks (``error/judge_unavailable``).

**Budgets.** Each request is admitted (:meth:`~monitor.judging.budget.JudgeBudget.admit`) just before it goes
into a batch, with an estimate: input = JSON body / 3.5 characters a token (rounded up),
output = the body's ``max_tokens``, USD priced from those at the *cache-write* input rate and the batch discount
(an upper bound of what the request can cost). Its reservation lasts until its result arrives; then the actual
usage and cost are recorded (``expired``, ``canceled``, ``errored`` and lost requests release it unbilled). A
refusal:

* by ``requests_per_minute`` — the request stays queued and is admitted at a later step (the window slides);
* by a daily limit (tokens, USD) while some request is still admitted and not answered — it waits too: the
  reservations of the requests in flight may be larger than what they will cost;
* by a daily limit with nothing in flight (the day's spend has reached the cap) or an unpriced model under a
  USD limit — final: the task ends ``error/judge_unavailable`` with a message naming the limit (a log line says
  so once per limit and day). ``monitor eval`` turns that into exit 3, never into a pass.

Results adopted from an earlier process's batch were never admitted here: their spend is recorded without an
admission (outside the budget's guarantee, as its docstring says).

**Results** (:meth:`result`) are the task's record with ``judge.batch = true``, ``judge.cost_usd`` from the
``judge.prices`` table (half price) and ``judge.latency_ms = null``: a batch's wall time measures the queue, not
the judge, and would swamp the latency histogram.

:meth:`BatchJudge.run` is the blocking form for ``monitor eval``: add, then step (flushing) and sleep until every
task is done or ``timeout_s`` passes; a task still waiting then ends ``error/judge_unavailable`` (its batch stays
in the ledger: run again to resume it).

:class:`DirectJudge`
--------------------

Blocking: every request through ``client.messages.create`` (the SDK's retries with backoff; an API error after
them fails the task: ``error/judge_unavailable``), the samples of a task one after the other, up to
``judge.concurrency`` tasks at once on a thread pool. The same budget rules (requests-per-minute refusals and
daily refusals while something is in flight wait, a spent daily limit fails the task). Results carry
``cost_usd`` (list price) and ``latency_ms`` (wall time of the task's exchange).
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final, cast

import anthropic
import sqlalchemy.exc

from monitor.judging.budget import Admission, Estimate, JudgeBudget, estimate
from monitor.judging.runner import send_with, usage_cost
from monitor.scoring.judges.base import Judge, JudgeUnavailable
from monitor.scoring.judges.cost import Usage, cost_usd
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.judges.task import JudgeRequest, JudgeTask
from monitor.scoring.result import ScoreResult
from monitor.settings import JudgeSettings
from monitor.store.ledger import BatchPurpose, SqlBatchLedger

__all__ = [
    "MAX_ERRORED_RETRIES",
    "MAX_POLL_S",
    "MAX_RESUBMITS",
    "POLL_BACKOFF",
    "BatchJudge",
    "DirectJudge",
    "TransportStats",
]

log = logging.getLogger(__name__)

POLL_BACKOFF: Final = 1.5
"""Each poll of a batch still processing waits this much longer than the one before."""
MAX_POLL_S: Final = 600.0
"""The longest wait between two polls of a batch (and between two attempts to create one)."""
MAX_RESUBMITS: Final = 3
"""Times a request is submitted again after its batch expired, was canceled or was lost."""
MAX_ERRORED_RETRIES: Final = 1
"""Times a request the API answered ``errored`` is sent again (next batch) before its task fails."""
RPM_WAIT_S: Final = 1.0
"""How long a request refused by ``requests_per_minute`` (or waiting for reservations) waits before it asks again."""
DEFAULT_RUN_TIMEOUT_S: Final = 25 * 3600.0
""":meth:`BatchJudge.run` waits this long by default: a batch expires after 24 hours."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


# ----------------------------------------------------------------------------- estimates and results


def _final_refusal(admission: Admission, budget: JudgeBudget) -> bool:
    """Whether a refused request should give up (a spent daily limit) rather than wait (module docstring)."""
    if admission.unpriced:
        return True
    if admission.limit == "requests_per_minute":
        return False
    return budget.in_flight() == 0


def _refusal_message(admission: Admission) -> str:
    if admission.unpriced:
        return f"judge budget {admission.label}: the model has no price in judge.prices and a USD limit applies"
    return f"judge budget {admission.label} is spent for today (UTC)"


@dataclass
class TransportStats:
    """What a transport did: API requests answered, their cost (USD, None when some model had no price)."""

    requests: int = 0
    usd: float | None = 0.0
    batches: int = 0
    succeeded: int = 0
    errored: int = 0
    expired: int = 0
    canceled: int = 0
    lost: int = 0
    resumed: int = 0
    """Requests answered by a batch found in the ledger (submitted by an earlier process: not sent again)."""
    refused: int = 0
    """Requests a spent budget stopped."""

    def spend(self, usd: float | None) -> None:
        self.requests += 1
        self.usd = None if usd is None or self.usd is None else self.usd + usd


def _finished(task: JudgeTask, settings: JudgeSettings, *, batch: bool, latency_ms: float | None) -> ScoreResult:
    result = task.result()
    if result.judge is None:
        return result
    usage = dataclasses.replace(result.judge, batch=batch, latency_ms=latency_ms)
    return dataclasses.replace(result, judge=dataclasses.replace(usage, cost_usd=usage_cost(usage, settings)))


class _BudgetLog:
    """One warning per (UTC day, limit)."""

    def __init__(self) -> None:
        self._said: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def refused(self, admission: Admission, day: str) -> None:
        label = admission.label or "budget"
        with self._lock:
            if (day, label) in self._said:
                return
            self._said.add((day, label))
        log.warning("judge budget %s is spent for today (UTC): judge requests stop until it refills", label)


# ----------------------------------------------------------------------------- Message Batches


@dataclass(slots=True)
class _Entry:
    """A request this transport owes its task an answer for."""

    task: JudgeTask
    request: JudgeRequest
    estimate: Estimate
    queued_at: float
    admission: Admission | None = None
    batch_id: str | None = None
    errors: int = 0
    resubmits: int = 0
    adopted: bool = False
    """Its batch was found in the ledger (an earlier process submitted it)."""
    skip: frozenset[str] = frozenset()
    """Batches known not to answer this request (expired, canceled, errored there): the ledger lookup ignores them."""

    @property
    def custom_id(self) -> str:
        return self.request.custom_id

    @property
    def kind(self) -> str:
        return self.task.judge.kind

    @property
    def model(self) -> str:
        return str(self.request.body.get("model", self.task.config.model))


@dataclass(slots=True)
class _Batch:
    id: str
    custom_ids: set[str]
    next_poll: float
    interval: float
    failures: int = 0


@dataclass(frozen=True, slots=True)
class _Retry:
    errors: int
    resubmits: int
    skip: frozenset[str]


class BatchJudge:
    """Drives judge tasks through Message Batches (module docstring).

    ``client``: an ``anthropic.Anthropic`` (its ``max_retries`` apply to each batch call); ``ledger``: where
    batches in flight are kept; ``settings``: the ``judge`` section (batch sizes and intervals, prices, the
    model); ``purpose``: ``daemon`` or ``eval`` (ledger column); ``budget``: the judge budget (None: unlimited).
    ``max_requests`` / ``max_wait_s`` / ``poll_s`` default to ``judge.batch_max_requests`` /
    ``batch_max_wait_s`` / ``batch_poll_s``. ``clock`` stamps the ledger; ``monotonic`` and ``sleep`` pace
    :meth:`run`.
    """

    collect_all: Final = True
    """``monitor eval`` hands every judge task of the whole run at once (one batch)."""

    def __init__(
        self,
        client: anthropic.Anthropic,
        ledger: SqlBatchLedger,
        settings: JudgeSettings,
        *,
        purpose: BatchPurpose = "daemon",
        budget: JudgeBudget | None = None,
        max_requests: int | None = None,
        max_wait_s: float | None = None,
        poll_s: float | None = None,
        max_poll_s: float = MAX_POLL_S,
        max_resubmits: int = MAX_RESUBMITS,
        timeout_s: float = DEFAULT_RUN_TIMEOUT_S,
        clock: Callable[[], datetime] = _utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.ledger = ledger
        self.settings = settings
        self.purpose: BatchPurpose = purpose
        self.budget = budget
        self.max_requests = max_requests or settings.batch_max_requests
        self.max_wait_s = settings.batch_max_wait_s if max_wait_s is None else max_wait_s
        self.poll_s = settings.batch_poll_s if poll_s is None else poll_s
        self.max_poll_s = max(max_poll_s, self.poll_s)
        self.max_resubmits = max_resubmits
        self.timeout_s = timeout_s
        self.stats = TransportStats()
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.RLock()
        self._tasks: list[JudgeTask] = []
        self._entries: dict[str, _Entry] = {}
        self._queue: list[str] = []
        self._batches: dict[str, _Batch] = {}
        self._retries: dict[str, _Retry] = {}
        self._submit_after = 0.0
        self._create_failures = 0
        self._budget_wait = False
        self._budget_log = _BudgetLog()

    # ----------------------------------------------------------------- the caller's side

    def config_for(self, judge: Judge[Any]) -> JudgeConfig:
        """The request configuration of ``judge`` (its ``model`` parameter, ``judge.models``, ``judge.model``)."""
        config = JudgeConfig.from_settings(self.settings, judge.kind, getattr(judge.params, "model", None))
        return dataclasses.replace(config, batch=True)

    def add(self, tasks: Iterable[JudgeTask]) -> None:
        """Hand over tasks (thread-safe); a task that needs no API call is done at the next step."""
        with self._lock:
            self._tasks.extend(tasks)

    @property
    def busy(self) -> bool:
        """Some task is not done yet."""
        with self._lock:
            return bool(self._tasks)

    def queued(self) -> int:
        """Requests waiting to go into a batch."""
        with self._lock:
            return len(self._queue)

    def in_flight(self) -> dict[str, int]:
        """Batch id → requests of ours it holds, for the batches being polled."""
        with self._lock:
            return {b.id: len(b.custom_ids) for b in self._batches.values()}

    def step(self, now: float | None = None, *, flush: bool = False) -> list[JudgeTask]:
        """Do what is due (module docstring): pull pending requests, poll the batches whose poll is due and feed
        their results (pulling the next rounds they ask for), then submit the queue as a batch when due (``flush``:
        now). Returns the tasks that are done (they leave the transport)."""
        with self._lock:
            at = self._monotonic() if now is None else now
            self._pull(at)
            self._poll(at)
            self._pull(at)
            self._submit(at, flush=flush)
            done = [t for t in self._tasks if t.done]
            if done:
                self._tasks = [t for t in self._tasks if not t.done]
            return done

    def next_due(self, now: float | None = None) -> float | None:
        """The monotonic time at which a step has something to do (None: nothing in hand)."""
        with self._lock:
            at = self._monotonic() if now is None else now
            due = [b.next_poll for b in self._batches.values()]
            queued = [self._entries[c].queued_at for c in self._queue if c in self._entries]
            if queued and self._budget_wait:  # refused by the budget at the last step: ask again in a while
                due.append(max(self._submit_after, at + RPM_WAIT_S))
            elif queued:
                due.append(max(self._submit_after, min(queued) + self.max_wait_s))
            return min(due) if due else None

    def result(self, task: JudgeTask) -> ScoreResult:
        """The record of a done task: ``judge.batch = true``, ``cost_usd`` at batch price, no latency."""
        return _finished(task, self.settings, batch=True, latency_ms=None)

    def run(self, tasks: Sequence[JudgeTask], timeout_s: float | None = None) -> list[ScoreResult]:
        """Blocking: every task to its end (module docstring), the results in the order of ``tasks``."""
        tasks = list(tasks)
        limit = self.timeout_s if timeout_s is None else timeout_s
        self.add(tasks)
        deadline = self._monotonic() + limit
        while True:
            self.step(flush=True)
            if all(t.done for t in tasks):
                break
            now = self._monotonic()
            if now >= deadline:
                self._give_up(
                    tasks, f"no verdict within {limit:g} s: its batch is still processing; run again to resume it"
                )
                break
            due = self.next_due(now)
            wait = RPM_WAIT_S if due is None else due - now
            self._sleep(min(max(wait, 0.001), deadline - now))
        return [self.result(t) for t in tasks]

    def _give_up(self, tasks: Sequence[JudgeTask], message: str) -> None:
        with self._lock:
            for task in tasks:
                if task.done:
                    continue
                for cid in task.in_flight():
                    entry = self._entries.pop(cid, None)
                    if entry is not None and entry.admission is not None and self.budget is not None:
                        self.budget.cancel(entry.admission)
                    task.fail(cid, message)
            self._queue = [c for c in self._queue if c in self._entries]
            self._tasks = [t for t in self._tasks if not t.done]

    # ----------------------------------------------------------------- pull

    def _pull(self, now: float) -> None:
        fresh: list[_Entry] = []
        for task in self._tasks:
            if task.done:
                continue
            for request in task.pending():
                cid = request.custom_id
                if cid in self._entries:  # two tasks with one key: the second cannot be told apart
                    task.fail(cid, "another judge task in flight has the same custom_id")
                    continue
                entry = _Entry(task, request, estimate(request.body, self.settings, batch=True), now)
                retry = self._retries.pop(cid, None)
                if retry is not None:
                    entry.errors, entry.resubmits, entry.skip = retry.errors, retry.resubmits, retry.skip
                fresh.append(entry)
        if not fresh:
            return
        try:
            held = self.ledger.holding(e.custom_id for e in fresh)
        except sqlalchemy.exc.SQLAlchemyError as exc:
            log.warning("the batch ledger cannot be read (%s): the requests wait for the next step", exc)
            for entry in fresh:
                self._retries[entry.custom_id] = _Retry(entry.errors, entry.resubmits, entry.skip)
                entry.task.resend(entry.custom_id)
            return
        for entry in fresh:
            cid = entry.custom_id
            self._entries[cid] = entry
            batch_id = held.get(cid)
            if batch_id is not None and batch_id not in entry.skip:
                self._track(batch_id, now, adopted=True).custom_ids.add(cid)
                entry.batch_id = batch_id
                entry.adopted = True
            else:
                self._queue.append(cid)

    def _track(self, batch_id: str, now: float, *, adopted: bool) -> _Batch:
        batch = self._batches.get(batch_id)
        if batch is None:
            first = now if adopted else now + self.poll_s
            batch = self._batches[batch_id] = _Batch(batch_id, set(), first, self.poll_s)
        return batch

    # ----------------------------------------------------------------- submit

    def _submit(self, now: float, *, flush: bool) -> None:
        self._queue = [c for c in self._queue if c in self._entries]
        if not self._queue or now < self._submit_after:
            return
        oldest = min(self._entries[c].queued_at for c in self._queue)
        if not (flush or len(self._queue) >= self.max_requests or now - oldest >= self.max_wait_s):
            return
        self._budget_wait = False
        while self._queue:
            chosen: list[_Entry] = []
            waiting: list[str] = []
            for cid in self._queue:
                entry = self._entries.get(cid)
                if entry is None:
                    continue
                if cid not in entry.task.in_flight():  # its task ended meanwhile (another sample failed)
                    self._entries.pop(cid, None)
                    continue
                if len(chosen) >= self.max_requests:
                    waiting.append(cid)
                    continue
                if not self._admit(entry):
                    if cid in self._entries:
                        waiting.append(cid)
                        self._budget_wait = True
                    continue
                chosen.append(entry)
            self._queue = waiting
            if not chosen:
                return
            if not self._create(chosen, now):
                self._queue = [e.custom_id for e in chosen if e.custom_id in self._entries] + self._queue
                return
            if len(chosen) < self.max_requests:
                return

    def _admit(self, entry: _Entry) -> bool:
        """Admit ``entry`` with the budget; False when it must wait or was refused for good (its task failed)."""
        if self.budget is None:
            return True
        est = entry.estimate
        admission = self.budget.admit(entry.kind, est.input_tokens, est.usd, estimated_output_tokens=est.output_tokens)
        if admission:
            entry.admission = admission
            return True
        if _final_refusal(admission, self.budget):
            self._budget_log.refused(admission, self._clock().date().isoformat())
            self.stats.refused += 1
            self._entries.pop(entry.custom_id, None)
            entry.task.fail(entry.custom_id, _refusal_message(admission))
        return False

    def _release(self, entry: _Entry) -> None:
        if entry.admission is not None and self.budget is not None:
            self.budget.cancel(entry.admission)
        entry.admission = None

    def _create(self, chosen: Sequence[_Entry], now: float) -> bool:
        requests = [{"custom_id": e.custom_id, "params": e.request.body} for e in chosen]
        try:
            created = self.client.messages.batches.create(requests=cast(Any, requests))
        except anthropic.APIError as exc:
            for entry in chosen:
                self._release(entry)
            status = getattr(exc, "status_code", None)
            if isinstance(status, int) and 400 <= status < 500 and status not in (408, 409, 429):
                log.error("the Message Batches API refused a batch of %d judge requests: %s", len(chosen), exc)
                for entry in chosen:
                    self._entries.pop(entry.custom_id, None)
                    entry.task.fail(entry.custom_id, f"batch refused: {type(exc).__name__}: {exc}")
                return True  # nothing to send again
            self._create_failures += 1
            delay = min(self.max_poll_s, self.poll_s * 2 ** min(self._create_failures, 16))
            self._submit_after = now + delay
            log.warning("cannot create a Message Batch (%s): trying again in %.1f s", exc, delay)
            return False
        self._create_failures = 0
        self.stats.batches += 1
        ids = [e.custom_id for e in chosen]
        models = {e.model for e in chosen}
        try:
            self.ledger.record(
                created.id,
                self.purpose,
                next(iter(models)) if len(models) == 1 else None,
                ids,
                self._clock(),
                created.expires_at,
            )
        except sqlalchemy.exc.SQLAlchemyError as exc:
            log.error(
                "Message Batch %s is not in the ledger (%s): a restart would send its requests again", created.id, exc
            )
        batch = self._track(created.id, now, adopted=False)
        if created.processing_status == "ended":
            batch.next_poll = now
        for entry in chosen:
            entry.batch_id = created.id
            batch.custom_ids.add(entry.custom_id)
        return True

    # ----------------------------------------------------------------- poll and results

    def _poll(self, now: float) -> None:
        for batch in list(self._batches.values()):
            if batch.next_poll > now:
                continue
            ours = [c for c in batch.custom_ids if (e := self._entries.get(c)) is not None and e.batch_id == batch.id]
            if not ours:
                del self._batches[batch.id]
                continue
            try:
                info = self.client.messages.batches.retrieve(batch.id)
                if info.processing_status != "ended":
                    if info.processing_status == "canceling":
                        self._set_status(batch.id, "canceling")
                    batch.interval = min(self.max_poll_s, batch.interval * POLL_BACKOFF)
                    batch.next_poll = now + batch.interval
                    continue
                results = list(self.client.messages.batches.results(batch.id))
            except anthropic.NotFoundError:
                self._lost(batch, now)
                continue
            except anthropic.AnthropicError as exc:  # 5xx, connection, a results_url missing
                batch.failures += 1
                batch.next_poll = now + min(self.max_poll_s, batch.interval * 2 ** min(batch.failures, 16))
                log.warning("cannot poll Message Batch %s (%s): trying again later", batch.id, exc)
                continue
            self._ended(batch, results, now)

    def _ended(self, batch: _Batch, results: Sequence[Any], now: float) -> None:
        del self._batches[batch.id]
        usable = not results
        seen: set[str] = set()
        for item in results:
            kind = item.result.type
            if kind in ("succeeded", "errored"):
                usable = True
            cid = item.custom_id
            entry = self._entries.get(cid)
            if cid not in batch.custom_ids or entry is None or entry.batch_id != batch.id:
                continue  # another process's request, or one this process gave up
            seen.add(cid)
            self._answer(entry, batch.id, item.result)
        self._set_status(batch.id, "ended" if usable else "expired")
        for cid in batch.custom_ids - seen:
            entry = self._entries.get(cid)
            if entry is not None and entry.batch_id == batch.id:
                self._again(entry, batch.id, "missing from its batch's results")

    def _answer(self, entry: _Entry, batch_id: str, result: Any) -> None:
        cid = entry.custom_id
        kind = result.type
        if kind == "succeeded":
            self._entries.pop(cid, None)
            answer: dict[str, Any] = result.message.model_dump(mode="json", exclude_none=True)
            usage = Usage.from_api(answer.get("usage") or {}, requests=1, batch=True)
            usd = cost_usd(usage, entry.model, self.settings.prices, self.settings.cache_ttl)
            if self.budget is not None:
                self.budget.record(entry.kind, usage, usd, admission=entry.admission)
            self.stats.succeeded += 1
            self.stats.resumed += int(entry.adopted)
            self.stats.spend(usd)
            entry.task.feed(cid, answer)
            return
        self._release(entry)
        if kind == "errored":
            self.stats.errored += 1
            error = getattr(result.error, "error", None)
            message = f"{getattr(error, 'type', 'error')}: {getattr(error, 'message', '')}"
            if entry.errors < MAX_ERRORED_RETRIES:
                self._retry(entry, batch_id, errors=entry.errors + 1)
            else:
                self._entries.pop(cid, None)
                entry.task.fail(cid, f"batch request errored twice: {message}")
            return
        if kind == "expired":
            self.stats.expired += 1
        else:
            self.stats.canceled += 1
        self._again(entry, batch_id, kind)

    def _again(self, entry: _Entry, batch_id: str, why: str) -> None:
        """Submit ``entry`` again (its batch expired, was canceled or lost), unless it was too often."""
        self._release(entry)
        if entry.resubmits >= self.max_resubmits:
            self._entries.pop(entry.custom_id, None)
            entry.task.fail(entry.custom_id, f"batch request {why} {entry.resubmits + 1} times")
            return
        self._retry(entry, batch_id, resubmits=entry.resubmits + 1)

    def _retry(self, entry: _Entry, batch_id: str, *, errors: int | None = None, resubmits: int | None = None) -> None:
        cid = entry.custom_id
        self._entries.pop(cid, None)
        self._retries[cid] = _Retry(
            entry.errors if errors is None else errors,
            entry.resubmits if resubmits is None else resubmits,
            entry.skip | {batch_id},
        )
        entry.task.resend(cid)

    def _lost(self, batch: _Batch, now: float) -> None:
        log.warning("Message Batch %s is not known to the API (404): its requests are sent again", batch.id)
        del self._batches[batch.id]
        self.stats.lost += 1
        self._set_status(batch.id, "lost")
        for cid in sorted(batch.custom_ids):
            entry = self._entries.get(cid)
            if entry is not None and entry.batch_id == batch.id:
                self._again(entry, batch.id, "lost")

    def _set_status(self, batch_id: str, status: str) -> None:
        try:
            self.ledger.set_status(batch_id, status, self._clock())
        except sqlalchemy.exc.SQLAlchemyError as exc:
            log.warning("cannot mark Message Batch %s %s in the ledger: %s", batch_id, status, exc)


# ----------------------------------------------------------------------------- direct Messages calls


class DirectJudge:
    """Drives judge tasks with one ``client.messages.create`` per request (module docstring)."""

    collect_all: Final = False
    """``monitor eval`` hands the judge tasks case by case."""

    def __init__(
        self,
        client: anthropic.Anthropic,
        settings: JudgeSettings,
        *,
        budget: JudgeBudget | None = None,
        concurrency: int | None = None,
        clock: Callable[[], datetime] = _utc_now,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.client = client
        self.settings = settings
        self.budget = budget
        self.concurrency = concurrency or settings.concurrency
        self.stats = TransportStats()
        self._send = send_with(client)
        self._clock = clock
        self._monotonic = monotonic
        self._sleep = sleep
        self._lock = threading.Lock()
        self._budget_log = _BudgetLog()

    def config_for(self, judge: Judge[Any]) -> JudgeConfig:
        """The request configuration of ``judge`` (its ``model`` parameter, ``judge.models``, ``judge.model``)."""
        config = JudgeConfig.from_settings(self.settings, judge.kind, getattr(judge.params, "model", None))
        return dataclasses.replace(config, batch=False)

    def run(self, tasks: Sequence[JudgeTask]) -> list[ScoreResult]:
        """Blocking: every task to its end, the results in the order of ``tasks``."""
        if self.concurrency > 1 and sum(1 for t in tasks if not t.done) > 1:
            with ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="judge") as pool:
                return list(pool.map(self._drive, tasks))
        return [self._drive(task) for task in tasks]

    def _drive(self, task: JudgeTask) -> ScoreResult:
        started = self._monotonic()
        while not task.done:
            for request in task.pending(limit=1):
                self._one(task, request)
        latency = round((self._monotonic() - started) * 1000, 3) if task.needs_api else None
        return _finished(task, self.settings, batch=False, latency_ms=latency)

    def _one(self, task: JudgeTask, request: JudgeRequest) -> None:
        cid, kind = request.custom_id, task.judge.kind
        model = str(request.body.get("model", task.config.model))
        admission: Admission | None = None
        if self.budget is not None:
            est = estimate(request.body, self.settings, batch=False)
            while True:
                admission = self.budget.admit(
                    kind, est.input_tokens, est.usd, estimated_output_tokens=est.output_tokens
                )
                if admission:
                    break
                if _final_refusal(admission, self.budget):
                    self._budget_log.refused(admission, self._clock().date().isoformat())
                    with self._lock:
                        self.stats.refused += 1
                    task.fail(cid, _refusal_message(admission))
                    return
                self._sleep(RPM_WAIT_S)
        try:
            answer = self._send(request.body)
        except JudgeUnavailable as exc:
            if admission is not None and self.budget is not None:
                self.budget.cancel(admission)
            task.fail(cid, str(exc))
            return
        usage = Usage.from_api(answer.get("usage") or {}, requests=1, batch=False)
        usd = cost_usd(usage, model, self.settings.prices, self.settings.cache_ttl)
        if self.budget is not None:
            self.budget.record(kind, usage, usd, admission=admission)
        with self._lock:
            self.stats.spend(usd)
            self.stats.succeeded += 1
        task.feed(cid, answer)
