"""Simulated agents for the demo: real OpenTelemetry SDK spans in several conventions, with the
failure modes the monitor exists to find.

Nothing here calls a model. Each simulated run picks a user request and a *behaviour* (correct, wrong
tool, hallucinated parameter, missing parameter, wrong type, skipped tool, loop, slow tool, tool error,
hallucinated tool name) and records the spans an instrumented agent would emit for it, in one of the
conventions real frameworks use:

* ``genai``         OTel GenAI semconv ≥ 1.37 with content (invoke_agent / chat / execute_tool);
* ``genai_nocontent`` the same without content capture (the default of most instrumentations);
* ``openinference`` OpenInference AGENT / LLM / TOOL spans with flattened messages;
* ``openllmetry``   Traceloop workflow / tool spans with legacy ``gen_ai.prompt.N`` attributes;
* ``strands``       strands-agents style, tool content in span events.

Span timestamps are synthetic (explicit start/end times), so a run's latency is part of the behaviour,
not of the machine's speed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry.trace import SpanKind, Status, StatusCode, Tracer

WEATHER_TOOLS: Final[list[dict[str, Any]]] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "units": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"],
            "additionalProperties": False,
        },
    },
    {
        "name": "get_forecast",
        "description": "Daily forecast for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer", "minimum": 1, "maximum": 14}},
            "required": ["city", "days"],
        },
    },
]
TRAVEL_TOOLS: Final[list[dict[str, Any]]] = [
    {
        "name": "search_flights",
        "description": "Find flights between two airports on a date.",
        "input_schema": {
            "type": "object",
            "properties": {
                "origin": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "destination": {"type": "string", "pattern": "^[A-Z]{3}$"},
                "date": {"type": "string"},
            },
            "required": ["origin", "destination", "date"],
        },
    },
    {
        "name": "book_flight",
        "description": "Book a flight by its number. Only after the user confirmed.",
        "input_schema": {
            "type": "object",
            "properties": {"flight": {"type": "string"}, "passengers": {"type": "integer", "minimum": 1}},
            "required": ["flight", "passengers"],
        },
    },
    {
        "name": "delete_booking",
        "description": "Cancel a booking.",
        "input_schema": {
            "type": "object",
            "properties": {"booking_id": {"type": "string"}},
            "required": ["booking_id"],
        },
    },
]
CITIES: Final = ["Paris", "Oslo", "Lima", "Tokyo", "Hanoi", "Berlin", "Nairobi", "Quito"]
CONVENTIONS: Final = ("genai", "genai_nocontent", "openinference", "openllmetry", "strands")
BEHAVIOURS: Final = {
    "correct": 50,
    "wrong_tool": 8,
    "hallucinated_parameter": 6,
    "missing_parameter": 6,
    "wrong_type": 4,
    "skipped_tool": 6,
    "loop": 4,
    "slow_tool": 6,
    "tool_error": 6,
    "hallucinated_tool": 4,
}


@dataclass
class SimCall:
    name: str
    args: dict[str, Any]
    result: Any
    duration_ms: float = 40.0
    error: str | None = None


@dataclass
class SimRun:
    """One simulated agent run: what the user asked, what the agent did, and how it answered."""

    agent: str
    user_text: str
    steps: list[list[SimCall]]  # tool calls per model step (parallel calls share a step)
    answer: str
    tools: list[dict[str, Any]]
    behaviour: str
    convention: str
    conversation_id: str | None = None
    model: str = "claude-sim-1"
    attributes: dict[str, str] = field(default_factory=dict)


def _weather(city: str) -> dict[str, Any]:
    return {"city": city, "temperature": 18, "condition": "cloudy"}


def plan_run(rng: random.Random, convention: str | None = None) -> SimRun:
    """A random run: agent, request and behaviour drawn with the demo's failure mix."""
    behaviour = rng.choices(list(BEHAVIOURS), weights=list(BEHAVIOURS.values()))[0]
    conv = convention or rng.choice(CONVENTIONS)
    city = rng.choice(CITIES)
    if rng.random() < 0.6:
        return _weather_run(rng, behaviour, conv, city)
    return _travel_run(rng, behaviour, conv, city)


