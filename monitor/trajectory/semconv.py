"""Our own catalogue of the span keys and values we read, per convention.

One place for every attribute name, event name and magic value; normalizers import from here and
never spell a key inline. Sources: ``shared/reference/otel-agent-spans.md`` (§1 OTel GenAI,
§2 OpenInference, §3 OpenLLMetry, §4 frameworks) and the spans recorded in
``tests/fixtures/frameworks``. The upstream constant modules are deprecated or version-specific,
so we keep the strings here. Which key gives which fact, in which priority, is the table of
:mod:`monitor.trajectory.keytable`.
"""

from __future__ import annotations

from typing import Final


class GenAI:
    """OpenTelemetry GenAI semantic conventions (v1.28 … v1.41 and the genai repo)."""

    OPERATION: Final = "gen_ai.operation.name"
    PROVIDER: Final = "gen_ai.provider.name"
    SYSTEM: Final = "gen_ai.system"  # deprecated ≥ 1.37, still common
    REQUEST_MODEL: Final = "gen_ai.request.model"
    RESPONSE_MODEL: Final = "gen_ai.response.model"
    RESPONSE_ID: Final = "gen_ai.response.id"
    AGENT_NAME: Final = "gen_ai.agent.name"
    AGENT_ID: Final = "gen_ai.agent.id"
    CONVERSATION_ID: Final = "gen_ai.conversation.id"
    TOOL_NAME: Final = "gen_ai.tool.name"
    TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
    TOOL_DESCRIPTION: Final = "gen_ai.tool.description"
    TOOL_TYPE: Final = "gen_ai.tool.type"
    TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
    TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
    TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
    INPUT_MESSAGES: Final = "gen_ai.input.messages"
    OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
    SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
    USAGE_INPUT: Final = "gen_ai.usage.input_tokens"
    USAGE_OUTPUT: Final = "gen_ai.usage.output_tokens"
    USAGE_PROMPT_OLD: Final = "gen_ai.usage.prompt_tokens"
    USAGE_COMPLETION_OLD: Final = "gen_ai.usage.completion_tokens"
    USAGE_CACHE_READ: Final = "gen_ai.usage.cache_read.input_tokens"
    USAGE_CACHE_CREATION: Final = "gen_ai.usage.cache_creation.input_tokens"
    USAGE_CACHE_READ_ALT: Final = "gen_ai.usage.cache_read_input_tokens"
    USAGE_CACHE_CREATION_ALT: Final = "gen_ai.usage.cache_creation_input_tokens"
    ERROR_TYPE: Final = "error.type"
    # v1.27 span-event attributes
    PROMPT: Final = "gen_ai.prompt"
    COMPLETION: Final = "gen_ai.completion"


class Op:
    """Values of ``gen_ai.operation.name``."""

    CHAT: Final = "chat"
    GENERATE_CONTENT: Final = "generate_content"
    TEXT_COMPLETION: Final = "text_completion"
    RESPONSE: Final = "response"  # openai-agents-v2 ResponseSpan
    EXECUTE_TOOL: Final = "execute_tool"
    INVOKE_AGENT: Final = "invoke_agent"
    CREATE_AGENT: Final = "create_agent"
    INVOKE_WORKFLOW: Final = "invoke_workflow"

    INFERENCE: Final = frozenset({CHAT, GENERATE_CONTENT, TEXT_COMPLETION, RESPONSE})


