"""Reading a tool's definition (as the agent's spans carried it) to ground a recommendation in it.

Everything here is a plain question about the text and the JSON Schema: does the description mention the
parameter, is it required, which constraint does the schema put on it, is the tool state-changing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from monitor.analysis.model import ToolDefinition

__all__ = [
    "STATE_CHANGING_VERBS",
    "DefinitionIndex",
    "constraint_text",
    "described",
    "example_value",
    "is_required",
    "mentions",
    "parameter_label",
    "parameter_schema",
    "schema_allows_extra",
    "state_changing",
]

STATE_CHANGING_VERBS: Final = frozenset(
    {
        "add", "approve", "archive", "assign", "book", "buy", "cancel", "charge", "close", "create", "delete",
        "deploy", "disable", "drop", "edit", "enable", "execute", "grant", "insert", "merge", "modify", "move",
        "order", "patch", "pay", "post", "publish", "purchase", "put", "refund", "register", "remove", "rename",
        "reserve", "reset", "revoke", "run", "save", "schedule", "send", "set", "submit", "transfer", "unsubscribe",
        "update", "upload", "upsert", "write",
    }
)  # fmt: skip
"""Verbs that, as a word of a tool's name (``book_flight``, ``sendEmail``) or the first word of its description,
mark it as changing state: its wrong calls have side effects, so its patterns weigh more."""

_SCHEMA_HINTS: Final = ("x-state-changing", "x-side-effects", "destructiveHint")


def _words(text: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return [w for w in re.split(r"[^A-Za-z0-9]+", spaced.lower()) if w]


def state_changing(name: str, definition: ToolDefinition | None = None) -> bool:
    """A tool whose calls change state: a state-changing verb in its name, as the first word of its description,
    or a hint in its schema (``x-state-changing``/``x-side-effects``/``destructiveHint`` true, ``readOnlyHint``
    false)."""
    if any(w in STATE_CHANGING_VERBS for w in _words(name)):
        return True
    if definition is None:
        return False
    if definition.description:
        first = _words(definition.description)[:1]
        if first and first[0] in STATE_CHANGING_VERBS:
            return True
    schema = definition.input_schema
    if isinstance(schema, Mapping):
        if any(schema.get(k) is True for k in _SCHEMA_HINTS):
            return True
        if schema.get("readOnlyHint") is False:
            return True
    return False


class DefinitionIndex:
    """The latest definition of each (agent, tool); a tool of an agent without its own falls back to the same
    name offered by another agent (definitions of runs without an agent are stored under ``''``)."""

    def __init__(self, definitions: Iterable[ToolDefinition]) -> None:
        self.by_key: dict[tuple[str, str], ToolDefinition] = {}
        self.by_name: dict[str, ToolDefinition] = {}
        definitions = list(definitions)
        for d in sorted(definitions, key=lambda d: d.last_seen.timestamp() if d.last_seen else float("-inf")):
            if d.description is None and d.input_schema is None:
                continue  # a name without a definition (conventions that carry only names) says nothing
            self.by_key[(d.agent or "", d.name)] = d
            self.by_name[d.name] = d
        self.names_by_agent: dict[str, set[str]] = {}
        for d in definitions:
            self.names_by_agent.setdefault(d.agent or "", set()).add(d.name)

    def __len__(self) -> int:
        return len(self.by_key)

    def get(self, agent: str | None, tool: str | None) -> ToolDefinition | None:
        if tool is None:
            return None
        return self.by_key.get((agent or "", tool)) or self.by_name.get(tool)

    def offered(self, agent: str | None) -> set[str] | None:
        """Names the agent is known to offer (None: nothing known about it)."""
        return self.names_by_agent.get(agent or "")


def _pointer_parts(pointer: str) -> list[str]:
    if not pointer:
        return []
    parts = pointer.lstrip("/").split("/")
    return [p.replace("~1", "/").replace("~0", "~") for p in parts]


def parameter_label(pointer: str | None) -> str | None:
    """A JSON Pointer as people read it: ``/days`` → ``days``, ``/filter/from`` → ``filter.from``."""
    if pointer is None:
        return None
    parts = _pointer_parts(pointer)
    return ".".join(parts) if parts else pointer


def parameter_schema(schema: Any, pointer: str | None) -> Mapping[str, Any] | None:
    """The schema of the parameter at ``pointer`` (through ``properties`` and array ``items``), or None."""
    if pointer is None or not isinstance(schema, Mapping):
        return None
    node: Any = schema
    for part in _pointer_parts(pointer):
        if not isinstance(node, Mapping):
            return None
        props = node.get("properties")
        if isinstance(props, Mapping) and part in props:
            node = props[part]
        elif part.isdigit() and isinstance(node.get("items"), Mapping):
            node = node["items"]
        else:
            return None
    return node if isinstance(node, Mapping) else None


def is_required(schema: Any, pointer: str | None) -> bool | None:
    """Whether the schema lists the parameter as required in its parent object (None: not in the schema)."""
    if pointer is None or not isinstance(schema, Mapping):
        return None
    parts = _pointer_parts(pointer)
    if not parts:
        return None
    parent = parameter_schema(schema, "/" + "/".join(parts[:-1])) if len(parts) > 1 else schema
    if parent is None:
        return None
    props = parent.get("properties")
    if not isinstance(props, Mapping) or parts[-1] not in props:
        return None
    required = parent.get("required")
    return isinstance(required, Sequence) and parts[-1] in required


def mentions(text: str | None, word: str) -> bool:
    """Whether ``text`` mentions ``word`` as a word (case-insensitive; ``_`` and ``-`` count as part of it)."""
    if not text or not word:
        return False
    return re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text, flags=re.IGNORECASE) is not None


def _descriptions(definition: ToolDefinition, pointer: str | None) -> str:
    """The tool's description with the parameter's own description (what the model reads about it)."""
    texts = [definition.description or ""]
    param = parameter_schema(definition.input_schema, pointer)
    if param is not None and isinstance(param.get("description"), str):
        texts.append(param["description"])
    return "\n".join(texts)


def described(definition: ToolDefinition, pointer: str | None) -> bool:
    """Whether the tool's description or the parameter's own description mentions the parameter."""
    name = (_pointer_parts(pointer or "") or [""])[-1]
    param = parameter_schema(definition.input_schema, pointer)
    own = param is not None and isinstance(param.get("description"), str) and bool(param["description"].strip())
    return own or mentions(definition.description, name)


def constraint_text(param: Mapping[str, Any] | None) -> str | None:
    """The schema's constraint on a parameter in words: type, allowed values, range, pattern, length."""
    if param is None:
        return None
    bits: list[str] = []
    if isinstance(param.get("type"), str):
        bits.append(param["type"])
    elif isinstance(param.get("type"), list):
        bits.append(" or ".join(str(t) for t in param["type"]))
    if isinstance(param.get("enum"), list):
        bits.append("one of " + ", ".join(_show(v) for v in param["enum"][:12]))
    if "const" in param:
        bits.append(f"exactly {_show(param['const'])}")
    low, high = param.get("minimum"), param.get("maximum")
    if low is not None and high is not None:
        bits.append(f"{low}–{high}")
    elif low is not None:
        bits.append(f"at least {low}")
    elif high is not None:
        bits.append(f"at most {high}")
    if isinstance(param.get("pattern"), str):
        bits.append(f"matching {param['pattern']}")
    if isinstance(param.get("format"), str):
        bits.append(f"format {param['format']}")
    if param.get("minLength") is not None or param.get("maxLength") is not None:
        bits.append(f"length {param.get('minLength', 0)}–{param.get('maxLength', '∞')}")
    return ", ".join(bits) or None


def example_value(param: Mapping[str, Any] | None) -> Any:
    """A value the schema accepts, to show in a description (first example/enum value, the minimum, or a
    placeholder of the type)."""
    if param is None:
        return "…"
    examples = param.get("examples")
    if isinstance(examples, list) and examples:
        return examples[0]
    if isinstance(param.get("enum"), list) and param["enum"]:
        return param["enum"][0]
    if "const" in param:
        return param["const"]
    if "default" in param:
        return param["default"]
    kind = param.get("type")
    if kind == "integer":
        low = param.get("minimum")
        return max(int(low) if isinstance(low, int | float) else 1, 3 if param.get("maximum", 99) >= 3 else 1)
    if kind == "number":
        return param.get("minimum", 1.5)
    if kind == "boolean":
        return True
    if kind == "array":
        return []
    if kind == "object":
        return {}
    if isinstance(param.get("pattern"), str) and param["pattern"] == "^[A-Z]{3}$":
        return "ABC"
    return "…"


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else str(value)


def schema_allows_extra(schema: Any) -> bool | None:
    """Whether the top-level schema lets the model send properties it does not list (None: no schema)."""
    if not isinstance(schema, Mapping):
        return None
    return schema.get("additionalProperties") is not False
