"""The daemon's HTTP server: ``/metrics``, ``/healthz`` and ``/readyz``.

Built on the standard library's :class:`~http.server.ThreadingHTTPServer` rather than
``prometheus_client.make_wsgi_app`` + ``wsgiref``: we serve three routes with their own status codes
and JSON bodies, and the WSGI app answers every path with the metrics; a plain handler keeps the
routing explicit, has no extra layer, and ``shutdown()`` + ``server_close()`` stop it cleanly. The
metrics body comes from ``prometheus_client``'s own content negotiation (:func:`choose_encoder`), so

* ``Accept: application/openmetrics-text`` (what Prometheus sends by default) gets the OpenMetrics
  format, **with exemplars** (the trace ids behind the quality counters);
* any other client gets the classic text format 0.0.4 (no exemplars);
* ``Accept-Encoding: gzip`` gets a gzip body; ``?name[]=…`` restricts the output to those metrics.

Routes (GET and HEAD; other methods get 405):

* ``/metrics`` — the registry of the :class:`~monitor.export.metrics.Metrics` catalogue;
* ``/healthz`` — 200 while :class:`HealthState` says alive, else 503 (liveness: restart me);
* ``/readyz``  — 200 only when alive, at least one partition is assigned and the total consumer lag is
  at most ``HttpSettings.ready_max_lag``; else 503. Both return a JSON body
  ``{"ready": bool, "reason": str, "partitions": int, "lag": int, "max_lag": int}`` where ``reason``
  is ``ok``, ``not_alive``, ``no_partitions_assigned`` or ``lag_too_high``.

Request threads are daemon threads; request logs go to the ``monitor.export.http`` logger at DEBUG.
"""

from __future__ import annotations

import gzip
import json
import logging
import socket
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from prometheus_client.exposition import choose_encoder, gzip_accepted

from monitor.export.metrics import Metrics
from monitor.settings import HttpSettings

__all__ = ["HealthState", "HttpServer", "Readiness"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Readiness:
    """One answer of :meth:`HealthState.readiness`."""

    ready: bool
    reason: str
    partitions: int
    lag: int
    max_lag: int

    def to_json(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "reason": self.reason,
            "partitions": self.partitions,
            "lag": self.lag,
            "max_lag": self.max_lag,
        }


class HealthState:
    """What ``/healthz`` and ``/readyz`` read; the run loop writes it. Thread-safe.

    Starts alive (the process is up) with no partitions assigned and lag 0, so the daemon is live but
    not ready until the consumer reports an assignment.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._alive = True
        self._partitions = 0
        self._lag = 0

    def set_alive(self, on: bool) -> None:
        """False once the run loop has died or is wedged (``/healthz`` then fails: restart the pod)."""
        with self._lock:
            self._alive = on

    def set_assigned(self, partitions: int) -> None:
        """The number of partitions currently assigned to this consumer (0 after a revocation)."""
        with self._lock:
            self._partitions = max(0, partitions)

    def set_lag(self, total: int) -> None:
        """The total consumer lag in records over the assigned partitions."""
        with self._lock:
            self._lag = max(0, total)

    @property
    def alive(self) -> bool:
        with self._lock:
            return self._alive

    def readiness(self, max_lag: int) -> Readiness:
        """Ready iff alive, ≥ 1 partition assigned and lag ≤ ``max_lag``; the first failed check names the reason."""
        with self._lock:
            alive, parts, lag = self._alive, self._partitions, self._lag
        if not alive:
            reason = "not_alive"
        elif parts <= 0:
            reason = "no_partitions_assigned"
        elif lag > max_lag:
            reason = "lag_too_high"
        else:
            reason = "ok"
        return Readiness(reason == "ok", reason, parts, lag, max_lag)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], metrics: Metrics, health: HealthState, max_lag: int) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.metrics = metrics
        self.health = health
        self.max_lag = max_lag
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "agent-tool-monitor"

    def do_GET(self) -> None:
        self._route(head=False)

    def do_HEAD(self) -> None:
        self._route(head=True)

    def _not_allowed(self) -> None:
        self._send(405, "text/plain; charset=utf-8", b"method not allowed\n", head=False, extra={"Allow": "GET, HEAD"})

    do_POST = do_PUT = do_DELETE = do_PATCH = _not_allowed

    def _route(self, head: bool) -> None:
        url = urlsplit(self.path)
        try:
            if url.path == "/metrics":
                self._metrics(url.query, head)
            elif url.path == "/healthz":
                alive = self.server.health.alive
                body = {"alive": alive}
                self._json(200 if alive else 503, body, head)
            elif url.path == "/readyz":
                r = self.server.health.readiness(self.server.max_lag)
                self._json(200 if r.ready else 503, r.to_json(), head)
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found\n", head)
        except Exception:  # a broken collector must not kill the server thread silently
            log.exception("error serving %s", url.path)
            self._send(500, "text/plain; charset=utf-8", b"internal error\n", head)

    def _metrics(self, query: str, head: bool) -> None:
        encoder, content_type = choose_encoder(self.headers.get("Accept", ""))
        registry = self.server.metrics.registry
        names = parse_qs(query).get("name[]")
        body = encoder(registry.restricted_registry(names) if names else registry)
        extra: dict[str, str] = {}
        if gzip_accepted(self.headers.get("Accept-Encoding", "")):
            body = gzip.compress(body)
            extra["Content-Encoding"] = "gzip"
        self._send(200, content_type, body, head, extra)

    def _json(self, status: int, obj: dict[str, Any], head: bool) -> None:
        self._send(status, "application/json", json.dumps(obj).encode() + b"\n", head)

    def _send(self, status: int, ctype: str, body: bytes, head: bool, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.address_string(), *args)


class HttpServer:
    """Serves ``/metrics``, ``/healthz`` and ``/readyz`` on ``settings.host:settings.port`` (port 0: a free
    port; read :attr:`port` after :meth:`start`) from a background thread.

    :meth:`start` binds and returns at once (raises ``OSError`` if the address is taken, and
    ``RuntimeError`` if already started); :meth:`stop` stops accepting, closes the socket and joins the
    thread (idempotent; in-flight requests finish on their daemon threads).
    """

    def __init__(self, settings: HttpSettings, metrics: Metrics, health: HealthState) -> None:
        self.settings = settings
        self.metrics = metrics
        self.health = health
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._server is not None:
            raise RuntimeError("HttpServer already started")
        server = _Server(
            (self.settings.host, self.settings.port), self.metrics, self.health, self.settings.ready_max_lag
        )
        thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.1}, name="monitor-http", daemon=True
        )
        thread.start()
        self._server, self._thread = server, thread
        log.info("HTTP server on %s:%d (/metrics, /healthz, /readyz)", self.settings.host, self.port)

    @property
    def port(self) -> int:
        """The bound port (the ephemeral one when configured with 0). Raises if not started."""
        if self._server is None:
            raise RuntimeError("HttpServer not started")
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        """``http://host:port`` of the server (loopback when bound to all addresses)."""
        host = self.settings.host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{self.port}"

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
