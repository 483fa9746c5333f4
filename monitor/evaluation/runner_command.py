"""``--runner CMD`` (SCORING.md §6.6 item 3): run a command per case × run and receive its spans
over OTLP/HTTP.

For each case × run a receiver listens on ``127.0.0.1`` (ephemeral port) for ``POST /v1/traces``
(and ``/v1/logs``, for instrumentations that put content in GenAI log events; ``/v1/metrics`` is
accepted and dropped), with ``application/x-protobuf`` or ``application/json`` bodies, optionally
``gzip``/``deflate`` encoded, decoded with :mod:`monitor.ingest.decode`. ``CMD`` runs through the
shell with this environment added to ours:

* ``OTEL_EXPORTER_OTLP_ENDPOINT`` = the receiver (and the ``…_TRACES_…`` / ``…_LOGS_…`` endpoint
  variables, so a signal-specific endpoint in the user's environment cannot bypass it);
* ``OTEL_EXPORTER_OTLP_PROTOCOL`` (and the per-signal ones) = ``http/protobuf``;
* ``OTEL_RESOURCE_ATTRIBUTES`` += ``monitor.eval.case_id=…,monitor.eval.run=…`` (percent-encoded);
* the content-capture switches the environment lacks (:data:`CONTENT_CAPTURE_ENV`);
* ``MONITOR_EVAL_CASE`` = the case as JSON (:func:`~monitor.evaluation.runner_common.case_payload`).

``CMD`` must emit one agent run per turn, in order, and flush its spans before exiting (the OTel
SDK's tracer provider does so at interpreter exit). A root span carrying ``monitor.eval.turn``
places its run explicitly; otherwise runs are taken in start order. Agent-rooted runs are
preferred over bare model-call subtrees. Failures: non-zero exit → ``exit_status``; not done within
``timeout_s`` → ``timeout`` (the command's process group is killed); fewer runs than turns →
``missing_run``; more → ``unexpected_runs``; undecodable OTLP → ``invalid_spans``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import signal
import subprocess
import threading
import urllib.parse
import zlib
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any, Final

from monitor.evaluation.runner_common import (
    RunnerFailed,
    case_payload,
    content_env,
    prefer_agent_runs,
    rebuild,
    with_eval_attributes,
)
from monitor.ingest.decode import DecodeError, decode_logs, decode_traces
from monitor.trajectory.semconv import Monitor
from monitor.trajectory.spans import LogEvent, SpanRecord

if TYPE_CHECKING:
    from monitor.rules.datasets.model import Case
    from monitor.trajectory.model import Run

MAX_BODY_BYTES: Final = 64 * 1024 * 1024
STDERR_TAIL_CHARS: Final = 2000
_CONTENT_TYPES: Final = {"application/x-protobuf": "otlp_proto", "application/json": "otlp_json"}


class OtlpReceiver:
    """A minimal OTLP/HTTP traces (and logs) receiver on ``127.0.0.1``; a context manager.

    Accepted spans and log events accumulate in :meth:`snapshot`; requests that fail to decode are
    answered ``400`` and their problem is kept in ``errors``. Successful answers are the empty
    ``Export…ServiceResponse`` in the request's encoding.
    """

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._lock = threading.Lock()
        self._spans: list[SpanRecord] = []
        self._logs: list[LogEvent] = []
        self._errors: list[str] = []
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> OtlpReceiver:
        receiver = self

        class Handler(_Handler):
            owner = receiver

        self._server = ThreadingHTTPServer((self.host, 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="monitor-eval-otlp", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> OtlpReceiver:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def endpoint(self) -> str:
        """``http://127.0.0.1:<port>`` (the exporters append ``/v1/traces``)."""
        if self._server is None:
            raise RuntimeError("receiver not started")
        return f"http://{self.host}:{self._server.server_address[1]}"

    def snapshot(self) -> tuple[list[SpanRecord], list[LogEvent], list[str]]:
        """(spans, log events, decode errors) received so far."""
        with self._lock:
            return list(self._spans), list(self._logs), list(self._errors)

    def accept(self, path: str, body: bytes, encoding: str) -> None:
        """Decode one export request body; raises :class:`DecodeError` (kept in ``errors``)."""
        try:
            if path == "/v1/traces":
                spans = decode_traces(body, encoding)
                with self._lock:
                    self._spans.extend(spans)
            elif path == "/v1/logs":
                events = decode_logs(body, encoding)
                with self._lock:
                    self._logs.extend(events)
        except DecodeError as exc:
            if exc.reason in ("empty", "no_spans"):
                return  # an empty export is valid OTLP
            with self._lock:
                self._errors.append(f"{path}: {exc}")
            raise


