"""Runs to and from JSON, with the field names of SCORING.md §1 (the one vocabulary for runs).

``ABSENT`` content is written as the absence of the key; ``Malformed`` arguments as
``{"args_raw": "<text>"}`` with no ``args``. :func:`run_from_json` reads what :func:`run_to_json`
writes (and hand-written recorded trajectories in datasets), so the two round-trip.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from monitor.trajectory.model import (
    ABSENT,
    Captured,
    LlmStep,
    Malformed,
    Message,
    OtherPart,
    Part,
    Run,
    TextPart,
    ToolCall,
    ToolCallPart,
    ToolDef,
    ToolError,
    ToolResultPart,
    Usage,
)


def _put(out: dict[str, Any], key: str, value: Captured) -> None:
    if value is ABSENT:
        return
    if isinstance(value, Malformed):
        out[key + "_raw"] = value.raw
        return
    out[key] = value


def part_to_json(part: Part) -> dict[str, Any]:
    if isinstance(part, TextPart):
        return {"type": "text", "content": part.content}
    if isinstance(part, ToolCallPart):
        out: dict[str, Any] = {"type": "tool_call", "name": part.name, "id": part.id}
        _put(out, "arguments", part.arguments)
        return out
    if isinstance(part, ToolResultPart):
        out = {"type": "tool_call_response", "id": part.id, "name": part.name}
        _put(out, "response", part.response)
        return out
    return {"type": part.type, "content": part.content}


def message_to_json(message: Message) -> dict[str, Any]:
    return {"role": message.role, "parts": [part_to_json(p) for p in message.parts]}


def tool_def_to_json(tool: ToolDef) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "input_schema": tool.input_schema,
        "source": tool.source,
    }


def usage_to_json(usage: Usage) -> dict[str, Any]:
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
    }


def call_to_json(call: ToolCall) -> dict[str, Any]:
    out: dict[str, Any] = {
        "index": call.index,
        "call_id": call.call_id,
        "name": call.name,
    }
    _put(out, "args", call.args)
    _put(out, "result", call.result)
    out.update(
        {
            "error": {"type": call.error.type, "message": call.error.message} if call.error else None,
            "start_ns": call.start_ns,
            "end_ns": call.end_ns,
            "duration_ms": call.duration_ms,
            "executed": call.executed,
            "step": call.step,
            "part": call.part,
            "agent": call.agent,
            "depth": call.depth,
            "kind": call.kind,
        }
    )
    return out


def step_to_json(step: LlmStep) -> dict[str, Any]:
    return {
        "index": step.index,
        "model": step.model,
        "provider": step.provider,
        "usage": usage_to_json(step.usage),
        "tools_offered": None if step.tools_offered is None else [t.name for t in step.tools_offered],
        "tool_calls": [part_to_json(p) for p in step.tool_calls],
        "text": step.text,
        "start_ns": step.start_ns,
        "end_ns": step.end_ns,
    }


def run_to_json(run: Run) -> dict[str, Any]:
    """One run (with nested runs) as a JSON-ready dict."""
    return {
        "trace_id": run.trace_id,
        "run_id": run.run_id,
        "agent": run.agent,
        "conversation_id": run.conversation_id,
        "parent_run_id": run.parent_run_id,
        "user_input": None if run.user_input is None else [message_to_json(m) for m in run.user_input],
        "user_text": run.user_text,
        "final_response": run.final_response,
        "tools_offered": None if run.tools_offered is None else [tool_def_to_json(t) for t in run.tools_offered],
        "steps": [step_to_json(s) for s in run.steps],
        "calls": [call_to_json(c) for c in run.calls],
        "children": [run_to_json(c) for c in run.children],
        "start_ns": run.start_ns,
        "end_ns": run.end_ns,
        "duration_ms": run.duration_ms,
        "status": run.status,
        "model": run.model,
        "usage": usage_to_json(run.usage),
        "content_captured": run.content_captured,
        "forced": run.forced,
        "conventions": list(run.conventions),
    }


# --------------------------------------------------------------------------- reading


def _captured(obj: Mapping[str, Any], key: str) -> Captured:
    if key in obj:
        return obj[key]
    raw = obj.get(key + "_raw")
    if isinstance(raw, str):
        return Malformed(raw)
    return ABSENT


def part_from_json(obj: Mapping[str, Any]) -> Part:
    ptype = obj.get("type")
    if ptype == "text":
        return TextPart(str(obj.get("content", "")))
    if ptype == "tool_call":
        return ToolCallPart(str(obj["name"]), obj.get("id"), _captured(obj, "arguments"))
    if ptype == "tool_call_response":
        return ToolResultPart(obj.get("id"), _captured(obj, "response"), obj.get("name"))
    return OtherPart(str(ptype), obj.get("content"))


def message_from_json(obj: Mapping[str, Any]) -> Message:
    return Message(str(obj.get("role", "user")), tuple(part_from_json(p) for p in obj.get("parts", ())))


def _usage(obj: Mapping[str, Any] | None) -> Usage:
    if not obj:
        return Usage()
    return Usage(
        obj.get("input_tokens"),
        obj.get("output_tokens"),
        obj.get("cache_read_input_tokens"),
        obj.get("cache_creation_input_tokens"),
    )


def tool_def_from_json(obj: Mapping[str, Any]) -> ToolDef:
    return ToolDef(str(obj["name"]), obj.get("description"), obj.get("input_schema"), str(obj.get("source", "")))


def call_from_json(obj: Mapping[str, Any], index: int = 0) -> ToolCall:
    error = obj.get("error")
    return ToolCall(
        index=int(obj.get("index", index)),
        name=str(obj["name"]),
        call_id=obj.get("call_id"),
        args=_captured(obj, "args"),
        result=_captured(obj, "result"),
        error=ToolError(str(error.get("type", "error")), str(error.get("message", ""))) if error else None,
        start_ns=obj.get("start_ns"),
        end_ns=obj.get("end_ns"),
        executed=bool(obj.get("executed", obj.get("start_ns") is not None)),
        step=obj.get("step"),
        part=obj.get("part"),
        agent=obj.get("agent"),
        depth=int(obj.get("depth", 0)),
        kind=obj.get("kind", "function"),
    )


def run_from_json(obj: Mapping[str, Any]) -> Run:
    """A Run from :func:`run_to_json` output or a hand-written recorded trajectory."""
    tools = obj.get("tools_offered")
    user_input = obj.get("user_input")
    if isinstance(user_input, str):
        messages: tuple[Message, ...] | None = (Message("user", (TextPart(user_input),)),)
    elif user_input is None:
        messages = None
    else:
        messages = tuple(message_from_json(m) for m in user_input)
    steps = tuple(
        LlmStep(
            index=int(s.get("index", i)),
            model=s.get("model"),
            provider=s.get("provider"),
            usage=_usage(s.get("usage")),
            tool_calls=tuple(part_from_json(p) for p in s.get("tool_calls", ()) if p.get("type") == "tool_call"),  # type: ignore[misc]
            text=s.get("text"),
            start_ns=s.get("start_ns"),
            end_ns=s.get("end_ns"),
        )
        for i, s in enumerate(obj.get("steps", ()))
    )
    return Run(
        trace_id=str(obj.get("trace_id", "")),
        run_id=str(obj.get("run_id", "")),
        agent=obj.get("agent"),
        conversation_id=obj.get("conversation_id"),
        parent_run_id=obj.get("parent_run_id"),
        user_input=messages,
        final_response=obj.get("final_response"),
        tools_offered=None if tools is None else tuple(tool_def_from_json(t) for t in tools),
        steps=steps,
        calls=tuple(call_from_json(c, i) for i, c in enumerate(obj.get("calls", ()))),
        children=tuple(run_from_json(c) for c in obj.get("children", ())),
        start_ns=obj.get("start_ns"),
        end_ns=obj.get("end_ns"),
        status=obj.get("status", "ok"),
        model=obj.get("model"),
        usage=_usage(obj.get("usage")),
        content_captured=bool(obj.get("content_captured", True)),
        forced=obj.get("forced"),
        conventions=tuple(obj.get("conventions", ())),
    )
