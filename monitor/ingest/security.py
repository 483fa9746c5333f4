"""Kafka security: TLS and SASL for every Kafka client of the daemon, from ``kafka.security_protocol``,
``kafka.tls`` and ``kafka.sasl``.

:func:`build_security` turns the settings into the kafka-python keyword arguments (:meth:`KafkaSecurity.kwargs`)
that the consumer (:class:`~monitor.ingest.consumer.KafkaSource`), the dead-letter producer and its checks
(:class:`~monitor.ingest.dlq.DeadLetterQueue`) and the broker probe (:func:`monitor.preflight.check_brokers`)
all use, so the three never disagree:

* ``security_protocol``;
* TLS (SSL, SASL_SSL): ``ssl_context``, an :class:`ssl.SSLContext` built here (TLS 1.2 at least, the CAs of
  ``kafka.tls.ca_file`` or else the system's, the client certificate of ``cert_file``/``key_file`` for mutual TLS,
  ``check_hostname``). The key's password is read from ``key_password_env``/``key_password_file`` and used only to
  load the key; an encrypted key without a password is an error, never an interactive prompt;
* SASL (SASL_SSL, SASL_PLAINTEXT): ``sasl_mechanism``; PLAIN and SCRAM-SHA-256/512 get ``sasl_plain_username``
  and ``sasl_plain_password`` (read from ``password_env`` or ``password_file`` when the client is built);
  OAUTHBEARER gets ``sasl_oauth_token_provider``: a :class:`FileTokenProvider` (``oauth.token_file``, re-read
  whenever the file changes, so a sidecar or a projected service-account token can refresh it) or a
  :class:`ClientCredentialsTokenProvider` (the OAuth 2 client-credentials grant against ``oauth.endpoint_url``,
  cached until ``oauth.refresh_margin_s`` before it expires). kafka-python calls the provider on every
  connection and every KIP-368 re-authentication.

A setting that cannot be used (a file missing, unreadable or not PEM, an unset variable, a key that does not
match its certificate or does not decrypt) raises :class:`KafkaSecurityError`, a
:class:`~monitor.settings.SettingsError` whose lines name the key, its value and the fix;
:func:`check_security` returns those lines for ``monitor config`` / ``monitor run``'s checks.

Secrets never appear in clear: not in settings (only variable names and file paths are settings), not in
``repr(KafkaSecurity)``, and not in log lines: every secret read here (passwords, tokens, client secrets) is
scrubbed from the records of kafka-python's loggers, whose DEBUG output (``log_client_debug``) would otherwise
print SASL frames.

:func:`probe_tls` is the TLS part of the broker check: one TLS handshake and one ApiVersions request to a
bootstrap server, so that a wrong CA, a certificate for another host name, a missing client certificate or a
plaintext listener is reported as such (naming ``kafka.tls.ca_file``, ``kafka.tls.check_hostname``…) instead of
as a broker that does not answer.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import os
import socket
import ssl
import struct
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from kafka.net.sasl.oauth import AbstractTokenProvider

from monitor.settings import (
    KafkaOAuthSettings,
    KafkaSettings,
    SettingsError,
    format_problem,
    mask_secrets,
    setting_label,
)

log = logging.getLogger(__name__)

__all__ = [
    "ClientCredentialsTokenProvider",
    "FileTokenProvider",
    "KafkaSecurity",
    "KafkaSecurityError",
    "TokenError",
    "build_security",
    "check_security",
    "probe_tls",
]

_TLS_PROTOCOLS: Final = ("SSL", "SASL_SSL")
_SASL_PROTOCOLS: Final = ("SASL_PLAINTEXT", "SASL_SSL")
_DEFAULT_TOKEN_LIFETIME_S: Final = 300.0
"""How long a token whose lifetime the endpoint does not state (no ``expires_in``, not a JWT) is used."""

Loc = tuple[str, ...]


class KafkaSecurityError(SettingsError):
    """The security settings cannot be used; ``problems`` has one ``<key> = <value>: <problem>. Fix: …`` line each."""

    def __init__(self, problems: list[str], source: str = "kafka security settings") -> None:
        super().__init__(problems, source)


class TokenError(Exception):
    """An OAuth token could not be obtained (the message never holds the token or the client secret)."""


# --------------------------------------------------------------------------- secrets kept out of the logs

_scrub_lock = threading.Lock()
_scrubbed: set[str] = set()


class _SecretScrubber(logging.Filter):
    """Replaces every known secret in a record of a kafka-python logger by ``***`` (message and arguments)."""

    def filter(self, record: logging.LogRecord) -> bool:
        with _scrub_lock:
            secrets = sorted(_scrubbed, key=len, reverse=True)
        if not secrets:
            return True
        try:
            message = record.getMessage()
        except Exception:  # a record that cannot be formatted is left to the handler
            return True
        scrubbed = message
        for secret in secrets:
            scrubbed = scrubbed.replace(secret, "***")
        if scrubbed != message:
            record.msg, record.args = scrubbed, None
        return True


_SCRUBBER: Final = _SecretScrubber()


def _protect(secret: str) -> None:
    """Scrub ``secret`` (and its escaped forms in ``bytes`` reprs) from kafka-python's log records from now on."""
    if not secret:
        return
    forms = {secret, repr(secret.encode())[2:-1], repr(secret)[1:-1]}
    with _scrub_lock:
        new = forms - _scrubbed
        _scrubbed.update(forms)
    if not new:
        return
    # a logger's filters see only the records created on that very logger: attach to every kafka logger
    names = ["kafka"] + [n for n in logging.root.manager.loggerDict if n.startswith("kafka.")]
    for name in names:
        logger = logging.getLogger(name)
        if _SCRUBBER not in logger.filters:
            logger.addFilter(_SCRUBBER)


