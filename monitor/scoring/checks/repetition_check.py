"""``repetition_check`` — repeated identical calls and loops (SCORING.md §3.4).

Contract:

* call key ``K(c) = (name, JCS(args))``; ABSENT arguments → ``(name, null)`` and every issue built
  on such keys carries ``detail.name_only = true`` with severity ``warning`` (names alone cannot
  prove a loop); MALFORMED arguments key on their raw text;
* repeats vs retries: occurrences ``o1 … om`` of one key in view order; ``oj`` (j ≥ 2) is a retry
  when ``o(j−1)`` errored (§3.3 rule), else a repeat. ``oj`` is ``repeated_call`` when
  ``1 + repeats(o2…oj) > limit`` or, for a retry, when the consecutive retries ending at it exceed
  ``max_retries`` (``detail.retry_storm``). The limit for tool ``t``: the per-tool value (the
  expectation's ``max_identical_calls_per_tool``, else this scorer's), else the global value (the
  expectation's ``max_identical_calls``, else this scorer's);
* cycles: the §3.4 scan over the key sequence (names only when any call's arguments are ABSENT),
  largest ``p·k`` with ``k ≥ min_cycle_repeats`` (ties: smaller ``p``), one ``loop`` issue per
  cycle, calls after its first period flagged;
* streaks: ``≥ max_consecutive_same_tool`` consecutive calls of one name whose arguments differ
  (or are unknown) → ``loop`` with ``detail.kind = "same_tool_streak"``, ``warning``, not flagged;
* score = 1 − |flagged| / calls, flagged = calls with an ``error``-severity ``repeated_call``
  ∪ calls in a cycle after its first period (``error`` severity cycles only). Warning-severity
  findings never lower the score, so ``score == 1`` iff the check passes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

import pydantic

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer, canonical_json
from monitor.scoring.checks._common import CheckParams, check_calls
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, Severity, call_issue
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall

__all__ = ["Cycle", "RepetitionCheck", "RepetitionCheckParams", "call_key", "find_cycles"]

PositiveInt = Annotated[int, pydantic.Field(ge=1)]


class RepetitionCheckParams(CheckParams):
    """Limits of §3.4 (defaults from the spec); the expectation's budgets take precedence."""

    max_identical_calls: PositiveInt = 2
    max_identical_calls_per_tool: dict[str, PositiveInt] = pydantic.Field(default_factory=dict)
    max_retries: Annotated[int, pydantic.Field(ge=0)] = 2
    max_period: PositiveInt = 5
    min_cycle_repeats: Annotated[int, pydantic.Field(ge=2)] = 3
    max_consecutive_same_tool: Annotated[int, pydantic.Field(ge=2)] = 8


CallKey = tuple[str, str | None]


def call_key(call: ToolCall) -> CallKey:
    """``(name, JCS(args))``; ``(name, None)`` when arguments are ABSENT.

    Values JCS cannot encode (integers beyond ±2⁵³, NaN) fall back to sorted-key JSON; MALFORMED
    arguments key on ``"\\x00malformed:" + raw`` so they never equal a JSON text.
    """
    args = call.args
    if args is ABSENT:
        return (call.name, None)
    if isinstance(args, Malformed):
        return (call.name, "\x00malformed:" + args.raw)
    try:
        return (call.name, canonical_json(args))
    except (TypeError, ValueError):
        return (call.name, json.dumps(args, sort_keys=True, separators=(",", ":"), default=repr))


_UNIQUE = "\x00unique name"
"""Key text of a call whose name no other call of the view has (its key can equal no other key)."""


def _keys(calls: Sequence[ToolCall]) -> list[CallKey]:
    """The calls' keys for equality tests: :func:`call_key` for every call whose name recurs in the view,
    ``(name, _UNIQUE)`` for a call with captured arguments whose name occurs once (a key compares equal
    only to a key of the same name, so its JCS text would never be read); ABSENT arguments stay
    ``(name, None)`` either way. Equal keys, and which keys are name-only, are those of :func:`call_key`."""
    seen: set[str] = set()
    recurring: set[str] = set()
    for c in calls:
        if c.name in seen:
            recurring.add(c.name)
        else:
            seen.add(c.name)
    return [call_key(c) if c.name in recurring or c.args is ABSENT else (c.name, _UNIQUE) for c in calls]


