"""Judge budgets (DESIGN.md §3 "Sampling"): requests per minute, tokens and dollars per day, for all judges
together and per judge kind, and the policy that steers what is left of them toward suspicious runs.

Pure logic: the clocks are injected, nothing is read or written; every public method takes one lock, so the
daemon's asyncio loop and its main thread may share one :class:`JudgeBudget`.

**Scopes and limits.** ``judge.budgets.total`` limits all judges together, ``judge.budgets.per_judge[kind]``
one judge kind; a call is charged to both. Each scope has up to four limits (null = unlimited):

* ``requests_per_minute`` — a sliding log: at most that many calls are admitted in any 60 s of the
  ``monotonic`` clock. A call is logged when admitted; its retries (``usage.requests - 1``) when recorded.
* ``input_tokens_per_day`` — prompt tokens: ``input + cache writes + cache reads``;
* ``output_tokens_per_day``;
* ``usd_per_day`` — the cost of :func:`monitor.scoring.judges.cost.cost_usd`.

A day is a UTC calendar day of the ``clock`` (an aware datetime; a naive one is taken as UTC); the daily
counters of every scope restart at 00:00 UTC (the clock only moves the day forward: a clock set back
does not hand out a second budget). A call in flight across midnight is charged to the day it is recorded.

**Admission** (:meth:`JudgeBudget.admit`). A call comes with estimates: input tokens, output tokens
(default ``judge.max_tokens``) and USD. While admitted and not yet recorded, a call *reserves* its
estimates. For every daily limit of each scope the call is charged to, with ``spent`` the day's recorded
spend, ``reserved`` the reservations of the calls in flight in that scope and ``cap`` the limit, it is
admitted when

* it **fits**: ``spent < cap`` and ``spent + reserved + estimate <= cap``; or
* it goes **alone**: ``spent < cap`` and no call is in flight in that scope.

A call whose cost cannot be estimated (``estimated_cost=None``: a model without a price) is refused by any
``usd_per_day`` limit (``unpriced``). A refusal names the scope and the limit (:class:`Admission`).
:meth:`JudgeBudget.record` charges the actual usage and cost (an estimate may be exceeded) and releases
the call's reservation; :meth:`JudgeBudget.cancel` releases it for a call that never reached the API.

**Guarantee**, for each scope and each daily limit, on each day:

1. When every call's actual spend is at most its estimate, the day's spend never exceeds the cap by more
   than **one call**: only a call admitted alone can cross the cap, and while it is in flight nothing else is
   admitted in that scope (``spent + its estimate > cap``, so nothing fits, and it is in flight, so nothing
   goes alone); once ``spent >= cap`` everything is refused until midnight. So
   ``spent <= cap + max(actual spend of a single call)``. To rely on this, pass estimates that bound the
   whole call, retries included: output up to the ``max_tokens`` of every request it may make (the default,
   ``judge.max_tokens``, bounds a call without retries), input with a margin over the 3.5 characters a
   token estimate, USD priced from those.
2. In general ``spent <= cap + max(actual of a single call) + Σ max(0, actual − estimate)``, the sum over
   the calls recorded that day: each call in flight can add what its estimate missed.

Calls recorded without an admission (``admission=None``: a batch result after a restart) were never
reserved: their spend counts, but is outside the guarantee.

**Pressure and priority.** :meth:`JudgeBudget.pressure` is the fraction of the tightest daily limit spent
or reserved (0 without daily limits, 1 once a limit is reached); :func:`judge_priority_admits` turns it into
the sampling policy (which runs still get a judge).
"""

from __future__ import annotations

import itertools
import json
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Final, Literal, TypeAlias

from monitor.scoring.judges.cost import Usage, cost_usd
from monitor.scoring.judges.protocol import CHARS_PER_TOKEN
from monitor.settings import JudgeBudgetLimits, JudgeBudgets, JudgeSettings

__all__ = [
    "DAILY_LIMITS",
    "FLAGGED_ONLY_FROM",
    "SUSPICIOUS_ONLY_FROM",
    "TOTAL",
    "Admission",
    "Estimate",
    "JudgeBudget",
    "LimitName",
    "estimate",
    "estimate_input_tokens",
    "judge_priority_admits",
]

LimitName: TypeAlias = Literal["requests_per_minute", "input_tokens_per_day", "output_tokens_per_day", "usd_per_day"]
"""A budget limit; with the scope, a bounded metric label."""

