"""Google ADK datasets (SCORING.md §6.1): EvalSet, legacy ``*.test.json`` / eval-set lists, ``test_config.json``.

Peer: google-adk 2.13.0 ``eval_set.py``, ``eval_case.py``, ``eval_config.py``,
``local_eval_sets_manager.py`` (``convert_eval_set_to_pydantic_schema``) and ``agent_evaluator.py``
(``_get_eval_set_from_old_format``, ``_validate_input``, ``NUM_RUNS``).

Contract:

* EvalSet keys are snake_case or camelCase (pydantic ``alias_generator=to_camel``); unknown keys are
  an error (``extra="forbid"``), except inside ``session_input`` (ADK: ``extra="allow"``; handed to
  the runner as is) and on invocation events (ADK ignores the web editor's UI-only keys there).
* Each invocation is one turn: input = text parts of ``user_content`` joined with ``"\\n"``;
  expected calls = ``intermediate_data.tool_uses`` (or every ``function_call`` part of
  ``invocation_events``, as ``get_all_tool_calls``) with their ``args`` (absent stays ``null``);
  expected response = ``final_response`` text (None when absent).
* ``conversation_scenario`` cases are unsupported: an error, or skipped with ``skip_unsupported``
  (listed in ``Dataset.info["skipped"]``).
* Criteria come from ``test_config.json`` next to the file (ADK defaults without it); default view
  ``selected``/``flatten``; gate: every criterion gates with ``aggregate: mean``; ``runs`` = 2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from monitor.rules.datasets._common import Where, camel_to_snake, did_you_mean, read_document, user_message
from monitor.rules.datasets.model import Case, Dataset, Gate, GateSpec, ScorerSpec, Turn
from monitor.scoring.expectation import Expectation, ExpectedCall

__all__ = [
    "ADK_DEFAULT_CRITERIA",
    "ADK_NUM_RUNS",
    "criteria_scorers",
    "load_adk",
    "load_test_config",
    "normalize_match_type",
]

ADK_NUM_RUNS = 2
ADK_DEFAULT_CRITERIA: dict[str, Any] = {"tool_trajectory_avg_score": 1.0, "response_match_score": 0.8}

_TRAJECTORY = "tool_trajectory_avg_score"
_RESPONSE = "response_match_score"
_RUBRIC_JUDGES = frozenset(
    {
        "rubric_based_tool_use_quality_v1",
        "rubric_based_multi_turn_trajectory_quality_v1",
        "multi_turn_trajectory_quality_v1",
        "multi_turn_tool_use_quality_v1",
    }
)
_GOAL_JUDGES = frozenset({"multi_turn_task_success_v1"})
UNSUPPORTED_METRICS = frozenset(
    {
        "final_response_match_v2",
        "hallucinations_v1",
        "safety_v1",
        "response_evaluation_score",
        "per_turn_user_simulator_quality_v1",
    }
)
_VIEW = {"calls_source": "selected", "scope": "flatten"}

# ----------------------------------------------------------------------------- model fields (ADK / genai)

_EVAL_SET = ("eval_set_id", "name", "description", "eval_cases", "creation_timestamp")
_EVAL_CASE = (
    "eval_id",
    "conversation",
    "conversation_scenario",
    "session_input",
    "creation_timestamp",
    "rubrics",
    "final_session_state",
)
_INVOCATION = (
    "invocation_id",
    "user_content",
    "final_response",
    "intermediate_data",
    "creation_timestamp",
    "inference_call_count",
    "duration",
    "rubrics",
    "app_details",
)
_INTERMEDIATE = ("tool_uses", "tool_responses", "intermediate_responses")
_CONTENT = ("parts", "role")
_PART = (
    "text",
    "function_call",
    "function_response",
    "thought",
    "thought_signature",
    "inline_data",
    "file_data",
    "executable_code",
    "code_execution_result",
    "video_metadata",
    "media_resolution",
    "part_metadata",
    "tool_call",
    "tool_response",
)
_FUNCTION_CALL = ("id", "name", "args", "partial_args", "will_continue")
_SESSION_INPUT = ("app_name", "user_id", "session_id", "state")


# ----------------------------------------------------------------------------- test_config.json


def normalize_match_type(value: Any, where: Where) -> str:
    """ADK ``_coerce_match_type``: trimmed, case-insensitive, ``-``/space → ``_``; ints 0/1/2."""
    if isinstance(value, bool):
        where.fail(f"match_type must be EXACT, IN_ORDER or ANY_ORDER (or 0/1/2), got {value!r}")
    if isinstance(value, int):
        by_int = {0: "EXACT", 1: "IN_ORDER", 2: "ANY_ORDER"}
        if value not in by_int:
            where.fail(f"match_type must be 0, 1 or 2 as an integer, got {value}")
        return by_int[value]
    if isinstance(value, str):
        norm = value.strip().upper().replace("-", "_").replace(" ", "_")
        if norm in ("EXACT", "IN_ORDER", "ANY_ORDER"):
            return norm
    where.fail(f"match_type must be EXACT, IN_ORDER or ANY_ORDER (or 0/1/2), got {value!r}")


def load_test_config(path: Path) -> dict[str, Any]:
    """The raw ``criteria`` mapping of a ``test_config.json`` (keys ``criteria``/camelCase accepted)."""
    where = Where(str(path))
    doc = where.fields(read_document(path), ("criteria", "user_simulator_config"), camel=True)
    if "criteria" not in doc:
        where.fail("missing required key 'criteria'")
    criteria = where.key("criteria").obj(doc["criteria"])
    return {camel_to_snake(str(k)) if not str(k).islower() else str(k): v for k, v in criteria.items()}


def criteria_scorers(
    criteria: Mapping[str, Any], where: Where, *, skip_unsupported: bool
) -> tuple[list[ScorerSpec], dict[str, GateSpec], list[str]]:
    """Scorer specs and gate entries for ADK criteria (ids = the ADK metric names).

    Returns ``(scorers, gate scorers, skipped metric names)``. A metric we do not support is an
    error unless ``skip_unsupported``.
    """
    scorers: list[ScorerSpec] = []
    gates: dict[str, GateSpec] = {}
    skipped: list[str] = []
    for metric, raw in criteria.items():
        at = where.key(metric)
        opts: dict[str, Any]
        if isinstance(raw, int | float) and not isinstance(raw, bool):
            opts = {"threshold": float(raw)}
        else:
            opts = at.fields(
                raw,
                (
                    "threshold",
                    "match_type",
                    "ignore_args",
                    "rubrics",
                    "judge_model_options",
                    "evaluate_intermediate_nl_responses",
                ),
                camel=True,
                extra="allow",
                what="a number or an object with 'threshold'",
            )
            if "threshold" not in opts:
                at.fail("missing required key 'threshold'")
        threshold = at.key("threshold").number(opts["threshold"])
        if not 0.0 <= threshold <= 1.0:
            at.key("threshold").fail(f"threshold must be within [0, 1], got {threshold}")
        params: dict[str, Any]
        if metric == _TRAJECTORY:
            params = {"threshold": threshold, **_VIEW}
            if "match_type" in opts:
                params["match_type"] = normalize_match_type(opts["match_type"], at.key("match_type"))
            if "ignore_args" in opts:
                params["ignore_args"] = at.key("ignore_args").boolean(opts["ignore_args"])
            kind = "adk_tool_trajectory"
        elif metric == _RESPONSE:
            params = {"threshold": threshold}
            kind = "adk_response_match"
        elif metric in _RUBRIC_JUDGES:
            params = {"style": "rubric", "threshold": threshold}
            kind = "judge_trajectory_quality"
        elif metric in _GOAL_JUDGES:
            params = {"threshold": threshold}
            kind = "judge_goal_accuracy"
        else:
            if skip_unsupported:
                skipped.append(metric)
                continue
            known = [
                _TRAJECTORY,
                _RESPONSE,
                *sorted(_RUBRIC_JUDGES),
                *sorted(_GOAL_JUDGES),
                *sorted(UNSUPPORTED_METRICS),
            ]
            why = "not supported" if metric in UNSUPPORTED_METRICS else "unknown metric" + did_you_mean(metric, known)
            at.fail(f"ADK metric {metric!r}: {why} (use --skip-unsupported to leave it out)")
        scorers.append(ScorerSpec(metric, kind, params))
        gates[metric] = GateSpec(threshold=threshold, aggregate="mean")
    return scorers, gates, skipped


def _criteria_for(path: Path) -> tuple[dict[str, Any], Path | None]:
    config = path.parent / "test_config.json"
    if config.is_file():
        return load_test_config(config), config
    return dict(ADK_DEFAULT_CRITERIA), None


# ----------------------------------------------------------------------------- EvalSet


def _content_text(value: Any, where: Where) -> str:
    content = where.fields(value, _CONTENT, camel=True, what="a Content object ({role, parts})")
    parts = where.key("parts").array(content.get("parts") or [])
    texts: list[str] = []
    for i, raw in enumerate(parts):
        part = where.key("parts").item(i).fields(raw, _PART, camel=True, what="a Part object")
        text = part.get("text")
        if text is not None:
            where.key("parts").item(i).key("text").string(text)
            if text:
                texts.append(text)
    return "\n".join(texts)


def _function_call(value: Any, where: Where) -> ExpectedCall:
    call = where.fields(value, _FUNCTION_CALL, camel=True, what="a FunctionCall object ({name, args})")
    if "name" not in call or call["name"] is None:
        where.fail("missing required key 'name'")
    name = where.key("name").string(call["name"])
    args = call.get("args")
    if args is not None:
        where.key("args").obj(args, "an object (the call's arguments)")
    return ExpectedCall(name=name, args=args)


def _expected_calls(value: Any, where: Where) -> tuple[ExpectedCall, ...]:
    if value is None:
        return ()
    data = where.obj(value, "an object with 'tool_uses' or 'invocation_events'")
    keys = {camel_to_snake(str(k)) for k in data}
    if "invocation_events" in keys:
        events_obj = where.fields(data, ("invocation_events",), camel=True)
        events = where.key("invocation_events").array(events_obj.get("invocation_events") or [])
        calls: list[ExpectedCall] = []
        for i, raw in enumerate(events):
            at = where.key("invocation_events").item(i)
            event = at.fields(raw, ("author", "content"), camel=True, required=("author",), extra="ignore")
            content = event.get("content")
            if content is None:
                continue
            cobj = at.key("content").fields(content, _CONTENT, camel=True)
            for j, praw in enumerate(at.key("content").key("parts").array(cobj.get("parts") or [])):
                pat = at.key("content").key("parts").item(j)
                part = pat.fields(praw, _PART, camel=True)
                if part.get("function_call") is not None:
                    calls.append(_function_call(part["function_call"], pat.key("function_call")))
        return tuple(calls)
    inter = where.fields(data, _INTERMEDIATE, camel=True)
    uses = where.key("tool_uses").array(inter.get("tool_uses") or [])
    return tuple(_function_call(u, where.key("tool_uses").item(i)) for i, u in enumerate(uses))


def _rubrics(value: Any, where: Where) -> tuple[tuple[str, str], ...]:
    if value is None:
        return ()
    out: list[tuple[str, str]] = []
    for i, raw in enumerate(where.array(value)):
        at = where.item(i)
        rubric = at.fields(
            raw, ("rubric_id", "rubric_content", "description", "type"), camel=True, required=("rubric_id",)
        )
        content = rubric.get("rubric_content")
        text = ""
        if content is not None:
            text = str(
                at.key("rubric_content").fields(content, ("text_property",), camel=True).get("text_property") or ""
            )
        out.append((at.key("rubric_id").string(rubric["rubric_id"]), text))
    return tuple(out)


def _session_input(value: Any, where: Where) -> dict[str, Any] | None:
    if value is None:
        return None
    fields = where.fields(value, _SESSION_INPUT, camel=True, extra="allow", required=("app_name", "user_id"))
    return fields


def _turn(raw: Any, where: Where, rubrics: tuple[tuple[str, str], ...], session: Mapping[str, Any] | None) -> Turn:
    inv = where.fields(raw, _INVOCATION, camel=True, required=("user_content",), what="an Invocation object")
    text = _content_text(inv["user_content"], where.key("user_content"))
    final = inv.get("final_response")
    expected_response = None if final is None else _content_text(final, where.key("final_response"))
    calls = _expected_calls(inv.get("intermediate_data"), where.key("intermediate_data"))
    turn_rubrics = rubrics + _rubrics(inv.get("rubrics"), where.key("rubrics"))
    expectation = Expectation(expected_calls=calls, expected_response=expected_response, rubrics=turn_rubrics)
    return Turn(input=user_message(text), expectation=expectation, session_input=session)


def _eval_set(doc: Any, where: Where, skip_unsupported: bool) -> tuple[str, list[Case], list[str]]:
    es = where.fields(doc, _EVAL_SET, camel=True, required=("eval_set_id", "eval_cases"), what="an EvalSet object")
    set_id = where.key("eval_set_id").string(es["eval_set_id"])
    cases: list[Case] = []
    skipped: list[str] = []
    seen: set[str] = set()
    for i, raw in enumerate(where.key("eval_cases").array(es["eval_cases"])):
        at = where.key("eval_cases").item(i)
        ec = at.fields(raw, _EVAL_CASE, camel=True, required=("eval_id",), what="an EvalCase object")
        case_id = at.key("eval_id").string(ec["eval_id"])
        if case_id in seen:
            at.key("eval_id").fail(f"duplicate eval_id {case_id!r}")
        seen.add(case_id)
        has_conv = ec.get("conversation") is not None
        has_scen = ec.get("conversation_scenario") is not None
        if has_conv == has_scen:
            at.fail("exactly one of 'conversation' and 'conversation_scenario' must be given (ADK EvalCase)")
        if has_scen:
            if skip_unsupported:
                skipped.append(case_id)
                continue
            at.key("conversation_scenario").fail(
                "user-simulation cases (conversation_scenario) are not supported (use --skip-unsupported)"
            )
        session = _session_input(ec.get("session_input"), at.key("session_input"))
        rubrics = _rubrics(ec.get("rubrics"), at.key("rubrics"))
        conversation = at.key("conversation").array(ec["conversation"])
        if not conversation:
            at.key("conversation").fail("a conversation needs at least one invocation")
        turns = tuple(
            _turn(inv, at.key("conversation").item(t), rubrics, session if t == 0 else None)
            for t, inv in enumerate(conversation)
        )
        config: dict[str, Any] = {"eval_set_id": set_id}
        if session is not None:
            config["session_input"] = session
        cases.append(Case(id=case_id, source="adk", turns=turns, config=config, file=where.file))
    return set_id, cases, skipped


# ----------------------------------------------------------------------------- legacy formats


def _legacy_turns(rows: Any, where: Where, criteria: Mapping[str, Any]) -> tuple[Turn, ...]:
    items = where.array(rows, "an array of {query, expected_tool_use, reference}")
    if not items:
        where.fail("no rows: a legacy test needs at least one {query, ...} row")
    turns: list[Turn] = []
    for i, raw in enumerate(items):
        at = where.item(i)
        row = at.obj(raw)
        needed: list[str] = []
        if _TRAJECTORY in criteria:
            needed += ["query", "expected_tool_use"]
        if _RESPONSE in criteria:
            needed += ["query", "reference"]
        for key in dict.fromkeys(needed):
            if key not in row:
                metric = _RESPONSE if key == "reference" else _TRAJECTORY
                at.fail(f"missing required key {key!r} (needed by criterion {metric})")
        query = at.key("query").string(row.get("query", ""))
        calls: list[ExpectedCall] = []
        for j, use in enumerate(at.key("expected_tool_use").array(row.get("expected_tool_use") or [])):
            uat = at.key("expected_tool_use").item(j)
            u = uat.obj(use)
            if "tool_name" not in u:
                uat.fail("missing required key 'tool_name'")
            args = u.get("tool_input")
            if args is not None:
                uat.key("tool_input").obj(args)
            calls.append(ExpectedCall(name=uat.key("tool_name").string(u["tool_name"]), args=args))
        reference = row.get("reference")
        if reference is not None:
            at.key("reference").string(reference)
        turns.append(
            Turn(
                input=user_message(query),
                expectation=Expectation(expected_calls=tuple(calls), expected_response=reference),
            )
        )
    return tuple(turns)


def _legacy_session(value: Any, where: Where) -> dict[str, Any] | None:
    if value is None:
        return None
    session = dict(where.obj(value))
    return session


# ----------------------------------------------------------------------------- entry point


def load_adk(path: Path, doc: Any, *, skip_unsupported: bool = False) -> Dataset:
    """An ADK dataset from a decoded EvalSet object, a legacy test list or a legacy eval-set list."""
    where = Where(str(path))
    criteria, config_path = _criteria_for(path)
    cwhere = Where(str(config_path) if config_path else str(path), "$.criteria")
    scorers, gates, skipped_metrics = criteria_scorers(criteria, cwhere, skip_unsupported=skip_unsupported)
    info: dict[str, Any] = {"criteria": criteria, "test_config": str(config_path) if config_path else None}
    skipped_cases: list[str] = []
    if isinstance(doc, Mapping):
        name, cases, skipped_cases = _eval_set(doc, where, skip_unsupported)
        source = "adk"
    else:
        rows: Sequence[Any] = where.array(doc)
        source = "adk_legacy"
        cases = []
        stem = path.name.removesuffix(".json").removesuffix(".test").removesuffix(".evalset")
        name = stem
        if rows and isinstance(rows[0], Mapping) and "data" in rows[0] and "name" in rows[0]:
            for i, raw in enumerate(rows):
                at = where.item(i)
                item = at.obj(raw)
                if "name" not in item or "data" not in item:
                    at.fail("a legacy eval set element needs 'name' and 'data'")
                case_id = at.key("name").string(item["name"])
                session = _legacy_session(item.get("initial_session"), at.key("initial_session"))
                turns = _legacy_turns(item["data"], at.key("data"), criteria)
                if session is not None:
                    turns = (Turn(turns[0].input, turns[0].expectation, session), *turns[1:])
                config = {"session_input": session} if session is not None else {}
                cases.append(Case(id=case_id, source="adk_legacy", turns=turns, config=config, file=str(path)))
        else:
            turns = _legacy_turns(rows, where, criteria)
            cases.append(Case(id=stem, source="adk_legacy", turns=turns, file=str(path)))
    if skipped_cases:
        info["skipped"] = skipped_cases
    if skipped_metrics:
        info["skipped_metrics"] = skipped_metrics
    return Dataset(
        name=name,
        source=source,  # type: ignore[arg-type]
        file=str(path),
        cases=tuple(cases),
        scorers=tuple(scorers),
        gate=Gate(min_pass_rate=1.0, runs=ADK_NUM_RUNS, scorers=gates),
        info=info,
    )
