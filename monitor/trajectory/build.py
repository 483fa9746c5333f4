"""Spans of a trace → agent runs (the pure core of the trajectory rebuild).

Contract of :func:`build_runs`:

* Input: spans of any number of traces, in any order, possibly with duplicates (the same span id
  twice: the copy with more attributes wins) and GenAI log events to join by (trace id, span id).
* Run roots: the outermost agent span (``invoke_agent``, OpenInference ``AGENT``, Traceloop
  ``agent``/``workflow``, pydantic-ai ``agent run``, ADK ``invocation``/``invoke_workflow``). An agent
  span nested in a run with no tool span in between and the same (or no) agent name is the same run
  (openai-agents emits two ``invoke_agent`` spans per run; ADK wraps its agent in a workflow span);
  otherwise it is a nested run in ``children``, and a tool span that encloses it becomes a call of
  kind ``agent``. A subtree with model or tool spans but no agent span becomes a run rooted at its
  outermost span.
* Model spans nested in model spans are one model call seen twice (an instrumentation on top of the
  SDK's own spans): they merge into one step. Model spans inside a tool span are the tool's own
  business and are not steps of the run. ADK's synthetic merged-tools span is ignored.
* Calls: tool spans merged with the model's tool_call parts by call id, else the k-th part named N
  of step s with the k-th unmatched tool span named N that starts within step s's window
  (SCORING.md §1.3); ordered by start time (unexecuted ones by the end of their step).
* Clock skew (end before start) is clamped to a zero duration. Nothing here raises on content.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from monitor.trajectory.model import (
    ABSENT,
    CallKind,
    Captured,
    LlmStep,
    Malformed,
    Messages,
    Run,
    ToolCall,
    ToolCallPart,
    ToolDef,
    Usage,
)
from monitor.trajectory.normalize import Role, SpanFacts, normalize, normalize_agent_content
from monitor.trajectory.semconv import Monitor, Traceloop
from monitor.trajectory.spans import STATUS_ERROR, LogEvent, SpanRecord
from monitor.trajectory.view import order_key


def dedupe_spans(spans: Iterable[SpanRecord]) -> list[SpanRecord]:
    """One record per (trace, span) id; on duplicates keep the richer copy (more attributes/events)."""
    best: dict[tuple[str, str], SpanRecord] = {}
    for span in spans:
        key = (span.trace_id, span.span_id)
        prev = best.get(key)
        if prev is None or (len(span.attributes) + len(span.events), span.end_ns) > (
            len(prev.attributes) + len(prev.events),
            prev.end_ns,
        ):
            best[key] = span
    return list(best.values())


def join_logs(spans: Sequence[SpanRecord], logs: Iterable[LogEvent]) -> list[SpanRecord]:
    """Attach GenAI log events to their spans as events (``from_log=True``); orphans are dropped."""
    by_span: dict[tuple[str, str], list[LogEvent]] = defaultdict(list)
    for log in logs:
        by_span[(log.trace_id, log.span_id)].append(log)
    if not by_span:
        return list(spans)
    out: list[SpanRecord] = []
    for span in spans:
        extra = by_span.get((span.trace_id, span.span_id))
        if extra:
            events = span.events + tuple(e.as_span_event() for e in sorted(extra, key=lambda e: e.time_ns))
            span = dataclasses.replace(span, events=events)
        out.append(span)
    return out


def build_runs(spans: Iterable[SpanRecord], logs: Iterable[LogEvent] = (), *, forced: str | None = None) -> list[Run]:
    """Top-level runs of every trace in ``spans`` (nested runs in ``Run.children``), by start time."""
    unique = join_logs(dedupe_spans(spans), logs)
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in unique:
        by_trace[span.trace_id].append(span)
    runs: list[Run] = []
    for trace_spans in by_trace.values():
        runs.extend(build_trace(trace_spans, forced=forced))
    runs.sort(key=lambda r: (r.start_ns or 0, r.trace_id, r.run_id))
    return runs


# --------------------------------------------------------------------------- tree walk


@dataclass(slots=True)
class _RunAcc:
    root: SpanFacts
    agent_spans: list[SpanFacts] = field(default_factory=list)
    llm: list[SpanFacts] = field(default_factory=list)
    tools: list[SpanFacts] = field(default_factory=list)
    agent_tools: set[str] = field(default_factory=set)  # tool span ids that enclose a child run
    children: list[_RunAcc] = field(default_factory=list)
    spans: list[SpanFacts] = field(default_factory=list)
    via_tool: bool = False  # a nested run started by a tool span (agent-as-tool), not a transfer

    @property
    def agent(self) -> str | None:
        """The first agent name a span of this run gives; names taken from span names only lose."""
        weak = None
        for f in (self.root, *self.agent_spans):
            if f.agent_name and not f.agent_name_weak:
                return f.agent_name
            weak = weak or f.agent_name
        return weak

    @property
    def agent_is_weak(self) -> bool:
        return all(not f.agent_name or f.agent_name_weak for f in (self.root, *self.agent_spans))


def _clamp(span: SpanRecord) -> SpanRecord:
    if span.end_ns and span.end_ns < span.start_ns:
        return dataclasses.replace(span, end_ns=span.start_ns)
    return span


def build_trace(spans: Sequence[SpanRecord], *, forced: str | None = None) -> list[Run]:
    """Runs of one trace's spans (assumed unique by span id)."""
    facts = {s.span_id: normalize(_clamp(s)) for s in spans}
    children: dict[str | None, list[SpanFacts]] = defaultdict(list)
    for f in facts.values():
        parent = f.span.parent_span_id
        children[parent if parent in facts else None].append(f)
    for kids in children.values():
        kids.sort(key=lambda f: (f.span.start_ns, f.span.span_id))
        _promote_agent_tasks(kids)

    # subtree flags, bottom-up without recursion limits
    has_agent: dict[str, bool] = {}
    has_work: dict[str, bool] = {}
    order: list[SpanFacts] = []
    stack = list(children[None])
    while stack:
        f = stack.pop()
        order.append(f)
        stack.extend(children.get(f.span_id, []))
    for f in reversed(order):
        kids = children.get(f.span_id, [])
        has_agent[f.span_id] = f.role in (Role.AGENT, Role.WORKFLOW) or any(has_agent[k.span_id] for k in kids)
        has_work[f.span_id] = f.role in (Role.LLM, Role.TOOL) or any(has_work[k.span_id] for k in kids)

    top: list[_RunAcc] = []
    nested: dict[tuple[str, str | None], _RunAcc] = {}
    # iterative DFS: (facts, current run, enclosing tool of the current run, enclosing llm span)
    work: list[tuple[SpanFacts, _RunAcc | None, SpanFacts | None, SpanFacts | None]] = [
        (f, None, None, None) for f in reversed(children[None])
    ]
    while work:
        f, run, tool, llm = work.pop()
        role = f.role
        if role in (Role.AGENT, Role.WORKFLOW):
            if run is None:
                run = _RunAcc(f)
                top.append(run)
                tool = llm = None
            elif tool is None and (run.agent_is_weak or f.agent_name is None or f.agent_name == run.agent):
                run.agent_spans.append(f)
            else:
                key = (tool.span_id if tool is not None else run.root.span_id, f.agent_name)
                child = nested.get(key)
                if child is None:
                    child = nested[key] = _RunAcc(f, via_tool=tool is not None)
                    run.children.append(child)
                else:  # a second span of the same nested agent (see _promote_agent_tasks)
                    child.agent_spans.append(f)
                if tool is not None:
                    run.agent_tools.add(tool.span_id)
                run, tool, llm = child, None, None
        elif run is None and has_work[f.span_id] and not has_agent[f.span_id]:
            run = _RunAcc(f)
            top.append(run)
            tool = llm = None
            if role is Role.LLM:
                run.llm.append(f)
                llm = f
            elif role is Role.TOOL:
                run.tools.append(f)
                tool = f
        elif run is not None and role is Role.LLM:
            if llm is not None:
                _merge_llm(llm, f)
            elif tool is None:
                run.llm.append(f)
                llm = f
        elif run is not None and role is Role.TOOL:
            if tool is not None and tool.tool_name == f.tool_name:
                _merge_tool(tool, f)
            else:
                run.tools.append(f)
                tool = f
        if run is not None:
            run.spans.append(f)
        for kid in reversed(children.get(f.span_id, ())):
            work.append((kid, run, tool, llm))

    return [_finish(acc, None, None, forced) for acc in top]


