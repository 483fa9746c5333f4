"""Recommendations: what to change, for each failure pattern worth it, ranked by impact.

Each recommendation has a typed fix (:data:`FixType`): ``tool_description``, ``parameter_schema``,
``system_prompt`` or ``tool_implementation``, the evidence (counts, rates, the trend, example traces), and is
grounded in the tool's definition as the agent's spans carried it (:class:`~monitor.analysis.model.ToolDefinition`).
``confirmed`` says whether the data shows the cause the fix addresses — the definition has the defect (a required
parameter its descriptions never mention, an enum the description does not list, two descriptions that never
say when to use the other, a restriction already written down yet ignored) — or whether it is a ``hypothesis``
(the usual cause of this kind of failure, SCORING §5.3, with nothing in the data to confirm it: no definition
captured, or a definition without the defect).

Ranking: a pattern's impact (runs hurt × severity weight, × 1.5 for state-changing tools; see
:mod:`monitor.analysis.patterns`), patterns with fewer than ``min_runs`` runs hurt left out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from monitor.analysis.definitions import (
    STATE_CHANGING_VERBS,
    DefinitionIndex,
    constraint_text,
    described,
    example_value,
    is_required,
    mentions,
    parameter_label,
    parameter_schema,
    schema_allows_extra,
)
from monitor.analysis.model import ToolDefinition
from monitor.analysis.patterns import Pattern

__all__ = ["FIX_TYPES", "FixType", "Recommendation", "recommend"]

FixType = Literal["tool_description", "parameter_schema", "system_prompt", "tool_implementation"]
FIX_TYPES: Final[tuple[FixType, ...]] = ("tool_description", "parameter_schema", "system_prompt", "tool_implementation")

_RESTRICTION = re.compile(
    r"\b(only|when|if|unless|before|after|never|confirm\w*|do not|don't|must not|requires?)\b", re.IGNORECASE
)
_SHORT_DESCRIPTION_WORDS: Final = 12


@dataclass(frozen=True, slots=True)
class Recommendation:
    """One thing to change. Texts use Markdown code spans (`name`) for tool and parameter names."""

    fix: FixType
    title: str
    finding: str
    """What happened, with the counts."""
    cause: str
    """Why, from the definition (``confirmed``) or as the usual cause (a hypothesis)."""
    action: str
    """What to change."""
    suggestion: str | None
    """A concrete text to add (a description sentence, a schema fragment), when one can be derived."""
    confirmed: bool
    pattern: Pattern
    definitions: tuple[ToolDefinition, ...] = ()
    """The definitions the recommendation quotes (the tool's, and the other tool of a confusion)."""

    @property
    def status(self) -> str:
        return "confirmed" if self.confirmed else "hypothesis"

    @property
    def impact(self) -> float:
        return self.pattern.impact


def _pct(part: int, whole: int | None) -> str:
    if not whole:
        return "n/a"
    value = 100 * part / whole
    return f"{value:.0f}%" if value >= 10 else f"{value:.1f}%"


def _quote(text: str | None, limit: int = 160) -> str:
    if not text:
        return "(no description)"
    flat = " ".join(text.split())
    return "“" + (flat if len(flat) <= limit else flat[: limit - 1] + "…") + "”"


def _code(name: str | None) -> str:
    if name is None:
        return "(none)"
    return "`" + name.replace("`", "'") + "`"


def _agent(p: Pattern) -> str:
    return _code(p.agent) if p.agent else "runs without an agent name"


def _runs_phrase(p: Pattern) -> str:
    return f"{p.runs} of {p.agent_runs} runs ({_pct(p.runs, p.agent_runs)})" if p.agent_runs else f"{p.runs} runs"


def _calls_phrase(p: Pattern) -> str:
    if p.tool_calls:
        return f"{p.issues} of {p.tool_calls} calls ({_pct(p.issues, p.tool_calls)})"
    return _runs_phrase(p)


def _lower_first(text: str) -> str:
    text = re.split(r"(?<=[.!?])\s", text.strip(), maxsplit=1)[0].strip().rstrip(".")
    return text[:1].lower() + text[1:] if text[:2] != text[:2].upper() else text


_VERBS: Final = frozenset(
    {"find", "get", "search", "list", "fetch", "look", "check", "return", "retrieve", "compute", "calculate",
     "convert", "query", "read", "show", "translate", "summarize", "lookup", "estimate", "validate"}
)  # fmt: skip


def _purpose(description: str) -> str:
    """``Daily forecast for a city.`` → ``for daily forecast for a city``; ``Find flights …`` → ``to find …``."""
    text = _lower_first(description)
    first = text.split(" ", 1)[0].lower()
    verb = first in _VERBS or first in STATE_CHANGING_VERBS
    return ("to " if verb else "for ") + text


def _values(p: Pattern) -> str:
    if not p.values:
        return ""
    shown = ", ".join(f"{_code(v)} ({n})" for v, n in p.values)
    return f" Most frequent: {shown}."


def _requests(p: Pattern, requests: Mapping[str, str]) -> list[str]:
    out: list[str] = []
    for trace_id in p.examples:
        text = requests.get(trace_id)
        if text and text not in out:
            out.append(" ".join(text.split())[:120])
    return out[:2]


def _confusion(p: Pattern, index: DefinitionIndex, requests: Mapping[str, str]) -> Recommendation:
    x, y = p.tool or "", p.expected_tool or ""
    dx, dy = index.get(p.agent, x), index.get(p.agent, y)
    how = {
        "expectation": "the expected trajectory names it",
        "judge": "the tool-selection judge says so",
        "paired": f"the run missed {_code(y)} and made a call of {_code(x)} no expectation allowed",
        "inferred": f"the run missed {_code(y)} and called {_code(x)} instead",
    }[p.source]
    finding = f"{_agent(p)} called {_code(x)} where {_code(y)} was expected in {_runs_phrase(p)} ({how})."
    defs = tuple(d for d in (dx, dy) if d is not None)
    if dx is not None and dy is not None:
        x_says_y, y_says_x = mentions(dx.description, y), mentions(dy.description, x)
        if not x_says_y and not y_says_x:
            confirmed = True
            cause = (
                f"Neither description says when to use the other: {_code(x)}: {_quote(dx.description)}; "
                f"{_code(y)}: {_quote(dy.description)}"
            )
        else:
            confirmed = False
            which = _code(x) if x_says_y else _code(y)
            cause = (
                f"{which}'s description already refers to the other tool, yet the model still confuses them "
                f"(hypothesis: the contrast is not explicit enough)."
            )
    else:
        confirmed = False
        missing = " and ".join(_code(n) for n, d in ((x, dx), (y, dy)) if d is None)
        cause = (
            f"No definition of {missing} was captured, so the descriptions cannot be checked (hypothesis: they "
            f"do not say when to use which)."
        )
    action = (
        f"Disambiguate {_code(x)} and {_code(y)}: say in each description when to use it and when to use the "
        f"other, and add a contrasting example."
    )
    if p.state_changing:
        action += f" {_code(x)} changes state: also make it require an explicit confirmation."
    suggestion = None
    if dy is not None and dy.description and dx is not None and dx.description:
        suggestion = (
            f"Add to {_code(y)}'s description: “Use it {_purpose(dy.description)}; {_purpose(dx.description)}, use "
            f"{x} instead.”"
        )
    asked = _requests(p, requests)
    if asked:
        example = f"“{asked[0]}”"
        suggestion = (suggestion + " " if suggestion else "") + f"Contrasting example for {_code(y)}: {example}."
    return Recommendation("tool_description", f"{_code(x)} called instead of {_code(y)}", finding, cause, action,
                          suggestion, confirmed, p, defs)  # fmt: skip


def _missing_tool(p: Pattern, index: DefinitionIndex, requests: Mapping[str, str]) -> Recommendation:
    y = p.tool or ""
    dy = index.get(p.agent, y)
    finding = f"{_agent(p)} did not call {_code(y)} though it was expected, in {_runs_phrase(p)}."
    words = len((dy.description or "").split()) if dy is not None else 0
    if dy is not None and words < _SHORT_DESCRIPTION_WORDS:
        confirmed, fix = True, "tool_description"
        cause = (
            f"{_code(y)}'s description is {words} word{'s' if words != 1 else ''} ({_quote(dy.description)}): it "
            f"names no request that should lead to it."
        )
    else:
        confirmed, fix = False, "system_prompt" if dy is not None else "tool_description"
        cause = (
            "Hypothesis: the model answers from its own knowledge instead of calling the tool"
            + ("" if dy is not None else f" (no definition of {_code(y)} was captured)")
            + "."
        )
    action = (
        f"Add the requests that need {_code(y)} to its description (trigger phrases, use cases) and say in the "
        f"system prompt when {_code(y)} is required."
    )
    asked = _requests(p, requests)
    suggestion = f"Add to {_code(y)}'s description: “Call it for requests such as “{asked[0]}”.”" if asked else None
    return Recommendation(fix, f"{_code(y)} not called when needed", finding, cause, action, suggestion, confirmed, p,  # type: ignore[arg-type]
                          tuple(d for d in (dy,) if d is not None))  # fmt: skip


def _unnecessary(p: Pattern, index: DefinitionIndex) -> Recommendation:
    x = p.tool or ""
    dx = index.get(p.agent, x)
    finding = f"{_agent(p)} called {_code(x)} when no call was needed, {_calls_phrase(p)}."
    if dx is not None and not _RESTRICTION.search(dx.description or ""):
        confirmed = True
        cause = f"{_code(x)}'s description states no precondition: {_quote(dx.description)}."
    else:
        confirmed = False
        cause = "Hypothesis: the agent calls tools by default instead of answering directly."
    action = (
        f"State {_code(x)}'s preconditions in its description (when it is needed, when not); tell the agent in "
        f"the system prompt to answer directly when no data is needed."
    )
    return Recommendation("tool_description", f"{_code(x)} called without need", finding, cause, action, None,
                          confirmed, p, tuple(d for d in (dx,) if d is not None))  # fmt: skip


def _forbidden(p: Pattern, index: DefinitionIndex) -> Recommendation:
    x = p.tool or ""
    dx = index.get(p.agent, x)
    finding = f"{_agent(p)} called {_code(x)} where it is forbidden, in {_runs_phrase(p)}."
    restriction = _RESTRICTION.search(dx.description or "") if dx is not None else None
    if dx is not None and restriction:
        return Recommendation(
            "tool_implementation",
            f"{_code(x)} called where it is forbidden",
            finding,
            f"{_code(x)}'s description already restricts it ({_quote(dx.description)}) and the model called it "
            f"anyway: text alone does not hold it back.",
            f"Enforce it in code: make {_code(x)} refuse unless its precondition holds (a guardrail, e.g. a "
            f"confirmation token), or remove {_code(x)} from {_agent(p)}'s toolset where it is forbidden.",
            None,
            True,
            p,
            (dx,),
        )
    return Recommendation(
        "system_prompt",
        f"{_code(x)} called where it is forbidden",
        finding,
        "Hypothesis: nothing the model reads forbids it"
        + (f" ({_code(x)}'s description: {_quote(dx.description)})" if dx is not None else "")
        + ".",
        f"Add an explicit prohibition to the system prompt and to {_code(x)}'s description; consider a guardrail "
        f"in the tool or removing it from {_agent(p)}'s toolset.",
        None,
        False,
        p,
        tuple(d for d in (dx,) if d is not None),
    )


def _hallucinated(p: Pattern, index: DefinitionIndex) -> Recommendation:
    x = p.tool or ""
    offered = sorted(index.offered(p.agent) or ())
    close = difflib.get_close_matches(x, offered, n=1, cutoff=0.5)
    instead = ", ".join(f"{_code(y)} ({n} runs)" for y, n in p.instead_of)
    finding = f"{_agent(p)} called {_code(x)}, a tool it does not offer, in {_runs_phrase(p)}."
    if instead:
        finding += f" It was called in place of {instead}."
    cause = "Hypothesis: a renamed or removed tool, or a stale example in the prompt"
    cause += f"; the closest offered name is {_code(close[0])}." if close else "."
    action = (
        f"Look for {_code(x)} in the system prompt and examples and replace it with the offered name; enable strict "
        f"tool use so only offered names can be called."
    )
    return Recommendation("system_prompt", f"invented tool {_code(x)}", finding, cause, action, None, False, p)


def _parameter(p: Pattern, index: DefinitionIndex) -> Recommendation:
    x = p.tool or ""
    label = parameter_label(p.parameter) or "(arguments)"
    pc = _code(label)
    d = index.get(p.agent, x)
    schema = d.input_schema if d is not None else None
    param = parameter_schema(schema, p.parameter)
    constraint = constraint_text(param)
    example = example_value(param)
    example_text = f'"{example}"' if isinstance(example, str) else repr(example).replace("True", "true")
    defs = tuple(x for x in (d,) if x is not None)
    kind = p.kind
    confirmed = False
    suggestion: str | None = None
    fix: FixType = "parameter_schema"
    if kind == "missing_parameter":
        finding = f"{_code(x)} omitted {pc} in {_calls_phrase(p)} of {_agent(p)}."
        required = is_required(schema, p.parameter)
        if d is None:
            cause = (
                f"Hypothesis: {pc} is not described where the model can see it (no definition of {_code(x)} captured)."
            )
        elif required is False or (required is None and param is None):
            confirmed = True
            cause = f"{pc} is not marked required in {_code(x)}'s schema."
        elif not described(d, p.parameter):
            confirmed = True
            cause = f"{pc} is required in its schema but its description never mentions it."
        else:
            cause = f"{pc} is required and described; hypothesis: the model cannot tell what value to give."
        action = (
            f"Describe {pc} with an example value in {_code(x)}'s input_schema."
            if required
            else f"Mark {pc} required and describe it with an example value in {_code(x)}'s input_schema."
        )
        suggestion = f"Describe {pc}: “Required{': ' + constraint if constraint else ''}. Example: {example_text}.”"
    elif kind == "unknown_parameter":
        finding = (
            f"{_code(x)} was called with {pc}, which its schema does not define, in {_calls_phrase(p)} of {_agent(p)}."
        )
        extra = schema_allows_extra(schema)
        if extra:
            confirmed = True
            cause = f"{_code(x)}'s schema does not set `additionalProperties: false`, so nothing rejects {pc}."
        else:
            cause = "Hypothesis: the model uses a name it expects from similar tools."
        action = (
            f"Set `additionalProperties: false` and use strict tool use; if the model keeps sending {pc} as a "
            f"synonym, rename the parameter or accept it."
        )
    elif kind in ("wrong_type", "enum_violation", "invalid_value"):
        what = {"wrong_type": "of the wrong type", "enum_violation": "outside its allowed values",
                "invalid_value": "that violates its schema"}[kind]  # fmt: skip
        finding = f"{_code(x)} got {pc} {what} in {_calls_phrase(p)} of {_agent(p)}.{_values(p)}"
        if d is not None and param is not None and constraint and not _states_constraint(d, p.parameter, param):
            confirmed = True
            cause = f"{pc} must be {constraint}, but only the schema says so: no description states it."
        else:
            cause = "Hypothesis: the model cannot see the expected form of the value" + (
                "" if d is not None else f" (no definition of {_code(x)} captured)"
            ) + "."  # fmt: skip
        action = {
            "wrong_type": f"Give {pc}'s type and format in its description with an example; coerce the common form "
            f"in the tool.",
            "enum_violation": f"List the allowed values of {pc} in its description and map common synonyms.",
            "invalid_value": f"Document {pc}'s constraint (range, pattern, length) in its description.",
        }[kind]
        if constraint:
            suggestion = f"Describe {pc}: “{constraint[:1].upper() + constraint[1:]}. Example: {example_text}.”"
    elif kind == "wrong_value":
        finding = f"{_code(x)} got a wrong value for {pc} in {_calls_phrase(p)} of {_agent(p)}."
        cause = "Hypothesis: the description does not show how the value follows from the request."
        action = f"Add an example to {pc}'s description showing how it is derived from the user's request."
    elif kind == "forbidden_parameter":
        finding = f"{_code(x)} was called with {pc}, which must not be set, in {_calls_phrase(p)} of {_agent(p)}."
        cause = "Hypothesis: the schema offers a parameter the model should not use here."
        action = f"Tell the model not to set {pc}, or remove it from the schema."
    else:  # malformed_arguments
        finding = f"{_code(x)} got arguments that are not a JSON object in {_calls_phrase(p)} of {_agent(p)}."
        cause = "Hypothesis: the schema is too complex for the model to fill reliably."
        action = f"Enable strict tool use; simplify {_code(x)}'s schema (fewer nested unions)."
    title = {
        "missing_parameter": f"{_code(x)} omits {pc}",
        "unknown_parameter": f"{_code(x)} gets an unknown {pc}",
        "wrong_type": f"{_code(x)}: {pc} of the wrong type",
        "enum_violation": f"{_code(x)}: {pc} outside its allowed values",
        "invalid_value": f"{_code(x)}: invalid {pc}",
        "wrong_value": f"{_code(x)}: wrong {pc}",
        "forbidden_parameter": f"{_code(x)} gets a forbidden {pc}",
    }.get(kind, f"{_code(x)}: malformed arguments")
    return Recommendation(fix, title, finding, cause, action, suggestion, confirmed, p, defs)


def _states_constraint(d: ToolDefinition, pointer: str | None, param: Mapping[str, Any]) -> bool:
    """Whether some description states the parameter's constraint (its enum values, bounds or pattern)."""
    text = (d.description or "") + "\n" + str(param.get("description") or "")
    if isinstance(param.get("enum"), list):
        return all(mentions(text, str(v)) for v in param["enum"])
    bounds = [param.get(k) for k in ("minimum", "maximum") if param.get(k) is not None]
    if bounds:
        return all(str(b) in text for b in bounds)
    if isinstance(param.get("pattern"), str):
        return param["pattern"] in text
    return described(d, pointer)


_GENERIC: Final[Mapping[str, tuple[FixType, str, str]]] = {
    "wrong_order": ("system_prompt", "called in the wrong order", "State the required order in the system prompt or "
                    "in the tool's description (“call X first to get …”)."),
    "tool_error": ("tool_implementation", "fails", "Make the tool return actionable error messages the model can "
                   "recover from; validate inputs before calling; check the backend for the error types shown."),
    "repeated_call": ("system_prompt", "called again with the same arguments", "Tell the agent tool results are "
                      "final; make the tool return explicit empty results; cap retries."),
    "loop": ("system_prompt", "called in a loop", "Add a stop condition and a step limit; make the tool's output say "
             "when nothing more can be found."),
    "excess_calls": ("tool_implementation", "too many calls per run", "Batch work into one call (accept lists); lower "
                     "the step limit."),
    "tool_latency": ("tool_implementation", "slow", "Add caching or a timeout to the tool; investigate its backend "
                     "(calls over their latency budget)."),
    "run_latency": ("system_prompt", "runs over their latency budget", "Cut sequential calls; issue independent calls "
                    "in parallel."),
    "response_mismatch": ("system_prompt", "answers lack the expected content", "Instruct the agent to state the tool "
                          "results it used in its answer."),
    "off_topic": ("system_prompt", "answers out-of-scope requests", "Add scope rules and a refusal pattern for "
                  "off-topic requests."),
    "over_refusal": ("system_prompt", "refuses in-scope requests", "List the in-scope topics; loosen the refusal "
                     "rule."),
    "goal_not_met": ("system_prompt", "does not reach the user's goal", "Read where the trajectory diverged from the "
                     "goal on the example traces; tighten the plan in the system prompt."),
    "poor_trajectory": ("system_prompt", "takes poor trajectories", "Read the judge's reasons on the example traces; "
                        "tighten the plan in the system prompt."),
}  # fmt: skip


def _generic(p: Pattern, index: DefinitionIndex) -> Recommendation:
    fix, what, action = _GENERIC.get(
        p.kind, ("system_prompt", p.kind.replace("_", " "), "Read the example traces to find the cause.")
    )
    subject = _code(p.tool) if p.tool else _agent(p)
    where = f" of {_agent(p)}" if p.tool else ""
    count = _calls_phrase(p) if p.tool and p.kind not in ("wrong_order",) else _runs_phrase(p)
    finding = f"{subject}{where}: {what}, {count}.{_values(p)}"
    if p.judged_runs:
        finding += f" A judge raised it in {p.judged_runs} run{'s' if p.judged_runs != 1 else ''}."
    cause = "Hypothesis: the usual cause of this kind of failure (SCORING §5.3); read the example traces to confirm."
    d = index.get(p.agent, p.tool)
    return Recommendation(fix, f"{subject} {what}", finding, cause, action, None, False, p,
                          tuple(x for x in (d,) if x is not None))  # fmt: skip


def recommend_one(
    pattern: Pattern, definitions: DefinitionIndex, requests: Mapping[str, str] | None = None
) -> Recommendation:
    """The recommendation for one pattern."""
    asked = requests or {}
    kind = pattern.kind
    if kind == "wrong_tool":
        return _confusion(pattern, definitions, asked)
    if kind == "missing_tool":
        return _missing_tool(pattern, definitions, asked)
    if kind == "unnecessary_tool":
        return _unnecessary(pattern, definitions)
    if kind == "forbidden_tool":
        return _forbidden(pattern, definitions)
    if kind == "hallucinated_tool":
        return _hallucinated(pattern, definitions)
    if kind in (
        "missing_parameter",
        "unknown_parameter",
        "wrong_type",
        "enum_violation",
        "invalid_value",
        "wrong_value",
        "forbidden_parameter",
        "malformed_arguments",
    ):
        return _parameter(pattern, definitions)
    return _generic(pattern, definitions)


def recommend(
    patterns: Iterable[Pattern],
    definitions: DefinitionIndex | Sequence[ToolDefinition] = (),
    *,
    limit: int = 10,
    min_runs: int = 1,
    requests: Mapping[str, str] | None = None,
) -> list[Recommendation]:
    """Recommendations for the patterns with at least ``min_runs`` runs hurt, most impact first, at most ``limit``.

    ``requests`` maps example trace ids to the user's text (kept runs), quoted as contrasting examples. A
    ``tool_error`` of a tool the agent never offered is left to the ``hallucinated_tool`` recommendation of the
    same name.
    """
    index = definitions if isinstance(definitions, DefinitionIndex) else DefinitionIndex(definitions)
    ranked = sorted((p for p in patterns if p.runs >= min_runs), key=lambda p: (-p.impact, -p.runs, -p.issues, p.key))
    invented = {(p.agent, p.tool) for p in ranked if p.kind == "hallucinated_tool"}
    out: list[Recommendation] = []
    for p in ranked:
        if p.kind == "tool_error" and (p.agent, p.tool) in invented:
            continue
        out.append(recommend_one(p, index, requests))
        if len(out) >= limit:
            break
    return out