class Events:
    """Event names: span events, or log records in event mode (joined to their span)."""

    EXCEPTION: Final = "exception"
    EXCEPTION_TYPE: Final = "exception.type"
    EXCEPTION_MESSAGE: Final = "exception.message"
    SYSTEM_MESSAGE: Final = "gen_ai.system.message"
    USER_MESSAGE: Final = "gen_ai.user.message"
    ASSISTANT_MESSAGE: Final = "gen_ai.assistant.message"
    TOOL_MESSAGE: Final = "gen_ai.tool.message"
    CHOICE: Final = "gen_ai.choice"
    OPERATION_DETAILS: Final = "gen_ai.client.inference.operation.details"
    CONTENT_PROMPT: Final = "gen_ai.content.prompt"  # v1.27
    CONTENT_COMPLETION: Final = "gen_ai.content.completion"  # v1.27

    INPUT_EVENTS: Final = frozenset({SYSTEM_MESSAGE, USER_MESSAGE, ASSISTANT_MESSAGE, TOOL_MESSAGE})
    ROLE_OF: Final = {
        SYSTEM_MESSAGE: "system",
        USER_MESSAGE: "user",
        ASSISTANT_MESSAGE: "assistant",
        TOOL_MESSAGE: "tool",
    }


class OpenInference:
    SPAN_KIND: Final = "openinference.span.kind"
    KIND_TOOL: Final = "TOOL"
    KIND_AGENT: Final = "AGENT"
    KIND_LLM: Final = "LLM"
    KIND_CHAIN: Final = "CHAIN"
    INPUT_VALUE: Final = "input.value"
    REDACTED: Final = "__REDACTED__"  # the value of an input or output hidden by TraceConfig / OPENINFERENCE_HIDE_*
    INPUT_MIME: Final = "input.mime_type"
    OUTPUT_VALUE: Final = "output.value"
    OUTPUT_MIME: Final = "output.mime_type"
    TOOL_NAME: Final = "tool.name"
    TOOL_DESCRIPTION: Final = "tool.description"
    TOOL_PARAMETERS: Final = "tool.parameters"
    TOOL_ID: Final = "tool.id"
    TOOL_CALL_ID: Final = "tool_call.id"
    TOOLS_PREFIX: Final = "llm.tools."  # llm.tools.<i>.tool.json_schema
    TOOL_JSON_SCHEMA: Final = "tool.json_schema"
    INPUT_MESSAGES_PREFIX: Final = "llm.input_messages."
    OUTPUT_MESSAGES_PREFIX: Final = "llm.output_messages."
    MODEL_NAME: Final = "llm.model_name"
    PROVIDER: Final = "llm.provider"
    SYSTEM: Final = "llm.system"
    TOKENS_PROMPT: Final = "llm.token_count.prompt"
    TOKENS_COMPLETION: Final = "llm.token_count.completion"
    TOKENS_CACHE_READ: Final = "llm.token_count.prompt_details.cache_read"
    TOKENS_CACHE_WRITE: Final = "llm.token_count.prompt_details.cache_write"
    SESSION_ID: Final = "session.id"
    METADATA: Final = "metadata"  # JSON object; LangChain runs put their metadata here
    INVOCATION_PARAMETERS: Final = "llm.invocation_parameters"  # the request's parameters, `tools` among them
    AGENT_NAME: Final = "agent.name"
    GRAPH_NODE_NAME: Final = "graph.node.name"
    GRAPH_NODE_ID: Final = "graph.node.id"
    # suffixes under llm.{input,output}_messages.<i>.
    MSG_ROLE: Final = "message.role"
    MSG_CONTENT: Final = "message.content"
    MSG_NAME: Final = "message.name"
    MSG_TOOL_CALL_ID: Final = "message.tool_call_id"
    MSG_TOOL_CALLS: Final = "message.tool_calls."
    MSG_CONTENTS: Final = "message.contents."
    TC_ID: Final = "tool_call.id"
    TC_NAME: Final = "tool_call.function.name"
    TC_ARGS: Final = "tool_call.function.arguments"


