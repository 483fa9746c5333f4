"""``schema_check`` — arguments against the offered tool's JSON Schema (SCORING.md §3.1).

Contract:

* definition lookup (emitting step → owning run → catalogue, first definition by name wins;
  different schemas under one name → one ``tool_definitions_conflict`` note per name); no
  definition or no ``input_schema`` → call unchecked (``details.unchecked_no_schema``);
* dialect from ``$schema`` when it names draft-04/-06/-07/2019-09/2020-12, else Draft 2020-12;
  ``check_schema`` first; ``$ref`` resolves only inside the schema (a ``referencing.Registry``
  with no retrieval); an invalid schema or an unresolvable ``$ref`` → ``tool_schema_invalid``
  (``info``), call unchecked (``details.unchecked_schema_invalid``);
* ``format`` is asserted only with ``assert_formats: true``;
* arguments ABSENT → unchecked (all calls → ``not_applicable/arguments_not_captured``);
  MALFORMED, or a non-object when the schema's ``type`` is ``object`` → ``malformed_arguments``;
* every ``iter_errors`` error is mapped by keyword (see :func:`_classify`), one issue per
  (call, kind, parameter); undeclared top-level keys where the schema permits them →
  ``unknown_parameter`` with the severity of ``undeclared_parameters``;
* score = valid checked calls / checked calls; a call is invalid iff it has an ``error`` issue.

Compiled validators are cached process-wide by the canonical JSON of the schema (bounded LRU of
:data:`VALIDATOR_CACHE_SIZE`), so a schema is checked and compiled once, not per call.
"""

from __future__ import annotations

import functools
import importlib
import json
import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, cast

import referencing
import referencing.jsonschema
from jsonschema import exceptions as js_exceptions
from jsonschema import validators as js_validators
from jsonschema.protocols import Validator
from referencing._core import Resolver
from referencing.exceptions import Unresolvable

from monitor.scoring.base import Evaluation, Need, NotScored, Outcome, Scorer
from monitor.scoring.checks._common import (
    CheckParams,
    Definitions,
    check_calls,
    first_by_name,
    json_pointer,
    truncate_text,
    truncate_value,
)
from monitor.scoring.expectation import Expectation
from monitor.scoring.result import FailureKind, Issue, NoteKind, Severity, call_issue
from monitor.trajectory.model import ABSENT, Malformed, Run, ToolCall, ToolDef

__all__ = [
    "VALIDATOR_CACHE_SIZE",
    "CompiledSchema",
    "SchemaCheck",
    "SchemaCheckParams",
    "compile_schema",
    "schema_cache_key",
    "validator_cache_clear",
    "validator_cache_info",
]

VALIDATOR_CACHE_SIZE = 1024
"""Compiled validators kept (LRU) per (canonical schema JSON, assert_formats)."""

_DIALECTS: dict[type[Validator], tuple[str, referencing.Specification[Any]]] = {
    js_validators.Draft4Validator: ("draft-04", referencing.jsonschema.DRAFT4),
    js_validators.Draft6Validator: ("draft-06", referencing.jsonschema.DRAFT6),
    js_validators.Draft7Validator: ("draft-07", referencing.jsonschema.DRAFT7),
    js_validators.Draft201909Validator: ("2019-09", referencing.jsonschema.DRAFT201909),
    js_validators.Draft202012Validator: ("2020-12", referencing.jsonschema.DRAFT202012),
}
_DEFAULT: type[Validator] = js_validators.Draft202012Validator

# Keywords whose value is a map of names to subschemas, and keywords whose value is data.
_MAP_KEYWORDS = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_DATA_KEYWORDS = frozenset({"enum", "const", "default", "examples", "required", "dependentRequired"})
_BRANCH_KEYWORDS = ("allOf", "anyOf", "oneOf")


class SchemaCheckParams(CheckParams):
    """``assert_formats``: assert ``format`` with the dialect's ``FormatChecker`` (default: annotation).
    ``undeclared_parameters``: severity of top-level keys the schema permits but does not declare."""

    assert_formats: bool = False
    undeclared_parameters: Literal["warning", "error", "ignore"] = "warning"


