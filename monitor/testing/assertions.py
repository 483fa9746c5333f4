"""``assert_tools``: assert which tools a run called, on the project's trajectory-match scorer."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from monitor.scoring.expectation import Expectation, ExpectedCall
from monitor.scoring.reference.trajectory_match import ArgsMatchMode, TrajectoryMatch, args_matcher_for
from monitor.scoring.result import FailureKind, Issue, ScoreResult
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall

if TYPE_CHECKING:
    from monitor.testing.capture import RunCapture

__all__ = ["ArgsMode", "ExpectedTool", "Order", "assert_tools"]

Order: TypeAlias = Literal["exact", "in_order", "any_order"]
ArgsMode: TypeAlias = Literal["exact", "subset", "ignore"]
ExpectedTool: TypeAlias = str | tuple[str, Any] | Mapping[str, Any] | ExpectedCall
"""A tool name (any arguments), ``(name, args)``, ``{"name": …, "args": …}`` or an :class:`ExpectedCall`."""

_TRAJECTORY_MODE: dict[str, str] = {"exact": "strict", "in_order": "superset", "any_order": "superset"}
_ARGS_MODE: dict[str, ArgsMatchMode] = {"exact": "exact", "subset": "superset", "ignore": "ignore"}
_MAX_VALUE = 60


class _AnyArgs(dict[str, Any]):
    """The arguments of an expected call given by name only: matches any arguments."""

    def __repr__(self) -> str:
        return "…"


_ANY = _AnyArgs()


def _expected_call(item: ExpectedTool) -> ExpectedCall:
    if isinstance(item, ExpectedCall):
        return item if item.args is not ABSENT else ExpectedCall(item.name, _ANY)
    if isinstance(item, str):
        return ExpectedCall(item, _ANY)
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[0], str):
        return ExpectedCall(item[0], item[1])
    if isinstance(item, Mapping) and isinstance(item.get("name"), str):
        return ExpectedCall(item["name"], item.get("args", _ANY))
    raise TypeError(f"assert_tools: an expected call is a name, (name, args) or {{'name', 'args'}}, got {item!r}")


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= _MAX_VALUE else text[: _MAX_VALUE - 1] + "…"


def _args_text(args: Any) -> str:
    if args is _ANY or isinstance(args, _AnyArgs):
        return "…"
    if args is ABSENT:
        return "<arguments not captured>"
    if isinstance(args, Malformed):
        return f"<not JSON: {_short(args.raw)}>"
    if isinstance(args, dict):
        return ", ".join(f"{k}={_short(v)}" for k, v in args.items())
    return _short(args)


def _call_text(name: str, args: Any) -> str:
    return f"{name}({_args_text(args)})"


def _expected_text(value: Any) -> str:
    """An issue's ``expected`` call (``{"name", "args"?}``) as ``name(args)``."""
    if isinstance(value, Mapping) and "name" in value:
        return _call_text(str(value["name"]), value.get("args", _ANY))
    return _short(value)


def _parameter(pointer: str | None) -> str:
    if not pointer:
        return "?"
    return repr(pointer.lstrip("/").replace("~1", "/").replace("~0", "~"))


def _issue_line(issue: Issue, calls: Sequence[ToolCall]) -> str:
    at = f"call #{issue.call_index}" if issue.call_index is not None else "a call"
    tool = issue.tool or "?"
    kind = issue.kind
    if kind == FailureKind.WRONG_TOOL:
        called = calls[issue.call_index].args if issue.call_index is not None else issue.actual
        return f"{at}: expected {_expected_text(issue.expected)}, got {_call_text(tool, called)}"
    if kind == FailureKind.MISSING_TOOL:
        return f"missing: {_expected_text(issue.expected)} was not called"
    if kind == FailureKind.UNNECESSARY_TOOL:
        called = calls[issue.call_index].args if issue.call_index is not None else issue.actual
        return f"{at} {_call_text(tool, called)}: not expected"
    if kind == FailureKind.MISSING_PARAMETER:
        return f"{at} {tool}: argument {_parameter(issue.parameter)} is missing (expected {_short(issue.expected)})"
    if kind == FailureKind.WRONG_VALUE:
        if issue.parameter:
            return (
                f"{at} {tool}: argument {_parameter(issue.parameter)} expected {_short(issue.expected)}, "
                f"got {_short(issue.actual)}"
            )
        return f"{at} {tool}: arguments expected ({_args_text(issue.expected)}), got ({_args_text(issue.actual)})"
    if kind == FailureKind.UNKNOWN_PARAMETER:
        return f"{at} {tool}: unexpected argument {_parameter(issue.parameter)}={_short(issue.actual)}"
    if kind == FailureKind.MALFORMED_ARGUMENTS:
        return f"{at} {tool}: arguments are not valid JSON: {_short(issue.actual)}"
    if kind == FailureKind.WRONG_ORDER:
        detail = issue.detail if isinstance(issue.detail, Mapping) else {}
        where = ""
        if "expected_position" in detail and "actual_position" in detail:
            position = detail["expected_position"] + 1
            where = f": expected as call {position} of the list, called as #{issue.call_index}"
        return f"out of order: {tool}{where}"
    return f"{kind}: {issue.to_json()}"


