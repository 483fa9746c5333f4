"""Small builders of :class:`~monitor.trajectory.model.Run` objects for scorer tests.

Every call is both selected (a tool_call part of an LlmStep) and executed (a tool span), with
monotonically increasing times, so the ``auto``, ``selected`` and ``executed`` views agree.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from monitor.scoring.expectation import ExpectedCall
from monitor.trajectory.model import (
    ABSENT,
    LlmStep,
    Message,
    Run,
    TextPart,
    ToolCall,
    ToolCallPart,
)

CallSpec = tuple[str, Any] | str
"""``(name, args)`` or a bare name (args ``{}``); args may be ``ABSENT`` or ``Malformed``."""

_STEP_NS = 1_000_000


def _split(spec: CallSpec) -> tuple[str, Any]:
    if isinstance(spec, str):
        return spec, {}
    return spec[0], spec[1]


def run_with_steps(
    steps: Sequence[Sequence[CallSpec]],
    *,
    final_response: str | None = "done",
    user_text: str | None = "hello",
    final_step: bool = True,
    results: Sequence[Any] | None = None,
    trace_id: str = "t" * 32,
    run_id: str = "r" * 16,
    kinds: Sequence[str] | None = None,
    start_ns: int = 0,
) -> Run:
    """A run whose k-th LlmStep emits the calls of ``steps[k]`` (parallel calls share a step).

    ``final_step`` adds a last step without calls carrying ``final_response`` (the answer step).
    ``results`` gives each call's result, in call order (default ABSENT).
    """
    llm_steps: list[LlmStep] = []
    calls: list[ToolCall] = []
    t = start_ns
    n = 0
    for s, group in enumerate(steps):
        parts: list[ToolCallPart] = []
        step_start, step_end = t, t + _STEP_NS // 2
        for p, spec in enumerate(group):
            name, args = _split(spec)
            call_id = f"call_{n}"
            parts.append(ToolCallPart(name=name, id=call_id, arguments=args))
            start = step_end + (p + 1) * 1000
            calls.append(
                ToolCall(
                    index=n,
                    name=name,
                    call_id=call_id,
                    args=args,
                    requested_args=args,
                    result=results[n] if results is not None else ABSENT,
                    start_ns=start,
                    end_ns=start + 500,
                    executed=True,
                    step=s,
                    part=p,
                    step_end_ns=step_end,
                    span_id=f"{n:016x}",
                    kind=(kinds[n] if kinds is not None else "function"),  # type: ignore[arg-type]
                )
            )
            n += 1
        llm_steps.append(LlmStep(index=s, tool_calls=tuple(parts), start_ns=step_start, end_ns=step_end))
        t += _STEP_NS
    if final_step and final_response is not None:
        llm_steps.append(LlmStep(index=len(llm_steps), text=final_response, start_ns=t, end_ns=t + _STEP_NS // 2))
        t += _STEP_NS
    user_input = (Message(role="user", parts=(TextPart(user_text),)),) if user_text is not None else None
    return Run(
        trace_id=trace_id,
        run_id=run_id,
        agent="agent",
        user_input=user_input,
        final_response=final_response,
        steps=tuple(llm_steps),
        calls=tuple(calls),
        start_ns=start_ns,
        end_ns=t,
    )


def run_with_calls(calls: Sequence[CallSpec], **kwargs: Any) -> Run:
    """A run with one LlmStep per call (sequential calls), then the answer step."""
    return run_with_steps([[c] for c in calls], **kwargs)


def expected(calls: Sequence[CallSpec | tuple[str]]) -> tuple[ExpectedCall, ...]:
    """Expected calls from ``(name, args)`` pairs; a 1-tuple or bare name leaves args unspecified."""
    out: list[ExpectedCall] = []
    for spec in calls:
        if isinstance(spec, str):
            out.append(ExpectedCall(name=spec))
        elif len(spec) == 1:
            out.append(ExpectedCall(name=spec[0]))
        else:
            out.append(ExpectedCall(name=spec[0], args=spec[1]))
    return tuple(out)
