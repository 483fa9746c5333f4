"""Live agent runs of real frameworks, with ground truth recorded by the tools themselves.

Every scenario runs in-process under :func:`tests.support.capture.capture` and returns a :class:`Scenario`: the
OTLP request of the spans it produced and the :class:`ExpectedRun` list that the trajectory builder must rebuild
from them. Ground truth comes from the tool functions (the arguments they actually received, whether they raised),
from the user's input and from the framework's own final output — never from the spans.

:func:`rebuild` runs the product path (encode → split → shuffle → decode → build) and :func:`assert_runs_match`
compares, checking only the fields an expectation sets (``UNCHECKED`` elsewhere).
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import random
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from dataclasses import dataclass
from typing import Any

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.trace import Status, StatusCode
from pydantic_ai import RunContext  # module level: pydantic-ai resolves tool annotations against module globals

from tests.support.capture import SpanCapture, capture, to_records
from tests.support.fake_anthropic import FakeAnthropic

# --------------------------------------------------------------------------- expectations


class _Unchecked:
    def __repr__(self) -> str:
        return "UNCHECKED"


UNCHECKED: Any = _Unchecked()
"""An expectation field that is not compared."""


class ErrorType:
    """An expected error type, matched against ``ToolError.type`` exactly or as its last dotted component
    (``exception.type`` carries the module: ``pkg.mod.FlightSearchTimeout``)."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        if isinstance(other, ErrorType):
            return other.name == self.name
        return isinstance(other, str) and (other == self.name or other.rsplit(".", 1)[-1] == self.name)

    def __hash__(self) -> int:
        return hash(self.name)

    def __repr__(self) -> str:
        return f"ErrorType({self.name!r})"


@dataclass
class ExpectedCall:
    name: str
    args: Any = UNCHECKED
    """The arguments the tool received; ``ABSENT`` when content is not captured."""
    error: Any = UNCHECKED
    """``False`` / ``True`` / the expected ``error.type`` (``str`` exact, :class:`ErrorType` suffix match)."""
    executed: Any = UNCHECKED
    kind: Any = UNCHECKED
    """The call's kind (``function``, ``agent``, ``mcp``, ``framework``)."""


@dataclass
class ExpectedRun:
    agent: Any = UNCHECKED
    user_text: Any = UNCHECKED
    final_response: Any = UNCHECKED
    tools_offered: Any = UNCHECKED
    """Sorted tool names, or ``None`` (definitions not captured)."""
    calls: Any = UNCHECKED
    children: Any = UNCHECKED
    trace_id: Any = UNCHECKED


@dataclass
class Scenario:
    name: str
    request: ExportTraceServiceRequest
    runs: list[ExpectedRun]
    content_captured: bool = True
    logs: ExportLogsServiceRequest | None = None
    notes: str = ""


class ToolLog:
    """What the tools of one agent run received, in the order they were entered."""

    def __init__(self) -> None:
        self.calls: list[ExpectedCall] = []

    def record(self, name: str, args: Mapping[str, Any]) -> ExpectedCall:
        call = ExpectedCall(name, copy.deepcopy(dict(args)), error=False, executed=True)
        self.calls.append(call)
        return call

    def expected(
        self, *, content: bool = True, errors: bool = True, executed: bool | None = True
    ) -> list[ExpectedCall]:
        """The recorded calls as expectations (``args`` ABSENT without content; errors unchecked if not ``errors``)."""
        from monitor.trajectory.model import ABSENT

        return [
            ExpectedCall(
                c.name,
                c.args if content else ABSENT,
                c.error if errors else UNCHECKED,
                UNCHECKED if executed is None else executed,
            )
            for c in self.calls
        ]


# --------------------------------------------------------------------------- product path


