"""Generate the recorded trajectories of the sample datasets as OTLP record files.

Spans are made with the real OpenTelemetry SDK (a private TracerProvider with an
``InMemorySpanExporter``, deterministic ids and timestamps), encoded with the OTLP exporter's
``encode_spans`` and written as OTLP/JSON lines with :func:`monitor.ingest.encode.to_otlp_json`, the
Collector file exporter's format. Root spans carry ``monitor.eval.case_id``, ``monitor.eval.turn``
and ``monitor.eval.run``, which is how ``monitor eval --traces`` matches runs to cases.

Run from the repository root::

    .venv/bin/python examples/datasets/make_traces.py
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.id_generator import IdGenerator

from monitor.ingest.encode import split_by_trace, to_otlp_json

HERE = Path(__file__).parent
BASE_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z


class SeededIds(IdGenerator):
    """Deterministic trace and span ids, so regenerated files are byte-identical."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def generate_span_id(self) -> int:
        return self.rng.getrandbits(64) or 1

    def generate_trace_id(self) -> int:
        return self.rng.getrandbits(128) or 1


@dataclass
class Call:
    name: str
    args: dict[str, Any]
    result: Any = None
    executed: bool = True


@dataclass
class TurnScript:
    user: str
    calls: Sequence[Call] = ()
    answer: str | None = None
    system: str | None = None
    tools: Sequence[str] = field(default_factory=list)


class Writer:
    """Records agent runs as GenAI-semconv spans: invoke_agent → chat → execute_tool… → chat."""

    def __init__(self, agent: str, seed: int) -> None:
        self.agent = agent
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(
            resource=Resource.create({"service.name": f"{agent}-eval"}), id_generator=SeededIds(seed)
        )
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.tracer = self.provider.get_tracer("examples.make_traces")
        self.clock = BASE_NS

    def _tick(self, ms: float) -> int:
        self.clock += int(ms * 1_000_000)
        return self.clock

    def _span(self, name: str, parent: Any, attributes: dict[str, Any], start: int, end: int) -> Any:
        ctx = trace.set_span_in_context(parent) if parent is not None else None
        span = self.tracer.start_span(name, context=ctx, attributes=attributes, start_time=start)
        return span, end

    def run(self, case_id: str, turn: int, run_no: int, script: TurnScript) -> None:
        start = self._tick(1000)
        root = self.tracer.start_span(
            f"invoke_agent {self.agent}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": self.agent,
                "monitor.eval.case_id": case_id,
                "monitor.eval.turn": turn,
                "monitor.eval.run": run_no,
            },
            start_time=start,
        )
        ctx = trace.set_span_in_context(root)
        inputs: list[dict[str, Any]] = []
        if script.system:
            inputs.append({"role": "system", "parts": [{"type": "text", "content": script.system}]})
        inputs.append({"role": "user", "parts": [{"type": "text", "content": script.user}]})
        parts = [
            {"type": "tool_call", "id": f"call_{case_id}_{turn}_{i}", "name": c.name, "arguments": c.args}
            for i, c in enumerate(script.calls)
        ]
        chat_attrs: dict[str, Any] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "anthropic",
            "gen_ai.request.model": "claude-sonnet-4-5",
            "gen_ai.input.messages": json.dumps(inputs),
        }
        if script.tools:
            chat_attrs["gen_ai.tool.definitions"] = json.dumps([{"type": "function", "name": t} for t in script.tools])
        if parts:
            out = [{"role": "assistant", "parts": parts, "finish_reason": "tool_call"}]
            chat = self.tracer.start_span(
                "chat claude-sonnet-4-5",
                context=ctx,
                attributes={**chat_attrs, "gen_ai.output.messages": json.dumps(out)},
                start_time=self._tick(5),
            )
            chat.end(end_time=self._tick(400))
            for i, call in enumerate(script.calls):
                if not call.executed:
                    continue
                tool = self.tracer.start_span(
                    f"execute_tool {call.name}",
                    context=ctx,
                    attributes={
                        "gen_ai.operation.name": "execute_tool",
                        "gen_ai.tool.name": call.name,
                        "gen_ai.tool.call.id": f"call_{case_id}_{turn}_{i}",
                        "gen_ai.tool.call.arguments": json.dumps(call.args),
                        "gen_ai.tool.call.result": json.dumps(call.result),
                    },
                    start_time=self._tick(2),
                )
                tool.end(end_time=self._tick(30))
        if script.answer is not None:
            out = [
                {"role": "assistant", "parts": [{"type": "text", "content": script.answer}], "finish_reason": "stop"}
            ]
            chat = self.tracer.start_span(
                "chat claude-sonnet-4-5",
                context=ctx,
                attributes={**chat_attrs, "gen_ai.output.messages": json.dumps(out)},
                start_time=self._tick(5),
            )
            chat.end(end_time=self._tick(300))
        root.end(end_time=self._tick(5))

    def write(self, path: Path) -> None:
        request = encode_spans(self.exporter.get_finished_spans())
        lines = [to_otlp_json(part).decode("utf-8") for _, part in split_by_trace(request)]
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        print(f"wrote {path} ({len(lines)} traces)")


