"""The native dataset format ``monitor.dataset/v1`` (SCORING.md §6.5): YAML, JSON or JSON Lines.

Validation uses the JSON Schema shipped in ``schema/monitor.dataset.v1.json`` (Draft 2020-12);
errors cite the JSON path of the offending value. JSON Lines: the first line is the header (every
top-level key except ``cases``), each following line is one case.

Mapping to the internal form (:mod:`monitor.rules.datasets.model`):

* ``expect`` → :class:`~monitor.scoring.expectation.Expectation`: ``calls`` → ``expected_calls``
  (an omitted ``args`` stays unspecified), ``response`` → ``expected_response``,
  ``response_contains`` → ``expected_keywords``, ``budgets`` → ``Budgets``, ``rubrics`` (``{id:
  text}``), the other keys by name. ``defaults.expect`` applies to every case, then the case's
  ``expect``, then a turn's ``expect`` (key by key: a later level replaces a key).
* ``input`` (text) or ``messages`` (``[{role, content}]`` or ``[{role, parts}]``) or ``turns``.
* ``tools`` (case, else ``defaults.tools``) → ``Case.tools`` and the expectation's ``catalogue``.
* ``actual``: a recorded Run (``serialize.run_to_json`` form; one per turn as a list), read by
  :func:`recorded_run` (shared with ``monitor score``): calls written without ``step`` and without
  timings are taken as model-selected calls, one step each, so that ``selected`` views see them; a
  run without ``user_input`` gets its turn's ``input``/``messages``.
* ``scorers`` omitted → :data:`NATIVE_DEFAULT_SCORERS`; ``gate.scorers`` omitted → every scorer
  gates with ``aggregate: mean`` and its own threshold; given → only the listed ids gate (an id
  that is not a scorer is an error).
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import jsonschema.exceptions

from monitor.rules.datasets._common import JsonLines, Where, did_you_mean, registered_scorer
from monitor.rules.datasets.model import Case, Dataset, DatasetError, Gate, GateSpec, ScorerSpec, Turn
from monitor.scoring.checks.schema_check import compile_schema
from monitor.scoring.expectation import Budgets, Expectation, ExpectedCall
from monitor.trajectory.model import ABSENT, Message, Messages, Run, TextPart, ToolDef
from monitor.trajectory.serialize import message_from_json, run_from_json

__all__ = [
    "FORMAT",
    "NATIVE_DEFAULT_SCORERS",
    "expectation_from_native",
    "gate_from_native",
    "load_native",
    "native_document",
    "recorded_run",
    "schema",
    "validate",
]

FORMAT = "monitor.dataset/v1"

NATIVE_DEFAULT_SCORERS: tuple[ScorerSpec, ...] = (
    ScorerSpec(
        "trajectory",
        "trajectory_match",
        {"trajectory_match_mode": "superset", "tool_args_match_mode": "superset"},
    ),
    ScorerSpec("forbidden_tools", "forbidden_tool_check"),
    ScorerSpec("no_tools", "no_tool_needed_check"),
    ScorerSpec("budget", "call_budget_check"),
    ScorerSpec("latency", "latency_check"),
)
"""Scorers of a native file without ``scorers``: the expected calls must all be made (extra calls
allowed, expected arguments contained in the actual ones), plus the rule checks, which are
``not_applicable`` (and pass) unless the expectation sets their rule."""


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The shipped JSON Schema of ``monitor.dataset/v1``."""
    text = resources.files("monitor.rules.datasets").joinpath("schema/monitor.dataset.v1.json").read_text("utf-8")
    loaded: dict[str, Any] = json.loads(text)
    return loaded


def _validator(ref: str | None = None) -> jsonschema.protocols.Validator:
    root = schema()
    target: dict[str, Any] = root if ref is None else {"$ref": f"#/$defs/{ref}", "$defs": root["$defs"]}
    cls = jsonschema.validators.validator_for(root, default=jsonschema.Draft202012Validator)
    return cls(target)


def _json_path(base: str, parts: Sequence[Any]) -> str:
    out = base
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        elif isinstance(p, str) and p.isidentifier():
            out += f".{p}"
        else:
            out += f"[{json.dumps(p)}]"
    return out


