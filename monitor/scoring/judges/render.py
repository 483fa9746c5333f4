"""Dynamic blocks shared by the judges (SCORING.md §4.0): user input, trajectory, final response, and the
Ragas ``pretty_repr`` workflow (§4.3, §4.4). Deterministic: the same run renders to the same text."""

from __future__ import annotations

from collections.abc import Sequence

from monitor.scoring.expectation import ExpectedCall
from monitor.scoring.judges.protocol import Block, render_call, truncate, value_text
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import ABSENT, Run, ToolCall
from monitor.trajectory.view import view

__all__ = [
    "final_response_block",
    "names_block",
    "pretty_repr",
    "reference_block",
    "step_text",
    "trajectory_block",
    "user_input_block",
]


def user_input_block(runs: Sequence[Run], limit: int) -> Block:
    """``<user_input>``: the current request; with several turns, every turn as ``Human:``/``AI:`` lines."""
    if len(runs) == 1:
        return Block.text("user_input", truncate(runs[0].user_text or "", limit))
    lines: list[str] = []
    for run in runs:
        lines.append(f"Human: {truncate(run.user_text or '', limit)}")
        if run is not runs[-1] and run.final_response:
            lines.append(f"AI: {truncate(run.final_response, limit)}")
    return Block("user_input", tuple(lines))


def final_response_block(run: Run, limit: int) -> Block:
    text = run.final_response
    return Block.text("final_response", truncate(text, limit) if text else "(no final response)")


def trajectory_block(calls: Sequence[ToolCall], limit: int, tag: str = "trajectory") -> Block:
    """One line per call ``[i] name JCS(args) -> result | ERROR type: message`` (elidable)."""
    if not calls:
        return Block.text(tag, "(no tool calls)")
    return Block(tag, tuple(render_call(c, limit) for c in calls), elidable=True)


def reference_block(expected: Sequence[ExpectedCall], limit: int) -> Block:
    """A reference trajectory, rendered like the actual one (without results)."""
    if not expected:
        return Block.text("reference_trajectory", "(no tool calls)")
    lines = tuple(f"[{i}] {e.name} {value_text(e.args, limit)}" for i, e in enumerate(expected))
    return Block("reference_trajectory", lines, elidable=True)


def step_text(run: Run, call: ToolCall) -> str | None:
    """The assistant text of the step that emitted ``call`` (DeepEval's ``reasoning``): own calls only."""
    if call.depth != 0 or call.step is None:
        return None
    for step in run.steps:
        if step.index == call.step:
            return step.text or None
    return None


def _tool_output(call: ToolCall, limit: int) -> str:
    error = call_error(call)
    if error is not None:
        return f"ERROR {error.type}: {truncate(error.message, limit)}"
    return value_text(call.result, limit)


def pretty_repr(runs: Sequence[Run], limit: int) -> tuple[str, ...]:
    """Ragas' ``pretty_repr`` of the workflow: ``Human: …``, ``AI: …`` with ``Tools:`` then ``  name: args``
    lines, ``ToolOutput: …``; one group per model step that called tools, the final answer last."""
    lines: list[str] = []
    for run in runs:
        lines.append(f"Human: {truncate(run.user_text or '', limit)}")
        calls = view(run, "auto", "flatten")
        groups: list[list[ToolCall]] = []
        for call in calls:
            key = (call.depth, call.step)
            if groups and call.step is not None and (groups[-1][0].depth, groups[-1][0].step) == key:
                groups[-1].append(call)
            else:
                groups.append([call])
        for group in groups:
            text = step_text(run, group[0])
            lines.append(f"AI: {truncate(text, limit)}" if text else "AI:")
            lines.append("Tools:")
            for call in group:
                args = "<not captured>" if call.args is ABSENT else value_text(call.args, limit)
                lines.append(f"  {call.name}: {args}")
            for call in group:
                lines.append(f"ToolOutput: {_tool_output(call, limit)}")
        if run.final_response:
            lines.append(f"AI: {truncate(run.final_response, limit)}")
    return tuple(lines)


def names_block(calls: Sequence[ToolCall]) -> Block:
    """§4.1: the called tool names in view order, duplicates kept, or ``None``."""
    if not calls:
        return Block.text("called_tools", "None")
    return Block("called_tools", tuple(f"[{c.index}] {c.name}" for c in calls), elidable=True)
