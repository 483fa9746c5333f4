"""The common protocol of the LLM judges (SCORING.md §4.0), as pure code.

* :class:`JudgeConfig` — the ``judge`` settings a judge reads (model, ``max_tokens``, cache TTL, field and
  input limits), taken from any object with those attributes (:meth:`JudgeConfig.from_settings`).
* Rendering: canonical JSON (RFC 8785, :func:`jcs`), field truncation (:func:`truncate`, ``[truncated N
  chars]``), the trajectory lines (:func:`render_call`: ``[i] name JCS(args) -> result | ERROR type: message``),
  the S2 tool catalogue (:func:`render_catalogue`) and the user message with middle-line elision when the
  estimate (3.5 chars/token) exceeds ``max_input_tokens`` (:func:`render_user_message`).
* The Messages API request body as a plain dict (:func:`build_request`): forced ``submit_verdict`` tool,
  ``temperature: 0``, static system blocks with ``cache_control``.
* Verdict validation with ``jsonschema`` Draft 2020-12 (:func:`schema_errors`) and the exchange state machine
  (:class:`Exchange`): a response either ends the exchange with a verdict, asks for one more request (one
  repair retry; one retry with doubled ``max_tokens`` on ``stop_reason == "max_tokens"``), or fails
  (``judge_output_invalid``).

Nothing here does I/O or imports an LLM client: the caller sends the bodies (``monitor.judging.runner``).
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import jsonschema

from monitor.scoring.base import canonical_json
from monitor.trajectory.errors import call_error
from monitor.trajectory.model import ABSENT, Malformed, ToolCall, ToolDef

__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_MODEL",
    "VERDICT_TOOL",
    "Block",
    "Done",
    "Exchange",
    "Failed",
    "JudgeConfig",
    "Retry",
    "Step",
    "build_request",
    "jcs",
    "render_call",
    "render_catalogue",
    "render_user_message",
    "round_half_up_2",
    "schema_errors",
    "truncate",
    "value_text",
]

VERDICT_TOOL: Final = "submit_verdict"
"""The one tool every judge request offers and forces."""

CHARS_PER_TOKEN: Final = 3.5
"""§4.0: the input size estimate used for elision."""

DEFAULT_MODEL: Final = "claude-sonnet-4-6"  # the `judge.model` setting's default
"""Used only when the settings name no model (the ``judge`` settings section normally does)."""

NOT_CAPTURED: Final = "<not captured>"


# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True, slots=True)
class JudgeConfig:
    """What a judge request depends on besides the run (the ``judge`` settings section)."""

    model: str = DEFAULT_MODEL
    max_tokens: int = 1024
    cache_ttl: Literal["5m", "1h"] = "5m"
    max_field_chars: int = 2000
    max_input_tokens: int = 30_000
    batch: bool = False
    strict_tools: bool = False
    """Send ``strict: true`` on the verdict tool (only for models that support strict tool use)."""

    @classmethod
    def from_settings(cls, settings: Any, kind: str | None = None, model: str | None = None) -> JudgeConfig:
        """From the full settings (``settings.judge``) or the judge section itself; missing attributes keep
        their defaults. Model: ``model`` (the scorer's parameter), else ``models[kind]``, else ``model``."""
        section = getattr(settings, "judge", settings)
        if section is None:
            return cls() if model is None else cls(model=model)

        def get(name: str, default: Any) -> Any:
            value = section.get(name, default) if isinstance(section, Mapping) else getattr(section, name, default)
            return default if value is None else value

        per_kind = get("models", {})
        chosen = model or (per_kind.get(kind) if isinstance(per_kind, Mapping) and kind else None)
        ttl = str(get("cache_ttl", "5m"))
        return cls(
            model=str(chosen or get("model", DEFAULT_MODEL)),
            max_tokens=int(get("max_tokens", 1024)),
            cache_ttl="1h" if ttl == "1h" else "5m",
            max_field_chars=int(get("max_field_chars", 2000)),
            max_input_tokens=int(get("max_input_tokens", 30_000)),
            batch=bool(get("batch", False)),
            strict_tools=bool(get("strict_tools", False)),
        )


# --------------------------------------------------------------------------- rendering


def jcs(value: Any) -> str:
    """RFC 8785 canonical JSON of a decoded JSON value; a value JCS cannot encode (NaN, a non-JSON
    object) falls back to sorted-key ``json.dumps`` so that rendering never fails."""
    try:
        return canonical_json(value)
    except (TypeError, ValueError):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)