def _message(error: jsonschema.exceptions.ValidationError) -> str:
    if error.validator == "oneOf" and isinstance(error.validator_value, list):
        required = [s["required"][0] for s in error.validator_value if isinstance(s, dict) and list(s) == ["required"]]
        if required and len(required) == len(error.validator_value):
            return f"needs exactly one of {', '.join(repr(r) for r in required)}"
    if error.validator == "additionalProperties" and error.validator_value is False:
        return error.message.replace("Additional properties are not allowed", "unknown key(s) not allowed")
    if error.validator == "const" and list(error.absolute_path) == ["format"]:
        return f"unsupported format {error.instance!r}: this version reads only {FORMAT!r}"
    if error.context:
        best = jsonschema.exceptions.best_match(error.context)
        if best is not None and best.validator not in ("type",):
            return str(best.message)
    return str(error.message)


def validate(
    doc: Any, file: str, *, ref: str | None = None, base: str = "$", lines: Sequence[int] | None = None
) -> None:
    """Validate ``doc`` against the schema (or its ``$defs/ref``); the first error (in document order) is raised."""
    errors = sorted(_validator(ref).iter_errors(doc), key=lambda e: [str(p) for p in e.absolute_path])
    if not errors:
        return
    error = min(errors, key=lambda e: (len(e.absolute_path) == 0, [str(p) for p in e.absolute_path]))
    path = list(error.absolute_path)
    where = _json_path(base, path)
    if lines is not None and len(path) >= 2 and path[0] == "cases" and isinstance(path[1], int):
        where += f" (line {lines[path[1] + 1]})"
    raise DatasetError(file, where, _message(error))


def native_document(doc: Any, file: str) -> tuple[Any, Sequence[int] | None]:
    """A JSON Lines native file as one document (header line + one case per line)."""
    if not isinstance(doc, JsonLines):
        return doc, None
    if not doc:
        raise DatasetError(file, "$", "empty file: the first line must be the header with 'format'")
    header = doc[0]
    if not isinstance(header, Mapping):
        raise DatasetError(file, "$[0] (line 1)", "the first line must be the header object with 'format'")
    if "cases" in header:
        raise DatasetError(file, "$.cases", "in JSON Lines, cases are the lines after the header, not a 'cases' key")
    return {**header, "cases": list(doc[1:])}, doc.lines


# ----------------------------------------------------------------------------- conversions


def _expected_call(obj: Mapping[str, Any], where: Where) -> ExpectedCall:
    validators = dict(obj.get("param_validators") or {})
    for param, fragment in validators.items():
        problem = compile_schema(fragment).problem
        if problem is not None:
            where.key("param_validators").key(str(param)).fail(f"not a usable JSON Schema: {problem}")
    return ExpectedCall(
        name=obj["name"],
        args=obj.get("args", ABSENT),
        type=obj.get("type"),
        output=obj.get("output", ABSENT),
        required_params=obj.get("required_params"),
        forbidden_params=tuple(obj.get("forbidden_params") or ()),
        param_validators=validators,
    )


def _tuple(value: Any) -> tuple[Any, ...] | None:
    return None if value is None else tuple(value)


def expectation_from_native(
    expect: Mapping[str, Any] | None, where: Where, *, catalogue: tuple[ToolDef, ...] | None = None
) -> Expectation:
    """An :class:`Expectation` from a validated native ``expect`` block (SCORING.md §6.5 mapping)."""
    e = dict(expect or {})
    budgets = dict(e.get("budgets") or {})
    calls = e.get("calls")
    return Expectation(
        expected_calls=None
        if calls is None
        else tuple(_expected_call(c, where.key("calls").item(i)) for i, c in enumerate(calls)),
        expected_tools=_tuple(e.get("expected_tools")),
        forbidden_tools=_tuple(e.get("forbidden_tools")),
        no_tools=bool(e.get("no_tools", False)),
        expected_response=e.get("response"),
        expected_keywords=_tuple(e.get("response_contains")),
        category=e.get("category"),
        reference_topics=_tuple(e.get("reference_topics")),
        reference_outcome=e.get("reference_outcome"),
        budgets=Budgets(
            max_tool_calls=budgets.get("max_tool_calls"),
            max_calls_per_tool=dict(budgets.get("max_calls_per_tool") or {}),
            tool_latency_budget_ms={k: float(v) for k, v in (budgets.get("tool_latency_budget_ms") or {}).items()},
            run_latency_budget_ms=None
            if budgets.get("run_latency_budget_ms") is None
            else float(budgets["run_latency_budget_ms"]),
            max_identical_calls=budgets.get("max_identical_calls"),
            max_identical_calls_per_tool=dict(budgets.get("max_identical_calls_per_tool") or {}),
        ),
        allowed_tools=tuple(e.get("allowed_tools") or ()),
        rubrics=tuple((str(k), str(v)) for k, v in (e.get("rubrics") or {}).items()),
        catalogue=catalogue,
    )