def _promote_agent_tasks(siblings: Sequence[SpanFacts]) -> None:
    """OpenLLMetry's LangChain instrumentation opens an empty ``invoke_agent X`` span for a nested graph
    and records the graph itself under a *sibling* task span named X: that task is the agent's body."""
    agents = {f.agent_name for f in siblings if f.role is Role.AGENT and f.agent_name}
    if not agents:
        return
    for f in siblings:
        a = f.span.attributes
        if (
            f.role is Role.OTHER
            and a.get(Traceloop.SPAN_KIND) == Traceloop.KIND_TASK
            and a.get(Traceloop.ENTITY_NAME) in agents
        ):
            f.role = Role.AGENT
            f.agent_name = str(a[Traceloop.ENTITY_NAME])
            normalize_agent_content(f)


def _merge_llm(outer: SpanFacts, inner: SpanFacts) -> None:
    """One model call seen twice: fill what the outer span lacks from the inner one."""
    if outer.input_messages is None:
        outer.input_messages = inner.input_messages
    if outer.output_messages is None or (not outer.output_tool_calls and inner.output_tool_calls):
        outer.output_messages = inner.output_messages or outer.output_messages
    if outer.tools_offered is None:
        outer.tools_offered = inner.tools_offered
    outer.model = outer.model or inner.model
    outer.provider = outer.provider or inner.provider
    if outer.usage == Usage():
        outer.usage = inner.usage
    outer.conventions |= inner.conventions