def _weather_run(rng: random.Random, behaviour: str, conv: str, city: str) -> SimRun:
    days = rng.randint(2, 7)
    user = f"What's the {days}-day forecast for {city}?"
    steps: list[list[SimCall]]
    answer = f"{city}: mostly cloudy for the next {days} days."
    good = SimCall(
        "get_forecast", {"city": city, "days": days}, {"city": city, "days": [{"day": i} for i in range(days)]}
    )
    if behaviour == "correct":
        steps = [[good]]
    elif behaviour == "wrong_tool":
        steps = [[SimCall("get_weather", {"city": city}, _weather(city))]]
        answer = f"It is 18°C in {city} right now."
    elif behaviour == "hallucinated_parameter":
        steps = [[SimCall("get_forecast", {"city": city, "days": days, "include_pollen": True}, good.result)]]
    elif behaviour == "missing_parameter":
        steps = [[SimCall("get_forecast", {"city": city}, {"error": "days is required"})]]
    elif behaviour == "wrong_type":
        steps = [[SimCall("get_forecast", {"city": city, "days": f"{days} days"}, {"error": "days must be int"})]]
    elif behaviour == "skipped_tool":
        steps = []
        answer = f"{city} usually has mild weather this time of year."
    elif behaviour == "loop":
        steps = [[SimCall("get_forecast", {"city": city, "days": days}, good.result)] for _ in range(4)]
    elif behaviour == "slow_tool":
        steps = [
            [SimCall("get_forecast", {"city": city, "days": days}, good.result, duration_ms=rng.uniform(3000, 9000))]
        ]
    elif behaviour == "tool_error":
        steps = [
            [SimCall("get_forecast", {"city": city, "days": days}, None, error="UpstreamTimeout")],
            [good],
        ]
    else:  # hallucinated_tool
        steps = [[SimCall("get_weather_forecast", {"city": city, "days": days}, None, error="ToolNotFound")]]
        answer = "Sorry, I could not get the forecast."
    return SimRun("weather", user, steps, answer, WEATHER_TOOLS, behaviour, conv, f"conv-{rng.randrange(10**6)}")


def _travel_run(rng: random.Random, behaviour: str, conv: str, city: str) -> SimRun:
    origin, destination = rng.sample(["CDG", "BER", "LIM", "HND", "OSL", "NBO"], 2)
    date = f"2026-12-{rng.randint(1, 28):02d}"
    user = f"Find me a flight from {origin} to {destination} on {date}."
    found = {"flights": [{"flight": f"XX{rng.randint(100, 999)}", "price_eur": rng.randint(80, 400)}]}
    search = SimCall("search_flights", {"origin": origin, "destination": destination, "date": date}, found)
    answer = f"Flight {found['flights'][0]['flight']} for {found['flights'][0]['price_eur']} EUR."
    steps: list[list[SimCall]]
    if behaviour == "correct":
        steps = [[search]]
    elif behaviour == "wrong_tool":
        steps = [[SimCall("book_flight", {"flight": "XX123", "passengers": 1}, {"booking_id": "B-1"})]]
        answer = "Booked XX123."
    elif behaviour == "hallucinated_parameter":
        steps = [[SimCall("search_flights", {**search.args, "cabin": "business"}, found)]]
    elif behaviour == "missing_parameter":
        steps = [
            [SimCall("search_flights", {"origin": origin, "destination": destination}, {"error": "date required"})]
        ]
    elif behaviour == "wrong_type":
        steps = [[SimCall("search_flights", {**search.args, "origin": city}, {"error": "bad airport code"})]]
    elif behaviour == "skipped_tool":
        steps = []
        answer = "Flights between those cities usually cost around 200 EUR."
    elif behaviour == "loop":
        steps = [[search] for _ in range(3)] + [[SimCall("search_flights", {**search.args, "date": date}, found)]]
    elif behaviour == "slow_tool":
        steps = [[SimCall("search_flights", search.args, found, duration_ms=rng.uniform(6000, 15000))]]
    elif behaviour == "tool_error":
        steps = [[SimCall("search_flights", search.args, None, error="AirlineAPIError")]]
        answer = "The flight search is unavailable right now."
    else:
        steps = [[SimCall("delete_booking", {"booking_id": "B-7"}, {"deleted": True})]]
        answer = "Done."
    return SimRun("travel", user, steps, answer, TRAVEL_TOOLS, behaviour, conv)


# --------------------------------------------------------------------------- emitting spans


class _Clock:
    """Synthetic nanosecond clock for span times."""

    def __init__(self, start_ns: int) -> None:
        self.now = start_ns

    def advance(self, ms: float) -> int:
        self.now += int(ms * 1e6)
        return self.now


