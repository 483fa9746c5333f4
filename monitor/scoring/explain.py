"""Issue derivation shared by every reference scorer (SCORING.md §2.0).

Issues never change a score: a scorer computes its number with its peer's algorithm and calls
:func:`explain` to say *why*. The procedure:

1. maximum matching (Hopcroft–Karp) of actual to expected calls on (same name ∧ args match);
   matched pairs produce no issue;
2. among the rest, same-name calls are paired in order and their arguments diffed per parameter:
   ``missing_parameter`` (key absent), ``wrong_value`` (unequal) and, only when the args mode is
   exact, ``unknown_parameter`` (key not in the reference);
3. remaining expected and actual calls are paired positionally → ``wrong_tool`` (``tool`` = called
   name, ``detail.expected_tool`` = expected name);
4. leftover expected → ``missing_tool``; leftover actual → ``unnecessary_tool``;
5. if nothing else was found but the scorer failed on order → one ``wrong_order`` issue.

The matching is deterministic: it starts from the greedy in-order matching (each expected call
takes the first unused matching actual call) and augments it with Hopcroft–Karp, so when an
order-preserving maximum matching exists greedily it is the one kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, filterfalse
from operator import not_
from typing import Any

from monitor.scoring.expectation import ExpectedCall
from monitor.scoring.result import FailureKind, Issue, Severity, call_issue, frozen_init
from monitor.trajectory.model import ABSENT, Malformed, ToolCall

__all__ = ["ArgsMatcher", "Explanation", "explain", "hopcroft_karp", "json_safe", "pointer", "wrong_order_issue"]

ArgsMatcher = Callable[[ToolCall, ExpectedCall], bool]
"""Whether an actual call's arguments match an expected call's (names are compared by :func:`explain`)."""


def pointer(key: str) -> str:
    """JSON Pointer (RFC 6901) of a top-level key."""
    return "/" + key.replace("~", "~0").replace("/", "~1")


def json_safe(value: Any) -> Any:
    """A value fit for an issue's ``expected``/``actual``: ABSENT → None, Malformed → its raw text."""
    if value is ABSENT:
        return None
    if isinstance(value, Malformed):
        return value.raw
    return value


def hopcroft_karp(
    adjacency: Sequence[Sequence[int]], n_right: int, initial: dict[int, int] | None = None
) -> dict[int, int]:
    """Maximum bipartite matching (Hopcroft–Karp).

    ``adjacency[u]`` lists the right vertices left vertex ``u`` may match, in preference order.
    ``initial`` is a valid partial matching (left → right) to start from. Returns left → right.
    """
    inf = float("inf")
    match_l: list[int | None] = [None] * len(adjacency)
    match_r: list[int | None] = [None] * n_right
    for u, v in (initial or {}).items():
        match_l[u] = v
        match_r[v] = u
    dist: list[float] = [inf] * len(adjacency)

    def bfs() -> bool:
        queue: deque[int] = deque()
        for u in range(len(adjacency)):
            if match_l[u] is None:
                dist[u] = 0
                queue.append(u)
            else:
                dist[u] = inf
        found = False
        while queue:
            u = queue.popleft()
            for v in adjacency[u]:
                w = match_r[v]
                if w is None:
                    found = True
                elif dist[w] == inf:
                    dist[w] = dist[u] + 1
                    queue.append(w)
        return found

    def dfs(u: int) -> bool:
        for v in adjacency[u]:
            w = match_r[v]
            if w is None or (dist[w] == dist[u] + 1 and dfs(w)):
                match_l[u] = v
                match_r[v] = u
                return True
        dist[u] = inf
        return False

    while bfs():
        for u in range(len(adjacency)):
            if match_l[u] is None:
                dfs(u)
    return {u: v for u, v in enumerate(match_l) if v is not None}


@frozen_init
@dataclass(frozen=True, slots=True)
class Explanation:
    """The issues of :func:`explain` and the maximum matching behind them (expected → actual index)."""

    issues: tuple[Issue, ...]
    matching: dict[int, int]


