"""The seeds' own executors on Anthropic's Messages API, through the real ``anthropic`` SDK.

* ``select`` (seed-001 ``singleTurnExecutor``): one ``messages.create`` per turn with the case's
  tools and no ``tool_choice``; the tools are not executed. The run's only step holds the model's
  ``tool_use`` blocks as ``tool_call`` parts (``calls_source: selected``).
* ``loop`` (seed-000 ``ToolEvaluator.evaluate_test_case``): the tool-use loop until a response's
  ``stop_reason`` is not ``tool_use`` or ``max_steps`` model calls were made; every ``tool_use`` is
  answered with a stubbed result (:data:`tool_results`, else the article's
  ``_mock_tool_execution``).

Turns of a multi-turn case share one conversation: each turn's user message is appended to the
messages of the previous turns (in ``select``, the earlier answers' text only, since their tool
uses were never executed; consecutive user content is merged into one message).

The run is not assembled by hand: the executor records what happened as OTel GenAI-semconv spans
(``invoke_agent`` → ``chat`` / ``execute_tool``, with content, usage, tool definitions and
monotonic-clock times) on a private tracer provider, and rebuilds them with the daemon's path
(``encode_spans`` → :func:`~monitor.ingest.decode.decode_traces` → ``build_runs``), so an executor
run and a production run of the same conversation are the same :class:`Run`.

Per-case overrides read from ``Case.config`` (top level, or a nested ``config`` mapping as in
seed-001's ``data.config``): ``model``, ``max_tokens``, ``system_prompt`` (or ``systemPrompt``)
and ``agent`` (the agent name of the runs). seed-001's ``temperature`` is not sent: the Messages
API of the ``anthropic`` SDK this package supports has no sampling-temperature parameter.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, Literal

import anthropic
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from monitor.evaluation.runner_common import RunnerFailed, rebuild, spans_to_records, with_eval_attributes
from monitor.trajectory.semconv import GenAI, Monitor, Op

if TYPE_CHECKING:
    from monitor.rules.datasets.model import Case, Turn
    from monitor.trajectory.model import Run, ToolDef

ExecutorKind = Literal["select", "loop"]

DEFAULT_MAX_TOKENS: Final = 2000  # seed-000's ToolEvaluator
DEFAULT_MAX_RETRIES: Final = 3
AGENT_NAMES: Final[Mapping[str, str]] = {"select": "single_turn_executor", "loop": "tool_evaluator"}
TRACER_NAME: Final = "monitor.evaluation.anthropic_executor"
PROVIDER_NAME: Final = "anthropic"


def mock_tool_execution(tool_name: str, tool_input: Any) -> dict[str, Any]:
    """The default stub result, as seed-000's ``ToolEvaluator._mock_tool_execution``."""
    return {"status": "success", "result": f"Mock result for {tool_name}", "input_received": tool_input}


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)


def _content_text(value: Any) -> str:
    """A tool result as the ``content`` string of a ``tool_result`` block (seed-000 ``json.dumps``)."""
    return value if isinstance(value, str) else _dumps(value)


class _Clock:
    """Wall-clock nanoseconds that advance with the monotonic clock (span times never go back)."""

    def __init__(self) -> None:
        self._anchor = time.time_ns() - time.monotonic_ns()

    def now(self) -> int:
        return self._anchor + time.monotonic_ns()


# --------------------------------------------------------------------------- Anthropic ↔ GenAI shapes


def api_tools(tools: Sequence[ToolDef] | None) -> list[dict[str, Any]]:
    """Case tools as Messages API tool definitions; a tool without schema gets ``{"type": "object"}``."""
    out: list[dict[str, Any]] = []
    for t in tools or ():
        tool: dict[str, Any] = {"name": t.name}
        if t.description:
            tool["description"] = t.description
        tool["input_schema"] = dict(t.input_schema) if isinstance(t.input_schema, Mapping) else {"type": "object"}
        out.append(tool)
    return out


def _block_param(block: Any) -> dict[str, Any]:
    """A response content block as a request content block."""
    kind = block.type
    if kind == "text":
        return {"type": "text", "text": block.text}
    if kind == "tool_use":
        return {"type": "tool_use", "id": block.id, "name": block.name, "input": block.input}
    if kind == "thinking":
        return {"type": "thinking", "thinking": block.thinking, "signature": block.signature}
    if kind == "redacted_thinking":
        return {"type": "redacted_thinking", "data": block.data}
    dumped: dict[str, Any] = block.model_dump(mode="json", exclude_none=True)
    return dumped