class Traceloop:
    """OpenLLMetry / Traceloop."""

    SPAN_KIND: Final = "traceloop.span.kind"
    KIND_TOOL: Final = "tool"
    KIND_AGENT: Final = "agent"
    KIND_WORKFLOW: Final = "workflow"
    KIND_TASK: Final = "task"
    ENTITY_NAME: Final = "traceloop.entity.name"
    ENTITY_INPUT: Final = "traceloop.entity.input"
    ENTITY_OUTPUT: Final = "traceloop.entity.output"
    WORKFLOW_NAME: Final = "traceloop.workflow.name"
    ASSOCIATION_PREFIX: Final = "traceloop.association.properties."
    TASK_STATUS: Final = "gen_ai.task.status"
    # legacy flattened LLM attributes (before 2026-03)
    PROMPT_PREFIX: Final = "gen_ai.prompt."
    COMPLETION_PREFIX: Final = "gen_ai.completion."
    FUNCTIONS_PREFIX: Final = "llm.request.functions."
    REQUEST_TYPE: Final = "llm.request.type"
    TOTAL_TOKENS: Final = "llm.usage.total_tokens"
    SESSION_KEYS: Final = ("session_id", "conversation_id", "thread_id")


class LangChain:
    """LangChain as OpenInference records it."""

    AGENT_NAME_METADATA: Final = "lc_agent_name"  # LangChain.js createAgent's `name`, in every span's metadata


class PydanticAI:
    AGENT_RUN_SPAN: Final = "agent run"  # instrumentation v2
    RUNNING_TOOL_SPAN: Final = "running tool"  # instrumentation v2
    AGENT_NAME: Final = "agent_name"
    MODEL_NAME: Final = "model_name"
    FINAL_RESULT: Final = "final_result"
    ALL_MESSAGES: Final = "pydantic_ai.all_messages"
    ALL_MESSAGES_EVENTS: Final = "all_messages_events"  # v1 form
    TOOL_ARGUMENTS: Final = "tool_arguments"
    TOOL_RESPONSE: Final = "tool_response"
    TOOL_FAILURE_STAGE: Final = "pydantic_ai.tool.failure_stage"
    MODEL_REQUEST_PARAMETERS: Final = "model_request_parameters"
    AGGREGATED_INPUT: Final = "gen_ai.aggregated_usage.input_tokens"
    AGGREGATED_OUTPUT: Final = "gen_ai.aggregated_usage.output_tokens"
    INTERNAL_TOOLS: Final = frozenset({"final_result"})


class ADK:
    """Google ADK (``gcp.vertex.agent`` tracer)."""

    SCOPE: Final = "gcp.vertex.agent"
    TOOL_CALL_ARGS: Final = "gcp.vertex.agent.tool_call_args"
    TOOL_RESPONSE: Final = "gcp.vertex.agent.tool_response"
    LLM_REQUEST: Final = "gcp.vertex.agent.llm_request"
    LLM_RESPONSE: Final = "gcp.vertex.agent.llm_response"
    SESSION_ID: Final = "gcp.vertex.agent.session_id"
    INVOCATION_SPAN: Final = "invocation"  # ADK 1.x root
    CALL_LLM_SPAN: Final = "call_llm"  # ADK 1.x model span
    NO_CALL_ID: Final = "<not specified>"
    MERGED_TOOL_NAMES: Final = frozenset({"(merged tools)", "(merged)"})
    MERGED_SPAN_PREFIX: Final = "execute_tool (merged"


class Strands:
    TOOL_STATUS: Final = "gen_ai.tool.status"
    AGENT_TOOLS: Final = "gen_ai.agent.tools"
    EVENT_CONTENT: Final = "content"
    EVENT_MESSAGE: Final = "message"
    EVENT_ID: Final = "id"


class OpenAIAgents:
    """openai-agents SDK as seen through the OTel-contrib and OpenInference instrumentations."""

    HANDOFF_OP: Final = "agent_handoff"
    HANDOFF_FROM: Final = "gen_ai.handoff.from_agent"
    HANDOFF_TO: Final = "gen_ai.handoff.to_agent"
    OI_HANDOFF_SPAN_PREFIX: Final = "handoff to "  # OpenInference TOOL span; output.value = target agent
    HANDOFF_TOOL_PREFIX: Final = "transfer_to_"  # the SDK's default handoff tool name