def rebuild(
    request: ExportTraceServiceRequest,
    logs: ExportLogsServiceRequest | None = None,
    *,
    encoding: str = "otlp_proto",
    parts: int = 3,
    seed: int = 0,
) -> list[Any]:
    """Encode as the Collector would, split into ``parts`` records, shuffle, decode and build runs."""
    from monitor.ingest.decode import decode_logs, decode_traces
    from monitor.trajectory.build import build_runs

    rng = random.Random(seed)
    spans = [s for value in to_records(request, encoding, parts, rng) for s in decode_traces(value, encoding)]  # type: ignore[arg-type]
    events = []
    if logs is not None and len(logs.resource_logs):
        events = [e for value in to_records(logs, encoding, parts, rng) for e in decode_logs(value, encoding)]  # type: ignore[arg-type]
    return list(build_runs(spans, events))


# --------------------------------------------------------------------------- comparison


def _project_call(call: Any, exp: ExpectedCall | None, keys: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": call.name}
    for key in keys:
        want = getattr(exp, key) if exp is not None else UNCHECKED
        if key == "args":
            out["args"] = call.args
        elif key == "executed":
            out["executed"] = call.executed
        elif key == "kind":
            out["kind"] = call.kind
        elif key == "error":
            if isinstance(want, (str, ErrorType)):
                got = call.error.type if call.error is not None else False
                out["error"] = want if isinstance(want, ErrorType) and want == got else got
            else:
                out["error"] = call.error is not None
    return out


def _expected_call(exp: ExpectedCall, actual: dict[str, Any] | None, keys: Sequence[str]) -> dict[str, Any]:
    out: dict[str, Any] = {"name": exp.name}
    for key in keys:
        want = getattr(exp, key)
        if want is UNCHECKED:
            want = actual.get(key, "<missing>") if actual is not None else "<missing>"
        out[key] = want
    return out


def _sorted_runs(runs: Iterable[Any]) -> list[Any]:
    return sorted(runs, key=lambda r: (r.start_ns or 0, r.run_id))


def project(run: Any, exp: ExpectedRun) -> tuple[dict[str, Any], dict[str, Any]]:
    """(actual, expected) dicts over the fields ``exp`` checks, recursively for children."""
    actual: dict[str, Any] = {}
    expected: dict[str, Any] = {}
    if exp.trace_id is not UNCHECKED:
        actual["trace_id"], expected["trace_id"] = run.trace_id, exp.trace_id
    if exp.agent is not UNCHECKED:
        actual["agent"], expected["agent"] = run.agent, exp.agent
    if exp.user_text is not UNCHECKED:
        actual["user_text"], expected["user_text"] = run.user_text, exp.user_text
    if exp.final_response is not UNCHECKED:
        # strands ends its answers with a newline the model never wrote; trailing blanks are not content
        got_final = run.final_response.rstrip() if isinstance(run.final_response, str) else run.final_response
        actual["final_response"], expected["final_response"] = got_final, exp.final_response
    if exp.tools_offered is not UNCHECKED:
        offered = None if run.tools_offered is None else sorted(t.name for t in run.tools_offered)
        want = None if exp.tools_offered is None else sorted(exp.tools_offered)
        actual["tools_offered"], expected["tools_offered"] = offered, want
    if exp.calls is not UNCHECKED:
        checked = ("args", "error", "executed", "kind")
        keys = [k for k in checked if any(getattr(c, k) is not UNCHECKED for c in exp.calls)]
        got = [_project_call(c, exp.calls[i] if i < len(exp.calls) else None, keys) for i, c in enumerate(run.calls)]
        actual["calls"] = got
        expected["calls"] = [_expected_call(e, got[i] if i < len(got) else None, keys) for i, e in enumerate(exp.calls)]
    if exp.children is not UNCHECKED:
        kids = _sorted_runs(run.children)
        a_kids, e_kids = [], []
        for i, child_exp in enumerate(exp.children):
            if i < len(kids):
                a, e = project(kids[i], child_exp)
            else:
                a, e = "<missing child run>", project_expected_only(child_exp)
            a_kids.append(a)
            e_kids.append(e)
        a_kids.extend(f"<unexpected child run agent={k.agent!r}>" for k in kids[len(exp.children) :])
        actual["children"], expected["children"] = a_kids, e_kids
    return actual, expected


def project_expected_only(exp: ExpectedRun) -> dict[str, Any]:
    out = {k: v for k, v in vars(exp).items() if v is not UNCHECKED and k not in ("calls", "children")}
    if exp.calls is not UNCHECKED:
        out["calls"] = [{k: v for k, v in vars(c).items() if v is not UNCHECKED} for c in exp.calls]
    if exp.children is not UNCHECKED:
        out["children"] = [project_expected_only(c) for c in exp.children]
    return out


def match_runs(runs: Sequence[Any], expected: Sequence[ExpectedRun]) -> tuple[list[Any], list[Any]]:
    """Pair actual and expected runs (by trace id when the expectations give one, else by start time)."""
    ordered = _sorted_runs(runs)
    if expected and all(e.trace_id is not UNCHECKED for e in expected):
        order = {tid: i for i, tid in enumerate(dict.fromkeys(e.trace_id for e in expected))}
        ordered = sorted(ordered, key=lambda r: (order.get(r.trace_id, len(order)), r.start_ns or 0))
    actual, want = [], []
    for i, exp in enumerate(expected):
        if i < len(ordered):
            a, e = project(ordered[i], exp)
        else:
            a, e = "<missing run>", project_expected_only(exp)
        actual.append(a)
        want.append(e)
    actual.extend(f"<unexpected run trace={r.trace_id} agent={r.agent!r}>" for r in ordered[len(expected) :])
    return actual, want


def assert_runs_match(runs: Sequence[Any], expected: Sequence[ExpectedRun]) -> None:
    actual, want = match_runs(runs, expected)
    if actual != want:
        import difflib
        import pprint

        diff = difflib.unified_diff(
            pprint.pformat(want, width=110).splitlines(),
            pprint.pformat(actual, width=110).splitlines(),
            "expected",
            "rebuilt",
            lineterm="",
        )
        raise AssertionError("rebuilt runs differ from ground truth:\n" + "\n".join(diff))


# --------------------------------------------------------------------------- pydantic-ai


def _pydantic_settings(cap: SpanCapture, version: int, include_content: bool) -> Any:
    import warnings

    from pydantic_ai.models.instrumented import InstrumentationSettings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # versions 2–4 are deprecated but still supported
        return InstrumentationSettings(
            tracer_provider=cap.provider,
            version=version,
            include_content=include_content,  # type: ignore[arg-type]
        )


def _instrumented(settings: Any) -> dict[str, Any]:
    from pydantic_ai.capabilities.instrumentation import Instrumentation

    return {"capabilities": [Instrumentation(settings=settings)]}


def pydantic_parallel_retry(
    *, version: int = 5, include_content: bool = True, global_provider: bool = False
) -> Scenario:
    """Two tools in one step (run concurrently), one raising ModelRetry, then a corrected call, then text.

    ``global_provider``: instrument through ``Agent.instrument_all()`` and the global tracer provider.
    """
    from pydantic_ai import Agent, ModelRetry
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    log = ToolLog()
    user = "What is 17 + 25, and what does the glossary say about 'sum'?"

    def model_fn(messages: list[Any], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if m.kind == "response")
        if step == 0:
            return ModelResponse(
                parts=[ToolCallPart("add", {"x": 17, "y": 25}), ToolCallPart("glossary", {"term": "summ"})]
            )
        if step == 1:
            return ModelResponse(parts=[ToolCallPart("glossary", {"term": "sum"})])
        return ModelResponse(parts=[TextPart("17 + 25 = 42. A sum is the result of an addition.")])

    with capture() as cap:
        if global_provider:
            from pydantic_ai.models.instrumented import InstrumentationSettings

            Agent.instrument_all(InstrumentationSettings(version=version, include_content=include_content))  # type: ignore[arg-type]
            kwargs: dict[str, Any] = {}
        else:
            kwargs = _instrumented(_pydantic_settings(cap, version, include_content))
        try:
            agent = Agent(FunctionModel(model_fn), name="calculator", **kwargs)

            @agent.tool_plain
            async def add(x: int, y: int) -> int:
                """Add two integers."""
                log.record("add", {"x": x, "y": y})
                await asyncio.sleep(0.01)
                return x + y

            @agent.tool_plain
            async def glossary(term: str) -> str:
                """Look a term up in the glossary."""
                call = log.record("glossary", {"term": term})
                if term != "sum":
                    call.error = True
                    raise ModelRetry(f"unknown term {term!r}; did you mean 'sum'?")
                return "sum: the result of an addition"

            @agent.tool_plain
            def unused(flag: bool) -> str:
                """Never called."""
                log.record("unused", {"flag": flag})
                return "x"

            result = agent.run_sync(user)
        finally:
            if global_provider:
                Agent.instrument_all(False)
        request = cap.request()

    return Scenario(
        name=f"pydantic_ai_v{version}_parallel_retry" + ("" if include_content else "_no_content"),
        request=request,
        content_captured=include_content,
        runs=[
            ExpectedRun(
                agent="calculator",
                user_text=user if include_content else None,
                final_response=result.output if include_content else None,
                tools_offered=["add", "glossary", "unused"],
                calls=log.expected(content=include_content),
                children=[],
            )
        ],
    )


def pydantic_test_model(*, version: int = 5) -> Scenario:
    """pydantic-ai's TestModel: calls every tool once with generated arguments, then answers with JSON text."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    log = ToolLog()
    user = "Plan a trip to Lisbon."
    with capture() as cap:
        agent = Agent(
            TestModel(call_tools=["find_flights", "find_hotels"]),
            name="travel_planner",
            **_instrumented(_pydantic_settings(cap, version, True)),
        )

        @agent.tool_plain
        async def find_flights(origin: str, destination: str, passengers: int) -> list[str]:
            """Find flights."""
            log.record("find_flights", {"origin": origin, "destination": destination, "passengers": passengers})
            return ["TP123"]

        @agent.tool_plain
        async def find_hotels(city: str, nights: int) -> list[str]:
            """Find hotels."""
            log.record("find_hotels", {"city": city, "nights": nights})
            return ["Hotel Lisboa"]

        result = agent.run_sync(user)
        request = cap.request()
    return Scenario(
        name=f"pydantic_ai_v{version}_test_model",
        request=request,
        runs=[
            ExpectedRun(
                agent="travel_planner",
                user_text=user,
                final_response=result.output,
                tools_offered=["find_flights", "find_hotels"],
                calls=log.expected(),
                children=[],
            )
        ],
    )


def pydantic_delegation(*, version: int = 5) -> Scenario:
    """A router agent whose tool runs an expert agent: the expert's run is a nested run of the router's."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    outer, inner = ToolLog(), ToolLog()
    user = "Who knows the capital of France?"
    question = "What is the capital of France?"

    def router_fn(messages: list[Any], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if m.kind == "response")
        if step == 0:
            return ModelResponse(parts=[ToolCallPart("ask_expert", {"question": question})])
        return ModelResponse(parts=[TextPart("The expert says: Paris.")])

    def expert_fn(messages: list[Any], info: AgentInfo) -> ModelResponse:
        step = sum(1 for m in messages if m.kind == "response")
        if step == 0:
            return ModelResponse(parts=[ToolCallPart("lookup_fact", {"topic": "France", "field": "capital"})])
        return ModelResponse(parts=[TextPart("Paris")])

    with capture() as cap:
        settings = _pydantic_settings(cap, version, True)
        expert = Agent(FunctionModel(expert_fn), name="geography_expert", **_instrumented(settings))
        router = Agent(FunctionModel(router_fn), name="router", **_instrumented(settings))

        @expert.tool_plain
        def lookup_fact(topic: str, field: str) -> str:
            """Look up a fact."""
            inner.record("lookup_fact", {"topic": topic, "field": field})
            return "Paris"

        inner_output: list[str] = []

        @router.tool
        async def ask_expert(ctx: RunContext[None], question: str) -> str:
            """Ask the geography expert."""
            outer.record("ask_expert", {"question": question})
            answer = await expert.run(question, usage=ctx.usage)
            inner_output.append(answer.output)
            return answer.output

        result = router.run_sync(user)
        request = cap.request()
    return Scenario(
        name=f"pydantic_ai_v{version}_delegation",
        request=request,
        runs=[
            ExpectedRun(
                agent="router",
                user_text=user,
                final_response=result.output,
                tools_offered=["ask_expert"],
                calls=outer.expected(),
                children=[
                    ExpectedRun(
                        agent="geography_expert",
                        user_text=question,
                        final_response=inner_output[0],
                        tools_offered=["lookup_fact"],
                        calls=inner.expected(),
                        children=[],
                    )
                ],
            )
        ],
    )


# --------------------------------------------------------------------------- anthropic SDK

MODEL = "claude-test-model"
WEATHER_TOOLS: list[dict[str, Any]] = [
    {
        "name": "get_weather",
        "description": "Current weather for a city.",
        "input_schema": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["C", "F"]}},
            "required": ["city"],
        },
    },
    {
        "name": "get_time",
        "description": "Current time in a time zone.",
        "input_schema": {"type": "object", "properties": {"tz": {"type": "string"}}, "required": ["tz"]},
    },
    {
        "name": "send_email",
        "description": "Send an email (never needed here).",
        "input_schema": {"type": "object", "properties": {"to": {"type": "string"}}, "required": ["to"]},
    },
]
WEATHER_USER = "What's the weather and the time in Paris? Also check Atlantis."
WEATHER_FINAL = "Paris: 18°C and sunny, 14:05 CET. Atlantis is not a known city."
WEATHER_SCRIPT: list[Any] = [
    [("get_weather", {"city": "Paris", "unit": "C"}), ("get_time", {"tz": "Europe/Paris"})],
    [("get_weather", {"city": "Atlantis"})],
    WEATHER_FINAL,
]
"""Three model calls: two parallel tool uses, one failing tool use, the final text."""