def _genai_parts(content: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(tool_call_response parts, other parts) of one Anthropic message content."""
    if isinstance(content, str):
        return [], [{"type": "text", "content": content}]
    results: list[dict[str, Any]] = []
    parts: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif kind == "tool_use":
            parts.append(
                {"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")}
            )
        elif kind == "tool_result":
            results.append(
                {"type": "tool_call_response", "id": block.get("tool_use_id"), "response": block.get("content")}
            )
        elif kind == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking", "")})
        else:
            parts.append({"type": str(kind)})
    return results, parts


def genai_messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic request messages in the OTel GenAI form (tool results become ``tool`` messages)."""
    out: list[dict[str, Any]] = []
    for message in messages:
        results, parts = _genai_parts(message.get("content", ""))
        if results:
            out.append({"role": "tool", "parts": results})
        if parts:
            out.append({"role": str(message.get("role", "user")), "parts": parts})
    return out


def _tool_definitions(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"type": "function", "name": t["name"], "description": t.get("description"), "parameters": t["input_schema"]}
        for t in tools
    ]


def _append_user(conversation: list[dict[str, Any]], blocks: list[dict[str, Any]]) -> None:
    """Append user content, merged into the last message when that is a user message too."""
    if not blocks:
        return
    if conversation and conversation[-1]["role"] == "user":
        last = conversation[-1]
        content = last["content"]
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        last["content"] = [*content, *blocks]
        return
    if len(blocks) == 1 and blocks[0].get("type") == "text":
        conversation.append({"role": "user", "content": blocks[0]["text"]})  # the seeds send a plain string
    else:
        conversation.append({"role": "user", "content": blocks})


# --------------------------------------------------------------------------- the executor