# --------------------------------------------------------------------------- compilation (cached)


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """A schema ready to validate arguments, or the reason it cannot (``problem``).

    ``declared`` / ``patterns``: the top-level property names and ``patternProperties`` regexes
    the schema declares (through ``allOf``/``anyOf``/``oneOf``/``then``/``else`` and local
    ``$ref``); ``declared`` is None when the undeclared-parameter rule does not apply (extras
    already forbidden by the schema, explicitly allowed, or nothing declared).
    """

    dialect: str
    validator: Validator | None = None
    problem: str | None = None
    object_type: bool = False
    declared: frozenset[str] | None = None
    patterns: tuple[re.Pattern[str], ...] = ()


def _validator_class(schema: Any) -> type[Validator]:
    if isinstance(schema, Mapping) and "$schema" in schema and not isinstance(schema["$schema"], str):
        return _DEFAULT  # check_schema reports the bad $schema
    if not isinstance(schema, Mapping | bool):
        return _DEFAULT
    cls = js_validators.validator_for(schema, default=_DEFAULT)
    return cls if cls in _DIALECTS else _DEFAULT


def _subschemas(node: Any) -> Iterator[Mapping[str, Any]]:
    """Every schema object in ``node`` (itself included), skipping data-valued keywords."""
    if isinstance(node, Mapping):
        yield node
        for key, value in node.items():
            if key in _DATA_KEYWORDS:
                continue
            if key in _MAP_KEYWORDS and isinstance(value, Mapping):
                for sub in value.values():
                    yield from _subschemas(sub)
            elif isinstance(value, Mapping | list):
                yield from _subschemas(value)
    elif isinstance(node, list):
        for item in node:
            yield from _subschemas(item)


def _unresolvable_ref(schema: Mapping[str, Any], resolver: Resolver[Any]) -> str | None:
    """The first ``$ref`` that does not resolve inside the schema, or None.

    Skipped (left to validation time) when a nested subschema changes the base URI with
    ``$id``/``id``, since refs below it resolve against that base.
    """
    nodes = list(_subschemas(schema))
    if any(("$id" in n or isinstance(n.get("id"), str)) for n in nodes[1:]):
        return None
    for node in nodes:
        ref = node.get("$ref")
        if isinstance(ref, str):
            try:
                resolver.lookup(ref)
            except Unresolvable:
                return ref
    return None


def _declared(node: Any, resolver: Resolver[Any], names: set[str], patterns: list[str], depth: int) -> bool:
    """Collect declared top-level names/patterns of ``node``; False when the node explicitly opens
    the object to extra keys (``additionalProperties`` true or a schema)."""
    if not isinstance(node, Mapping) or depth > 16:
        return True
    extra = node.get("additionalProperties")
    if depth > 0 and extra is not None and extra is not False:
        return False
    props = node.get("properties")
    if isinstance(props, Mapping):
        names.update(str(k) for k in props)
    pattern_props = node.get("patternProperties")
    if isinstance(pattern_props, Mapping):
        patterns.extend(str(k) for k in pattern_props)
    ok = True
    for keyword in _BRANCH_KEYWORDS:
        branches = node.get(keyword)
        if isinstance(branches, list):
            for branch in branches:
                ok = _declared(branch, resolver, names, patterns, depth + 1) and ok
    for keyword in ("then", "else"):
        ok = _declared(node.get(keyword), resolver, names, patterns, depth + 1) and ok
    ref = node.get("$ref")
    if isinstance(ref, str):
        try:
            target = resolver.lookup(ref)
        except Unresolvable:
            return ok
        ok = _declared(target.contents, target.resolver, names, patterns, depth + 1) and ok
    return ok


def _declared_info(schema: Any, resolver: Resolver[Any]) -> tuple[frozenset[str] | None, tuple[re.Pattern[str], ...]]:
    if not isinstance(schema, Mapping):
        return None, ()
    if "additionalProperties" in schema or "unevaluatedProperties" in schema:
        # false → extras are validation errors already; true or a schema → extras explicitly allowed
        return None, ()
    names: set[str] = set()
    raw_patterns: list[str] = []
    if not _declared(schema, resolver, names, raw_patterns, 0):
        return None, ()
    if not names and not raw_patterns:
        return None, ()
    compiled: list[re.Pattern[str]] = []
    for p in raw_patterns:
        try:
            compiled.append(re.compile(p))
        except re.error:
            continue
    return frozenset(names), tuple(compiled)


def _is_object_type(schema: Any) -> bool:
    if not isinstance(schema, Mapping):
        return False
    t = schema.get("type")
    return t == "object" or t == ["object"]


