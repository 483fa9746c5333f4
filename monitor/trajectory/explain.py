"""Why each span of a trace was read, or not: ``monitor inspect --explain``.

A user whose framework the key table does not read (yet) sees, span by span, what the rebuild made of its
spans and why it left some out, with the instrumentation scope and the attribute *keys* (never values: they
carry content) — enough to report a new framework in one step.

Contract of :func:`explain_spans`: one :class:`SpanNote` per unique span (the same dedupe and log join as the
rebuild), in trace order then start order; ``verdict`` is

* ``read``: a known convention gave the span its role, and the span is part of a run: a run's agent span, a
  step, a call, or a second record of a step's model call (nested in it, or its twin beside it);
* ``generic``: no known convention is seen in the span, but generic evidence made it a tool or model span;
* ``structure``: a span of a known convention that holds no run content of its own (a chain, a loop cycle, a
  span merging others);
* ``not_read``: the span gives no run anything, and ``reason`` says why.

Pure: no I/O. Never raises on content.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal, TypeAlias

from monitor.trajectory.build import dedupe_spans, join_logs
from monitor.trajectory.keytable import Role
from monitor.trajectory.model import Run
from monitor.trajectory.normalize import GENERIC, SpanFacts, normalize
from monitor.trajectory.semconv import GenAI, OpenInference, Traceloop
from monitor.trajectory.spans import LogEvent, SpanRecord

Verdict: TypeAlias = Literal["read", "generic", "structure", "not_read"]
MAX_KEYS_SHOWN: Final = 12
_KIND_KEYS: Final = (GenAI.OPERATION, OpenInference.SPAN_KIND, Traceloop.SPAN_KIND)
"""Attributes that say what a span is in the known conventions: quoted when no rule gave it a role."""


@dataclass(frozen=True, slots=True)
class SpanNote:
    """What the rebuild made of one span."""

    trace_id: str
    span_id: str
    name: str
    scope: str
    scope_version: str
    role: str
    conventions: tuple[str, ...]
    verdict: Verdict
    reason: str
    keys: tuple[str, ...]  # the span's attribute keys, sorted (values are never shown)

    def as_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "name": self.name,
            "scope": self.scope,
            "scope_version": self.scope_version,
            "role": self.role,
            "conventions": list(self.conventions),
            "verdict": self.verdict,
            "reason": self.reason,
            "keys": list(self.keys),
        }


def used_span_ids(runs: Iterable[Run]) -> set[str]:
    """Span ids a run stands on: each run's root, its model steps and its executed calls (nested runs too)."""
    used: set[str] = set()
    for top in runs:
        for run in top.walk():
            used.add(run.run_id)
            used.update(step.span_id for step in run.steps if step.span_id)
            used.update(call.span_id for call in run.calls if call.span_id)
    return used


def _keys_text(keys: tuple[str, ...]) -> str:
    shown = ", ".join(keys[:MAX_KEYS_SHOWN])
    more = len(keys) - MAX_KEYS_SHOWN
    return shown + (f" (+{more} more)" if more > 0 else "") if keys else "no attributes"


def _kind_hint(attrs: Mapping[str, Any]) -> str:
    found = [f"{k} = {attrs[k]!r}" for k in _KIND_KEYS if isinstance(attrs.get(k), str)]
    return "; ".join(found) if found else "no operation or span-kind attribute"


def _enclosing(span: SpanRecord, facts: Mapping[str, SpanFacts]) -> SpanFacts | None:
    """The nearest ancestor of ``span`` that is a model or tool span (None at the root; parent cycles end it)."""
    seen = {span.span_id}
    parent = span.parent_span_id
    while parent is not None and parent in facts and parent not in seen:
        seen.add(parent)
        f = facts[parent]
        if f.role in (Role.LLM, Role.TOOL):
            return f
        parent = f.span.parent_span_id
    return None


def _not_used(f: SpanFacts, facts: Mapping[str, SpanFacts]) -> tuple[Verdict, str]:
    """A model or tool span that is no step or call of a run: merged into one, or the work of a tool."""
    outer = _enclosing(f.span, facts)
    what = "model" if f.role is Role.LLM else "tool"
    if outer is not None and outer.role is Role.TOOL:
        return "not_read", f"a {what} span inside tool span {outer.span_id} ('{outer.tool_name}'): the tool's own work"
    if outer is not None:
        return "read", f"the same model call as the model span {outer.span_id} around it (one step)"
    if f.role is Role.LLM:
        return "read", "a second record of a model call beside it (merged into one step)"
    return "not_read", "a tool span that is no call of any run"


def _note(f: SpanFacts, used: set[str], facts: Mapping[str, SpanFacts]) -> tuple[Verdict, str]:
    span = f.span
    keys = tuple(sorted(span.attributes))
    conventions = ", ".join(sorted(f.conventions))
    if f.role is Role.OTHER:
        if span.span_id in used:
            return "structure", "the outermost span around a run's model and tool spans: the run's root"
        if not f.conventions:
            return "not_read", (
                f"no known convention: scope '{span.scope_name or '-'}' and keys ({_keys_text(keys)}) match none, "
                "and no generic evidence (a key naming a tool beside an input or output key; a list of tool calls; "
                "a model key beside a response-text key)"
            )
        return "structure", f"speaks {conventions}, no role of its own ({_kind_hint(span.attributes)})"
    if f.role is Role.SYNTHETIC:
        return "structure", "a span that merges other tool spans (ADK's parallel tools): not a call of its own"
    if f.role is Role.TOOL and not f.tool_name:
        return "not_read", "a tool span without a tool name"
    if span.span_id not in used and f.role in (Role.LLM, Role.TOOL):
        return _not_used(f, facts)
    if GENERIC in f.conventions:
        if f.role is Role.TOOL:
            return "generic", f"a tool span by generic evidence: tool '{f.tool_name}'"
        return "generic", "a model span by generic evidence: a list of tool calls, or a model and a response text"
    return "read", f"{f.role.value} span ({conventions or 'span name'})"


def explain_spans(
    spans: Iterable[SpanRecord], logs: Iterable[LogEvent] = (), runs: Iterable[Run] = ()
) -> list[SpanNote]:
    """One note per unique span of ``spans`` (see the module docstring); ``runs`` are the runs rebuilt from
    the same spans (:func:`~monitor.trajectory.build.build_runs`), which say which spans a run stands on."""
    used = used_span_ids(runs)
    unique = join_logs(dedupe_spans(spans), logs)
    unique.sort(key=lambda s: (s.trace_id, s.start_ns, s.span_id))
    facts = {span.span_id: normalize(span) for span in unique}
    notes: list[SpanNote] = []
    for span in unique:
        f = facts[span.span_id]
        verdict, reason = _note(f, used, facts)
        notes.append(
            SpanNote(
                trace_id=span.trace_id,
                span_id=span.span_id,
                name=span.name,
                scope=span.scope_name,
                scope_version=span.scope_version,
                role=f.role.value,
                conventions=tuple(sorted(f.conventions)),
                verdict=verdict,
                reason=reason,
                keys=tuple(sorted(span.attributes)),
            )
        )
    return notes
