"""A run as the store keeps it to be looked at: :func:`summarize` (pure).

The kept run is :func:`~monitor.trajectory.serialize.run_to_json` of the run without its nested runs (each of
those is kept on its own when it is scored; ``children`` becomes the list of their run ids), made safe and small:

* **redacted** — in call arguments and results, and in the parts of messages, every value under a key matching
  the ``redact`` pattern is replaced by :data:`REDACTED` (at any depth); a ``hook`` (the user's own function)
  then gets the whole document and returns it redacted further;
* **capped** — every string longer than ``max_field_chars`` is cut with a ``[truncated N chars]`` marker, and
  only the first ``max_calls`` calls are kept (``calls_kept`` / ``calls_total`` say so).

:func:`~monitor.trajectory.serialize.run_from_json` reads it back (``monitor show`` prints it as ``inspect``
does). :func:`tool_definitions` lists the tools a run offered with a hash of each definition.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from monitor.trajectory.model import Run, ToolDef
from monitor.trajectory.serialize import run_to_json

__all__ = ["REDACTED", "ToolDefinition", "summarize", "tool_definitions"]

REDACTED: Final = "[redacted]"

Hook = Callable[[dict[str, Any]], dict[str, Any]]


def _cap(value: Any, limit: int) -> Any:
    """``value`` with every string longer than ``limit`` cut (tuples and mappings become lists and dicts). Copy on
    write: a dict or list with nothing to cut is returned as it is, so the common case allocates nothing."""
    kind = type(value)
    if kind is str:
        return value if len(value) <= limit else f"{value[:limit]}[truncated {len(value) - limit} chars]"
    if kind is dict:
        out: dict[Any, Any] | None = None
        for k, v in value.items():
            if type(v) in _SCALARS:
                continue
            capped = _cap(v, limit)
            if capped is not v:
                if out is None:
                    out = dict(value)
                out[k] = capped
        return value if out is None else out
    if kind is list:
        items: list[Any] | None = None
        for i, v in enumerate(value):
            if type(v) in _SCALARS:
                continue
            capped = _cap(v, limit)
            if capped is not v:
                if items is None:
                    items = list(value)
                items[i] = capped
        return value if items is None else items
    if isinstance(value, str):  # a str subclass
        return _cap(str(value), limit)
    if isinstance(value, Mapping):
        return _cap(dict(value), limit) if kind is not dict else value
    if isinstance(value, tuple):
        return _cap(list(value), limit)
    return value


_SCALARS: Final = frozenset({int, float, bool, type(None)})


def _redact(value: Any, pattern: re.Pattern[str]) -> Any:
    if isinstance(value, Mapping):
        return {k: REDACTED if pattern.search(str(k)) else _redact(v, pattern) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_redact(v, pattern) for v in value]
    return value


def _redact_json_text(text: str, pattern: re.Pattern[str]) -> str:
    """Arguments kept as raw JSON text (malformed, or a string holding JSON) are redacted when they parse."""
    try:
        decoded = json.loads(text)
    except ValueError:
        return text
    if not isinstance(decoded, dict | list):
        return text
    return json.dumps(_redact(decoded, pattern), ensure_ascii=False)


def summarize(
    run: Run,
    *,
    max_field_chars: int = 2000,
    max_calls: int = 200,
    redact: re.Pattern[str] | None = None,
    hook: Hook | None = None,
) -> dict[str, Any]:
    """The kept form of ``run`` (module docstring), a JSON-ready dict."""
    doc = run_to_json(run)
    doc["children"] = [child.run_id for child in run.children]
    calls = doc["calls"]
    doc["calls_total"] = len(calls)
    doc["calls"] = calls[:max_calls]
    doc["calls_kept"] = len(doc["calls"])
    if redact is not None:
        for call in doc["calls"]:
            for key in ("args", "result", "args_raw", "result_raw"):
                if key not in call:
                    continue
                value = call[key]
                call[key] = _redact_json_text(value, redact) if isinstance(value, str) else _redact(value, redact)
        for step in doc["steps"]:
            step["tool_calls"] = _redact(step["tool_calls"], redact)
        if doc.get("user_input") is not None:
            doc["user_input"] = _redact(doc["user_input"], redact)
    if hook is not None:
        doc = hook(doc)
    capped: dict[str, Any] = _cap(doc, max_field_chars)
    return capped


@dataclass(frozen=True, slots=True)
class ToolDefinition:
    """A tool an agent offered: its name, description and input schema, and ``definition_hash`` (SHA-256 of the
    canonical JSON of the three) so that a changed description is a new definition."""

    agent: str
    name: str
    description: str | None
    input_schema: Any
    definition_hash: str


def _offered(run: Run) -> Iterator[ToolDef]:
    if run.tools_offered is not None:
        yield from run.tools_offered
    for step in run.steps:
        if step.tools_offered is not None:
            yield from step.tools_offered


def tool_definitions(run: Run) -> list[ToolDefinition]:
    """Every distinct tool definition ``run`` offered (its own, not its nested runs'), in first-seen order."""
    seen: dict[tuple[str, str], ToolDefinition] = {}
    for tool in _offered(run):
        material = json.dumps(
            {"name": tool.name, "description": tool.description, "input_schema": tool.input_schema},
            sort_keys=True,
            ensure_ascii=False,
            default=str,
        )
        digest = hashlib.sha256(material.encode("utf-8")).hexdigest()
        key = (tool.name, digest)
        if key not in seen:
            seen[key] = ToolDefinition(run.agent or "", tool.name, tool.description, tool.input_schema, digest)
    return list(seen.values())
