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
* ``/readyz``  — 200 only when alive, the results store has not been unavailable for longer than
  ``HttpSettings.ready_max_store_outage_s``, at least one partition is assigned and the total consumer
  lag is at most ``HttpSettings.ready_max_lag``; else 503. The body is one line of JSON
  ``{"ready": bool, "reason": str, "partitions": int, "lag": int, "max_lag": int}`` where ``reason``
  is ``ok``, ``not_alive``, ``store_unavailable``, ``no_partitions_assigned`` or ``lag_too_high``
  (the first failed check, in that order).

Connections (a scraper, a kubelet probe or anybody who can reach the port):

* at most ``HttpSettings.max_connections`` are served at once, one thread each. When all slots are
  taken, the connection that has been **idle** longest (waiting for its next request line) is closed
  to make room; when every slot is mid-request, further connections wait in the listen backlog.
* a connection is closed when one read or write waits longer than ``HttpSettings.request_timeout_s``,
  and also when one phase (waiting for a request, or reading and answering it) lasts longer than that
  in total, so a client trickling a byte at a time cannot hold a slot.
* :meth:`HttpServer.stop` closes idle connections at once, gives requests in progress up to a second
  to finish, then closes the rest and joins every connection thread.

Request logs go to the ``monitor.export.http`` logger at DEBUG; client disconnects are not errors.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import logging
import socket
import sys
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Final
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

    Starts alive (the process is up) with no partitions assigned, lag 0 and the store available, so the
    daemon is live but not ready until the consumer reports an assignment.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._alive = True
        self._partitions = 0
        self._lag = 0
        self._store_down_since: float | None = None

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

    def set_store_available(self, available: bool, now: float | None = None) -> None:
        """The outcome of the latest attempt to use the results store, at ``now`` (monotonic seconds,
        default :func:`time.monotonic`).

        The outage starts at the first unavailable report after an available one (later failures do
        not move it) and ends at the next available report. ``/readyz`` fails once the outage is
        longer than its allowance (see :meth:`readiness`); ``/healthz`` is not affected.
        """
        with self._lock:
            if available:
                self._store_down_since = None
            elif self._store_down_since is None:
                self._store_down_since = time.monotonic() if now is None else now

    @property
    def alive(self) -> bool:
        with self._lock:
            return self._alive

    def readiness(
        self, max_lag: int, *, max_store_outage_s: float = float("inf"), now: float | None = None
    ) -> Readiness:
        """Ready iff alive, the store unavailable for at most ``max_store_outage_s`` seconds at ``now``
        (monotonic, default :func:`time.monotonic`), ≥ 1 partition assigned and lag ≤ ``max_lag``; the
        first failed check, in that order, names the reason."""
        with self._lock:
            alive, parts, lag, down_since = self._alive, self._partitions, self._lag, self._store_down_since
        if down_since is not None and now is None:
            now = time.monotonic()
        if not alive:
            reason = "not_alive"
        elif down_since is not None and now is not None and now - down_since > max_store_outage_s:
            reason = "store_unavailable"
        elif parts <= 0:
            reason = "no_partitions_assigned"
        elif lag > max_lag:
            reason = "lag_too_high"
        else:
            reason = "ok"
        return Readiness(reason == "ok", reason, parts, lag, max_lag)


_IDLE: Final = "idle"
"""Connection phase: waiting for the next request line (nothing of a request read yet)."""
_BUSY: Final = "busy"
"""Connection phase: reading the request's headers or writing its answer."""
_STOP_GRACE_S: Final = 1.0
"""On stop, how long requests in progress may take to finish before their connections are closed."""
_POLL_S: Final = 0.05
"""How often the accept loop checks for closing, overdue connections and free slots."""


@dataclass(slots=True)
class _Connection:
    """One accepted connection and the phase it is in (guarded by ``_Server._lock``)."""

    sock: socket.socket
    thread: threading.Thread
    phase: str
    since: float

    def close_now(self) -> None:
        """Wake the connection's thread: its blocked read sees EOF and its write fails."""
        with contextlib.suppress(OSError):  # already closed by its own thread
            self.sock.shutdown(socket.SHUT_RDWR)


