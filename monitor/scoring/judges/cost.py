"""Token accounting and cost of judge requests (SCORING.md §4.0), pure: no I/O, no SDK.

:class:`Usage` holds the ``usage`` counts of the Messages API summed over the requests of one judge
result (its retries included); :func:`cost_usd` prices them with a ``judge.prices`` table
(:class:`monitor.settings.ModelPrice` rows, or mappings with the same keys):

    cost = (input × p_in + cache_write × p_in × w + cache_read × p_read + output × p_out) / 10⁶

with ``w`` = 1.25 for the ``5m`` cache TTL and 2 for ``1h``, ``p_read`` = 0.1 × ``p_in`` (the row's
``cache_read_per_mtok`` when Anthropic publishes another rate for the model), the whole × 0.5 for batch
requests. A row with ``long_prompt_tokens`` (Claude Haiku 5.5) multiplies every rate by
``long_prompt_multiplier`` when the prompt of a request (input + cache writes + cache reads) exceeds that
many tokens; summed usage only knows the mean prompt per request, which decides. An unknown model →
``None`` (the caller counts it). A model id with a snapshot date (``claude-haiku-4-5-20251001``) is
priced as its alias when the table has no row for the dated id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

__all__ = [
    "BATCH_DISCOUNT",
    "CACHE_READ_FACTOR",
    "CACHE_WRITE_FACTOR",
    "ZERO",
    "Usage",
    "cost_usd",
    "min_cacheable_tokens",
    "price_for",
]

CACHE_WRITE_FACTOR: Final[Mapping[str, float]] = {"5m": 1.25, "1h": 2.0}
"""Cache-write price as a multiple of the input price, per cache TTL."""
CACHE_READ_FACTOR: Final = 0.1
"""Cache-hit price as a multiple of the input price, unless the price row says otherwise."""
BATCH_DISCOUNT: Final = 0.5
"""Message Batches requests cost half."""

_SNAPSHOT = re.compile(r"-\d{8}$")

_COUNTS: Final = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts of one or more Messages API requests (SCORING.md §4.0 "Token accounting").

    ``input_tokens`` are the uncached input tokens (after the last cache breakpoint), as the API reports
    them; ``requests`` is how many requests the counts sum; ``batch`` whether they went through the Message
    Batches API (half price). ``+`` sums the usage of retries; :data:`ZERO` is its identity.
    """

    input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    output_tokens: int = 0
    requests: int = 0
    batch: bool = False

    def __post_init__(self) -> None:
        for name in (*_COUNTS, "requests"):
            if getattr(self, name) < 0:
                raise ValueError(f"Usage.{name} must not be negative, got {getattr(self, name)}")

    @property
    def prompt_tokens(self) -> int:
        """Every input token, cached or not: ``input + cache writes + cache reads``."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    def __add__(self, other: Usage) -> Usage:
        """The sum of two usages. Adding batch to non-batch usage raises :class:`ValueError` (they are
        priced differently: keep them apart), except to an empty usage (``requests == 0``)."""
        if not isinstance(other, Usage):
            return NotImplemented
        if self.requests and other.requests and self.batch != other.batch:
            raise ValueError("cannot add batch and non-batch usage (they are priced differently): keep them apart")
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            cache_creation_input_tokens=self.cache_creation_input_tokens + other.cache_creation_input_tokens,
            cache_read_input_tokens=self.cache_read_input_tokens + other.cache_read_input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            requests=self.requests + other.requests,
            batch=self.batch if self.requests else other.batch,
        )

    @classmethod
    def from_api(cls, usage: Any, *, requests: int | None = None, batch: bool | None = None) -> Usage:
        """The usage of a Messages API response: ``usage`` is the response's ``usage`` object (SDK model)
        or its JSON dict. Absent or null counts are 0. ``requests`` defaults to the mapping's ``requests``
        key, else 1; ``batch`` to the mapping's ``batch`` key, else ``service_tier == "batch"``."""

        def get(name: str) -> Any:
            return usage.get(name) if isinstance(usage, Mapping) else getattr(usage, name, None)

        counts = {name: int(get(name) or 0) for name in _COUNTS}
        ours = usage if isinstance(usage, Mapping) else {}  # our own keys, in a dict only
        if requests is None:
            requests = 1 if ours.get("requests") is None else int(ours["requests"])
        if batch is None:
            batch = bool(ours["batch"]) if ours.get("batch") is not None else get("service_tier") == "batch"
        return cls(**counts, requests=requests, batch=batch)


ZERO: Final = Usage()
"""No usage: the start of a sum."""


def price_for(model: str, prices: Mapping[str, Any]) -> Any | None:
    """The price row of ``model``: its own, else (for a dated snapshot id) its alias's; None when unknown."""
    row = prices.get(model)
    if row is None:
        alias = _SNAPSHOT.sub("", model)
        row = prices.get(alias) if alias != model else None
    return row


def _field(row: Any, name: str, default: Any = None) -> Any:
    value = row.get(name, default) if isinstance(row, Mapping) else getattr(row, name, default)
    return default if value is None else value


def cost_usd(
    usage: Usage, model: str, prices: Mapping[str, Any], cache_ttl: Literal["5m", "1h"] | str = "5m"
) -> float | None:
    """USD of ``usage`` on ``model`` (module docstring for the formula); None when ``prices`` has no row
    for the model. ``cache_ttl`` is the TTL the cache writes were made with (``judge.cache_ttl``)."""
    row = price_for(model, prices)
    if row is None:
        return None
    try:
        write_factor = CACHE_WRITE_FACTOR[cache_ttl]
    except KeyError:
        raise ValueError(f"cache_ttl must be '5m' or '1h', got {cache_ttl!r}") from None
    p_in = float(_field(row, "input_per_mtok"))
    p_out = float(_field(row, "output_per_mtok"))
    p_read = float(_field(row, "cache_read_per_mtok", CACHE_READ_FACTOR * p_in))
    threshold = _field(row, "long_prompt_tokens")
    if threshold is not None and usage.requests and usage.prompt_tokens / usage.requests > threshold:
        factor = float(_field(row, "long_prompt_multiplier", 1.0))
        p_in, p_out, p_read = p_in * factor, p_out * factor, p_read * factor
    total = (
        usage.input_tokens * p_in
        + usage.cache_creation_input_tokens * p_in * write_factor
        + usage.cache_read_input_tokens * p_read
        + usage.output_tokens * p_out
    ) / 1_000_000
    return total * BATCH_DISCOUNT if usage.batch else total


def min_cacheable_tokens(model: str, prices: Mapping[str, Any]) -> int | None:
    """The shortest prefix ``model`` caches, from its price row; None when unknown. A ``cache_control``
    prefix shorter than this is billed as plain input (``cache_creation_input_tokens == 0``)."""
    row = price_for(model, prices)
    value = None if row is None else _field(row, "min_cacheable_tokens")
    return None if value is None else int(value)
