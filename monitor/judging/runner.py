"""One judge on one run, synchronously, with the real ``anthropic`` SDK (SCORING.md §4.0).

:func:`judge_run` renders the judge's request (pure, :mod:`monitor.scoring.judges`), sends it with
``client.messages.create(**body)`` and follows the exchange (one repair retry, one retry with doubled
``max_tokens``). Body keys the SDK's ``create`` does not declare (``temperature``) go in ``extra_body``,
so the JSON sent is the body. Usage is summed over every request; the SDK's own retries with backoff
handle API errors (the client's ``max_retries``), after which the result is ``error/judge_unavailable``.
The ``judge`` object gets ``latency_ms`` (wall time of the exchange) and ``cost_usd`` from
``monitor.scoring.judges.cost.cost_usd`` with the ``judge.prices`` table when that module exists, else
None.

Nothing more: the async pool, Message Batches and the budgets live elsewhere.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import time
from collections.abc import Mapping, Sequence
from typing import Any

import anthropic

from monitor.scoring.expectation import Expectation
from monitor.scoring.judges.base import Judge, JudgeUnavailable, Send, run_judge
from monitor.scoring.judges.cost import Usage, cost_usd
from monitor.scoring.judges.protocol import JudgeConfig
from monitor.scoring.result import JudgeUsage, ScoreResult
from monitor.trajectory.model import Run

__all__ = ["judge_run", "send_with", "split_body", "usage_cost"]


def send_with(client: anthropic.Anthropic) -> Send:
    """A ``send`` function for :func:`~monitor.scoring.judges.base.run_judge` on ``client``: the response as a
    JSON dict; any SDK error (after its retries) → :class:`JudgeUnavailable`."""

    def send(body: dict[str, Any]) -> Mapping[str, Any]:
        try:
            message: anthropic.types.Message = client.messages.create(**split_body(client.messages.create, body))
        except anthropic.APIError as exc:
            raise JudgeUnavailable(f"{type(exc).__name__}: {exc}") from exc
        dumped: dict[str, Any] = message.model_dump(mode="json", exclude_none=True)
        return dumped

    return send


def split_body(create: Any, body: Mapping[str, Any]) -> dict[str, Any]:
    """The keyword arguments for ``create`` (``client.messages.create``, sync or async) that send exactly
    ``body``: the keys ``create`` declares as they are, the rest (e.g. ``temperature``, which this SDK's
    ``create`` no longer names) in ``extra_body``."""
    known = _parameters(getattr(create, "__func__", create))
    kwargs = {k: v for k, v in body.items() if k in known}
    extra = {k: v for k, v in body.items() if k not in known}
    if extra:
        kwargs["extra_body"] = extra
    return kwargs


@functools.cache
def _parameters(create: Any) -> frozenset[str]:
    return frozenset(inspect.signature(create).parameters)


def judge_run(
    client: anthropic.Anthropic,
    judge: Judge[Any],
    run: Run | Sequence[Run],
    expectation: Expectation | None,
    settings: Any,
) -> list[ScoreResult]:
    """The judge's results on ``run`` (one record); ``run`` may be the turns of a conversation, the current one
    last (judges with ``scope: conversation`` read them all). ``settings``: the monitor's settings (its ``judge``
    section) or that section itself; the judge's ``model`` parameter overrides ``judge.models`` / ``judge.model``."""
    config = JudgeConfig.from_settings(settings, judge.kind, getattr(judge.params, "model", None))
    started = time.monotonic()
    result = run_judge(judge, run, expectation, config, send_with(client))
    if result.judge is None:
        return [result]
    usage = dataclasses.replace(
        result.judge,
        latency_ms=round((time.monotonic() - started) * 1000, 3),
        cost_usd=usage_cost(result.judge, settings),
    )
    return [dataclasses.replace(result, judge=usage)]


def usage_cost(usage: JudgeUsage, settings: Any) -> float | None:
    """USD of ``usage`` from the settings' price table (SCORING §4.0); None when the model has no price."""
    section = getattr(settings, "judge", settings)
    prices = getattr(section, "prices", None)
    if prices is None:
        return None
    api_usage = {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
    }
    summed = Usage.from_api(api_usage, requests=usage.requests, batch=usage.batch)
    value = cost_usd(summed, usage.model, prices, getattr(section, "cache_ttl", "5m"))
    return None if value is None else float(value)
