"""A short summary of the report posted to a Slack-compatible incoming webhook (``{"text": …, "blocks": […]}``).

The URL carries a token: it comes from the environment (``report.webhook_url_env``), and neither it nor anything
derived from it is ever printed, logged or put in an exception message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any, Final

from pydantic import SecretStr

from monitor.report.render import _pct, _trend, _usd

__all__ = ["WebhookError", "post", "summary"]

_SECTION_LIMIT: Final = 2900  # Slack: at most 3000 characters in a section's text
_HEADER_LIMIT: Final = 150
_TOP: Final = 5


class WebhookError(RuntimeError):
    """The post failed; the message never contains the URL."""


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def summary(doc: dict[str, Any]) -> dict[str, Any]:
    """The Slack message: headline numbers, the top recommendations, the notes."""
    h = doc["headline"]
    title = f"{doc['title']} · {doc['window']['label']}"
    runs = int(h["runs"]["value"] or 0)
    rate = h["failure_rate"]
    lines = [
        f"*Runs:* {runs:,}  ·  *failed:* {int(h['failed_runs']['value'] or 0):,} ({_pct(rate['value'])}, "
        f"{_trend(rate['trend'])})",
        f"*Runs with a tool-selection error:* {int(h['selection_error_runs']['value'] or 0):,}  ·  "
        f"*with a parameter error:* {int(h['parameter_error_runs']['value'] or 0):,}",
        f"*Judge spend:* {_usd(h['judge_cost_usd']['value'])}",
    ]
    recs = doc["recommendations"][:_TOP]
    rec_lines = [f"{r['rank']}. *{r['title']}* (`{r['fix']}`, {r['status']}): {r['finding']}" for r in recs] or [
        "No failure pattern hurt enough runs to recommend a change."
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _clip(title, _HEADER_LIMIT)}},
        {"type": "section", "text": {"type": "mrkdwn", "text": _clip("\n".join(lines), _SECTION_LIMIT)}},
        {
            "type": "section",
            "text": {"type": "mrkdwn", "text": _clip("*Top recommendations*\n" + "\n".join(rec_lines), _SECTION_LIMIT)},
        },
    ]
    if doc["notes"]:
        blocks.append(
            {"type": "context", "elements": [{"type": "mrkdwn", "text": _clip(n, 1900)} for n in doc["notes"][:5]]}
        )
    top = f" Top: {recs[0]['title']}." if recs else ""
    text = f"{title}: {runs:,} runs, {_pct(rate['value'])} failed.{top}"
    return {"text": _clip(text, 3000), "blocks": blocks}


def post(url: SecretStr, payload: dict[str, Any], *, timeout_s: float = 10.0) -> int:
    """POST ``payload`` as JSON; returns the HTTP status. Raises :class:`WebhookError` (without the URL)."""
    target = url.get_secret_value()
    if not target.lower().startswith(("http://", "https://")):
        raise WebhookError("the webhook URL is not an http(s) URL")
    request = urllib.request.Request(
        target,
        data=json.dumps(payload, ensure_ascii=False).encode("utf-8"),
        headers={"Content-Type": "application/json; charset=utf-8"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            status = int(response.status)
    except urllib.error.HTTPError as exc:
        raise WebhookError(f"the webhook answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        raise WebhookError(f"the webhook could not be reached ({type(reason).__name__})") from None
    return status