_ERROR = Severity.ERROR
_NO_CANDIDATES: list[int] = []  # shared, never mutated
_MISSING_PARAMETER = FailureKind.MISSING_PARAMETER
_WRONG_VALUE = FailureKind.WRONG_VALUE
_UNKNOWN_PARAMETER = FailureKind.UNKNOWN_PARAMETER


def _diff(call: ToolCall, expected: ExpectedCall, exact: bool) -> list[Issue]:
    """§2.0 step 2: the per-parameter issues of a same-name pair whose arguments did not match."""
    exp_args = expected.args
    act_args = call.args
    if exp_args is ABSENT or act_args is ABSENT:
        return []
    if not isinstance(exp_args, dict) or not isinstance(act_args, dict):
        if exp_args == act_args:
            return []
        kind = FailureKind.MALFORMED_ARGUMENTS if isinstance(act_args, Malformed) else _WRONG_VALUE
        return [call_issue(kind, call, expected=json_safe(exp_args), actual=json_safe(act_args))]
    issues: list[Issue] = []
    name, index, call_id = call.name, call.index, call.call_id
    for key, value in exp_args.items():
        if key not in act_args:
            issues.append(
                Issue(_MISSING_PARAMETER, _ERROR, name, pointer(key), index, call_id, value, None, None, None)
            )
        elif act_args[key] != value:
            issues.append(
                Issue(_WRONG_VALUE, _ERROR, name, pointer(key), index, call_id, value, act_args[key], None, None)
            )
    if exact:
        for key, value in act_args.items():
            if key not in exp_args:
                issues.append(
                    Issue(_UNKNOWN_PARAMETER, _ERROR, name, pointer(key), index, call_id, None, value, None, None)
                )
    if not issues:
        # The scorer's matcher rejected arguments the plain per-key diff cannot tell apart
        # (e.g. a key-path override); report the pair as one wrong_value.
        issues.append(call_issue(_WRONG_VALUE, call, expected=json_safe(exp_args), actual=json_safe(act_args)))
    return issues


def _missing_tool(expected: ExpectedCall) -> Issue:
    return Issue(FailureKind.MISSING_TOOL, _ERROR, expected.name, None, None, None, _expected_json(expected))


def _unnecessary_tool(call: ToolCall) -> Issue:
    return Issue(
        FailureKind.UNNECESSARY_TOOL, _ERROR, call.name, None, call.index, call.call_id, None, json_safe(call.args)
    )


