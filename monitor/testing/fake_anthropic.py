"""A scripted, local stand-in for Anthropic's Messages and Message Batches APIs (``FakeAnthropic``).

Import it as ``from monitor.testing import FakeAnthropic``. The module itself is standard library only
(the optional :meth:`FakeAnthropic.client` helpers import ``anthropic`` when called), so any
virtualenv — framework generators, a judge's tests, an agent's tests — can load it.

    with FakeAnthropic([
        [("get_weather", {"city": "Paris"}), ("get_time", {"tz": "CET"})],   # step 1: two parallel tool uses
        "It is sunny in Paris.",                                             # step 2: final text
    ]) as fake:
        client = fake.client()             # anthropic.Anthropic(base_url=fake.base_url, api_key="test-key")
        ...
        fake.message_requests   # the JSON bodies the SDK sent, in order
        assert fake.unexpected == []

A *turn* is the answer to one ``POST /v1/messages`` request (or one request of a batch) and is one of:

* ``str``                                   – a final text answer (``stop_reason = "end_turn"``);
* ``[(name, input), …]``                    – tool uses (parallel allowed; ids ``toolu_01…``);
* :class:`Turn`                             – text, thinking and tool uses together, usage / stop reason overrides,
                                              a ``delay`` before answering;
* :class:`Error`                            – an HTTP error with Anthropic's error JSON (429/500/529 …), consumed like
                                              a turn, for retry tests (``retry_after``: a ``retry-after`` header in
                                              seconds; ``mid_stream=True``: an SSE ``error`` event);
* ``dict``                                  – a full Message JSON (missing fields are filled in);
* ``callable(request_json) -> any of the above`` – full control.

``script`` may itself be a callable (used for every request). When a list script is exhausted the ``default`` turn
answers, or, without one, a 500 ``api_error`` with ``x-should-retry: false`` that is also noted in
:attr:`FakeAnthropic.unexpected` (tests should assert it is empty).

Contracts:

* **Judges.** :meth:`FakeAnthropic.script_verdict` queues the answer a judge forcing a tool gets from the real API:
  one ``tool_use`` block of that tool with the given input, ``stop_reason = "tool_use"``, no text. It checks the
  request offered the tool (else a 400 ``invalid_request_error``, as the API answers) and did not force another
  one; with ``check=True`` (default) an input missing a ``required`` property of the tool's ``input_schema`` is
  noted in :attr:`~FakeAnthropic.unexpected` (the answer is still sent: test your judge's validation with it).
* **Faults.** :meth:`~FakeAnthropic.fail_next` (any status), :meth:`~FakeAnthropic.rate_limit` (429 with
  ``retry-after``), :meth:`~FakeAnthropic.overloaded` (529), :meth:`~FakeAnthropic.server_error` (500/502/503/504)
  answer the next Messages requests before the script goes on; they consume no turn. Errors carry Anthropic's
  error JSON and a ``request-id``; by default ``retry-after-ms: 1`` so that SDK retries do not sleep.
* **Slow answers.** ``latency`` (every Messages answer), :meth:`~FakeAnthropic.delay_next` (the next ones) and
  ``Turn.delay`` / ``Error.delay`` hold the answer for that many seconds before the status line is sent (a client
  timeout shorter than that raises ``APITimeoutError`` in the SDK); ``stream_delay`` paces SSE events. Delays
  end early when the server stops. Batches are never delayed.
* **Recording.** Every request is kept in :attr:`~FakeAnthropic.requests` (method, path, query, lower-cased
  headers, decoded JSON body, the status and JSON answered), in arrival order, retries included;
  :attr:`~FakeAnthropic.message_requests` are the Messages bodies only, :attr:`~FakeAnthropic.batch_creates`
  the bodies of ``POST /v1/messages/batches``. Thread-safe: the server answers concurrent requests on threads.

Message Batches
---------------

``POST /v1/messages/batches`` answers every request of the batch at once, in order, from the script (each consumes
a turn, exactly as a Messages request; faults queued with :meth:`~FakeAnthropic.fail_next` apply to them too). A
batch says ``in_progress`` for ``batch_polls`` retrievals, then ``ended``; its results (JSONL) are then served at
``results_url``. Each result line is, as the API writes them:

* ``succeeded`` — the Message; its ``usage.service_tier`` is ``"batch"`` (priced at half by the API);
* ``errored`` — the request's own error (``{"type": "error", "error": {type, message}}``): a scripted
  :class:`Error` turn, an error queued with :meth:`~FakeAnthropic.fail_next` / :meth:`~FakeAnthropic.server_error`
  …, or an invalid request (no ``model``…). The other requests of the batch are not affected;
* ``canceled`` — the batch was canceled before it ended (every request);
* ``expired`` — :meth:`~FakeAnthropic.expire_next_batch`: the batch reached its 24-hour limit before those requests
  were processed. Expired requests consume no turn (the model never saw them).

:meth:`~FakeAnthropic.finish_batch` makes a batch end at its next retrieval; :meth:`~FakeAnthropic.drop_batch`
forgets a batch, so that retrieving it answers 404 (a batch the API lost, or one deleted behind the client's back).

Prompt caching (``cache=True``)
-------------------------------

Off by default (the usage is then ``input_tokens`` ≈ JSON characters / 4 of ``tools``, ``system`` and ``messages``,
no cache tokens, as before). With ``FakeAnthropic(cache=True)`` the fake keeps a prompt cache like the API's, as
Anthropic documents it (https://platform.claude.com/docs/en/build-with-claude/prompt-caching, "How prompt caching
works", "Cache limitations", "Understanding cache breakpoint costs", "What invalidates the cache"):

* The prompt is the sequence of *blocks* in the order **tools → system → messages**: each tool definition, each
  ``system`` block (a ``system`` string is one block), each content block of each message (a string content is one
  block). Each block counts ``max(1, len(JSON) // 4)`` tokens (its ``cache_control`` left out), so the prefix up to
  any block has a token count.
* A *breakpoint* is a block with ``cache_control: {"type": "ephemeral"}``; ``"ttl": "1h"`` makes its entry live one
  hour, else five minutes (the default TTL). A top-level ``cache_control`` (automatic caching) puts a breakpoint on
  the last block. More than four breakpoints → 400 ``invalid_request_error`` (at most 4 per request).
* A prefix is cached only when it is at least the model's **minimum cacheable length**: 4,096 tokens for Claude
  Opus 4.6 / 4.5 and Haiku 4.5; 2,048 for Claude Haiku 3.5 / 3; 1,024 for Claude Sonnet 4.6 / 4.5, Opus 4.1 / 4,
  Sonnet 4 and Sonnet 3.7 (the table of "Cache limitations", as quoted in
  https://github.com/anthropics/anthropic-sdk-python/issues/1194); 1,024 for any other model name. A shorter
  prefix is processed without caching and **no error is returned** (both cache counters stay 0).
  ``cache_min_tokens`` overrides the table (one number for every model, or a mapping model → number).
* **Reads.** For each breakpoint the fake looks for a cached prefix ending at that block or at one of the 19
  blocks before it (the API checks about 20 block boundaries before each explicit breakpoint); the longest prefix
  found within its TTL is read: its tokens are ``cache_read_input_tokens``, and the hit refreshes the entry's TTL.
* **Writes.** Every breakpoint whose prefix reaches the minimum length is cached (written or refreshed). The
  tokens from the end of the prefix read up to the last such breakpoint are ``cache_creation_input_tokens``
  (split into ``usage.cache_creation.ephemeral_5m_input_tokens`` / ``ephemeral_1h_input_tokens`` by the TTL of the
  breakpoint that covers them); ``input_tokens`` is the rest (the blocks after the last cached breakpoint).
* A prefix is identified by the model, the exact bytes of its blocks and, for message blocks, the request's
  ``tool_choice`` and ``thinking`` (changing those invalidates the cached messages, not the tools and system).
* Entries are visible to the next request at once (the API makes an entry available once the first response
  begins, so concurrent requests may all miss there; batch requests are answered one after the other here, so the
  requests of a batch after the first read the prefix it wrote: the API's cache hits in batches are best effort).
* The TTL runs on ``cache_clock`` (default :func:`time.monotonic`; inject one to test expiry);
  :meth:`~FakeAnthropic.clear_cache` empties the cache. ``usage`` overrides (``usage=``, ``Turn.usage``) still
  win over the simulated numbers.
"""

