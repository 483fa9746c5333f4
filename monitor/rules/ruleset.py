"""Per-agent rules for production runs (SCORING.md §3.9): which expectations and scorers apply.

:class:`RuleSet` is built once from a rules file (:meth:`RuleSet.load`) or from the settings'
``rules:`` / ``catalogue:`` / ``references:`` mapping (:meth:`RuleSet.from_mapping`) and is then
immutable and pure: matching reads only the run.

* :meth:`RuleSet.expectation_for` — all matching rules merged **in order**: lists union (first
  occurrence kept, duplicates dropped), budgets the minimum (per key for per-tool budgets),
  booleans OR, other scalars (``expected_response``, ``reference_outcome``, ``category``) the later
  rule wins, ``rubrics`` merged by id (later wins). The run's golden reference (if any) is merged
  last the same way, except that its ``expected_calls`` replace the rules' (a reference is one
  exact trajectory). ``catalogue`` = the catalogue of the run's agent and of its nested agents.
* :meth:`RuleSet.reference_for` — the golden reference keyed by ``run.attribute(key)``, or None.
* :meth:`RuleSet.catalogue_for` — the configured tool definitions for an agent (exact name, else
  the first matching glob key), or None.
* :meth:`RuleSet.scorers_for` — the scorer instances configured for an agent (or a run).
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from monitor.rules.config import (
    ExpectConfig,
    ExpectedCallConfig,
    ReferencesFileConfig,
    RuleConfig,
    RulesConfig,
    RulesConfigError,
    RulesProblem,
    ScorerConfig,
    format_validation_error,
)
from monitor.scoring import catalogue
from monitor.scoring.base import ScorerConfigError, ScorerParams
from monitor.scoring.expectation import Budgets, Category, Expectation, ExpectedCall
from monitor.scoring.spec import ScorerRegistry, ScorerSpec
from monitor.trajectory.model import ABSENT, Run, ToolDef

__all__ = ["RuleSet", "ScorerSpec", "merge_expect"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class _Rule:
    index: int
    config: RuleConfig
    regex: re.Pattern[str] | None

    def matches(self, run: Run) -> bool:
        return self.matches_agent(run.agent) and self._matches_content(run)

    def matches_agent(self, agent: str | None) -> bool:
        m = self.config.match
        if m.agent is not None and agent not in m.agent:
            return False
        return not (
            m.agent_glob is not None and (agent is None or not any(fnmatchcase(agent, g) for g in m.agent_glob))
        )

    def _matches_content(self, run: Run) -> bool:
        m = self.config.match
        if self.regex is not None:
            text = run.user_text
            if text is None or self.regex.search(text) is None:
                return False
        return all(run.attribute(k) == v for k, v in m.attributes.items())


# --------------------------------------------------------------------------- merging


def _union(values: Iterable[Sequence[T] | None], key: Any = None) -> tuple[T, ...] | None:
    out: dict[Any, T] = {}
    seen_any = False
    for value in values:
        if value is None:
            continue
        seen_any = True
        for item in value:
            k = key(item) if key is not None else item
            out.setdefault(k, item)
    return tuple(out.values()) if seen_any else None


def _min(values: Iterable[float | int | None]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _min_per_key(values: Iterable[Mapping[str, Any] | None]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for value in values:
        for k, v in (value or {}).items():
            out[k] = v if k not in out else min(out[k], v)
    return out


def _last(values: Iterable[T | None]) -> T | None:
    result: T | None = None
    for value in values:
        if value is not None:
            result = value
    return result


def _call_key(call: ExpectedCallConfig) -> str:
    return json.dumps(
        call.model_dump(mode="json", exclude_unset=True), sort_keys=True, separators=(",", ":"), default=repr
    )


def _expected_call(call: ExpectedCallConfig) -> ExpectedCall:
    fields = call.model_fields_set
    return ExpectedCall(
        name=call.name,
        args=call.args if "args" in fields else ABSENT,
        type=call.type,
        output=call.output if "output" in fields else ABSENT,
        required_params=call.required_params,
        forbidden_params=tuple(call.forbidden_params),
        param_validators=dict(call.param_validators),
    )


def merge_expect(
    layers: Sequence[ExpectConfig],
    *,
    reference: ExpectConfig | None = None,
    catalogue: tuple[ToolDef, ...] | None = None,
) -> Expectation:
    """The §3.9 merge of ``layers`` (in order), then ``reference`` (its ``expected_calls`` replace)."""
    all_layers = [*layers, *([reference] if reference is not None else [])]
    calls_layers: Sequence[ExpectConfig] = (
        [reference] if reference is not None and reference.expected_calls is not None else all_layers
    )
    expected = _union((x.expected_calls for x in calls_layers), key=_call_key)
    rubrics: dict[str, str] = {}
    for x in all_layers:
        rubrics.update(x.rubrics or {})
    category: Category | None = _last(x.category for x in all_layers)
    return Expectation(
        expected_calls=None if expected is None else tuple(_expected_call(c) for c in expected),
        expected_tools=_union(x.expected_tools for x in all_layers),
        forbidden_tools=_union(x.forbidden_tools for x in all_layers),
        no_tools=any(bool(x.no_tools) for x in all_layers),
        expected_response=_last(x.expected_response for x in all_layers),
        expected_keywords=_union(x.expected_keywords for x in all_layers),
        category=category,
        reference_topics=_union(x.reference_topics for x in all_layers),
        reference_outcome=_last(x.reference_outcome for x in all_layers),
        budgets=Budgets(
            max_tool_calls=_min(x.max_tool_calls for x in all_layers),
            max_calls_per_tool=_min_per_key(x.max_calls_per_tool for x in all_layers),
            tool_latency_budget_ms=_min_per_key(x.tool_latency_budget_ms for x in all_layers),
            run_latency_budget_ms=_min(x.run_latency_budget_ms for x in all_layers),
            max_identical_calls=_min(x.max_identical_calls for x in all_layers),
            max_identical_calls_per_tool=_min_per_key(x.max_identical_calls_per_tool for x in all_layers),
        ),
        allowed_tools=_union(x.allowed_tools for x in all_layers) or (),
        rubrics=tuple(rubrics.items()),
        catalogue=catalogue,
    )


# --------------------------------------------------------------------------- the rule set


class RuleSet:
    """Immutable, validated rules; see the module docstring for the semantics of each query."""

    def __init__(
        self,
        config: RulesConfig,
        *,
        references: Mapping[str, ExpectConfig] | None = None,
        reference_key: str | None = None,
        scorer_registry: ScorerRegistry | None = None,
        source: str = "rules",
    ) -> None:
        """Build from a validated :class:`RulesConfig` (prefer :meth:`load` / :meth:`from_mapping`).

        ``references`` are the golden references (inline ``references.cases`` plus the file).
        Every scorer's ``kind`` must be registered in :mod:`monitor.scoring.catalogue` (judge kinds
        included), and its parameters must be the kind's; ``scorer_registry`` (kind → class), when
        given, replaces the catalogue for this check.
        """
        self.config = config
        self.source = source
        self._rules = tuple(
            _Rule(i, r, re.compile(r.match.input_regex) if r.match.input_regex is not None else None)
            for i, r in enumerate(config.rules)
        )
        self._catalogue: dict[str, tuple[ToolDef, ...]] = {
            agent: tuple(
                ToolDef(name=t.name, description=t.description, input_schema=t.input_schema, source="catalogue")
                for t in tools
            )
            for agent, tools in config.catalogue.items()
        }
        self._references: dict[str, ExpectConfig] = dict(references or {})
        self.reference_key = reference_key
        self._registry = scorer_registry
        self._validate_scorers()

    # ----------------------------------------------------------------- construction

    @classmethod
    def from_mapping(
        cls,
        obj: Mapping[str, Any] | None,
        *,
        base_dir: str | Path | None = None,
        scorer_registry: ScorerRegistry | None = None,
        source: str = "settings",
    ) -> RuleSet:
        """Validate a mapping with ``rules`` / ``catalogue`` / ``references`` keys.

        ``references.path`` is read relative to ``base_dir`` (default: the working directory).
        Raises :class:`RulesConfigError` naming every bad key path, value and fix.
        """
        if obj is not None and not isinstance(obj, Mapping):
            raise RulesConfigError(
                source, [f"(top level): expected a mapping with rules/catalogue/references, got {type(obj).__name__}"]
            )
        try:
            config = RulesConfig.model_validate(dict(obj or {}))
        except pydantic.ValidationError as exc:
            raise RulesConfigError(source, format_validation_error(exc, RulesConfig)) from None
        references: dict[str, ExpectConfig] = {}
        key: str | None = None
        if config.references is not None:
            key = config.references.key
            references.update(config.references.cases)
            if config.references.path is not None:
                path = Path(config.references.path)
                if base_dir is not None and not path.is_absolute():
                    path = Path(base_dir) / path
                file_cfg = _load_references(path)
                if file_cfg.key is not None and file_cfg.key != key:
                    raise RulesConfigError(
                        source,
                        [f"references.key: {key!r} differs from the key {file_cfg.key!r} in {path}; use one key"],
                    )
                duplicates = sorted(set(references) & set(file_cfg.cases))
                if duplicates:
                    raise RulesConfigError(
                        source,
                        [f"references.cases: ids {duplicates} are also in {path}; keep each id in one place"],
                    )
                references.update(file_cfg.cases)
        return cls(config, references=references, reference_key=key, scorer_registry=scorer_registry, source=source)

    @classmethod
    def load(cls, path: str | Path, *, scorer_registry: ScorerRegistry | None = None) -> RuleSet:
        """Read a rules YAML or JSON file (see :mod:`monitor.rules.config` for the structure)."""
        p = Path(path)
        data = _read_document(p)
        if data is not None and not isinstance(data, Mapping):
            raise RulesConfigError(
                str(p), [f"(top level): expected a mapping with rules/catalogue/references, got {type(data).__name__}"]
            )
        return cls.from_mapping(data, base_dir=p.parent, scorer_registry=scorer_registry, source=str(p))

    @classmethod
    def empty(cls) -> RuleSet:
        return cls(RulesConfig())

    def _validate_scorers(self) -> None:
        """Every scorer entry names a registered kind (with a did-you-mean) and valid parameters."""
        problems: list[str | RulesProblem] = []
        for rule in self._rules:
            for sid, sc in rule.config.scorers.items():
                where = f"rules[{rule.index}].scorers.{sid}"
                kind = catalogue.kind_of(sid, sc.kind)
                at_kind = f"{where}.kind" if sc.kind is not None else where
                model = self._params_model(kind, at_kind, problems)
                if model is None:
                    continue
                if sc.tools and "tools" not in model.model_fields:
                    problems.append(
                        RulesProblem(
                            f"{where}.tools",
                            f"scorer kind {kind!r} has no per-tool filter",
                            "remove `tools` (per-tool settings need a scorer with a tool filter: the §3 checks)",
                        )
                    )
                    continue
                for spec_id, params in _expand(sid, sc):
                    at = f"{where}.params" if spec_id == sid else f"{where}.tools.{spec_id[len(sid) + 1 : -1]}.params"
                    try:
                        self._validate_params(kind, params)
                    except ScorerConfigError as exc:
                        problems.extend(RulesProblem(at, p) for p in exc.problems)
        if problems:
            raise RulesConfigError(self.source, problems)

    def _params_model(self, kind: str, at: str, problems: list[str | RulesProblem]) -> type[ScorerParams] | None:
        """The parameter model of ``kind`` (the registry's, or the explicit ``scorer_registry``'s);
        None, with the problem added, when the kind is not registered."""
        if self._registry is not None:
            cls = self._registry.get(kind)
            if cls is None:
                close = difflib.get_close_matches(kind, list(self._registry), n=1, cutoff=0.6)
                fix = f"did you mean {close[0]!r}?" if close else f"use one of: {', '.join(sorted(self._registry))}"
                problems.append(RulesProblem(at, f"unknown scorer kind {kind!r}", fix))
                return None
            return cls.Params
        try:
            return catalogue.lookup(kind).params_model
        except catalogue.UnknownScorerKind as exc:
            problems.append(RulesProblem(at, f"unknown scorer kind {kind!r}", exc.fix))
            return None

    def _validate_params(self, kind: str, params: Mapping[str, Any]) -> None:
        if self._registry is not None:
            self._registry[kind].validate_params(params)
        else:
            catalogue.validate_params(kind, params)

    # ----------------------------------------------------------------- queries

    def matching_rules(self, run: Run) -> tuple[RuleConfig, ...]:
        """The rules that apply to ``run``, in file order."""
        return tuple(r.config for r in self._rules if r.matches(run))

    def expectation_for(self, run: Run, *, with_reference: bool = True) -> Expectation:
        """The merged expectation of every rule matching ``run`` (§3.9), plus its reference."""
        layers = [r.config.expect for r in self._rules if r.matches(run)]
        reference = self._reference_config(run) if with_reference else None
        return merge_expect(layers, reference=reference, catalogue=self._catalogue_for_tree(run))

    def reference_for(self, run: Run) -> Expectation | None:
        """The golden reference whose id equals ``run.attribute(reference key)``, or None."""
        cfg = self._reference_config(run)
        if cfg is None:
            return None
        return merge_expect([], reference=cfg, catalogue=self._catalogue_for_tree(run))

    def catalogue_for(self, agent: str | None) -> tuple[ToolDef, ...] | None:
        """The configured definitions for ``agent``: its own key, else the first glob key matching it."""
        if agent is None:
            return self._catalogue.get("*")
        found = self._catalogue.get(agent)
        if found is not None:
            return found
        for key, tools in self._catalogue.items():
            if fnmatchcase(agent, key):
                return tools
        return None

    def scorers_for(self, agent: str | Run | None) -> tuple[ScorerSpec, ...]:
        """The scorer instances configured for ``agent`` (a name, or a run for full matching).

        With a name, only rules decidable from the agent alone apply (no ``input_regex`` /
        ``attributes``). Settings of one id merge over the matching rules in order: ``kind``,
        ``threshold`` and ``enabled`` of the later rule win, ``params`` and ``tools`` merge key by
        key. A scorer with ``tools: {pattern: {...}}`` yields a base instance excluding those tools
        and one instance per pattern (id ``"<id>[<pattern>]"``) restricted to it.
        """
        if isinstance(agent, Run):
            rules = [r for r in self._rules if r.matches(agent)]
        else:
            rules = [r for r in self._rules if r.config.match.agent_only and r.matches_agent(agent)]
        merged: dict[str, dict[str, Any]] = {}
        for rule in rules:
            for sid, sc in rule.config.scorers.items():
                entry = merged.setdefault(
                    sid, {"kind": None, "params": {}, "threshold": None, "enabled": True, "tools": {}}
                )
                if sc.kind is not None:
                    entry["kind"] = sc.kind
                entry["params"].update(sc.params)
                if sc.threshold is not None:
                    entry["threshold"] = sc.threshold
                if "enabled" in sc.model_fields_set:
                    entry["enabled"] = sc.enabled
                for pattern, tool_cfg in sc.tools.items():
                    slot = entry["tools"].setdefault(pattern, {"params": {}, "threshold": None})
                    slot["params"].update(tool_cfg.params)
                    if tool_cfg.threshold is not None:
                        slot["threshold"] = tool_cfg.threshold
        specs: list[ScorerSpec] = []
        for sid, entry in merged.items():
            if not entry["enabled"]:
                continue
            kind = catalogue.kind_of(sid, entry["kind"])
            sc = ScorerConfig(
                kind=kind,
                params=entry["params"],
                threshold=entry["threshold"],
                tools=entry["tools"],
            )
            specs.extend(ScorerSpec(spec_id, kind, params) for spec_id, params in _expand(sid, sc))
        return tuple(specs)

    # ----------------------------------------------------------------- internals

    def _reference_config(self, run: Run) -> ExpectConfig | None:
        if self.reference_key is None:
            return None
        case_id = run.attribute(self.reference_key)
        return None if case_id is None else self._references.get(case_id)

    def _catalogue_for_tree(self, run: Run) -> tuple[ToolDef, ...] | None:
        if not self._catalogue:
            return None
        tools: list[ToolDef] = []
        found = False
        seen_agents: set[str | None] = set()
        for r in run.walk():
            if r.agent in seen_agents:
                continue
            seen_agents.add(r.agent)
            defs = self.catalogue_for(r.agent)
            if defs is not None:
                found = True
                tools.extend(defs)
        return tuple(tools) if found else None

    @property
    def reference_count(self) -> int:
        return len(self._references)


def _expand(sid: str, sc: ScorerConfig) -> list[tuple[str, dict[str, Any]]]:
    """The (id, params) instances of one scorer entry (per-tool instances split out)."""
    base = dict(sc.params)
    if sc.threshold is not None:
        base["threshold"] = sc.threshold
    if not sc.tools:
        return [(sid, base)]
    patterns = list(sc.tools)
    exclude = base.get("exclude_tools") or []
    exclude = [exclude] if isinstance(exclude, str) else list(exclude)
    out = [(sid, {**base, "exclude_tools": [*exclude, *patterns]})]
    for pattern, tool_cfg in sc.tools.items():
        params = {**base, **tool_cfg.params, "tools": [pattern]}
        if tool_cfg.threshold is not None:
            params["threshold"] = tool_cfg.threshold
        out.append((f"{sid}[{pattern}]", params))
    return out


# --------------------------------------------------------------------------- files


def _read_document(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RulesConfigError(str(path), [f"cannot read the file: {exc.strerror or exc}"]) from None
    try:
        if path.suffix.lower() == ".json":
            return json.loads(text)
        return yaml.safe_load(text)
    except json.JSONDecodeError as exc:
        raise RulesConfigError(str(path), [f"line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"]) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1} column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise RulesConfigError(str(path), [f"{where}invalid YAML: {problem}"]) from None


def _load_references(path: Path) -> ReferencesFileConfig:
    data = _read_document(path)
    if data is None:
        return ReferencesFileConfig()
    if not isinstance(data, Mapping):
        raise RulesConfigError(
            str(path), [f"(top level): expected a mapping {{key?, cases}}, got {type(data).__name__}"]
        )
    try:
        return ReferencesFileConfig.model_validate(dict(data))
    except pydantic.ValidationError as exc:
        raise RulesConfigError(str(path), format_validation_error(exc, ReferencesFileConfig)) from None