class _Server(ThreadingHTTPServer):
    """A threading HTTP server with a slot per connection, a per-phase deadline and a prompt close.

    ``process_request`` runs on the accept thread: it waits for a free slot (closing the longest-idle
    connection when none is free), then serves the connection on its own daemon thread.
    ``service_actions`` (every poll of the accept loop) closes connections past their deadline.
    """

    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, address: tuple[str, int], metrics: Metrics, health: HealthState, settings: HttpSettings) -> None:
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        self.metrics = metrics
        self.health = health
        self.max_lag = settings.ready_max_lag
        self.max_store_outage_s = settings.ready_max_store_outage_s
        self.request_timeout_s = settings.request_timeout_s
        self._slots = threading.BoundedSemaphore(settings.max_connections)
        self._lock = threading.Lock()
        self._connections: dict[socket.socket, _Connection] = {}
        self.closing = threading.Event()
        super().__init__(address, _Handler)

    # ---------------------------------------------------------------- accept side

    def process_request(self, request: Any, client_address: Any) -> None:
        while not self._slots.acquire(timeout=_POLL_S):
            if self.closing.is_set():
                self.shutdown_request(request)
                return
            self._close_longest_idle()
            self.service_actions()
        if self.closing.is_set():
            self._slots.release()
            self.shutdown_request(request)
            return
        thread = threading.Thread(
            target=self._serve_connection, args=(request, client_address), name="monitor-http-conn", daemon=True
        )
        with self._lock:
            self._connections[request] = _Connection(request, thread, _IDLE, time.monotonic())
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            self.shutdown_request(request)
            with self._lock:
                self._connections.pop(request, None)
            self._slots.release()

    def service_actions(self) -> None:
        """Close every connection whose current phase has lasted longer than the request timeout."""
        deadline = time.monotonic() - self.request_timeout_s
        with self._lock:
            overdue = [c for c in self._connections.values() if c.since < deadline]
        for conn in overdue:
            log.debug("closing an HTTP connection after %.1f s in phase %s", self.request_timeout_s, conn.phase)
            conn.close_now()

    def _close_longest_idle(self) -> None:
        with self._lock:
            idle = [c for c in self._connections.values() if c.phase == _IDLE]
        if idle:
            min(idle, key=lambda c: c.since).close_now()

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Called from an ``except`` block. A client that went away (or was closed for its timeout) is
        routine, logged at DEBUG; anything else is logged as an error with its traceback."""
        if isinstance(sys.exc_info()[1], OSError):
            log.debug("HTTP connection from %s ended: %s", client_address, sys.exc_info()[1])
        else:
            log.exception("error on the HTTP connection from %s", client_address)

    # ---------------------------------------------------------------- handler side

    def mark(self, sock: socket.socket, phase: str) -> None:
        """Called by the handler when its connection enters ``phase`` (restarts the phase deadline)."""
        with self._lock:
            conn = self._connections.get(sock)
            if conn is not None:
                conn.phase, conn.since = phase, time.monotonic()

    # ---------------------------------------------------------------- stop

    def close_connections(self) -> None:
        """Refuse new connections, close idle ones now, let requests in progress finish for up to
        :data:`_STOP_GRACE_S`, then close the rest and join every connection thread."""
        self.closing.set()
        deadline = time.monotonic() + _STOP_GRACE_S
        while True:
            with self._lock:
                conns = list(self._connections.values())
            if not conns:
                return
            late = time.monotonic() >= deadline
            for conn in conns:
                if late or conn.phase == _IDLE:
                    conn.close_now()
            for conn in conns:
                conn.thread.join(timeout=_POLL_S)
            if late and time.monotonic() >= deadline + _STOP_GRACE_S:
                log.warning("%d HTTP connection threads did not end on stop", len(conns))
                return


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    server_version = "agent-tool-monitor"

    def setup(self) -> None:
        super().setup()
        self.connection.settimeout(self.server.request_timeout_s)  # every read and write on the socket

    def handle_one_request(self) -> None:
        self.server.mark(self.connection, _IDLE)
        super().handle_one_request()
        if self.server.closing.is_set():
            self.close_connection = True

    def parse_request(self) -> bool:
        self.server.mark(self.connection, _BUSY)  # the request line arrived
        return super().parse_request()

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
                r = self.server.health.readiness(self.server.max_lag, max_store_outage_s=self.server.max_store_outage_s)
                self._json(200 if r.ready else 503, r.to_json(), head)
            else:
                self._send(404, "text/plain; charset=utf-8", b"not found\n", head)
        except OSError:  # the client went away or was closed for its timeout: nothing to answer
            self.close_connection = True
            raise
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
    ``RuntimeError`` if already started); :meth:`stop` stops accepting, closes the connections (requests
    in progress get up to a second), closes the socket and joins the threads. It is idempotent and
    returns within about two seconds whatever the clients do.
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
        server = _Server((self.settings.host, self.settings.port), self.metrics, self.health, self.settings)
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
        server.closing.set()  # the accept loop stops waiting for a slot
        server.shutdown()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5)
        server.close_connections()
        self._server = self._thread = None

    def __enter__(self) -> HttpServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