def _order_problem(
    calls: Sequence[ToolCall], expected: Sequence[ExpectedCall], match: Callable[[Any, Any], bool]
) -> str | None:
    """None when ``expected`` is a subsequence of ``calls`` (greedy leftmost matching is optimal for that), else
    which expected call is not found after the previous one."""
    k, last = 0, -1
    for j, call in enumerate(calls):
        if k < len(expected) and call.name == expected[k].name and match(call.args, expected[k].args):
            k, last = k + 1, j
    if k == len(expected):
        return None
    want = expected[k]
    seen = [f"#{c.index}" for c in calls if c.name == want.name and match(c.args, want.args)]
    after = f"after call #{calls[last].index} {_call_text(calls[last].name, calls[last].args)}" if k else ""
    where = f" (only at {', '.join(seen)})" if seen else ""
    return f"out of order: {_call_text(want.name, want.args)} is expected {after}, but is not called after it{where}"


def assert_tools(
    run: Run | RunCapture,
    expected: Sequence[ExpectedTool],
    *,
    order: Order = "exact",
    args: ArgsMode = "exact",
    calls: Literal["auto", "selected", "executed"] = "auto",
    scope: Literal["flatten", "own"] = "flatten",
) -> ScoreResult:
    """Assert that ``run`` called the ``expected`` tools; raises ``AssertionError`` saying which call differed and how.

    ``expected`` items: a tool name (any arguments), ``(name, args)``, ``{"name": …, "args": …}`` or an
    :class:`~monitor.scoring.expectation.ExpectedCall`. ``run`` may be a :class:`~monitor.testing.RunCapture`
    (the ``monitor_runs`` fixture): its one run is used.

    ``order`` (the match types of Google ADK's trajectory criterion):

    * ``"exact"``: the run's calls are the expected ones, in that order, nothing else. Calls one model step
      emitted in parallel may come in any order among themselves (the project's ``trajectory_match`` scorer,
      ``strict`` mode: steps are compared in order, the calls inside a step as a set).
    * ``"in_order"``: the expected calls occur in this order; other calls may come before, between and after.
    * ``"any_order"``: each expected call is matched by a distinct call of the run, in any order; other calls
      are allowed (``trajectory_match``, ``superset`` mode with optimal matching).

    ``args``: how the arguments given in ``expected`` compare with the run's: ``"exact"`` (equal), ``"subset"``
    (every given key has that value; other keys allowed) or ``"ignore"`` (names only). A call given by name only
    matches any arguments. ``calls`` / ``scope`` choose the calls read (SCORING.md §1.3; default: every call,
    nested agents' included). Comparing arguments the spans did not capture fails with the reason.

    Returns the scorer's passing :class:`~monitor.scoring.result.ScoreResult`.
    """
    __tracebackhide__ = True  # pytest shows the caller's line and the message, not this function
    if order not in _TRAJECTORY_MODE:
        raise ValueError(f"assert_tools: order must be 'exact', 'in_order' or 'any_order', got {order!r}")
    if args not in _ARGS_MODE:
        raise ValueError(f"assert_tools: args must be 'exact', 'subset' or 'ignore', got {args!r}")
    if not isinstance(run, Run):
        run = run.run()
    wanted = [_expected_call(item) for item in expected]
    compares = args != "ignore" and any(not isinstance(e.args, _AnyArgs) for e in wanted)
    base = args_matcher_for("", _ARGS_MODE[args] if compares else "ignore", {})

    def match(actual_args: Any, expected_args: Any) -> bool:
        return isinstance(expected_args, _AnyArgs) or base(actual_args, expected_args)

    scorer = TrajectoryMatch(
        {
            "trajectory_match_mode": _TRAJECTORY_MODE[order],
            "tool_args_match_mode": _ARGS_MODE[args] if compares else "ignore",
            "matching": "optimal",
            "calls_source": calls,
            "scope": scope,
        },
        id="assert_tools",
        matchers={e.name: match for e in wanted} if compares else None,
    )
    result = scorer.score(run, Expectation(expected_calls=tuple(wanted)))
    actual = scorer.calls(run)
    header = f"tool calls do not match (order={order!r}, args={args!r})"
    listing = (
        f"\n  expected: {', '.join(_call_text(e.name, e.args) for e in wanted) or '(no calls)'}"
        f"\n  actual:   {', '.join(f'#{c.index} {_call_text(c.name, c.args)}' for c in actual) or '(no calls)'}"
    )
    if result.status != "scored":
        detail = f" {result.details}" if result.details else ""
        raise AssertionError(
            f"cannot compare the tool calls: {result.status}/{result.reason}{detail}"
            + (
                " (the spans carry no tool arguments: enable content capture, or pass args='ignore')"
                if result.reason == "arguments_not_captured"
                else ""
            )
            + listing
        )
    if result.passed and order == "in_order":
        problem = _order_problem(actual, wanted, match)
        if problem is None:
            return result
        raise AssertionError(header + listing + f"\n  - {problem}")
    if result.passed:
        return result
    lines: list[str] = []
    for issue in result.issues:
        if order != "exact" and issue.kind == FailureKind.WRONG_TOOL:  # extra calls are allowed: it is missing
            info: Mapping[str, Any] = issue.detail if isinstance(issue.detail, Mapping) else {}
            missing = issue.expected if isinstance(issue.expected, Mapping) else {"name": info.get("expected_tool")}
            lines.append(f"missing: {_expected_text(missing)} was not called")
        else:
            lines.append(_issue_line(issue, actual))
    raise AssertionError(header + listing + "".join(f"\n  - {line}" for line in lines or ["the calls differ"]))