# --------------------------------------------------------------------------- reading secrets


def _read_file_secret(loc: Loc, path: Path, what: str, problems: list[str]) -> str | None:
    fix = f"mount the Secret holding {what} at that path, or correct {setting_label(loc)}"
    try:
        text = path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        problems.append(format_problem(loc, path, "the file does not exist", fix))
        return None
    except IsADirectoryError:
        problems.append(format_problem(loc, path, f"is a directory, not the file holding {what}", fix))
        return None
    except PermissionError:
        problems.append(format_problem(loc, path, "cannot be read by this user", f"{fix}, readable by the daemon"))
        return None
    except (OSError, UnicodeDecodeError) as exc:
        problems.append(format_problem(loc, path, f"cannot be read ({type(exc).__name__})", fix))
        return None
    if not text:
        problems.append(format_problem(loc, path, "the file is empty", f"write {what} into it"))
        return None
    return text


def _read_secret(
    env_loc: Loc, env: str | None, file_loc: Loc, path: Path | None, what: str, problems: list[str]
) -> str | None:
    """The secret from the file ``path`` or else the variable ``env`` (the settings allow one of them)."""
    if path is not None:
        secret = _read_file_secret(file_loc, Path(path), what, problems)
    elif env is not None:
        secret = os.environ.get(env, "").strip() or None
        if secret is None:
            problems.append(
                format_problem(
                    env_loc,
                    env,
                    f"the environment variable {env} is unset or empty",
                    f"give the daemon {env} from a secret store (a Kubernetes Secret as an environment variable), "
                    f"or set {setting_label(file_loc)} to a file holding {what}",
                )
            )
    else:
        return None
    if secret is not None:
        _protect(secret)
    return secret


# --------------------------------------------------------------------------- TLS


def _ssl_reason(exc: ssl.SSLError) -> str:
    return str(exc.reason or exc.strerror or exc)


def _check_readable(loc: Loc, path: Path, what: str, problems: list[str]) -> bool:
    fix = f"mount {what} at that path, or correct {setting_label(loc)}"
    if not path.exists():
        problems.append(format_problem(loc, path, "the file does not exist", fix))
        return False
    if path.is_dir():
        problems.append(format_problem(loc, path, f"is a directory, not {what}", fix))
        return False
    if not os.access(path, os.R_OK):
        problems.append(format_problem(loc, path, "cannot be read by this user", f"{fix}, readable by the daemon"))
        return False
    return True


def _ssl_context(kafka: KafkaSettings, problems: list[str]) -> ssl.SSLContext | None:
    tls = kafka.tls
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = tls.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED
    before = len(problems)
    if tls.ca_file is not None:
        loc: Loc = ("kafka", "tls", "ca_file")
        path = Path(tls.ca_file)
        if _check_readable(loc, path, "the PEM file of the brokers' CA certificates", problems):
            try:
                ctx.load_verify_locations(cafile=str(path))
            except (ssl.SSLError, ValueError) as exc:
                problems.append(
                    format_problem(
                        loc,
                        path,
                        f"holds no PEM CA certificate ({_ssl_reason(exc) if isinstance(exc, ssl.SSLError) else exc})",
                        "point it at the PEM file (-----BEGIN CERTIFICATE-----) of the CA that signed the brokers' "
                        "certificates",
                    )
                )
    else:
        ctx.load_default_certs()
    if tls.cert_file is not None:
        _load_client_certificate(kafka, ctx, problems)
    return ctx if len(problems) == before else None