TOTAL: Final = "total"
"""The scope of all judges together (the others are judge kinds)."""

DAILY_LIMITS: Final[tuple[LimitName, ...]] = ("input_tokens_per_day", "output_tokens_per_day", "usd_per_day")

WINDOW_S: Final = 60.0
"""The requests-per-minute window, in seconds."""

SUSPICIOUS_ONLY_FROM: Final = 0.5
"""From this pressure on, only suspicious runs (flagged, errored or rare) get a judge."""
FLAGGED_ONLY_FROM: Final = 0.9
"""From this pressure on, only flagged or errored runs get a judge; at 1.0, none."""


def judge_priority_admits(pressure: float, *, flagged: bool, errored: bool, rare: bool) -> bool:
    """Whether a run still gets a judge at budget ``pressure`` (:meth:`JudgeBudget.pressure`):

    * below :data:`SUSPICIOUS_ONLY_FROM` (50 %): every run;
    * below :data:`FLAGGED_ONLY_FROM` (90 %): runs a code check ``flagged``, runs that ``errored`` (root span or a
      tool call) and ``rare`` runs (an agent or tool seldom seen, as the caller defines it);
    * below 100 %: flagged or errored runs only;
    * at 100 % (a daily limit reached): none.

    So the last tenth of a day's budget goes to the runs most likely to show a failure. Monotone: a run
    admitted at some pressure is admitted at every lower one.
    """
    if pressure >= 1.0:
        return False
    if pressure >= FLAGGED_ONLY_FROM:
        return flagged or errored
    if pressure >= SUSPICIOUS_ONLY_FROM:
        return flagged or errored or rare
    return True


@dataclass(frozen=True, slots=True)
class Admission:
    """The answer of :meth:`JudgeBudget.admit`; truthy when admitted.

    Refused: ``scope`` (:data:`TOTAL` or the judge kind) and ``limit`` name the exhausted limit, ``unpriced``
    says the call was refused by a ``usd_per_day`` limit because its cost could not be estimated. Admitted:
    ``ticket`` identifies its reservation; pass the admission to :meth:`JudgeBudget.record` (or
    :meth:`JudgeBudget.cancel`) to release it.
    """

    admitted: bool
    kind: str
    scope: str | None = None
    limit: LimitName | None = None
    unpriced: bool = False
    ticket: int | None = None

    def __bool__(self) -> bool:
        return self.admitted

    @property
    def label(self) -> str | None:
        """``<scope>.<limit>`` of a refusal (``total.usd_per_day``), None when admitted."""
        return None if self.admitted else f"{self.scope}.{self.limit}"


@dataclass(slots=True)
class _Amounts:
    input_tokens: float = 0.0
    output_tokens: float = 0.0
    usd: float = 0.0

    def get(self, limit: LimitName) -> float:
        if limit == "input_tokens_per_day":
            return self.input_tokens
        if limit == "output_tokens_per_day":
            return self.output_tokens
        return self.usd

    def add(self, other: _Amounts, sign: float = 1.0) -> None:
        self.input_tokens = max(0.0, self.input_tokens + sign * other.input_tokens)
        self.output_tokens = max(0.0, self.output_tokens + sign * other.output_tokens)
        self.usd = max(0.0, self.usd + sign * other.usd)


@dataclass(slots=True)
class _Scope:
    name: str
    limits: JudgeBudgetLimits
    spent: _Amounts = field(default_factory=_Amounts)
    reserved: _Amounts = field(default_factory=_Amounts)
    in_flight: int = 0
    window: deque[float] = field(default_factory=deque)

    def cap(self, limit: LimitName) -> float | None:
        value: float | None = getattr(self.limits, limit)
        return value

    def prune(self, now: float) -> None:
        while self.window and self.window[0] <= now - WINDOW_S:
            self.window.popleft()


@dataclass(frozen=True, slots=True)
class _Reservation:
    kind: str
    amounts: _Amounts


