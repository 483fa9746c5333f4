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
* Model spans side by side (siblings overlapping in time, e.g. OpenLLMetry's ``anthropic.chat`` or
  OpenInference's ``messages.stream`` beside the anthropic SDK's own ``anthropic.messages.create``)
  merge into one step only on evidence that they record the same call: the same provider response
  id, shared tool-call ids, the same output, or (for a span without content) the same token usage
  (:class:`~monitor.trajectory.semconv.ModelCallIdentity`). Overlap in time alone never merges.
* Calls: tool spans merged with the model's tool_call parts by call id, else the k-th part named N
  of step s with the k-th unmatched tool span named N that starts within step s's window
  (SCORING.md §1.3), else a part and an unmatched tool span with the same name and the same captured
  arguments that starts after the step began; ordered by start time (unexecuted ones by the end of
  their step). A selected call with such a match is always linked to its execution, never listed twice.
* A tool span that captured no result and did not fail takes the result the model was sent back for its call id
  (a later step's input messages). A call of a framework's own control tool (``FrameworkTools``: smolagents
  ``final_answer``, DSPy ``finish``) has kind ``framework``. Without an agent-level answer, the run's answer is
  the last step's text (its ``Answer:`` part when the text is in the ReAct format).
* Clock skew (end before start) is clamped to a zero duration. Nothing here raises on content.
* Cost and depth are bounded: the rebuild is linear in the spans (up to a small factor per run for
  the call matching) and uses no recursion, so no trace shape can raise ``RecursionError``. A trace
  whose parent→child span chain is longer than ``max_depth`` spans, or whose agent runs nest deeper
  than ``max_agent_depth`` runs, is refused with :class:`RebuildRejected` (``reason = "too_deep"``).
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from monitor.trajectory.keytable import pydantic_output_tools
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
    ToolResultPart,
    Usage,
)
from monitor.trajectory.normalize import (
    GENERIC,
    Role,
    SpanFacts,
    model_response_id,
    normalize,
    normalize_agent_content,
)
from monitor.trajectory.semconv import FrameworkTools, ModelCallIdentity, Monitor, PydanticAI, ReAct, Traceloop
from monitor.trajectory.spans import STATUS_ERROR, LogEvent, SpanRecord
from monitor.trajectory.view import order_key

DEFAULT_MAX_DEPTH: Final = 256
"""Default of ``max_depth``: the longest parent→child span chain rebuilt (setting ``rebuild.max_depth``)."""
DEFAULT_MAX_AGENT_DEPTH: Final = 32
"""Default of ``max_agent_depth``: the deepest nesting of agent runs rebuilt (``rebuild.max_agent_depth``)."""
_MAX_MESSAGE_CHARS: Final = 199


class RebuildRejected(Exception):
    """A trace the rebuild refuses to turn into runs, by design rather than by accident.

    ``reason`` is a short snake_case code for a metric label (``too_deep``: the span chain is longer
    than ``max_depth`` or agent runs nest deeper than ``max_agent_depth``); ``detail`` says which limit
    and which trace, on one line. ``str(exc)`` is ``"<reason>: <detail>"``, one line, under 200
    characters: the caller counts it and logs that line, never a traceback. Rebuilding the same spans
    again is rejected again (the outcome depends only on the spans and the limits).
    """

    def __init__(self, reason: str, detail: str) -> None:
        one_line = " ".join(detail.split())
        message = f"{reason}: {one_line}"
        if len(message) > _MAX_MESSAGE_CHARS:
            message = message[: _MAX_MESSAGE_CHARS - 1] + "…"
        super().__init__(message)
        self.reason = reason
        self.detail = one_line


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


