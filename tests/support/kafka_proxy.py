"""A fault-injecting Kafka protocol proxy for tests, in front of one real broker (Tansu).

Tansu auto-creates every topic, has no message size limit and never rejects a produce, so the
broker-side failures of Apache Kafka / MSK / Confluent Cloud cannot be reproduced with it alone.
:class:`KafkaFaultProxy` sits between the clients and the broker, relays every frame it does not
touch byte for byte, and injects those failures:

* :meth:`KafkaFaultProxy.reject_produce` answers Produce partitions of a topic itself with an error code
  (``MESSAGE_TOO_LARGE``, ``NOT_ENOUGH_REPLICAS``, ``TOPIC_AUTHORIZATION_FAILED``, ``INVALID_RECORD``…),
  optionally only for record batches larger than ``min_record_bytes`` and only ``times`` times;
* :meth:`KafkaFaultProxy.disable_auto_create` emulates ``auto.create.topics.enable=false`` for some
  topic names.

Wiring: the broker must advertise the proxy's address, so that clients bootstrapping through the
proxy keep talking through it (no response rewriting of host/port). :func:`proxied_tansu` does the
dance (bind the proxy, start Tansu advertising the proxy port, point the proxy at Tansu)::

    with proxied_tansu(tmp_path) as (broker, proxy):
        proxy.reject_produce("spans.dlq", 87)  # INVALID_RECORD
        producer = KafkaProducer(bootstrap_servers=proxy.bootstrap)
        producer.send("spans.dlq", b"x").get(5)  # raises kafka.errors.InvalidRecordError

Protocol work (request/response headers, Produce and Metadata bodies at the negotiated version) is
done with kafka-python's own protocol classes. Kafka clients expect responses in request order on a
connection, so a response the proxy makes up is queued behind the broker's responses still owed for
earlier requests on that connection. A Produce request mixing rejected and accepted partitions is
split: the accepted part is re-encoded and forwarded, and the broker's ProduceResponse is decoded,
completed with the injected partition errors and re-encoded (a real broker also answers per partition).

Everything runs on one asyncio loop in one daemon thread; connections are capped (``max_connections``).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
import socket
import subprocess
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Final

from kafka.protocol.api_header import RequestHeader, ResponseHeader
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse
from kafka.protocol.schemas.fields.codecs import Int32

from monitor.demo.broker import TansuBroker, tansu_binary

log = logging.getLogger(__name__)

PRODUCE_API_KEY: Final[int] = int(ProduceRequest.API_KEY)
METADATA_API_KEY: Final[int] = int(MetadataRequest.API_KEY)
#: Metadata v4 is the first version with ``allow_auto_topic_creation``.
_METADATA_AUTO_CREATE_MIN_VERSION: Final[int] = 4
#: Version of the proxy's own side Metadata requests (existence checks): old enough for every broker
#: that speaks ``allow_auto_topic_creation``, not flexible.
_SIDE_METADATA_VERSION: Final[int] = 4
UNKNOWN_TOPIC_OR_PARTITION: Final[int] = 3

_TopicData = Any  # ProduceRequest.TopicProduceData (kafka-python ships no type information)
_PartitionResponse = Any  # ProduceResponse.TopicProduceResponse.PartitionProduceResponse


@dataclass
class _RejectRule:
    topic: str
    error_code: int
    min_record_bytes: int
    remaining: int | None  # None: until cleared


@dataclass(frozen=True)
class ProxyStats:
    """A snapshot of what the proxy saw, for assertions.

    ``produce_requests[topic]``: Produce requests carrying data for ``topic``;
    ``produce_rejected[topic]``: of those, how many had at least one partition of ``topic`` answered by
    the proxy with an injected error (``reject_produce`` or a missing ``disable_auto_create`` topic);
    ``auto_create_blocked[topic]``: Metadata requests naming ``topic`` forwarded with
    ``allow_auto_topic_creation=false``; ``connections``: client connections accepted;
    ``decode_errors``: requests the proxy could not decode (forwarded untouched).
    """

    produce_requests: dict[str, int] = field(default_factory=dict)
    produce_rejected: dict[str, int] = field(default_factory=dict)
    auto_create_blocked: dict[str, int] = field(default_factory=dict)
    connections: int = 0
    decode_errors: int = 0


class _Slot:
    """One response owed to the client, in request order."""

    __slots__ = ("correlation_id", "frame", "merge", "version")

    def __init__(
        self, correlation_id: int, version: int, frame: bytes | None = None, merge: list[_TopicData] | None = None
    ) -> None:
        self.correlation_id = correlation_id
        self.version = version
        self.frame = frame  # None: still owed by the broker
        self.merge = merge  # injected topic responses to add to the broker's ProduceResponse


class _Connection:
    """Per client connection: responses owed in request order, and those the broker still owes."""

    def __init__(self, writer: asyncio.StreamWriter) -> None:
        self.writer = writer
        self.pending: deque[_Slot] = deque()
        self.from_broker: deque[_Slot] = deque()

    def owe_broker(self, slot: _Slot) -> None:
        self.pending.append(slot)
        self.from_broker.append(slot)

    def owe_synthetic(self, slot: _Slot) -> None:
        self.pending.append(slot)
        self.flush()

    def flush(self) -> None:
        while self.pending and self.pending[0].frame is not None:
            frame = self.pending.popleft().frame
            assert frame is not None
            self.writer.write(frame)


class _ProtocolError(Exception):
    pass


async def _read_frame(reader: asyncio.StreamReader, max_frame_bytes: int) -> bytes | None:
    """One size-prefixed frame, prefix included; None on a clean EOF between frames."""
    try:
        prefix = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            return None
        raise
    size = int(Int32.decode(io.BytesIO(prefix)))
    if not 0 <= size <= max_frame_bytes:
        raise _ProtocolError(f"frame size {size} out of range")
    return prefix + await reader.readexactly(size)


def _split_host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ValueError(f"expected host:port, got {address!r}")
    return host, int(port)


def _partition_error(index: int, error_code: int, topic: str) -> _PartitionResponse:
    return ProduceResponse.TopicProduceResponse.PartitionProduceResponse(
        index=index,
        error_code=error_code,
        base_offset=-1,
        log_append_time_ms=-1,
        log_start_offset=-1,
        record_errors=[],
        error_message=f"injected by KafkaFaultProxy for topic {topic}",
    )


class KafkaFaultProxy:
    """A TCP proxy speaking the Kafka protocol in front of one real broker, injecting broker-side faults.

    ``upstream`` (``"host:port"`` of the real broker) may be given later with :meth:`connect_upstream`:
    the broker has to advertise the proxy's port, which is known only after :meth:`start`. Client
    connections accepted before that wait for it (up to ``upstream_wait_s``).

    Faults are thread-safe and apply to requests that arrive after the call; :meth:`clear` removes them.
    """

    def __init__(
        self,
        upstream: str | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        max_connections: int = 64,
        max_frame_bytes: int = 256 * 1024 * 1024,
        upstream_wait_s: float = 10.0,
    ) -> None:
        self._upstream: tuple[str, int] | None = _split_host_port(upstream) if upstream else None
        self._host = host
        self._requested_port = port
        self._max_connections = max_connections
        self._max_frame_bytes = max_frame_bytes
        self._upstream_wait_s = upstream_wait_s
        self._lock = threading.Lock()
        self._rules: list[_RejectRule] = []
        self._no_auto_create: list[Callable[[str], bool]] = []
        self._produce_requests: Counter[str] = Counter()
        self._produce_rejected: Counter[str] = Counter()
        self._auto_create_blocked: Counter[str] = Counter()
        self._connections_total = 0
        self._decode_errors = 0
        self._sock: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()

    # ---------------------------------------------------------------- lifecycle

    @property
    def port(self) -> int:
        if self._sock is None:
            raise RuntimeError("KafkaFaultProxy is not started")
        return int(self._sock.getsockname()[1])

    @property
    def bootstrap(self) -> str:
        """``host:port`` for clients (``bootstrap_servers``)."""
        return f"{self._host}:{self.port}"

    def connect_upstream(self, upstream: str) -> None:
        """Point the proxy at the real broker (``host:port``); affects connections accepted from now on."""
        parsed = _split_host_port(upstream)
        with self._lock:
            self._upstream = parsed

    def start(self) -> None:
        """Bind the listening port (free one unless ``port`` was given) and serve in a background thread."""
        if self._thread is not None:
            raise RuntimeError("KafkaFaultProxy already started")
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self._host, self._requested_port))
            sock.listen(128)
        except OSError:
            sock.close()
            raise
        self._sock = sock
        self._ready.clear()
        self._thread = threading.Thread(target=self._run, name=f"kafka-fault-proxy-{self.port}", daemon=True)
        self._thread.start()
        self._ready.wait(10)
        if self._startup_error is not None or not self._ready.is_set():
            self.stop()
            raise RuntimeError("KafkaFaultProxy failed to start") from self._startup_error

    def stop(self) -> None:
        """Close the listener and every proxied connection; returns when the loop thread has exited."""
        thread, loop, stopping = self._thread, self._loop, self._stopping
        if thread is not None and loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stopping.set)
        if thread is not None:
            thread.join(10)
            if thread.is_alive():
                log.warning("kafka fault proxy thread did not stop within 10 s")
        self._thread = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> KafkaFaultProxy:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ---------------------------------------------------------------- faults

    def reject_produce(
        self, topic: str, error_code: int, *, min_record_bytes: int = 0, times: int | None = None
    ) -> None:
        """Answer Produce data for ``topic`` with ``error_code`` instead of forwarding it.

        Per partition: a partition of ``topic`` whose record batch (the ``records`` bytes of the request)
        is larger than ``min_record_bytes`` is not forwarded; the client gets ``error_code`` for it in a
        ProduceResponse of the request's version and correlation id. Other partitions and topics of the
        same request are forwarded to the broker and its answers merged into that response.
        ``times``: only the next ``times`` Produce requests that this rule rejects something from
        (``None``: until :meth:`clear`). Rules are checked in the order they were added; the first one
        matching a partition wins. ``acks=0`` requests are dropped for those partitions (no response).
        """
        if times is not None and times <= 0:
            raise ValueError("times must be positive or None")
        with self._lock:
            self._rules.append(_RejectRule(topic, error_code, min_record_bytes, times))

    def disable_auto_create(self, topics: Iterable[str] | Callable[[str], bool]) -> None:
        """Emulate ``auto.create.topics.enable=false`` for these topic names (adds to earlier calls).

        Metadata requests (v4+) naming such a topic are forwarded with ``allow_auto_topic_creation=false``
        so the broker answers ``UNKNOWN_TOPIC_OR_PARTITION`` instead of creating it; other topics named in
        the same request are auto-created first by a side request of the proxy, as the client asked.
        Produce data for such a topic that does not exist gets ``UNKNOWN_TOPIC_OR_PARTITION`` (3).
        Topics created explicitly (CreateTopics, :func:`tests.support.kafka.create_topics`) work normally.
        """
        if callable(topics):
            predicate = topics
        else:
            names = frozenset(topics)
            predicate = names.__contains__
        with self._lock:
            self._no_auto_create.append(predicate)

    def clear(self) -> None:
        """Remove every fault (statistics are kept; see :meth:`reset_stats`)."""
        with self._lock:
            self._rules.clear()
            self._no_auto_create.clear()

    def reset_stats(self) -> None:
        with self._lock:
            self._produce_requests.clear()
            self._produce_rejected.clear()
            self._auto_create_blocked.clear()
            self._connections_total = 0
            self._decode_errors = 0

    @property
    def stats(self) -> ProxyStats:
        with self._lock:
            return ProxyStats(
                produce_requests=dict(self._produce_requests),
                produce_rejected=dict(self._produce_rejected),
                auto_create_blocked=dict(self._auto_create_blocked),
                connections=self._connections_total,
                decode_errors=self._decode_errors,
            )

    def _auto_create_disabled(self, topic: str) -> bool:
        with self._lock:
            predicates = list(self._no_auto_create)
        return any(p(topic) for p in predicates)

    # ---------------------------------------------------------------- event loop

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:  # reported to start(); the thread must not die silently
            self._startup_error = exc
            self._ready.set()
            log.exception("kafka fault proxy loop crashed")

    async def _main(self) -> None:
        assert self._sock is not None
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        server = await asyncio.start_server(self._serve, sock=self._sock)
        self._ready.set()
        try:
            await self._stopping.wait()
        finally:
            server.close()
            tasks = list(self._conn_tasks)
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await server.wait_closed()

    async def _wait_upstream(self) -> tuple[str, int] | None:
        deadline = time.monotonic() + self._upstream_wait_s
        while True:
            with self._lock:
                upstream = self._upstream
            if upstream is not None or time.monotonic() >= deadline:
                return upstream
            await asyncio.sleep(0.02)

    async def _serve(self, c_reader: asyncio.StreamReader, c_writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        if len(self._conn_tasks) >= self._max_connections:
            log.warning("kafka fault proxy: connection limit %d reached, refusing", self._max_connections)
            c_writer.close()
            return
        self._conn_tasks.add(task)
        with self._lock:
            self._connections_total += 1
        u_writer: asyncio.StreamWriter | None = None
        try:
            upstream = await self._wait_upstream()
            if upstream is None:
                log.warning("kafka fault proxy: no upstream broker configured, closing client connection")
                return
            try:
                u_reader, u_writer = await asyncio.open_connection(*upstream)
            except OSError as exc:
                log.warning("kafka fault proxy: cannot reach upstream %s:%d: %s", *upstream, exc)
                return
            conn = _Connection(c_writer)
            pumps = [
                asyncio.create_task(self._pump_requests(conn, c_reader, u_writer)),
                asyncio.create_task(self._pump_responses(conn, u_reader)),
            ]
            try:
                done, _ = await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            finally:
                for pump in pumps:
                    pump.cancel()
                await asyncio.gather(*pumps, return_exceptions=True)
            for pump in done:
                error = pump.exception() if not pump.cancelled() else None
                if error is not None and not isinstance(error, ConnectionError | asyncio.IncompleteReadError):
                    log.warning("kafka fault proxy: connection ended by %r", error)
        finally:
            self._conn_tasks.discard(task)
            for writer in (c_writer, u_writer):
                if writer is not None:
                    writer.close()
                    with contextlib.suppress(Exception):
                        await writer.wait_closed()

    async def _pump_requests(
        self, conn: _Connection, reader: asyncio.StreamReader, u_writer: asyncio.StreamWriter
    ) -> None:
        while True:
            frame = await _read_frame(reader, self._max_frame_bytes)
            if frame is None:
                return
            header = RequestHeader.decode(io.BytesIO(frame[4:]), flexible=False)  # the v1 prefix of v1 and v2
            api_key, version = int(header.request_api_key), int(header.request_api_version)
            correlation_id = int(header.correlation_id)
            forward: bytes | None
            try:
                if api_key == PRODUCE_API_KEY:
                    forward = await self._on_produce(conn, frame, version, correlation_id)  # owes its slot itself
                elif api_key == METADATA_API_KEY:
                    forward = await self._on_metadata(frame, version)
                    conn.owe_broker(_Slot(correlation_id, version))
                else:
                    forward = frame
                    conn.owe_broker(_Slot(correlation_id, version))
            except (ValueError, IndexError, TypeError, AttributeError) as exc:  # undecodable: relay as is
                log.warning("kafka fault proxy: cannot decode api %d v%d (%r); forwarding it", api_key, version, exc)
                with self._lock:
                    self._decode_errors += 1
                forward = frame
                conn.owe_broker(_Slot(correlation_id, version))
            if forward is None:  # answered (or dropped, acks=0) by the proxy
                await conn.writer.drain()
                continue
            u_writer.write(forward)
            await u_writer.drain()

    async def _pump_responses(self, conn: _Connection, reader: asyncio.StreamReader) -> None:
        while True:
            frame = await _read_frame(reader, self._max_frame_bytes)
            if frame is None:
                return
            if not conn.from_broker:
                raise _ProtocolError("response from the broker with no request outstanding")
            slot = conn.from_broker.popleft()
            correlation_id = int(ResponseHeader.decode(io.BytesIO(frame[4:]), flexible=False).correlation_id)
            if correlation_id != slot.correlation_id:
                raise _ProtocolError(f"broker answered correlation id {correlation_id}, expected {slot.correlation_id}")
            if slot.merge:
                response = ProduceResponse.decode(frame[4:], version=slot.version, header=True)
                by_name = {t.name: t for t in response.responses}
                for injected in slot.merge:
                    existing = by_name.get(injected.name)
                    if existing is None:
                        response.responses.append(injected)
                    else:
                        existing.partition_responses.extend(injected.partition_responses)
                frame = bytes(response.encode(header=True, framed=True))
            slot.frame = frame
            conn.flush()
            await conn.writer.drain()

    # ---------------------------------------------------------------- Produce

    def _rule_decisions(self, request: Any) -> tuple[dict[tuple[str, int], int], set[str]]:
        """Which partitions the reject rules answer, and with which code; bumps counters and ``times``."""
        decisions: dict[tuple[str, int], int] = {}
        with self._lock:
            fired: set[int] = set()
            topics: set[str] = set()
            for topic_data in request.topic_data:
                name = topic_data.name
                if not name:
                    continue  # v13+: topic ids only, not matched
                topics.add(name)
                for pd in topic_data.partition_data:
                    size = len(pd.records) if pd.records is not None else 0
                    for i, rule in enumerate(self._rules):
                        if rule.topic == name and size > rule.min_record_bytes:
                            decisions[(name, int(pd.index))] = rule.error_code
                            fired.add(i)
                            break
            for i in fired:
                rule = self._rules[i]
                if rule.remaining is not None:
                    rule.remaining -= 1
            self._rules = [r for r in self._rules if r.remaining is None or r.remaining > 0]
            self._produce_requests.update(topics)
        return decisions, topics

    async def _on_produce(self, conn: _Connection, frame: bytes, version: int, correlation_id: int) -> bytes | None:
        """Returns the frame to forward (the original or a reduced one), or None if nothing goes upstream."""
        request = ProduceRequest.decode(frame[4:], version=version, header=True)
        expects_response = int(request.acks) != 0
        decisions, topics = self._rule_decisions(request)
        for name in sorted(topics):
            if self._auto_create_disabled(name) and not await self._topic_exists(name):
                for topic_data in request.topic_data:
                    if topic_data.name == name:
                        for pd in topic_data.partition_data:
                            decisions.setdefault((name, int(pd.index)), UNKNOWN_TOPIC_OR_PARTITION)
        if not decisions:
            if expects_response:
                conn.owe_broker(_Slot(correlation_id, version))
            return frame

        injected: list[_TopicData] = []
        kept: list[_TopicData] = []
        rejected_topics: set[str] = set()
        for topic_data in request.topic_data:
            errors: list[_PartitionResponse] = []
            keep = []
            for pd in topic_data.partition_data:
                code = decisions.get((topic_data.name, int(pd.index)))
                if code is None:
                    keep.append(pd)
                else:
                    errors.append(_partition_error(int(pd.index), code, topic_data.name))
            if errors:
                rejected_topics.add(topic_data.name)
                injected.append(ProduceResponse.TopicProduceResponse(name=topic_data.name, partition_responses=errors))
            if keep:
                topic_data.partition_data = keep
                kept.append(topic_data)
        with self._lock:
            self._produce_rejected.update(rejected_topics)
        log.debug("kafka fault proxy: produce %d rejects %s", correlation_id, sorted(decisions.items()))

        if not kept:  # answered entirely by the proxy
            if expects_response:
                response = ProduceResponse(version=version, responses=injected, throttle_time_ms=0)
                response.with_header(correlation_id=correlation_id)
                conn.owe_synthetic(
                    _Slot(correlation_id, version, frame=bytes(response.encode(header=True, framed=True)))
                )
            return None
        request.topic_data = kept
        reduced = bytes(request.encode(header=True, framed=True))
        if expects_response:
            conn.owe_broker(_Slot(correlation_id, version, merge=injected))
        return reduced

    # ---------------------------------------------------------------- Metadata

    async def _on_metadata(self, frame: bytes, version: int) -> bytes:
        if version < _METADATA_AUTO_CREATE_MIN_VERSION:
            return frame  # v0-3 have no allow_auto_topic_creation (brokers always auto-create): not emulated
        request = MetadataRequest.decode(frame[4:], version=version, header=True)
        if not request.allow_auto_topic_creation or not request.topics:
            return frame
        names = [t.name for t in request.topics if t.name]
        blocked = [n for n in names if self._auto_create_disabled(n)]
        if not blocked:
            return frame
        others = [n for n in names if n not in blocked]
        if others:  # the client asked for these to be auto-created: do it with a side request
            log.debug("kafka fault proxy: auto-creating %s aside from %s", others, blocked)
            try:
                await self._side_metadata(others, allow_auto_create=True)
            except (OSError, TimeoutError, ValueError) as exc:
                log.warning("kafka fault proxy: side auto-create of %s failed: %r", others, exc)
        with self._lock:
            self._auto_create_blocked.update(blocked)
        request.allow_auto_topic_creation = False
        return bytes(request.encode(header=True, framed=True))

    async def _side_metadata(self, topics: list[str], *, allow_auto_create: bool) -> dict[str, int]:
        """Error code per topic from a Metadata request of the proxy's own, on a fresh upstream connection."""
        with self._lock:
            upstream = self._upstream
        if upstream is None:
            raise ConnectionError("no upstream broker")
        request = MetadataRequest(
            version=_SIDE_METADATA_VERSION,
            topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
            allow_auto_topic_creation=allow_auto_create,
        )
        request.with_header(correlation_id=1, client_id="kafka-fault-proxy")
        reader, writer = await asyncio.open_connection(*upstream)
        try:
            writer.write(request.encode(header=True, framed=True))
            await writer.drain()
            frame = await asyncio.wait_for(_read_frame(reader, self._max_frame_bytes), 10)
            if frame is None:
                raise ConnectionError("broker closed the side connection")
            response = MetadataResponse.decode(frame[4:], version=_SIDE_METADATA_VERSION, header=True)
            return {t.name: int(t.error_code) for t in response.topics}
        finally:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _topic_exists(self, topic: str) -> bool:
        try:
            codes = await self._side_metadata([topic], allow_auto_create=False)
        except (OSError, TimeoutError, ValueError) as exc:
            log.warning("kafka fault proxy: cannot check whether %s exists (%r); assuming it does", topic, exc)
            return True
        return codes.get(topic, UNKNOWN_TOPIC_OR_PARTITION) != UNKNOWN_TOPIC_OR_PARTITION


