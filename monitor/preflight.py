"""Everything ``monitor run`` checks before it touches the store, the port or the consumer group, and
how it sets up its logs. ``monitor config`` runs the very same checks.

:func:`preflight` gathers every problem at once and returns a :class:`PreflightReport`:

1. **configuration checks** (:func:`check_configuration`; local, no network except name lookups of
   ``http.host``): the rules file exists and loads (:meth:`RuleSet.load`, as the daemon loads it:
   its scorers must name kinds of the scorer registry, :mod:`monitor.scoring.catalogue`, judges
   included, with valid parameters), ``scoring.checks`` names registered kinds and the keys of
   ``sampling.per_scorer`` name scorer ids that exist (each with a did-you-mean); the
   sampler and the scoring stage can be built from the settings (the objects the daemon builds); the
   topic names are legal for Kafka; ``store.url`` parses, names SQLite or PostgreSQL with a
   synchronous driver that is installed, and a SQLite file's directory exists; ``http.host`` resolves
   and can be bound on this machine and ``http.port`` is free (bound the way the HTTP server binds
   it, then released); the keys of ``judge.models`` and ``judge.budgets.per_judge`` are judge kinds of the
   registry, every model a ``usd_per_day`` judge budget covers has a price in ``judge.prices``, and with
   ``judge.enabled`` the API key can be read from ``judge.api_key_file`` or the variable
   ``judge.api_key_env`` (the key is never quoted); the Kafka security settings can be used
   (:func:`monitor.ingest.security.check_security`: the TLS files load, the secrets can be read).
2. **the broker check** (:func:`check_brokers`, unless ``brokers=False``): a TCP connection to the
   bootstrap servers, with TLS one handshake and ApiVersions request of our own
   (:func:`monitor.ingest.security.probe_tls`: a wrong CA, host name or client certificate is named as such),
   then kafka-python's bootstrap (ApiVersions and Metadata) with the consumer's security settings, all within
   ``kafka.startup_timeout_s``.

When :func:`~monitor.settings.load_settings` already rejected some values,
:func:`with_configuration_checks` adds the problems of the other keys, so one report lists them all.

Configuration problems are :class:`~monitor.settings.SettingsError` lines (``<name> = <value>:
<problem>. Fix: <fix>``; an environment variable is named when the value came from one) and make the
exit code :data:`EXIT_CONFIG` (2); the broker line is added to them. Brokers that cannot be reached,
with an otherwise valid configuration, are one line, ``cannot reach the Kafka brokers at HOST:PORT
within Ns: <reason>. Fix: …``, and :data:`EXIT_BROKERS_UNREACHABLE` (4).

Logging (:func:`configure_logging`): one stderr handler whose formatter masks secrets in every line
(:func:`~monitor.settings.mask_secrets`: URL passwords, secret query parameters) and client libraries
held at a floor level (:data:`CLIENT_LOGGER_FLOORS`) even at ``log_level: DEBUG``: their DEBUG output
dumps raw Kafka records, SQL parameters and HTTP bodies, which hold user messages and tool arguments.
``log_client_debug: true`` lifts the floors.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import json
import logging
import socket
import threading
import time
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any, Final

from monitor.ingest.security import KafkaSecurityError, build_security, check_security, probe_tls
from monitor.settings import (
    JudgeSettings,
    KafkaSettings,
    Settings,
    SettingsError,
    format_problem,
    mask_secrets,
    setting_label,
)

if TYPE_CHECKING:
    from monitor.rules.ruleset import RuleSet

__all__ = [
    "CLIENT_LOGGER_FLOORS",
    "EXIT_BROKERS_UNREACHABLE",
    "EXIT_CONFIG",
    "EXIT_OK",
    "BrokersUnreachable",
    "MaskingFormatter",
    "PreflightReport",
    "check_brokers",
    "check_configuration",
    "configure_logging",
    "preflight",
    "with_configuration_checks",
]

log = logging.getLogger(__name__)

EXIT_OK: Final = 0
EXIT_CONFIG: Final = 2
"""The configuration cannot work: every problem is printed, nothing was started."""
EXIT_BROKERS_UNREACHABLE: Final = 4
"""The configuration is valid but no bootstrap server answered within ``kafka.startup_timeout_s``."""

CLIENT_LOGGER_FLOORS: Final[Mapping[str, int]] = {
    "kafka": logging.INFO,  # DEBUG: every request and response, record bytes included
    "sqlalchemy": logging.WARNING,  # INFO: every statement with its parameters (run contents)
    "psycopg": logging.INFO,
    "urllib3": logging.WARNING,  # DEBUG: URLs with their query strings
    "httpx": logging.WARNING,  # INFO: every request URL
    "httpcore": logging.WARNING,
    "anthropic": logging.WARNING,  # DEBUG: request options and bodies (prompts, tool arguments)
    "openai": logging.WARNING,
}
"""Lowest level each client library logs at unless ``log_client_debug`` is true."""

LOG_FORMAT: Final = "%(asctime)s %(levelname)s %(name)s: %(message)s"

_SUPPORTED_BACKENDS: Final = ("sqlite", "postgresql")


# --------------------------------------------------------------------------- report


class BrokersUnreachable(Exception):
    """No bootstrap server could be reached in time; ``str()`` is the one line to print."""


@dataclass(frozen=True, slots=True)
class PreflightReport:
    """What :func:`preflight` found.

    ``problems``: configuration problems, one :class:`SettingsError` line each; ``brokers``: the one
    broker line when the brokers could not be reached (None when they were, or were not checked);
    ``brokers_checked``: whether the broker check ran; ``source``: where the settings came from.
    """

    problems: tuple[str, ...]
    brokers: str | None
    brokers_checked: bool
    source: str

    @property
    def exit_code(self) -> int:
        """:data:`EXIT_CONFIG` when the configuration has problems, else :data:`EXIT_BROKERS_UNREACHABLE`
        when the brokers could not be reached, else :data:`EXIT_OK`."""
        if self.problems:
            return EXIT_CONFIG
        return EXIT_BROKERS_UNREACHABLE if self.brokers else EXIT_OK

    def error(self) -> SettingsError | BrokersUnreachable | None:
        """The exception describing the failure (the broker line joins the configuration problems)."""
        if self.problems:
            return SettingsError([*self.problems, *([self.brokers] if self.brokers else [])], self.source)
        if self.brokers:
            return BrokersUnreachable(self.brokers)
        return None

    def render(self) -> str:
        """The text to print: the error report, or ``configuration valid: …`` when every check passed."""
        err = self.error()
        if err is not None:
            return str(err)
        checked = "every check passed" if self.brokers_checked else "every check passed; the brokers were not checked"
        return f"configuration valid: {self.source} ({checked})"


def preflight(
    settings: Settings, *, brokers: bool = True, client_config: Mapping[str, Any] | None = None
) -> PreflightReport:
    """Run every configuration check and, when ``brokers``, the broker check; never raises for a bad
    configuration. ``client_config`` holds extra kafka-python settings the daemon's consumer will use
    (security settings, tuning), applied to the broker probe too."""
    problems = check_configuration(settings)
    broker_line = check_brokers(settings, client_config=client_config) if brokers else None
    return PreflightReport(tuple(problems), broker_line, brokers, settings.source)


# --------------------------------------------------------------------------- configuration checks


def check_configuration(settings: Settings, *, skip: Collection[str] = ()) -> list[str]:
    """Every problem of ``settings`` that :class:`Settings` validation cannot see (module docstring,
    step 1), as :class:`SettingsError` lines; ``[]`` when there is none. The checks of the top-level
    keys in ``skip`` are left out (keys whose values were already rejected)."""
    problems: list[str] = []
    problems += _check_rules_and_scoring(settings, skip)
    if "kafka" not in skip:
        problems += _check_topics(settings.kafka)
        problems += check_security(settings.kafka)
    if "store" not in skip:
        problems += _check_store_url(settings.store.url)
    if "http" not in skip:
        problems += _check_http_address(settings.http.host, settings.http.port)
    if "judge" not in skip:
        problems += _check_judge(settings)
    return problems


def with_configuration_checks(error: SettingsError) -> SettingsError:
    """``error`` (from :func:`~monitor.settings.load_settings`) with the problems
    :func:`check_configuration` finds in the keys that were valid, so that one report lists them all;
    ``error`` itself when its settings could not be rebuilt without the bad keys."""
    if error.partial is None:
        return error
    more = check_configuration(error.partial, skip=error.invalid_keys)
    if not more:
        return error
    return SettingsError([*error.problems, *more], error.source)


def _kind_fix(suggestions: tuple[str, ...]) -> str:
    guess = f"did you mean `{suggestions[0]}`? " if suggestions else ""
    return f"{guess}use kinds that `monitor scorers` lists"


def _check_rules_and_scoring(settings: Settings, skip: Collection[str]) -> list[str]:
    from monitor.rules.config import RulesConfigError, RulesProblem
    from monitor.rules.ruleset import RuleSet
    from monitor.sampling.sampler import Sampler
    from monitor.scoring import catalogue
    from monitor.scoring.stage import ScoringStage

    problems: list[str] = []
    ruleset: RuleSet | None = None
    path = None if "rules_file" in skip else settings.rules_file
    if path is not None:
        loc = ("rules_file",)
        if not Path(path).is_file():
            problems.append(
                format_problem(
                    loc,
                    path,
                    "the file does not exist" if not Path(path).exists() else "not a file",
                    f"point {setting_label(loc)} at a rules YAML or JSON file, or remove it",
                )
            )
        else:
            try:
                # as the daemon loads it: every scorer kind must be in the registry (judges included)
                ruleset = RuleSet.load(path)
            except RulesConfigError as exc:
                fix = f"correct {path} (see docs/rules in SCORING.md §3.9)"
                for issue in exc.issues:
                    if isinstance(issue, RulesProblem):
                        problems.append(format_problem(loc, path, f"{issue.key}: {issue.problem}", issue.fix or fix))
                    else:
                        problems.append(format_problem(loc, path, issue, fix))
            except Exception as exc:
                problems.append(format_problem(loc, path, f"cannot be loaded: {exc}", f"correct {path}"))

    unknown = False
    for index, kind in enumerate(() if "scoring" in skip else settings.scoring.checks):
        check_loc = ("scoring", "checks", index)
        try:
            info = catalogue.lookup(kind)
        except catalogue.UnknownScorerKind as exc:
            unknown = True
            problems.append(format_problem(check_loc, kind, "no scorer of this kind", _kind_fix(exc.suggestions)))
            continue
        if info.defaults_problem is not None:  # checks run with default parameters
            problems.append(
                format_problem(
                    check_loc,
                    kind,
                    f"this scorer needs parameters ({info.defaults_problem})",
                    "remove it here and configure it with its parameters under `scorers:` of a rule in the rules file",
                )
            )
    rules_known = not {"rules_file", "sampling"} & set(skip) and (path is None or ruleset is not None)
    if rules_known:  # the scorer ids of the rules are known: check the ids sampling names
        problems += _check_per_scorer_ids(settings, ruleset, catalogue.kinds())
    if not unknown and not problems and not {"rules_file", "scoring", "sampling"} & set(skip):
        # the objects the daemon builds from these settings: whatever they reject, run would too
        try:
            sampler = Sampler(settings.sampling)
            ScoringStage(settings, ruleset, sampler, lambda: datetime.now(UTC))
        except Exception as exc:
            problems.append(
                format_problem(("scoring",), {}, f"the scoring stage cannot be built: {exc}", "correct scoring")
            )
    return problems


def _check_per_scorer_ids(settings: Settings, ruleset: RuleSet | None, kinds: list[str]) -> list[str]:
    """``sampling.per_scorer`` keys are scorer ids: a check of ``scoring.checks``, a scorer id of the
    rules (``<id>[<tool>]`` counts as ``<id>``) or a registered kind; a key that names none of them
    would never apply."""
    ids = set(kinds) | set(settings.scoring.checks)
    if ruleset is not None:
        ids |= {sid for rule in ruleset.config.rules for sid in rule.scorers}
    problems: list[str] = []
    for key in settings.sampling.per_scorer:
        base = key.split("[", 1)[0] if key.endswith("]") and "[" in key else key
        if base in ids:
            continue
        close = difflib.get_close_matches(base, sorted(ids), n=1)
        guess = f"did you mean `{close[0]}`? " if close else ""
        problems.append(
            format_problem(
                ("sampling", "per_scorer", key),
                settings.sampling.per_scorer[key],
                f"no scorer has the id {key!r}, so this rate would never apply",
                f"{guess}use the id of a check in scoring.checks, of a scorer in the rules file, or a scorer kind",
            )
        )
    return problems


def _check_judge(settings: Settings) -> list[str]:
    """The ``judge`` section: the keys of ``judge.models`` and ``judge.budgets.per_judge`` are judge kinds; a
    ``usd_per_day`` budget can price every model it covers (else every call would be refused as unpriced);
    when ``judge.enabled``, the API key can be read (the key itself is never quoted)."""
    from monitor.scoring import catalogue

    judge = settings.judge
    kinds = catalogue.judge_kinds()
    problems: list[str] = []
    named: tuple[tuple[tuple[str, ...], Mapping[str, Any]], ...] = (
        (("judge", "models"), judge.models),
        (("judge", "budgets", "per_judge"), {k: v.model_dump() for k, v in judge.budgets.per_judge.items()}),
    )
    for loc, mapping in named:
        for key, value in mapping.items():
            if key in kinds:
                continue
            close = difflib.get_close_matches(key, kinds, n=1)
            guess = f"did you mean `{close[0]}`? " if close else ""
            problems.append(
                format_problem(
                    (*loc, key),
                    value,
                    f"{key!r} is not a judge kind, so this would never apply",
                    f"{guess}use a judge kind that `monitor scorers` lists ({', '.join(kinds)})",
                )
            )
    problems += _check_judge_prices(judge)
    if judge.enabled:
        problems += _check_judge_api_key(judge)
    return problems


def _check_judge_prices(judge: JudgeSettings) -> list[str]:
    """A model a ``usd_per_day`` budget covers must be in ``judge.prices``; each unpriced model once, at the
    key that chose it (``judge.model`` or ``judge.models.<kind>``)."""
    from monitor.scoring import catalogue
    from monitor.scoring.judges.cost import price_for

    covered: dict[str, tuple[str, ...]] = {}  # model -> the key that chose it
    everything = judge.budgets.total.usd_per_day is not None
    for kind in catalogue.judge_kinds():
        per_kind = judge.budgets.per_judge.get(kind)
        if everything or (per_kind is not None and per_kind.usd_per_day is not None):
            chosen_by: tuple[str, ...] = ("judge", "models", kind) if kind in judge.models else ("judge", "model")
            covered.setdefault(judge.model_for(kind), chosen_by)
    problems: list[str] = []
    for model, key in covered.items():
        if price_for(model, judge.prices) is None:
            problems.append(
                format_problem(
                    key,
                    model,
                    "this model has no price in judge.prices, so a usd_per_day budget would refuse every call to it",
                    f"add judge.prices.{model}: {{input_per_mtok: …, output_per_mtok: …}} (and set "
                    "judge.prices_version), or choose a model judge.prices lists",
                )
            )
    return problems


def _check_judge_api_key(judge: JudgeSettings) -> list[str]:
    """With judges enabled, the key must be readable: ``judge.api_key_file`` when set, else the variable
    ``judge.api_key_env``. Problems name the file or the variable, never the key."""
    if judge.api_key_file is not None:
        loc: tuple[str, ...] = ("judge", "api_key_file")
        path = Path(judge.api_key_file)
        fix = "mount the API key Secret at that path, or correct judge.api_key_file"
        try:
            key = judge.api_key()
        except FileNotFoundError:
            return [format_problem(loc, path, "the file does not exist", fix)]
        except IsADirectoryError:
            return [format_problem(loc, path, "is a directory, not the file holding the key", fix)]
        except PermissionError:
            return [format_problem(loc, path, "cannot be read by this user", f"{fix}, readable by the daemon's user")]
        except (OSError, UnicodeDecodeError) as exc:
            return [format_problem(loc, path, f"cannot be read ({type(exc).__name__})", fix)]
        if key is None:
            return [format_problem(loc, path, "the file is empty", "write the Anthropic API key into it")]
        return []
    if judge.api_key() is None:
        variable = judge.api_key_env
        return [
            format_problem(
                ("judge", "api_key_env"),
                variable,
                f"judge.enabled is true but the environment variable {variable} is unset or empty",
                f"give the daemon {variable} from a secret store, or set judge.api_key_file to a file holding the "
                "key (a mounted Kubernetes Secret), or set judge.enabled: false",
            )
        ]
    return []


def _check_topics(kafka: KafkaSettings) -> list[str]:
    from kafka.util import ensure_valid_topic_name

    problems: list[str] = []
    named = [(("kafka", "spans_topic"), kafka.spans_topic)]
    if kafka.logs_topic is not None:
        named.append((("kafka", "logs_topic"), kafka.logs_topic))
    for loc, topic in named:
        for checked, label in ((topic, "the topic"), (topic + kafka.dead_letter_suffix, "its dead-letter topic")):
            try:
                ensure_valid_topic_name(checked)
            except (TypeError, ValueError) as exc:
                bad_loc = loc if checked == topic else ("kafka", "dead_letter_suffix")
                value = topic if checked == topic else kafka.dead_letter_suffix
                problems.append(
                    format_problem(
                        bad_loc,
                        value,
                        f"{label} {checked!r} is not a legal Kafka topic name ({exc})",
                        "use at most 249 ASCII letters, digits, '.', '_' and '-'",
                    )
                )
                break
    return problems


def _check_store_url(url: str) -> list[str]:
    import sqlalchemy as sa

    from monitor.store import create_store_engine

    loc = ("store", "url")
    example = "sqlite:///path/monitor.db or postgresql+psycopg://user@host/db"
    try:
        backend = sa.make_url(url).get_backend_name()
    except sa.exc.ArgumentError:
        return [format_problem(loc, url, "not a database URL", f"write {example}")]
    if backend not in (*_SUPPORTED_BACKENDS, "postgres"):
        unsupported = f"the store supports SQLite and PostgreSQL, not {backend}"
        return [format_problem(loc, url, unsupported, f"write {example}")]
    try:
        engine = create_store_engine(url)
    except sa.exc.NoSuchModuleError as exc:
        return [format_problem(loc, url, f"unknown database or driver ({exc})", f"write {example}")]
    except ImportError as exc:
        driver = exc.name or str(exc)
        return [
            format_problem(
                loc,
                url,
                f"its database driver is not installed (cannot import {driver!r})",
                "install the driver into the daemon's environment, or use postgresql+psycopg:// (psycopg 3, "
                "installed with the package) or sqlite:///",
            )
        ]
    except Exception as exc:
        return [format_problem(loc, url, f"cannot be used: {exc}", f"write {example}")]
    try:
        dialect, database = engine.dialect, engine.url.database
        if dialect.is_async:
            return [
                format_problem(
                    loc, url, f"{engine.url.drivername} is an asyncio driver", "use postgresql+psycopg:// (sync)"
                )
            ]
        if dialect.name == "sqlite" and database and database != ":memory:" and not database.startswith("file:"):
            file = Path(database)
            if file.is_dir():
                return [format_problem(loc, url, f"{file} is a directory", "name a database file")]
            if not file.parent.is_dir():
                return [
                    format_problem(
                        loc, url, f"the directory {file.parent} does not exist", "create it or name another file"
                    )
                ]
    finally:
        engine.dispose()
    return []


def _check_http_address(host: str, port: int) -> list[str]:
    """Bind ``(host, port)`` the way the HTTP server does (IPv6 when the host has a ':', SO_REUSEADDR),
    listen, release."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(1)
    except socket.gaierror as exc:
        return [
            format_problem(
                ("http", "host"), host, f"does not resolve ({exc.strerror})", "use an address of this machine"
            )
        ]
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            return [
                format_problem(
                    ("http", "port"),
                    port,
                    f"already in use on {host}",
                    f"stop what listens there or set {setting_label(('http', 'port'))} to a free port (0 = any)",
                )
            ]
        if exc.errno in (errno.EACCES, errno.EPERM):
            return [
                format_problem(
                    ("http", "port"),
                    port,
                    "binding it needs privileges",
                    "use a port from 1024 up, or grant CAP_NET_BIND_SERVICE",
                )
            ]
        if exc.errno == errno.EADDRNOTAVAIL:
            return [
                format_problem(
                    ("http", "host"),
                    host,
                    "not an address of this machine",
                    "use 0.0.0.0 (every interface), 127.0.0.1 or one of this machine's addresses",
                )
            ]
        return [format_problem(("http", "host"), host, f"cannot be bound: {exc.strerror or exc}", "check http.host")]
    finally:
        sock.close()
    return []


