"""Helpers shared by the reference-free checks of SCORING.md §3.

Everything here is pure and cheap: the checks run on every closed run.

* :class:`CheckParams` — the parameters every check accepts (view, threshold 1.0, tool filter);
* :func:`check_calls` — the §1.3 view narrowed by the ``tools`` / ``exclude_tools`` filter;
* :class:`Definitions` — the §3.1 / §3.2 definition lookup (emitting step → owning run →
  configured catalogue), which maps each call of a flattened view back to the run that owns it;
* :func:`call_error` — §3.3's "did this call error" (re-exported from
  :mod:`monitor.trajectory.errors`, where the sampler reads it too);
* :func:`truncate_value`, :func:`json_pointer`, :func:`matches_any`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

import pydantic

from monitor.scoring.base import Scorer, Threshold, ViewParams
from monitor.trajectory.errors import MCP_TOOL_ERROR, call_error
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall, ToolDef

__all__ = [
    "ACTUAL_MAX_CHARS",
    "DETAIL_MAX_CHARS",
    "MCP_TOOL_ERROR",
    "CheckParams",
    "DefinitionSource",
    "Definitions",
    "call_error",
    "check_calls",
    "first_by_name",
    "json_pointer",
    "matches_any",
    "truncate_text",
    "truncate_value",
]

ACTUAL_MAX_CHARS = 200
"""§3.1: offending values in issues are truncated to 200 characters."""

DETAIL_MAX_CHARS = 500
"""§3.3: error messages are kept to 500 characters (also the cap for validator messages)."""


class CheckParams(ViewParams):
    """Parameters shared by every §3 check.

    ``threshold`` defaults to 1.0 (§3: a check passes iff no issue of severity ``error``; every
    check keeps ``score == 1.0`` exactly when it has no such issue, so ``score >= 1.0`` is that rule).
    ``tools`` / ``exclude_tools`` are ``fnmatchcase`` patterns narrowing the calls the check sees
    (None = every call); they give per-tool scorer instances (§3.9 "optionally per tool").
    """

    threshold: Threshold | None = 1.0
    tools: tuple[str, ...] | None = None
    exclude_tools: tuple[str, ...] = ()

    @pydantic.field_validator("tools", "exclude_tools", mode="before")
    @classmethod
    def _single_pattern(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


def matches_any(name: str, patterns: Iterable[str]) -> str | None:
    """The first pattern (exact name or ``fnmatchcase`` glob) matching ``name``, else None."""
    for pattern in patterns:
        if pattern == name or fnmatchcase(name, pattern):
            return pattern
    return None


def check_calls(scorer: Scorer[Any], run: Run) -> tuple[ToolCall, ...]:
    """The run's calls through the scorer's view, narrowed by its ``tools`` / ``exclude_tools``.

    Indexes stay those of the full view, so ``call_index`` in issues always points into
    ``view(run, calls_source, scope)``.
    """
    calls = scorer.calls(run)
    params = scorer.params
    include: tuple[str, ...] | None = getattr(params, "tools", None)
    exclude: tuple[str, ...] = getattr(params, "exclude_tools", ())
    if include is None and not exclude:
        return calls
    return tuple(
        c
        for c in calls
        if (include is None or matches_any(c.name, include) is not None) and matches_any(c.name, exclude) is None
    )


def truncate_text(text: str, limit: int = DETAIL_MAX_CHARS) -> str:
    return text if len(text) <= limit else text[:limit]


def truncate_value(value: Any, limit: int = ACTUAL_MAX_CHARS) -> Any:
    """A JSON value fit for an issue's ``actual``: scalars kept, strings cut to ``limit`` chars,
    containers kept when their JSON text fits, else that text cut to ``limit`` chars."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return truncate_text(value, limit)
    if isinstance(value, Malformed):
        return truncate_text(value.raw, limit)
    if value is ABSENT:
        return None
    try:
        text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError):
        text = repr(value)
    return value if len(text) <= limit else text[:limit]


def json_pointer(path: Iterable[Any]) -> str:
    """RFC 6901 JSON Pointer of a path (``["filters", 0, "op"]`` → ``/filters/0/op``; root → ``""``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


# --------------------------------------------------------------------------- definitions (§3.1, §3.2)


@dataclass(frozen=True, slots=True)
class DefinitionSource:
    """The definitions that apply to one call and where they came from (``step``/``run``/``catalogue``)."""

    origin: str
    tools: tuple[ToolDef, ...]


_CallKey = tuple[int, str | None, int | None, int | None, str | None, str, int | None, str | None]


def _key(call: ToolCall, depth: int) -> _CallKey:
    return (depth, call.span_id, call.step, call.part, call.call_id, call.name, call.start_ns, call.agent)


class Definitions:
    """The §3.1 step 1 / §3.2 lookup for the calls of one run's view.

    For a call: the ``tools_offered`` of the step that emitted it (in the run owning the call, which
    for a flattened view may be a nested run) when known; else the owning run's ``tools_offered``;
    else the configured catalogue (``Expectation.catalogue``); else None (definitions unknown).
    A call whose owner cannot be identified unambiguously uses the scored run as owner.
    """

    __slots__ = ("_catalogue", "_owners", "_root", "_steps")

    def __init__(self, run: Run, catalogue: tuple[ToolDef, ...] | None) -> None:
        self._root = run
        self._catalogue = catalogue
        self._owners: dict[_CallKey, Run | None] = {}
        self._steps: dict[int, dict[int, tuple[ToolDef, ...] | None]] = {}
        self._index(run, 0)

    def _index(self, run: Run, depth: int) -> None:
        for call in run.calls:
            key = _key(call, depth + call.depth)
            if key in self._owners and self._owners[key] is not run:
                self._owners[key] = None  # ambiguous
            else:
                self._owners[key] = run
        for child in run.children:
            self._index(child, depth + 1)

    def owner(self, call: ToolCall) -> Run:
        """The run that owns ``call`` (the scored run when unknown or ambiguous)."""
        return self._owners.get(_key(call, call.depth)) or self._root

    def _step_tools(self, run: Run, step: int) -> tuple[ToolDef, ...] | None:
        table = self._steps.get(id(run))
        if table is None:
            table = {s.index: s.tools_offered for s in run.steps}
            self._steps[id(run)] = table
        return table.get(step)

    def source(self, call: ToolCall) -> DefinitionSource | None:
        owner = self.owner(call)
        if call.step is not None:
            step_tools = self._step_tools(owner, call.step)
            if step_tools is not None:
                return DefinitionSource("step", step_tools)
        if owner.tools_offered is not None:
            return DefinitionSource("run", owner.tools_offered)
        if self._catalogue is not None:
            return DefinitionSource("catalogue", self._catalogue)
        return None

    def any_known(self, calls: Sequence[ToolCall]) -> bool:
        return any(self.source(c) is not None for c in calls)


def first_by_name(tools: Sequence[ToolDef]) -> tuple[dict[str, ToolDef], set[str]]:
    """Name → first definition (§3.1: first wins), and the names defined twice with different schemas."""
    table: dict[str, ToolDef] = {}
    conflicts: set[str] = set()
    for tool in tools:
        seen = table.get(tool.name)
        if seen is None:
            table[tool.name] = tool
        elif seen.input_schema != tool.input_schema:
            conflicts.add(tool.name)
    return table, conflicts
