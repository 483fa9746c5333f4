"""The report's time window: an ISO week (UTC), or any ``[since, until)``."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta

from monitor.analysis.model import Window

__all__ = ["WindowError", "iso_week", "label", "last_full_week", "parse_instant", "resolve"]


class WindowError(ValueError):
    """A window the user gave that cannot be used (the message says why)."""


_WEEK = re.compile(r"^(\d{4})-?W(\d{2})$", re.IGNORECASE)


def iso_week(text: str) -> Window:
    """``2026-W47`` → Monday 00:00 UTC of that ISO week to the next Monday."""
    m = _WEEK.match(text.strip())
    if not m:
        raise WindowError(f"--week {text!r}: expected an ISO week such as 2026-W47")
    year, week = int(m.group(1)), int(m.group(2))
    try:
        monday = date.fromisocalendar(year, week, 1)
    except ValueError as exc:
        raise WindowError(f"--week {text!r}: {year} has no ISO week {week}") from exc
    since = datetime.combine(monday, time(), UTC)
    return Window(since, since + timedelta(days=7))


def last_full_week(now: datetime) -> Window:
    """The last ISO week (UTC) that ended before ``now``."""
    today = now.astimezone(UTC).date()
    this_monday = today - timedelta(days=today.weekday())
    since = datetime.combine(this_monday - timedelta(days=7), time(), UTC)
    return Window(since, since + timedelta(days=7))


def parse_instant(text: str, option: str) -> datetime:
    """An ISO date (midnight UTC) or date-time (naive = UTC)."""
    value = text.strip()
    try:
        if len(value) == 10:
            return datetime.combine(date.fromisoformat(value), time(), UTC)
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError as exc:
        raise WindowError(f"{option} {text!r}: expected an ISO date or date-time such as 2026-11-16") from exc
    return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)


def resolve(week: str | None, since: str | None, until: str | None, now: datetime) -> Window:
    """The window the options ask for: ``--week``, or ``--since``/``--until`` (``--until`` defaults to now,
    ``--since`` to seven days before ``--until``), else the last full ISO week."""
    if week is not None:
        if since is not None or until is not None:
            raise WindowError("--week cannot be combined with --since/--until")
        return iso_week(week)
    if since is None and until is None:
        return last_full_week(now)
    end = parse_instant(until, "--until") if until is not None else now.astimezone(UTC)
    start = parse_instant(since, "--since") if since is not None else end - timedelta(days=7)
    if start >= end:
        raise WindowError(f"--since {start.isoformat()} must be before --until {end.isoformat()}")
    if end - start > timedelta(days=366):
        raise WindowError("the window is longer than a year: give a shorter --since/--until")
    return Window(start, end)


def label(window: Window) -> str:
    """``2026-W47`` for an ISO week, else ``2026-11-16 – 2026-11-20``."""
    since, until = window.since.astimezone(UTC), window.until.astimezone(UTC)
    if since.time() == time() and since.weekday() == 0 and until - since == timedelta(days=7):
        year, week, _ = since.isocalendar()
        return f"{year}-W{week:02d}"
    fmt = "%Y-%m-%d" if since.time() == time() and until.time() == time() else "%Y-%m-%d %H:%M"
    end = until - timedelta(days=1) if fmt == "%Y-%m-%d" else until
    return f"{since.strftime(fmt)} – {end.strftime(fmt)}" if end.date() != since.date() else since.strftime(fmt)