# --------------------------------------------------------------------------- brokers


def _split_server(entry: str) -> tuple[str, int]:
    """``host[:port]`` or ``[v6]:port`` → (host, port); the port defaults to 9092 as in kafka-python."""
    if entry.startswith("["):
        host, _, rest = entry[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else 9092
    if entry.count(":") == 1:
        host, port = entry.split(":")
        return host, int(port)
    return entry, 9092


def _tcp_reason(server: str, timeout_s: float) -> str | None:
    """None when ``server`` accepts a TCP connection within ``timeout_s``, else why not."""
    host, port = _split_server(server)
    try:
        socket.create_connection((host, port), timeout=max(timeout_s, 0.01)).close()
    except socket.gaierror as exc:
        return f"{server}: the host name does not resolve ({exc.strerror})"
    except ConnectionRefusedError:
        return f"{server}: connection refused"
    except TimeoutError:
        return f"{server}: no answer"
    except OSError as exc:
        return f"{server}: {exc.strerror or exc}"
    return None


_quiet_lock = threading.Lock()
_quiet_depth: dict[str, int] = {}
_quiet_saved: dict[str, int] = {}


@contextlib.contextmanager
def _quiet(logger_name: str, enabled: bool) -> Iterator[None]:
    """Silence ``logger_name`` (and its children) for the block: the probe's retries are summarised
    in one line instead. Nested and concurrent blocks (several daemons in one process) restore the
    level the first one found once the last one ends."""
    if not enabled:
        yield
        return
    logger = logging.getLogger(logger_name)
    with _quiet_lock:
        if _quiet_depth.get(logger_name, 0) == 0:
            _quiet_saved[logger_name] = logger.level
            logger.setLevel(logging.CRITICAL + 1)
        _quiet_depth[logger_name] = _quiet_depth.get(logger_name, 0) + 1
    try:
        yield
    finally:
        with _quiet_lock:
            _quiet_depth[logger_name] -= 1
            if _quiet_depth[logger_name] == 0:
                logger.setLevel(_quiet_saved.pop(logger_name))


def check_brokers(
    settings: Settings, *, client_config: Mapping[str, Any] | None = None, timeout_s: float | None = None
) -> str | None:
    """None when a bootstrap server of ``settings.kafka`` answers as a Kafka broker within ``timeout_s``
    (default ``kafka.startup_timeout_s``), else the one line saying why not.

    First a TCP connection to each server in turn (each gets an equal share of half the time; the
    first that accepts ends this step), then kafka-python's own bootstrap (ApiVersions and Metadata,
    with ``client_config`` applied) in the time left. kafka-python's log lines during the probe are
    silenced unless ``log_client_debug``. A kafka-python configuration error in ``client_config`` is
    reported as a broker line too (it is not a setting of ours).
    """
    kafka = settings.kafka
    budget = kafka.startup_timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + budget
    servers = [s.strip() for s in kafka.bootstrap_servers.split(",") if s.strip()]
    fix = (
        f"start the brokers or correct {setting_label(('kafka', 'bootstrap_servers'))}; "
        f"{setting_label(('kafka', 'startup_timeout_s'))} sets how long to wait"
    )

    def line(reason: str) -> str:
        return mask_secrets(
            f"cannot reach the Kafka brokers at {','.join(servers)} within {budget:g}s: {reason}. Fix: {fix}"
        )

    try:
        security = build_security(kafka)
    except KafkaSecurityError as exc:
        keys = sorted({problem.split(" = ", 1)[0] for problem in exc.problems})
        return line(f"not tried: the security settings {', '.join(keys)} cannot be used (see above)")

    reasons: list[str] = []
    reachable: str | None = None
    for index, server in enumerate(servers):
        share = (deadline - budget / 2 - time.monotonic()) / (len(servers) - index)
        reason = _tcp_reason(server, share)
        if reason is None:
            reachable = server
            break
        reasons.append(reason)
    if reachable is None:
        return line("; ".join(reasons))
    if security.tls:
        # one TLS handshake (and one ApiVersions request) of our own first: a wrong CA, host name or client
        # certificate is reported as such, naming the kafka.tls key to change, not as a broker that gives no answer
        host, port = _split_server(reachable)
        tls_problem = probe_tls(kafka, security, host, port, max(0.1, (deadline - time.monotonic()) / 2))
        if tls_problem is not None:
            return mask_secrets(
                f"cannot connect to the Kafka brokers at {','.join(servers)} over TLS: {tls_problem.problem}. "
                f"Fix: {tls_problem.fix}"
            )

    from kafka import KafkaConsumer
    from kafka.errors import KafkaConfigurationError, KafkaError

    left_ms = max(100, int((deadline - time.monotonic()) * 1000))
    config: dict[str, Any] = {
        "bootstrap_servers": servers,
        "group_id": kafka.group_id,
        "client_id": f"monitor-{kafka.group_id}-preflight",
        "enable_auto_commit": False,
        **security.kwargs(),  # the consumer's TLS and SASL arguments
    }
    config.update(client_config or {})
    config["bootstrap_timeout_ms"] = left_ms
    # a consumer whose constructor fails leaves its network client (and IO thread) running: keep a
    # handle on it through the documented ``kafka_client`` factory so the probe can close it
    make_client = config.get("kafka_client", KafkaConsumer.DEFAULT_CONFIG["kafka_client"])
    clients: list[Any] = []

    def kafka_client(**kwargs: Any) -> Any:
        clients.append(make_client(**kwargs))
        return clients[-1]

    config["kafka_client"] = kafka_client
    with _quiet("kafka", not settings.log_client_debug), contextlib.ExitStack() as cleanup:
        cleanup.callback(_close_all, clients)
        try:
            consumer = KafkaConsumer(**config)  # bootstraps eagerly: ApiVersions, then Metadata
        except KafkaConfigurationError as exc:
            return line(f"the Kafka client configuration is invalid: {exc}")
        except KafkaError as exc:
            if security.mechanism is not None:
                return _sasl_line(kafka, servers, exc, clients)
            return line(
                f"a server accepted the connection but gave no Kafka answer ({exc}); "
                "check that it is a Kafka listener and that the security settings match"
            )
        except Exception as exc:
            return line(f"{type(exc).__name__}: {exc}")
        _close_quietly(consumer)
    return None


def _sasl_line(kafka: KafkaSettings, servers: list[str], exc: Exception, clients: list[Any]) -> str:
    """The broker line when a SASL client could not bootstrap: the authentication error kafka-python kept for a
    node (wrong credentials, a mechanism the brokers do not enable, a token that cannot be fetched) when there is
    one, naming the settings to check."""
    cause: Any = exc
    for client in clients:
        failures = getattr(getattr(client, "_manager", None), "_auth_failures", None) or getattr(
            client, "_auth_failures", None
        )
        if failures:
            cause = next(iter(failures.values()))
            break
    sasl = kafka.sasl
    if sasl.mechanism == "OAUTHBEARER":
        what = "kafka.sasl.oauth (the token file, or the client id and secret of the token endpoint)"
    else:
        source = "kafka.sasl.password_file" if sasl.password_file is not None else "kafka.sasl.password_env"
        what = f"{setting_label(('kafka', 'sasl', 'username'))} = {sasl.username!r} and the password in {source}"
    return mask_secrets(
        f"cannot authenticate to the Kafka brokers at {','.join(servers)} with SASL {sasl.mechanism} "
        f"({type(cause).__name__}: {cause}). Fix: check {what}, and that the brokers enable {sasl.mechanism} "
        f"on this listener ({setting_label(('kafka', 'security_protocol'))} = {kafka.security_protocol})"
    )


def _close_quietly(client: Any) -> None:
    """Close a kafka-python consumer or network client (idempotent), logging a failure at DEBUG."""
    try:
        if hasattr(client, "_coordinator"):
            client.close(autocommit=False)
        else:
            client.close()
    except Exception:
        log.debug("closing the broker probe failed", exc_info=True)


def _close_all(clients: list[Any]) -> None:
    for client in clients:
        _close_quietly(client)


# --------------------------------------------------------------------------- logging


class MaskingFormatter(logging.Formatter):
    """A formatter whose output (message, arguments and traceback alike) has its secrets masked."""

    def format(self, record: logging.LogRecord) -> str:
        return mask_secrets(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line (``log_format: json``): ``time`` (ISO 8601, UTC, milliseconds), ``level``,
    ``logger``, ``message`` and, with an exception, ``exception`` (the traceback); every value masked like the text
    lines. Log pipelines (Loki, Elasticsearch, Cloud Logging) read the fields without parsing."""

    def format(self, record: logging.LogRecord) -> str:
        when = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
        doc: dict[str, str] = {
            "time": when,
            "level": record.levelname,
            "logger": record.name,
            "message": mask_secrets(record.getMessage()),
        }
        if record.exc_info:
            doc["exception"] = mask_secrets(self.formatException(record.exc_info))
        elif record.exc_text:
            doc["exception"] = mask_secrets(record.exc_text)
        return json.dumps(doc, ensure_ascii=False)


class _MonitorHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """The root handler :func:`configure_logging` installs (and replaces when called again)."""


def configure_logging(settings: Settings, stream: IO[str]) -> logging.Handler:
    """Log to ``stream`` at ``settings.log_level`` through a :class:`MaskingFormatter` (``log_format: json``: a
    :class:`JsonFormatter`), with each client
    library of :data:`CLIENT_LOGGER_FLOORS` held at its floor unless ``settings.log_client_debug``.

    Replaces the handler of an earlier call; leaves other handlers (test capture) alone. Returns the
    handler.
    """
    root = logging.getLogger()
    for old in [h for h in root.handlers if isinstance(h, _MonitorHandler)]:
        root.removeHandler(old)
    handler = _MonitorHandler(stream)
    handler.setFormatter(JsonFormatter() if settings.log_format == "json" else MaskingFormatter(LOG_FORMAT))
    root.addHandler(handler)
    level = logging.getLevelName(settings.log_level)
    root.setLevel(level)
    for name, floor in CLIENT_LOGGER_FLOORS.items():
        logging.getLogger(name).setLevel(logging.NOTSET if settings.log_client_debug else max(floor, level))
    return handler
