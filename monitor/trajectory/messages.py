"""Parse chat messages, tool definitions and JSON content from every shape seen in agent spans.

Shapes accepted (each detected per message or per part, so mixed lists work):

* OTel GenAI ≥ 1.37: ``[{role, parts: [{type: text|tool_call|tool_call_response|…}]}]``
  (``tool_call_response`` carries ``response`` per the schema, ``result`` per the registry example
  and pydantic-ai);
* OpenAI chat: ``{role, content: str | [parts], tool_calls: [{id, function: {name, arguments}}],
  tool_call_id}``;
* Anthropic: ``{role, content: [{type: text|tool_use|tool_result, …}]}``;
* Gemini / Google ADK: ``{role: user|model, parts: [{text}|{function_call}|{function_response}]}``;
* Bedrock Converse / strands: content blocks ``[{text}|{toolUse: {…}}|{toolResult: {…}}]``;
* Vercel AI SDK: ``{role, content: [{type: text|tool-call|tool-result, toolCallId, toolName, input|args,
  output|result}]}`` (a ``tool-result`` output ``{type: json|text|error-text, value}`` is unwrapped), and a step
  result ``{text, toolCalls: [{toolCallId, toolName, input|args}]}`` (Mastra's ``model_step`` output);
* Haystack ``ChatMessage.to_dict()``: ``{role, content: [{text}|{tool_call: {…}}|{tool_call_result: {…}}]}``,
  inside ``{"replies": [...]}`` for a generator's output;
* OTel ≤ 1.36 event bodies (``{content, tool_calls}``, ``gen_ai.choice``'s ``{message: …}``);
* Python ``repr`` strings (openai-agents instrumentation), read with :func:`ast.literal_eval`.

All functions are total: unknown shapes give ``None`` or an :class:`OtherPart`, never an exception.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from monitor.trajectory.model import (
    ABSENT,
    Captured,
    Malformed,
    Message,
    Messages,
    OtherPart,
    Part,
    TextPart,
    ToolCallPart,
    ToolDef,
    ToolResultPart,
)
from monitor.trajectory.sanitize import clean_text, parse_json, storable

_ROLE_ALIASES = {
    "model": "assistant",
    "ai": "assistant",
    "human": "user",
    "function": "tool",
    "developer": "system",
}
_MAX_PARSE_CHARS = 8 * 1024 * 1024
_JSON_STARTS = frozenset('{["-0123456789tfn')
_REPR_HEAD = re.compile(r"^\[?\s*[A-Z][A-Za-z0-9_]*\(")
_REPR_TYPES = frozenset({"function_call", "message", "output_text", "function_call_output"})


def _literal(node: ast.AST) -> Any:
    """A literal from an AST node; ``Name(k=v, …)`` calls become dicts of their keywords."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.List | ast.Tuple):
        return [_literal(e) for e in node.elts]
    if isinstance(node, ast.Dict):
        return {
            _literal(k) if k is not None else None: _literal(v) for k, v in zip(node.keys, node.values, strict=True)
        }
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.args:
        return {kw.arg: _literal(kw.value) for kw in node.keywords if kw.arg is not None}
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        value = _literal(node.operand)
        return -value if isinstance(value, int | float) else None
    raise ValueError(f"not a literal: {type(node).__name__}")


def parse_object_repr(text: str) -> Any:
    """The openai SDK's pydantic reprs (``ResponseFunctionToolCall(arguments='{}', …)``), as dicts.

    The openai-agents instrumentation writes model outputs this way. Returns None unless the text is
    such a repr (or a list of them) describing a function call or an output message; nothing is
    evaluated.
    """
    if len(text) > _MAX_PARSE_CHARS or not _REPR_HEAD.match(text):
        return None
    try:
        value = storable(_literal(ast.parse(text.strip(), mode="eval").body))
    except (ValueError, SyntaxError, TypeError, RecursionError, MemoryError):
        return None
    items = value if isinstance(value, list) else [value]
    if items and all(isinstance(i, Mapping) and i.get("type") in _REPR_TYPES for i in items):
        return items
    return None


def normalize_role(role: Any, default: str = "user") -> str:
    if not isinstance(role, str) or not role:
        return default
    r = role.lower()
    return _ROLE_ALIASES.get(r, r)