class VercelAI:
    """Vercel AI SDK's own telemetry (ai 5/6 ``experimental_telemetry``, ai 7 ``LegacyOpenTelemetry``; scope ``ai``)."""

    OPERATION_ID: Final = "ai.operationId"
    AGENT_OPS: Final = ("ai.generateText", "ai.streamText", "ai.generateObject", "ai.streamObject")
    MODEL_OPS: Final = (
        "ai.generateText.doGenerate",
        "ai.streamText.doStream",
        "ai.generateObject.doGenerate",
        "ai.streamObject.doStream",
    )
    TOOL_OP: Final = "ai.toolCall"
    FUNCTION_ID: Final = "ai.telemetry.functionId"  # the only agent name the SDK records
    TOOL_NAME: Final = "ai.toolCall.name"
    TOOL_ID: Final = "ai.toolCall.id"
    TOOL_ARGS: Final = "ai.toolCall.args"
    TOOL_RESULT: Final = "ai.toolCall.result"
    PROMPT: Final = "ai.prompt"  # root: {"system", "prompt"} (ai 5/6) or {"system", "messages"} (ai 7)
    PROMPT_MESSAGES: Final = "ai.prompt.messages"
    PROMPT_TOOLS: Final = "ai.prompt.tools"  # a list of JSON tool definitions (``inputSchema``)
    RESPONSE_TEXT: Final = "ai.response.text"
    RESPONSE_TOOL_CALLS: Final = "ai.response.toolCalls"  # [{toolCallId, toolName, input | args}]
    RESPONSE_MODEL: Final = "ai.response.model"
    MODEL_ID: Final = "ai.model.id"
    MODEL_PROVIDER: Final = "ai.model.provider"
    USAGE_INPUT: Final = "ai.usage.inputTokens"  # ai 5 streamText, ai 6, ai 7
    USAGE_PROMPT: Final = "ai.usage.promptTokens"  # ai 5 generateText
    USAGE_OUTPUT: Final = "ai.usage.outputTokens"
    USAGE_COMPLETION: Final = "ai.usage.completionTokens"
    USAGE_CACHE_READ: Final = "ai.usage.inputTokenDetails.cacheReadTokens"
    USAGE_CACHED_INPUT: Final = "ai.usage.cachedInputTokens"
    KEY_PREFIX: Final = "ai."


class Haystack:
    """Haystack 3.x agents traced by ``opentelemetry-haystack`` (scope ``haystack``)."""

    AGENT_RUN_SPAN: Final = "haystack.agent.run"
    LLM_SPAN: Final = "haystack.agent.step.llm"
    TOOL_SPAN: Final = "haystack.agent.step.tool"
    COMPONENT_TYPE: Final = "haystack.component.type"
    AGENT_COMPONENT: Final = "Agent"  # an Agent run as a pipeline component: its span names the agent
    COMPONENT_NAME: Final = "haystack.component.name"
    COMPONENT_INPUT: Final = "haystack.component.input"
    COMPONENT_OUTPUT: Final = "haystack.component.output"
    TOOL_NAME: Final = "haystack.tool.name"
    TOOL_INPUT: Final = "haystack.agent.step.tool.input"
    TOOL_OUTPUT: Final = "haystack.agent.step.tool.output"
    TOOL_ERROR: Final = "haystack.tool.error"  # true on a failed tool; the span's status stays unset
    LLM_INPUT: Final = "haystack.agent.step.llm.input"  # {"messages": [ChatMessage], "tools": [...]}
    LLM_OUTPUT: Final = "haystack.agent.step.llm.output"  # {"replies": [ChatMessage with meta.model, meta.usage]}
    AGENT_TOOLS: Final = "haystack.agent.tools"  # [{"type", "data": {name, description, parameters}}]
    AGENT_INPUT: Final = "haystack.agent.input"
    AGENT_OUTPUT: Final = "haystack.agent.output"
    KEY_PREFIX: Final = "haystack."
    SCOPE: Final = "haystack"