# -------------------------------------------------------------------- Tansu behind the proxy


class ProxiedTansuBroker(TansuBroker):
    """:class:`TansuBroker` that advertises another port (the proxy's) while listening on its own.

    ``bootstrap`` stays the broker's own address; clients should use the proxy's.
    """

    def __init__(self, log_dir: Path, port: int | None = None, *, advertised_port: int | None = None) -> None:
        super().__init__(log_dir, port)
        self.advertised_port = advertised_port or self.port

    def start(self, timeout: float = 15.0) -> None:
        cmd = [
            tansu_binary(),
            "broker",
            "--listener-url",
            f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url",
            f"tcp://127.0.0.1:{self.advertised_port}",
            "--storage-engine",
            "memory://tansu/",
        ]
        deadline = time.monotonic() + timeout
        while True:  # the port of a just-stopped broker may linger for a moment
            with self.log_path.open("ab") as log_file:
                self.proc = subprocess.Popen(cmd, stdout=log_file, stderr=subprocess.STDOUT)
            if self._wait_ready(deadline):
                return
            if time.monotonic() >= deadline:
                raise RuntimeError(f"tansu did not start on port {self.port}; see {self.log_path}")
            time.sleep(0.2)


@contextlib.contextmanager
def proxied_tansu(log_dir: Path) -> Iterator[tuple[ProxiedTansuBroker, KafkaFaultProxy]]:
    """A fresh Tansu behind a :class:`KafkaFaultProxy`; clients use ``proxy.bootstrap``."""
    proxy = KafkaFaultProxy()
    proxy.start()
    broker = ProxiedTansuBroker(log_dir, advertised_port=proxy.port)
    try:
        broker.start()
        proxy.connect_upstream(broker.bootstrap)
        yield broker, proxy
    finally:
        broker.stop()
        proxy.stop()