def loads(value: Any) -> Any:
    """Decode a JSON string (or a Python repr string); other values are returned unchanged.

    Returns the string itself when it is neither JSON nor a Python literal.
    """
    if not isinstance(value, str):
        return value
    text = value.strip()
    if not text or text[0] not in '[{"0123456789-tfn' or len(text) > _MAX_PARSE_CHARS:
        return value
    try:
        return parse_json(text)
    except (ValueError, RecursionError):
        pass
    if text[0] in "[{":
        try:
            return storable(ast.literal_eval(text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return value
    return value


def decode_arguments(value: Any) -> Captured:
    """Tool-call arguments: ABSENT for None, decoded JSON, or :class:`Malformed` raw text.

    A JSON string that itself holds a JSON object (double encoding) is unwrapped once.
    """
    if value is None or value is ABSENT:
        return ABSENT
    if isinstance(value, bytes):  # an OTLP bytesValue: its text, made storable (no NUL)
        try:
            value = clean_text(value.decode("utf-8"))
        except UnicodeDecodeError:
            return Malformed(clean_text(value.decode("utf-8", "replace")))
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return {}
        try:
            decoded = parse_json(text)
        except (ValueError, RecursionError):
            # LangChain's input_str is the Python repr of the parsed arguments: read it, never evaluate it
            if text.startswith("{") and len(text) <= _MAX_PARSE_CHARS:
                try:
                    literal = ast.literal_eval(text)
                except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                    return Malformed(value)
                if isinstance(literal, dict) and all(isinstance(k, str) for k in literal):
                    return storable(literal)
            return Malformed(value)
        if isinstance(decoded, str) and decoded.strip().startswith("{"):
            try:
                inner = parse_json(decoded)
            except (ValueError, RecursionError):
                return decoded
            if isinstance(inner, dict):
                return inner
        return decoded
    return value


def decode_result(value: Any) -> Captured:
    """A tool result: ABSENT for None, decoded JSON when the string is JSON, else the string."""
    if value is None or value is ABSENT:
        return ABSENT
    if isinstance(value, bytes):  # an OTLP bytesValue: its text, made storable (no NUL)
        value = clean_text(value.decode("utf-8", "replace"))
    if isinstance(value, str):
        text = value.strip()
        if text[:1] in _JSON_STARTS and len(text) <= _MAX_PARSE_CHARS:
            try:
                return parse_json(text)
            except (ValueError, RecursionError):
                return value
        return value
    return value


# --------------------------------------------------------------------------- parts


def _text_of(value: Any) -> str | None:
    """The text of a content value: a string; a mapping's ``text`` or ``content`` string; the texts of
    a list's items joined with newlines (nested lists flattened, empty texts skipped). Iterative, so
    any nesting depth is safe."""
    if not isinstance(value, list):
        return _scalar_text(value)
    texts: list[str] = []
    stack: list[Iterator[Any]] = [iter(value)]
    while stack:
        item = next(stack[-1], _END)
        if item is _END:
            stack.pop()
        elif isinstance(item, list):
            stack.append(iter(item))
        elif text := _scalar_text(item):
            texts.append(text)
    return "\n".join(texts) if texts else None


_END: Any = object()


def _scalar_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping):
        for key in ("text", "content"):
            v = value.get(key)
            if isinstance(v, str):
                return v
    return None


def _parse_part(part: Any) -> list[Part]:
    if isinstance(part, str):
        return [TextPart(part)]
    if not isinstance(part, Mapping):
        return []
    ptype = part.get("type")
    if ptype in ("text", "output_text") or (ptype is None and isinstance(part.get("text"), str) and len(part) <= 3):
        text = part.get("content", part.get("text"))
        if isinstance(text, str):
            objects = parse_object_repr(text)
            if objects is not None:
                return [p for obj in objects for p in _parse_response_item(obj)]
        return [TextPart(text if isinstance(text, str) else "")]
    if ptype in ("tool_call", "function_call", "tool_use"):
        name = part.get("name")
        args = part.get("arguments", part.get("input", part.get("args", ABSENT)))
        if ptype == "function_call" and isinstance(part.get("function"), Mapping):
            name = part["function"].get("name", name)
        return [ToolCallPart(str(name or ""), _id(part.get("id") or part.get("call_id")), decode_arguments(args))]
    if ptype == "tool-call":  # Vercel AI SDK
        args = part.get("input", part.get("args", ABSENT))
        return [ToolCallPart(str(part.get("toolName") or ""), _id(part.get("toolCallId")), decode_arguments(args))]
    if ptype == "tool-result":  # Vercel AI SDK
        output = part.get("output", part.get("result", ABSENT))
        if isinstance(output, Mapping) and set(output) == {"type", "value"}:
            output = output["value"]
        name = part.get("toolName")
        return [
            ToolResultPart(_id(part.get("toolCallId")), decode_result(output), name if isinstance(name, str) else None)
        ]
    if ptype in ("tool_call_response", "tool_result", "function_call_output", "function_response"):
        response = part.get("response", part.get("result", part.get("content", part.get("output", ABSENT))))
        return [
            ToolResultPart(
                _id(part.get("id") or part.get("tool_use_id") or part.get("call_id")),
                decode_result(response),
                part.get("name") if isinstance(part.get("name"), str) else None,
            )
        ]
    # Gemini / ADK parts
    fc = part.get("function_call") or part.get("functionCall")
    if isinstance(fc, Mapping):
        return [ToolCallPart(str(fc.get("name") or ""), _id(fc.get("id")), decode_arguments(fc.get("args", {})))]
    fr = part.get("function_response") or part.get("functionResponse")
    if isinstance(fr, Mapping):
        name = fr.get("name")
        return [
            ToolResultPart(
                _id(fr.get("id")), decode_result(fr.get("response")), name if isinstance(name, str) else None
            )
        ]
    # Haystack ChatMessage content
    hc = part.get("tool_call")
    if ptype is None and isinstance(hc, Mapping):
        name = hc.get("tool_name")
        return [ToolCallPart(str(name or ""), _id(hc.get("id")), decode_arguments(hc.get("arguments", ABSENT)))]
    hr = part.get("tool_call_result")
    if ptype is None and isinstance(hr, Mapping):
        origin = hr.get("origin")
        if not isinstance(origin, Mapping):
            origin = {}
        name = origin.get("tool_name")
        return [
            ToolResultPart(
                _id(origin.get("id")), decode_result(hr.get("result")), name if isinstance(name, str) else None
            )
        ]
    # Bedrock Converse / strands blocks
    tu = part.get("toolUse")
    if isinstance(tu, Mapping):
        return [
            ToolCallPart(str(tu.get("name") or ""), _id(tu.get("toolUseId")), decode_arguments(tu.get("input", {})))
        ]
    tr = part.get("toolResult")
    if isinstance(tr, Mapping):
        return [ToolResultPart(_id(tr.get("toolUseId")), decode_result(tr.get("content")))]
    if ptype is None and isinstance(part.get("text"), str):
        return [TextPart(part["text"])]
    if isinstance(ptype, str):
        content = part.get("content")
        return [OtherPart(ptype, content if isinstance(content, str) else None)]
    return []


def _parse_response_item(item: Mapping[str, Any]) -> list[Part]:
    """One OpenAI Responses output item (``function_call`` or ``message``)."""
    itype = item.get("type")
    if itype == "function_call":
        return [
            ToolCallPart(
                str(item.get("name") or ""),
                _id(item.get("call_id") or item.get("id")),
                decode_arguments(item.get("arguments")),
            )
        ]
    if itype == "message":
        return _parts_of(item.get("content"))
    return _parse_part(item)


def _id(value: Any) -> str | None:
    if isinstance(value, str):
        value = value.strip()
        return value or None
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return None


def _openai_tool_calls(calls: Any) -> list[Part]:
    parts: list[Part] = []
    if not isinstance(calls, list):
        return parts
    for call in calls:
        if not isinstance(call, Mapping):
            continue
        fn = call.get("function")
        if isinstance(fn, Mapping):
            parts.append(
                ToolCallPart(str(fn.get("name") or ""), _id(call.get("id")), decode_arguments(fn.get("arguments")))
            )
        elif "name" in call:
            args = call.get("arguments", call.get("args", call.get("input", ABSENT)))
            parts.append(ToolCallPart(str(call.get("name") or ""), _id(call.get("id")), decode_arguments(args)))
    return parts


def _step_result_parts(obj: Mapping[str, Any]) -> list[Part]:
    """A Vercel AI SDK step result ``{text, toolCalls: [{toolCallId, toolName, input | args}]}`` (Mastra writes it
    as its ``model_step`` span's output): its text, then its calls in the order the model emitted them."""
    text = obj.get("text")
    parts: list[Part] = [TextPart(text)] if isinstance(text, str) and text else []
    for call in obj["toolCalls"]:
        if isinstance(call, Mapping):
            args = call.get("input", call.get("args", ABSENT))
            parts.append(
                ToolCallPart(str(call.get("toolName") or ""), _id(call.get("toolCallId")), decode_arguments(args))
            )
    return parts


ELIDED = "<elided>"  # content placeholder of instrumentations with capture off (ADK, OTel contrib)


def parse_message(obj: Any, default_role: str = "user") -> Message | None:
    """One message in any supported shape; None when ``obj`` is not a message (or its content was
    elided by an instrumentation that does not capture content)."""
    obj = loads(obj)
    while isinstance(obj, Mapping) and "message" in obj and "role" not in obj:
        inner = loads(obj["message"])  # gen_ai.choice body / strands event attribute (unwrapped in a loop)
        if isinstance(inner, list):
            return Message(normalize_role(obj.get("role"), "assistant"), tuple(_parts_of(inner)))
        if not isinstance(inner, Mapping) or obj.get("content") == ELIDED:
            break
        obj, default_role = inner, "assistant"
    if obj == ELIDED or (isinstance(obj, Mapping) and obj.get("content") == ELIDED):
        return None
    if isinstance(obj, str):
        return Message(default_role, (TextPart(obj),))
    if not isinstance(obj, Mapping):
        return None
    if obj.get("type") == "function_call" and "role" not in obj:  # OpenAI Responses output item
        return Message("assistant", tuple(_parse_part(obj)))
    if obj.get("type") == "function_call_output" and "role" not in obj:
        return Message("tool", tuple(_parse_part(obj)))
    if "role" not in obj and isinstance(obj.get("toolCalls"), list):  # a Vercel AI SDK step result (Mastra)
        return Message("assistant", tuple(_step_result_parts(obj)))
    lc = _langchain_message(obj)
    if lc is not None:
        obj = lc
    role = normalize_role(obj.get("role"), default_role)
    parts: list[Part] = []
    if "parts" in obj:
        parts.extend(_parts_of(loads(obj["parts"])))
    content = loads(obj.get("content")) if "content" in obj else None
    if isinstance(content, str):
        if content:
            parts.append(TextPart(content))
    elif isinstance(content, list):
        parts.extend(_parts_of(content))
    elif isinstance(content, Mapping):
        parts.extend(_parse_part(content))
    parts.extend(_openai_tool_calls(obj.get("tool_calls")))
    if (role == "tool" and obj.get("tool_call_id") is not None) or (role == "tool" and "id" in obj and not parts):
        text = _text_of(content)
        parts = [
            ToolResultPart(
                _id(obj.get("tool_call_id") or obj.get("id")), decode_result(text if text is not None else content)
            )
        ]
    return Message(role, tuple(parts))


_LANGCHAIN_ROLES = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system", "function": "tool"}
_LANGCHAIN_CLASSES = {
    "HumanMessage": "user",
    "AIMessage": "assistant",
    "AIMessageChunk": "assistant",
    "ToolMessage": "tool",
    "SystemMessage": "system",
    "FunctionMessage": "tool",
}


def _langchain_message(obj: Mapping[str, Any]) -> dict[str, Any] | None:
    """A LangChain message in its serialized forms, as an OpenAI-style dict; None if it is not one.

    ``{"type": "ai", "data": {...}}`` (``messages_to_dict``, OpenInference) and
    ``{"lc": 1, "type": "constructor", "id": [..., "AIMessage"], "kwargs": {...}}`` (``dumpd``, OpenLLMetry).
    """
    if "role" in obj:
        return None
    body: Any = None
    role: str | None = None
    if obj.get("lc") == 1 and isinstance(obj.get("kwargs"), Mapping) and isinstance(obj.get("id"), list):
        body = obj["kwargs"]
        role = _LANGCHAIN_CLASSES.get(str(obj["id"][-1]) if obj["id"] else "")
    elif isinstance(obj.get("data"), Mapping) and obj.get("type") in _LANGCHAIN_ROLES:
        body = obj["data"]
        role = _LANGCHAIN_ROLES[str(obj["type"])]
    if body is None or role is None:
        return None
    out: dict[str, Any] = {"role": role, "content": body.get("content")}
    calls = body.get("tool_calls")
    if isinstance(calls, list) and calls:
        out["tool_calls"] = [
            {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("args", c.get("arguments"))}
            for c in calls
            if isinstance(c, Mapping)
        ]
    if role == "tool":
        out["tool_call_id"] = body.get("tool_call_id")
    return out


def langchain_tool_result(value: Any) -> Any:
    """The content of a serialized LangChain ``ToolMessage`` (OpenInference and OpenLLMetry tool outputs)."""
    if isinstance(value, Mapping):
        if "output" in value and len(value) <= 2 and isinstance(value.get("output"), Mapping):
            value = value["output"]
        lc = _langchain_message(value) if isinstance(value, Mapping) else None
        if lc is not None and lc["role"] == "tool":
            return decode_result(lc.get("content"))
        if isinstance(value, Mapping) and "tool_call_id" in value and "content" in value:
            return decode_result(value["content"])
    return value


def _parts_of(value: Any) -> list[Part]:
    out: list[Part] = []
    if isinstance(value, list):
        for part in value:
            out.extend(_parse_part(part))
    elif isinstance(value, str):
        out.append(TextPart(value))
    return out


def parse_messages(value: Any, default_role: str = "user") -> Messages | None:
    """A list of messages in any supported shape; None when absent or unrecognisable.

    A plain string becomes one message of ``default_role``; a Gemini request
    (``{"contents": [...]}``) and an OpenAI request (``{"messages": [...]}``) are unwrapped.
    """
    if value is None:
        return None
    value = loads(value)
    if isinstance(value, str):
        return (Message(default_role, (TextPart(value),)),) if value else None
    if isinstance(value, Mapping):
        if not value:  # ADK 1.x writes "{}" when content capture is off
            return None
        for key in ("messages", "contents", "input", "replies"):
            inner = loads(value.get(key))
            if isinstance(inner, list):
                return parse_messages(inner, default_role)
        if "content" in value and isinstance(value.get("content"), Mapping):  # Gemini response
            msg = parse_message(value["content"], "assistant")
            return (msg,) if msg else None
        msg = parse_message(value, default_role)
        return (msg,) if msg else None
    if isinstance(value, list):
        msgs = [m for m in (parse_message(v, default_role) for v in value) if m is not None]
        return tuple(msgs) if msgs else None
    return None


def messages_text(messages: Sequence[Message] | None, role: str = "assistant") -> str | None:
    """Text of the last message with ``role`` that has text (None if none)."""
    if not messages:
        return None
    for message in reversed(messages):
        if message.role == role and message.text:
            return message.text
    return None


# --------------------------------------------------------------------------- tool definitions


def parse_tool_definitions(value: Any, source: str) -> tuple[ToolDef, ...] | None:
    """Tool definitions from OTel (flat), OpenAI (nested ``function``), Anthropic (``input_schema``),
    Gemini (``function_declarations``), Vercel AI SDK (``inputSchema``), Haystack (``{type, data: {…}}``) or plain
    name lists. None when unrecognisable."""
    value = loads(value)
    if value is None:
        return None
    if isinstance(value, Mapping):
        if isinstance(value.get("tools"), list):
            return parse_tool_definitions(value["tools"], source)
        value = [value]
    if not isinstance(value, list):
        return None
    out: list[ToolDef] = []
    for item in value:
        item = loads(item)
        if isinstance(item, str):
            out.append(ToolDef(item, source=source))
            continue
        if not isinstance(item, Mapping):
            continue
        decls = item.get("function_declarations") or item.get("functionDeclarations")
        if isinstance(decls, list):
            nested = parse_tool_definitions(decls, source)
            out.extend(nested or ())
            continue
        fn: Mapping[str, Any] = item["function"] if isinstance(item.get("function"), Mapping) else item
        if isinstance(item.get("data"), Mapping) and "name" not in item:  # Haystack's serialized Tool
            fn = item["data"]
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        schema = fn.get("parameters", fn.get("input_schema", fn.get("inputSchema", fn.get("parameters_json_schema"))))
        schema = loads(schema)
        desc = fn.get("description")
        out.append(
            ToolDef(
                name, desc if isinstance(desc, str) else None, schema if isinstance(schema, Mapping) else None, source
            )
        )
    return tuple(out)