def _merge_tool(outer: SpanFacts, inner: SpanFacts) -> None:
    """One tool execution seen twice (two instrumentations nesting spans)."""
    if outer.args is ABSENT:
        outer.args = inner.args
    if outer.result is ABSENT:
        outer.result = inner.result
    outer.call_id = outer.call_id or inner.call_id
    outer.error = outer.error or inner.error
    outer.conventions |= inner.conventions


# --------------------------------------------------------------------------- one run


def _same_model_call(a: SpanFacts, b: SpanFacts) -> bool:
    """Two model spans that overlap in time and report the same output are one call recorded by two
    instrumentations side by side (e.g. OpenInference and OpenLLMetry on one anthropic client)."""
    if not (a.span.start_ns < b.span.end_ns and b.span.start_ns < a.span.end_ns):
        return False
    calls_a, calls_b = a.output_tool_calls, b.output_tool_calls
    ids_a = {c.id for c in calls_a if c.id}
    if ids_a and ids_a & {c.id for c in calls_b if c.id}:
        return True
    if calls_a or calls_b:
        return [c.name for c in calls_a] == [c.name for c in calls_b]
    return a.output_text is not None and a.output_text == b.output_text


def _dedupe_model_calls(llm: list[SpanFacts]) -> list[SpanFacts]:
    kept: list[SpanFacts] = []
    for f in sorted(llm, key=lambda f: (f.span.start_ns, f.span.span_id)):
        twin = next((k for k in reversed(kept[-4:]) if _same_model_call(k, f)), None)
        if twin is None:
            kept.append(f)
        else:
            _merge_llm(twin, f)
    return kept