class UnknownCity(ValueError):
    pass


def weather_tools(log: ToolLog) -> dict[str, Callable[..., Any]]:
    """The tools, recording the keyword arguments exactly as they are called with."""

    def get_weather(**kwargs: Any) -> dict[str, Any]:
        call = log.record("get_weather", kwargs)
        if kwargs["city"] != "Paris":
            call.error = True
            raise UnknownCity(f"unknown city {kwargs['city']!r}")
        return {"temp": 18, "unit": kwargs.get("unit", "C"), "sky": "sunny"}

    def get_time(**kwargs: Any) -> str:
        log.record("get_time", kwargs)
        return "14:05"

    def send_email(**kwargs: Any) -> str:
        log.record("send_email", kwargs)
        return "sent"

    return {"get_weather": get_weather, "get_time": get_time, "send_email": send_email}


ToolSpan = Callable[[str, str, dict[str, Any]], AbstractContextManager[Any]]


def _genai_tool_span(cap: SpanCapture, *, content: bool) -> ToolSpan:
    """A user's GenAI-semconv ``execute_tool`` span around a tool."""
    tracer = cap.tracer("weather_app")

    @contextmanager
    def span(name: str, call_id: str, args: dict[str, Any]) -> Iterator[Any]:
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
            "gen_ai.tool.type": "function",
        }
        if content:
            attributes["gen_ai.tool.call.arguments"] = json.dumps(args)
        with tracer.start_as_current_span(f"execute_tool {name}", attributes=attributes) as s:
            try:
                yield s
            except Exception as exc:
                s.set_attribute("error.type", type(exc).__name__)
                raise

    return span