class PythonCallWrappers:
    """OpenInference instrumentations that record a Python call's wrapper as a TOOL span's ``input.value``,
    ``{"kwargs": {...}}`` or ``{"args": [], "sanitize_inputs_outputs": true, "kwargs": {...}}``, instead of the
    tool's arguments."""

    SCOPES: Final = frozenset(
        {
            "openinference.instrumentation.llama_index",
            "openinference.instrumentation.smolagents",
            "openinference.instrumentation.dspy",
        }
    )
    FLAGS: Final = frozenset({"sanitize_inputs_outputs"})  # wrapper keys that are not arguments


class LlamaIndex:
    """LlamaIndex agents (FunctionAgent, ReActAgent) traced by openinference-instrumentation-llama-index."""

    SCOPE: Final = "openinference.instrumentation.llama_index"
    NO_MODEL_CALL_SUFFIX: Final = "._prepare_chat_with_tools"  # an LLM span beside each model call that calls none
    AGENT_STEP_SUFFIX: Final = ".parse_agent_output"  # the one span whose input names the agent (in a repr)
    AGENT_NAME_IN_REPR: Final = r"current_agent_name='([^']+)'"
    TOOL_OUTPUT_KEYS: Final = frozenset({"blocks", "tool_name", "raw_input", "raw_output", "is_error"})  # ToolOutput


class Smolagents:
    """smolagents traced by openinference-instrumentation-smolagents (ToolCallingAgent, CodeAgent)."""

    SCOPE: Final = "openinference.instrumentation.smolagents"
    AGENT_SPAN_SUFFIX: Final = ".run"  # the root AGENT span is `<agent name>.run`
    TOOLS_NAMES: Final = "smolagents.tools_names"  # a Python list repr of the tools' names, also without content
    TASK: Final = "task"  # the root span's input.value: {"task": <user request>, "stream": …}
    FINAL_ANSWER_STEP: Final = "FinalAnswerStep(output="  # ends the root's output.value when the run streamed


class ReAct:
    """The ReAct text format (LlamaIndex ReActAgent, LangChain ReAct prompts): ``Thought: …`` then
    ``Action: …`` / ``Action Input: …`` or ``Answer: …``; the answer is the text after ``Answer:``."""

    ANSWER: Final = r"\A\s*Thought:.*?^Answer:[ \t]*(.*)\Z"


class FrameworkTools:
    """Tools a framework offers the model for its own control flow, not the user's work: scorers leave these
    calls (kind ``framework``) out. By instrumentation scope."""

    BY_SCOPE: Final = {
        "openinference.instrumentation.smolagents": frozenset({"final_answer"}),
        "openinference.instrumentation.dspy": frozenset({"finish"}),
    }


class DSPy:
    """DSPy traced by openinference-instrumentation-dspy: tools are spans named ``<tool>.__call__``."""

    SCOPE: Final = "openinference.instrumentation.dspy"
    TOOL_NAME_SUFFIXES: Final = (".__call__", ".acall")
    MODULE_NAME_SUFFIXES: Final = (".forward", ".aforward")
    INPUT_ARGS: Final = "input_args"  # a module's input.value: {"input_args": {field: value}}
    NOT_ANSWERS: Final = frozenset({"trajectory", "reasoning", "rationale"})  # Prediction fields that are no answer


class AgentToolTypes:
    """``gen_ai.tool.type`` values of tools that hand work to another agent."""

    VALUES: Final = frozenset({"AgentTool", "TransferToAgentTool", "agent"})


class MCP:
    METHOD: Final = "mcp.method.name"
    IS_ERROR: Final = "isError"  # a CallToolResult's flag for a tool that failed (errors.call_error)
    TOOL_TYPES: Final = frozenset({"mcp", "McpTool", "MCPTool", "mcp_tool"})