class JudgeBudget:
    """The judge budgets of ``budgets`` (module docstring for the rules and the guarantee).

    ``clock``: the wall clock (aware datetimes; the UTC day); ``monotonic``: seconds for the minute window;
    ``default_output_tokens``: the output estimate when :meth:`admit` is given none (``judge.max_tokens``).
    """

    def __init__(
        self,
        budgets: JudgeBudgets,
        *,
        clock: Callable[[], datetime],
        monotonic: Callable[[], float] = time.monotonic,
        default_output_tokens: int = 1024,
    ) -> None:
        self._clock = clock
        self._monotonic = monotonic
        self._default_output = default_output_tokens
        self._lock = threading.Lock()
        self._total = _Scope(TOTAL, budgets.total)
        self._per_kind = {kind: _Scope(kind, limits) for kind, limits in budgets.per_judge.items()}
        self._day = self._today()
        self._tickets = itertools.count(1)
        self._reservations: dict[int, _Reservation] = {}

    @classmethod
    def from_settings(
        cls, judge: JudgeSettings, *, clock: Callable[[], datetime], monotonic: Callable[[], float] = time.monotonic
    ) -> JudgeBudget:
        """The budgets of the ``judge`` settings section, output estimated at ``judge.max_tokens``."""
        return cls(judge.budgets, clock=clock, monotonic=monotonic, default_output_tokens=judge.max_tokens)

    # ----------------------------------------------------------------- admission and spend

    def admit(
        self,
        kind: str,
        estimated_input_tokens: int,
        estimated_cost: float | None,
        *,
        estimated_output_tokens: int | None = None,
    ) -> Admission:
        """Admit one judge call of ``kind`` (reserving its estimates) or refuse it, naming the exhausted limit.
        ``estimated_cost`` None: the model has no price (refused where a ``usd_per_day`` limit applies)."""
        output = self._default_output if estimated_output_tokens is None else estimated_output_tokens
        if estimated_input_tokens < 0 or output < 0 or (estimated_cost is not None and estimated_cost < 0):
            raise ValueError("estimates must not be negative")
        estimate = _Amounts(float(estimated_input_tokens), float(output), float(estimated_cost or 0.0))
        with self._lock:
            self._roll()
            now = self._monotonic()
            scopes = list(self._scopes(kind))
            for scope in scopes:
                refusal = self._refusal(scope, kind, estimate, estimated_cost is None, now)
                if refusal is not None:
                    return refusal
            for scope in scopes:
                scope.window.append(now)
                scope.reserved.add(estimate)
                scope.in_flight += 1
            ticket = next(self._tickets)
            self._reservations[ticket] = _Reservation(kind, estimate)
            return Admission(True, kind, ticket=ticket)

    def record(self, kind: str, usage: Usage, cost: float | None, *, admission: Admission | None = None) -> None:
        """Charge a finished call of ``kind``: ``usage`` (summed over its retries) and its ``cost`` (None when
        unpriced: no USD is charged). With the call's ``admission``, its reservation is released (once: a
        second record of the same admission only charges) and its retries join the minute window; without,
        every request of ``usage`` does."""
        if cost is not None and cost < 0:
            raise ValueError("cost must not be negative")
        spend = _Amounts(float(usage.prompt_tokens), float(usage.output_tokens), float(cost or 0.0))
        with self._lock:
            self._roll()
            now = self._monotonic()
            self._release(admission)
            extra = max(0, usage.requests - (0 if admission is None else 1))
            for scope in self._scopes(kind):
                scope.spent.add(spend)
                scope.prune(now)
                scope.window.extend([now] * extra)

    def cancel(self, admission: Admission) -> None:
        """Release the reservation of an admitted call that spent nothing (it never reached the API). Its
        place in the minute window stays."""
        with self._lock:
            self._release(admission)

    # ----------------------------------------------------------------- what is left

    def remaining(self, kind: str) -> dict[str, dict[str, float]]:
        """What ``kind`` may still use, per scope (:data:`TOTAL`, then the kind when it has limits) and per
        configured limit: requests left in the current minute window; tokens and USD left today after the
        reservations (never negative). Unlimited limits are left out."""
        with self._lock:
            self._roll()
            now = self._monotonic()
            out: dict[str, dict[str, float]] = {}
            for scope in self._scopes(kind):
                scope.prune(now)
                left: dict[str, float] = {}
                rpm = scope.limits.requests_per_minute
                if rpm is not None:
                    left["requests_per_minute"] = float(max(0, rpm - len(scope.window)))
                for limit in DAILY_LIMITS:
                    cap = scope.cap(limit)
                    if cap is not None:
                        left[limit] = max(0.0, cap - scope.spent.get(limit) - scope.reserved.get(limit))
                out[scope.name] = left
            return out

    def spent(self, kind: str) -> dict[str, dict[str, float]]:
        """Today's recorded spend per scope of ``kind`` (:data:`TOTAL`, then the kind when it has limits):
        ``input_tokens_per_day``, ``output_tokens_per_day``, ``usd_per_day``, limited or not."""
        with self._lock:
            self._roll()
            return {s.name: {limit: s.spent.get(limit) for limit in DAILY_LIMITS} for s in self._scopes(kind)}

    def in_flight(self, kind: str | None = None) -> int:
        """Calls admitted and not yet recorded or cancelled: of ``kind``, or of every kind."""
        with self._lock:
            return sum(1 for r in self._reservations.values() if kind is None or r.kind == kind)

    def pressure(self, kind: str) -> float:
        """The fraction, in [0, 1], of the tightest daily limit of ``kind``'s scopes already spent or reserved:
        ``max((spent + reserved) / cap)``; 1.0 once a limit is reached (or is 0), 0.0 without daily limits."""
        with self._lock:
            self._roll()
            worst = 0.0
            for scope in self._scopes(kind):
                for limit in DAILY_LIMITS:
                    cap = scope.cap(limit)
                    if cap is None:
                        continue
                    used = scope.spent.get(limit) + scope.reserved.get(limit)
                    worst = max(worst, 1.0 if cap <= 0 or scope.spent.get(limit) >= cap else used / cap)
            return min(1.0, worst)

    # ----------------------------------------------------------------- internals (lock held)

    def _scopes(self, kind: str) -> Iterator[_Scope]:
        yield self._total
        scope = self._per_kind.get(kind)
        if scope is not None:
            yield scope

    def _refusal(self, scope: _Scope, kind: str, estimate: _Amounts, unpriced: bool, now: float) -> Admission | None:
        rpm = scope.limits.requests_per_minute
        if rpm is not None:
            scope.prune(now)
            if len(scope.window) >= rpm:
                return Admission(False, kind, scope.name, "requests_per_minute")
        for limit in DAILY_LIMITS:
            cap = scope.cap(limit)
            if cap is None:
                continue
            if limit == "usd_per_day" and unpriced:
                return Admission(False, kind, scope.name, limit, unpriced=True)
            spent = scope.spent.get(limit)
            fits = spent + scope.reserved.get(limit) + estimate.get(limit) <= cap
            alone = scope.in_flight == 0
            if spent >= cap or not (fits or alone):
                return Admission(False, kind, scope.name, limit)
        return None

    def _release(self, admission: Admission | None) -> bool:
        if admission is None or admission.ticket is None:
            return False
        reservation = self._reservations.pop(admission.ticket, None)
        if reservation is None:
            return False
        for scope in self._scopes(reservation.kind):
            scope.in_flight -= 1
            if scope.in_flight:
                scope.reserved.add(reservation.amounts, sign=-1.0)
            else:  # nothing in flight: exactly nothing reserved (no float residue)
                scope.reserved = _Amounts()
        return True

    def _today(self) -> date:
        now = self._clock()
        return (now if now.tzinfo is not None else now.replace(tzinfo=UTC)).astimezone(UTC).date()

    def _roll(self) -> None:
        today = self._today()
        if today > self._day:
            self._day = today
            for scope in (self._total, *self._per_kind.values()):
                scope.spent = _Amounts()