class _Handler(BaseHTTPRequestHandler):
    owner: OtlpReceiver
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _reply(self, status: int, body: bytes, content_type: str) -> None:
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _read_body(self) -> bytes:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            chunks: list[bytes] = []
            total = 0
            while True:
                size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    break
                total += size
                if total > MAX_BODY_BYTES:
                    raise ValueError("request body too large")
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            raw = b"".join(chunks)
        else:
            length = int(self.headers.get("content-length") or 0)
            if length > MAX_BODY_BYTES:
                raise ValueError("request body too large")
            raw = self.rfile.read(length) if length else b""
        coding = self.headers.get("content-encoding", "").lower().strip()
        if coding == "gzip":
            return gzip.decompress(raw)
        if coding == "deflate":
            return zlib.decompress(raw)
        if coding not in ("", "identity"):
            raise ValueError(f"unsupported content-encoding {coding!r}")
        return raw

    def do_POST(self) -> None:
        path = urllib.parse.urlsplit(self.path).path.rstrip("/")
        ctype = self.headers.get("content-type", "").split(";", 1)[0].strip().lower()
        encoding = _CONTENT_TYPES.get(ctype)
        try:
            body = self._read_body()
        except (ValueError, OSError, EOFError, zlib.error) as exc:
            self._reply(400, json.dumps({"message": str(exc)}).encode(), "application/json")
            return
        if path not in ("/v1/traces", "/v1/logs", "/v1/metrics"):
            self._reply(404, b"", "text/plain")
            return
        if encoding is None:
            self._reply(415, f"unsupported content-type {ctype!r}".encode(), "text/plain")
            return
        try:
            self.owner.accept(path, body, encoding)
        except DecodeError as exc:
            self._reply(400, json.dumps({"message": str(exc)}).encode(), "application/json")
            return
        if encoding == "otlp_json":
            self._reply(200, b"{}", "application/json")
        else:
            self._reply(200, b"", "application/x-protobuf")


# --------------------------------------------------------------------------- the runner


def _resource_attributes(existing: str | None, case_id: str, run_no: int) -> str:
    ours = ",".join(
        f"{key}={urllib.parse.quote(value, safe='')}"
        for key, value in ((Monitor.CASE_ID, case_id), (Monitor.RUN, str(run_no)))
    )
    return f"{existing},{ours}" if existing and existing.strip() else ours


def command_env(endpoint: str, case: Case, run_no: int, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The full environment of a runner command (see the module docstring)."""
    env = dict(os.environ if environ is None else environ)
    env.update(content_env(env))
    env.update(
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{endpoint}/v1/traces",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{endpoint}/v1/logs",
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL": "http/protobuf",
            "OTEL_RESOURCE_ATTRIBUTES": _resource_attributes(env.get("OTEL_RESOURCE_ATTRIBUTES"), case.id, run_no),
            "MONITOR_EVAL_CASE": json.dumps(case_payload(case, run_no), ensure_ascii=False),
        }
    )
    return env


def _tail(data: bytes) -> str:
    text = data.decode("utf-8", "replace").strip()
    return text[-STDERR_TAIL_CHARS:]


class CommandRunner:
    """See the module docstring. Build it with :func:`command_runner`."""

    def __init__(self, cmd: str, timeout_s: float) -> None:
        self.name = f"command:{cmd}"
        self.cmd = cmd
        self.timeout_s = timeout_s

    def run(self, case: Case, run_no: int) -> list[Run]:
        where = f"case {case.id!r} run {run_no}"
        with OtlpReceiver() as receiver:
            env = command_env(receiver.endpoint, case, run_no)
            proc = subprocess.Popen(
                self.cmd,
                shell=True,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # its own process group: a timeout kills the command's children too
            )
            try:
                _, stderr = proc.communicate(timeout=self.timeout_s)
            except subprocess.TimeoutExpired:
                _kill_group(proc)
                _, stderr = proc.communicate()
                raise RunnerFailed(
                    "timeout", f"{where}: {self.cmd!r} did not finish within {self.timeout_s:g} s"
                ) from None
            if proc.returncode != 0:
                tail = _tail(stderr)
                raise RunnerFailed(
                    "exit_status",
                    f"{where}: {self.cmd!r} exited with status {proc.returncode}" + (f": {tail}" if tail else ""),
                )
            spans, logs, errors = receiver.snapshot()
        if errors:
            raise RunnerFailed("invalid_spans", f"{where}: {errors[0]}")
        runs = prefer_agent_runs(rebuild(spans, logs), spans)
        return [
            with_eval_attributes(run, case.id, turn_no, run_no)
            for turn_no, run in enumerate(assign_turns(runs, len(case.turns), where))
        ]


def assign_turns(runs: Sequence[Run], turns: int, where: str) -> list[Run]:
    """One run per turn: by ``monitor.eval.turn`` when every run carries it, else in start order."""
    if len(runs) < turns:
        raise RunnerFailed("missing_run", f"{where}: {turns} turn(s) but {len(runs)} agent run(s) received")
    if len(runs) > turns:
        raise RunnerFailed("unexpected_runs", f"{where}: {turns} turn(s) but {len(runs)} agent runs received")
    marks = [run.attribute(Monitor.TURN) for run in runs]
    if all(m is not None for m in marks):
        by_turn: dict[int, Run] = {}
        for mark, run in zip(marks, runs, strict=True):
            try:
                by_turn[int(str(mark))] = run
            except ValueError:
                raise RunnerFailed("invalid_spans", f"{where}: {Monitor.TURN}={mark!r} is not an integer") from None
        if sorted(by_turn) != list(range(turns)):
            raise RunnerFailed(
                "missing_run", f"{where}: {Monitor.TURN} values {sorted(by_turn)} do not cover 0..{turns - 1}"
            )
        return [by_turn[i] for i in range(turns)]
    return list(runs)


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process group the command was started in (by its id)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def command_runner(cmd: str, *, timeout_s: float = 300.0) -> CommandRunner:
    """A runner that runs ``cmd`` through the shell once per case × run (see the module docstring).

    Raises :class:`RunnerFailed` (``config``) for an empty command or a non-positive timeout.
    """
    if not cmd.strip():
        raise RunnerFailed("config", "the runner command is empty")
    if timeout_s <= 0:
        raise RunnerFailed("config", f"timeout_s must be positive, got {timeout_s!r}")
    return CommandRunner(cmd, timeout_s)