def _steps(acc: _RunAcc) -> list[LlmStep]:
    llm = _dedupe_model_calls(acc.llm)
    return [
        LlmStep(
            index=i,
            model=f.model,
            provider=f.provider,
            usage=f.usage,
            tools_offered=f.tools_offered,
            tool_calls=f.output_tool_calls,
            text=f.output_text,
            input_messages=f.input_messages,
            start_ns=f.span.start_ns,
            end_ns=f.span.end_ns,
            span_id=f.span.span_id,
        )
        for i, f in enumerate(llm)
    ]


def _calls(acc: _RunAcc, steps: Sequence[LlmStep], agent: str | None) -> tuple[ToolCall, ...]:
    tools = sorted(acc.tools, key=lambda f: (f.span.start_ns, f.span.span_id))
    matched: dict[int, tuple[int, int]] = {}  # tool position -> (step, part)
    by_id: dict[str, int] = {}
    for pos, t in enumerate(tools):
        if t.call_id:
            by_id.setdefault(t.call_id, pos)
    parts: list[tuple[int, int, ToolCallPart]] = [
        (s.index, p, part) for s in steps for p, part in enumerate(s.tool_calls)
    ]
    used_parts: set[tuple[int, int]] = set()
    for s, p, part in parts:
        found = by_id.get(part.id) if part.id else None
        if found is not None and found not in matched and tools[found].tool_name == part.name:
            matched[found] = (s, p)
            used_parts.add((s, p))
    for s, p, part in parts:
        if (s, p) in used_parts:
            continue
        lo = steps[s].start_ns or 0
        hi = steps[s + 1].start_ns if s + 1 < len(steps) else None
        for pos, t in enumerate(tools):
            if pos in matched or t.tool_name != part.name:
                continue
            start = t.span.start_ns
            if start >= lo and (hi is None or start < hi):
                matched[pos] = (s, p)
                used_parts.add((s, p))
                break

    calls: list[ToolCall] = []
    for pos, t in enumerate(tools):
        sp = matched.get(pos)
        merged = steps[sp[0]].tool_calls[sp[1]] if sp else None
        kind: CallKind = "function"
        if t.span_id in acc.agent_tools or t.tool_kind == "agent":
            kind = "agent"
        elif t.tool_kind == "mcp":
            kind = "mcp"
        calls.append(
            ToolCall(
                index=0,
                name=t.tool_name or "",
                call_id=t.call_id or (merged.id if merged else None),
                args=_merged_args(t.args, merged.arguments if merged else ABSENT),
                result=t.result,
                error=t.error,
                start_ns=t.span.start_ns,
                end_ns=t.span.end_ns,
                executed=True,
                step=sp[0] if sp else None,
                part=sp[1] if sp else None,
                agent=agent,
                kind=kind,
                span_id=t.span_id,
                requested_args=merged.arguments if merged else ABSENT,
                step_end_ns=steps[sp[0]].end_ns if sp else None,
            )
        )
    for s, p, part in parts:
        if (s, p) in used_parts:
            continue
        calls.append(
            ToolCall(
                index=0,
                name=part.name,
                call_id=part.id,
                args=part.arguments,
                executed=False,
                step=s,
                part=p,
                agent=agent,
                requested_args=part.arguments,
                step_end_ns=steps[s].end_ns,
            )
        )
    calls.sort(key=order_key)
    return tuple(dataclasses.replace(c, index=i) for i, c in enumerate(calls))


def _merged_args(span_args: Captured, part_args: Captured) -> Captured:
    """Arguments of a merged call: the tool span's, unless it captured none or only text that is not
    JSON while the model's tool_call part holds valid arguments (OpenInference writes a one-argument
    call's bare value, ``"Paris"``, as the tool span's input)."""
    if span_args is ABSENT or (
        isinstance(span_args, Malformed) and part_args is not ABSENT and not isinstance(part_args, Malformed)
    ):
        return part_args
    return span_args