def _j(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def emit(tracer: Tracer, run: SimRun, start_ns: int) -> None:
    """Record ``run`` as spans on ``tracer`` in the run's convention."""
    clock = _Clock(start_ns)
    conv = run.convention
    content = conv != "genai_nocontent"
    root_attrs: dict[str, Any] = dict(run.attributes)
    if conv == "openinference":
        root_attrs.update({"openinference.span.kind": "AGENT", "agent.name": run.agent, "input.value": run.user_text})
        if run.conversation_id:
            root_attrs["session.id"] = run.conversation_id
        root_name = run.agent
    elif conv == "openllmetry":
        root_attrs.update(
            {
                "traceloop.span.kind": "agent",
                "traceloop.entity.name": run.agent,
                "traceloop.entity.input": _j({"args": [run.user_text], "kwargs": {}}),
            }
        )
        root_name = f"{run.agent}.agent"
    else:
        root_attrs.update({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": run.agent})
        if run.conversation_id:
            root_attrs["gen_ai.conversation.id"] = run.conversation_id
        if conv == "strands":
            root_attrs["gen_ai.system"] = "strands-agents"
            root_attrs["gen_ai.agent.tools"] = _j([t["name"] for t in run.tools])
        root_name = f"invoke_agent {run.agent}"
    root = tracer.start_span(root_name, kind=SpanKind.INTERNAL, attributes=root_attrs, start_time=clock.now)
    from opentelemetry import trace

    ctx = trace.set_span_in_context(root)
    history: list[dict[str, Any]] = [{"role": "user", "parts": [{"type": "text", "content": run.user_text}]}]
    call_no = 0
    for step in [*run.steps, []]:
        llm_start = clock.advance(5)
        parts = []
        for call in step:
            parts.append({"type": "tool_call", "id": f"call_{call_no}", "name": call.name, "arguments": call.args})
            call_no += 1
        output = parts or [{"type": "text", "content": run.answer}]
        llm_name, llm_attrs = _llm_span(run, conv, content, history, output)
        llm = tracer.start_span(llm_name, context=ctx, kind=SpanKind.CLIENT, attributes=llm_attrs, start_time=llm_start)
        if conv == "strands":  # strands keeps chat content in span events, as Bedrock content blocks
            llm.add_event("gen_ai.user.message", {"content": _j([{"text": run.user_text}])}, timestamp=llm_start)
            blocks = [
                {"toolUse": {"toolUseId": p["id"], "name": p["name"], "input": p["arguments"]}}
                if p["type"] == "tool_call"
                else {"text": p["content"]}
                for p in output
            ]
            llm.add_event(
                "gen_ai.choice", {"message": _j(blocks), "finish_reason": "tool_use" if parts else "end_turn"}
            )
        llm.end(end_time=clock.advance(300 + 40 * len(history)))
        history.append({"role": "assistant", "parts": output})
        base = call_no - len(step)
        for i, call in enumerate(step):
            tool_start = clock.advance(1)
            name, attrs, events = _tool_span(conv, content, call, f"call_{base + i}")
            span = tracer.start_span(name, context=ctx, kind=SpanKind.INTERNAL, attributes=attrs, start_time=tool_start)
            for ev_name, ev_attrs in events:
                span.add_event(ev_name, ev_attrs, timestamp=tool_start + 1000)
            if call.error:
                span.set_status(Status(StatusCode.ERROR, f"{call.error}: upstream failed"))
                span.set_attribute("error.type", call.error)
                span.add_event(
                    "exception",
                    {"exception.type": call.error, "exception.message": "upstream failed"},
                    timestamp=tool_start + 2000,
                )
            span.end(end_time=clock.advance(call.duration_ms))
            history.append(
                {
                    "role": "tool",
                    "parts": [{"type": "tool_call_response", "id": f"call_{base + i}", "response": call.result}],
                }
            )
    if conv == "strands":
        root.add_event("gen_ai.choice", {"message": run.answer, "finish_reason": "end_turn"}, timestamp=clock.now)
    if conv == "openinference":
        root.set_attribute("output.value", run.answer)
    elif conv == "openllmetry":
        root.set_attribute("traceloop.entity.output", _j(run.answer))
    elif content and conv == "genai":
        root.set_attribute("gen_ai.input.messages", _j(history[:1]))
        root.set_attribute(
            "gen_ai.output.messages", _j([{"role": "assistant", "parts": [{"type": "text", "content": run.answer}]}])
        )
    root.end(end_time=clock.advance(2))


def _llm_span(
    run: SimRun, conv: str, content: bool, history: Sequence[dict[str, Any]], output: list[dict[str, Any]]
) -> tuple[str, dict[str, Any]]:
    usage_in = 200 + 50 * len(history)
    if conv == "openinference":
        attrs: dict[str, Any] = {
            "openinference.span.kind": "LLM",
            "llm.model_name": run.model,
            "llm.provider": "anthropic",
            "llm.token_count.prompt": usage_in,
            "llm.token_count.completion": 40,
        }
        for i, msg in enumerate(history):
            prefix = f"llm.input_messages.{i}.message."
            attrs[prefix + "role"] = msg["role"]
            text = next((p.get("content") for p in msg["parts"] if p["type"] == "text"), None)
            if text:
                attrs[prefix + "content"] = text
        for j, part in enumerate(p for p in output if p["type"] == "tool_call"):
            prefix = f"llm.output_messages.0.message.tool_calls.{j}.tool_call."
            attrs[prefix + "id"] = part["id"]
            attrs[prefix + "function.name"] = part["name"]
            attrs[prefix + "function.arguments"] = _j(part["arguments"])
        attrs["llm.output_messages.0.message.role"] = "assistant"
        texts = [p["content"] for p in output if p["type"] == "text"]
        if texts:
            attrs["llm.output_messages.0.message.content"] = texts[0]
        for k, tool in enumerate(run.tools):
            attrs[f"llm.tools.{k}.tool.json_schema"] = _j(tool)
        return "Messages", attrs
    if conv == "openllmetry":
        attrs = {
            "llm.request.type": "chat",
            "gen_ai.system": "Anthropic",
            "gen_ai.request.model": run.model,
            "gen_ai.usage.input_tokens": usage_in,
            "gen_ai.usage.output_tokens": 40,
        }
        for i, msg in enumerate(history):
            attrs[f"gen_ai.prompt.{i}.role"] = msg["role"]
            text = next((p.get("content") for p in msg["parts"] if p["type"] == "text"), None)
            if text:
                attrs[f"gen_ai.prompt.{i}.content"] = text
        attrs["gen_ai.completion.0.role"] = "assistant"
        for j, part in enumerate(p for p in output if p["type"] == "tool_call"):
            attrs[f"gen_ai.completion.0.tool_calls.{j}.id"] = part["id"]
            attrs[f"gen_ai.completion.0.tool_calls.{j}.name"] = part["name"]
            attrs[f"gen_ai.completion.0.tool_calls.{j}.arguments"] = _j(part["arguments"])
        texts = [p["content"] for p in output if p["type"] == "text"]
        if texts:
            attrs["gen_ai.completion.0.content"] = texts[0]
        for k, tool in enumerate(run.tools):
            attrs[f"llm.request.functions.{k}.name"] = tool["name"]
            attrs[f"llm.request.functions.{k}.description"] = tool["description"]
            attrs[f"llm.request.functions.{k}.input_schema"] = _j(tool["input_schema"])
        return "anthropic.chat", attrs
    attrs = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "strands-agents" if conv == "strands" else "anthropic",
        "gen_ai.request.model": run.model,
        "gen_ai.usage.input_tokens": usage_in,
        "gen_ai.usage.output_tokens": 40,
    }
    if content and conv == "genai":
        attrs["gen_ai.input.messages"] = _j(list(history))
        attrs["gen_ai.output.messages"] = _j([{"role": "assistant", "parts": output}])
        attrs["gen_ai.tool.definitions"] = _j(
            [
                {
                    "type": "function",
                    "name": t["name"],
                    "description": t["description"],
                    "parameters": t["input_schema"],
                }
                for t in run.tools
            ]
        )
    return f"chat {run.model}", attrs


def _tool_span(
    conv: str, content: bool, call: SimCall, call_id: str
) -> tuple[str, dict[str, Any], list[tuple[str, dict[str, Any]]]]:
    events: list[tuple[str, dict[str, Any]]] = []
    if conv == "openinference":
        attrs: dict[str, Any] = {
            "openinference.span.kind": "TOOL",
            "tool.name": call.name,
            "input.value": _j(call.args),
        }
        if call.result is not None:
            attrs["output.value"] = _j(call.result)
        return call.name, attrs, events
    if conv == "openllmetry":
        attrs = {
            "traceloop.span.kind": "tool",
            "traceloop.entity.name": call.name,
            "traceloop.entity.input": _j({"args": [], "kwargs": call.args}),
        }
        if call.result is not None:
            attrs["traceloop.entity.output"] = _j(call.result)
        return f"{call.name}.tool", attrs, events
    attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": call.name, "gen_ai.tool.call.id": call_id}
    if conv == "strands":
        attrs["gen_ai.tool.status"] = "error" if call.error else "success"
        events.append(("gen_ai.tool.message", {"role": "tool", "content": _j(call.args), "id": call_id}))
        if call.result is not None:
            events.append(("gen_ai.choice", {"message": _j([{"text": _j(call.result)}]), "id": call_id}))
    elif content:
        attrs["gen_ai.tool.call.arguments"] = _j(call.args)
        if call.result is not None:
            attrs["gen_ai.tool.call.result"] = _j(call.result)
    return f"execute_tool {call.name}", attrs, events
