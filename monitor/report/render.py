"""Rendering the report document: HTML (self-contained, charts embedded) and Markdown with Jinja2, JSON validated
against the published schema (:file:`report.schema.json`)."""

from __future__ import annotations

import json
import re
from functools import cache
from importlib.resources import files
from typing import Any, Final

import jinja2
import jsonschema
from markupsafe import Markup, escape

from monitor.report.document import LIMITS, PARAMETER_KINDS

__all__ = ["ReportSchemaError", "render_html", "render_json", "render_markdown", "schema", "validate"]

HEADLINE_ROWS: Final = (
    ("runs", "runs"),
    ("failed_runs", "failed runs"),
    ("failure_rate", "failure rate"),
    ("tool_calls", "tool calls"),
    ("selection_error_runs", "runs with a tool-selection error"),
    ("parameter_error_runs", "runs with a parameter error"),
    ("judge_cost_usd", "judge spend"),
)


class ReportSchemaError(ValueError):
    """The document does not follow the published schema (a bug: the message names the first violation)."""


@cache
def schema() -> dict[str, Any]:
    """The JSON Schema of the report document (Draft 2020-12)."""
    loaded: dict[str, Any] = json.loads(files("monitor.report").joinpath("report.schema.json").read_text("utf-8"))
    return loaded


def validate(doc: dict[str, Any]) -> None:
    """Raise :class:`ReportSchemaError` unless ``doc`` follows :func:`schema`."""
    validator = jsonschema.Draft202012Validator(schema())
    error = next(iter(sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))), None)
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        raise ReportSchemaError(f"report document invalid at {where}: {error.message}")


def render_json(doc: dict[str, Any]) -> str:
    validate(doc)
    return json.dumps(doc, ensure_ascii=False, indent=2, sort_keys=False) + "\n"


# --------------------------------------------------------------------------- filters


def _pct(value: float | None) -> str:
    if value is None:
        return "–"
    v = value * 100
    return f"{v:.1f}%" if abs(v) < 10 else f"{v:.0f}%"


def _num(value: float | None) -> str:
    if value is None:
        return "–"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:,.2f}"
    return f"{int(value):,}"


def _usd(value: float | None) -> str:
    if value is None:
        return "–"
    return f"${value:,.2f}" if value >= 1 else f"${value:.4f}"


def _score(value: float | None) -> str:
    return "–" if value is None else f"{value:.3f}"


def _metric(value: float | None, key: str) -> str:
    if key == "failure_rate":
        return _pct(value)
    if key == "judge_cost_usd":
        return _usd(value)
    return _num(value)


def _trend(t: dict[str, Any] | None) -> str:
    if not t:
        return "–"
    direction = t["direction"]
    if direction == "none":
        return "–"
    change = t["change"] or 0.0
    arrow = {"up": "▲", "down": "▼", "new": "▲ new", "flat": "="}[direction]
    text = f"{arrow} {change * 100:+.1f} pts"
    if t["p_value"] is not None:
        text += f" (p={t['p_value']:.3g}{', significant' if t['significant'] else ''})"
    return text


def _change(metric: dict[str, Any], key: str) -> str:
    if key == "failure_rate":
        return _trend(metric.get("trend"))
    rel = metric.get("relative_change")
    if rel is None:
        return "–" if metric.get("previous") in (None, 0) else "="
    return f"{rel * 100:+.0f}%"


def _short(value: Any, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _kinds_present(doc: dict[str, Any]) -> list[str]:
    """The parameter-error kinds that occur in the report (the table's columns)."""
    seen = {k["kind"] for row in doc["parameter_errors"] for k in row["kinds"] if k["issues"]}
    return [k for k in PARAMETER_KINDS if k in seen]


def _name(value: str | None) -> str:
    return "(no agent)" if value is None else value


def _cell(value: Any) -> str:
    """Text safe inside a Markdown table cell (no pipes or line breaks)."""
    return " ".join(str(value).split()).replace("|", "\\|")


_CODE = re.compile(r"`([^`]+)`")


def _code_html(text: str | None) -> Markup:
    """HTML-escaped text with Markdown code spans as ``<code>``."""
    if text is None:
        return Markup("")
    escaped = str(escape(text))
    return Markup(_CODE.sub(lambda m: f"<code>{m.group(1)}</code>", escaped))


def _trace_html(ex: dict[str, Any]) -> Markup:
    trace = escape(ex["trace_id"])
    if ex.get("url"):
        return Markup(f'<a href="{escape(ex["url"])}"><code>{trace}</code></a>')
    return Markup(f"<code>{trace}</code>")


def _trace_md(ex: dict[str, Any]) -> str:
    if ex.get("url"):
        return f"[`{ex['trace_id']}`]({ex['url'].replace(')', '%29').replace(' ', '%20')})"
    return f"`{ex['trace_id']}`"


@cache
def _env(autoescape: bool) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("monitor.report", "templates"),
        autoescape=autoescape,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        pct=_pct,
        num=_num,
        usd=_usd,
        score=_score,
        metric=_metric,
        trend=_trend,
        change=_change,
        name=_name,
        short=_short,
        cell=_cell,
        code=_code_html,
        trace_html=_trace_html,
        trace_md=_trace_md,
    )
    env.globals.update(headline_rows=HEADLINE_ROWS, kinds_present=_kinds_present, limits=LIMITS)
    return env


def render_html(doc: dict[str, Any]) -> str:
    """The self-contained HTML page (charts drawn here, embedded as base64 PNG)."""
    from monitor.report.charts import draw_all

    return _env(True).get_template("report.html.j2").render(doc=doc, charts=draw_all(doc))


def render_markdown(doc: dict[str, Any]) -> str:
    text = _env(False).get_template("report.md.j2").render(doc=doc)
    return re.sub(r"\n{3,}", "\n\n", text)
