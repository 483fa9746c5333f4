"""``monitor report``: the weekly failure-analysis report from the store, as HTML, Markdown and/or JSON, and
optionally a summary posted to a Slack-compatible webhook.

Exit codes: 0 written (and posted); 2 usage or configuration error (a bad window or format, no store at the URL,
``--webhook`` without the webhook variable set); 3 the store could not be read, or the webhook post failed (the
files are written all the same). The store is only read: an older schema is reported, never migrated.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TextIO

from monitor.settings import Settings, SettingsError, load_settings

__all__ = ["FORMATS", "ReportArgs", "output_name", "run_report"]

FORMATS = ("html", "md", "json")


@dataclass
class ReportArgs:
    week: str | None = None
    since: str | None = None
    until: str | None = None
    formats: Sequence[str] = ("html",)
    out: Path = Path(".")
    webhook: bool = False
    config: Path | None = None
    settings: Settings | None = None
    """Settings to use instead of loading ``config`` (tests, embedding)."""
    now: datetime | None = None
    written: list[Path] = field(default_factory=list)


def parse_formats(values: Sequence[str]) -> list[str]:
    """``html,md`` or repeated ``--format``: a list of known formats, in the order given, without repeats."""
    out: list[str] = []
    for value in values:
        for part in value.split(","):
            name = part.strip().lower()
            if name == "markdown":
                name = "md"
            if not name:
                continue
            if name not in FORMATS:
                raise ValueError(f"--format {part!r}: expected html, md or json")
            if name not in out:
                out.append(name)
    return out or ["html"]


def output_name(label: str, fmt: str) -> str:
    """``report-2026-W47.html``; a custom window's label becomes ``report-2026-11-16_2026-11-19.md``."""
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in label.replace(" – ", "_"))
    return f"report-{safe}.{fmt}"


def _store_problem(url: str) -> str | None:
    from monitor.store.sql import normalise_url

    parsed = normalise_url(url)
    if parsed.get_backend_name() == "sqlite":
        database = parsed.database or ""
        if database in ("", ":memory:") or database.startswith("file:"):
            return f"store.url {parsed.render_as_string(hide_password=True)}: an in-memory store holds no results"
        if not Path(database).exists():
            return f"store.url: no store at {database} (run the daemon or the demo first)"
    return None


def run_report(args: ReportArgs, out: TextIO | None = None, err: TextIO | None = None) -> int:
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        settings = args.settings or load_settings(args.config)
    except SettingsError as exc:
        print(exc, file=err)
        return 2
    from monitor.report.window import WindowError, label, resolve

    now = args.now or datetime.now(UTC)
    try:
        window = resolve(args.week, args.since, args.until, now)
        formats = parse_formats(args.formats)
    except (WindowError, ValueError) as exc:
        print(f"monitor report: {exc}", file=err)
        return 2
    webhook_url = settings.report.webhook_url() if args.webhook else None
    if args.webhook and webhook_url is None:
        print(
            f"monitor report: --webhook needs the webhook URL in the environment variable "
            f"{settings.report.webhook_url_env} (report.webhook_url_env)",
            file=err,
        )
        return 2
    problem = _store_problem(settings.store.url)
    if problem:
        print(f"monitor report: {problem}", file=err)
        return 2

    from monitor.report.document import build, gather
    from monitor.report.render import render_html, render_json, render_markdown
    from monitor.store import StoreUnavailable, create_store_engine
    from monitor.store.failures import features

    engine = create_store_engine(
        settings.store.url,
        connect_timeout_s=settings.store.connect_timeout_s,
        statement_timeout_s=max(settings.store.statement_timeout_s, 120.0),
    )
    try:
        if not features(engine).core:
            print("monitor report: the database at store.url holds no monitor store (no runs/results/issues)", file=err)
            return 2
        inputs = gather(engine, window, settings)
    except StoreUnavailable as exc:
        print(f"monitor report: the store could not be read: {exc}", file=err)
        return 3
    finally:
        engine.dispose()
    doc = build(inputs, settings, generated_at=now)
    renderers = {"html": render_html, "md": render_markdown, "json": render_json}
    args.out.mkdir(parents=True, exist_ok=True)
    for fmt in formats:
        path = args.out / output_name(label(window), fmt)
        path.write_text(renderers[fmt](doc), encoding="utf-8")
        args.written.append(path)
        print(path, file=out)
    recs = doc["recommendations"]
    summary = f"{doc['title']} {doc['window']['label']}: {inputs.analysis.runs} runs, {len(recs)} recommendation(s)"
    if recs:
        summary += f"; top: {recs[0]['title']}"
    print(summary, file=err)
    if webhook_url is not None:
        from monitor.report.webhook import WebhookError, post
        from monitor.report.webhook import summary as slack_summary

        try:
            status = post(webhook_url, slack_summary(doc))
        except WebhookError as exc:
            print(f"monitor report: {exc}", file=err)
            return 3
        print(f"summary posted to the webhook (HTTP {status})", file=err)
    return 0
