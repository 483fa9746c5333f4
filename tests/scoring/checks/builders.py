"""Builders of :class:`Run` objects for the §3 check tests (model objects constructed directly).

    run = make_run([c("get_weather", {"city": "Hanoi"}), c("search", error="Timeout")],
                   tools=[tool("get_weather", WEATHER_SCHEMA)])

Calls are executed tool spans by default, 10 ms apart, each ``duration_ms`` long; ``step`` links
a call to ``steps[step]`` (an LlmStep with the given ``tools_offered``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from monitor.trajectory.model import (
    ABSENT,
    LlmStep,
    Message,
    Run,
    TextPart,
    ToolCall,
    ToolDef,
    ToolError,
)

MS = 1_000_000


@dataclass(frozen=True)
class C:
    """A call spec for :func:`make_run`."""

    name: str
    args: Any = None
    error: str | None = None
    message: str = ""
    result: Any = ABSENT
    executed: bool = True
    duration_ms: float = 1.0
    step: int | None = None
    call_id: str | None = None
    kind: str = "function"


def c(name: str, args: Any = None, **kw: Any) -> C:
    """A call; ``args`` None means ``{}`` (pass ``ABSENT`` / ``Malformed(...)`` explicitly)."""
    return C(name, {} if args is None else args, **kw)


def tool(name: str, schema: Any = None, description: str | None = None) -> ToolDef:
    return ToolDef(name=name, description=description, input_schema=schema, source="test")


def make_run(
    calls: Sequence[C | str] = (),
    *,
    tools: Sequence[ToolDef] | None = None,
    steps: Sequence[Sequence[ToolDef] | None] | None = None,
    children: Sequence[Run] = (),
    agent: str | None = "agent",
    user_text: str | None = "hi",
    run_ms: float | None = None,
    attributes: Sequence[tuple[str, str]] = (),
    depth: int = 0,
    run_id: str = "r" * 16,
    start_ns: int = 0,
) -> Run:
    out: list[ToolCall] = []
    for i, spec in enumerate(calls):
        s = C(spec, {}) if isinstance(spec, str) else spec
        start = start_ns + (i + 1) * 10 * MS
        out.append(
            ToolCall(
                index=i,
                name=s.name,
                call_id=s.call_id or f"{run_id}-{i}",
                args=s.args,
                requested_args=s.args,
                result=s.result,
                error=ToolError(s.error, s.message) if s.error else None,
                start_ns=start if s.executed else None,
                end_ns=start + int(s.duration_ms * MS) if s.executed else None,
                executed=s.executed,
                step=s.step,
                part=0 if s.step is not None else None,
                step_end_ns=start - MS,
                span_id=f"{run_id}{i:04x}",
                agent=agent,
                kind=s.kind,  # type: ignore[arg-type]
            )
        )
    llm_steps = tuple(
        LlmStep(index=i, tools_offered=tuple(t) if t is not None else None) for i, t in enumerate(steps or ())
    )
    total_ms = run_ms if run_ms is not None else (len(out) + 1) * 10.0
    return Run(
        trace_id="a" * 32,
        run_id=run_id,
        agent=agent,
        user_input=(Message("user", (TextPart(user_text),)),) if user_text is not None else None,
        final_response="done",
        tools_offered=tuple(tools) if tools is not None else None,
        steps=llm_steps,
        calls=tuple(out),
        children=tuple(children),
        start_ns=start_ns,
        end_ns=start_ns + int(total_ms * MS),
        attributes=tuple(attributes),
    )