def build_runs(
    spans: Iterable[SpanRecord],
    logs: Iterable[LogEvent] = (),
    *,
    forced: str | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_agent_depth: int = DEFAULT_MAX_AGENT_DEPTH,
    rejected: list[RebuildRejected] | None = None,
    unrecognized: Counter[str] | None = None,
) -> list[Run]:
    """Top-level runs of every trace in ``spans`` (nested runs in ``Run.children``), by start time.

    ``unrecognized``, when given, counts per instrumentation scope name the spans that no known convention
    recognizes (their ``conventions`` are empty or only ``generic``) in traces that gave no run of a known
    convention: how a framework the table does not read yet shows up.

    ``max_depth``: the longest parent→child span chain (in spans, a root alone is 1) a trace may
    have; ``max_agent_depth``: how deeply agent runs may nest (a top-level run is 1, its nested runs
    2, …). A trace beyond either limit raises :class:`RebuildRejected`, unless ``rejected`` is given:
    then that trace's rejection is appended to it and the other traces' runs are still returned.
    """
    unique = join_logs(dedupe_spans(spans), logs)
    by_trace: dict[str, list[SpanRecord]] = defaultdict(list)
    for span in unique:
        by_trace[span.trace_id].append(span)
    runs: list[Run] = []
    for trace_spans in by_trace.values():
        try:
            runs.extend(
                build_trace(
                    trace_spans,
                    forced=forced,
                    max_depth=max_depth,
                    max_agent_depth=max_agent_depth,
                    unrecognized=unrecognized,
                )
            )
        except RebuildRejected as exc:
            if rejected is None:
                raise
            rejected.append(exc)
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
    depth: int = 1  # agent-run nesting: 1 for a top-level run, 2 for its nested runs, …
    # the first agent name of (root, *agent_spans), kept up to date by add_agent_span (O(1) per read)
    _strong_name: str | None = None  # … among names not taken from a span name only
    _any_name: str | None = None

    def __post_init__(self) -> None:
        self._note_name(self.root)

    def _note_name(self, f: SpanFacts) -> None:
        if f.agent_name:
            self._any_name = self._any_name or f.agent_name
            if not f.agent_name_weak:
                self._strong_name = self._strong_name or f.agent_name

    def add_agent_span(self, f: SpanFacts) -> None:
        """Another span of this same agent run (its name counts only if the run has none yet)."""
        self.agent_spans.append(f)
        self._note_name(f)

    @property
    def agent(self) -> str | None:
        """The first agent name a span of this run gives; names taken from span names only lose."""
        return self._strong_name or self._any_name

    @property
    def agent_is_weak(self) -> bool:
        """No span of this run names the agent other than by its span name."""
        return self._strong_name is None


def _clamp(span: SpanRecord) -> SpanRecord:
    if span.end_ns and span.end_ns < span.start_ns:
        return dataclasses.replace(span, end_ns=span.start_ns)
    return span


def _too_deep(trace_id: str, what: str, limit: int, setting: str) -> RebuildRejected:
    return RebuildRejected("too_deep", f"trace {trace_id}: {what} deeper than {limit} ({setting})")


