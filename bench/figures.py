"""The figures `make bench` publishes: each benchmark writes its own, the README's table is rendered from all.

A benchmark ends with :func:`publish` (``bench/results/<bench>.json``: the figures of its last run, the
machine's facts and the command that reproduces them). ``python bench/figures.py`` (the last step of
``make bench``) renders every results file into README.md between ``<!-- bench:figures:begin -->`` and
``<!-- bench:figures:end -->``; ``--check`` exits 1 when the README's table differs from the results (a test runs
it, so the table and the checked-in results never drift apart).

A figure is a ratio against a baseline measured in the same run wherever the machine's noise would make an
absolute number meaningless; ``goal`` states the target as a comparison (``<= 5``, ``>= 0.5``) that
:func:`Figure.met` evaluates, and the table says whether it was met.
"""

from __future__ import annotations

import argparse
import json
import operator
import os
import platform
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
README = ROOT / "README.md"
BEGIN = "<!-- bench:figures:begin -->"
END = "<!-- bench:figures:end -->"

_COMPARE: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    ">=": operator.ge,
    "<": operator.lt,
    ">": operator.gt,
}


@dataclass(frozen=True)
class Figure:
    """One published figure.

    ``value`` is the measured number, ``unit`` how to read it (``×`` for a ratio, ``µs``, ``KiB``, ``ms``…),
    ``baseline`` what the ratio is against (empty for an absolute figure), ``goal`` a comparison such as
    ``<= 5`` or ``>= 0.5`` (empty when the figure has no target), ``detail`` the numbers behind it.
    """

    key: str
    label: str
    value: float
    unit: str
    baseline: str = ""
    goal: str = ""
    detail: str = ""

    def met(self) -> bool | None:
        """Whether ``value`` meets ``goal`` (None without a goal). Raises ``ValueError`` on a malformed goal."""
        if not self.goal:
            return None
        op, _, target = self.goal.partition(" ")
        if op not in _COMPARE:
            raise ValueError(f"figure {self.key}: goal {self.goal!r} must start with one of {sorted(_COMPARE)}")
        return _COMPARE[op](self.value, float(target))


def machine() -> dict[str, str | int]:
    """The facts a figure depends on."""
    return {
        "cpus": os.cpu_count() or 0,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
    }


def publish(bench: str, command: str, figures: Sequence[Figure], *, results: Path = RESULTS) -> Path:
    """Write ``figures`` as ``results/<bench>.json`` (replacing the previous run's) and print them."""
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{bench}.json"
    doc = {
        "bench": bench,
        "command": command,
        "measured": datetime.now(UTC).strftime("%Y-%m-%d"),
        "machine": machine(),
        "figures": [asdict(f) for f in figures],
    }
    path.write_text(json.dumps(doc, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    for f in figures:
        verdict = {True: "met", False: "NOT MET", None: ""}[f.met()]
        print(f"  {f.label}: {_value(f)} {f.goal and '(goal ' + f.goal + ') ' + verdict}".rstrip())
    return path


def _value(f: Figure) -> str:
    v = f.value
    number = f"{v:,.2f}" if abs(v) < 100 else f"{v:,.0f}"
    return f"{number} {f.unit}".strip() if f.unit != "×" else f"{number}×"


def load(results: Path = RESULTS) -> list[dict[str, object]]:
    """Every results document, in file-name order."""
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(results.glob("*.json"))]


def render(docs: Sequence[dict[str, object]]) -> str:
    """The README table of every figure of ``docs``."""
    lines = [
        "| figure | value | against | goal | met | reproduce |",
        "|---|---|---|---|---|---|",
    ]
    for doc in docs:
        command = str(doc["command"])
        figures = doc["figures"]
        assert isinstance(figures, list)
        for raw in figures:
            f = Figure(**raw)
            met = {True: "yes", False: "**no**", None: ""}[f.met()]
            label = f"{f.label} ({f.detail})" if f.detail else f.label
            lines.append(f"| {label} | {_value(f)} | {f.baseline} | {f.goal} | {met} | `{command}` |")
    measured = sorted({str(d["measured"]) for d in docs})
    cpus = sorted({str(d["machine"]["cpus"]) for d in docs if isinstance(d["machine"], dict)})  # type: ignore[index]
    lines.append("")
    lines.append(
        f"Measured {', '.join(measured) or 'never'} on a {'/'.join(cpus) or '?'}-CPU machine; "
        "written by `make bench` (`bench/figures.py`) from `bench/results/*.json`."
    )
    return "\n".join(lines)


def splice(readme: str, table: str) -> str:
    """``readme`` with the text between the markers replaced by ``table``. Raises ``ValueError`` without them."""
    start, end = readme.find(BEGIN), readme.find(END)
    if start < 0 or end < start:
        raise ValueError(f"README.md has no {BEGIN} … {END} section")
    return readme[: start + len(BEGIN)] + "\n" + table + "\n" + readme[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md's table is out of date")
    args = parser.parse_args(argv)
    current = README.read_text(encoding="utf-8")
    wanted = splice(current, render(load()))
    if args.check:
        if wanted != current:
            print("README.md's figures table differs from bench/results/*.json: run `python bench/figures.py`")
            return 1
        return 0
    README.write_text(wanted, encoding="utf-8")
    print(f"wrote the figures of {len(load())} benchmarks into README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
