"""A runner command for the command-runner tests: reads ``MONITOR_EVAL_CASE`` and exports its agent runs over
OTLP/HTTP with the real OTel SDK, as a user's ``--runner CMD`` would.

    python otlp_agent_script.py MODE [--env-out PATH]

MODE:
  ``pydantic`` – one pydantic-ai agent run per turn (FunctionModel, a real tool), exported by the OTLP/HTTP protobuf
                 exporter configured from the environment only; the tool appends what it received to ``--env-out``'s
                 ``.tools`` file;
  ``missing``  – like ``pydantic`` but only the first turn is run;
  ``json``     – GenAI spans built with the SDK, posted as OTLP/JSON (gzip) with ``monitor.eval.turn`` on each root,
                 turns emitted in reverse order;
  ``fail``     – writes to stderr and exits with status 3;
  ``hang``     – sleeps (for the timeout test), in a child process of the shell.
``--env-out PATH`` writes the environment variables the runner set to PATH as JSON.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import sys
import time
import urllib.request
from typing import Any

ENV_KEYS = (
    "MONITOR_EVAL_CASE",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
    "OTEL_SEMCONV_STABILITY_OPT_IN",
    "TRACELOOP_TRACE_CONTENT",
)


def run_pydantic(turns: list[dict[str, Any]], tools_out: str | None) -> None:
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor
    from pydantic_ai import Agent
    from pydantic_ai.capabilities.instrumentation import Instrumentation
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.instrumented import InstrumentationSettings

    provider = TracerProvider(resource=Resource.create({"service.name": "otlp-agent-script"}))
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))  # endpoint and protocol from the env
    trace.set_tracer_provider(provider)

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        if any(getattr(p, "part_kind", "") == "user-prompt" for p in getattr(last, "parts", ())):
            prompt = next(getattr(p, "content", "") for p in last.parts if getattr(p, "part_kind", "") == "user-prompt")
            return ModelResponse(parts=[ToolCallPart("lookup", {"query": str(prompt)[:40]})])
        return ModelResponse(parts=[TextPart("Found it.")])

    agent = Agent(
        FunctionModel(model),
        name="script_agent",
        capabilities=[Instrumentation(settings=InstrumentationSettings(tracer_provider=provider))],
    )

    @agent.tool_plain
    def lookup(query: str) -> str:
        """Look something up."""
        if tools_out:
            with open(tools_out, "a", encoding="utf-8") as f:
                f.write(json.dumps({"name": "lookup", "args": {"query": query}}) + "\n")
        return f"result for {query}"

    history = None
    for turn in turns:
        result = agent.run_sync(turn["input"], message_history=history)
        history = result.all_messages()
        time.sleep(0.002)  # distinct start times
    provider.shutdown()  # flush


def run_json(case: dict[str, Any]) -> None:
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({}))  # OTEL_RESOURCE_ATTRIBUTES from the env
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("json_script")
    for turn in reversed(case["turns"]):
        with (
            tracer.start_as_current_span(
                "invoke_agent json_agent",
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": "json_agent",
                    "monitor.eval.turn": turn["turn"],
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "parts": [{"type": "text", "content": turn["input"]}]}]
                    ),
                },
            ),
            tracer.start_as_current_span(
                "execute_tool echo",
                attributes={
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "echo",
                    "gen_ai.tool.call.arguments": json.dumps({"turn": turn["turn"]}),
                },
            ),
        ):
            pass
        time.sleep(0.002)
    from google.protobuf.json_format import MessageToDict

    doc = MessageToDict(encode_spans(exporter.get_finished_spans()), use_integers_for_enums=True)

    def hex_ids(node: Any) -> Any:
        if isinstance(node, dict):
            return {
                k: base64.b64decode(v).hex() if k in ("traceId", "spanId", "parentSpanId") else hex_ids(v)
                for k, v in node.items()
            }
        if isinstance(node, list):
            return [hex_ids(v) for v in node]
        return node

    body = gzip.compress(json.dumps(hex_ids(doc)).encode())
    request = urllib.request.Request(
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] + "/v1/traces",
        data=body,
        headers={"content-type": "application/json", "content-encoding": "gzip"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        assert response.status == 200, response.status


def main(argv: list[str]) -> int:
    mode = argv[1] if len(argv) > 1 else "pydantic"
    env_out = argv[argv.index("--env-out") + 1] if "--env-out" in argv else None
    if env_out:
        with open(env_out, "w", encoding="utf-8") as f:
            json.dump({k: os.environ.get(k) for k in ENV_KEYS}, f)
    case = json.loads(os.environ["MONITOR_EVAL_CASE"])
    tools_out = env_out + ".tools" if env_out else None
    if mode == "pydantic":
        run_pydantic(case["turns"], tools_out)
    elif mode == "missing":
        run_pydantic(case["turns"][:1], tools_out)
    elif mode == "json":
        run_json(case)
    elif mode == "fail":
        print("agent crashed: no model configured", file=sys.stderr)
        return 3
    elif mode == "hang":
        time.sleep(60)
    else:
        print(f"unknown mode {mode!r}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