def build_trace(
    spans: Sequence[SpanRecord],
    *,
    forced: str | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    max_agent_depth: int = DEFAULT_MAX_AGENT_DEPTH,
    unrecognized: Counter[str] | None = None,
) -> list[Run]:
    """Runs of one trace's spans (assumed unique by span id); limits and ``unrecognized`` as :func:`build_runs`.

    One pass over the span tree with an explicit stack (never recursion), then one over the runs.
    """
    # the span tree and its depth first, before any span is normalized, so a trace that is too deep
    # is refused at the cost of one pass over its ids
    known = {s.span_id for s in spans}
    kids_of: dict[str | None, list[SpanRecord]] = defaultdict(list)
    for span in spans:
        parent = span.parent_span_id
        kids_of[parent if parent in known else None].append(span)
    order: list[str] = []  # pre-order; spans in a parent cycle are unreachable from a root: left out
    stack: list[tuple[SpanRecord, int]] = [(span, 1) for span in kids_of[None]]
    while stack:
        span, depth = stack.pop()
        if depth > max_depth:
            raise _too_deep(span.trace_id, "span chain", max_depth, "max_depth")
        order.append(span.span_id)
        stack.extend((kid, depth + 1) for kid in kids_of.get(span.span_id, ()))

    facts = {s.span_id: normalize(_clamp(s)) for s in spans}
    children: dict[str | None, list[SpanFacts]] = {
        parent: [facts[k.span_id] for k in kids] for parent, kids in kids_of.items()
    }
    for kids in children.values():
        kids.sort(key=lambda f: (f.span.start_ns, f.span.span_id))
        _promote_agent_tasks(kids)
    trace_id = spans[0].trace_id if spans else ""

    # subtree flags, bottom-up
    has_agent: dict[str, bool] = {}
    has_work: dict[str, bool] = {}
    for span_id in reversed(order):
        f = facts[span_id]
        kids = children.get(span_id, [])
        has_agent[f.span_id] = f.role in (Role.AGENT, Role.WORKFLOW) or any(has_agent[k.span_id] for k in kids)
        has_work[f.span_id] = f.role in (Role.LLM, Role.TOOL) or any(has_work[k.span_id] for k in kids)

    top: list[_RunAcc] = []
    nested: dict[tuple[str, str | None], _RunAcc] = {}
    # iterative DFS: (facts, current run, enclosing tool of the current run, enclosing llm span)
    work: list[tuple[SpanFacts, _RunAcc | None, SpanFacts | None, SpanFacts | None]] = [
        (f, None, None, None) for f in reversed(children.get(None, []))
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
                run.add_agent_span(f)
            else:
                key = (tool.span_id if tool is not None else run.root.span_id, f.agent_name)
                child = nested.get(key)
                if child is None:
                    if run.depth >= max_agent_depth:
                        raise _too_deep(trace_id, "agent runs nested", max_agent_depth, "max_agent_depth")
                    child = nested[key] = _RunAcc(f, via_tool=tool is not None, depth=run.depth + 1)
                    run.children.append(child)
                else:  # a second span of the same nested agent (see _promote_agent_tasks)
                    child.add_agent_span(f)
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

    runs = _finish_all(top, forced)
    if unrecognized is not None:
        _count_unrecognized(facts.values(), runs, unrecognized)
    return runs


_GENERIC_ONLY: Final = frozenset({GENERIC})


def _count_unrecognized(facts: Iterable[SpanFacts], runs: Sequence[Run], counter: Counter[str]) -> None:
    """Spans no known convention recognizes, by scope, when no run of the trace speaks a known convention."""
    if any(not _GENERIC_ONLY.issuperset(r.conventions) for run in runs for r in run.walk()):
        return
    for f in facts:
        if _GENERIC_ONLY.issuperset(f.conventions):
            counter[f.span.scope_name] += 1


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
    """One model call seen twice (or a generation and its steps, Mastra): fill what the outer span lacks from the
    inner one. When only the inner span saw the tool calls they are taken; the outer's answer text stays when the
    inner span has none (a Mastra generation's first step carries the calls, the generation the final text)."""
    if outer.input_messages is None:
        outer.input_messages = inner.input_messages
    if outer.output_messages is None:
        outer.output_messages = inner.output_messages
    elif not outer.output_tool_calls and inner.output_tool_calls:
        keep_text = inner.output_text is None and outer.output_text is not None
        outer.output_messages = (inner.output_messages or ()) + (outer.output_messages if keep_text else ())
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


def _overlap(a: SpanFacts, b: SpanFacts) -> bool:
    return a.span.start_ns < b.span.end_ns and b.span.start_ns < a.span.end_ns


def _same_model_call(a: SpanFacts, b: SpanFacts, response_ids: dict[str, str | None]) -> bool:
    """Two model spans of one run that record one model call (two instrumentations side by side).

    Evidence, strongest first (:class:`~monitor.trajectory.semconv.ModelCallIdentity`); the first kind
    both spans carry decides, and overlap in time is required but never sufficient:

    1. provider response ids: equal → one call, different → two;
    2. tool-call ids in the outputs: any shared → one call, none shared → two;
    3. both captured output: the same tool-call names in order (or, with no tool calls, the same text);
    4. one span captured no output (the anthropic SDK's metadata-only spans): the same model (when both
       name one) and the same reported input and output token counts.
    """
    if not _overlap(a, b):
        return False
    id_a, id_b = _response_id(a, response_ids), _response_id(b, response_ids)
    if id_a is not None and id_b is not None:
        return id_a == id_b
    calls_a, calls_b = a.output_tool_calls, b.output_tool_calls
    ids_a = {c.id for c in calls_a if c.id}
    ids_b = {c.id for c in calls_b if c.id}
    if ids_a and ids_b:
        return not ids_a.isdisjoint(ids_b)
    if a.output_messages and b.output_messages:
        if calls_a or calls_b:
            return [c.name for c in calls_a] == [c.name for c in calls_b]
        return a.output_text is not None and a.output_text == b.output_text
    ua, ub = a.usage, b.usage
    return (
        (a.model is None or b.model is None or a.model == b.model)
        and ua.input_tokens is not None
        and ua.output_tokens is not None
        and (ua.input_tokens, ua.output_tokens) == (ub.input_tokens, ub.output_tokens)
    )


def _response_id(f: SpanFacts, cache: dict[str, str | None]) -> str | None:
    if f.span_id not in cache:
        cache[f.span_id] = model_response_id(f.span)
    return cache[f.span_id]


def _dedupe_model_calls(llm: list[SpanFacts]) -> list[SpanFacts]:
    """The run's model spans with every model call recorded twice side by side merged into one
    (the earlier-starting span is kept and filled from its twin). Linear: each span is compared
    with the last few kept ones only."""
    kept: list[SpanFacts] = []
    response_ids: dict[str, str | None] = {}
    lookback = ModelCallIdentity.TWIN_LOOKBACK
    for f in sorted(llm, key=lambda f: (f.span.start_ns, f.span.span_id)):
        twin = next((k for k in reversed(kept[-lookback:]) if _same_model_call(k, f, response_ids)), None)
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


class _UnmatchedTools:
    """Tool spans not yet linked to a model's tool_call part, per tool name, in start order; finds
    the first one starting in a window by bisection so matching stays near-linear in the calls."""

    def __init__(self, tools: Iterable[tuple[int, SpanFacts]]) -> None:
        """``tools``: (position, tool span) pairs in start order."""
        self._starts: dict[str, list[int]] = defaultdict(list)
        self._entries: dict[str, list[tuple[int, Captured]]] = defaultdict(list)  # (position, span args)
        for pos, t in tools:
            name = t.tool_name or ""
            self._starts[name].append(t.span.start_ns)
            self._entries[name].append((pos, t.args))

    def _pop(self, name: str, i: int) -> int:
        del self._starts[name][i]
        return self._entries[name].pop(i)[0]

    def take(self, name: str, lo: int, hi: int | None) -> int | None:
        """Remove and return the first unmatched tool named ``name`` starting in ``[lo, hi)``
        (``hi`` None: no upper bound)."""
        starts = self._starts.get(name)
        if not starts:
            return None
        i = bisect.bisect_left(starts, lo)
        if i < len(starts) and (hi is None or starts[i] < hi):
            return self._pop(name, i)
        return None

    def take_same_arguments(self, name: str, lo: int, args: Captured) -> int | None:
        """Remove and return the first unmatched tool named ``name`` starting at or after ``lo`` whose
        span captured exactly ``args`` (both sides captured: evidence that it executed that part)."""
        starts = self._starts.get(name)
        if not starts or args is ABSENT:
            return None
        entries = self._entries[name]
        for i in range(bisect.bisect_left(starts, lo), len(starts)):
            span_args = entries[i][1]
            if span_args is not ABSENT and span_args == args:
                return self._pop(name, i)
        return None


_REACT_ANSWER: Final = re.compile(ReAct.ANSWER, re.S | re.M)


def react_answer(text: str | None) -> str | None:
    """The answer of a ReAct-format model text (``Thought: …`` … ``Answer: <answer>``); other text as it is."""
    if text is None:
        return None
    found = _REACT_ANSWER.match(text)
    return found.group(1).strip() if found else text


def _framework_tools(acc: _RunAcc) -> frozenset[str]:
    """Names of the framework's own tools: by the scopes of the run's spans (``FrameworkTools``), and the output
    tools pydantic-ai's model spans say they offered (``model_request_parameters.output_tools``)."""
    names: frozenset[str] = frozenset()
    for scope in {f.span.scope_name for f in acc.spans}:
        names |= FrameworkTools.BY_SCOPE.get(scope, frozenset())
    for f in acc.spans:
        params = f.span.attributes.get(PydanticAI.MODEL_REQUEST_PARAMETERS)
        if params is not None:
            names |= pydantic_output_tools(params)
    return names


def _calls(acc: _RunAcc, steps: Sequence[LlmStep], agent: str | None) -> tuple[ToolCall, ...]:
    """The run's calls: each tool span merged with the tool_call part it executed, plus the parts no
    span executed. Links, in order of evidence: the same call id; the k-th part named N of step s with
    the k-th unmatched span named N starting in step s's window (SCORING.md §1.3); the same name and
    the same captured arguments, the span starting after step s began."""
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
    unmatched = _UnmatchedTools((pos, t) for pos, t in enumerate(tools) if pos not in matched)
    for s, p, part in parts:
        if (s, p) in used_parts:
            continue
        lo = steps[s].start_ns or 0
        hi = steps[s + 1].start_ns if s + 1 < len(steps) else None
        found = unmatched.take(part.name, lo, hi)
        if found is not None:
            matched[found] = (s, p)
            used_parts.add((s, p))
    for s, p, part in parts:
        if (s, p) in used_parts:
            continue
        found = unmatched.take_same_arguments(part.name, steps[s].start_ns or 0, part.arguments)
        if found is not None:
            matched[found] = (s, p)
            used_parts.add((s, p))

    framework = _framework_tools(acc)
    # the results sent back to the model are read only when some tool span captured none (not on the common path)
    results = _results_by_call_id(steps) if any(_lacks_result(t) for t in tools) else {}
    calls: list[ToolCall] = []
    for pos, t in enumerate(tools):
        sp = matched.get(pos)
        merged = steps[sp[0]].tool_calls[sp[1]] if sp else None
        kind: CallKind = "function"
        if t.span_id in acc.agent_tools or t.tool_kind == "agent":
            kind = "agent"
        elif t.tool_kind == "mcp":
            kind = "mcp"
        elif (t.tool_name or "") in framework:
            kind = "framework"
        calls.append(
            ToolCall(
                index=0,
                name=t.tool_name or "",
                call_id=t.call_id or (merged.id if merged else None),
                args=_merged_args(t.args, merged.arguments if merged else ABSENT),
                result=_result(t, results),
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
                kind="framework" if part.name in framework else "function",
            )
        )
    calls.sort(key=order_key)
    return tuple(dataclasses.replace(c, index=i) for i, c in enumerate(calls))


def _lacks_result(tool: SpanFacts) -> bool:
    """A tool span that captured no result, did not fail, and has a call id to look its result up by."""
    return tool.result is ABSENT and tool.error is None and bool(tool.call_id)


def _result(tool: SpanFacts, results: Mapping[str, Captured]) -> Captured:
    """The tool span's result; when it captured none and did not fail, what the model was sent back for it."""
    if not _lacks_result(tool):
        return tool.result
    return results.get(tool.call_id or "", ABSENT)


def _results_by_call_id(steps: Sequence[LlmStep]) -> dict[str, Captured]:
    """Tool results the model was sent back, by call id, from the steps' input messages: the result of a tool
    span that captured none (Microsoft Agent Framework with the 1.36 conventions logs it only in the next model
    call's ``gen_ai.tool.message`` event)."""
    found: dict[str, Captured] = {}
    for step in steps:
        for message in step.input_messages or ():
            for part in message.parts:
                if isinstance(part, ToolResultPart) and part.id and part.response is not ABSENT:
                    found.setdefault(part.id, part.response)
    return found


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


def _finish_all(top: Sequence[_RunAcc], forced: str | None) -> list[Run]:
    """Every accumulated run as a :class:`Run`, nested runs in ``children``, without recursion: each
    run's own fields first, parents before children (a child may inherit its parent's user input),
    then the children attached bottom-up."""
    own: dict[int, Run] = {}
    pre_order: list[_RunAcc] = []
    stack: list[tuple[_RunAcc, str | None, Messages | None]] = [(acc, None, None) for acc in reversed(top)]
    while stack:
        acc, parent_run_id, parent_input = stack.pop()
        run = _finish(acc, parent_run_id, parent_input, forced)
        own[id(acc)] = run
        pre_order.append(acc)
        stack.extend((child, run.run_id, run.user_input) for child in reversed(acc.children))
    done: dict[int, Run] = {}
    for acc in reversed(pre_order):  # every child comes after its parent in pre-order
        run = own[id(acc)]
        if acc.children:
            run = dataclasses.replace(run, children=tuple(done[id(c)] for c in acc.children))
        done[id(acc)] = run
    return [done[id(acc)] for acc in top]


def _finish(acc: _RunAcc, parent_run_id: str | None, parent_input: Messages | None, forced: str | None) -> Run:
    """One run from its accumulated spans, ``children`` left empty (:func:`_finish_all` attaches
    them). A nested run reached by transfer or handoff (no tool span in between) serves the parent's
    user turn, so it inherits the parent's user input."""
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
        final = react_answer(steps[-1].text)
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
    return Run(
        trace_id=root.span.trace_id,
        run_id=root.span_id,
        agent=agent,
        conversation_id=conversation,
        parent_run_id=parent_run_id,
        user_input=user_input,
        final_response=final,
        tools_offered=tools,
        steps=tuple(steps),
        calls=calls,
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