def _oi_tool_span(cap: SpanCapture) -> ToolSpan:
    """A user's OpenInference TOOL span (``OITracer``), without a call id: merged by position only."""
    from openinference.instrumentation import OITracer, TraceConfig

    tracer = OITracer(cap.tracer("weather_app"), config=TraceConfig())
    schemas = {t["name"]: t for t in WEATHER_TOOLS}

    @contextmanager
    def span(name: str, call_id: str, args: dict[str, Any]) -> Iterator[Any]:
        with tracer.start_as_current_span(name, openinference_span_kind="tool") as s:
            s.set_tool(name=name, description=schemas[name]["description"], parameters=schemas[name]["input_schema"])
            s.set_input(args)
            yield s

    return span


def run_tool_loop(
    client: Any,
    *,
    log: ToolLog,
    user: str = WEATHER_USER,
    stream: bool = False,
    tool_span: ToolSpan | None = None,
) -> str:
    """A hand-written Messages tool loop; tools run in the order the model listed them."""
    tools = weather_tools(log)
    messages: list[dict[str, Any]] = [{"role": "user", "content": user}]
    for _ in range(10):
        if stream:
            with client.messages.stream(model=MODEL, max_tokens=512, tools=WEATHER_TOOLS, messages=messages) as s:
                for _event in s:
                    pass
                message = s.get_final_message()
        else:
            message = client.messages.create(model=MODEL, max_tokens=512, tools=WEATHER_TOOLS, messages=messages)
        messages.append(
            {
                "role": "assistant",
                "content": [b.model_dump(include={"type", "id", "name", "input", "text"}) for b in message.content],
            }
        )
        if message.stop_reason != "tool_use":
            return "\n".join(b.text for b in message.content if b.type == "text" and b.text)
        results = []
        for block in message.content:
            if block.type != "tool_use":
                continue
            ctx = tool_span(block.name, block.id, dict(block.input)) if tool_span else nullcontext()
            try:
                with ctx:
                    output = tools[block.name](**block.input)
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": json.dumps(output)})
            except Exception as exc:
                results.append({"type": "tool_result", "tool_use_id": block.id, "content": str(exc), "is_error": True})
        messages.append({"role": "user", "content": results})
    raise AssertionError("tool loop did not finish")