def explain(
    actual: Sequence[ToolCall],
    expected: Sequence[ExpectedCall],
    args_matcher: ArgsMatcher | None = None,
    *,
    exact_args: bool = False,
    order_failed: bool = False,
) -> Explanation:
    """Issues explaining the difference between ``actual`` and ``expected`` calls (§2.0).

    ``args_matcher`` None compares names only (args mode ``ignore``). An expected call whose
    ``args`` is ABSENT (unspecified) matches any same-name call. ``exact_args`` enables
    ``unknown_parameter`` in the per-parameter diff. ``order_failed``: the scorer failed on order
    although the calls may all match → a ``wrong_order`` issue when nothing else explains it.

    Scorers call it only when an issue must be written (their score failed, or SCORING.md asks for
    the issue regardless). Cost: ``args_matcher`` is asked only for same-name pairs, and
    Hopcroft–Karp runs only when the greedy matching may be improved (a free expected call and a
    free actual call both have candidates; otherwise no augmenting path exists and the greedy
    matching is maximum, which is what Hopcroft–Karp would return).
    """
    n_exp, n_act = len(expected), len(actual)
    if not n_act and n_exp:  # nothing called: every expected call is missing
        return Explanation(tuple(map(_missing_tool, expected)), {})
    if not n_exp and n_act:  # nothing expected: every call is unnecessary
        return Explanation(tuple(map(_unnecessary_tool, actual)), {})
    by_name: dict[str, list[int]] = {}
    for j, call in enumerate(actual):
        same = by_name.get(call.name)
        if same is None:
            by_name[call.name] = [j]
        else:
            same.append(j)
    adjacency: list[list[int]] = []
    for e in expected:
        same = by_name.get(e.name)
        if same is None:
            adjacency.append(_NO_CANDIDATES)
        elif args_matcher is None or e.args is ABSENT:
            adjacency.append(same)
        elif len(same) == 1:
            adjacency.append(same if args_matcher(actual[same[0]], e) else _NO_CANDIDATES)
        else:
            adjacency.append([j for j in same if args_matcher(actual[j], e)])
    # greedy in-order matching: each expected call takes the first unused candidate
    matching: dict[int, int] = {}
    used = [False] * n_act
    for i, cands in enumerate(adjacency):
        for j in cands:
            if not used[j]:
                matching[i] = j
                used[j] = True
                break
    if len(matching) < n_exp and len(matching) < n_act and _may_augment(adjacency, matching, used):
        matching = hopcroft_karp(adjacency, n_act, matching)
        used = [False] * n_act
        for j in matching.values():
            used[j] = True

    if len(matching) == n_exp and len(matching) == n_act:
        return Explanation((_wrong_order(actual, expected, matching),) if order_failed else (), matching)
    free_exp = list(filterfalse(matching.__contains__, range(n_exp)))
    free_act = list(compress(range(n_act), map(not_, used)))

    issues: list[Issue] = []
    # 2. same-name pairs, in order
    if free_exp and free_act:
        for i in free_exp[:]:
            name = expected[i].name
            for j in free_act:
                if actual[j].name == name:
                    issues += _diff(actual[j], expected[i], exact_args)
                    free_exp.remove(i)
                    free_act.remove(j)
                    break

    # 3. positional confusion pairs
    k = min(len(free_exp), len(free_act))
    for n in range(k):
        e, call = expected[free_exp[n]], actual[free_act[n]]
        issues.append(
            Issue(
                FailureKind.WRONG_TOOL,
                _ERROR,
                call.name,
                None,
                call.index,
                call.call_id,
                _expected_json(e),
                json_safe(call.args),
                {"expected_tool": e.name},
            )
        )

    # 4. leftovers
    for i in free_exp[k:]:
        issues.append(_missing_tool(expected[i]))
    for j in free_act[k:]:
        issues.append(_unnecessary_tool(actual[j]))

    # 5. order
    if order_failed and not issues:
        issues.append(_wrong_order(actual, expected, matching))
    return Explanation(tuple(issues), matching)


def _may_augment(adjacency: Sequence[Sequence[int]], matching: dict[int, int], used: Sequence[bool]) -> bool:
    """Whether an augmenting path may exist: it would start at a free left vertex with a candidate
    and end at a free right vertex that is some left vertex's candidate."""
    if not any(cands for i, cands in enumerate(adjacency) if i not in matching):
        return False
    return any(not used[j] for cands in adjacency for j in cands)


def wrong_order_issue(actual: Sequence[ToolCall], expected: Sequence[ExpectedCall]) -> Issue:
    """A ``wrong_order`` issue on the first out-of-place expected call (names-only matching)."""
    return _wrong_order(actual, expected, explain(actual, expected).matching)


def _wrong_order(actual: Sequence[ToolCall], expected: Sequence[ExpectedCall], matching: dict[int, int]) -> Issue:
    pairs = sorted(matching.items())
    target: tuple[int, int] | None = None
    prev = -1
    for i, j in pairs:
        if j < prev:
            target = (i, j)
            break
        prev = j
    if target is None:
        target = next(((i, j) for i, j in pairs if i != j), pairs[0] if pairs else None)
    if target is None:
        return Issue(FailureKind.WRONG_ORDER, severity=Severity.ERROR)
    i, j = target
    return call_issue(
        FailureKind.WRONG_ORDER,
        actual[j],
        tool=expected[i].name,
        expected=i,
        actual=j,
        detail={"expected_position": i, "actual_position": j},
    )


def _expected_json(call: ExpectedCall) -> dict[str, Any]:
    out: dict[str, Any] = {"name": call.name}
    if call.args is not ABSENT:
        out["args"] = json_safe(call.args)
    return out