class ModelCallIdentity:
    """How two model spans are recognised as one model API call recorded twice.

    An instrumentation library on top of the provider SDK's own spans records every call twice: the
    anthropic SDK (2.x, native spans on by default) writes ``anthropic.messages.create`` beside
    OpenLLMetry's ``anthropic.chat`` (traceloop-sdk 0.62) and OpenInference's ``messages.stream``
    (3.1) as *siblings* overlapping in time. The evidence that they are one call, strongest first:
    the provider's response id on both spans (the native span has it even when it captures no
    content); tool-call ids in both outputs; the same output content; for a span without content,
    the same reported token usage. Overlap in time alone is never enough.
    """

    RESPONSE_ID_KEYS: Final = (GenAI.RESPONSE_ID,)
    """Span attributes holding the provider's response id (``msg_…``, ``chatcmpl-…``)."""
    RESPONSE_BODY_KEYS: Final = (OpenInference.OUTPUT_VALUE,)
    """Attributes that may hold the provider's whole response body as JSON (OpenInference's
    ``output.value`` on LLM spans): its ``id`` is the response id when the body is marked as one below."""
    RESPONSE_BODY_MARKERS: Final = (("type", "message"), ("object", "chat.completion"), ("object", "response"))
    """(key, value) pairs that mark a JSON object as a provider response: an Anthropic Message, an
    OpenAI chat completion, an OpenAI Responses object."""
    TWIN_LOOKBACK: Final = 8
    """How many earlier model spans of a run (by start time) are compared with each one: twins start
    within a few spans of each other, and the bound keeps the comparison linear."""


class Generic:
    """Evidence read from a span that no known convention recognizes (``convention: generic``).

    Patterns over attribute keys (matched with ``re.search``, ignoring case), not keys: an unknown
    framework is read from the shape of its keys. ``acme.tool.name`` + ``acme.tool.input`` is a tool span;
    ``acme.response.tool_calls`` holding a JSON list of calls is a model span."""

    TOOL_NAME_KEY: Final = r"(?:^|[._])tool(?:_?call)?[._]?name$"
    TOOL_INPUT_KEY: Final = (
        r"(?:^|[._])(?:tool(?:_?call)?[._])?(?:input|inputs|args|arguments|params|parameters)(?:\.value)?$"
    )
    TOOL_OUTPUT_KEY: Final = r"(?:^|[._])(?:tool(?:_?call)?[._])?(?:output|outputs|result|response)(?:\.value)?$"
    TOOL_IO_KEY: Final = f"{TOOL_INPUT_KEY}|{TOOL_OUTPUT_KEY}"
    TOOL_CALL_ID_KEY: Final = r"(?:^|[._])(?:tool_?)?call[._]?id$"
    TOOL_CALLS_KEY: Final = r"(?:^|[._])tool_?calls$"
    MODEL_KEY: Final = r"(?:^|[._])model(?:[._](?:id|name))?$|(?:^|[._])model_name$"
    OUTPUT_TEXT_KEY: Final = r"(?:^|[._])(?:response|output|completion)[._]text$"
    # the parts of one call in a generic tool-call list
    CALL_NAME_FIELDS: Final = ("name", "toolName", "tool_name", "function.name")
    CALL_ID_FIELDS: Final = ("id", "toolCallId", "tool_call_id", "call_id", "callId")
    CALL_ARGS_FIELDS: Final = ("arguments", "args", "input", "parameters", "function.arguments")


class Monitor:
    """Our own attributes (offline evaluation keys, decode markers)."""

    CASE_ID: Final = "monitor.eval.case_id"
    TURN: Final = "monitor.eval.turn"
    RUN: Final = "monitor.eval.run"
    KEPT_ATTRIBUTES: Final = (CASE_ID, TURN, RUN)  # kept from the root span (resource attributes are kept anyway)
    MAX_KEPT_VALUE_CHARS: Final = 256  # resource attribute values are kept up to this length


EXECUTE_TOOL_SPAN_PREFIX: Final = "execute_tool "
INVOKE_AGENT_SPAN_PREFIX: Final = "invoke_agent "
