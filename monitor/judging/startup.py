"""What the daemon says about its judges at startup (before the first verdict is paid for).

:func:`cache_prefix_warnings`: prompt caching needs a cached prefix (tools, then the system blocks, up to the last
``cache_control`` breakpoint) of at least the model's minimum cacheable length (``min_cacheable_tokens`` of its
``judge.prices`` row); a shorter prefix is billed as plain input without any error, so every request pays full
price. The judges' static prefix is the verdict tool and the instructions block (S1); the tool catalogue (S2)
comes from each run's spans and adds to it, so a judge below the minimum may still cache on runs with large
catalogues. Estimated at 3.5 characters a token (SCORING §4.0).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from monitor.scoring import catalogue
from monitor.scoring.judges.base import Judge
from monitor.scoring.judges.cost import min_cacheable_tokens
from monitor.scoring.judges.protocol import CHARS_PER_TOKEN
from monitor.settings import Settings

__all__ = ["cache_prefix_warnings", "configured_judges", "static_prefix_tokens"]


def static_prefix_tokens(judge: type[Judge[Any]]) -> int:
    """The estimated tokens of ``judge``'s static prefix: its verdict schema(s) and instructions (the largest
    variant when it has several)."""
    material = judge.prompt_material()
    texts = [m for m in material if isinstance(m, str)] or [judge.instructions]
    schemas = [json.dumps(m, separators=(",", ":")) for m in material if isinstance(m, dict)]
    chars = max((len(t) for t in texts), default=0) + max((len(s) for s in schemas), default=0)
    return int(chars / CHARS_PER_TOKEN)


def configured_judges(
    settings: Settings, rule_scorers: Iterable[tuple[str, str | None, dict[str, Any]]]
) -> set[tuple[str, str]]:
    """(judge kind, model) of every judge the checks and the rules name. ``rule_scorers``: (id, kind, params)
    of every scorer of every rule."""
    found: set[tuple[str, str]] = set()
    for kind in settings.scoring.checks:
        if catalogue.is_judge_kind(kind):
            found.add((kind, settings.judge.model_for(kind)))
    for sid, given, params in rule_scorers:
        resolved = catalogue.kind_of(sid, given)
        if catalogue.is_judge_kind(resolved):
            model = params.get("model")
            found.add((resolved, model if isinstance(model, str) else settings.judge.model_for(resolved)))
    return found


def cache_prefix_warnings(settings: Settings, judges: Iterable[tuple[str, str]]) -> list[str]:
    """One sentence per (judge kind, model) whose static prefix is below the model's minimum cacheable length."""
    out: list[str] = []
    for kind, model in sorted(judges):
        cls = catalogue.scorer_class(kind)
        if not (isinstance(cls, type) and issubclass(cls, Judge)):
            continue
        minimum = min_cacheable_tokens(model, settings.judge.prices)
        tokens = static_prefix_tokens(cls)
        if minimum is not None and tokens < minimum:
            out.append(
                f"judge {kind} on {model}: its cached prefix is about {tokens} tokens, below the model's minimum of "
                f"{minimum}: prompt caching does nothing unless the run's tool catalogue makes up the difference "
                "(requests are billed as uncached input)"
            )
    return out
