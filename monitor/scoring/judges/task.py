"""One judge verdict as a request-at-a-time state machine: :class:`JudgeTask` (SCORING.md §4.0).

A task owns everything between a judge's :meth:`~monitor.scoring.judges.base.Judge.prepare` and its
:meth:`~monitor.scoring.judges.base.Judge.decide`: one :class:`~monitor.scoring.judges.protocol.Exchange` per
sample, the token usage summed over every request, and the §5.1 record at the end. It does no I/O: a
*transport* asks :meth:`JudgeTask.pending` for the requests to send now, sends them however it likes and feeds
each answer back with :meth:`JudgeTask.feed` (or :meth:`JudgeTask.fail` when the API did not answer). Three
transports drive the same task, so the three paths give byte-identical verdicts:

* :func:`~monitor.scoring.judges.base.run_judge` — synchronous, one request at a time (tests, ``monitor score``);
* ``monitor.judging.pool`` — the daemon's bounded asyncio pool (samples in parallel);
* ``monitor.judging.batches`` — the Message Batches API (every pending request of every task in one batch).

**Requests.** Each sample is an exchange of rounds: round 0 is the prepared body; a repair or ``max_tokens``
retry is round 1, 2 (at most two: §4.0 allows one of each). The samples of a task are independent, so all their
pending rounds may be in flight at once. A request is named by its ``custom_id`` (:func:`custom_id`): the
SHA-256 hex of ``<key>#<sample>#<round>`` where ``key`` is the result's idempotency key
(:func:`idempotency_key`). It is deterministic, because rendering is: a process that restarts and prepares the
same run again names the same requests, which is how a Batches transport finds the batch already holding them.

**Outcome.** When every sample has ended (:attr:`JudgeTask.done`), :meth:`JudgeTask.result` is the record: the
decided evaluation when at least one sample gave a valid verdict, else ``error/judge_output_invalid`` (every
sample failed validation twice) or ``error/judge_unavailable`` (the API did not answer). ``details`` gets
``prompt_hash``, ``truncated`` and, with several samples, ``samples`` / ``samples_failed``; ``judge`` the usage.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from monitor.scoring.base import Outcome
from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.protocol import Done, Exchange, Failed, JudgeConfig
from monitor.scoring.result import JudgeUsage, ScoreResult
from monitor.trajectory.model import Run

if TYPE_CHECKING:
    from monitor.scoring.judges.base import Judge, Prepared

__all__ = ["USAGE_KEYS", "JudgeRequest", "JudgeTask", "borderline", "custom_id", "idempotency_key", "rejudged"]

USAGE_KEYS: Final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
"""The token counts of a Messages ``usage`` object that a task sums."""


def idempotency_key(trace_id: str | None, run_id: str | None, scorer: str, version: int) -> str:
    """``trace_id|run_id|scorer|version``: the key a stored result is unique on (``results`` table)."""
    return f"{trace_id or ''}|{run_id or ''}|{scorer}|{version}"


def custom_id(key: str, sample: int, round_: int, stage: int = 0) -> str:
    """The name of one request of a task: SHA-256 hex (64 characters, the Batches ``custom_id`` limit) of
    ``key#sample#round`` (``key#sample#stage.round`` for a follow-up request)."""
    name = f"{key}#{sample}#{round_}" if not stage else f"{key}#{sample}#{stage}.{round_}"
    return hashlib.sha256(name.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class JudgeRequest:
    """One Messages request of a task: send ``body``, feed the answer under ``custom_id``."""

    custom_id: str
    body: dict[str, Any]
    sample: int
    round: int


@dataclass(slots=True)
class _Sample:
    exchange: Exchange
    round: int = 0
    stage: int = 0
    sent: bool = False
    first: dict[str, Any] | None = None
    follow: Prepared | None = None
    verdict: dict[str, Any] | None = None
    failure: str | None = None

    def request_id(self, key: str, index: int) -> str:
        return custom_id(key, index, self.round, self.stage)

    @property
    def ended(self) -> bool:
        return self.verdict is not None or self.failure is not None


class JudgeTask:
    """See the module docstring. ``key`` defaults to the idempotency key of ``runs[-1]`` and the judge."""

    def __init__(
        self,
        judge: Judge[Any],
        runs: Run | Sequence[Run],
        reference: Expectation | None,
        config: JudgeConfig,
        *,
        key: str | None = None,
    ) -> None:
        from monitor.scoring.judges.base import Prepared

        self.judge = judge
        self.reference = reference
        self.turns: tuple[Run, ...] = (runs,) if isinstance(runs, Run) else tuple(runs)
        self.run = self.turns[-1]
        self.config = config
        self.key = key or idempotency_key(self.run.trace_id, self.run.run_id, judge.id, judge.version)
        self.usage = dict.fromkeys(USAGE_KEYS, 0)
        self.requests = 0
        self.prepared: Prepared | None = None
        self._samples: list[_Sample] = []
        self._unavailable: str | None = None
        self._final: ScoreResult | None = None
        try:
            prepared = judge.prepare(self.turns, reference, config)
        except Exception as exc:  # the judge's own bug: error/internal, as for every scorer
            self._final = judge._internal_error(self.run, exc)
            return
        if not isinstance(prepared, Prepared):
            self._final = self._finish(judge._wrap(self.run, prepared))
            return
        self.prepared = prepared
        self._samples = [_Sample(Exchange(prepared.body, prepared.validate)) for _ in range(prepared.samples)]

    def again(self) -> JudgeTask:
        """A fresh task for the same verdict under the key ``<key>#again`` (its own custom ids): a re-judgement."""
        return JudgeTask(self.judge, self.turns, self.reference, self.config, key=f"{self.key}#again")

    # ----------------------------------------------------------------- transport side

    @property
    def needs_api(self) -> bool:
        """False when the task ended without a request (``not_applicable``, an ``empty_score``, an error)."""
        return self.prepared is not None

    @property
    def done(self) -> bool:
        return self._final is not None or all(s.ended for s in self._samples)

    def pending(self, limit: int | None = None) -> list[JudgeRequest]:
        """The requests to send now, at most ``limit``, in sample order (each at most once: a request is marked
        sent when returned). ``limit=1`` runs the samples one after the other, each to its end."""
        out: list[JudgeRequest] = []
        if self._final is not None:
            return out
        for i, sample in enumerate(self._samples):
            if limit is not None and len(out) >= limit:
                break
            if not sample.ended and not sample.sent:
                sample.sent = True
                out.append(JudgeRequest(sample.request_id(self.key, i), sample.exchange.body, i, sample.round))
        return out

    def in_flight(self) -> list[str]:
        """The custom ids sent and not yet answered."""
        return [custom_id(self.key, i, s.round) for i, s in enumerate(self._samples) if s.sent and not s.ended]

    def feed(self, request_id: str, response: Mapping[str, Any]) -> None:
        """The API's answer (a Message as a dict) to the request named ``request_id``; unknown ids are ignored
        (a result of a batch this task did not send)."""
        sample = self._sample(request_id)
        if sample is None:
            return
        self.requests += 1
        raw = response.get("usage")
        if isinstance(raw, Mapping):
            for name in USAGE_KEYS:
                value = raw.get(name)
                self.usage[name] += int(value) if isinstance(value, int | float) and value > 0 else 0
        step = sample.exchange.advance(response)
        sample.sent = False
        if isinstance(step, Done):
            self._done(sample, step.verdict)
        elif isinstance(step, Failed):
            sample.failure = step.detail
        else:
            sample.round += 1

    def _done(self, sample: _Sample, verdict: dict[str, Any]) -> None:
        """A valid verdict: the sample's end, or (a judge with a follow-up request) its next stage."""
        assert self.prepared is not None
        if sample.stage == 0 and self.prepared.follow_up is not None:
            try:
                follow = self.prepared.follow_up(verdict)
            except Exception as exc:  # the judge's own bug: the sample fails, the task says why
                sample.failure = f"follow-up request failed: {type(exc).__name__}: {exc}"[:500]
                return
            sample.first, sample.follow = verdict, follow
            sample.exchange = Exchange(follow.body, follow.validate)
            sample.stage, sample.round = 1, 0
            return
        if sample.follow is not None and sample.follow.combine is not None and sample.first is not None:
            verdict = sample.follow.combine(sample.first, verdict)
        sample.verdict = verdict

    def fail(self, request_id: str, message: str) -> None:
        """The API did not answer the request (after the transport's retries): the task ends as
        ``error/judge_unavailable``, whatever its other samples gave."""
        if self._sample(request_id) is None:
            return
        self._unavailable = message[:500]
        for sample in self._samples:
            if not sample.ended:
                sample.failure = "unavailable"

    def resend(self, request_id: str) -> None:
        """Mark a request as not sent (a transport gives it up to send it again later: an expired batch)."""
        sample = self._sample(request_id)
        if sample is not None:
            sample.sent = False

    def _sample(self, request_id: str) -> _Sample | None:
        for i, sample in enumerate(self._samples):
            if not sample.ended and sample.request_id(self.key, i) == request_id:
                return sample
        return None

    # ----------------------------------------------------------------- outcome

    def judge_usage(self, *, batch: bool | None = None) -> JudgeUsage | None:
        """The usage so far (None before any answer)."""
        if not self.requests:
            return None
        return JudgeUsage(
            model=self.config.model,
            requests=self.requests,
            batch=self.config.batch if batch is None else batch,
            **self.usage,
        )

    def result(self) -> ScoreResult:
        """The §5.1 record; only once :attr:`done`."""
        if self._final is not None:
            return self._final
        if not self.done:
            raise RuntimeError(f"judge task {self.key} is not done")
        assert self.prepared is not None
        judge, run, prepared = self.judge, self.run, self.prepared
        verdicts = [s.verdict for s in self._samples if s.verdict is not None]
        failures = [s.failure for s in self._samples if s.failure is not None]
        if self._unavailable is not None:
            result = judge.error(run, "judge_unavailable", {"message": self._unavailable})
            self._final = self._finish(result, truncated=prepared.truncated)
        elif not verdicts:
            result = judge.error(run, "judge_output_invalid", {"problems": failures})
            self._final = self._finish(result, truncated=prepared.truncated)
        else:
            self._final = self._decide(verdicts, failures, prepared)
        return self._final

    def _decide(self, verdicts: list[dict[str, Any]], failures: list[str], prepared: Prepared) -> ScoreResult:
        judge, run = self.judge, self.run
        try:
            evaluation = judge.decide(verdicts, prepared)
        except Exception as exc:
            return self._finish(judge._internal_error(run, exc))
        result = judge._wrap(run, evaluation)
        extra: dict[str, Any] = {"truncated": prepared.truncated}
        if prepared.samples > 1:
            extra["samples"] = len(verdicts)
            extra["samples_failed"] = len(failures)
        if isinstance(evaluation, Outcome):
            result = dataclasses.replace(result, reason=judge.reason_of(verdicts))
        return self._finish(result, **extra)

    def _finish(self, result: ScoreResult, **extra: Any) -> ScoreResult:
        details = {**result.details, "prompt_hash": self.judge.prompt_hash, **extra}
        return dataclasses.replace(result, details=details, judge=self.judge_usage())


def borderline(result: ScoreResult, margin: float | None) -> bool:
    """Whether ``result`` is a borderline verdict worth a second judgement (``judge.rejudge_borderline``): scored,
    with a threshold, strictly between 0 and 1 (a yes/no verdict is never borderline) and within ``margin`` of the
    threshold."""
    if margin is None or result.status != "scored" or result.score is None or result.threshold is None:
        return False
    return 0.0 < result.score < 1.0 and abs(result.score - result.threshold) <= margin


def rejudged(first: ScoreResult, second: ScoreResult) -> ScoreResult:
    """One record from a borderline verdict and its re-judgement: the mean score when both are scored (``passed``
    against the threshold again), else the first; usage summed; ``details.rejudged`` keeps both scores and
    reasons."""
    usage = first.judge
    if usage is not None and second.judge is not None:
        b = second.judge
        usage = dataclasses.replace(
            usage,
            input_tokens=usage.input_tokens + b.input_tokens,
            cache_creation_input_tokens=usage.cache_creation_input_tokens + b.cache_creation_input_tokens,
            cache_read_input_tokens=usage.cache_read_input_tokens + b.cache_read_input_tokens,
            output_tokens=usage.output_tokens + b.output_tokens,
            requests=usage.requests + b.requests,
        )
    record = {
        "scores": [first.score, second.score],
        "reasons": [first.reason, second.reason],
        "second_status": second.status,
    }
    details = {**first.details, "rejudged": record}
    if second.status != "scored" or second.score is None or first.score is None:
        return dataclasses.replace(first, details=details, judge=usage)
    score = (first.score + second.score) / 2
    passed = score >= first.threshold if first.threshold is not None else first.passed
    return dataclasses.replace(first, score=score, passed=passed, details=details, judge=usage)