@contextmanager
def _instrumentors(cap: SpanCapture, names: Iterable[str]) -> Iterator[None]:
    """Instrument the anthropic SDK with OpenInference ("oi") and/or OpenLLMetry ("ol"); uninstrument after."""
    done = []
    try:
        for name in names:
            if name == "oi":
                from openinference.instrumentation.anthropic import AnthropicInstrumentor as OpenInference

                inst: Any = OpenInference()
            elif name == "ol":
                from opentelemetry.instrumentation.anthropic import AnthropicInstrumentor as OpenLLMetry

                inst = OpenLLMetry()
            else:
                raise ValueError(name)
            inst.instrument(tracer_provider=cap.provider)
            done.append(inst)
        yield
    finally:
        for inst in reversed(done):
            inst.uninstrument()


@contextmanager
def _env(**values: str | None) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    try:
        for k, v in values.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _root_span(cap: SpanCapture, root: str | None, user: str, out: list[str]) -> AbstractContextManager[Any]:
    """The span a user wraps the loop in: ``oi_agent`` / ``genai_agent`` / ``plain`` (not an agent) / none."""
    if root is None:
        return nullcontext()
    if root == "genai_agent":
        return cap.tracer("weather_app").start_as_current_span(
            "invoke_agent weather_agent",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": "weather_agent",
                "gen_ai.provider.name": "anthropic",
            },
        )
    if root == "plain":
        return cap.tracer("weather_app").start_as_current_span("handle_request", attributes={"http.route": "/ask"})
    if root == "oi_agent":
        from openinference.instrumentation import OITracer, TraceConfig, using_session

        tracer = OITracer(cap.tracer("weather_app"), config=TraceConfig())

        @contextmanager
        def agent() -> Iterator[Any]:
            with (
                using_session("session-42"),
                tracer.start_as_current_span(
                    "weather_agent", openinference_span_kind="agent", attributes={"agent.name": "weather_agent"}
                ) as span,
            ):
                span.set_input(user)
                yield span

        return agent()
    raise ValueError(root)


