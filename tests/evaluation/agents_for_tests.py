"""Agents for the in-process runner tests, importable as ``tests.evaluation.agents_for_tests:<name>``.

Every tool records the arguments it actually received in :data:`TOOL_LOG` (ground truth that does not come from
spans), and every agent records the keyword arguments the runner passed in :data:`CALLS`.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from pydantic_ai import Agent, RunContext
from pydantic_ai.capabilities.instrumentation import Instrumentation
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.instrumented import InstrumentationSettings
from pydantic_ai.models.test import TestModel

TOOL_LOG: list[tuple[str, dict[str, Any]]] = []
CALLS: list[dict[str, Any]] = []


def reset() -> None:
    TOOL_LOG.clear()
    CALLS.clear()


def _instrumented() -> dict[str, Any]:
    """pydantic-ai's Instrumentation capability on the *global* tracer provider (no provider given)."""
    return {"capabilities": [Instrumentation(settings=InstrumentationSettings(include_content=True))]}


# --------------------------------------------------------------------------- pydantic-ai, FunctionModel


def _weather_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A new user prompt → get_weather for the city it names (and get_time when it asks for the time);
    tool returns → a text answer."""
    prompts = [
        part.content
        for m in messages
        for part in getattr(m, "parts", ())
        if getattr(part, "part_kind", "") == "user-prompt" and isinstance(part.content, str)
    ]
    prompt = prompts[-1] if prompts else ""
    city = "Hanoi" if "Hanoi" in prompt else "Paris"
    new_prompt = any(getattr(p, "part_kind", "") == "user-prompt" for p in getattr(messages[-1], "parts", ()))
    if new_prompt:
        calls = [ToolCallPart("get_weather", {"city": city})]
        if "time" in prompt:
            calls.append(ToolCallPart("get_time", {"tz": "ICT"}))
        return ModelResponse(parts=calls)
    return ModelResponse(parts=[TextPart(f"It is sunny in {city}.")])


weather_agent = Agent(FunctionModel(_weather_model), name="weather", **_instrumented())


@weather_agent.tool_plain
def get_weather(city: str) -> dict[str, Any]:
    """Current weather of a city."""
    TOOL_LOG.append(("get_weather", {"city": city}))
    return {"city": city, "sky": "sunny"}


@weather_agent.tool_plain
def get_time(tz: str) -> str:
    """Current time in a time zone."""
    TOOL_LOG.append(("get_time", {"tz": tz}))
    return "12:00"


def weather(input: str, *, case_id: str, turn: int, history: list[dict[str, str]]) -> str:
    """The documented calling convention, sync, keeping the conversation in pydantic-ai's message history."""
    CALLS.append({"input": input, "case_id": case_id, "turn": turn, "history": history})
    state = _HISTORIES.setdefault(case_id, [])
    result = weather_agent.run_sync(input, message_history=state[-1] if state else None)
    state.append(result.all_messages())
    return str(result.output)


_HISTORIES: dict[str, list[Any]] = {}


async def weather_async(input: str, *, turn: int) -> str:
    """An async callable declaring only some of the keyword arguments."""
    CALLS.append({"input": input, "turn": turn})
    result = await weather_agent.run(input)
    return str(result.output)


def text_only(input: str) -> str:
    """A callable taking only the text."""
    CALLS.append({"input": input})
    return str(weather_agent.run_sync(input).output)


def everything(input: str, **kwargs: Any) -> None:
    """``**kwargs``: receives every keyword argument, returns nothing (history falls back to the run)."""
    CALLS.append({"input": input, **kwargs})
    weather_agent.run_sync(input)


# --------------------------------------------------------------------------- pydantic-ai, TestModel and nesting


planner = Agent(TestModel(call_tools=["find_flights"]), name="travel_planner", **_instrumented())


@planner.tool_plain
def find_flights(origin: str, destination: str) -> list[str]:
    """Find flights."""
    TOOL_LOG.append(("find_flights", {"origin": origin, "destination": destination}))
    return ["TP123"]


def plan_trip(input: str) -> str:
    return str(planner.run_sync(input).output)


def _router_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = sum(1 for m in messages if m.kind == "response")
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("ask_expert", {"question": "What is the capital of France?"})])
    return ModelResponse(parts=[TextPart("The expert says: Paris.")])


def _expert_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    step = sum(1 for m in messages if m.kind == "response")
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("lookup_fact", {"topic": "France"})])
    return ModelResponse(parts=[TextPart("Paris")])