# ----------------------------------------------------------------- estimates


def estimate_input_tokens(body: Mapping[str, Any]) -> int:
    """The budget's input estimate of a request: its JSON size / 3.5 characters a token (§4.0), rounded up."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=str)
    return math.ceil(len(text) / CHARS_PER_TOKEN)


@dataclass(frozen=True, slots=True)
class Estimate:
    """What one request is admitted with: input and output tokens, and USD (None: the model has no price)."""

    input_tokens: int
    output_tokens: int
    usd: float | None


def estimate(body: Mapping[str, Any], settings: JudgeSettings, *, batch: bool) -> Estimate:
    """The estimate a request is admitted with: input = its JSON size / 3.5 characters a token (§4.0), output = its
    ``max_tokens``, USD with every input token priced as a cache write (the dearest way it can be billed) and, for
    a batch request, the batch discount. An upper bound of what the request can cost (the guarantee's premise)."""
    input_tokens = estimate_input_tokens(body)
    output_tokens = int(body.get("max_tokens", settings.max_tokens))
    bound = Usage(cache_creation_input_tokens=input_tokens, output_tokens=output_tokens, requests=1, batch=batch)
    usd = cost_usd(bound, str(body.get("model", settings.model)), settings.prices, settings.cache_ttl)
    return Estimate(input_tokens, output_tokens, usd)