@dataclass(frozen=True, slots=True)
class Cycle:
    """A cycle found by :func:`find_cycles`: ``start`` position, ``period``, ``repeats``."""

    start: int
    period: int
    repeats: int


def find_cycles(seq: Sequence[Any], max_period: int, min_cycle_repeats: int) -> list[Cycle]:
    """The §3.4 scan, exactly: at ``i``, for ``p = 1 … max_period`` count the consecutive copies
    ``k`` of ``seq[i:i+p]`` starting at ``i``; keep the largest ``p·k`` with ``k ≥ min_cycle_repeats``
    (ties: smaller ``p``); on a hit jump ``i += p·k``, else ``i += 1``."""
    n = len(seq)
    cycles: list[Cycle] = []
    i = 0
    while i < n:
        best: tuple[int, int] | None = None
        for p in range(1, max_period + 1):
            if i + p > n:
                break
            k = 1
            while i + (k + 1) * p <= n and all(seq[i + k * p + j] == seq[i + j] for j in range(p)):
                k += 1
            if k >= min_cycle_repeats and (best is None or p * k > best[0] * best[1]):
                best = (p, k)
        if best is None:
            i += 1
        else:
            cycles.append(Cycle(i, best[0], best[1]))
            i += best[0] * best[1]
    return cycles


class RepetitionCheck(Scorer[RepetitionCheckParams]):
    """Identical calls repeated beyond a limit, retry storms, cycles and same-tool streaks (§3.4)."""

    kind: ClassVar[str] = "repetition_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[RepetitionCheckParams]] = RepetitionCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset({Need.ARGUMENTS})
    summary: ClassVar[str] = "repeated identical calls, retry storms and loops"

    def _limits(self, reference: Expectation | None) -> tuple[Mapping[str, int], int]:
        per_tool: dict[str, int] = dict(self.params.max_identical_calls_per_tool)
        limit = self.params.max_identical_calls
        if reference is not None:
            per_tool.update(reference.budgets.max_identical_calls_per_tool)
            if reference.budgets.max_identical_calls is not None:
                limit = reference.budgets.max_identical_calls
        return per_tool, limit

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        """SCORING.md §3.4: repeats and retries, cycles, same-tool streaks, then the score."""
        calls = check_calls(self, run)
        if not calls:
            return NotScored.na("no_tool_calls")
        p = self.params
        per_tool, global_limit = self._limits(reference)
        keys = _keys(calls)
        repeats = _repeated_calls(calls, keys, per_tool, global_limit, p.max_retries)
        cycles = _loops(calls, keys, p.max_period, p.min_cycle_repeats)
        streaks = _same_tool_streaks(calls, keys, p.max_consecutive_same_tool)
        flagged = repeats.flagged | cycles.flagged
        details: dict[str, Any] = {
            "calls": len(calls),
            "flagged": len(flagged),
            "repeated_calls": repeats.count,
            "retry_storms": repeats.storms,
            "cycles": cycles.count,
            "same_tool_streaks": streaks.count,
            "name_only": cycles.name_only,
        }
        issues = (*repeats.issues, *cycles.issues, *streaks.issues)
        return Outcome(score=1.0 - len(flagged) / len(calls), issues=issues, details=details)


@dataclass(frozen=True, slots=True)
class _Findings:
    """What one step of §3.4 found: its issues, the call positions it flags (they lower the score),
    how many findings, and (repeats) how many were retry storms, (loops) whether keys were names only."""

    issues: tuple[Issue, ...]
    flagged: frozenset[int] = frozenset()
    count: int = 0
    storms: int = 0
    name_only: bool = False