expert = Agent(FunctionModel(_expert_model), name="geography_expert", **_instrumented())
router = Agent(FunctionModel(_router_model), name="router", **_instrumented())


@expert.tool_plain
def lookup_fact(topic: str) -> str:
    """Look a fact up."""
    TOOL_LOG.append(("lookup_fact", {"topic": topic}))
    return "capital: Paris"


@router.tool
async def ask_expert(ctx: RunContext[None], question: str) -> str:
    """Ask the geography expert."""
    TOOL_LOG.append(("ask_expert", {"question": question}))
    result = await expert.run(question)
    return str(result.output)


def delegate(input: str) -> str:
    return str(router.run_sync(input).output)


def two_agents(input: str) -> str:
    """Two top-level agent runs in one turn: ambiguous."""
    planner.run_sync(input)
    return str(weather_agent.run_sync(input).output)


def lost_context(input: str) -> str:
    """Runs the agent on a thread with an empty OTel context: its spans are in a trace of their own."""
    out: list[str] = []

    def work() -> None:
        token = otel_context.attach(otel_context.Context())
        try:
            out.append(str(weather_agent.run_sync(input).output))
        finally:
            otel_context.detach(token)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    return out[0]


# --------------------------------------------------------------------------- plain OTel API agent

_tracer = trace.get_tracer("plain_agent")


def plain_otel(input: str, *, history: list[dict[str, str]]) -> str:
    """An agent written against the OTel API only: invoke_agent → chat, execute_tool, chat (GenAI semconv)."""
    args = {"city": "Hanoi"}
    with _tracer.start_as_current_span(
        "invoke_agent plain",
        attributes={
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": "plain",
            "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": input}]}]),
        },
    ) as agent_span:
        with _tracer.start_as_current_span(
            "chat fake-model",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "fake-model",
                "gen_ai.usage.input_tokens": 11,
                "gen_ai.usage.output_tokens": 7,
                "gen_ai.output.messages": json.dumps(
                    [
                        {
                            "role": "assistant",
                            "parts": [{"type": "tool_call", "id": "call_1", "name": "get_weather", "arguments": args}],
                        }
                    ]
                ),
            },
        ):
            pass
        with _tracer.start_as_current_span(
            "execute_tool get_weather",
            attributes={
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "get_weather",
                "gen_ai.tool.call.id": "call_1",
                "gen_ai.tool.call.arguments": json.dumps(args),
                "gen_ai.tool.call.result": json.dumps({"sky": "rain"}),
            },
        ):
            TOOL_LOG.append(("get_weather", args))
        answer = f"Rain in Hanoi ({len(history)} earlier messages)."
        with _tracer.start_as_current_span(
            "chat fake-model",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "fake-model",
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
                ),
            },
        ):
            pass
        agent_span.set_attribute(
            "gen_ai.output.messages",
            json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]),
        )
    return answer


def plain_no_agent_span(input: str) -> str:
    """Model and tool spans without any agent span: the runner's root span becomes the run's root."""
    with _tracer.start_as_current_span(
        "chat fake-model",
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "fake-model",
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [{"type": "tool_call", "id": "c1", "name": "noop", "arguments": {}}]}]
            ),
        },
    ):
        pass
    with _tracer.start_as_current_span(
        "execute_tool noop",
        attributes={"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "noop", "gen_ai.tool.call.id": "c1"},
    ):
        pass
    return "done"


def no_spans(input: str) -> str:
    return "nothing traced"


def explode(input: str) -> str:
    raise ValueError("the agent broke")


def sleepy(input: str) -> str:
    time.sleep(3)
    return "late"


def sleepy_then_agent(input: str) -> str:
    """Times out, then runs an agent on its abandoned thread."""
    time.sleep(2.0)
    return str(weather_agent.run_sync(input).output)


def no_spans_slow(input: str) -> str:
    time.sleep(1.5)
    return "nothing traced"


async def sleepy_async(input: str) -> str:
    await asyncio.sleep(30)
    return "late"


def env_probe(input: str) -> dict[str, str | None]:
    """Returns the content-capture switches as the agent sees them (and runs the weather agent)."""
    import os

    weather_agent.run_sync(input)
    keys = (
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "TRACELOOP_TRACE_CONTENT",
        "OTEL_SEMCONV_STABILITY_OPT_IN",
    )
    seen = {k: os.environ.get(k) for k in keys}
    CALLS.append(seen)
    return seen


not_callable = 42
