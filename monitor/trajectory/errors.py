"""Did a tool call error? (SCORING.md §3.3) — a fact about a call of the trajectory.

The trajectory builder already fills ``ToolCall.error`` from span status, ``error.type``, the
``exception`` event, strands' ``gen_ai.tool.status`` and pydantic-ai's failure attribute (in that
order); :func:`call_error` adds the last rule, a result that is an MCP ``CallToolResult`` with
``isError: true``. The reference-free checks (:mod:`monitor.scoring.checks`) and the sampler's
``always_if_errored`` rule (:mod:`monitor.sampling`) both read it from here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from monitor.trajectory.model import ToolCall, ToolError
from monitor.trajectory.semconv import MCP

__all__ = ["ERROR_MESSAGE_MAX_CHARS", "MCP_TOOL_ERROR", "call_error"]

MCP_TOOL_ERROR: Final = "MCP_TOOL_ERROR"
"""``error.type`` given to a call whose result is an MCP ``CallToolResult`` with ``isError: true``."""

ERROR_MESSAGE_MAX_CHARS: Final = 500
"""§3.3: error messages are kept to 500 characters."""


def _result_text(result: Mapping[str, Any]) -> str:
    content = result.get("content")
    if not isinstance(content, list):
        return ""
    texts = [
        str(part.get("text"))
        for part in content
        if isinstance(part, Mapping) and part.get("type") == "text" and part.get("text")
    ]
    return "\n".join(texts)


def call_error(call: ToolCall) -> ToolError | None:
    """§3.3: the call's error, or None.

    ``ToolCall.error`` when the builder set it; else, for a result that is an MCP
    ``CallToolResult`` with ``isError: true``, an error of type :data:`MCP_TOOL_ERROR` whose message
    is the result's text content (cut to :data:`ERROR_MESSAGE_MAX_CHARS`).
    """
    if call.error is not None:
        return call.error
    result = call.result
    if isinstance(result, Mapping) and result.get(MCP.IS_ERROR) is True:
        return ToolError(MCP_TOOL_ERROR, _result_text(result)[:ERROR_MESSAGE_MAX_CHARS])
    return None