def _load_client_certificate(kafka: KafkaSettings, ctx: ssl.SSLContext, problems: list[str]) -> None:
    tls = kafka.tls
    cert_loc: Loc = ("kafka", "tls", "cert_file")
    key_loc: Loc = ("kafka", "tls", "key_file")
    assert tls.cert_file is not None
    cert = Path(tls.cert_file)
    key = Path(tls.key_file) if tls.key_file is not None else None
    ok = _check_readable(cert_loc, cert, "the client certificate (PEM)", problems)
    if key is not None:
        ok = _check_readable(key_loc, key, "the client private key (PEM)", problems) and ok
    password = _read_secret(
        ("kafka", "tls", "key_password_env"),
        tls.key_password_env,
        ("kafka", "tls", "key_password_file"),
        tls.key_password_file,
        "the private key's password",
        problems,
    )
    if not ok or (password is None and (tls.key_password_env or tls.key_password_file)):
        return
    asked: list[bool] = []

    def give_password() -> bytes:
        asked.append(True)
        return password.encode() if password is not None else b""  # never OpenSSL's interactive prompt

    try:
        ctx.load_cert_chain(certfile=str(cert), keyfile=str(key) if key else None, password=give_password)
    except ssl.SSLError as exc:
        reason = _ssl_reason(exc)
        key_at = key_loc if key is not None else cert_loc
        key_value = key if key is not None else cert
        if "KEY_VALUES_MISMATCH" in reason:
            problems.append(
                format_problem(
                    key_at,
                    key_value,
                    f"the private key does not belong to the certificate {cert}",
                    "give the key that was issued with kafka.tls.cert_file",
                )
            )
        elif asked and password is None:
            problems.append(
                format_problem(
                    key_at,
                    key_value,
                    "the private key is encrypted and no password is configured",
                    "set kafka.tls.key_password_file (a mounted Secret) or kafka.tls.key_password_env",
                )
            )
        elif asked:
            pw_loc: Loc = ("kafka", "tls", "key_password_file" if tls.key_password_file else "key_password_env")
            pw_value = tls.key_password_file or tls.key_password_env
            problems.append(
                format_problem(
                    pw_loc,
                    pw_value,
                    f"the password does not decrypt the private key {key_value} ({reason})",
                    "give the key's password",
                )
            )
        else:
            problems.append(
                format_problem(
                    cert_loc,
                    cert,
                    f"the client certificate and key cannot be loaded ({reason})",
                    "give a PEM certificate in cert_file and its PEM private key in key_file (or both in cert_file)",
                )
            )


# --------------------------------------------------------------------------- OAUTHBEARER token providers


class FileTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """The bearer token in ``path``, re-read whenever the file changes (mtime, size or inode)."""

    def __init__(self, path: Path, extensions: dict[str, str] | None = None) -> None:
        self.path = Path(path)
        self._extensions = dict(extensions or {})
        self._lock = threading.Lock()
        self._stamp: tuple[int, int, int] | None = None
        self._token = ""

    def token(self) -> str:
        with self._lock:
            try:
                st = self.path.stat()
                stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
                if stamp != self._stamp:
                    text = self.path.read_text(encoding="utf-8").strip()
                    if not text:
                        raise TokenError(f"the token file {self.path} is empty")
                    _protect(text)
                    self._token, self._stamp = text, stamp
            except OSError as exc:
                raise TokenError(f"cannot read the token file {self.path}: {exc.strerror or exc}") from exc
            return self._token

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def __repr__(self) -> str:
        return f"FileTokenProvider({str(self.path)!r})"


def _jwt_expiry(token: str) -> float | None:
    """The ``exp`` claim (epoch seconds) of a JWT, else None; the signature is not checked (the broker does)."""
    parts = token.split(".")
    if len(parts) != 3:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, binascii.Error):
        return None
    exp = payload.get("exp") if isinstance(payload, dict) else None
    return float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None