from __future__ import annotations

import copy
import hashlib
import itertools
import json
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

__all__ = [
    "ERROR_TYPES",
    "Error",
    "FakeAnthropic",
    "RecordedRequest",
    "Turn",
    "tool_results",
    "tool_uses",
]

if TYPE_CHECKING:
    import anthropic

ERROR_TYPES: dict[int, str] = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    408: "timeout_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    502: "api_error",
    503: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}

_DEFAULT_MESSAGES: dict[str, str] = {
    "invalid_request_error": "Invalid request",
    "authentication_error": "invalid x-api-key",
    "permission_error": "Your API key does not have permission to use the specified resource.",
    "not_found_error": "The requested resource could not be found.",
    "timeout_error": "Request timed out",
    "request_too_large": "Request exceeds the maximum allowed number of bytes.",
    "rate_limit_error": "Number of request tokens has exceeded your per-minute rate limit",
    "api_error": "Internal server error",
    "overloaded_error": "Overloaded",
}

_BASE62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _b62(n: int, width: int) -> str:
    out = ""
    while n:
        n, r = divmod(n, 62)
        out = _BASE62[r] + out
    return out.rjust(width, "0")


@dataclass(frozen=True)
class Turn:
    """One scripted model answer. Blocks are emitted in the order thinking, text, tool uses."""

    text: str | None = None
    tool_uses: Sequence[tuple[str, Mapping[str, Any]]] = ()
    thinking: str | None = None
    stop_reason: str | None = None
    """Defaults to ``tool_use`` when there are tool uses, else ``end_turn``."""
    usage: Mapping[str, Any] | None = None
    """Overrides of the usage numbers (``input_tokens``, ``cache_read_input_tokens``, …)."""
    ids: Sequence[str] | None = None
    """Explicit tool use ids (else ``toolu_01…`` from a counter)."""
    delay: float = 0.0
    """Seconds to wait before answering (added to the server's ``latency`` and :meth:`FakeAnthropic.delay_next`)."""


@dataclass(frozen=True)
class Error:
    """An error answer: HTTP ``status`` with ``{"type": "error", "error": {"type", "message"}}``."""

    status: int = 529
    message: str | None = None
    """Defaults from the error type (e.g. ``Overloaded`` for 529)."""
    type: str | None = None
    """Anthropic error type; defaults from the status (``ERROR_TYPES``)."""
    retry_after_ms: int | None = 1
    """Sent as ``retry-after-ms`` so that SDK retries do not sleep; ``None`` sends no header."""
    should_retry: bool | None = None
    """Sent as ``x-should-retry`` when not ``None``."""
    mid_stream: bool = False
    """For a streaming request: answer 200, send ``message_start`` then an SSE ``error`` event."""
    retry_after: float | None = None
    """Sent as ``retry-after`` (seconds, as the API does on 429/529); when set, ``retry-after-ms`` is not sent
    (the SDK prefers it), so an SDK with retries on really waits this long."""
    headers: Mapping[str, str] = field(default_factory=dict)
    """Extra response headers (e.g. ``anthropic-ratelimit-requests-remaining``)."""
    delay: float = 0.0
    """Seconds to wait before answering."""

    def response_headers(self) -> list[tuple[str, str]]:
        """The headers sent with this error besides ``content-type`` / ``request-id``."""
        out: list[tuple[str, str]] = []
        if self.retry_after is not None:
            seconds = self.retry_after
            out.append(("retry-after", str(int(seconds)) if float(seconds).is_integer() else str(seconds)))
        elif self.retry_after_ms is not None:
            out.append(("retry-after-ms", str(self.retry_after_ms)))
        if self.should_retry is not None:
            out.append(("x-should-retry", "true" if self.should_retry else "false"))
        out.extend(self.headers.items())
        return out

    @property
    def error_type(self) -> str:
        return self.type or ERROR_TYPES.get(self.status, "api_error")

    def body(self, request_id: str) -> dict[str, Any]:
        return {
            "type": "error",
            "error": {
                "type": self.error_type,
                "message": self.message or _DEFAULT_MESSAGES.get(self.error_type, "Error"),
            },
            "request_id": request_id,
        }


