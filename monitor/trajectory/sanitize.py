"""Make decoded values storable: text that every store accepts, numbers that every JSON column accepts.

What a store refuses, and where it can come from in a span:

* a lone UTF-16 surrogate (``U+D800``–``U+DFFF``): Python strings may hold one, UTF-8 cannot encode it
  (``str.encode("utf-8")`` raises, so SQLite and PostgreSQL drivers fail). JSON text produces one from
  a ``\\uD800`` escape without its pair; protobuf cannot (upb rejects such bytes when it parses);
* NUL (``U+0000``): valid UTF-8, but PostgreSQL text and json refuse it. A JSON ``\\u0000`` escape or
  a protobuf string may hold it;
* a non-finite float (NaN, ±Infinity): Python's ``json`` reads and writes ``NaN`` / ``Infinity``, but
  that is not JSON, and PostgreSQL's json type rejects it. Protobuf doubles, OTLP/JSON ``doubleValue``
  (``"NaN"``) and JSON literals that overflow (``1e999``) produce one;
* values Python can read but JSON cannot hold (sets, bytes, complex numbers, tuple keys), from reading
  a Python ``repr`` with :func:`ast.literal_eval`.

The repairs, everywhere the same: each lone surrogate and each NUL becomes U+FFFD (the replacement
character, one per bad code point, so lengths and positions stay as they were); a non-finite float
becomes the string of its proto3-JSON name (``"NaN"``, ``"Infinity"``, ``"-Infinity"``); a set or
tuple becomes a list, bytes their UTF-8 text (invalid bytes replaced), anything else that JSON cannot
hold its ``str()``; a key that is not a string becomes its ``str()``.

Cost: non-finite floats are caught by the JSON parser's own hooks (``parse_constant`` is called only
for ``NaN`` / ``Infinity``, ``parse_float`` only for literals with a fraction or exponent); whether a
text can hold a NUL or lone surrogate is one regex search with a literal prefix (``\\u``), and only
then is the parsed value walked. Walks use an explicit stack, never recursion, so any nesting depth
is safe.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from typing import Any, Final

REPLACEMENT: Final = "\ufffd"
UNSTORABLE_CHARS: Final = re.compile("[\x00\ud800-\udfff]")
"""Code points no store accepts in text: NUL and every UTF-16 surrogate (in a Python string a
surrogate is always lone: JSON decoding joins valid pairs into one code point)."""
_UNSTORABLE_ESCAPE: Final = re.compile(r"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
_UNSTORABLE_ESCAPE_BYTES: Final = re.compile(rb"\\u(?:[dD][89a-fA-F][0-9a-fA-F]{2}|0000)")
NON_FINITE_NAMES: Final = {math.inf: "Infinity", -math.inf: "-Infinity"}


def clean_text(text: str) -> str:
    """``text`` with every NUL and lone surrogate replaced by U+FFFD (the same string when it has none)."""
    return UNSTORABLE_CHARS.sub(REPLACEMENT, text)


def finite_or_name(value: float) -> float | str:
    """A finite float unchanged; NaN and ±Infinity as their proto3-JSON names."""
    if math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else NON_FINITE_NAMES[value]


def json_record_may_hold_unstorable_text(raw: bytes) -> bool:
    """Whether a UTF-8 JSON document could decode to a string holding a NUL or a lone surrogate:
    only a ``\\u0000`` or ``\\uD800``–``\\uDFFF`` escape can produce one (raw control characters are
    invalid JSON, raw surrogates invalid UTF-8). One regex search whose literal prefix makes it a
    fast scan; false positives (an escaped backslash before such text, a valid surrogate pair) only
    cost a walk that changes nothing."""
    return _UNSTORABLE_ESCAPE_BYTES.search(raw) is not None


def _finite_float(literal: str) -> float | str:
    return finite_or_name(float(literal))


def _constant_name(name: str) -> str:
    return name  # NaN, Infinity, -Infinity: JSON has no such numbers; keep the word


_DECODER: Final = json.JSONDecoder(parse_constant=_constant_name, parse_float=_finite_float)


def parse_json(text: str) -> Any:
    """``json.loads(text)`` made storable: ``NaN`` / ``Infinity`` literals and float literals too large
    for a float decode to their names, strings with a NUL or lone surrogate (only an escape can put
    one there, so only then is the result walked) are repaired. Raises what ``json.loads`` raises
    (``ValueError``, ``RecursionError``) on text that is not JSON."""
    value = _DECODER.decode(text)
    if _UNSTORABLE_ESCAPE.search(text) is not None:
        value = storable(value)
    return value


def _scalar(value: Any, repairs: Counter[str]) -> Any:
    """One non-container value made storable (see the module docstring); counts what it repaired."""
    if isinstance(value, str):
        if UNSTORABLE_CHARS.search(value) is None:
            return value
        repairs["text"] += 1
        return clean_text(value)
    if isinstance(value, bool) or value is None or isinstance(value, int):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        repairs["non_finite"] += 1
        return finite_or_name(value)
    if isinstance(value, bytes | bytearray):
        repairs["not_json"] += 1
        return clean_text(bytes(value).decode("utf-8", "replace"))
    repairs["not_json"] += 1
    return clean_text(str(value))


def storable(value: Any, repairs: Counter[str] | None = None) -> Any:
    """``value`` (a decoded JSON value, or what :func:`ast.literal_eval` returned) made storable.

    Dicts and lists are repaired in place where they already are JSON shapes (they are fresh from a
    parser), tuples and sets become new lists; the result holds only dict (string keys), list, str,
    int, finite float, bool and None. ``repairs`` (optional) counts the repairs by kind: ``text``
    (NUL / lone surrogate), ``non_finite``, ``not_json``. Iterative.
    """
    counts: Counter[str] = repairs if repairs is not None else Counter()
    if not isinstance(value, dict | list | tuple | set | frozenset):
        return _scalar(value, counts)
    root: list[Any] = [value]
    # (container, key-or-index) slots whose value still needs a visit
    stack: list[tuple[Any, Any]] = [(root, 0)]
    while stack:
        holder, slot = stack.pop()
        item = holder[slot]
        if isinstance(item, tuple | set | frozenset):
            item = list(item)
            holder[slot] = item
            counts["not_json"] += 1
        if isinstance(item, list):
            for i, element in enumerate(item):
                if isinstance(element, dict | list | tuple | set | frozenset):
                    stack.append((item, i))
                else:
                    fixed = _scalar(element, counts)
                    if fixed is not element:
                        item[i] = fixed
        elif isinstance(item, dict):
            if any(not isinstance(k, str) or UNSTORABLE_CHARS.search(k) is not None for k in item):
                rebuilt = {_key_text(k, counts): v for k, v in item.items()}
                item.clear()
                item.update(rebuilt)
            for key, element in item.items():
                if isinstance(element, dict | list | tuple | set | frozenset):
                    stack.append((item, key))
                else:
                    fixed = _scalar(element, counts)
                    if fixed is not element:
                        item[key] = fixed
    return root[0]


def _key_text(key: Any, repairs: Counter[str]) -> str:
    """A mapping key as storable text."""
    if isinstance(key, str):
        fixed: str = _scalar(key, repairs)
        return fixed
    repairs["not_json"] += 1
    text = key.decode("utf-8", "replace") if isinstance(key, bytes) else str(key)
    return clean_text(text)