# ----------------------------------------------------------------------------- the datasets' trajectories

WEATHER = {"temperature_c": 31, "condition": "sunny"}

ADK_CASES: dict[str, list[TurnScript]] = {
    "current_weather": [
        TurnScript(
            "What's the weather in Hanoi right now?",
            [Call("get_weather", {"city": "Hanoi"}, WEATHER)],
            "It is 31°C and sunny in Hanoi.",
        )
    ],
    "forecast_then_current": [
        TurnScript(
            "Give me the 3-day forecast for Paris.",
            [Call("get_forecast", {"city": "Paris", "days": 3}, {"days": ["rain", "cloudy", "sunny"]})],
            "Paris: rain tomorrow, then cloudy, then sunny.",
        ),
        TurnScript(
            "And what is the weather in London now?",
            [Call("get_weather", {"city": "London"}, {"temperature_c": 12, "condition": "cloudy"})],
            "It is 12°C and cloudy in London.",
        ),
    ],
    "small_talk": [TurnScript("Thanks, that's all!", [], "You're welcome, have a nice day!")],
    # the regression: the agent forgets the requested unit
    "fahrenheit_units": [
        TurnScript(
            "What's the weather in Tokyo in fahrenheit?",
            [Call("get_weather", {"city": "Tokyo"}, WEATHER)],
            "It is 88°F and sunny in Tokyo.",
        )
    ],
}

SEED001_TOOLS = ["readFile", "writeFile", "listFiles", "deleteFile"]
SEED001_CASES: dict[str, Call | None] = {
    "0": Call("readFile", {"path": "README.md"}, executed=False),
    "1": Call("listFiles", {"directory": "src"}, executed=False),
    "2": Call("listFiles", {"directory": "."}, executed=False),
    "3": None,
    "4": None,
}
SEED001_PROMPTS = {
    "0": "Read the contents of README.md",
    "1": "What files are in the src directory?",
    "2": "Show me what's in the project",
    "3": "What is the capital of France?",
    "4": "Tell me a joke",
}
SEED001_ANSWERS = {"3": "The capital of France is Paris.", "4": "Why do programmers prefer dark mode? Less bugs."}

SEED000_CASES: dict[str, TurnScript] = {
    "T001_current_weather": TurnScript(
        "What's the weather in Hanoi right now?",
        [Call("get_weather", {"city": "Hanoi", "units": "celsius"}, WEATHER)],
        "The weather in Hanoi is sunny, 31°C.",
    ),
    "T002_5day_forecast": TurnScript(
        "Give me the 5-day forecast for Ho Chi Minh City",
        [Call("get_forecast", {"city": "Ho Chi Minh City", "days": 5}, {"days": ["sun"] * 5})],
        "Ho Chi Minh City: five sunny days ahead.",
    ),
    "T003_no_tool_needed": TurnScript(
        "What's the difference between weather and climate?",
        [],
        "Weather is the short-term state of the atmosphere; climate is its long-term average.",
    ),
}


def main() -> None:
    adk = Writer("weather_agent", seed=1)
    for run_no in range(2):  # ADK evaluates every case twice (NUM_RUNS = 2)
        for case_id, turns in ADK_CASES.items():
            for t, script in enumerate(turns):
                adk.run(case_id, t, run_no, script)
    adk.write(HERE / "adk" / "traces.jsonl")

    seed001 = Writer("file_agent", seed=2)
    for case_id, call in SEED001_CASES.items():
        script = TurnScript(
            SEED001_PROMPTS[case_id],
            [call] if call else [],
            SEED001_ANSWERS.get(case_id),
            system="You are a helpful file assistant.",
            tools=SEED001_TOOLS,
        )
        seed001.run(case_id, 0, 0, script)
    seed001.write(HERE / "seed001" / "traces.jsonl")

    seed000 = Writer("weather_assistant", seed=3)
    for case_id, script in SEED000_CASES.items():
        seed000.run(case_id, 0, 0, script)
    seed000.write(HERE / "seed000" / "traces.jsonl")


if __name__ == "__main__":
    main()
