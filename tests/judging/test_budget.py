"""Judge budgets (monitor/judging/budget.py): requests per minute, tokens and dollars per UTC day, for all
judges and per judge kind; the overshoot guarantee under random admit/record sequences (hypothesis); the
priority policy that sampling applies as the budget runs out."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from monitor.judging.budget import (
    DAILY_LIMITS,
    TOTAL,
    Admission,
    JudgeBudget,
    judge_priority_admits,
)
from monitor.scoring.judges.cost import Usage
from monitor.settings import JudgeBudgetLimits, JudgeBudgets, load_settings


class Clocks:
    """A wall clock and a monotonic clock that move together."""

    def __init__(self, start: datetime) -> None:
        self.now = start
        self.seconds = 1000.0

    def wall(self) -> datetime:
        return self.now

    def mono(self) -> float:
        return self.seconds

    def advance(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)
        self.seconds += seconds


def budget(clocks: Clocks, total: dict[str, Any] | None = None, **per_judge: dict[str, Any]) -> JudgeBudget:
    budgets = JudgeBudgets(
        total=JudgeBudgetLimits(**(total or {})),
        per_judge={kind: JudgeBudgetLimits(**limits) for kind, limits in per_judge.items()},
    )
    return JudgeBudget(budgets, clock=clocks.wall, monotonic=clocks.mono, default_output_tokens=1000)


def usage(input_tokens: int = 0, output_tokens: int = 0, requests: int = 1, **more: int) -> Usage:
    return Usage(input_tokens=input_tokens, output_tokens=output_tokens, requests=requests, **more)


@pytest.fixture
def clocks() -> Clocks:
    return Clocks(datetime(2026, 11, 24, 12, 0, tzinfo=UTC))


# --------------------------------------------------------------------------- the limits one by one


def test_unlimited_admits_everything(clocks: Clocks) -> None:
    b = budget(clocks)
    for _ in range(100):
        assert b.admit("judge_goal_accuracy", 10**6, 10.0)
    assert b.remaining("judge_goal_accuracy") == {TOTAL: {}}
    assert b.pressure("judge_goal_accuracy") == 0.0
    assert b.in_flight() == 100


def test_requests_per_minute_is_a_sliding_window(clocks: Clocks) -> None:
    b = budget(clocks, total={"requests_per_minute": 3})
    for _ in range(3):
        assert b.admit("judge_x", 100, 0.01)
        clocks.advance(10)
    refused = b.admit("judge_x", 100, 0.01)
    assert not refused and refused.scope == TOTAL and refused.limit == "requests_per_minute"
    assert refused.label == "total.requests_per_minute"
    clocks.advance(30.5)  # admitted 60.5, 50.5 and 40.5 s ago: the first left the window
    assert b.remaining("judge_x")[TOTAL]["requests_per_minute"] == 1
    assert b.admit("judge_x", 100, 0.01)
    assert not b.admit("judge_x", 100, 0.01)
    clocks.advance(10)  # the second left too
    assert b.remaining("judge_x")[TOTAL]["requests_per_minute"] == 1


def test_retries_count_in_the_minute_window_when_recorded(clocks: Clocks) -> None:
    b = budget(clocks, total={"requests_per_minute": 4})
    a = b.admit("judge_x", 100, 0.01)
    b.record("judge_x", usage(100, 10, requests=3), 0.01, admission=a)  # the call and two retries
    assert b.remaining("judge_x")[TOTAL]["requests_per_minute"] == 1
    b.record("judge_x", usage(100, 10, requests=2), 0.01)  # no admission (a batch result): both requests count
    assert not b.admit("judge_x", 100, 0.01)


def test_daily_tokens_and_dollars_reserve_estimates_and_charge_actuals(clocks: Clocks) -> None:
    b = budget(clocks, total={"input_tokens_per_day": 10_000, "output_tokens_per_day": 3000, "usd_per_day": 1.0})
    first = b.admit("judge_x", 4000, 0.30, estimated_output_tokens=1000)
    second = b.admit("judge_x", 4000, 0.30)  # output estimated at default_output_tokens (1000)
    assert first and second
    assert b.remaining("judge_x")[TOTAL] == {
        "input_tokens_per_day": 2000,
        "output_tokens_per_day": 1000,
        "usd_per_day": pytest.approx(0.40),
    }
    refused = b.admit("judge_x", 4000, 0.30)  # does not fit, and others are in flight
    assert refused.limit == "input_tokens_per_day" and refused.scope == TOTAL
    b.record("judge_x", usage(3000, 200, cache_read_input_tokens=500), 0.25, admission=first)
    assert b.spent("judge_x")[TOTAL] == {
        "input_tokens_per_day": 3500,
        "output_tokens_per_day": 200,
        "usd_per_day": 0.25,
    }
    assert b.remaining("judge_x")[TOTAL]["input_tokens_per_day"] == 10_000 - 3500 - 4000
    assert b.in_flight("judge_x") == 1


def test_a_call_that_does_not_fit_goes_alone_and_then_the_day_is_closed(clocks: Clocks) -> None:
    b = budget(clocks, total={"usd_per_day": 1.0})
    a = b.admit("judge_x", 100, 0.9)
    b.record("judge_x", usage(100, 10), 0.9, admission=a)
    alone = b.admit("judge_x", 100, 0.5)  # 0.9 + 0.5 > 1.0 but nothing is in flight: one call may go
    assert alone
    assert not b.admit("judge_x", 1, 0.0)  # while it is in flight nothing else is admitted
    b.record("judge_x", usage(100, 10), 0.45, admission=alone)
    assert b.spent("judge_x")[TOTAL]["usd_per_day"] == pytest.approx(1.35)  # over by less than that one call
    closed = b.admit("judge_x", 1, 0.0)
    assert not closed and closed.limit == "usd_per_day"
    assert b.pressure("judge_x") == 1.0
    assert b.remaining("judge_x")[TOTAL]["usd_per_day"] == 0.0


def test_a_cap_of_zero_admits_nothing(clocks: Clocks) -> None:
    b = budget(clocks, judge_x={"output_tokens_per_day": 0})
    refused = b.admit("judge_x", 0, 0.0, estimated_output_tokens=0)
    assert refused.scope == "judge_x" and refused.limit == "output_tokens_per_day"
    assert b.admit("judge_y", 0, 0.0)  # other kinds are not limited
    assert b.pressure("judge_x") == 1.0


def test_unpriced_calls_are_refused_only_where_dollars_are_limited(clocks: Clocks) -> None:
    b = budget(clocks, judge_x={"usd_per_day": 5.0})
    refused = b.admit("judge_x", 100, None)
    assert not refused and refused.unpriced and refused.label == "judge_x.usd_per_day"
    assert b.admit("judge_y", 100, None)
    b.record("judge_y", usage(100, 10), None)  # no dollars charged
    assert b.spent("judge_y")[TOTAL]["usd_per_day"] == 0.0


def test_cancel_releases_the_reservation(clocks: Clocks) -> None:
    b = budget(clocks, total={"input_tokens_per_day": 1000})
    a = b.admit("judge_x", 800, 0.0)
    assert not b.admit("judge_x", 800, 0.0)
    b.cancel(a)
    b.cancel(a)  # idempotent
    assert b.in_flight() == 0 and b.remaining("judge_x")[TOTAL]["input_tokens_per_day"] == 1000
    assert b.admit("judge_x", 800, 0.0)


def test_a_second_record_of_one_admission_charges_but_releases_once(clocks: Clocks) -> None:
    b = budget(clocks, total={"input_tokens_per_day": 10_000})
    a = b.admit("judge_x", 1000, 0.0)
    other = b.admit("judge_x", 1000, 0.0)
    b.record("judge_x", usage(500), 0.0, admission=a)
    b.record("judge_x", usage(500), 0.0, admission=a)
    assert b.in_flight() == 1 and other.ticket in (2,)
    assert b.remaining("judge_x")[TOTAL]["input_tokens_per_day"] == 10_000 - 1000 - 1000


def test_estimates_must_not_be_negative(clocks: Clocks) -> None:
    b = budget(clocks)
    with pytest.raises(ValueError):
        b.admit("judge_x", -1, 0.0)
    with pytest.raises(ValueError):
        b.admit("judge_x", 1, -0.1)
    with pytest.raises(ValueError):
        b.record("judge_x", usage(1), -1.0)


# --------------------------------------------------------------------------- scopes


def test_per_judge_and_total_limits_both_apply(clocks: Clocks) -> None:
    b = budget(
        clocks,
        total={"usd_per_day": 1.0, "requests_per_minute": 100},
        judge_goal_accuracy={"usd_per_day": 0.25, "requests_per_minute": 2},
    )
    goal = "judge_goal_accuracy"
    assert b.admit(goal, 10, 0.1) and b.admit(goal, 10, 0.1)
    refused = b.admit(goal, 10, 0.01)
    assert refused.scope == goal and refused.limit == "requests_per_minute"
    assert b.admit("judge_tool_selection", 10, 0.5)  # another kind: only the total applies
    assert b.remaining(goal) == {
        TOTAL: {"requests_per_minute": 97, "usd_per_day": pytest.approx(0.3)},
        goal: {"requests_per_minute": 0, "usd_per_day": pytest.approx(0.05)},
    }
    assert b.pressure(goal) == pytest.approx(0.8)  # the tighter of 0.7 (total) and 0.2 / 0.25 (the kind)
    assert b.pressure("judge_tool_selection") == pytest.approx(0.7)
    clocks.advance(61)
    refused = b.admit("judge_tool_selection", 10, 0.31)  # does not fit the total, and calls are in flight
    assert refused.scope == TOTAL and refused.limit == "usd_per_day"


def test_a_refused_call_reserves_nothing_in_any_scope(clocks: Clocks) -> None:
    b = budget(clocks, total={"input_tokens_per_day": 1000}, judge_x={"requests_per_minute": 1})
    assert b.admit("judge_x", 100, 0.0)
    assert not b.admit("judge_x", 100, 0.0)  # refused by the kind's minute window
    assert b.remaining("judge_x")[TOTAL]["input_tokens_per_day"] == 900


# --------------------------------------------------------------------------- the UTC day


def test_daily_spend_restarts_at_utc_midnight(clocks: Clocks) -> None:
    clocks.now = datetime(2026, 11, 24, 23, 59, 0, tzinfo=UTC)
    b = budget(clocks, total={"usd_per_day": 1.0})
    a = b.admit("judge_x", 10, 0.6)
    b.record("judge_x", usage(10), 1.2, admission=a)
    assert not b.admit("judge_x", 10, 0.01) and b.pressure("judge_x") == 1.0
    carried = None
    clocks.advance(59.9)
    assert not b.admit("judge_x", 10, 0.01)  # 23:59:59.9: still the same day
    clocks.advance(0.2)
    carried = b.admit("judge_x", 10, 0.4)  # 00:00:00.1 the next day
    assert carried and b.spent("judge_x")[TOTAL]["usd_per_day"] == 0.0
    assert b.pressure("judge_x") == pytest.approx(0.4)


def test_a_call_in_flight_over_midnight_is_charged_to_the_day_it_is_recorded(clocks: Clocks) -> None:
    clocks.now = datetime(2026, 11, 24, 23, 59, 30, tzinfo=UTC)
    b = budget(clocks, total={"output_tokens_per_day": 1000})
    a = b.admit("judge_x", 10, 0.0, estimated_output_tokens=600)
    clocks.advance(60)
    assert b.remaining("judge_x")[TOTAL]["output_tokens_per_day"] == 400  # still reserved after midnight
    b.record("judge_x", usage(10, 500), 0.0, admission=a)
    assert b.spent("judge_x")[TOTAL]["output_tokens_per_day"] == 500


def test_the_day_is_the_utc_day_whatever_the_clock_zone(clocks: Clocks) -> None:
    paris = timezone(timedelta(hours=1))
    clocks.now = datetime(2026, 11, 25, 0, 30, tzinfo=paris)  # 23:30 UTC on the 24th
    b = budget(clocks, total={"usd_per_day": 1.0})
    a = b.admit("judge_x", 10, 0.5)
    b.record("judge_x", usage(10), 1.0, admission=a)
    clocks.advance(20 * 60)  # 00:50 in Paris, 23:50 UTC: the same UTC day
    assert not b.admit("judge_x", 10, 0.01)
    clocks.advance(20 * 60)  # 00:10 UTC
    assert b.admit("judge_x", 10, 0.01)


def test_a_clock_set_back_does_not_hand_out_a_second_day(clocks: Clocks) -> None:
    b = budget(clocks, total={"usd_per_day": 1.0})
    a = b.admit("judge_x", 10, 0.5)
    b.record("judge_x", usage(10), 1.0, admission=a)
    clocks.now -= timedelta(days=1)
    assert not b.admit("judge_x", 10, 0.01)


def test_from_settings_uses_the_judge_section(clocks: Clocks) -> None:
    judge = load_settings(judge={"max_tokens": 2048, "budgets": {"total": {"output_tokens_per_day": 3000}}}).judge
    b = JudgeBudget.from_settings(judge, clock=clocks.wall, monotonic=clocks.mono)
    assert b.admit("judge_x", 10, 0.0)  # output estimated at max_tokens: 2048
    assert b.remaining("judge_x")[TOTAL]["output_tokens_per_day"] == 3000 - 2048


# --------------------------------------------------------------------------- the guarantee, under random sequences

KINDS = ("judge_a", "judge_b", "judge_c")


@dataclass
class Day:
    spent: dict[str, float] = field(default_factory=lambda: dict.fromkeys(DAILY_LIMITS, 0.0))
    largest: dict[str, float] = field(default_factory=lambda: dict.fromkeys(DAILY_LIMITS, 0.0))
    missed: dict[str, float] = field(default_factory=lambda: dict.fromkeys(DAILY_LIMITS, 0.0))


def caps() -> st.SearchStrategy[dict[str, Any]]:
    """Caps of the size of a few calls, so that sequences reach them (0 now and then)."""
    return st.fixed_dictionaries(
        {
            "requests_per_minute": st.none() | st.integers(1, 8),
            "input_tokens_per_day": st.none() | st.just(0) | st.integers(500, 12_000),
            "output_tokens_per_day": st.none() | st.integers(200, 4000),
            "usd_per_day": st.none() | st.integers(50, 2000).map(lambda milli: milli / 1000),
        }
    )


estimate = st.tuples(st.integers(0, 3000), st.integers(0, 1000), st.integers(0, 400).map(lambda m: m / 1000))
fractions = st.tuples(*[st.sampled_from([0.0, 0.5, 0.9, 1.0]) | st.floats(0, 1)] * 3)  # actual ÷ estimate
admit_op = st.tuples(st.just("admit"), st.sampled_from(KINDS), estimate, fractions, st.integers(1, 4))  # a burst
record_op = st.tuples(st.just("record"), st.integers(0, 50), st.integers(1, 3))
operation = st.one_of(  # admits and records twice as often as the rest: calls pile up in flight
    admit_op,
    admit_op,
    record_op,
    record_op,
    st.tuples(st.just("cancel"), st.integers(0, 50)),
    st.tuples(st.just("advance"), st.sampled_from([0.0, 1.0, 15.0, 59.0, 600.0, 3 * 3600.0, 9 * 3600.0])),
)


def check_reservations(
    limits: dict[str, dict[str, Any]],
    days: dict[tuple[str, Any], Day],
    flight: list[tuple[Admission, tuple[float, float, float], tuple[float, float, float]]],
    today: Any,
) -> None:
    """The invariant behind the guarantee: in each scope and for each daily limit, either at most one call is
    in flight (one admitted alone), or today's spend plus the estimates in flight stays within the cap (plus
    what today's recorded calls exceeded their estimates by)."""
    for scope, scope_limits in limits.items():
        mine = [est for admission, est, _ in flight if scope in (TOTAL, admission.kind)]
        if len(mine) <= 1:
            continue
        day = days.get((scope, today), Day())
        for index, limit in enumerate(DAILY_LIMITS):
            cap = scope_limits[limit]
            if cap is not None:
                reserved = sum(est[index] for est in mine)
                assert day.spent[limit] + reserved <= cap + day.missed[limit] + 1e-9, (scope, limit, day, mine)