def anthropic_weather(
    *,
    instrumentation: Sequence[str] = (),
    native: str | None = None,
    root: str | None = "genai_agent",
    tools: str | None = None,
    stream: bool = False,
    retries: int = 0,
    traceloop_content: bool = True,
) -> Scenario:
    """The real ``anthropic`` SDK against :class:`FakeAnthropic` with a hand-written tool loop.

    ``instrumentation``: ``"oi"`` (OpenInference) and/or ``"ol"`` (OpenLLMetry). ``native``: the SDK's own spans,
    ``"content"`` / ``"metadata"`` (explicit provider) or ``"default"`` (no option at all: global provider,
    metadata only); ``None`` disables them (``open_telemetry=False``). ``root``: see :func:`_root_span`. ``tools``:
    ``"genai"`` / ``"genai_no_args"`` / ``"oi"`` user tool spans, or none (calls known only as tool_call parts).
    ``retries``: 529 answers injected before the first model call (the SDK retries them).
    """
    import anthropic

    log = ToolLog()
    out: list[str] = []
    with ExitStack() as stack:
        cap = stack.enter_context(capture())
        fake = stack.enter_context(FakeAnthropic(list(WEATHER_SCRIPT)))
        if retries:
            fake.fail_next(529, count=retries)
        stack.enter_context(
            _env(
                TRACELOOP_TRACE_CONTENT="true" if traceloop_content else "false",
                ANTHROPIC_OPEN_TELEMETRY=None,
                ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE=None,
            )
        )
        stack.enter_context(_instrumentors(cap, instrumentation))
        option: Any
        if native is None:
            option = False
        elif native == "default":
            option = None
        else:
            option = {
                "tracer_provider": cap.provider,
                "traces": {"content_mode": "content" if native == "content" else "metadata_only"},
            }
        client = anthropic.Anthropic(base_url=fake.base_url, api_key="test-key", max_retries=3, open_telemetry=option)
        tool_span: ToolSpan | None = None
        if tools in ("genai", "genai_no_args"):
            tool_span = _genai_tool_span(cap, content=tools == "genai")
        elif tools == "oi":
            tool_span = _oi_tool_span(cap)
        with _root_span(cap, root, WEATHER_USER, out) as span:
            final = run_tool_loop(client, log=log, stream=stream, tool_span=tool_span)
            out.append(final)
            if root == "oi_agent":
                span.set_output(final)
        client.close()
        assert fake.unexpected == [], fake.unexpected
        assert len(fake.message_requests) == 3 + retries
        request = cap.request()

    llm_content = ("oi" in instrumentation) or ("ol" in instrumentation and traceloop_content) or native == "content"
    # The SDK's native spans never carry tool definitions (no gen_ai.tool.definitions); OI and OpenLLMetry do.
    definitions = ("oi" in instrumentation) or ("ol" in instrumentation and traceloop_content)
    offered = sorted(t["name"] for t in WEATHER_TOOLS) if definitions else None
    tool_args = tools in ("genai", "oi")
    content = llm_content or tool_args
    has_tool_spans = tools is not None
    name = "anthropic_" + "_".join(
        [*(instrumentation or ["noinst"]), f"native-{native}" if native else "", root or "noroot", tools or "notools"]
        + (["stream"] if stream else [])
        + ([f"retry{retries}"] if retries else [])
    ).replace("__", "_")
    from monitor.trajectory.model import ABSENT

    def calls(executed: bool | None) -> list[ExpectedCall]:
        # Without tool spans, args come from the tool_call parts (what the model sent is what the tools got) and
        # errors are unknowable (a tool_result's is_error is not captured by any instrumentation).
        return log.expected(content=content, errors=has_tool_spans, executed=executed)

    if root is None:
        # No span around the loop: every model call is a trace (and a run) of its own.
        per_step = [
            [c for c in log.calls[0:2]],
            [log.calls[2]],
            [],
        ]
        runs = []
        for i, step_calls in enumerate(per_step):
            runs.append(
                ExpectedRun(
                    agent=None,
                    user_text=WEATHER_USER if llm_content else None,
                    final_response=(final if i == 2 else None) if llm_content else None,
                    tools_offered=offered,
                    calls=[
                        ExpectedCall(c.name, c.args if llm_content else ABSENT, UNCHECKED, False) for c in step_calls
                    ],
                    children=[],
                )
            )
    else:
        runs = [
            ExpectedRun(
                agent="weather_agent" if root in ("genai_agent", "oi_agent") else None,
                user_text=WEATHER_USER if (llm_content or root == "oi_agent") else None,
                final_response=final if (llm_content or root == "oi_agent") else None,
                tools_offered=offered,
                calls=calls(executed=has_tool_spans),
                children=[],
            )
        ]
    return Scenario(name=name, request=request, runs=runs, content_captured=content)


