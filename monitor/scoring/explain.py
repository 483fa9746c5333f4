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
from typing import Any

from monitor.scoring.expectation import ExpectedCall
from monitor.scoring.result import FailureKind, Issue, Severity, call_issue
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


@dataclass(frozen=True, slots=True)
class Explanation:
    """The issues of :func:`explain` and the maximum matching behind them (expected → actual index)."""

    issues: tuple[Issue, ...]
    matching: dict[int, int]


def _matches(actual: ToolCall, expected: ExpectedCall, args_matcher: ArgsMatcher | None) -> bool:
    if actual.name != expected.name:
        return False
    if args_matcher is None or expected.args is ABSENT:
        return True
    return args_matcher(actual, expected)


def _diff(call: ToolCall, expected: ExpectedCall, exact: bool) -> list[Issue]:
    exp_args = expected.args
    act_args = call.args
    if exp_args is ABSENT or act_args is ABSENT:
        return []
    if not isinstance(exp_args, dict) or not isinstance(act_args, dict):
        if exp_args == act_args:
            return []
        kind = FailureKind.MALFORMED_ARGUMENTS if isinstance(act_args, Malformed) else FailureKind.WRONG_VALUE
        return [call_issue(kind, call, expected=json_safe(exp_args), actual=json_safe(act_args))]
    issues: list[Issue] = []
    for key, value in exp_args.items():
        if key not in act_args:
            issues.append(call_issue(FailureKind.MISSING_PARAMETER, call, parameter=pointer(key), expected=value))
        elif act_args[key] != value:
            issues.append(
                call_issue(FailureKind.WRONG_VALUE, call, parameter=pointer(key), expected=value, actual=act_args[key])
            )
    if exact:
        for key, value in act_args.items():
            if key not in exp_args:
                issues.append(call_issue(FailureKind.UNKNOWN_PARAMETER, call, parameter=pointer(key), actual=value))
    if not issues:
        # The scorer's matcher rejected arguments the plain per-key diff cannot tell apart
        # (e.g. a key-path override); report the pair as one wrong_value.
        issues.append(
            call_issue(FailureKind.WRONG_VALUE, call, expected=json_safe(exp_args), actual=json_safe(act_args))
        )
    return issues


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
    """
    n_exp, n_act = len(expected), len(actual)
    adjacency = [[j for j in range(n_act) if _matches(actual[j], e, args_matcher)] for e in expected]
    greedy: dict[int, int] = {}
    used: set[int] = set()
    for i, cands in enumerate(adjacency):
        for j in cands:
            if j not in used:
                greedy[i] = j
                used.add(j)
                break
    matching = hopcroft_karp(adjacency, n_act, greedy)

    issues: list[Issue] = []
    free_exp = [i for i in range(n_exp) if i not in matching]
    matched_act = set(matching.values())
    free_act = [j for j in range(n_act) if j not in matched_act]

    # 2. same-name pairs, in order
    for i in list(free_exp):
        for j in free_act:
            if actual[j].name == expected[i].name:
                issues.extend(_diff(actual[j], expected[i], exact_args))
                free_exp.remove(i)
                free_act.remove(j)
                break

    # 3. positional confusion pairs
    for i, j in zip(list(free_exp), list(free_act), strict=False):
        call = actual[j]
        issues.append(
            call_issue(
                FailureKind.WRONG_TOOL,
                call,
                expected=_expected_json(expected[i]),
                actual=json_safe(call.args),
                detail={"expected_tool": expected[i].name},
            )
        )
    k = min(len(free_exp), len(free_act))
    free_exp, free_act = free_exp[k:], free_act[k:]

    # 4. leftovers
    for i in free_exp:
        issues.append(Issue(FailureKind.MISSING_TOOL, tool=expected[i].name, expected=_expected_json(expected[i])))
    for j in free_act:
        call = actual[j]
        issues.append(call_issue(FailureKind.UNNECESSARY_TOOL, call, actual=json_safe(call.args)))

    # 5. order
    if order_failed and not issues:
        issues.append(_wrong_order(actual, expected, matching))
    return Explanation(tuple(issues), matching)


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