def _messages(raw: Sequence[Mapping[str, Any]]) -> Messages:
    out: list[Message] = []
    for m in raw:
        role = {"human": "user", "ai": "assistant"}.get(m["role"], m["role"])
        if "parts" in m:
            out.append(message_from_json({"role": role, "parts": m["parts"]}))
        else:
            out.append(Message(role, (TextPart(m.get("content", "")),)))
    return tuple(out)


def _input(obj: Mapping[str, Any]) -> Messages:
    if "input" in obj:
        return (Message("user", (TextPart(obj["input"]),)),)
    return _messages(obj["messages"])


def recorded_run(
    obj: Mapping[str, Any],
    where: Where,
    *,
    user_input: Messages | None = None,
    trace_id: str | None = None,
    run_id: str | None = None,
) -> Run:
    """A hand-written or recorded run (``serialize.run_to_json`` form), read the same way by every command.

    Calls written without ``step`` and without timings (and not marked executed) become the calls the
    model selected, one step each (``step = index``), so ``selected`` views (Ragas, ADK) see them.
    ``user_input`` (the case's or turn's input) fills a run that records none, so scorers needing the
    input messages (Mastra) score it; a run's own ``user_input`` wins. ``trace_id``/``run_id`` fill
    empty ids. Raises :class:`DatasetError` at ``where`` when ``obj`` is not a run.
    """
    try:
        run = run_from_json(obj)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        where.fail(f"not a recorded run (serialize.run_to_json form): {type(exc).__name__}: {exc}")
    calls = []
    for call in run.calls:
        if call.step is None and not call.executed and call.start_ns is None:
            call = dataclasses.replace(call, step=call.index, part=0, requested_args=call.args)
        calls.append(call)
    return dataclasses.replace(
        run,
        trace_id=run.trace_id or trace_id or "",
        run_id=run.run_id or run_id or "",
        user_input=run.user_input or user_input,
        calls=tuple(calls),
    )


def _recorded(obj: Mapping[str, Any], case_id: str, turn: int, where: Where, user_input: Messages) -> Run:
    return recorded_run(obj, where, user_input=user_input, trace_id=f"case:{case_id}", run_id=f"turn:{turn}")