def check_random_sequence(
    data: st.DataObject, total: dict[str, Any], per_judge: dict[str, dict[str, Any]], overshoot: float
) -> None:
    """Run the operations drawn from ``data``; ``overshoot`` is how far an actual spend may exceed its
    estimate (0: estimates are upper bounds). After each step, for each scope, limit and UTC day:
    ``spent <= cap + the largest single call + Σ max(0, actual − estimate)`` over the calls recorded that day
    (with ``overshoot == 0`` the last term is 0: the single-call bound)."""
    clocks = Clocks(datetime(2026, 11, 24, 20, 0, tzinfo=UTC))
    b = budget(clocks, total, **per_judge)
    limits = {TOTAL: total, **per_judge}
    days: dict[tuple[str, Any], Day] = {}
    flight: list[tuple[Admission, tuple[float, float, float], tuple[float, float, float]]] = []
    ops = data.draw(st.lists(operation, min_size=20, max_size=100))
    for op in ops:
        if op[0] == "admit":
            _, kind, (est_in, est_out, est_usd), fractions, burst = op
            for _ in range(burst):
                answer = b.admit(kind, est_in, est_usd, estimated_output_tokens=est_out)
                if answer:
                    scale = 1 + overshoot
                    actual = (
                        round(est_in * fractions[0] * scale),
                        round(est_out * fractions[1] * scale),
                        est_usd * fractions[2] * scale,
                    )
                    flight.append((answer, (est_in, est_out, est_usd), actual))
                else:
                    assert answer.scope in limits and answer.limit is not None
                    assert limits[answer.scope][answer.limit] is not None  # refused by a limit that exists
                check_reservations(limits, days, flight, clocks.now.date())
        elif op[0] == "record" and flight:
            admission, est, act = flight.pop(op[1] % len(flight))
            b.record(admission.kind, usage(act[0], act[1], requests=op[2]), act[2], admission=admission)
            today = clocks.now.date()
            for scope in (TOTAL, admission.kind):
                if scope not in limits:
                    continue
                day = days.setdefault((scope, today), Day())
                for limit, a, e in zip(DAILY_LIMITS, act, est, strict=True):
                    day.spent[limit] += a
                    day.largest[limit] = max(day.largest[limit], a)
                    day.missed[limit] += max(0.0, a - e)
        elif op[0] == "cancel" and flight:
            b.cancel(flight.pop(op[1] % len(flight))[0])
        elif op[0] == "advance":
            clocks.advance(op[1])
        assert b.in_flight() == len(flight)
        for (scope, day_date), day in days.items():
            for limit in DAILY_LIMITS:
                cap = limits[scope][limit]
                if cap is not None:
                    bound = cap + day.largest[limit] + day.missed[limit]
                    assert day.spent[limit] <= bound + 1e-9, (scope, day_date, limit, day)
                    if overshoot == 0:
                        assert day.missed[limit] == 0
            if day_date == clocks.now.date():  # the budget's own books agree with ours
                kind = scope if scope != TOTAL else KINDS[0]
                for limit in DAILY_LIMITS:
                    assert b.spent(kind)[scope][limit] == pytest.approx(day.spent[limit], abs=1e-9)
        for kind in KINDS:
            assert 0.0 <= b.pressure(kind) <= 1.0


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), total=caps(), judge_a=caps(), judge_b=caps())
def test_with_bounding_estimates_spend_exceeds_a_cap_by_at_most_one_call(
    data: st.DataObject, total: dict[str, Any], judge_a: dict[str, Any], judge_b: dict[str, Any]
) -> None:
    check_random_sequence(data, total, {"judge_a": judge_a, "judge_b": judge_b}, overshoot=0.0)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), total=caps(), judge_a=caps(), overshoot=st.sampled_from([0.5, 2.0]))