def _repeated_calls(
    calls: Sequence[ToolCall], keys: Sequence[CallKey], per_tool: Mapping[str, int], global_limit: int, max_retries: int
) -> _Findings:
    """§3.4 repeated identical calls: for each key's occurrences ``o1 … om`` in order, ``oj`` (j ≥ 2)
    is a retry when ``o(j−1)`` errored, else a repeat; it is a ``repeated_call`` when ``1 + repeats``
    exceeds the tool's limit, or when it is a retry and the consecutive retries exceed ``max_retries``
    (a retry storm). Name-only keys (arguments ABSENT) give warnings and flag nothing."""
    errored = [call_error(c) is not None for c in calls]
    issues: list[Issue] = []
    flagged: set[int] = set()
    # key -> (first position, last position, repeats, consecutive retries)
    history: dict[CallKey, tuple[int, int, int, int]] = {}
    repeated = storms = 0
    for pos, (call, key) in enumerate(zip(calls, keys, strict=True)):
        prev = history.get(key)
        if prev is None:
            history[key] = (pos, pos, 0, 0)
            continue
        first, last, repeats, retries = prev
        retry = errored[last]
        if retry:
            retries += 1
        else:
            repeats += 1
            retries = 0
        history[key] = (first, pos, repeats, retries)
        limit = per_tool.get(call.name, global_limit)
        over = 1 + repeats > limit
        storm = retry and retries > max_retries
        if not (over or storm):
            continue
        name_only = key[1] is None
        if not name_only:
            flagged.add(pos)
        repeated += 1
        storms += storm
        issues.append(
            call_issue(
                FailureKind.REPEATED_CALL,
                call,
                severity=Severity.WARNING if name_only else Severity.ERROR,
                expected=max_retries if storm and not over else limit,
                actual=retries if storm and not over else 1 + repeats,
                detail={
                    "first_index": calls[first].index,
                    "repeats": repeats,
                    "retry": retry,
                    "retry_storm": storm,
                    "consecutive_retries": retries,
                    "name_only": name_only,
                },
            )
        )
    return _Findings(tuple(issues), frozenset(flagged), repeated, storms)


def _loops(calls: Sequence[ToolCall], keys: Sequence[CallKey], max_period: int, min_cycle_repeats: int) -> _Findings:
    """§3.4 loops: the cycle scan (:func:`find_cycles`) over the call keys, by name only when any
    call's arguments are ABSENT (then warnings that flag nothing); one ``loop`` issue per cycle, the
    calls after its first period flagged."""
    name_only = any(k[1] is None for k in keys)
    seq: list[Any] = [k[0] for k in keys] if name_only else list(keys)
    cycles = find_cycles(seq, max_period, min_cycle_repeats)
    issues: list[Issue] = []
    flagged: set[int] = set()
    for cycle in cycles:
        start = calls[cycle.start]
        if not name_only:
            flagged.update(range(cycle.start + cycle.period, cycle.start + cycle.period * cycle.repeats))
        issues.append(
            call_issue(
                FailureKind.LOOP,
                start,
                severity=Severity.WARNING if name_only else Severity.ERROR,
                expected=min_cycle_repeats - 1,
                actual=cycle.repeats,
                detail={
                    "kind": "cycle",
                    "start": start.index,
                    "period": cycle.period,
                    "repeats": cycle.repeats,
                    "names": [c.name for c in calls[cycle.start : cycle.start + cycle.period]],
                    "name_only": name_only,
                },
            )
        )
    return _Findings(tuple(issues), frozenset(flagged), len(cycles), name_only=name_only)


def _same_tool_streaks(calls: Sequence[ToolCall], keys: Sequence[CallKey], max_consecutive: int) -> _Findings:
    """§3.4 streaks: ``≥ max_consecutive`` consecutive calls of one name whose arguments differ (or
    are unknown) → a ``loop`` warning with ``detail.kind = "same_tool_streak"``; never flagged."""
    issues: list[Issue] = []
    i = 0
    while i < len(calls):
        j = i
        while j + 1 < len(calls) and calls[j + 1].name == calls[i].name:
            j += 1
        length = j - i + 1
        if length >= max_consecutive:
            segment = keys[i : j + 1]
            unknown = any(k[1] is None for k in segment)
            if unknown or len(set(segment)) > 1:
                issues.append(
                    call_issue(
                        FailureKind.LOOP,
                        calls[i],
                        severity=Severity.WARNING,
                        expected=max_consecutive - 1,
                        actual=length,
                        detail={
                            "kind": "same_tool_streak",
                            "start": calls[i].index,
                            "length": length,
                            "names": [calls[i].name],
                            "name_only": unknown,
                        },
                    )
                )
        i = j + 1
    return _Findings(tuple(issues), count=len(issues))