class AnthropicExecutor:
    """See the module docstring. Build it with :func:`anthropic_executor`."""

    def __init__(
        self,
        kind: ExecutorKind,
        model: str,
        *,
        client: anthropic.Anthropic,
        max_steps: int,
        system_prompt: str | None,
        tool_results: Mapping[str, Any] | None,
    ) -> None:
        self.kind = kind
        self.model = model
        self.name = f"anthropic_{kind}:{model}"
        self.max_steps = max_steps
        self.system_prompt = system_prompt
        self.tool_results: Mapping[str, Any] = dict(tool_results or {})
        self._client = client

    def client(self) -> anthropic.Anthropic:
        """The client the executor calls."""
        return self._client

    def run(self, case: Case, run_no: int) -> list[Run]:
        """One run per turn; API errors after the SDK's retries raise ``RunnerFailed("api_error")``."""
        client = self.client()
        exporter = InMemorySpanExporter()
        provider = TracerProvider(resource=Resource({"service.name": "monitor-eval-anthropic-executor"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        tracer = provider.get_tracer(TRACER_NAME)
        try:
            session = _Session(self, case, run_no, client, tracer)
            roots = [session.turn(turn_no, turn) for turn_no, turn in enumerate(case.turns)]
            spans = exporter.get_finished_spans()
        except anthropic.APIError as exc:
            status = getattr(exc, "status_code", None)
            raise RunnerFailed(
                "api_error", f"{type(exc).__name__}{f' {status}' if status else ''}: {exc.message}"
            ) from exc
        finally:
            provider.shutdown()
        records = spans_to_records(spans)
        by_root = {r.run_id: r for r in rebuild(records)}
        runs: list[Run] = []
        for turn_no, root in enumerate(roots):
            run = by_root.get(root)
            if run is None:  # our own spans always build a run; this guards the invariant
                raise RunnerFailed("missing_run", f"case {case.id!r} turn {turn_no}: the executor's spans built no run")
            runs.append(with_eval_attributes(run, case.id, turn_no, run_no))
        return runs

    def tool_result(self, name: str, args: Any) -> Any:
        """The stubbed result of a tool call: ``tool_results[name]`` (called with the arguments when
        callable), else :func:`mock_tool_execution`. Exceptions propagate (an error result)."""
        if name in self.tool_results:
            stub = self.tool_results[name]
            return stub(args) if callable(stub) else stub
        return mock_tool_execution(name, args)


def _config(case: Case) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    nested = case.config.get("config")
    if isinstance(nested, Mapping):
        merged.update(nested)
    merged.update({k: v for k, v in case.config.items() if k != "config"})
    return merged


class _Session:
    """One case × run: the conversation carried across turns and the span recording."""

    def __init__(
        self, ex: AnthropicExecutor, case: Case, run_no: int, client: anthropic.Anthropic, tracer: trace.Tracer
    ) -> None:
        self.ex = ex
        self.case = case
        self.run_no = run_no
        self.client = client
        self.tracer = tracer
        self.clock = _Clock()
        cfg = _config(case)
        self.model = str(cfg.get("model") or ex.model)
        system = cfg.get("system_prompt", cfg.get("systemPrompt", ex.system_prompt))
        self.system: str | None = str(system) if system else None
        self.max_tokens = int(cfg.get("max_tokens") or DEFAULT_MAX_TOKENS)
        self.agent = str(cfg.get("agent") or AGENT_NAMES[ex.kind])
        self.tools = api_tools(case.tools)
        self.conversation: list[dict[str, Any]] = []
        self.conversation_id = f"monitor-eval:{case.id}:{run_no}"

    # ------------------------------------------------------------------ spans

    def _start(self, name: str, parent: Span | None, kind: SpanKind, attributes: Mapping[str, Any]) -> Span:
        # the root starts a trace of its own, whatever span is current in the caller
        ctx = trace.set_span_in_context(parent) if parent is not None else Context()
        return self.tracer.start_span(
            name, context=ctx, kind=kind, attributes=dict(attributes), start_time=self.clock.now()
        )

    def _end(self, span: Span) -> None:
        span.end(end_time=self.clock.now())

    def _common(self) -> dict[str, Any]:
        return {
            GenAI.PROVIDER: PROVIDER_NAME,
            GenAI.AGENT_NAME: self.agent,
            GenAI.CONVERSATION_ID: self.conversation_id,
        }

    # ------------------------------------------------------------------ one turn

    def turn(self, turn_no: int, turn: Turn) -> str:
        """Run one turn; returns the hex span id of its ``invoke_agent`` span (the run id)."""
        new = [m for m in turn.input if m.role in ("user", "assistant", "system") and m.text]
        system = "\n\n".join([self.system or "", *(m.text for m in new if m.role == "system")]).strip() or None
        turn_messages: list[dict[str, Any]] = []
        for m in new:
            if m.role == "user":
                _append_user(self.conversation, [{"type": "text", "text": m.text}])
                turn_messages.append({"role": "user", "content": m.text})
            elif m.role == "assistant":
                self.conversation.append({"role": "assistant", "content": m.text})
                turn_messages.append({"role": "assistant", "content": m.text})
        attributes: dict[str, Any] = {
            GenAI.OPERATION: Op.INVOKE_AGENT,
            **self._common(),
            GenAI.REQUEST_MODEL: self.model,
            GenAI.INPUT_MESSAGES: _dumps(genai_messages(turn_messages)),
            Monitor.CASE_ID: self.case.id,
            Monitor.TURN: turn_no,
            Monitor.RUN: self.run_no,
        }
        if system:
            attributes[GenAI.SYSTEM_INSTRUCTIONS] = _dumps([{"type": "text", "content": system}])
        if self.case.tools is not None:
            attributes[GenAI.TOOL_DEFINITIONS] = _dumps(_tool_definitions(self.tools))
        root = self._start(f"{Op.INVOKE_AGENT} {self.agent}", None, SpanKind.INTERNAL, attributes)
        try:
            final = self._steps(root, system)
            if final:
                output = [{"role": "assistant", "parts": [{"type": "text", "content": final}], "finish_reason": "stop"}]
                root.set_attribute(GenAI.OUTPUT_MESSAGES, _dumps(output))
        except BaseException as exc:
            root.record_exception(exc)
            root.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            self._end(root)
        return format(root.get_span_context().span_id, "016x")

    def _steps(self, root: Span, system: str | None) -> str | None:
        """Model calls of one turn; returns the final text (None when the loop was cut at max_steps)."""
        steps = 1 if self.ex.kind == "select" else self.ex.max_steps
        for _ in range(steps):
            response = self._chat(root, system)
            blocks = [_block_param(b) for b in response.content]
            text = "\n".join(b["text"] for b in blocks if b["type"] == "text" and b["text"]) or None
            uses = [b for b in blocks if b["type"] == "tool_use"]
            if self.ex.kind == "select":
                # the tool uses were never executed: only the answer's text goes on into later turns
                texts = [b for b in blocks if b["type"] == "text" and b["text"]]
                if texts:
                    self.conversation.append({"role": "assistant", "content": texts})
                return text
            self.conversation.append({"role": "assistant", "content": blocks})
            if response.stop_reason != "tool_use" or not uses:
                return text
            _append_user(self.conversation, [self._execute(root, use) for use in uses])
        return None

    def _chat(self, root: Span, system: str | None) -> Any:
        request: dict[str, Any] = {"model": self.model, "max_tokens": self.max_tokens, "messages": self.conversation}
        if system:
            request["system"] = system
        if self.tools:
            request["tools"] = self.tools
        attributes: dict[str, Any] = {
            GenAI.OPERATION: Op.CHAT,
            **self._common(),
            GenAI.REQUEST_MODEL: self.model,
            "gen_ai.request.max_tokens": self.max_tokens,
            GenAI.INPUT_MESSAGES: _dumps(genai_messages(self.conversation)),
        }
        if system:
            attributes[GenAI.SYSTEM_INSTRUCTIONS] = _dumps([{"type": "text", "content": system}])
        if self.case.tools is not None:
            attributes[GenAI.TOOL_DEFINITIONS] = _dumps(_tool_definitions(self.tools))
        span = self._start(f"{Op.CHAT} {self.model}", root, SpanKind.CLIENT, attributes)
        try:
            response = self.client.messages.create(**request)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_attribute(GenAI.ERROR_TYPE, type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            self._end(span)
            raise
        _, parts = _genai_parts([_block_param(b) for b in response.content])
        usage = response.usage
        span.set_attributes(
            {
                GenAI.RESPONSE_MODEL: response.model,
                "gen_ai.response.id": response.id,
                "gen_ai.response.finish_reasons": [str(response.stop_reason)],
                GenAI.OUTPUT_MESSAGES: _dumps(
                    [{"role": "assistant", "parts": parts, "finish_reason": str(response.stop_reason)}]
                ),
                GenAI.USAGE_INPUT: usage.input_tokens,
                GenAI.USAGE_OUTPUT: usage.output_tokens,
            }
        )
        if usage.cache_read_input_tokens is not None:
            span.set_attribute(GenAI.USAGE_CACHE_READ, usage.cache_read_input_tokens)
        if usage.cache_creation_input_tokens is not None:
            span.set_attribute(GenAI.USAGE_CACHE_CREATION, usage.cache_creation_input_tokens)
        self._end(span)
        return response

    def _execute(self, root: Span, use: Mapping[str, Any]) -> dict[str, Any]:
        """Run one stubbed tool under an ``execute_tool`` span; returns its ``tool_result`` block."""
        name, call_id, args = str(use["name"]), str(use["id"]), use.get("input")
        span = self._start(
            f"{Op.EXECUTE_TOOL} {name}",
            root,
            SpanKind.INTERNAL,
            {
                GenAI.OPERATION: Op.EXECUTE_TOOL,
                **self._common(),
                GenAI.TOOL_NAME: name,
                GenAI.TOOL_CALL_ID: call_id,
                GenAI.TOOL_TYPE: "function",
                GenAI.TOOL_CALL_ARGUMENTS: _dumps(args),
            },
        )
        try:
            value = self.ex.tool_result(name, args)
        except Exception as exc:
            span.record_exception(exc)
            span.set_attribute(GenAI.ERROR_TYPE, type(exc).__name__)
            span.set_status(Status(StatusCode.ERROR, str(exc)))
            self._end(span)
            return {
                "type": "tool_result",
                "tool_use_id": call_id,
                "content": f"{type(exc).__name__}: {exc}",
                "is_error": True,
            }
        content = _content_text(value)
        span.set_attribute(GenAI.TOOL_CALL_RESULT, content)
        self._end(span)
        return {"type": "tool_result", "tool_use_id": call_id, "content": content}


def anthropic_executor(
    kind: ExecutorKind,
    model: str,
    *,
    client: anthropic.Anthropic | None = None,
    max_steps: int = 10,
    system_prompt: str | None = None,
    tool_results: Mapping[str, Any] | None = None,
) -> AnthropicExecutor:
    """The seed executors on the Messages API (see the module docstring).

    ``client``: an ``anthropic.Anthropic`` (its ``max_retries`` applies); default: one from the
    environment (``ANTHROPIC_API_KEY``) with ``max_retries=3``. ``max_steps``: model calls per
    turn in ``loop`` (``select`` makes exactly one). ``tool_results``: tool name → stub value, or a
    callable taking the call's arguments (an exception becomes an ``is_error`` tool result and an
    errored call). Raises :class:`RunnerFailed` (``config``) on invalid arguments, or when no client
    is given and the environment holds no Anthropic credentials.
    """
    if kind not in ("select", "loop"):
        raise RunnerFailed("config", f"executor kind must be 'select' or 'loop', got {kind!r}")
    if max_steps < 1:
        raise RunnerFailed("config", f"max_steps must be at least 1, got {max_steps!r}")
    if not model:
        raise RunnerFailed("config", "a model name is required")
    if client is None:
        client = anthropic.Anthropic(max_retries=DEFAULT_MAX_RETRIES)
        if client.api_key is None and client.auth_token is None:
            raise RunnerFailed("config", "no Anthropic credentials: set ANTHROPIC_API_KEY or pass a client")
    return AnthropicExecutor(
        kind, model, client=client, max_steps=max_steps, system_prompt=system_prompt, tool_results=tool_results
    )
