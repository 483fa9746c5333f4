"""The daemon's judges through Message Batches (``judge.batch: true``): half price, verdicts within hours.

:class:`BatchPool` has the contract of :class:`~monitor.judging.pool.JudgePool` (the judge step cannot tell them
apart: :meth:`offer`, :meth:`finished`, :meth:`backlog`, :meth:`keys`, :meth:`holds`, :meth:`stop`) and drives a
:class:`~monitor.judging.batches.BatchJudge` on a thread of its own: jobs offered become tasks of the transport,
which gathers their requests into batches (``judge.batch_max_requests``, ``judge.batch_max_wait_s``), polls them
(``judge.batch_poll_s``, backing off) and feeds the results back. The batches in flight are in the store's
ledger (``judge_batches``), and the verdicts owed in ``judge_jobs``: a daemon that restarts claims its jobs again,
prepares the same requests (same ``custom_id``) and the transport finds them in the ledger's batches instead of
submitting them again, so nothing is paid twice.

A verdict the budget refused for the day (the transport ends such a task ``error/judge_unavailable`` with the
limit in its message) is dropped (``budget``) rather than stored, as in the pool. Batch requests are counted in
``monitor_judge_requests_total`` (outcome ``ok``) with no latency observation: a batch's wall time measures its
queue, not the judge.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final

import anthropic

from monitor.judging.batches import BatchJudge
from monitor.judging.budget import JudgeBudget
from monitor.judging.pool import JudgeMetrics, PoolBase, PoolJob, Verdict
from monitor.scoring.judges.cost import Usage
from monitor.settings import JudgeSettings
from monitor.store.ledger import SqlBatchLedger

__all__ = ["BUDGET_MESSAGE", "BatchPool"]

log = logging.getLogger(__name__)

BUDGET_MESSAGE: Final = "judge budget "
"""How the transport's message for a budget refusal begins."""
TICK_S: Final = 1.0
"""The longest the thread sleeps between two steps when nothing is due sooner."""


class BatchPool(PoolBase):
    """See the module docstring. ``client_factory`` makes the synchronous client (default: from the settings)."""

    def __init__(
        self,
        settings: JudgeSettings,
        budget: JudgeBudget,
        metrics: JudgeMetrics,
        ledger: SqlBatchLedger,
        *,
        client_factory: Callable[[], anthropic.Anthropic] | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__(metrics)
        self.settings = settings
        client = (client_factory or self._default_client)()
        self.transport = BatchJudge(client, ledger, settings, purpose="daemon", budget=budget, monotonic=monotonic)
        self._monotonic = monotonic
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def _default_client(self) -> anthropic.Anthropic:
        key = self.settings.api_key()
        return anthropic.Anthropic(
            api_key=key.get_secret_value() if key is not None else None,
            base_url=self.settings.base_url,
            timeout=self.settings.timeout_s,
            max_retries=self.settings.max_retries,
        )

    # ----------------------------------------------------------------- the pool's contract

    def start(self) -> BatchPool:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="judge-batches", daemon=True)
            self._thread.start()
        return self

    def _accept(self, jobs: Sequence[PoolJob]) -> None:
        self.transport.add(job.task for job in jobs)
        self._wake.set()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop stepping (batches in flight stay in the ledger; the next process resumes them)."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout_s)
            self._thread = None

    # ----------------------------------------------------------------- the thread

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                done = self.transport.step()
            except Exception:  # a bug or an unexpected SDK error: say it, keep stepping (the jobs stay owed)
                log.exception("judge batches: a step failed; retrying")
                done = []
            for task in done:
                self._settle(task.key)
            due = self.transport.next_due()
            wait = TICK_S if due is None else min(TICK_S, max(0.0, due - self._monotonic()))
            self._wake.wait(wait)
            self._wake.clear()

    def _settle(self, key: str) -> None:
        job = self.job(key)
        if job is None:
            return
        result = self.transport.result(job.task)
        message = str(result.details.get("message", "")) if result.status == "error" else ""
        if result.reason == "judge_unavailable" and message.startswith(BUDGET_MESSAGE):
            self.metrics.judge_dropped(job.kind, "budget")
            verdict = Verdict(job, None, "budget")
        else:
            usage = result.judge
            if usage is not None:
                model = usage.model
                counts = Usage(
                    input_tokens=usage.input_tokens,
                    cache_creation_input_tokens=usage.cache_creation_input_tokens,
                    cache_read_input_tokens=usage.cache_read_input_tokens,
                    output_tokens=usage.output_tokens,
                    requests=usage.requests,
                    batch=True,
                )
                for _ in range(usage.requests):
                    self.metrics.judge_request(job.kind, model, "ok", None)
                self.metrics.judge_usage(job.kind, model, counts, usage.cost_usd)
            verdict = Verdict(job, result)
        self._finish(verdict)
