"""The rules configuration (SCORING.md §3.9) as pydantic models, and readable config errors.

The same structure is read from a rules YAML/JSON file and from the daemon settings (keys
``rules:``, ``catalogue:`` and ``references:``)::

    rules:                                   # ordered; every matching rule applies (merge below)
      - name: faq-greetings                  # optional, shown in errors and provenance
        match:                               # all given conditions must hold; {} matches every run
          agent: faq                         # exact name, or a list of names
          agent_glob: "faq-*"                # fnmatchcase glob, or a list
          input_regex: "^(hi|hello|thanks)\\b"   # re.search on the run's user_text
          attributes: {deployment.environment: prod}
        expect:
          no_tools: true
          forbidden_tools: [delete_*]
          max_tool_calls: 5
          max_calls_per_tool: {search: 3}
          tool_latency_budget_ms: {"*": 2000, search: 5000}
          run_latency_budget_ms: 30000
          max_identical_calls: 2
          max_identical_calls_per_tool: {roll_die: 10}
          reference_topics: [weather]
          allowed_tools: [final_result, web_search]
          expected_tools: [get_forecast]     # tools expected for this intent (input_regex)
          expected_calls: [{name: get_forecast, args: {days: 5}}]
        scorers:                             # scorer instances for matching runs, by id
          schema_check: {params: {undeclared_parameters: error}}
          repetition_check:
            threshold: 1.0
            tools: {roll_die: {params: {max_identical_calls: 10}}}   # per-tool instance
    catalogue:                               # tool definitions when spans carry none
      weather: [{name: get_forecast, description: "...", input_schema: {...}}]
    references:                              # golden references for production runs
      key: monitor.eval.case_id              # the run attribute holding the case id
      path: references.yaml                  # {cases: {id: <expect>}}; relative to the rules file
      cases: {case-1: {expected_calls: [...]}}

Every model forbids unknown keys; :func:`format_validation_error` turns a pydantic error into
one line per problem naming the key path, the bad value and the fix.
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import pydantic

from monitor.scoring.checks.schema_check import compile_schema

__all__ = [
    "CatalogueConfig",
    "ExpectConfig",
    "ExpectedCallConfig",
    "MatchConfig",
    "ReferencesConfig",
    "ReferencesFileConfig",
    "RuleConfig",
    "RulesConfig",
    "RulesConfigError",
    "RulesProblem",
    "ScorerConfig",
    "ToolDefConfig",
    "ToolScorerConfig",
    "format_validation_error",
]


@dataclasses.dataclass(frozen=True, slots=True)
class RulesProblem:
    """One problem of a rules configuration with its parts apart: the ``key`` path, the ``problem``
    and, when known, the ``fix`` (``str()`` is the problem line)."""

    key: str
    problem: str
    fix: str | None = None

    def __str__(self) -> str:
        return f"{self.key}: {self.problem}" + (f"; {self.fix}" if self.fix else "")


class RulesConfigError(ValueError):
    """An invalid rules configuration. ``problems``: one line per problem (key path, value, fix);
    ``issues``: the same problems, a :class:`RulesProblem` where the parts are known."""

    def __init__(self, source: str, problems: typing.Sequence[str | RulesProblem]) -> None:
        self.source = source
        self.issues = tuple(problems)
        self.problems = tuple(str(p) for p in problems)
        body = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"invalid rules configuration in {source}:\n{body}")


class _Model(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid", frozen=True)


NonNegInt = Annotated[int, pydantic.Field(ge=0, strict=True)]
PositiveInt = Annotated[int, pydantic.Field(ge=1, strict=True)]
Millis = Annotated[float, pydantic.Field(gt=0, allow_inf_nan=False)]
Name = Annotated[str, pydantic.Field(min_length=1)]


def _one_or_many(value: Any) -> Any:
    return [value] if isinstance(value, str) else value


def _str_value(value: Any) -> Any:
    """Attribute values are strings on spans; YAML numbers and booleans are compared as text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return value


