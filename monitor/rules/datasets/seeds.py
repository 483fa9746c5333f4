"""Seed-001 single-turn selection JSON (SCORING.md §6.2) and seed-000 TestCase files (§6.3).

Seed-001 (``shared/seeds/001``): ``[{data: {prompt, tools, systemPrompt?, config?}, target:
{expectedTools?, forbiddenTools?, category}, metadata?}]``. Case id = ``metadata.id``, else the
array index. Default scorers: ``tools_selected``, ``tools_avoided``, ``tool_selection_f1`` with
``gate_by_category: true``, ``selection_scope: first_step``, ``calls_source: selected``; every one
gates (``aggregate: mean``), ``min_pass_rate`` 1.0.

Seed-000 (``shared/seeds/000``): a list of ``TestCase`` objects (JSON or YAML) with the dataclass
defaults (``max_tool_calls`` 5, ``max_latency_ms`` 10000). ``param_validators`` are JSON Schema
fragments (checked here). Default scorer ``tool_eval`` (``variant: clipped``), gate
``aggregate: all`` and ``min_pass_rate`` 0.9 (the article's ``run_eval_in_ci`` default).
Unknown keys are errors (the dataclasses reject unknown keyword arguments).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from monitor.rules.datasets._common import Where
from monitor.rules.datasets.model import Case, Dataset, Gate, GateSpec, ScorerSpec, Turn
from monitor.scoring.checks.schema_check import compile_schema
from monitor.scoring.expectation import Budgets, Expectation, ExpectedCall
from monitor.trajectory.model import ABSENT, Message, TextPart, ToolDef

__all__ = ["SEED000_MIN_PASS_RATE", "load_seed000", "load_seed001"]

SEED000_MIN_PASS_RATE = 0.9
_SELECTION_PARAMS = {"gate_by_category": True, "selection_scope": "first_step", "calls_source": "selected"}


def _stem(path: Path) -> str:
    name = path.name
    for suffix in (".json", ".yaml", ".yml", ".jsonl"):
        name = name.removesuffix(suffix)
    return name


def load_seed001(path: Path, doc: Any) -> Dataset:
    """A seed-001 dataset from its decoded JSON array."""
    where = Where(str(path))
    cases: list[Case] = []
    seen: set[str] = set()
    for i, raw in enumerate(where.array(doc)):
        at = where.item(i)
        item = at.fields(raw, ("data", "target", "metadata"), required=("data", "target"))
        data = at.key("data").fields(
            item["data"], ("prompt", "tools", "systemPrompt", "config"), required=("prompt", "tools")
        )
        target = at.key("target").fields(
            item["target"], ("expectedTools", "forbiddenTools", "category"), required=("category",)
        )
        meta = at.key("metadata").obj(item.get("metadata") or {})
        prompt = at.key("data").key("prompt").string(data["prompt"])
        tools = at.key("data").key("tools").strings(data["tools"])
        category = target["category"]
        if category not in ("golden", "secondary", "negative"):
            at.key("target").key("category").fail(f"category must be golden, secondary or negative, got {category!r}")
        expected = None
        if target.get("expectedTools") is not None:
            expected = at.key("target").key("expectedTools").strings(target["expectedTools"])
        forbidden = None
        if target.get("forbiddenTools") is not None:
            forbidden = at.key("target").key("forbiddenTools").strings(target["forbiddenTools"])
        case_id = str(meta["id"]) if meta.get("id") is not None else str(i)
        if case_id in seen:
            at.key("metadata").key("id").fail(f"duplicate case id {case_id!r}")
        seen.add(case_id)
        messages: list[Message] = []
        config: dict[str, Any] = {}
        if data.get("systemPrompt") is not None:
            system = at.key("data").key("systemPrompt").string(data["systemPrompt"])
            messages.append(Message("system", (TextPart(system),)))
            config["system_prompt"] = system
        messages.append(Message("user", (TextPart(prompt),)))
        if data.get("config") is not None:
            cfg = at.key("data").key("config").fields(data["config"], ("model", "temperature"))
            config.update({k: v for k, v in cfg.items() if v is not None})
        if meta.get("description") is not None:
            config["description"] = meta["description"]
        expectation = Expectation(expected_tools=expected, forbidden_tools=forbidden, category=category)
        cases.append(
            Case(
                id=case_id,
                source="seed001",
                turns=(Turn(tuple(messages), expectation),),
                tools=tuple(ToolDef(name, source="seed001") for name in tools),
                tags=(category,),
                config=config,
                file=str(path),
            )
        )
    scorers = tuple(
        ScorerSpec(kind, kind, dict(_SELECTION_PARAMS))
        for kind in ("tools_selected", "tools_avoided", "tool_selection_f1")
    )
    return Dataset(
        name=_stem(path),
        source="seed001",
        file=str(path),
        cases=tuple(cases),
        scorers=scorers,
        gate=Gate(min_pass_rate=1.0, runs=1, scorers={s.id: GateSpec(aggregate="mean") for s in scorers}),
    )


_TEST_CASE = (
    "id",
    "user_message",
    "expected_tool_calls",
    "should_not_call_tools",
    "expected_output_contains",
    "max_tool_calls",
    "max_latency_ms",
)
_EXPECTATION = ("tool_name", "required_params", "forbidden_params", "param_validators")


def _seed000_call(raw: Any, where: Where) -> ExpectedCall:
    fields = where.fields(raw, _EXPECTATION, required=("tool_name",), what="a ToolCallExpectation object")
    name = where.key("tool_name").string(fields["tool_name"])
    required = dict(where.key("required_params").obj(fields.get("required_params") or {}))
    forbidden = where.key("forbidden_params").strings(fields.get("forbidden_params") or [])
    validators = dict(where.key("param_validators").obj(fields.get("param_validators") or {}))
    for param, schema in validators.items():
        problem = compile_schema(schema).problem
        if problem is not None:
            where.key("param_validators").key(str(param)).fail(f"not a usable JSON Schema: {problem}")
    return ExpectedCall(
        name=name, args=ABSENT, required_params=required, forbidden_params=forbidden, param_validators=validators
    )


def load_seed000(path: Path, doc: Any, *, variant: str = "clipped") -> Dataset:
    """A seed-000 TestCase dataset from its decoded JSON/YAML list."""
    where = Where(str(path))
    cases: list[Case] = []
    seen: set[str] = set()
    for i, raw in enumerate(where.array(doc)):
        at = where.item(i)
        tc = at.fields(raw, _TEST_CASE, required=("id", "user_message"), what="a TestCase object")
        case_id = at.key("id").string(
            str(tc["id"]) if isinstance(tc["id"], int) and not isinstance(tc["id"], bool) else tc["id"]
        )
        if case_id in seen:
            at.key("id").fail(f"duplicate case id {case_id!r}")
        seen.add(case_id)
        message = at.key("user_message").string(tc["user_message"])
        calls = tuple(
            _seed000_call(c, at.key("expected_tool_calls").item(j))
            for j, c in enumerate(at.key("expected_tool_calls").array(tc.get("expected_tool_calls") or []))
        )
        no_tools = at.key("should_not_call_tools").boolean(tc.get("should_not_call_tools", False))
        keywords = at.key("expected_output_contains").strings(tc.get("expected_output_contains") or [])
        max_calls = at.key("max_tool_calls").integer(tc.get("max_tool_calls", 5), minimum=0)
        max_latency = at.key("max_latency_ms").number(tc.get("max_latency_ms", 10000))
        expectation = Expectation(
            expected_calls=calls,
            no_tools=no_tools,
            expected_keywords=keywords,
            budgets=Budgets(max_tool_calls=max_calls, run_latency_budget_ms=max_latency),
        )
        cases.append(
            Case(
                id=case_id,
                source="seed000",
                turns=(Turn((Message("user", (TextPart(message),)),), expectation),),
                file=str(path),
            )
        )
    scorer = ScorerSpec("tool_eval", "tool_eval", {"variant": variant})
    return Dataset(
        name=_stem(path),
        source="seed000",
        file=str(path),
        cases=tuple(cases),
        scorers=(scorer,),
        gate=Gate(min_pass_rate=SEED000_MIN_PASS_RATE, runs=1, scorers={"tool_eval": GateSpec(aggregate="all")}),
    )