def test_with_underestimates_the_excess_is_one_call_plus_what_the_estimates_missed(
    data: st.DataObject, total: dict[str, Any], judge_a: dict[str, Any], overshoot: float
) -> None:
    check_random_sequence(data, total, {"judge_a": judge_a}, overshoot=overshoot)


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    cap=st.integers(1, 20_000),
    estimates=st.lists(st.integers(1, 5000), min_size=1, max_size=30),
)
def test_a_call_is_never_refused_while_nothing_is_in_flight_and_the_cap_is_not_reached(
    data: st.DataObject, cap: int, estimates: list[int]
) -> None:
    """The budget is used up: with nothing in flight and spend below the cap, the next call is admitted."""
    clocks = Clocks(datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    b = budget(clocks, total={"input_tokens_per_day": cap})
    spent = 0
    for est in estimates:
        answer = b.admit("judge_a", est, 0.0)
        assert bool(answer) == (spent < cap)
        if not answer:
            break
        actual = data.draw(st.integers(0, est))
        b.record("judge_a", usage(actual), 0.0, admission=answer)
        spent += actual
    assert spent <= cap + max(estimates)


# --------------------------------------------------------------------------- threads


def test_concurrent_admits_and_records_keep_the_books_and_the_bound() -> None:
    clocks = Clocks(datetime(2026, 11, 24, 12, 0, tzinfo=UTC))
    b = budget(clocks, total={"input_tokens_per_day": 200_000, "usd_per_day": 50.0})
    recorded: list[int] = []
    lock = threading.Lock()

    def worker(seed: int) -> None:
        for i in range(400):
            answer = b.admit(KINDS[(seed + i) % 3], 500, 0.1)
            if answer:
                actual = 100 + (seed * 7 + i) % 400  # at most the estimate
                b.record(answer.kind, usage(actual), 0.1, admission=answer)
                with lock:
                    recorded.append(actual)

    threads = [threading.Thread(target=worker, args=(seed,)) for seed in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    spent = b.spent("judge_a")[TOTAL]
    assert b.in_flight() == 0
    assert spent["input_tokens_per_day"] == sum(recorded) <= 200_000 + 500
    assert spent["usd_per_day"] == pytest.approx(0.1 * len(recorded))
    assert spent["usd_per_day"] <= 50.0 + 0.1 + 1e-9
    assert b.remaining("judge_a")[TOTAL]["input_tokens_per_day"] == max(0, 200_000 - sum(recorded))


# --------------------------------------------------------------------------- the priority policy


@pytest.mark.parametrize(
    ("pressure", "plain", "rare", "flagged", "errored"),
    [
        (0.0, True, True, True, True),
        (0.49, True, True, True, True),
        (0.5, False, True, True, True),
        (0.89, False, True, True, True),
        (0.9, False, False, True, True),
        (0.999, False, False, True, True),
        (1.0, False, False, False, False),
    ],
)
def test_priority_shifts_judging_to_suspicious_runs_as_the_budget_runs_out(
    pressure: float, plain: bool, rare: bool, flagged: bool, errored: bool
) -> None:
    assert judge_priority_admits(pressure, flagged=False, errored=False, rare=False) is plain
    assert judge_priority_admits(pressure, flagged=False, errored=False, rare=True) is rare
    assert judge_priority_admits(pressure, flagged=True, errored=False, rare=False) is flagged
    assert judge_priority_admits(pressure, flagged=False, errored=True, rare=False) is errored


@given(
    low=st.floats(0, 1),
    high=st.floats(0, 1),
    flags=st.tuples(st.booleans(), st.booleans(), st.booleans()),
)
def test_priority_is_monotone_in_pressure(low: float, high: float, flags: tuple[bool, bool, bool]) -> None:
    low, high = min(low, high), max(low, high)
    flagged, errored, rare = flags
    if judge_priority_admits(high, flagged=flagged, errored=errored, rare=rare):
        assert judge_priority_admits(low, flagged=flagged, errored=errored, rare=rare)