class ClientCredentialsTokenProvider(AbstractTokenProvider):  # type: ignore[misc]
    """The OAuth 2 client-credentials grant (RFC 6749 §4.4): POST ``grant_type=client_credentials`` (and
    ``scope``) to ``endpoint_url`` with the client id and secret as HTTP Basic credentials; the ``access_token``
    is cached until ``refresh_margin_s`` before it expires (``expires_in``, else the JWT's ``exp``, else 5 minutes).

    kafka-python calls :meth:`token` on its network thread at each connection and re-authentication: a fetch
    blocks it for up to ``timeout_s``; failures raise :class:`TokenError` (the connection is retried).
    """

    def __init__(
        self,
        endpoint_url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        extensions: dict[str, str] | None = None,
        refresh_margin_s: float = 60.0,
        timeout_s: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.endpoint_url = endpoint_url
        self.client_id = client_id
        self._secret = client_secret
        self.scope = scope
        self._extensions = dict(extensions or {})
        self.refresh_margin_s = refresh_margin_s
        self.timeout_s = timeout_s
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._expires_at = 0.0
        self.fetches = 0
        _protect(client_secret)

    def token(self) -> str:
        with self._lock:
            if self._token is None or self._clock() >= self._expires_at - self.refresh_margin_s:
                self._fetch()
            assert self._token is not None
            return self._token

    def extensions(self) -> dict[str, str]:
        return dict(self._extensions)

    def _fetch(self) -> None:
        form = {"grant_type": "client_credentials"}
        if self.scope:
            form["scope"] = self.scope
        basic = ":".join(urllib.parse.quote(part, safe="") for part in (self.client_id, self._secret))
        request = urllib.request.Request(
            self.endpoint_url,
            data=urllib.parse.urlencode(form).encode(),
            headers={
                "Authorization": "Basic " + base64.b64encode(basic.encode()).decode(),
                "Content-Type": "application/x-www-form-urlencoded",
                "Accept": "application/json",
            },
            method="POST",
        )
        where = f"the OAuth token endpoint {self.endpoint_url}"
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                body = response.read(1024 * 1024)
        except urllib.error.HTTPError as exc:
            detail = exc.read(2048).decode("utf-8", "replace")
            try:
                doc = json.loads(detail)
                detail = " ".join(str(doc.get(k, "")) for k in ("error", "error_description")).strip() or detail
            except (ValueError, AttributeError):
                pass
            raise TokenError(mask_secrets(f"{where} answered HTTP {exc.code}: {detail[:300]}")) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise TokenError(f"{where} cannot be reached: {reason}") from None
        try:
            doc = json.loads(body)
            token = doc["access_token"]
            if not isinstance(token, str) or not token:
                raise KeyError("access_token")
        except (ValueError, KeyError, TypeError):
            raise TokenError(f"{where} answered without an access_token") from None
        now = self._clock()
        expires_in = doc.get("expires_in")
        if isinstance(expires_in, int | float | str) and str(expires_in).replace(".", "", 1).isdigit():
            expires_at = now + float(expires_in)
        else:
            expires_at = _jwt_expiry(token) or now + _DEFAULT_TOKEN_LIFETIME_S
        _protect(token)
        self._token, self._expires_at = token, expires_at
        self.fetches += 1
        log.info("fetched an OAuth token from %s (valid for %.0fs)", self.endpoint_url, expires_at - now)

    def __repr__(self) -> str:
        return f"ClientCredentialsTokenProvider({self.endpoint_url!r}, client_id={self.client_id!r})"


def _token_provider(oauth: KafkaOAuthSettings, problems: list[str]) -> AbstractTokenProvider | None:
    if oauth.token_file is not None:
        loc: Loc = ("kafka", "sasl", "oauth", "token_file")
        token = _read_file_secret(loc, Path(oauth.token_file), "the OAuth bearer token", problems)
        if token is None:
            return None
        _protect(token)
        return FileTokenProvider(Path(oauth.token_file), oauth.extensions)
    assert oauth.endpoint_url is not None and oauth.client_id is not None
    secret = _read_secret(
        ("kafka", "sasl", "oauth", "client_secret_env"),
        oauth.client_secret_env,
        ("kafka", "sasl", "oauth", "client_secret_file"),
        oauth.client_secret_file,
        "the OAuth client secret",
        problems,
    )
    if secret is None:
        return None
    return ClientCredentialsTokenProvider(
        oauth.endpoint_url,
        oauth.client_id,
        secret,
        scope=oauth.scope,
        extensions=oauth.extensions,
        refresh_margin_s=oauth.refresh_margin_s,
        timeout_s=oauth.timeout_s,
    )


# --------------------------------------------------------------------------- the kafka-python arguments


@dataclass(frozen=True, repr=False)
class KafkaSecurity:
    """The security part of every kafka-python client's configuration; ``repr`` never shows a secret."""

    protocol: str
    ssl_context: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str | None = None
    _password: str | None = field(default=None, compare=False)
    token_provider: AbstractTokenProvider | None = None

    @property
    def tls(self) -> bool:
        return self.protocol in _TLS_PROTOCOLS

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments for ``KafkaConsumer``, ``KafkaProducer`` and ``KafkaAdminClient`` (a new dict)."""
        out: dict[str, Any] = {"security_protocol": self.protocol}
        if self.ssl_context is not None:
            out["ssl_context"] = self.ssl_context
        if self.mechanism is not None:
            out["sasl_mechanism"] = self.mechanism
        if self.username is not None:
            out["sasl_plain_username"] = self.username
        if self._password is not None:
            out["sasl_plain_password"] = self._password
        if self.token_provider is not None:
            out["sasl_oauth_token_provider"] = self.token_provider
        return out

    def __repr__(self) -> str:
        parts = [f"protocol={self.protocol!r}"]
        if self.ssl_context is not None:
            parts.append(f"tls(check_hostname={self.ssl_context.check_hostname})")
        if self.mechanism is not None:
            parts.append(f"mechanism={self.mechanism!r}")
        if self.username is not None:
            parts.append(f"username={self.username!r}")
        if self._password is not None:
            parts.append("password='***'")
        if self.token_provider is not None:
            parts.append(f"token_provider={self.token_provider!r}")
        return f"KafkaSecurity({', '.join(parts)})"


def build_security(kafka: KafkaSettings) -> KafkaSecurity:
    """The security arguments of ``kafka``'s clients; secrets are read now (files and variables).

    Raises :class:`KafkaSecurityError` listing every setting that cannot be used."""
    problems: list[str] = []
    protocol = kafka.security_protocol
    ctx = _ssl_context(kafka, problems) if protocol in _TLS_PROTOCOLS else None
    mechanism = username = password = None
    provider: AbstractTokenProvider | None = None
    sasl = kafka.sasl
    if protocol in _SASL_PROTOCOLS and sasl.mechanism is not None:
        mechanism = sasl.mechanism
        if mechanism == "OAUTHBEARER":
            provider = _token_provider(sasl.oauth, problems)
        else:
            username = sasl.username
            password = _read_secret(
                ("kafka", "sasl", "password_env"),
                sasl.password_env,
                ("kafka", "sasl", "password_file"),
                sasl.password_file,
                "the SASL password",
                problems,
            )
    if problems:
        raise KafkaSecurityError(problems)
    return KafkaSecurity(protocol, ctx, mechanism, username, password, provider)


def check_security(kafka: KafkaSettings) -> list[str]:
    """The problems :func:`build_security` finds in ``kafka`` (``[]`` when the clients can be built)."""
    try:
        build_security(kafka)
    except KafkaSecurityError as exc:
        return list(exc.problems)
    return []


# --------------------------------------------------------------------------- the TLS probe of the broker check

_PROBE_CORRELATION_ID: Final = 0x6D6F6E
_API_VERSIONS_V0: Final = (
    struct.pack(">hhih", 18, 0, _PROBE_CORRELATION_ID, len(b"monitor-tls-probe")) + b"monitor-tls-probe"
)


@dataclass(frozen=True, slots=True)
class TlsProblem:
    """Why a TLS connection to a broker failed: the problem, and the fix naming the setting to change."""

    problem: str
    fix: str


def _recv_exactly(sock: ssl.SSLSocket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionResetError("the broker closed the connection")
        data += chunk
    return data


def probe_tls(
    kafka: KafkaSettings, security: KafkaSecurity, host: str, port: int, timeout_s: float
) -> TlsProblem | None:
    """One TLS handshake with ``host:port`` using ``security``'s context, then one ApiVersions (v0) request over it
    (with TLS 1.3 a broker refuses a client certificate only after the handshake). None when both succeed."""
    ctx = security.ssl_context
    if ctx is None:
        return None
    try:
        raw = socket.create_connection((host, port), timeout=max(timeout_s, 0.05))
    except OSError:
        return None  # the TCP step reports unreachable servers
    handshake_done = False
    try:
        with ctx.wrap_socket(raw, server_hostname=host) as tls_sock:
            handshake_done = True
            tls_sock.sendall(struct.pack(">i", len(_API_VERSIONS_V0)) + _API_VERSIONS_V0)
            size = struct.unpack(">i", _recv_exactly(tls_sock, 4))[0]
            if size < 4 or struct.unpack(">i", _recv_exactly(tls_sock, 4))[0] != _PROBE_CORRELATION_ID:
                return TlsProblem(
                    f"{host}:{port} answered TLS but not as a Kafka broker",
                    f"check that {setting_label(('kafka', 'bootstrap_servers'))} names the brokers' TLS listener",
                )
    except ssl.SSLCertVerificationError as exc:
        return _untrusted(kafka, f"{host}:{port}", host, exc)
    except (ssl.SSLError, OSError) as exc:
        return _failed(kafka, f"{host}:{port}", exc, handshake_done, timeout_s)
    finally:
        raw.close()
    return None


def _untrusted(kafka: KafkaSettings, server: str, host: str, exc: ssl.SSLCertVerificationError) -> TlsProblem:
    label = setting_label
    code, message = exc.verify_code, exc.verify_message or _ssl_reason(exc)
    if code in (62, 64) or "mismatch" in str(message).lower():  # X509_V_ERR_HOSTNAME / IP_ADDRESS_MISMATCH
        return TlsProblem(
            f"the certificate of {server} is not valid for the host name {host!r} ({str(message).rstrip('.')}; "
            f"{label(('kafka', 'tls', 'check_hostname'))} is true)",
            f"connect by a name the certificate holds (its subject alternative names) in "
            f"{label(('kafka', 'bootstrap_servers'))} and the brokers' advertised listeners, or set "
            f"{label(('kafka', 'tls', 'check_hostname'))}: false (the certificate is still checked against the CA)",
        )
    if code == 10:  # X509_V_ERR_CERT_HAS_EXPIRED
        return TlsProblem(
            f"the certificate of {server} has expired ({message})",
            "renew the brokers' certificates, or check this machine's clock",
        )
    ca_key = label(("kafka", "tls", "ca_file"))
    fix = f"set {ca_key} to the PEM file of the CA that signed the brokers' certificates"
    if kafka.tls.ca_file is not None:
        return TlsProblem(
            f"the certificate of {server} is not signed by a CA in {ca_key} = {str(kafka.tls.ca_file)!r} ({message})",
            fix,
        )
    return TlsProblem(
        f"the certificate of {server} is not signed by a CA this machine trusts ({message}; {ca_key} is not set, "
        "so the system CAs are used)",
        fix,
    )


def _failed(kafka: KafkaSettings, server: str, exc: OSError, handshake_done: bool, timeout_s: float) -> TlsProblem:
    label = setting_label
    reason = _ssl_reason(exc) if isinstance(exc, ssl.SSLError) else str(exc.strerror or exc)
    upper = reason.upper()
    cert_key, key_key = label(("kafka", "tls", "cert_file")), label(("kafka", "tls", "key_file"))
    listener_fix = f"check that {label(('kafka', 'bootstrap_servers'))} names the brokers' TLS listener"
    refused = any(a in upper for a in ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_UNKNOWN", "HANDSHAKE_FAILURE"))
    if kafka.tls.cert_file is None and (
        "CERTIFICATE_REQUIRED" in upper or refused or (handshake_done and not isinstance(exc, TimeoutError))
    ):
        return TlsProblem(
            f"{server} requires a client certificate (mutual TLS) and none is configured ({reason})",
            f"set {cert_key} and {key_key} to the client certificate and key the brokers accept",
        )
    if kafka.tls.cert_file is not None and (
        refused or "CERTIFICATE_REQUIRED" in upper or (handshake_done and not isinstance(exc, TimeoutError))
    ):
        return TlsProblem(
            f"{server} refused the client certificate {cert_key} = {str(kafka.tls.cert_file)!r} ({reason})",
            "use a client certificate signed by a CA the brokers trust (their ssl.truststore / client CA)",
        )
    if isinstance(exc, TimeoutError):
        return TlsProblem(
            f"{server} gave no TLS answer within {timeout_s:.1f}s (a plaintext listener stays silent like this)",
            f"{listener_fix}, or set {label(('kafka', 'security_protocol'))} to PLAINTEXT or SASL_PLAINTEXT",
        )
    if not handshake_done:
        return TlsProblem(
            f"{server} does not speak TLS ({reason}): {label(('kafka', 'security_protocol'))} is "
            f"{kafka.security_protocol} but this looks like a plaintext listener",
            f"{listener_fix}, or set {label(('kafka', 'security_protocol'))} to PLAINTEXT or SASL_PLAINTEXT",
        )
    return TlsProblem(f"the TLS connection to {server} failed ({reason})", listener_fix)
