"""Shared helpers of the dataset loaders: reading files, JSON paths, errors, small conversions.

Every problem is raised as :class:`~monitor.rules.datasets.model.DatasetError` naming the file, the
JSON path (``$.eval_cases[0].conversation[1].user_content``) and the problem.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from monitor.rules.datasets.model import DatasetError, ScorerSpec
from monitor.scoring import catalogue
from monitor.scoring.base import ScorerConfigError
from monitor.trajectory.model import Message, Messages, TextPart

__all__ = [
    "JsonLines",
    "Where",
    "camel_to_snake",
    "did_you_mean",
    "read_document",
    "registered_scorer",
    "snake_to_camel",
    "user_message",
]


class JsonLines(list[Any]):
    """The objects of a JSON Lines file (one per non-blank line); ``lines[i]`` is the 1-based line of item i."""

    def __init__(self, items: Iterable[Any], lines: Sequence[int]) -> None:
        super().__init__(items)
        self.lines = tuple(lines)


def _json_error(file: str, exc: json.JSONDecodeError, line_offset: int = 0) -> NoReturn:
    raise DatasetError(
        file, "$", f"invalid JSON at line {exc.lineno + line_offset} column {exc.colno}: {exc.msg}"
    ) from None


def read_document(path: Path) -> Any:
    """The decoded content of a dataset file: JSON, YAML (``.yaml``/``.yml``) or JSON Lines (``.jsonl``).

    A ``.jsonl`` file becomes a :class:`JsonLines` list. Unreadable or undecodable files raise
    :class:`DatasetError` with the line of the problem.
    """
    file = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise DatasetError(file, "$", f"cannot read the file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise DatasetError(file, "$", f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        items: list[Any] = []
        lines: list[int] = []
        for number, line in enumerate(text.splitlines(), 1):
            if not line.strip():
                continue
            try:
                items.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise DatasetError(
                    file, f"$[{len(items)}]", f"invalid JSON on line {number} column {exc.colno}: {exc.msg}"
                ) from None
            lines.append(number)
        return JsonLines(items, lines)
    if suffix in (".yaml", ".yml"):
        try:
            return yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
            problem = getattr(exc, "problem", None) or str(exc)
            raise DatasetError(file, "$", f"invalid YAML{where}: {problem}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        _json_error(file, exc)


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def camel_to_snake(name: str) -> str:
    return _CAMEL.sub("_", name).lower()


def snake_to_camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


class Where:
    """A position in a file: raises errors naming the file and JSON path, builds child paths."""

    def __init__(self, file: str, path: str = "$") -> None:
        self.file = file
        self.path = path

    def key(self, name: str) -> Where:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            return Where(self.file, f"{self.path}.{name}")
        return Where(self.file, f"{self.path}[{json.dumps(name)}]")

    def item(self, index: int) -> Where:
        return Where(self.file, f"{self.path}[{index}]")

    def fail(self, problem: str) -> NoReturn:
        raise DatasetError(self.file, self.path, problem)

    # ----------------------------------------------------------------- typed access

    def obj(self, value: Any, what: str = "an object") -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(f"expected {what}, got {_type_name(value)}")
        return value

    def array(self, value: Any, what: str = "an array") -> Sequence[Any]:
        if not isinstance(value, list):
            self.fail(f"expected {what}, got {_type_name(value)}")
        return value

    def string(self, value: Any, what: str = "a string") -> str:
        if not isinstance(value, str):
            self.fail(f"expected {what}, got {_type_name(value)}")
        return value

    def strings(self, value: Any) -> tuple[str, ...]:
        items = self.array(value, "an array of strings")
        for i, v in enumerate(items):
            self.item(i).string(v)
        return tuple(items)

    def boolean(self, value: Any) -> bool:
        if not isinstance(value, bool):
            self.fail(f"expected true or false, got {_type_name(value)}")
        return value

    def integer(self, value: Any, minimum: int | None = None) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(f"expected an integer, got {_type_name(value)}")
        if minimum is not None and value < minimum:
            self.fail(f"expected an integer >= {minimum}, got {value}")
        return value

    def number(self, value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            self.fail(f"expected a number, got {_type_name(value)}")
        return float(value)

    def fields(
        self,
        value: Any,
        known: Iterable[str],
        *,
        required: Iterable[str] = (),
        camel: bool = False,
        extra: str = "forbid",
        what: str = "an object",
    ) -> dict[str, Any]:
        """The object's fields keyed by their snake_case name; unknown keys are an error (``extra="forbid"``).

        ``camel``: keys may also be spelled in camelCase (pydantic ``alias_generator=to_camel``);
        the same field given twice (snake and camel) is an error. ``extra="allow"`` keeps unknown
        keys as given, ``"ignore"`` drops them.
        """
        obj = self.obj(value, what)
        names = list(known)
        known_set = set(names)
        out: dict[str, Any] = {}
        for key, item in obj.items():
            name = key
            if key not in known_set and camel and isinstance(key, str):
                snake = camel_to_snake(key)
                if snake in known_set and snake_to_camel(snake) == key:
                    name = snake
            if name not in known_set:
                if extra == "allow":
                    out[str(key)] = item
                    continue
                if extra == "ignore":
                    continue
                hint = difflib.get_close_matches(str(key), names + [snake_to_camel(n) for n in names] * camel, 1, 0.6)
                fix = f"did you mean {hint[0]!r}?" if hint else f"known keys: {', '.join(names)}"
                self.key(str(key)).fail(f"unknown key {key!r} ({fix})")
            if name in out:
                self.key(str(key)).fail(f"{name!r} is given twice (snake_case and camelCase)")
            out[name] = item
        for name in required:
            if name not in out:
                self.fail(f"missing required key {name!r}")
        return out


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return f"a number ({value!r})"
    if isinstance(value, str):
        return f"a string ({value[:40]!r})"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, Mapping):
        return "an object"
    return type(value).__name__


def user_message(text: str) -> Messages:
    """One ``user`` message holding ``text``."""
    return (Message("user", (TextPart(text),)),)


# ----------------------------------------------------------------------------- scorers


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """``"; did you mean 'x'?"`` for the names of ``known`` close to ``name``, else ``""``."""
    close = difflib.get_close_matches(name, list(known), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def registered_scorer(sid: str, kind: str, params: Mapping[str, Any] | None, where: Where) -> ScorerSpec:
    """A :class:`ScorerSpec` whose kind is registered in :mod:`monitor.scoring.catalogue` and whose
    parameters are the kind's; else a :class:`DatasetError` at ``where.kind`` (with a did-you-mean) or
    ``where.params``."""
    try:
        catalogue.lookup(kind)
    except catalogue.UnknownScorerKind as exc:
        where.key("kind").fail(f"unknown scorer kind {kind!r}; {exc.fix}")
    try:
        catalogue.validate_params(kind, params)
    except ScorerConfigError as exc:
        where.key("params").fail(f"scorer {sid!r}: {'; '.join(exc.problems)}")
    return ScorerSpec(sid, kind, dict(params or {}))
