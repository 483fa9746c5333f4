"""The call view (SCORING.md §1.3): the one way scorers read a run's tool calls."""

from __future__ import annotations

import dataclasses
from typing import Literal, TypeAlias

from monitor.trajectory.model import ABSENT, Run, ToolCall

CallsSource: TypeAlias = Literal["auto", "selected", "executed"]
Scope: TypeAlias = Literal["flatten", "own"]


def order_key(call: ToolCall) -> tuple[int, int, int, str]:
    """Executed calls by start time, unexecuted ones by the end of their emitting step."""
    if call.executed and call.start_ns is not None:
        when = call.start_ns
    elif call.step_end_ns is not None:
        when = call.step_end_ns
    else:
        when = call.start_ns or 0
    return (
        when,
        call.step if call.step is not None else -1,
        call.part if call.part is not None else -1,
        call.span_id or "",
    )


def _in_view_order(calls: tuple[ToolCall, ...]) -> bool:
    prev = None
    for i, call in enumerate(calls):
        if call.index != i or call.depth != 0:
            return False
        key = order_key(call)
        if prev is not None and key < prev:
            return False
        prev = key
    return True


def _collect(run: Run, scope: Scope, out: list[ToolCall]) -> None:
    """Append the calls of ``run`` (and with ``flatten`` of its nested runs, depth first, each call's
    ``depth`` counted from ``run``) to ``out``. Iterative: no recursion whatever the nesting."""
    stack: list[tuple[Run, int]] = [(run, 0)]
    while stack:
        current, depth = stack.pop()
        for call in current.calls:
            out.append(call if depth == 0 else dataclasses.replace(call, depth=depth + call.depth))
        if scope == "flatten":
            stack.extend((child, depth + 1) for child in reversed(current.children))


def view(
    run: Run, calls_source: CallsSource = "auto", scope: Scope = "flatten", *, framework: bool = False
) -> tuple[ToolCall, ...]:
    """The run's calls for a scorer, re-indexed from 0 in §1.3 order.

    Calls of kind ``framework`` (a framework's own control tools: smolagents ``final_answer``, DSPy ``finish``)
    are left out unless ``framework`` is true: scorers judge the tools of the user's agent.

    ``auto``: every call (executed spans merged with the model's tool_call parts);
    ``selected``: calls the model emitted as tool_call parts (executed or not), with the
    arguments the model emitted; ``executed``: calls that have a tool span.
    ``flatten`` includes nested agents' calls (``depth`` ≥ 1); ``own`` only this run's.
    """
    plain = framework or all(c.kind != "framework" for c in run.calls)
    if plain and (not run.children or scope == "own") and calls_source == "auto" and _in_view_order(run.calls):
        return run.calls  # the builder already stores own calls in view order, indexed from 0
    calls: list[ToolCall] = []
    _collect(run, scope, calls)
    if not framework:
        calls = [c for c in calls if c.kind != "framework"]
    if calls_source == "selected":
        calls = [
            dataclasses.replace(c, args=c.requested_args)
            if c.requested_args is not ABSENT and c.requested_args is not c.args
            else c
            for c in calls
            if c.step is not None
        ]
    elif calls_source == "executed":
        calls = [c for c in calls if c.executed]
    calls.sort(key=order_key)
    return tuple(dataclasses.replace(c, index=i) if c.index != i else c for i, c in enumerate(calls))
