"""A real OTLP logs receiver for tests: gRPC (``LogsService/Export``) and HTTP (``POST /v1/logs``).

Both decode each request into an ``ExportLogsServiceRequest`` and keep it; :meth:`OtlpReceiver.records`
flattens what arrived into :class:`ReceivedRecord` values (resource and scope attributes included) and
:meth:`OtlpReceiver.wait_for` polls until enough records arrived. ``status`` makes the receiver refuse
requests (an HTTP status code, or a gRPC status code for the gRPC server) to test failures.

    with OtlpReceiver.grpc() as rx:          # or OtlpReceiver.http()
        ... send to rx.endpoint ...
        records = rx.wait_for(3)
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

__all__ = ["OtlpReceiver", "ReceivedRecord", "any_value"]


def any_value(value: AnyValue) -> Any:
    """An OTLP ``AnyValue`` as a Python value."""
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "array_value":
        return [any_value(v) for v in value.array_value.values]
    if kind == "kvlist_value":
        return {kv.key: any_value(kv.value) for kv in value.kvlist_value.values}
    return getattr(value, kind)


@dataclass(frozen=True)
class ReceivedRecord:
    event_name: str
    attributes: dict[str, Any]
    trace_id: str
    span_id: str
    time_unix_nano: int
    observed_time_unix_nano: int
    severity_number: int
    resource: dict[str, Any]
    scope_name: str
    scope_version: str


@dataclass
class _Store:
    requests: list[logs_service_pb2.ExportLogsServiceRequest] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, request: logs_service_pb2.ExportLogsServiceRequest, headers: dict[str, str]) -> None:
        with self.lock:
            self.requests.append(request)
            self.headers.append(headers)


class OtlpReceiver:
    """One running receiver; use :meth:`grpc` or :meth:`http`, as a context manager."""

    def __init__(self, protocol: str) -> None:
        self.protocol = protocol
        self.status: int | grpc.StatusCode | None = None
        """When set, requests are refused with this status (and not kept)."""
        self.refused = 0
        self._store = _Store()
        self._grpc_server: grpc.Server | None = None
        self._http_server: ThreadingHTTPServer | None = None
        self.port = 0

    @classmethod
    def grpc(cls) -> OtlpReceiver:
        return cls("grpc").start()

    @classmethod
    def http(cls) -> OtlpReceiver:
        return cls("http/protobuf").start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> OtlpReceiver:
        if self.protocol == "grpc":
            self._start_grpc()
        else:
            self._start_http()
        return self

    def _start_grpc(self) -> None:
        receiver = self

        class Servicer(logs_service_pb2_grpc.LogsServiceServicer):  # type: ignore[misc]
            def Export(
                self, request: logs_service_pb2.ExportLogsServiceRequest, context: grpc.ServicerContext
            ) -> logs_service_pb2.ExportLogsServiceResponse:
                status = receiver.status
                if isinstance(status, grpc.StatusCode):
                    receiver.refused += 1
                    context.abort(status, "refused by the test receiver")
                receiver._store.add(request, {k: v for k, v in context.invocation_metadata()})
                return logs_service_pb2.ExportLogsServiceResponse()

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Servicer(), server)
        self.port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        self._grpc_server = server

    def _start_http(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status = receiver.status
                if self.path != "/v1/logs":
                    self.send_response(404)
                elif self.headers.get("Content-Type") != "application/x-protobuf":
                    self.send_response(415)
                elif isinstance(status, int):
                    receiver.refused += 1
                    self.send_response(status)
                else:
                    request = logs_service_pb2.ExportLogsServiceRequest()
                    request.ParseFromString(body)
                    receiver._store.add(request, {k.lower(): v for k, v in self.headers.items()})
                    payload = logs_service_pb2.ExportLogsServiceResponse().SerializeToString()
                    self.send_response(200)
                    self.send_header("Content-Type", "application/x-protobuf")
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        self._http_server = server

    def stop(self) -> None:
        if self._grpc_server is not None:
            self._grpc_server.stop(grace=None).wait(2)
            self._grpc_server = None
        if self._http_server is not None:
            self._http_server.shutdown()
            self._http_server.server_close()
            self._http_server = None

    def __enter__(self) -> OtlpReceiver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------------------ what arrived

    @property
    def requests(self) -> list[logs_service_pb2.ExportLogsServiceRequest]:
        with self._store.lock:
            return list(self._store.requests)

    @property
    def headers(self) -> list[dict[str, str]]:
        with self._store.lock:
            return list(self._store.headers)

    def records(self) -> list[ReceivedRecord]:
        return list(self._iter_records())

    def _iter_records(self) -> Iterator[ReceivedRecord]:
        for request in self.requests:
            for resource_logs in request.resource_logs:
                resource = {kv.key: any_value(kv.value) for kv in resource_logs.resource.attributes}
                for scope_logs in resource_logs.scope_logs:
                    for rec in scope_logs.log_records:
                        yield ReceivedRecord(
                            event_name=rec.event_name,
                            attributes={kv.key: any_value(kv.value) for kv in rec.attributes},
                            trace_id=rec.trace_id.hex(),
                            span_id=rec.span_id.hex(),
                            time_unix_nano=rec.time_unix_nano,
                            observed_time_unix_nano=rec.observed_time_unix_nano,
                            severity_number=rec.severity_number,
                            resource=resource,
                            scope_name=scope_logs.scope.name,
                            scope_version=scope_logs.scope.version,
                        )

    def wait_for(self, count: int, timeout_s: float = 10.0) -> list[ReceivedRecord]:
        """The records once at least ``count`` arrived; fails the test after ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            records = self.records()
            if len(records) >= count or time.monotonic() > deadline:
                assert len(records) >= count, f"{len(records)} of {count} OTLP records arrived in {timeout_s}s"
                return records
            time.sleep(0.02)