@functools.lru_cache(maxsize=VALIDATOR_CACHE_SIZE)
def _compile_cached(key: str, assert_formats: bool) -> CompiledSchema:
    return _compile(json.loads(key), assert_formats)


def _compile(schema: Any, assert_formats: bool) -> CompiledSchema:
    cls = _validator_class(schema)
    dialect, spec = _DIALECTS[cls]
    if not isinstance(schema, Mapping | bool):
        problem = f"input_schema is a JSON {type(schema).__name__}, not a schema"
        return CompiledSchema(dialect, problem=problem)
    schema_error = _schema_error(cls, schema)
    if schema_error is not None:
        where = json_pointer(schema_error.absolute_path)
        problem = truncate_text(f"invalid {dialect} schema at '{where}': {schema_error.message}")
        return CompiledSchema(dialect, problem=problem)
    validator = cls(
        schema,
        registry=referencing.Registry(),
        format_checker=cls.FORMAT_CHECKER if assert_formats else None,
    )
    if isinstance(schema, bool):
        return CompiledSchema(dialect, validator=validator)
    resource = spec.create_resource(schema)
    resolver = _SPECIFICATIONS.resolver_with_root(resource)
    bad_ref = _unresolvable_ref(schema, resolver)
    if bad_ref is not None:
        return CompiledSchema(dialect, problem=truncate_text(f"unresolvable $ref {bad_ref!r}"))
    declared, patterns = _declared_info(schema, resolver)
    return CompiledSchema(
        dialect,
        validator=validator,
        object_type=_is_object_type(schema),
        declared=declared,
        patterns=patterns,
    )


def _schema_error(cls: type[Validator], schema: Any) -> js_exceptions.ValidationError | None:
    """What ``cls.check_schema(schema)`` checks (the dialect's meta-schema, its format checker), reporting the
    error with the smallest (JSON Pointer, message) rather than the first one found: the meta-schema
    validation yields its errors in an order that varies between processes (string hashing), and the
    ``tool_schema_invalid`` note must not."""
    meta = js_validators.validator_for(cls.META_SCHEMA, default=cls)
    validator = meta(cls.META_SCHEMA, format_checker=meta.FORMAT_CHECKER)
    errors = list(validator.iter_errors(schema))
    if not errors:
        return None
    return min(errors, key=lambda e: (json_pointer(e.absolute_path), e.message))


def _load_specifications() -> referencing.Registry[Any]:
    """The official meta-schemas (local, no retrieval), as jsonschema itself combines them."""
    registry: referencing.Registry[Any] = importlib.import_module("jsonschema_specifications").REGISTRY
    return registry


_SPECIFICATIONS = _load_specifications()


def schema_cache_key(schema: Any) -> str:
    """Canonical text of a schema for the validator cache (sorted keys, no whitespace)."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=repr)


def compile_schema(schema: Any, assert_formats: bool = False) -> CompiledSchema:
    """The cached :class:`CompiledSchema` of a tool's ``input_schema``."""
    return _compile_cached(schema_cache_key(schema), assert_formats)


def validator_cache_info() -> Any:
    """``functools`` cache statistics of the compiled-validator LRU (hits, misses, size)."""
    return _compile_cached.cache_info()


def validator_cache_clear() -> None:
    _compile_cached.cache_clear()


# --------------------------------------------------------------------------- error mapping


@dataclass(frozen=True, slots=True)
class _Finding:
    kind: FailureKind
    parameter: str
    expected: Any
    actual: Any
    detail: str


