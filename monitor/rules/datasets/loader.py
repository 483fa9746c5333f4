"""Finding dataset files, detecting their format and loading them (SCORING.md §6).

Detection, first match wins (the order of §6):

1. a top-level ``format`` key (``monitor.dataset/v1``; another ``monitor.*`` version is a clear
   error from the native loader) → native (§6.5);
2. an object with ``eval_cases`` (or ``evalCases``), or a list whose first item has ``query``, or
   ``name`` + ``data`` → Google ADK (§6.1);
3. a list whose first item has a ``user_input`` list → Ragas-like (§6.4);
4. a list whose first item has ``data`` and ``target`` → seed-001 (§6.2);
5. a list whose first item has ``user_message`` → seed-000 (§6.3).

A file that matches none is a :class:`DatasetError` (exit 2). Directories are searched
recursively for ``*.test.json``, ``*.evalset.json`` and ``*.monitor.{yaml,json,jsonl}``; files named
explicitly are loaded whatever their name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Literal, TypeAlias

from monitor.rules.datasets._common import JsonLines, read_document
from monitor.rules.datasets.adk import load_adk
from monitor.rules.datasets.model import Dataset, DatasetError
from monitor.rules.datasets.native import load_native
from monitor.rules.datasets.ragas import load_ragas
from monitor.rules.datasets.seeds import load_seed000, load_seed001

__all__ = ["DATASET_PATTERNS", "Format", "detect", "discover", "load_file", "load_paths"]

Format: TypeAlias = Literal["native", "adk", "ragas", "seed001", "seed000"]

DATASET_PATTERNS = ("*.test.json", "*.evalset.json", "*.monitor.yaml", "*.monitor.json", "*.monitor.jsonl")


def discover(paths: Iterable[Path]) -> list[Path]:
    """Dataset files under ``paths`` (directories searched recursively), sorted per directory, no duplicates."""
    out: list[Path] = []
    seen: set[Path] = set()
    for path in paths:
        if path.is_dir():
            found = sorted({p for pattern in DATASET_PATTERNS for p in path.rglob(pattern) if p.is_file()})
        elif path.exists():
            found = [path]
        else:
            raise DatasetError(str(path), "$", "no such file or directory")
        for p in found:
            key = p.resolve()
            if key not in seen:
                seen.add(key)
                out.append(p)
    return out


def detect(doc: Any) -> Format | None:
    """The format of a decoded document by the §6 rules, or None."""
    if isinstance(doc, Mapping):
        fmt = doc.get("format")
        if isinstance(fmt, str) and fmt.startswith("monitor."):
            return "native"
        if "eval_cases" in doc or "evalCases" in doc:
            return "adk"
        return None
    if isinstance(doc, JsonLines) and doc and isinstance(doc[0], Mapping) and "format" in doc[0]:
        fmt = doc[0].get("format")
        if isinstance(fmt, str) and fmt.startswith("monitor."):
            return "native"
    if not isinstance(doc, list) or not doc or not isinstance(doc[0], Mapping):
        return None
    first = doc[0]
    if "query" in first or ("name" in first and "data" in first):
        return "adk"
    if isinstance(first.get("user_input"), list):
        return "ragas"
    if "data" in first and "target" in first:
        return "seed001"
    if "user_message" in first:
        return "seed000"
    return None


def load_file(path: Path, *, skip_unsupported: bool = False, tool_eval_variant: str = "clipped") -> Dataset:
    """Read, detect and load one dataset file."""
    doc = read_document(path)
    fmt = detect(doc)
    if fmt == "native":
        return load_native(path, doc)
    if fmt == "adk":
        return load_adk(path, doc, skip_unsupported=skip_unsupported)
    if fmt == "ragas":
        return load_ragas(path, doc)
    if fmt == "seed001":
        return load_seed001(path, doc)
    if fmt == "seed000":
        return load_seed000(path, doc, variant=tool_eval_variant)
    if isinstance(doc, list) and not doc:
        raise DatasetError(str(path), "$", "empty list: no cases, and the format cannot be detected")
    raise DatasetError(
        str(path),
        "$",
        "matches no dataset format: expected 'format: monitor.dataset/v1', an ADK EvalSet ('eval_cases') or "
        "legacy list ('query' / 'name'+'data'), Ragas samples ('user_input'), seed-001 ('data'+'target') "
        "or seed-000 TestCases ('user_message')",
    )


def load_paths(paths: Iterable[Path], *, skip_unsupported: bool = False) -> list[Dataset]:
    """Every dataset under ``paths``; ``test_config.json`` files are criteria, never datasets."""
    files = [p for p in discover(paths) if p.name != "test_config.json"]
    if not files:
        raise DatasetError(", ".join(str(p) for p in paths), "$", "no dataset files found")
    return [load_file(p, skip_unsupported=skip_unsupported) for p in files]