def truncate(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters with a ``[truncated N chars]`` marker (N = characters dropped)."""
    if limit <= 0 or len(text) <= limit:
        return text
    return f"{text[:limit]}[truncated {len(text) - limit} chars]"


def value_text(value: Any, limit: int) -> str:
    """A captured value as prompt text: ABSENT → ``<not captured>``, Malformed → its raw text, a string
    as is, any other JSON value in canonical form; truncated to ``limit``."""
    if value is ABSENT:
        return NOT_CAPTURED
    if isinstance(value, Malformed):
        return truncate(value.raw, limit)
    if isinstance(value, str):
        return truncate(value, limit)
    return truncate(jcs(value), limit)


def render_call(call: ToolCall, limit: int, *, index: int | None = None, result: bool = True) -> str:
    """``[i] name JCS(args) -> result`` or ``… -> ERROR type: message`` (§4.0); args ``<not captured>``
    when ABSENT. ``result=False`` stops after the arguments (reference trajectories, argument lists)."""
    i = call.index if index is None else index
    line = f"[{i}] {call.name} {value_text(call.args, limit)}"
    if not result:
        return line
    error = call_error(call)
    if error is not None:
        return f"{line} -> ERROR {error.type}: {truncate(error.message, limit)}"
    return f"{line} -> {value_text(call.result, limit)}"


def render_catalogue(tools: Sequence[ToolDef] | None, limit: int) -> str:
    """Block S2: one line per tool ``name: description`` and its canonical ``input_schema``, sorted by name
    (the first definition of a name wins)."""
    if tools is None:
        return "<tools>\n(tool definitions were not captured)\n</tools>"
    by_name: dict[str, ToolDef] = {}
    for tool in tools:
        by_name.setdefault(tool.name, tool)
    lines = ["<tools>"]
    for name in sorted(by_name):
        tool = by_name[name]
        lines.append(f"{name}: {truncate(' '.join((tool.description or '').split()), limit)}")
        if tool.input_schema is not None:
            lines.append(f"  input_schema: {jcs(tool.input_schema)}")
    if not by_name:
        lines.append("(no tools were offered)")
    lines.append("</tools>")
    return "\n".join(lines)


@dataclass(frozen=True, slots=True)
class Block:
    """One XML-tagged block of the user message. ``lines`` of an ``elidable`` block (the trajectory) may
    lose middle lines when the message is too long."""

    tag: str
    lines: tuple[str, ...]
    elidable: bool = False

    @staticmethod
    def text(tag: str, text: str) -> Block:
        return Block(tag, (text,))


def _join(blocks: Sequence[Block]) -> str:
    return "\n\n".join(f"<{b.tag}>\n" + "\n".join(b.lines) + f"\n</{b.tag}>" for b in blocks)


def _elided(lines: Sequence[str], keep: int) -> tuple[str, ...]:
    """The first and last lines of ``lines`` (``keep`` in all) around a marker naming the elided count."""
    drop = len(lines) - keep
    head = (keep + 1) // 2
    tail = keep - head
    marker = f"[… {drop} calls elided …]"
    return (*lines[:head], marker, *lines[len(lines) - tail :])


def render_user_message(blocks: Sequence[Block], max_input_tokens: int) -> tuple[str, bool]:
    """The user message text and whether middle lines were elided (``details.truncated``).

    While the estimate (characters / 3.5) exceeds ``max_input_tokens``, middle lines of the elidable
    blocks are replaced by one marker (fewest lines dropped that fit; at least the first and last line
    are kept)."""
    text = _join(blocks)
    budget = max_input_tokens * CHARS_PER_TOKEN
    if len(text) <= budget:
        return text, False
    longest = max((len(b.lines) for b in blocks if b.elidable), default=0)
    for keep in range(longest - 1, 1, -1):
        trimmed = [
            Block(b.tag, _elided(b.lines, keep), True) if b.elidable and len(b.lines) > keep else b for b in blocks
        ]
        text = _join(trimmed)
        if len(text) <= budget:
            return text, True
    trimmed = [Block(b.tag, _elided(b.lines, 2), True) if b.elidable and len(b.lines) > 2 else b for b in blocks]
    return _join(trimmed), longest > 2


# --------------------------------------------------------------------------- the request


def build_request(
    config: JudgeConfig,
    system: Sequence[str],
    user: str,
    verdict_schema: Mapping[str, Any],
    *,
    tool_description: str = "Submit your verdict. Call this tool exactly once.",
) -> dict[str, Any]:
    """The Messages API body (§4.0): forced ``submit_verdict`` with the verdict schema, ``temperature: 0``,
    every static ``system`` block with ``cache_control`` (TTL ``1h`` when configured), one user message."""
    cache: dict[str, Any] = {"type": "ephemeral"}
    if config.cache_ttl == "1h":
        cache["ttl"] = "1h"
    tool: dict[str, Any] = {
        "name": VERDICT_TOOL,
        "description": tool_description,
        "input_schema": copy.deepcopy(dict(verdict_schema)),
    }
    if config.strict_tools:
        tool["strict"] = True
    return {
        "model": config.model,
        "max_tokens": config.max_tokens,
        "temperature": 0,
        "tools": [tool],
        "tool_choice": {"type": "tool", "name": VERDICT_TOOL, "disable_parallel_tool_use": True},
        "system": [{"type": "text", "text": text, "cache_control": dict(cache)} for text in system],
        "messages": [{"role": "user", "content": [{"type": "text", "text": user}]}],
    }


# --------------------------------------------------------------------------- verdicts


def schema_errors(schema: Mapping[str, Any], instance: Any) -> str | None:
    """The validation errors of ``instance`` against ``schema`` (Draft 2020-12) as one message, or None."""
    validator = jsonschema.Draft202012Validator(dict(schema))
    errors = sorted(validator.iter_errors(instance), key=lambda e: (list(e.absolute_path), e.message))
    if not errors:
        return None
    parts = []
    for err in errors[:5]:
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        parts.append(f"at {where}: {err.message}")
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


Validate = Callable[[Any], str | None]
"""A verdict check: None when the verdict is valid, else the message the repair retry sends."""


@dataclass(frozen=True, slots=True)
class Done:
    """The exchange ended with a valid verdict."""

    verdict: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Retry:
    """Send this body next."""

    body: dict[str, Any]
    why: Literal["repair", "max_tokens"]


@dataclass(frozen=True, slots=True)
class Failed:
    """The exchange failed: ``status=error, reason=judge_output_invalid``."""

    detail: str
    reason: str = "judge_output_invalid"


Step = Done | Retry | Failed


def _assistant_content(content: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The response's blocks as they go back into the conversation (text and tool_use only)."""
    out: list[dict[str, Any]] = []
    for block in content:
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            out.append({"type": "text", "text": str(block["text"])})
        elif kind == "tool_use":
            out.append(
                {"type": "tool_use", "id": block.get("id"), "name": block.get("name"), "input": block.get("input")}
            )
    return out


@dataclass(slots=True)
class Exchange:
    """The state machine of one verdict (§4.0). Feed each response (a dict with ``content``,
    ``stop_reason``, ``usage``) to :meth:`advance`; it answers :class:`Done`, :class:`Retry` or
    :class:`Failed`. At most one repair retry and one ``max_tokens`` retry per exchange."""

    body: dict[str, Any]
    validate: Validate
    repaired: bool = False
    expanded: bool = False
    history: list[str] = field(default_factory=list)

    def advance(self, response: Mapping[str, Any]) -> Step:
        content = [b for b in response.get("content") or [] if isinstance(b, Mapping)]
        if response.get("stop_reason") == "max_tokens":
            if self.expanded:
                self.history.append("max_tokens")
                return Failed("the verdict was cut off at max_tokens twice")
            self.expanded = True
            self.body = {**self.body, "max_tokens": int(self.body["max_tokens"]) * 2}
            self.history.append("max_tokens")
            return Retry(self.body, "max_tokens")
        uses = [b for b in content if b.get("type") == "tool_use" and b.get("name") == VERDICT_TOOL]
        problem: str | None
        if not uses:
            problem = f"no {VERDICT_TOOL} tool_use block in the answer"
        else:
            verdict = uses[0].get("input")
            problem = self.validate(verdict)
            if problem is None and isinstance(verdict, dict):
                return Done(verdict)
        problem = problem or "the verdict is not a JSON object"
        self.history.append(problem)
        if self.repaired:
            return Failed(problem)
        self.repaired = True
        message = (
            f"Your verdict is invalid: {problem}. Call {VERDICT_TOOL} again with a corrected verdict that follows "
            "its input schema and the instructions."
        )
        followup: list[dict[str, Any]] = [
            {"type": "tool_result", "tool_use_id": u.get("id"), "content": message, "is_error": True} for u in uses[:1]
        ]
        if not followup:
            followup.append({"type": "text", "text": message})
        assistant = _assistant_content(content) or [{"type": "text", "text": "(no answer)"}]
        messages = [*self.body["messages"], {"role": "assistant", "content": assistant}]
        messages.append({"role": "user", "content": followup})
        self.body = {**self.body, "messages": messages}
        return Retry(self.body, "repair")


def round_half_up_2(x: float) -> float:
    """Mastra's ``Math.round((x + Number.EPSILON) * 100) / 100`` (half-up)."""
    return math.floor((x + 2.220446049250313e-16) * 100 + 0.5) / 100
