"""The report's charts, drawn with matplotlib (Agg, no display) from the report document and embedded in the HTML as
base64 PNG ``<img>`` tags: no JavaScript, no external file, readable in a browser and in mail clients that show
inline images (each chart also has its numbers as a table next to it, for clients that block images).

A chart without data is not drawn (the report says so in words instead). Long or non-Latin names are shortened
for the axes (the tables keep them whole); glyphs the bundled DejaVu font lacks are drawn as boxes, not errors.
"""

from __future__ import annotations

import base64
import io
import logging
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

import matplotlib

matplotlib.use("Agg")

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from monitor.report.document import LIMITS, PARAMETER_KINDS, SELECTION_CHART_KINDS

__all__ = ["Chart", "draw_all"]

_PALETTE: Final = ("#4C72B0", "#DD8452", "#55A868", "#C44E52", "#8172B3", "#937860", "#DA8BC3", "#8C8C8C")
_DPI: Final = 96


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart: its anchor id, title, alternative text and PNG (base64)."""

    id: str
    title: str
    alt: str
    png_base64: str

    @property
    def data_uri(self) -> str:
        return "data:image/png;base64," + self.png_base64


def _short(name: Any, limit: int = 28) -> str:
    text = "(none)" if name is None else str(name)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _png(fig: Figure) -> str:
    FigureCanvasAgg(fig)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight", facecolor="white")
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), dpi=_DPI)
    fig.set_layout_engine("constrained")
    return fig


def _failure_ratio(doc: dict[str, Any]) -> Chart | None:
    agents = [a for a in doc["agents"] if a["runs"] > 0][: LIMITS["agents_charted"]]
    if not agents:
        return None
    fig = _figure(7.5, 3.2)
    ax = fig.add_subplot()
    days = [d["day"][5:] for d in agents[0]["days"]]
    for i, agent in enumerate(agents):
        values = [d["failure_rate"] * 100 if d["failure_rate"] is not None else float("nan") for d in agent["days"]]
        ax.plot(days, values, marker="o", color=_PALETTE[i % len(_PALETTE)], label=_short(agent["agent"]))
    ax.set_ylabel("failed runs (%)")
    ax.set_ylim(bottom=0)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    names = ", ".join(_short(a["agent"]) for a in agents)
    return Chart("chart-failure-ratio", "Failed runs per agent and day", f"Share of failed runs per day for {names}",
                 _png(fig))  # fmt: skip


def _selection_kinds(doc: dict[str, Any]) -> Chart | None:
    rows = doc["selection_errors"]
    if not rows:
        return None
    totals: dict[str, int] = {}
    for r in rows:
        totals[r["agent"] or "(none)"] = totals.get(r["agent"] or "(none)", 0) + r["runs"]
    agents = sorted(totals, key=lambda a: (-totals[a], a))[: LIMITS["agents_charted"]]
    fig = _figure(7.5, 0.6 + 0.45 * len(agents))
    ax = fig.add_subplot()
    left = [0] * len(agents)
    for i, kind in enumerate(SELECTION_CHART_KINDS):
        values = [
            sum(r["runs"] for r in rows if (r["agent"] or "(none)") == agent and r["kind"] == kind) for agent in agents
        ]
        if not any(values):
            continue
        ax.barh([_short(a) for a in agents], values, left=left, color=_PALETTE[i % len(_PALETTE)], label=kind)
        left = [a + b for a, b in zip(left, values, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("runs hurt")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return Chart("chart-selection", "Tool-selection errors by kind", "Runs hurt by each kind of tool-selection error, "
                 "per agent", _png(fig))  # fmt: skip


def _heatmap(
    chart_id: str,
    title: str,
    alt: str,
    rows: Sequence[str],
    cols: Sequence[str],
    values: Sequence[Sequence[float]],
    labels: Sequence[Sequence[str]],
    xlabel: str,
    ylabel: str,
) -> Chart:
    fig = _figure(max(5.0, 1.2 + 0.75 * len(cols)), max(2.2, 0.9 + 0.38 * len(rows)))
    ax = fig.add_subplot()
    image = ax.imshow(values, cmap="Reds", aspect="auto", vmin=0)
    ax.set_xticks(range(len(cols)), [_short(c, 20) for c in cols], rotation=35, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), [_short(r, 36) for r in rows], fontsize=8)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    top = max((v for row in values for v in row), default=0.0)
    for y, row in enumerate(labels):
        for x, text in enumerate(row):
            if text:
                dark = top > 0 and values[y][x] > top * 0.6
                ax.text(x, y, text, ha="center", va="center", fontsize=7, color="white" if dark else "black")
    fig.colorbar(image, ax=ax, shrink=0.8)
    return Chart(chart_id, title, alt, _png(fig))


def _parameter_heatmap(doc: dict[str, Any]) -> Chart | None:
    rows = [r for r in doc["parameter_errors"] if r["issues"] > 0][: LIMITS["heatmap_tools"]]
    if not rows:
        return None
    kinds = [k for k in PARAMETER_KINDS if any(next(x for x in r["kinds"] if x["kind"] == k)["issues"] for r in rows)]
    names = [f"{r['tool']} ({r['agent']})" if r["agent"] else str(r["tool"]) for r in rows]
    values: list[list[float]] = []
    labels: list[list[str]] = []
    for r in rows:
        by_kind = {x["kind"]: x for x in r["kinds"]}
        values.append([(by_kind[k]["rate"] or 0.0) * 100 if r["calls"] else by_kind[k]["issues"] for k in kinds])
        labels.append(
            [
                (f"{by_kind[k]['rate'] * 100:.1f}%" if by_kind[k]["rate"] is not None else str(by_kind[k]["issues"]))
                if by_kind[k]["issues"]
                else ""
                for k in kinds
            ]
        )
    alt = "Heat map of parameter-error kinds per tool, as a share of the tool's calls"
    title = "Parameter errors per tool (share of calls)"
    return _heatmap("chart-parameters", title, alt, names, kinds, values, labels, "kind", "tool")


def _scores(doc: dict[str, Any]) -> Chart | None:
    scorers = [s for s in doc["scorers"] if sum(s["histogram"]) > 0]
    scorers.sort(key=lambda s: (-sum(s["histogram"]), s["scorer"]))
    scorers = scorers[: LIMITS["scorers_charted"]]
    if not scorers:
        return None
    cols = min(4, len(scorers))
    rows = (len(scorers) + cols - 1) // cols
    fig = _figure(2.2 * cols + 0.6, 1.8 * rows + 0.4)
    axes = fig.subplots(rows, cols, squeeze=False)
    edges = [i / 10 for i in range(10)]
    for i, s in enumerate(scorers):
        ax = axes[i // cols][i % cols]
        ax.bar(edges, s["histogram"], width=0.1, align="edge", color=_PALETTE[0], edgecolor="white")
        ax.set_title(_short(s["scorer"], 26), fontsize=8)
        ax.set_xlim(0, 1)
        ax.tick_params(labelsize=7)
    for j in range(len(scorers), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    return Chart("chart-scores", "Score distributions", "Histograms of the scores of each scorer (0 to 1)", _png(fig))


def _confusion(doc: dict[str, Any], index: int) -> Chart | None:
    entry = doc["confusions"][index]
    tools = entry["tools"]
    called = [t for t in tools if any(c["called"] == t for c in entry["cells"])]
    expected = [t for t in tools if any(c["expected"] == t for c in entry["cells"])]
    if not called or not expected:
        return None
    grid = [[0.0] * len(expected) for _ in called]
    labels = [[""] * len(expected) for _ in called]
    for c in entry["cells"]:
        y, x = called.index(c["called"]), expected.index(c["expected"])
        grid[y][x] = float(c["runs"])
        labels[y][x] = str(c["runs"])
    agent = entry["agent"] or "(no agent)"
    return _heatmap(f"chart-confusion-{index}", f"Wrong-tool confusions of {_short(agent, 40)}", f"Confusion matrix of "
                    f"{_short(agent, 40)}: runs that called one tool where another was expected", called, expected,
                    grid, labels, "expected", "called")  # fmt: skip


def _spend(doc: dict[str, Any]) -> Chart | None:
    spend = doc["judge_spend"]
    if not spend["available"] or not spend["by_day"]:
        return None
    days = [d["day"][5:] for d in spend["by_day"]]
    priced = spend["total_cost_usd"] is not None
    values = [(d["cost_usd"] or 0.0) if priced else d["results"] for d in spend["by_day"]]
    fig = _figure(6.5, 2.6)
    ax = fig.add_subplot()
    ax.bar(days, values, color=_PALETTE[2])
    ax.set_ylabel("USD" if priced else "judge results")
    ax.grid(axis="y", alpha=0.3)
    return Chart("chart-judge-spend", "Judge spend per day", "Judge spend per day" + (" in USD" if priced else ""),
                 _png(fig))  # fmt: skip


def draw_all(doc: dict[str, Any]) -> dict[str, list[Chart]]:
    """Every chart that has data, keyed by report section; sections without data get an empty list."""
    drawers: dict[str, list[Callable[[], Chart | None]]] = {
        "agents": [lambda: _failure_ratio(doc)],
        "selection": [lambda: _selection_kinds(doc)],
        "parameters": [lambda: _parameter_heatmap(doc)],
        "scores": [lambda: _scores(doc)],
        "confusions": [lambda i=i: _confusion(doc, i) for i in range(len(doc["confusions"]))],  # type: ignore[misc]
        "judge_spend": [lambda: _spend(doc)],
    }
    out: dict[str, list[Chart]] = {}
    font_log = logging.getLogger("matplotlib.font_manager")
    level = font_log.level
    font_log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*[Gg]lyph.*missing.*")
            warnings.filterwarnings("ignore", message=".*[Mm]issing from font.*")
            for section, makers in drawers.items():
                out[section] = [chart for make in makers if (chart := make()) is not None]
    finally:
        font_log.setLevel(level)
    return out