def _merge(*blocks: Mapping[str, Any] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for b in blocks:
        out.update(b or {})
    return out


def gate_from_native(raw: Mapping[str, Any] | None, scorer_ids: Sequence[str], where: Where) -> Gate:
    """A :class:`Gate` from a validated ``gate`` block; ``scorers`` omitted → every scorer gates."""
    g = dict(raw or {})
    if "scorers" in g:
        gates: dict[str, GateSpec] = {}
        for sid, spec in g["scorers"].items():
            if sid not in scorer_ids:
                where.key("scorers").key(sid).fail(
                    f"gate names scorer {sid!r}, which is not among the scorers ({', '.join(scorer_ids)})"
                    + did_you_mean(sid, scorer_ids)
                )
            gates[sid] = GateSpec(
                threshold=spec.get("threshold"),
                aggregate=spec.get("aggregate", "mean"),
                min_mean=spec.get("min_mean"),
                require=bool(spec.get("require", False)),
            )
    else:
        gates = {sid: GateSpec() for sid in scorer_ids}
    return Gate(
        min_pass_rate=float(g.get("min_pass_rate", 1.0)),
        runs=int(g.get("runs", 1)),
        allow_errors=bool(g.get("allow_errors", False)),
        pass_rate_rounding=g.get("pass_rate_rounding"),
        scorers=gates,
    )


def scorer_specs(raw: Sequence[Mapping[str, Any]] | None, where: Where) -> tuple[ScorerSpec, ...]:
    """Scorer specs from a validated ``scorers`` list (id defaults to the kind; ids must be unique;
    kinds and parameters are checked against the scorer registry)."""
    if raw is None:
        return NATIVE_DEFAULT_SCORERS
    out: list[ScorerSpec] = []
    seen: set[str] = set()
    for i, s in enumerate(raw):
        sid = s.get("id") or s["kind"]
        if sid in seen:
            where.item(i).fail(f"duplicate scorer id {sid!r}: give each instance its own 'id'")
        seen.add(sid)
        out.append(registered_scorer(sid, s["kind"], s.get("params"), where.item(i)))
    return tuple(out)


def load_native(path: Path, doc: Any) -> Dataset:
    """A native dataset from its decoded document (JSON Lines: header + one case per line)."""
    file = str(path)
    full, lines = native_document(doc, file)
    if not isinstance(full, Mapping):
        raise DatasetError(file, "$", "expected an object with 'format: monitor.dataset/v1'")
    validate(full, file, lines=lines)
    where = Where(file)
    defaults = dict(full.get("defaults") or {})
    default_tools = defaults.get("tools")
    specs = scorer_specs(full.get("scorers"), where.key("scorers"))
    gate = gate_from_native(full.get("gate"), [s.id for s in specs], where.key("gate"))
    cases: list[Case] = []
    seen: set[str] = set()
    for i, raw in enumerate(full["cases"]):
        at = where.key("cases").item(i)
        if lines is not None:
            at = Where(file, f"$.cases[{i}] (line {lines[i + 1]})")
        case_id = str(raw["id"])
        if case_id in seen:
            at.key("id").fail(f"duplicate case id {case_id!r}")
        seen.add(case_id)
        tools_raw = raw.get("tools", default_tools)
        tools = (
            None
            if tools_raw is None
            else tuple(ToolDef(t["name"], t.get("description"), t.get("input_schema"), "dataset") for t in tools_raw)
        )
        base_expect = _merge(defaults.get("expect"), raw.get("expect"))
        turns: list[Turn] = []
        actual: list[Run] | None = None
        if "turns" in raw:
            recorded = [t.get("actual") for t in raw["turns"]]
            if any(r is not None for r in recorded):
                if any(r is None for r in recorded):
                    at.key("turns").fail("either every turn has a recorded 'actual' or none has")
                actual = [
                    _recorded(r, case_id, t, at.key("turns").item(t).key("actual"), _input(raw["turns"][t]))
                    for t, r in enumerate(recorded)
                ]
            for t, turn in enumerate(raw["turns"]):
                tat = at.key("turns").item(t)
                expect = _merge(base_expect, turn.get("expect"))
                turns.append(Turn(_input(turn), expectation_from_native(expect, tat.key("expect"), catalogue=tools)))
        else:
            turns.append(Turn(_input(raw), expectation_from_native(base_expect, at.key("expect"), catalogue=tools)))
        rec = raw.get("actual")
        if rec is not None:
            if actual is not None:
                at.key("actual").fail("a recorded trajectory is given both on the case and on its turns")
            items = rec if isinstance(rec, list) else [rec]
            if len(items) != len(turns):
                at.key("actual").fail(f"{len(items)} recorded runs for {len(turns)} turns: give one run per turn")
            actual = [_recorded(r, case_id, t, at.key("actual"), turns[t].input) for t, r in enumerate(items)]
        config = _merge(defaults.get("config"), raw.get("config"))
        if defaults.get("agent") is not None:
            config.setdefault("agent", defaults["agent"])
        cases.append(
            Case(
                id=case_id,
                source="native",
                turns=tuple(turns),
                tools=tools,
                tags=tuple(dict.fromkeys([*defaults.get("tags", ()), *raw.get("tags", ())])),
                config=config,
                actual=None if actual is None else tuple(actual),
                file=file,
            )
        )
    name = full.get("name") or path.name.split(".monitor.")[0]
    return Dataset(
        name=name,
        source="native",
        file=file,
        cases=tuple(cases),
        scorers=specs,
        gate=gate,
        info={"description": full["description"]} if "description" in full else {},
    )
