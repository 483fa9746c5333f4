"""Helpers to produce real OTel SDK spans in tests and encode them as Kafka record values."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer

from monitor.trajectory.spans import SpanRecord


class Recorder:
    """A private TracerProvider with an in-memory exporter (never the global one)."""

    def __init__(self, service: str = "test-agent", **resource: Any) -> None:
        self.exporter = InMemorySpanExporter()
        attributes = {"service.name": service, **{k.replace("__", "."): v for k, v in resource.items()}}
        self.provider = TracerProvider(resource=Resource.create(attributes))
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    def tracer(self, name: str = "tests") -> Tracer:
        return self.provider.get_tracer(name)

    def spans(self) -> tuple[ReadableSpan, ...]:
        return tuple(self.exporter.get_finished_spans())

    def request(self) -> ExportTraceServiceRequest:
        return encode_spans(self.spans())

    def record(self) -> bytes:
        return bytes(self.request().SerializeToString())


@contextmanager
def span(tracer: Tracer, name: str, **attributes: Any) -> Iterator[Any]:
    with tracer.start_as_current_span(name, attributes=attributes or None) as s:
        yield s


def make_span(
    name: str = "s",
    span_id: str = "00000000000000a1",
    parent: str | None = None,
    trace_id: str = "0123456789abcdef0123456789abcdef",
    start: int = 1_000,
    end: int = 2_000,
    **attributes: Any,
) -> SpanRecord:
    """A hand-built span record (for conventions and edge cases no installable library emits)."""
    return SpanRecord(
        trace_id=trace_id,
        span_id=span_id,
        parent_span_id=parent,
        name=name,
        start_ns=start,
        end_ns=end,
        attributes={k.replace("__", "."): v for k, v in attributes.items()},
    )


def agent_run(tracer: Tracer, tools: dict[str, Callable[..., Any]], calls: list[tuple[str, dict[str, Any]]]) -> None:
    """A tiny GenAI-semconv agent: invoke_agent → chat (tool_call parts) → execute_tool spans → chat."""
    import json

    with span(
        tracer, "invoke_agent weather", **{"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather"}
    ):
        parts = [{"type": "tool_call", "id": f"call_{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)]
        with span(
            tracer,
            "chat m",
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": "hi"}]}]),
                "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": parts}]),
            },
        ):
            pass
        for i, (n, a) in enumerate(calls):
            with span(
                tracer,
                f"execute_tool {n}",
                **{
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": n,
                    "gen_ai.tool.call.id": f"call_{i}",
                    "gen_ai.tool.call.arguments": json.dumps(a),
                    "gen_ai.tool.call.result": json.dumps(tools[n](**a)),
                },
            ):
                pass
        with span(
            tracer,
            "chat m",
            **{
                "gen_ai.operation.name": "chat",
                "gen_ai.request.model": "m",
                "gen_ai.output.messages": json.dumps(
                    [{"role": "assistant", "parts": [{"type": "text", "content": "done"}]}]
                ),
            },
        ):
            pass