def _extra_keys(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    props = schema.get("properties")
    declared = set(props) if isinstance(props, Mapping) else set()
    raw = schema.get("patternProperties")
    pats = list(raw) if isinstance(raw, Mapping) else []
    out: list[str] = []
    for key in instance:
        if key in declared:
            continue
        if any(_search(p, key) for p in pats):
            continue
        out.append(key)
    return out


def _search(pattern: str, text: str) -> bool:
    try:
        return re.search(pattern, text) is not None
    except re.error:
        return False


def _unevaluated_keys(validator: Validator, err: js_exceptions.ValidationError) -> list[str]:
    instance = err.instance
    if not isinstance(instance, Mapping) or not isinstance(err.schema, Mapping):
        return []
    try:
        from jsonschema._utils import find_evaluated_property_keys_by_schema

        evaluated = set(find_evaluated_property_keys_by_schema(validator, instance, err.schema))
    except Exception:  # private helper: fall back to declared properties
        return _extra_keys(instance, err.schema)
    return [k for k in instance if k not in evaluated]


def _classify(err: js_exceptions.ValidationError, validator: Validator, depth: int = 0) -> list[_Finding]:
    """Map one ``iter_errors`` error to findings by ``error.validator`` (§3.1 step 4)."""
    keyword = err.validator
    path = list(err.absolute_path)
    message = truncate_text(err.message)
    instance = err.instance
    if keyword == "required" and isinstance(instance, Mapping):
        required = err.validator_value if isinstance(err.validator_value, list) else []
        missing = [n for n in required if isinstance(n, str) and n not in instance]
        return [
            _Finding(
                FailureKind.MISSING_PARAMETER,
                json_pointer([*path, n]),
                required,
                None,
                f"{n!r} is a required property",
            )
            for n in missing
        ] or [_Finding(FailureKind.MISSING_PARAMETER, json_pointer(path), required, None, message)]
    if keyword == "additionalProperties" and err.validator_value is False and isinstance(instance, Mapping):
        schema = err.schema if isinstance(err.schema, Mapping) else {}
        props = schema.get("properties")
        declared = sorted(props) if isinstance(props, Mapping) else []
        return [
            _Finding(
                FailureKind.UNKNOWN_PARAMETER,
                json_pointer([*path, k]),
                declared,
                truncate_value(instance[k]),
                f"additional property {k!r} is not allowed",
            )
            for k in _extra_keys(instance, schema)
        ] or [_Finding(FailureKind.UNKNOWN_PARAMETER, json_pointer(path), declared, None, message)]
    if keyword == "unevaluatedProperties" and err.validator_value is False and isinstance(instance, Mapping):
        return [
            _Finding(
                FailureKind.UNKNOWN_PARAMETER,
                json_pointer([*path, k]),
                False,
                truncate_value(instance[k]),
                f"unevaluated property {k!r} is not allowed",
            )
            for k in _unevaluated_keys(validator, err)
        ] or [_Finding(FailureKind.UNKNOWN_PARAMETER, json_pointer(path), False, None, message)]
    if keyword in ("anyOf", "oneOf", "allOf"):
        if err.context and depth < 8:
            best = js_exceptions.best_match(err.context)
            if best is not None:
                return _classify(best, validator, depth + 1)
        return [
            _Finding(
                FailureKind.INVALID_VALUE,
                json_pointer(path),
                err.validator_value,
                truncate_value(instance),
                message,
            )
        ]
    if keyword == "type":
        kind = FailureKind.WRONG_TYPE
    elif keyword in ("enum", "const"):
        kind = FailureKind.ENUM_VIOLATION
    else:
        kind = FailureKind.INVALID_VALUE
    return [_Finding(kind, json_pointer(path), err.validator_value, truncate_value(instance), message)]


# --------------------------------------------------------------------------- the check


def _issue(call: ToolCall, f: _Finding, severity: Severity = Severity.ERROR) -> Issue:
    return call_issue(
        f.kind, call, severity=severity, parameter=f.parameter, expected=f.expected, actual=f.actual, detail=f.detail
    )


class SchemaCheck(Scorer[SchemaCheckParams]):
    """Arguments validated against the offered tool's JSON Schema (SCORING.md §3.1)."""

    kind: ClassVar[str] = "schema_check"
    version: ClassVar[int] = 1
    Params: ClassVar[type[SchemaCheckParams]] = SchemaCheckParams
    needs: ClassVar[frozenset[Need]] = frozenset({Need.ARGUMENTS, Need.TOOL_DEFINITIONS})
    summary: ClassVar[str] = "arguments valid against the offered tool's JSON Schema"

    def evaluate(self, run: Run, reference: Expectation | None) -> Evaluation:
        calls = check_calls(self, run)
        if not calls:
            return NotScored.na("no_tool_calls")
        catalogue = reference.catalogue if reference is not None else None
        definitions = Definitions(run, catalogue)
        assert_formats = self.params.assert_formats
        undeclared = self.params.undeclared_parameters

        compiled_by_id: dict[int, CompiledSchema] = {}
        tables: dict[int, tuple[dict[str, ToolDef], set[str]]] = {}
        notes: list[Issue] = []
        noted: set[tuple[str, str]] = set()
        issues: list[Issue] = []
        dialects: Counter[str] = Counter()
        checked = invalid = no_args = no_schema = bad_schema = 0

        def note(kind: NoteKind, call: ToolCall, detail: str) -> None:
            if (str(kind), call.name) in noted:
                return
            noted.add((str(kind), call.name))
            notes.append(call_issue(kind, call, severity=Severity.INFO, detail=detail))

        for call in calls:
            source = definitions.source(call)
            if source is None:
                no_schema += 1
                continue
            table = tables.get(id(source.tools))
            if table is None:
                table = first_by_name(source.tools)
                tables[id(source.tools)] = table
            tool = table[0].get(call.name)
            if call.name in table[1]:
                note(
                    NoteKind.TOOL_DEFINITIONS_CONFLICT,
                    call,
                    f"{source.origin} definitions hold different schemas for {call.name!r}; first one used",
                )
            if tool is None or tool.input_schema is None:
                no_schema += 1
                continue
            compiled = compiled_by_id.get(id(tool.input_schema))
            if compiled is None:
                compiled = compile_schema(tool.input_schema, assert_formats)
                compiled_by_id[id(tool.input_schema)] = compiled
            if compiled.problem is not None or compiled.validator is None:
                bad_schema += 1
                note(NoteKind.TOOL_SCHEMA_INVALID, call, compiled.problem or "invalid schema")
                continue
            if call.args is ABSENT:
                no_args += 1
                continue
            found = self._validate(call, compiled, undeclared)
            if found is None:  # the schema failed while validating (e.g. a $ref below a nested $id)
                bad_schema += 1
                note(NoteKind.TOOL_SCHEMA_INVALID, call, "schema could not be evaluated (unresolvable $ref)")
                continue
            checked += 1
            dialects[compiled.dialect] += 1
            if any(i.severity is Severity.ERROR for i in found):
                invalid += 1
            issues.extend(found)

        details: dict[str, Any] = {
            "checked": checked,
            "invalid": invalid,
            "unchecked_no_args": no_args,
            "unchecked_no_schema": no_schema,
            "unchecked_schema_invalid": bad_schema,
            "dialect_counts": dict(sorted(dialects.items())),
        }
        if checked == 0:
            if no_args:
                return NotScored.na("arguments_not_captured", **details)
            if notes:
                details["notes"] = [n.to_json() for n in notes]
            return NotScored.na("no_tool_definitions", **details)
        return Outcome(score=(checked - invalid) / checked, issues=(*issues, *notes), details=details)

    @staticmethod
    def _validate(call: ToolCall, compiled: CompiledSchema, undeclared: str) -> list[Issue] | None:
        args = call.args
        if isinstance(args, Malformed):
            return [
                call_issue(
                    FailureKind.MALFORMED_ARGUMENTS,
                    call,
                    actual=truncate_value(args.raw),
                    detail="arguments are not valid JSON",
                )
            ]
        if compiled.object_type and not isinstance(args, dict):
            return [
                call_issue(
                    FailureKind.MALFORMED_ARGUMENTS,
                    call,
                    expected="object",
                    actual=truncate_value(args),
                    detail=f"arguments are a JSON {_json_type(args)}, the schema expects an object",
                )
            ]
        validator = compiled.validator
        assert validator is not None
        out: list[Issue] = []
        seen: set[tuple[str, str]] = set()
        try:
            for err in validator.iter_errors(cast(Any, args)):
                for f in _classify(err, validator):
                    key = (str(f.kind), f.parameter)
                    if key not in seen:
                        seen.add(key)
                        out.append(_issue(call, f))
        except (Unresolvable, RecursionError, re.error):
            return None
        if undeclared != "ignore" and compiled.declared is not None and isinstance(args, dict):
            severity = Severity.WARNING if undeclared == "warning" else Severity.ERROR
            for key in args:
                if key in compiled.declared or any(p.search(key) for p in compiled.patterns):
                    continue
                pointer = json_pointer([key])
                if (str(FailureKind.UNKNOWN_PARAMETER), pointer) in seen:
                    continue
                seen.add((str(FailureKind.UNKNOWN_PARAMETER), pointer))
                out.append(
                    call_issue(
                        FailureKind.UNKNOWN_PARAMETER,
                        call,
                        severity=severity,
                        parameter=pointer,
                        expected=sorted(compiled.declared),
                        actual=truncate_value(args[key]),
                        detail=f"parameter {key!r} is not declared in the schema",
                    )
                )
        return out


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__