@dataclass
class RecordedRequest:
    method: str
    path: str
    query: dict[str, list[str]]
    headers: dict[str, str]
    body: Any
    """Decoded JSON body (``None`` when there was none)."""
    status: int = 0
    """Status the fake answered with."""
    response: Any = None
    """JSON the fake answered with (the Message for a streamed answer)."""
    time: float = field(default_factory=time.time)


def tool_uses(message_json: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_use`` blocks of a Message JSON."""
    return [b for b in message_json.get("content", []) if b.get("type") == "tool_use"]


def tool_results(request_json: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The ``tool_result`` blocks of the last user message of a request."""
    for message in reversed(request_json.get("messages", [])):
        if message.get("role") == "user":
            content = message.get("content")
            if isinstance(content, list):
                return [b for b in content if isinstance(b, dict) and b.get("type") == "tool_result"]
            return []
    return []


def _now_iso(offset: timedelta = timedelta(0)) -> str:
    return (datetime.now(UTC) + offset).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rough_tokens(value: Any) -> int:
    return max(1, len(json.dumps(value, separators=(",", ":"), default=str)) // 4)


MAX_CACHE_BREAKPOINTS = 4
"""Blocks with ``cache_control`` a request may carry."""

CACHE_LOOKBACK_BLOCKS = 20
"""Block boundaries checked for a cache hit at and before each breakpoint."""

CACHE_TTL_S: dict[str, float] = {"5m": 300.0, "1h": 3600.0}

MIN_CACHEABLE_TOKENS: tuple[tuple[str, int], ...] = (
    ("claude-opus-4-6", 4096),
    ("claude-opus-4-5", 4096),
    ("claude-haiku-4-5", 4096),
    ("claude-3-5-haiku", 2048),
    ("claude-haiku-3-5", 2048),
    ("claude-3-haiku", 2048),
    ("claude-haiku-3", 2048),
)
"""Model id prefix → minimum cacheable prompt length (see the module docstring); any other model: 1,024."""

DEFAULT_MIN_CACHEABLE_TOKENS = 1024


def _without_cache_control(block: Any) -> Any:
    if isinstance(block, dict) and "cache_control" in block:
        return {k: v for k, v in block.items() if k != "cache_control"}
    return block


def _breakpoint_ttl(block: Any) -> str | None:
    """``"5m"`` / ``"1h"`` for a block carrying ``cache_control`` (type ephemeral), else None."""
    control = block.get("cache_control") if isinstance(block, dict) else None
    if not isinstance(control, dict):
        return None
    return "1h" if control.get("ttl") == "1h" else "5m"


@dataclass
class _CacheEntry:
    expires: float
    ttl: str


@dataclass(frozen=True)
class _Prompt:
    """A request's prompt as blocks (tools → system → messages): chained prefix hashes, cumulative tokens and the
    breakpoints ``(block index, ttl)``."""

    hashes: tuple[str, ...]
    cumulative: tuple[int, ...]
    breakpoints: tuple[tuple[int, str], ...]

    @property
    def total(self) -> int:
        return self.cumulative[-1] if self.cumulative else 0

    @staticmethod
    def of(request: Mapping[str, Any]) -> _Prompt:
        blocks: list[tuple[Any, str | None]] = []
        for tool in request.get("tools") or []:
            blocks.append((("tool", _without_cache_control(tool)), _breakpoint_ttl(tool)))
        system = request.get("system")
        if isinstance(system, str):
            blocks.append((("system", system), None))
        elif isinstance(system, list):
            for block in system:
                blocks.append((("system", _without_cache_control(block)), _breakpoint_ttl(block)))
        first_message = len(blocks)
        for message in request.get("messages") or []:
            if not isinstance(message, dict):
                continue
            role = message.get("role")
            content = message.get("content")
            if isinstance(content, list):
                for block in content:
                    blocks.append(((role, _without_cache_control(block)), _breakpoint_ttl(block)))
            else:
                blocks.append(((role, content), None))
        automatic = _breakpoint_ttl(request)
        if automatic is not None and blocks:
            last_value, last_ttl = blocks[-1]
            blocks[-1] = (last_value, last_ttl or automatic)
        digest = hashlib.sha256(json.dumps(["model", request.get("model")]).encode())
        hashes: list[str] = []
        cumulative: list[int] = []
        total = 0
        for i, (value, _) in enumerate(blocks):
            if i == first_message:  # tool_choice / thinking invalidate the cached messages, not tools and system
                context = [request.get("tool_choice"), request.get("thinking")]
                digest.update(json.dumps(context, sort_keys=True, default=str).encode())
            raw = json.dumps(value, sort_keys=True, separators=(",", ":"), default=str)
            digest.update(raw.encode())
            hashes.append(digest.copy().hexdigest())
            total += max(1, len(raw) // 4)
            cumulative.append(total)
        breakpoints = tuple((i, ttl) for i, (_, ttl) in enumerate(blocks) if ttl is not None)
        return _Prompt(tuple(hashes), tuple(cumulative), breakpoints)


@dataclass
class _Batch:
    id: str
    requests: list[dict[str, Any]]
    results: list[dict[str, Any]]
    created_at: str
    expires_at: str
    polls_left: int
    expiring: bool = False
    cancel_initiated_at: str | None = None
    ended_at: str | None = None
    canceled: bool = False
    archived_at: str | None = None


class FakeAnthropic:
    """The server. Use as a context manager (or call :meth:`start` / :meth:`stop`)."""

    def __init__(
        self,
        script: Sequence[Any] | Callable[[dict[str, Any]], Any] = (),
        *,
        default: Any = None,
        usage: Mapping[str, Any] | None = None,
        batch_polls: int = 0,
        host: str = "127.0.0.1",
        stream_chunk: int = 7,
        stream_delay: float = 0.0,
        validate: bool = True,
        latency: float = 0.0,
        cache: bool = False,
        cache_min_tokens: int | Mapping[str, int] | None = None,
        cache_clock: Callable[[], float] = time.monotonic,
        batch_result_order: str = "request",
    ) -> None:
        """
        ``usage``: defaults merged into every answer's usage (e.g. ``{"cache_read_input_tokens": 100}``).
        ``batch_polls``: how many ``GET /v1/messages/batches/{id}`` answers say ``in_progress`` before ``ended``.
        ``stream_chunk``: characters per ``text_delta`` / ``input_json_delta`` event.
        ``stream_delay``: seconds between SSE events.
        ``validate``: answer 400 to a Messages request without ``model``, ``max_tokens`` or ``messages``.
        ``latency``: seconds every Messages answer waits before it is sent.
        ``cache``: simulate prompt caching (module docstring); ``cache_min_tokens`` overrides the minimum cacheable
        length (one number, or model → number); ``cache_clock`` is the clock of the cache TTLs (seconds).
        ``batch_result_order``: ``"request"`` (the order of the batch's requests) or ``"reversed"``: the API does
        not promise any order (results are matched by ``custom_id``), so a client relying on it shows here.
        """
        if batch_result_order not in ("request", "reversed"):
            raise ValueError(f"batch_result_order must be 'request' or 'reversed', got {batch_result_order!r}")
        self._script: list[Any] = [] if callable(script) else list(script)
        self._script_fn = script if callable(script) else None
        self.default = default
        self.usage_defaults = dict(usage or {})
        self.batch_polls = batch_polls
        self.stream_chunk = max(1, stream_chunk)
        self.stream_delay = stream_delay
        self.validate = validate
        self.latency = latency
        self.cache = cache
        self.cache_min_tokens = cache_min_tokens
        self.cache_clock = cache_clock
        self.batch_result_order = batch_result_order
        self._cache: dict[str, _CacheEntry] = {}
        self._expiring: list[int] = []
        self._host = host
        self._pending_delays: list[float] = []
        self._stopping = threading.Event()
        self._lock = threading.RLock()
        self._ids = itertools.count(1)
        self._tool_ids = itertools.count(1)
        self._pending_errors: list[Error] = []
        self._batches: dict[str, _Batch] = {}
        self.requests: list[RecordedRequest] = []
        self.unexpected: list[str] = []
        """Requests the script could not answer (exhausted script, unknown path, invalid body)."""
        self.turns_used = 0
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeAnthropic:
        if self._server is not None:
            return self
        fake = self

        class Handler(_Handler):
            server_fake = fake

        self._stopping.clear()
        self._server = _Server((self._host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is None:
            return
        self._stopping.set()  # delayed answers stop waiting
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = None
        self._thread = None

    def __enter__(self) -> FakeAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "server not started"
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>`` – pass as ``base_url`` to ``anthropic.Anthropic``."""
        return f"http://{self._host}:{self.port}"

    def client(self, **kwargs: Any) -> anthropic.Anthropic:
        """An ``anthropic.Anthropic`` client on this server (``api_key="test-key"``, the SDK's own OpenTelemetry
        spans off); ``kwargs`` go to the constructor (``max_retries``, ``timeout``, …). Imports ``anthropic``."""
        import anthropic

        kwargs.setdefault("api_key", "test-key")
        return anthropic.Anthropic(base_url=self.base_url, **kwargs)

    def async_client(self, **kwargs: Any) -> anthropic.AsyncAnthropic:
        """An ``anthropic.AsyncAnthropic`` client on this server, as :meth:`client`."""
        import anthropic

        kwargs.setdefault("api_key", "test-key")
        return anthropic.AsyncAnthropic(base_url=self.base_url, **kwargs)

    def env(self) -> dict[str, str]:
        """``ANTHROPIC_BASE_URL`` / ``ANTHROPIC_API_KEY`` for a subprocess whose SDK should talk to this server."""
        return {"ANTHROPIC_BASE_URL": self.base_url, "ANTHROPIC_API_KEY": "test-key"}

    # ------------------------------------------------------------------ scripting

    def add(self, *turns: Any) -> None:
        """Append turns to the script."""
        with self._lock:
            self._script.extend(turns)

    def fail_next(self, status: int = 529, count: int = 1, **kwargs: Any) -> None:
        """The next ``count`` Messages requests fail with ``status`` before the script goes on.

        ``kwargs`` are :class:`Error` fields (``message``, ``retry_after``, ``retry_after_ms``, ``should_retry``,
        ``headers``, ``delay``, ``mid_stream``). Injected errors consume no turn of the script."""
        with self._lock:
            self._pending_errors.extend(Error(status=status, **kwargs) for _ in range(count))

    def rate_limit(self, retry_after: float | None = 1.0, count: int = 1, **kwargs: Any) -> None:
        """The next ``count`` Messages requests get 429 ``rate_limit_error`` with ``retry-after: <retry_after>``.

        With ``retry_after=None`` the default ``retry-after-ms: 1`` is sent instead."""
        self.fail_next(429, count, retry_after=retry_after, **kwargs)

    def overloaded(self, count: int = 1, **kwargs: Any) -> None:
        """The next ``count`` Messages requests get 529 ``overloaded_error``."""
        self.fail_next(529, count, **kwargs)

    def server_error(self, status: int = 500, count: int = 1, **kwargs: Any) -> None:
        """The next ``count`` Messages requests get a 5xx (``api_error``; ``timeout_error`` for 504)."""
        if not 500 <= status <= 599:
            raise ValueError(f"server_error takes a 5xx status, got {status}")
        self.fail_next(status, count, **kwargs)

    def delay_next(self, seconds: float, count: int = 1) -> None:
        """The next ``count`` Messages answers (errors included) wait ``seconds`` before they are sent."""
        with self._lock:
            self._pending_delays.extend([float(seconds)] * count)

    def expire_next_batch(self, count: int = 1, *, processed: int = 0) -> None:
        """The next ``count`` batches created expire: the first ``processed`` requests of each are answered as
        usual, the others end ``expired`` (and consume no turn). The batch still ends after ``batch_polls``
        retrievals; its ``expires_at`` is when it ended."""
        if count < 0 or processed < 0:
            raise ValueError("count and processed must not be negative")
        with self._lock:
            self._expiring.extend([processed] * count)

    def finish_batch(self, batch_id: str) -> None:
        """The next retrieval of the batch says ``ended`` (whatever ``batch_polls`` was when it was created)."""
        with self._lock:
            batch = self._batches.get(batch_id)
            if batch is not None and batch.ended_at is None:
                batch.polls_left = 1

    def drop_batch(self, batch_id: str) -> None:
        """Forget a batch: retrieving it (or its results) then answers 404 ``not_found_error``."""
        with self._lock:
            self._batches.pop(batch_id, None)

    def clear_cache(self) -> None:
        """Empty the simulated prompt cache (``cache=True``)."""
        with self._lock:
            self._cache.clear()

    def script_verdict(
        self,
        tool_name: str,
        verdict: Mapping[str, Any],
        *,
        check: bool = True,
        usage: Mapping[str, Any] | None = None,
        delay: float = 0.0,
    ) -> None:
        """Queue a judge's verdict: the answer to a request that forces ``tool_name`` is one ``tool_use`` block
        of that tool with ``verdict`` as its input (``stop_reason = "tool_use"``), as the API answers a request
        with ``tool_choice = {"type": "tool", "name": tool_name}``.

        The request must offer ``tool_name`` in ``tools`` (else 400, as the API) and must not force another tool
        (else 400); both are noted in :attr:`unexpected`. With ``check``, a ``verdict`` missing a ``required``
        property of the tool's ``input_schema`` is noted in :attr:`unexpected` too (the answer is still sent, so a
        judge's handling of an invalid verdict can be tested with ``check=False``)."""
        turn = Turn(tool_uses=[(tool_name, dict(verdict))], usage=usage, delay=delay)

        def answer(request: dict[str, Any]) -> Turn | Error:
            tools = [t for t in request.get("tools") or [] if isinstance(t, dict)]
            offered = {t.get("name"): t for t in tools}
            choice = request.get("tool_choice")
            forced = choice.get("name") if isinstance(choice, dict) and choice.get("type") == "tool" else None
            if forced is not None and forced != tool_name:
                self.unexpected.append(f"verdict for {tool_name!r} scripted, but the request forces {forced!r}")
                return Error(400, f"tool_choice: the script answers {tool_name!r}, not {forced!r}", retry_after_ms=None)
            if tool_name not in offered:
                self.unexpected.append(f"verdict for {tool_name!r} scripted, but the request does not offer it")
                return Error(400, f"tool_choice.name: Tool '{tool_name}' not found in tools", retry_after_ms=None)
            if check:
                schema = offered[tool_name].get("input_schema")
                required = schema.get("required", []) if isinstance(schema, dict) else []
                missing = [k for k in required if k not in verdict]
                if missing:
                    self.unexpected.append(f"verdict for {tool_name!r} misses required properties {missing}")
            return turn

        self.add(answer)

    @property
    def remaining(self) -> int:
        """Turns of a list script not used yet."""
        return len(self._script)

    @property
    def message_requests(self) -> list[dict[str, Any]]:
        """Bodies of every ``POST /v1/messages`` request, in arrival order (retries included)."""
        return [r.body for r in self.requests if r.method == "POST" and r.path == "/v1/messages"]

    @property
    def batch_creates(self) -> list[dict[str, Any]]:
        """Bodies of every ``POST /v1/messages/batches`` request (batch creations), in arrival order."""
        return [r.body for r in self.requests if r.method == "POST" and r.path == "/v1/messages/batches"]

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.unexpected.clear()

    # ------------------------------------------------------------------ ids

    def _next_id(self, prefix: str) -> str:
        return f"{prefix}_01{_b62(next(self._ids) * 7919 + 1_000_003, 22)}"

    def new_tool_use_id(self) -> str:
        return f"toolu_01{_b62(next(self._tool_ids) * 104729 + 99_991, 22)}"

    # ------------------------------------------------------------------ answering

    def _take_delay(self) -> float:
        with self._lock:
            return self._pending_delays.pop(0) if self._pending_delays else 0.0

    def _take_turn(self, request: dict[str, Any]) -> Any:
        with self._lock:
            if self._pending_errors:
                return self._pending_errors.pop(0)
            if self._script_fn is not None:
                self.turns_used += 1
                turn = self._script_fn(request)
            elif self._script:
                self.turns_used += 1
                turn = self._script.pop(0)
            elif self.default is not None:
                turn = self.default
            else:
                self.unexpected.append(f"script exhausted at request {len(self.message_requests)}")
                return Error(500, "FakeAnthropic: script exhausted", retry_after_ms=None, should_retry=False)
        # A callable turn (or a callable returning a callable) is resolved outside the lock.
        while callable(turn) and not isinstance(turn, (Turn, Error)):
            turn = turn(request)
        return turn

    def answer(self, request: dict[str, Any]) -> dict[str, Any] | Error:
        """The Message JSON (or Error) for one Messages request body; consumes one turn (no delay applied)."""
        answer = self._answer_now(request)
        return answer[0] if isinstance(answer, tuple) else answer

    def _answer(self, request: dict[str, Any]) -> tuple[dict[str, Any] | Error, float]:
        """The answer and how long to hold it (``latency`` + :meth:`delay_next` + the turn's ``delay``)."""
        delay = self.latency + self._take_delay()
        answer = self._answer_now(request)
        if isinstance(answer, tuple):
            answer, extra = answer
            delay += extra
        return answer, delay

    def _answer_now(self, request: dict[str, Any]) -> dict[str, Any] | Error | tuple[dict[str, Any] | Error, float]:
        if self.validate:
            missing = [k for k in ("model", "max_tokens", "messages") if k not in request]
            if missing:
                self.unexpected.append(f"invalid request: missing {missing}")
                return Error(400, f"{missing[0]}: Field required", retry_after_ms=None)
            if not request["messages"]:
                self.unexpected.append("invalid request: empty messages")
                return Error(400, "messages: at least one message is required", retry_after_ms=None)
        if self.cache:
            found = len(_Prompt.of(request).breakpoints)
            if found > MAX_CACHE_BREAKPOINTS:
                self.unexpected.append(f"invalid request: {found} cache_control blocks")
                return Error(
                    400,
                    f"A maximum of {MAX_CACHE_BREAKPOINTS} blocks with cache_control may be provided. Found {found}.",
                    retry_after_ms=None,
                )
        turn = self._take_turn(request)
        if isinstance(turn, Error):
            return turn, turn.delay
        return self._message(turn, request), turn.delay if isinstance(turn, Turn) else 0.0

    def _message(self, turn: Any, request: Mapping[str, Any]) -> dict[str, Any]:
        model = str(request.get("model") or "claude-fake-1")
        if isinstance(turn, dict):
            message = copy.deepcopy(turn)
            content = message.setdefault("content", [])
            message.setdefault("id", self._next_id("msg"))
            message.setdefault("type", "message")
            message.setdefault("role", "assistant")
            message.setdefault("model", model)
            message.setdefault(
                "stop_reason", "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
            )
            message.setdefault("stop_sequence", None)
            message["usage"] = self._usage(request, content, message.get("usage"))
            return message
        if isinstance(turn, str):
            turn = Turn(text=turn)
        elif isinstance(turn, (list, tuple)):
            turn = Turn(tool_uses=list(turn))
        if not isinstance(turn, Turn):
            raise TypeError(f"FakeAnthropic: cannot answer with {turn!r}")
        blocks: list[dict[str, Any]] = []
        if turn.thinking is not None:
            blocks.append({"type": "thinking", "thinking": turn.thinking, "signature": "fake-signature"})
        if turn.text is not None:
            blocks.append({"type": "text", "text": turn.text})
        ids = list(turn.ids or [])
        for i, (name, tool_input) in enumerate(turn.tool_uses):
            tool_id = ids[i] if i < len(ids) else self.new_tool_use_id()
            blocks.append({"type": "tool_use", "id": tool_id, "name": name, "input": copy.deepcopy(dict(tool_input))})
        stop = turn.stop_reason or ("tool_use" if turn.tool_uses else "end_turn")
        return {
            "id": self._next_id("msg"),
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._usage(request, blocks, turn.usage),
        }

    def _usage(
        self, request: Mapping[str, Any], content: list[dict[str, Any]], override: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        usage: dict[str, Any] = {
            "input_tokens": _rough_tokens([request.get("system"), request.get("messages"), request.get("tools")]),
            "output_tokens": _rough_tokens(content),
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "service_tier": "standard",
        }
        if self.cache:
            usage.update(self._cached_usage(request))
        usage.update(self.usage_defaults)
        usage.update(override or {})
        return usage

    # ------------------------------------------------------------------ prompt caching

    def min_cacheable_tokens(self, model: str) -> int:
        """The minimum cacheable prompt length the simulation applies to ``model`` (module docstring)."""
        given = self.cache_min_tokens
        if isinstance(given, int):
            return given
        if isinstance(given, Mapping) and model in given:
            return int(given[model])
        for prefix, tokens in MIN_CACHEABLE_TOKENS:
            if model.startswith(prefix):
                return tokens
        return DEFAULT_MIN_CACHEABLE_TOKENS

    def _cached_usage(self, request: Mapping[str, Any]) -> dict[str, Any]:
        """The input token counts of ``request`` with the simulated cache (reads, then writes)."""
        prompt = _Prompt.of(request)
        minimum = self.min_cacheable_tokens(str(request.get("model") or ""))
        now = self.cache_clock()
        with self._lock:
            read_end = -1
            for index, _ttl in prompt.breakpoints:
                for j in range(index, max(-1, index - CACHE_LOOKBACK_BLOCKS), -1):
                    if j <= read_end:
                        break
                    entry = self._cache.get(prompt.hashes[j])
                    if entry is not None and entry.expires > now:
                        read_end = j
                        break
            if read_end >= 0:
                entry = self._cache[prompt.hashes[read_end]]
                entry.expires = now + CACHE_TTL_S[entry.ttl]
            written = [(i, ttl) for i, ttl in prompt.breakpoints if prompt.cumulative[i] >= minimum]
            for i, ttl in written:
                self._cache[prompt.hashes[i]] = _CacheEntry(now + CACHE_TTL_S[ttl], ttl)
        read = prompt.cumulative[read_end] if read_end >= 0 else 0
        by_ttl = {"5m": 0, "1h": 0}
        start = read_end
        for i, ttl in written:
            if i > start:
                by_ttl[ttl] += prompt.cumulative[i] - (prompt.cumulative[start] if start >= 0 else 0)
                start = i
        creation = by_ttl["5m"] + by_ttl["1h"]
        return {
            "input_tokens": prompt.total - read - creation,
            "cache_creation_input_tokens": creation,
            "cache_read_input_tokens": read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": by_ttl["5m"],
                "ephemeral_1h_input_tokens": by_ttl["1h"],
            },
        }

    # ------------------------------------------------------------------ streaming

    def sse_events(self, message: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
        """The exact event sequence the Messages API streams for ``message``."""
        usage = dict(message["usage"])
        start_usage = {**usage, "output_tokens": 1}
        start = {**message, "content": [], "stop_reason": None, "stop_sequence": None, "usage": start_usage}
        events: list[tuple[str, dict[str, Any]]] = [("message_start", {"type": "message_start", "message": start})]
        n = self.stream_chunk
        for index, block in enumerate(message["content"]):
            kind = block.get("type")
            if kind == "text":
                events.append(("content_block_start", _block_start(index, {"type": "text", "text": ""})))
                if index == 0:
                    events.append(("ping", {"type": "ping"}))
                text = block.get("text", "")
                for i in range(0, len(text), n):
                    events.append(
                        ("content_block_delta", _delta(index, {"type": "text_delta", "text": text[i : i + n]}))
                    )
            elif kind == "thinking":
                events.append(
                    ("content_block_start", _block_start(index, {"type": "thinking", "thinking": "", "signature": ""}))
                )
                text = block.get("thinking", "")
                for i in range(0, len(text), n):
                    delta = {"type": "thinking_delta", "thinking": text[i : i + n]}
                    events.append(("content_block_delta", _delta(index, delta)))
                signature = {"type": "signature_delta", "signature": block.get("signature", "")}
                events.append(("content_block_delta", _delta(index, signature)))
            elif kind == "tool_use":
                head = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                if "caller" in block:
                    head["caller"] = block["caller"]
                events.append(("content_block_start", _block_start(index, head)))
                raw = json.dumps(block.get("input", {}), separators=(",", ":"))
                events.append(("content_block_delta", _delta(index, {"type": "input_json_delta", "partial_json": ""})))
                for i in range(0, len(raw), n):
                    delta = {"type": "input_json_delta", "partial_json": raw[i : i + n]}
                    events.append(("content_block_delta", _delta(index, delta)))
            else:  # any other block: sent whole in content_block_start
                events.append(("content_block_start", _block_start(index, dict(block))))
            events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
        events.append(
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": message["stop_reason"], "stop_sequence": message.get("stop_sequence")},
                    "usage": {
                        k: usage[k]
                        for k in (
                            "input_tokens",
                            "cache_creation_input_tokens",
                            "cache_read_input_tokens",
                            "output_tokens",
                        )
                        if k in usage
                    },
                },
            )
        )
        events.append(("message_stop", {"type": "message_stop"}))
        return events

    # ------------------------------------------------------------------ batches

    def _batch_json(self, batch: _Batch) -> dict[str, Any]:
        n = len(batch.requests)
        ended = batch.ended_at is not None
        counts = {"processing": 0 if ended else n, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            for result in batch.results:
                counts[result["result"]["type"]] += 1
        return {
            "id": batch.id,
            "type": "message_batch",
            "processing_status": "ended" if ended else ("canceling" if batch.cancel_initiated_at else "in_progress"),
            "request_counts": counts,
            "created_at": batch.created_at,
            "expires_at": batch.expires_at,
            "ended_at": batch.ended_at,
            "cancel_initiated_at": batch.cancel_initiated_at,
            "archived_at": batch.archived_at,
            "results_url": f"{self.base_url}/v1/messages/batches/{batch.id}/results" if ended else None,
        }

    def _create_batch(self, body: Any) -> tuple[int, Any]:
        requests = body.get("requests") if isinstance(body, dict) else None
        if not isinstance(requests, list) or not requests:
            return 400, Error(400, "requests: at least one request is required").body(self._next_id("req"))
        custom_ids = [r.get("custom_id") for r in requests]
        if len(set(custom_ids)) != len(custom_ids) or not all(isinstance(c, str) and c for c in custom_ids):
            return 400, Error(400, "requests: custom_id values must be unique non-empty strings").body(
                self._next_id("req")
            )
        with self._lock:
            processed = self._expiring.pop(0) if self._expiring else None
        results: list[dict[str, Any]] = []
        for i, r in enumerate(requests):
            result: dict[str, Any]
            if processed is not None and i >= processed:
                result = {"type": "expired"}
            else:
                answer = self.answer(dict(r.get("params") or {}))
                if isinstance(answer, Error):
                    result = {"type": "errored", "error": answer.body(self._next_id("req"))}
                else:
                    if answer.get("usage", {}).get("service_tier") == "standard":
                        answer["usage"]["service_tier"] = "batch"
                    result = {"type": "succeeded", "message": answer}
            results.append({"custom_id": r["custom_id"], "result": result})
        batch = _Batch(
            id=self._next_id("msgbatch"),
            requests=requests,
            results=results,
            created_at=_now_iso(),
            expires_at=_now_iso(timedelta(hours=24)),
            polls_left=self.batch_polls,
            expiring=processed is not None,
        )
        with self._lock:
            self._batches[batch.id] = batch
            if batch.polls_left <= 0:
                self._end(batch)
            return 200, self._batch_json(batch)

    def _poll_batch(self, batch: _Batch) -> dict[str, Any]:
        with self._lock:
            if batch.ended_at is None:
                if batch.cancel_initiated_at is not None:
                    batch.canceled = True
                    batch.results = [
                        {"custom_id": r["custom_id"], "result": {"type": "canceled"}} for r in batch.results
                    ]
                    batch.ended_at = _now_iso()
                elif batch.polls_left <= 1:
                    self._end(batch)
                else:
                    batch.polls_left -= 1
            return self._batch_json(batch)

    def _end(self, batch: _Batch) -> None:
        batch.ended_at = _now_iso()
        if batch.expiring:
            batch.expires_at = batch.ended_at

    def batches(self) -> list[dict[str, Any]]:
        """Every batch created, oldest first (without advancing polls)."""
        with self._lock:
            return [self._batch_json(b) for b in self._batches.values()]

    def handle_batches(self, method: str, parts: list[str], query: dict[str, list[str]], body: Any) -> tuple[int, Any]:
        """``parts`` is the path after ``/v1/messages/batches``."""
        rid = self._next_id("req")
        if method == "POST" and not parts:
            return self._create_batch(body)
        if method == "GET" and not parts:
            with self._lock:
                items = [self._batch_json(b) for b in reversed(list(self._batches.values()))]
            limit = int(query.get("limit", ["20"])[0])
            ids = [b["id"] for b in items]
            if "after_id" in query and query["after_id"][0] in ids:
                items = items[ids.index(query["after_id"][0]) + 1 :]
            elif "before_id" in query and query["before_id"][0] in ids:
                items = items[: ids.index(query["before_id"][0])]
            page = items[:limit]
            return 200, {
                "data": page,
                "has_more": len(items) > limit,
                "first_id": page[0]["id"] if page else None,
                "last_id": page[-1]["id"] if page else None,
            }
        batch = self._batches.get(parts[0])
        if batch is None:
            return 404, Error(404, f"message batch {parts[0]!r} not found").body(rid)
        if method == "GET" and len(parts) == 1:
            return 200, self._poll_batch(batch)
        if method == "DELETE" and len(parts) == 1:
            if batch.ended_at is None:
                return 400, Error(400, "batch must be ended before it can be deleted").body(rid)
            with self._lock:
                del self._batches[batch.id]
            return 200, {"id": batch.id, "type": "message_batch_deleted"}
        if method == "POST" and parts[1:] == ["cancel"]:
            with self._lock:
                if batch.ended_at is None and batch.cancel_initiated_at is None:
                    batch.cancel_initiated_at = _now_iso()
                return 200, self._batch_json(batch)
        if method == "GET" and parts[1:] == ["results"]:
            if batch.ended_at is None:
                return 400, Error(400, "batch results are not available until processing ends").body(rid)
            ordered = batch.results if self.batch_result_order == "request" else batch.results[::-1]
            lines = "".join(json.dumps(r) + "\n" for r in ordered)
            return 200, _Raw(lines.encode(), "application/binary")
        return 404, Error(404, f"{method} {'/'.join(parts)} not found").body(rid)


@dataclass
class _Raw:
    data: bytes
    content_type: str


def _block_start(index: int, block: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(index: int, delta: dict[str, Any]) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that went away (its timeout fired during a delayed answer) is not an error of the fake."""
        import sys

        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server_fake: FakeAnthropic
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # headers and body go out as separate writes: without this, Nagle's algorithm holds the body until the
        # client's delayed ACK (about 40 ms per answer on Linux)
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    # --- plumbing

    def _read_body(self) -> Any:
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:
            return raw.decode("utf-8", "replace")

    def _send(self, status: int, payload: Any, headers: Iterable[tuple[str, str]] = ()) -> None:
        if isinstance(payload, _Raw):
            data, ctype = payload.data, payload.content_type
        else:
            data, ctype = json.dumps(payload).encode(), "application/json"
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(data)))
        self.send_header("request-id", self.server_fake._next_id("req"))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)
        self.wfile.flush()

    def _send_error(self, error: Error) -> None:
        self._send(error.status, error.body(self.server_fake._next_id("req")), error.response_headers())

    def _send_sse(self, events: list[tuple[str, dict[str, Any]]]) -> None:
        chunks = [f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events]
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("content-length", str(sum(map(len, chunks))))
        self.send_header("request-id", self.server_fake._next_id("req"))
        self.end_headers()
        for chunk in chunks:
            self.wfile.write(chunk)
            self.wfile.flush()
            if self.server_fake.stream_delay:
                time.sleep(self.server_fake.stream_delay)

    def _handle(self, method: str) -> None:
        fake = self.server_fake
        url = urllib.parse.urlsplit(self.path)
        path = url.path.rstrip("/")
        query = urllib.parse.parse_qs(url.query)
        body = self._read_body() if method in ("POST", "PUT", "PATCH") else None
        record = RecordedRequest(method, path, query, {k.lower(): v for k, v in self.headers.items()}, body)
        with fake._lock:
            fake.requests.append(record)
        try:
            status, payload = self._route(method, path, query, body, record)
        except Exception as exc:  # a bug in a scripted callable: surface it, do not hang the client
            fake.unexpected.append(f"exception answering {method} {path}: {exc!r}")
            error = Error(500, f"FakeAnthropic: {exc!r}", retry_after_ms=None, should_retry=False)
            record.status, record.response = 500, error.body("req_fake")
            self._send_error(error)
            return
        if status == 0:  # already sent (stream)
            return
        record.status, record.response = status, payload
        self._send(status, payload)

    def _route(
        self, method: str, path: str, query: dict[str, list[str]], body: Any, record: RecordedRequest
    ) -> tuple[int, Any]:
        fake = self.server_fake
        if path == "/v1/messages" and method == "POST":
            if not isinstance(body, dict):
                fake.unexpected.append("messages request without a JSON object body")
                return 400, Error(400, "body must be a JSON object").body("req_fake")
            answer, delay = fake._answer(body)
            if delay > 0 and fake._stopping.wait(delay):
                self.close_connection = True  # the server is stopping: drop the connection unanswered
                return 0, None
            if isinstance(answer, Error) and not (answer.mid_stream and body.get("stream")):
                record.status, record.response = answer.status, answer.body("req_fake")
                self._send_error(answer)
                return 0, None
            if body.get("stream"):
                if isinstance(answer, Error):
                    placeholder = fake._message(Turn(text=""), body)
                    events = fake.sse_events(placeholder)[:1]
                    events.append(("error", answer.body("req_fake")))
                else:
                    events = fake.sse_events(answer)
                record.status, record.response = 200, answer if not isinstance(answer, Error) else None
                self._send_sse(events)
                return 0, None
            return 200, answer
        if path == "/v1/messages/count_tokens" and method == "POST":
            return 200, {"input_tokens": _rough_tokens([body.get("system"), body.get("messages"), body.get("tools")])}
        if path.startswith("/v1/messages/batches"):
            rest = [p for p in path[len("/v1/messages/batches") :].split("/") if p]
            return fake.handle_batches(method, rest, query, body)
        fake.unexpected.append(f"unknown endpoint {method} {path}")
        return 404, Error(404, f"{method} {path} not found").body("req_fake")

    def do_POST(self) -> None:
        self._handle("POST")

    def do_GET(self) -> None:
        self._handle("GET")

    def do_DELETE(self) -> None:
        self._handle("DELETE")