def anthropic_tool_runner(*, content: bool = True, stream: bool = False) -> Scenario:
    """The SDK's own agent loop (``client.beta.messages.tool_runner``) with its native spans."""
    import anthropic
    from anthropic import beta_tool

    log = ToolLog()
    tools = weather_tools(log)

    @beta_tool
    def get_weather(city: str, unit: str | None = None) -> str:
        """Current weather for a city.

        Args:
            city: the city
            unit: C or F
        """
        kwargs = {"city": city} if unit is None else {"city": city, "unit": unit}
        return json.dumps(tools["get_weather"](**kwargs))

    @beta_tool
    def get_time(tz: str) -> str:
        """Current time in a time zone.

        Args:
            tz: IANA time zone
        """
        return json.dumps(tools["get_time"](tz=tz))

    with capture() as cap, FakeAnthropic(list(WEATHER_SCRIPT)) as fake:
        client = anthropic.Anthropic(
            base_url=fake.base_url,
            api_key="test-key",
            open_telemetry={
                "tracer_provider": cap.provider,
                "traces": {"content_mode": "content" if content else "metadata_only"},
            },
        )
        runner = client.beta.messages.tool_runner(
            model=MODEL,
            max_tokens=512,
            tools=[get_weather, get_time],
            messages=[{"role": "user", "content": WEATHER_USER}],
            stream=stream,
        )
        last = None
        for item in runner:
            last = item.get_final_message() if stream else item
        assert last is not None
        final = "\n".join(b.text for b in last.content if b.type == "text")
        client.close()
        assert fake.unexpected == [], fake.unexpected
        request = cap.request()

    expected = log.expected(content=content)
    for c in expected:
        if c.error:
            c.error = "tool_error"  # the runner turns a tool exception into an is_error result: error.type tool_error
    return Scenario(
        name="anthropic_native_tool_runner" + ("" if content else "_metadata") + ("_stream" if stream else ""),
        request=request,
        content_captured=content,
        runs=[
            ExpectedRun(
                agent=None,
                user_text=WEATHER_USER if content else None,
                final_response=final if content else None,
                tools_offered=None,  # the SDK's spans never carry tool definitions
                calls=expected,
                children=[],
            )
        ],
    )


def first_trace_id(request: ExportTraceServiceRequest) -> str:
    for rs in request.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                return span.trace_id.hex()
    raise ValueError("no spans")


def span_names(request: ExportTraceServiceRequest) -> list[str]:
    return [s.name for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans]


def trace_ids(request: ExportTraceServiceRequest) -> set[str]:
    return {s.trace_id.hex() for rs in request.resource_spans for ss in rs.scope_spans for s in ss.spans}


def set_error(span: Any, exc: BaseException) -> None:
    span.record_exception(exc)
    span.set_status(Status(StatusCode.ERROR, str(exc)))


__all__ = [
    "UNCHECKED",
    "ErrorType",
    "ExpectedCall",
    "ExpectedRun",
    "Scenario",
    "ToolLog",
    "anthropic_tool_runner",
    "anthropic_weather",
    "assert_runs_match",
    "pydantic_delegation",
    "pydantic_parallel_retry",
    "pydantic_test_model",
    "rebuild",
]
