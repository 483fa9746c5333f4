"""What the store keeps of each scored run to be looked at: :class:`RunKeeper` turns a run tree into
:class:`~monitor.store.base.KeptRun` rows (redacted and capped by :func:`monitor.trajectory.summary.summarize`) and
the :class:`~monitor.store.base.OfferedTool` definitions its runs offered. ``store.summaries`` configures it."""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Callable
from datetime import datetime
from typing import Any

from monitor.settings import RunSummarySettings
from monitor.store.base import KeptRun, OfferedTool
from monitor.trajectory.model import Run
from monitor.trajectory.summary import summarize, tool_definitions

__all__ = ["RunKeeper", "load_hook"]

log = logging.getLogger(__name__)


def load_hook(spec: str) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """The ``module:function`` of ``store.summaries.redact_hook``; raises ``ImportError`` / ``AttributeError`` /
    ``TypeError`` (not callable) with the name in the message."""
    module_name, _, attr = spec.partition(":")
    module = importlib.import_module(module_name)
    hook = getattr(module, attr)
    if not callable(hook):
        raise TypeError(f"{spec} is not callable")
    return hook  # type: ignore[no-any-return]


class RunKeeper:
    """See the module docstring. A failing redaction hook keeps nothing of that run (logged): an unredacted run
    is never stored."""

    def __init__(self, settings: RunSummarySettings) -> None:
        self.settings = settings
        self.pattern = re.compile(settings.redact_keys) if settings.redact_keys else None
        self.hook = load_hook(settings.redact_hook) if settings.redact_hook else None

    def keep(self, root: Run, seen_at: datetime) -> tuple[list[KeptRun], list[OfferedTool]]:
        """Every run of the tree kept (the store writes those that have a result) and the tools they offered."""
        if not self.settings.enabled:
            return [], []
        kept: list[KeptRun] = []
        tools: list[OfferedTool] = []
        for run in root.walk():
            try:
                doc = summarize(
                    run,
                    max_field_chars=self.settings.max_field_chars,
                    max_calls=self.settings.max_calls,
                    redact=self.pattern,
                    hook=self.hook,
                )
            except Exception:
                log.exception("run %s of trace %s is not kept: its redaction failed", run.run_id, run.trace_id)
                continue
            kept.append(
                KeptRun(
                    trace_id=run.trace_id,
                    run_id=run.run_id,
                    agent=run.agent,
                    user_text=_text(doc.get("user_text")),
                    final_response=_text(doc.get("final_response")),
                    status=run.status,
                    duration_ms=run.duration_ms,
                    calls=len(run.calls),
                    run=doc,
                )
            )
            tools.extend(
                OfferedTool(t.agent, t.name, t.definition_hash, t.description, t.input_schema, seen_at)
                for t in tool_definitions(run)
            )
        return kept, tools


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None