def _merge_tool_defs(sources: Iterable[tuple[ToolDef, ...] | None]) -> tuple[ToolDef, ...] | None:
    seen: dict[str, ToolDef] = {}
    any_source = False
    for defs in sources:
        if defs is None:
            continue
        any_source = True
        for d in defs:
            seen.setdefault(d.name, d)
    return tuple(seen.values()) if any_source else None


def _has_user_text(messages: Messages | None) -> bool:
    return bool(messages) and any(m.role == "user" and m.text for m in messages or ())


def _kept_attributes(root: SpanRecord) -> tuple[tuple[str, str], ...]:
    """Attributes for rule and sampling matches: the short scalar attributes of the root span's
    resource (``service.name``, ``deployment.environment``…) and our own ``monitor.eval.*`` keys from
    the root span (they win). Span attributes are otherwise left out: they carry content."""
    kept: dict[str, str] = {}
    for key, value in root.resource.items():
        if isinstance(value, str | int | float | bool) and len(text := str(value)) <= Monitor.MAX_KEPT_VALUE_CHARS:
            kept[key] = text
    for key in Monitor.KEPT_ATTRIBUTES:
        if (value := root.attributes.get(key)) is not None:
            kept[key] = str(value)
    return tuple(sorted(kept.items()))


def _finish(acc: _RunAcc, parent_run_id: str | None, parent_input: Messages | None, forced: str | None) -> Run:
    """One run from its accumulated spans. A nested run reached by transfer or handoff (no tool span
    in between) serves the parent's user turn, so it inherits the parent's user input."""
    root = acc.root
    agent = acc.agent
    steps = _steps(acc)
    calls = _calls(acc, steps, agent)
    agents = (root, *acc.agent_spans)

    candidates: list[Messages | None] = [f.input_messages for f in agents]
    if parent_input is not None and not acc.via_tool:
        candidates.append(parent_input)
    candidates.extend(s.input_messages for s in steps[:1])
    # the first source with a user request wins; a source without one (a decorated function's
    # arguments, say) is used only when nothing better exists
    user_input = next((m for m in candidates if _has_user_text(m)), None)
    if user_input is None:
        user_input = next((m for m in candidates if m), None)
    final = next((f.final_text for f in agents if f.final_text), None)
    if final is None and steps:
        final = steps[-1].text
    tools = _merge_tool_defs([f.tools_offered for f in agents] + [s.tools_offered for s in steps])

    usage = Usage()
    for s in steps:
        usage = usage + s.usage
    if usage == Usage():
        for f in agents:
            usage = usage + f.usage
    conversation = next((f.conversation_id for f in (*agents, *acc.spans) if f.conversation_id), None)
    error = any(f.span.status_code == STATUS_ERROR for f in agents)
    conventions: set[str] = set()
    for f in acc.spans:
        conventions |= f.conventions
    content = any(c.args is not ABSENT for c in calls) or bool(user_input) or bool(final) or any(s.text for s in steps)
    run_id = root.span_id
    children = tuple(_finish(child, run_id, user_input, forced) for child in acc.children)
    return Run(
        trace_id=root.span.trace_id,
        run_id=run_id,
        agent=agent,
        conversation_id=conversation,
        parent_run_id=parent_run_id,
        user_input=user_input,
        final_response=final,
        tools_offered=tools,
        steps=tuple(steps),
        calls=calls,
        children=children,
        start_ns=root.span.start_ns,
        end_ns=root.span.end_ns,
        status="error" if error else "ok",
        model=next((s.model for s in steps if s.model), None) or next((f.model for f in agents if f.model), None),
        usage=usage,
        content_captured=content,
        forced=forced,
        attributes=_kept_attributes(root.span),
        conventions=tuple(sorted(conventions)),
    )


def runs_by_trace(runs: Iterable[Run]) -> Mapping[str, list[Run]]:
    out: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        out[run.trace_id].append(run)
    return out
