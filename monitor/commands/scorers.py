"""``monitor scorers``: the scorer registry (kind, class, version, peer, parameters with defaults).

Every kind of :mod:`monitor.scoring.catalogue`, the judges of SCORING.md §4 included (marked ``not
implemented`` until they are). ``--format table`` (default) prints a rich table; ``--format json`` a
JSON array of ``{kind, kind_class, implemented, version, peer, section, summary, needs, turn_mode,
defaults, builds_with_defaults}``. The peer column names the tool whose numbers the scorer reproduces (SCORING.md §7);
``ours`` for our own checks.
"""

from __future__ import annotations

import json
import sys
from typing import IO, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from monitor.scoring import catalogue

__all__ = ["catalogue_json", "run_scorers"]


def catalogue_json() -> list[dict[str, Any]]:
    """Every registered scorer kind (code and judge) with its class, peer and default parameters."""
    out = []
    for kind, info in catalogue.catalogue().items():
        out.append(
            {
                "kind": kind,
                "kind_class": info.kind_class,
                "implemented": info.implemented,
                "version": info.version,
                "peer": info.peer,
                "section": info.section,
                "summary": info.summary,
                "needs": list(info.needs),
                "turn_mode": info.turn_mode,
                "defaults": info.defaults,
                "builds_with_defaults": info.builds_with_defaults,
            }
        )
    return out


def _params(defaults: dict[str, Any]) -> str:
    return "\n".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in defaults.items())


def run_scorers(fmt: str = "table", out: IO[str] | None = None) -> int:
    out = out or sys.stdout
    entries = catalogue_json()
    if fmt == "json":
        json.dump(entries, out, ensure_ascii=False, indent=2)
        out.write("\n")
        return 0
    table = Table(show_header=True, header_style="bold", show_lines=True)
    for col in ("kind", "class", "version", "peer", "parameters (defaults)"):
        table.add_column(col, overflow="fold")
    for e in entries:
        klass = e["kind_class"] if e["implemented"] else f"{e['kind_class']} (not implemented)"
        params = _params(e["defaults"]) if e["implemented"] else "threshold; others not declared yet"
        if not e["builds_with_defaults"]:
            params = f"(needs parameters)\n{params}"
        table.add_row(escape(e["kind"]), klass, str(e["version"]), escape(e["peer"]), escape(params))
    Console(file=out, width=160, highlight=False).print(table)
    return 0