def _str_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k) if isinstance(k, int | float) and not isinstance(k, bool) else k: v for k, v in value.items()}
    return value


class MatchConfig(_Model):
    """Which runs a rule applies to: every given condition must hold (none given: every run)."""

    agent: list[Name] | None = None
    agent_glob: list[Name] | None = None
    input_regex: str | None = None
    attributes: dict[str, str] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("agent", "agent_glob", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _one_or_many(value)

    @pydantic.field_validator("attributes", mode="before")
    @classmethod
    def _attribute_values(cls, value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: _str_value(v) for k, v in value.items()}
        return value

    @pydantic.field_validator("input_regex")
    @classmethod
    def _compiles(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                re.compile(value)
            except re.error as exc:
                raise ValueError(
                    f"regular expression does not compile: {exc}; fix the pattern "
                    "(Python `re` syntax, applied with re.search to the user's last message)"
                ) from None
        return value

    @property
    def agent_only(self) -> bool:
        """True when the rule can be decided from the agent name alone."""
        return self.input_regex is None and not self.attributes


class ExpectedCallConfig(_Model):
    """One expected call; an omitted ``args`` is unspecified (not ``{}``)."""

    name: Name
    args: Any = None
    type: str | None = None
    output: Any = None
    required_params: dict[str, Any] | None = None
    forbidden_params: list[str] = pydantic.Field(default_factory=list)
    param_validators: dict[str, Any] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("param_validators")
    @classmethod
    def _schemas(cls, value: dict[str, Any]) -> dict[str, Any]:
        for param, schema in value.items():
            problem = compile_schema(schema).problem
            if problem is not None:
                raise ValueError(f"validator for {param!r} is not a usable JSON Schema: {problem}")
        return value


class ExpectConfig(_Model):
    """What matching runs are expected to do. Merge across rules: lists union, budgets min,
    booleans OR, other scalars: the later rule wins."""

    no_tools: bool | None = None
    forbidden_tools: list[Name] | None = None
    max_tool_calls: NonNegInt | None = None
    max_calls_per_tool: dict[str, NonNegInt] | None = None
    tool_latency_budget_ms: dict[str, Millis] | None = None
    run_latency_budget_ms: Millis | None = None
    max_identical_calls: PositiveInt | None = None
    max_identical_calls_per_tool: dict[str, PositiveInt] | None = None
    reference_topics: list[str] | None = None
    allowed_tools: list[Name] | None = None
    expected_tools: list[Name] | None = None
    expected_calls: list[ExpectedCallConfig] | None = None
    expected_response: str | None = None
    expected_keywords: list[str] | None = None
    reference_outcome: str | None = None
    category: Literal["golden", "secondary", "negative"] | None = None
    rubrics: dict[str, str] | None = None

    @pydantic.field_validator("forbidden_tools", "allowed_tools", "expected_tools", mode="before")
    @classmethod
    def _lists(cls, value: Any) -> Any:
        return _one_or_many(value)


class ToolScorerConfig(_Model):
    """Per-tool settings of a scorer: a separate instance restricted to the tool (pattern)."""

    params: dict[str, Any] = pydantic.Field(default_factory=dict)
    threshold: Annotated[float, pydantic.Field(ge=0.0, le=1.0)] | None = None


class ScorerConfig(_Model):
    """A scorer instance for matching runs. ``kind`` defaults to the id's part before ``:``."""

    kind: Name | None = None
    params: dict[str, Any] = pydantic.Field(default_factory=dict)
    threshold: Annotated[float, pydantic.Field(ge=0.0, le=1.0)] | None = None
    enabled: bool = True
    tools: dict[Name, ToolScorerConfig] = pydantic.Field(default_factory=dict)


class RuleConfig(_Model):
    name: str | None = None
    match: MatchConfig = pydantic.Field(default_factory=MatchConfig)
    expect: ExpectConfig = pydantic.Field(default_factory=ExpectConfig)
    scorers: dict[Name, ScorerConfig] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("scorers", mode="before")
    @classmethod
    def _scorer_list(cls, value: Any) -> Any:
        """``scorers: [schema_check, repetition_check]`` is short for ``{id: {}}`` each."""
        if isinstance(value, list) and all(isinstance(v, str) for v in value):
            return {v: {} for v in value}
        return value


class ToolDefConfig(_Model):
    name: Name
    description: str | None = None
    input_schema: dict[str, Any] | None = None

    @pydantic.field_validator("input_schema")
    @classmethod
    def _schema(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None:
            problem = compile_schema(value).problem
            if problem is not None:
                raise ValueError(f"not a usable JSON Schema: {problem}; fix the schema")
        return value


CatalogueConfig = dict[Name, list[ToolDefConfig]]


class ReferencesFileConfig(_Model):
    """A references file: ``{key?: attribute, cases: {case id: <expect>}}``."""

    key: Name | None = None
    cases: dict[str, ExpectConfig] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("cases", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return _str_keys(value)


class ReferencesConfig(_Model):
    """Golden references matched to production runs by ``Run.attribute(key)``."""

    key: Name
    path: str | None = None
    cases: dict[str, ExpectConfig] = pydantic.Field(default_factory=dict)

    @pydantic.field_validator("cases", mode="before")
    @classmethod
    def _ids(cls, value: Any) -> Any:
        return _str_keys(value)


class RulesConfig(_Model):
    """The whole rules configuration (a rules file, or these keys of the settings)."""

    rules: list[RuleConfig] = pydantic.Field(default_factory=list)
    catalogue: CatalogueConfig = pydantic.Field(default_factory=dict)
    references: ReferencesConfig | None = None


# --------------------------------------------------------------------------- error messages


def _path(loc: typing.Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out or "(top level)"


def _unwrap(annotation: Any) -> list[Any]:
    """Candidate types at one level (Optional/Union/Annotated removed)."""
    origin = typing.get_origin(annotation)
    if origin is Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [t for a in typing.get_args(annotation) for t in _unwrap(a)]
    return [annotation]


def _model_at(root: type[pydantic.BaseModel], loc: typing.Sequence[int | str]) -> type[pydantic.BaseModel] | None:
    """The model whose field set applies at ``loc`` (for "did you mean" on unknown keys)."""
    current: list[Any] = [root]
    for part in loc:
        nxt: list[Any] = []
        for t in current:
            if isinstance(t, type) and issubclass(t, pydantic.BaseModel):
                field = t.model_fields.get(str(part))
                if field is not None:
                    nxt.extend(_unwrap(field.annotation))
            else:
                origin = typing.get_origin(t)
                args = typing.get_args(t)
                if origin is list and args:
                    nxt.extend(_unwrap(args[0]))
                elif origin is dict and len(args) == 2:
                    nxt.extend(_unwrap(args[1]))
        current = nxt
    for t in current:
        if isinstance(t, type) and issubclass(t, pydantic.BaseModel):
            return t
    return None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def format_validation_error(
    exc: pydantic.ValidationError, root: type[pydantic.BaseModel], prefix: typing.Sequence[int | str] = ()
) -> list[str]:
    """One line per problem: ``key.path[0].sub: problem (got value); fix``."""
    problems: list[str] = []
    for err in exc.errors():
        loc = [*prefix, *err["loc"]]
        model_loc = list(err["loc"])
        path = _path(loc)
        kind = err["type"]
        if kind == "extra_forbidden":
            name = str(model_loc[-1]) if model_loc else ""
            parent = _model_at(root, model_loc[:-1])
            known = sorted(parent.model_fields) if parent is not None else []
            hint = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            fix = f"did you mean {hint[0]!r}?" if hint else f"allowed keys: {', '.join(known)}"
            problems.append(f"{path}: unknown key {name!r}; remove it ({fix})")
        elif kind == "missing":
            problems.append(f"{path}: required key is missing; add it")
        else:
            msg = err["msg"].removeprefix("Value error, ")
            problems.append(f"{path}: {msg} (got {_short(err.get('input'))})")
    return problems
