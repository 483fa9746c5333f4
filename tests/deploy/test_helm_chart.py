"""The Helm chart (helm/agent-tool-monitor), rendered and linted by Helm's real engine, no cluster needed.

* Helm: PyPI ``helm-python-sdk`` (the Helm v4 Go SDK through a bundled ``libhelm_c.so``): ``helm lint --strict``
  and the template engine, for the default values and for "everything on" values.
* Kubernetes: every rendered built-in object is validated by ``kubernetes-validate`` (the API's OpenAPI schemas,
  strict: an unknown field is an error; a removed API version is an error) for the chart's oldest supported
  Kubernetes (``kubeVersion`` in Chart.yaml) and the newest one the package knows.
* CRDs: ServiceMonitor and PrometheusRule (prometheus-operator) and ScaledObject and TriggerAuthentication (KEDA)
  are validated against the ``openAPIV3Schema`` of their CRDs, vendored in tests/deploy/schemas/ (sources and
  versions there), with unknown fields rejected as ``kubectl apply`` (strict field validation) does.
* values.schema.json: bad values are refused with the path and the reason.
* The monitor's settings: the ConfigMap's monitor.yaml loads with ``monitor.settings.load_settings``.
* ``make sync-chart`` copies deploy/prometheus/rules.yaml and dashboards/*.json into the chart, and
  :func:`test_chart_copies_match_sources` (run by ``make lint``) fails while the copies differ.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import helm_python as helm
import jsonschema
import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "agent-tool-monitor"
SCHEMAS = Path(__file__).resolve().parent / "schemas"
RULES_SRC = ROOT / "deploy" / "prometheus" / "rules.yaml"
DASHBOARDS_SRC = ROOT / "dashboards"
RULES_COPY = Path("files/prometheus/rules.yaml")
DASHBOARDS_COPY = Path("files/dashboards")

RELEASE, NAMESPACE = "atm", "observability"
FULLNAME = f"{RELEASE}-agent-tool-monitor"

# The chart's kubeVersion floor and the newest Kubernetes kubernetes-validate bundles.
KUBE_VERSIONS = ["1.27.0", kubernetes_validate.latest_version()]

CRD_SCHEMA_FILES = {
    ("monitoring.coreos.com/v1", "ServiceMonitor"): "servicemonitor.json",
    ("monitoring.coreos.com/v1", "PrometheusRule"): "prometheusrule.json",
    ("keda.sh/v1alpha1", "ScaledObject"): "scaledobject.json",
    ("keda.sh/v1alpha1", "TriggerAuthentication"): "triggerauthentication.json",
}

FULL_VALUES: dict[str, Any] = {
    "replicaCount": 2,
    "image": {"repository": "registry.example/agent-tool-monitor", "tag": "0.1.0"},
    "commonLabels": {"team": "agents"},
    "kafka": {
        "bootstrapServers": "kafka-0.kafka:9093,kafka-1.kafka:9093",
        "spansTopic": "otlp_spans",
        "logsTopic": "otlp_logs",
        "groupId": "agent-tool-monitor",
        "tls": {
            "enabled": True,
            "existingSecret": "kafka-tls",
            "caKey": "ca.crt",
            "certKey": "tls.crt",
            "keyKey": "tls.key",
            "checkHostname": True,
        },
        "sasl": {
            "enabled": True,
            "mechanism": "SCRAM-SHA-512",
            "username": "monitor",
            "existingSecret": "kafka-sasl",
            "passwordKey": "password",
        },
    },
    "store": {"existingSecret": "monitor-store", "urlKey": "url"},
    "judge": {"enabled": True, "existingSecret": "anthropic", "apiKeyKey": "api-key"},
    "config": {
        "sampling": {"rate": 0.5, "per_agent": {"planner": 1.0}},
        "metrics": {"known_agents": ["planner"], "known_tools": ["search_flights"]},
        "judge": {"model": "claude-haiku-4-5", "budgets": {"total": {"usd_per_day": 25}}},
        "tracing": {"url_template": "https://grafana.example/explore?traceId={trace_id}"},
    },
    "extraEnv": [{"name": "MONITOR_LOG_LEVEL", "value": "INFO"}],
    "extraSecretMounts": [
        {
            "name": "corp-ca",
            "secretName": "corp-ca",
            "mountPath": "/var/run/secrets/corp-ca",
            "items": [{"key": "ca.crt", "path": "ca.crt"}],
            "defaultMode": 0o440,
        }
    ],
    "serviceMonitor": {
        "enabled": True,
        "labels": {"release": "kube-prometheus-stack"},
        "metricRelabelings": [{"action": "drop", "regex": "python_gc_.*", "sourceLabels": ["__name__"]}],
    },
    "prometheusRule": {"enabled": True, "labels": {"release": "kube-prometheus-stack"}},
    "dashboards": {"enabled": True, "annotations": {"grafana_folder": "Agents"}},
    "report": {"enabled": True, "webhook": {"existingSecret": "report-webhook", "urlKey": "url"}},
    "autoscaling": {
        "enabled": True,
        "mode": "keda",
        "minReplicas": 1,
        "maxReplicas": 4,
        "keda": {"fallbackReplicas": 2},
    },
    "podDisruptionBudget": {"enabled": True, "maxUnavailable": 1},
    "networkPolicy": {
        "enabled": True,
        "ingressFrom": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}],
        "egress": {"extra": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/8"}}], "ports": [{"port": 4318}]}]},
    },
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "agent-tool-monitor"}},
        }
    ],
}


def _with(base: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A deep copy of ``base`` with dotted keys changed: ``_with(FULL_VALUES, **{"autoscaling.mode": "hpa"})``."""
    out = copy.deepcopy(base)
    for dotted, value in changes.items():
        node = out
        *parents, last = dotted.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = value
    return out


VALUE_SETS: dict[str, dict[str, Any]] = {
    "default": {},
    "full": FULL_VALUES,
    "full-hpa": _with(FULL_VALUES, **{"autoscaling.mode": "hpa"}),
    # OAUTHBEARER with the client-credentials grant (KEDA then needs a TriggerAuthentication of its own)
    "oauthbearer": _with(
        FULL_VALUES,
        **{
            "kafka.tls": {"enabled": True, "existingSecret": "", "caKey": ""},  # the system CAs
            "kafka.sasl": {
                "enabled": True,
                "mechanism": "OAUTHBEARER",
                "existingSecret": "kafka-oauth",
                "oauth": {
                    "endpointUrl": "https://login.example/oauth2/token",
                    "clientId": "monitor",
                    "scope": "kafka",
                    "extensions": {"logicalCluster": "lkc-123"},
                },
            },
            "autoscaling.keda.authenticationRef": "kafka-oauth-keda",
        },
    ),
    # SASL without TLS (a trusted network), a token-less TLS: SASL_PLAINTEXT; plain values elsewhere
    "sasl-plaintext": {
        "kafka": {"sasl": {"enabled": True, "mechanism": "SCRAM-SHA-256", "username": "u", "existingSecret": "s"}},
        "store": {"existingSecret": "db"},
        "autoscaling": {"enabled": True},
    },
    # a managed Kafka with only a CA (no client certificate) and SASL/PLAIN; SQLite on a claim; no extras
    "tls-ca-sasl-plain-sqlite": {
        "kafka": {
            "tls": {"enabled": True, "existingSecret": "kafka-ca"},
            "sasl": {"enabled": True, "mechanism": "PLAIN", "username": "u", "existingSecret": "kafka-sasl"},
        },
        "store": {"sqlite": {"existingClaim": "monitor-sqlite"}},
        "networkPolicy": {"enabled": True, "egress": {"allowAll": True}},
    },
}


# --------------------------------------------------------------------------- the chart's copies


def chart_copy_differences(rules_src: Path, dashboards_src: Path, chart: Path) -> list[str]:
    """What differs between the sources and the chart's copies (empty when `make sync-chart` is up to date):
    a source without its copy, a copy with other bytes, a copy without a source."""
    problems: list[str] = []
    rules_copy = chart / RULES_COPY
    if rules_src.is_file() != rules_copy.is_file():
        problems.append(
            f"{rules_copy.relative_to(chart)} is missing"
            if rules_src.is_file()
            else f"{rules_copy.relative_to(chart)} has no source {rules_src}"
        )
    elif rules_src.is_file() and rules_src.read_bytes() != rules_copy.read_bytes():
        problems.append(f"{rules_copy.relative_to(chart)} differs from {rules_src}")
    sources = {p.name: p for p in dashboards_src.glob("*.json")} if dashboards_src.is_dir() else {}
    copies = {p.name: p for p in (chart / DASHBOARDS_COPY).glob("*.json")}
    for name in sorted(sources.keys() - copies.keys()):
        problems.append(f"{DASHBOARDS_COPY / name} is missing")
    for name in sorted(copies.keys() - sources.keys()):
        problems.append(f"{DASHBOARDS_COPY / name} has no source in {dashboards_src}")
    for name in sorted(sources.keys() & copies.keys()):
        if sources[name].read_bytes() != copies[name].read_bytes():
            problems.append(f"{DASHBOARDS_COPY / name} differs from {sources[name]}")
    return problems


def test_chart_copies_match_sources() -> None:
    """`make lint` runs this: the chart ships exactly deploy/prometheus/rules.yaml and dashboards/*.json."""
    problems = chart_copy_differences(RULES_SRC, DASHBOARDS_SRC, CHART)
    assert not problems, "the chart's copies are out of date; run `make sync-chart`:\n  " + "\n  ".join(problems)


STANDIN_RULES = """\
groups:
  - name: standin
    rules:
      - alert: AgentToolMonitorDown
        expr: up{job=~".*agent-tool-monitor.*"} == 0
        for: 5m
        labels: {severity: critical}
        annotations:
          summary: 'agent-tool-monitor {{ $labels.instance }} is down'
"""
STANDIN_DASHBOARD = {"title": "Stand-in", "uid": "standin", "panels": [], "schemaVersion": 39}


def _sync_chart(chart: Path, rules_src: Path, dashboards_src: Path) -> None:
    """`make sync-chart` itself, pointed at another chart directory and other sources."""
    subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(ROOT),
            "sync-chart",
            f"CHART_DIR={chart}",
            f"CHART_RULES_SRC={rules_src}",
            f"CHART_DASHBOARDS_SRC={dashboards_src}",
        ],
        check=True,
        capture_output=True,
        text=True,
    )


def _standin_sources(where: Path) -> tuple[Path, Path]:
    rules = where / "rules.yaml"
    rules.write_text(STANDIN_RULES)
    dashboards = where / "dashboards"
    dashboards.mkdir()
    (dashboards / "standin.json").write_text(json.dumps(STANDIN_DASHBOARD, indent=2) + "\n")
    return rules, dashboards


def test_sync_chart_copies_and_the_check_sees_every_difference(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    rules, dashboards = _standin_sources(tmp_path)
    (chart / DASHBOARDS_COPY).mkdir(parents=True, exist_ok=True)
    (chart / DASHBOARDS_COPY / "removed-upstream.json").write_text("{}\n")

    _sync_chart(chart, rules, dashboards)
    assert chart_copy_differences(rules, dashboards, chart) == []
    assert sorted(p.name for p in (chart / DASHBOARDS_COPY).iterdir()) == ["standin.json"]  # stale copy gone
    assert (chart / RULES_COPY).read_text() == STANDIN_RULES

    rules.write_text(STANDIN_RULES.replace("5m", "10m"))
    (dashboards / "new.json").write_text("{}\n")
    assert chart_copy_differences(rules, dashboards, chart) == [
        "files/prometheus/rules.yaml differs from " + str(rules),
        "files/dashboards/new.json is missing",
    ]
    (chart / RULES_COPY).unlink()
    assert chart_copy_differences(rules, dashboards, chart)[0] == "files/prometheus/rules.yaml is missing"


@pytest.fixture(scope="session")
def synced_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the chart filled by `make sync-chart` from the real sources, or, for a source another change
    has not written yet, from a stand-in made here (never in deploy/ or dashboards/)."""
    where = tmp_path_factory.mktemp("synced-chart")
    chart = where / "chart"
    shutil.copytree(CHART, chart)
    standin_rules, standin_dashboards = _standin_sources(where)
    rules = RULES_SRC if RULES_SRC.is_file() else standin_rules
    dashboards = DASHBOARDS_SRC if any(DASHBOARDS_SRC.glob("*.json")) else standin_dashboards
    _sync_chart(chart, rules, dashboards)
    return chart


# --------------------------------------------------------------------------- rendering


def render(values: dict[str, Any], chart: Path = CHART) -> list[dict[str, Any]]:
    """The chart's objects for ``values`` (Helm's template engine, offline), in template order."""
    with helm.Chart.load(str(chart)) as loaded:
        manifests = loaded.render(values, name=RELEASE, namespace=NAMESPACE)
    docs: list[dict[str, Any]] = []
    for path in sorted(manifests):
        if path.endswith("NOTES.txt"):
            continue
        docs.extend(doc for doc in yaml.safe_load_all(manifests[path]) if doc)
    return docs


def find(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(docs, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, got {[d['metadata']['name'] for d in found]}"
    return found[0]


def chart_for(case: str, synced: Path) -> Path:
    """Default values render the chart as it is in the repository; the others the synced copy (the
    PrometheusRule needs the rules copy)."""
    return CHART if case == "default" else synced


@pytest.fixture(scope="session")
def rendered(synced_chart: Path) -> dict[str, list[dict[str, Any]]]:
    return {case: render(values, chart_for(case, synced_chart)) for case, values in VALUE_SETS.items()}


@pytest.mark.parametrize("case", list(VALUE_SETS))
def test_helm_lint_strict(case: str, synced_chart: Path) -> None:
    report = helm.lint(
        str(chart_for(case, synced_chart)),
        values=VALUE_SETS[case],
        strict=True,
        namespace=NAMESPACE,
        kube_version="v" + KUBE_VERSIONS[-1],
    )
    assert report["errors"] == [], report
    # Severity 1 is information ("icon is recommended"); warnings and errors fail.
    assert [m for m in report["messages"] if m["severity"] >= 2] == [], report


def test_default_and_full_values_render_the_expected_objects(rendered: dict[str, list[dict[str, Any]]]) -> None:
    dashboards = sorted(p.name for p in (CHART / DASHBOARDS_COPY).glob("*.json"))
    kinds = sorted(d["kind"] for d in rendered["default"])
    assert kinds == sorted(["ConfigMap", "Deployment", "Service", "ServiceAccount"] + ["ConfigMap"] * len(dashboards))
    full = sorted(d["kind"] for d in rendered["full"])
    for kind in (
        "ConfigMap",
        "CronJob",
        "Deployment",
        "NetworkPolicy",
        "PodDisruptionBudget",
        "PrometheusRule",
        "ScaledObject",
        "Service",
        "ServiceAccount",
        "ServiceMonitor",
        "TriggerAuthentication",
    ):
        assert kind in full, kind
    assert "HorizontalPodAutoscaler" not in full
    hpa_kinds = {d["kind"] for d in rendered["full-hpa"]}
    assert "HorizontalPodAutoscaler" in hpa_kinds
    assert not hpa_kinds & {"ScaledObject", "TriggerAuthentication"}  # KEDA or the HPA, never both


# --------------------------------------------------------------------------- validation


def _strict(schema: Any) -> Any:
    """The CRD schema as the API server applies it with strict field validation (``kubectl apply`` since 1.27):
    an object schema that lists its properties and neither allows more (``additionalProperties``) nor
    preserves unknown fields rejects any other field."""
    if isinstance(schema, list):
        return [_strict(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _strict(v) for k, v in schema.items()}
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def crd_validator(api_version: str, kind: str) -> jsonschema.protocols.Validator:
    vendored = json.loads((SCHEMAS / CRD_SCHEMA_FILES[(api_version, kind)]).read_text())
    assert (vendored["apiVersion"], vendored["kind"]) == (api_version, kind)
    schema = _strict(vendored["openAPIV3Schema"])
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft7Validator)
    return cls(schema)


def validate_object(doc: dict[str, Any], kube_version: str) -> None:
    """Kubernetes' own schemas for built-in kinds, the vendored CRD schemas for the custom resources (their
    metadata checked as ObjectMeta by Kubernetes' schema). Raises on the first problem."""
    key = (doc["apiVersion"], doc["kind"])
    if key in CRD_SCHEMA_FILES:
        errors = sorted(crd_validator(*key).iter_errors(doc), key=lambda e: list(e.absolute_path))
        if errors:
            raise AssertionError(
                f"{doc['kind']} {doc['metadata'].get('name')}: "
                + "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors)
            )
        meta_only = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": doc["metadata"]}
        kubernetes_validate.validate(meta_only, kube_version, strict=True)
        return
    # SchemaNotFoundError (a removed or unknown API version) fails the test as well as ValidationError.
    kubernetes_validate.validate(doc, kube_version, strict=True)


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
@pytest.mark.parametrize("case", list(VALUE_SETS))
def test_every_rendered_object_validates(
    case: str, kube_version: str, rendered: dict[str, list[dict[str, Any]]]
) -> None:
    docs = rendered[case]
    assert docs
    for doc in docs:
        validate_object(doc, kube_version)
        assert doc["metadata"].get("namespace") == NAMESPACE, doc["metadata"]


def test_validators_reject_what_the_api_server_would() -> None:
    """The validation above has teeth: a typo, a wrong type, a removed API version and a bad CRD field fail."""
    deployment = one(render({}), "Deployment")
    typo = copy.deepcopy(deployment)
    typo["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    with pytest.raises(kubernetes_validate.ValidationError, match="imagePullPolcy"):
        validate_object(typo, KUBE_VERSIONS[-1])
    with pytest.raises(kubernetes_validate.SchemaNotFoundError):
        validate_object(
            {"apiVersion": "policy/v1beta1", "kind": "PodDisruptionBudget", "metadata": {"name": "x"}}, "1.27.0"
        )

    service_monitor = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": "x", "namespace": NAMESPACE},
        "spec": {"selector": {}, "endpoints": [{"port": "http-metrics", "interval": "30s"}]},
    }
    validate_object(service_monitor, KUBE_VERSIONS[-1])
    bad = copy.deepcopy(service_monitor)
    bad["spec"]["endpoints"][0]["interval"] = "thirty seconds"
    with pytest.raises(AssertionError, match="interval"):
        validate_object(bad, KUBE_VERSIONS[-1])
    bad = copy.deepcopy(service_monitor)
    bad["spec"]["endpoints"][0]["portt"] = "http-metrics"
    with pytest.raises(AssertionError, match="portt"):
        validate_object(bad, KUBE_VERSIONS[-1])
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "x", "namespace": NAMESPACE},
        "spec": {"scaleTargetRef": {"name": "x"}, "triggers": [{"type": "kafka", "metadata": {"lagThreshold": 10}}]},
    }
    with pytest.raises(AssertionError, match="lagThreshold"):
        validate_object(scaled, KUBE_VERSIONS[-1])
    rule = {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "x", "namespace": NAMESPACE, "labels": {"a": 1}},
        "spec": {"groups": [{"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}]}]},
    }
    with pytest.raises(kubernetes_validate.ValidationError):  # a label value that is not a string (ObjectMeta)
        validate_object(rule, KUBE_VERSIONS[-1])


# --------------------------------------------------------------------------- values.schema.json and guards


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": "three"}, "at '/replicaCount': got string, want integer"),
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"autoscaling": {"mode": "both"}}, "at '/autoscaling/mode': value must be one of 'keda', 'hpa'"),
        ({"kafka": {"sasl": {"mechanism": "SCRAM-SHA-1"}}}, "at '/kafka/sasl/mechanism': value must be one of"),
        ({"kafka": {"spansTopic": "spans topic"}}, "at '/kafka/spansTopic'"),
        ({"serviceMonitor": {"interval": 30}}, "at '/serviceMonitor/interval': got number, want string"),
        ({"report": {"schedule": "every monday"}}, "at '/report/schedule': 'every monday' does not match pattern"),
        ({"store": {"sqlite": {"path": "monitor.db"}}}, "at '/store/sqlite/path'"),
        ({"networkPolicy": {"egress": {"kafkaPorts": [70000]}}}, "at '/networkPolicy/egress/kafkaPorts/0'"),
    ],
)
def test_values_schema_rejects_bad_values_with_a_clear_message(values: dict[str, Any], message: str) -> None:
    with helm.Chart.load(str(CHART)) as loaded, pytest.raises(helm.HelmValuesError) as raised:
        loaded.validate_schema(values)
    assert message in str(raised.value)
    with helm.Chart.load(str(CHART)) as loaded, pytest.raises(helm.HelmValuesError):
        loaded.render(values, name=RELEASE, namespace=NAMESPACE)  # install/upgrade refuse them too
    report = helm.lint(str(CHART), values=values)
    assert any(message in error for error in report["errors"]), report


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicaCount": 2}, "replicaCount > 1 needs PostgreSQL"),
        ({"autoscaling": {"enabled": True}}, "autoscaling needs PostgreSQL"),
        ({"report": {"enabled": True}}, "report.enabled needs PostgreSQL"),
        ({"judge": {"enabled": True}}, "judge.enabled needs judge.existingSecret"),
        ({"kafka": {"tls": {"enabled": True}}}, "name keys of kafka.tls.existingSecret"),
        (
            {"kafka": {"tls": {"enabled": True, "existingSecret": "t", "caKey": "", "keyPasswordKey": "p"}}},
            "kafka.tls.keyPasswordKey is only used with a client certificate",
        ),
        ({"kafka": {"sasl": {"enabled": True, "mechanism": "OAUTHBEARER"}}}, "OAUTHBEARER needs a token"),
        (
            {"kafka": {"sasl": {"enabled": True, "mechanism": "OAUTHBEARER", "oauth": {"endpointUrl": "https://t"}}}},
            "kafka.sasl.oauth.endpointUrl needs kafka.sasl.oauth.clientId",
        ),
        ({"kafka": {"tls": {"certKey": "tls.crt"}}}, "kafka.tls.certKey and kafka.tls.keyKey go together"),
        ({"kafka": {"sasl": {"enabled": True, "existingSecret": "s"}}}, "kafka.sasl.enabled needs kafka.sasl.username"),
        (
            _with(VALUE_SETS["oauthbearer"], **{"autoscaling.keda.authenticationRef": ""}),
            "KEDA cannot reuse the daemon's OAUTHBEARER credentials",
        ),
        (
            {"store": {"existingSecret": "db"}, "autoscaling": {"enabled": True, "minReplicas": 5, "maxReplicas": 2}},
            "autoscaling.minReplicas must not exceed autoscaling.maxReplicas",
        ),
    ],
)
def test_chart_refuses_combinations_that_cannot_work(values: dict[str, Any], message: str) -> None:
    with pytest.raises(helm.HelmRenderError, match=message):
        render(values)


def test_prometheus_rule_needs_the_synced_rules(tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(CHART, chart)
    (chart / RULES_COPY).unlink(missing_ok=True)
    with pytest.raises(helm.HelmRenderError, match="make sync-chart"):
        render({"prometheusRule": {"enabled": True}}, chart)


# --------------------------------------------------------------------------- what the objects say


def _config(docs: list[dict[str, Any]]) -> dict[str, Any]:
    text = one(docs, "ConfigMap", FULLNAME)["data"]["monitor.yaml"]
    config: dict[str, Any] = yaml.safe_load(text)
    return config


def _pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    pod: dict[str, Any] = one(docs, "Deployment")["spec"]["template"]["spec"]
    return pod


def test_default_daemon_is_hardened_and_probed(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["default"]
    pod = _pod(docs)
    (container,) = pod["containers"]
    assert container["args"] == ["run", "--config", "/etc/monitor/monitor.yaml"]
    assert pod["securityContext"]["runAsNonRoot"] is True and pod["securityContext"]["runAsUser"] == 10001
    assert pod["automountServiceAccountToken"] is False
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http-metrics"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http-metrics"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert container["ports"] == [{"name": "http-metrics", "containerPort": 9464, "protocol": "TCP"}]
    assert set(container["resources"]) == {"requests", "limits"}
    assert {"cpu", "memory"} <= set(container["resources"]["requests"])
    assert "memory" in container["resources"]["limits"]
    # the only writable places: /tmp and the SQLite directory, both emptyDirs
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes[mounts["/tmp"]]
    assert "emptyDir" in volumes[mounts["/var/lib/monitor"]]
    assert _config(docs)["store"]["url"] == "sqlite:////var/lib/monitor/monitor.db"
    assert one(docs, "Deployment")["spec"]["strategy"] == {"type": "Recreate"}  # one owner of the SQLite file
    service = one(docs, "Service")
    assert service["spec"]["ports"][0]["targetPort"] == "http-metrics"
    assert service["spec"]["publishNotReadyAddresses"] is True  # a lagging daemon's metrics stay scraped
    annotation = one(docs, "Deployment")["spec"]["template"]["metadata"]["annotations"]["checksum/config"]
    assert len(annotation) == 64


def _clean_monitor_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("MONITOR_"):
            monkeypatch.delenv(name)


@pytest.mark.parametrize("case", list(VALUE_SETS))
def test_rendered_monitor_yaml_is_a_valid_monitor_configuration(
    case: str, rendered: dict[str, list[dict[str, Any]]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The daemon's own settings catalogue accepts the ConfigMap (values, types, unknown keys), with the
    environment the Deployment sets."""
    from monitor.settings import load_settings

    docs = rendered[case]
    _clean_monitor_env(monkeypatch)
    env = {e["name"]: e for e in _pod(docs)["containers"][0].get("env", [])}
    if "MONITOR_STORE__URL" in env:  # from the Secret: any PostgreSQL URL
        monkeypatch.setenv("MONITOR_STORE__URL", "postgresql+psycopg://monitor:secret@db:5432/monitor")
    for name, entry in env.items():
        if name.startswith("MONITOR_") and "value" in entry:
            monkeypatch.setenv(name, entry["value"])
    path = tmp_path / "monitor.yaml"
    path.write_text(one(docs, "ConfigMap", FULLNAME)["data"]["monitor.yaml"])
    settings = load_settings(path)
    assert settings.kafka.bootstrap_servers == VALUE_SETS[case].get("kafka", {}).get("bootstrapServers", "kafka:9092")
    assert settings.http.port == 9464


def test_secrets_are_files_or_secret_references_never_configuration(
    rendered: dict[str, list[dict[str, Any]]],
) -> None:
    docs = rendered["full"]
    config = _config(docs)
    text = one(docs, "ConfigMap", FULLNAME)["data"]["monitor.yaml"]
    assert "password:" not in text and "sk-ant" not in text and "store" not in config  # the URL is in the Secret
    pod = _pod(docs)
    (container,) = pod["containers"]
    env = {e["name"]: e for e in container["env"]}
    assert env["MONITOR_STORE__URL"]["valueFrom"]["secretKeyRef"] == {"name": "monitor-store", "key": "url"}
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}

    def secret_file(path: str) -> tuple[str, str]:
        """(Secret name, key) of the mounted file ``path``; the mount is read-only."""
        directory, _, file_name = path.rpartition("/")
        mount = mounts[directory]
        assert mount.get("readOnly") is True
        secret = volumes[mount["name"]]["secret"]
        items = {item["path"]: item["key"] for item in secret.get("items", [])}
        return secret["secretName"], items.get(file_name, file_name)

    assert secret_file(config["judge"]["api_key_file"]) == ("anthropic", "api-key")
    assert config["judge"]["enabled"] is True and config["judge"]["model"] == "claude-haiku-4-5"  # merged
    assert secret_file(config["kafka"]["sasl"]["password_file"]) == ("kafka-sasl", "password")
    assert config["kafka"]["sasl"]["mechanism"] == "SCRAM-SHA-512"
    assert config["kafka"]["security_protocol"] == "SASL_SSL"
    tls = config["kafka"]["tls"]
    assert [secret_file(tls[k]) for k in ("ca_file", "cert_file", "key_file")] == [
        ("kafka-tls", "ca.crt"),
        ("kafka-tls", "tls.crt"),
        ("kafka-tls", "tls.key"),
    ]
    assert secret_file("/var/run/secrets/corp-ca/ca.crt") == ("corp-ca", "ca.crt")  # extraSecretMounts


def test_keda_scales_the_group_on_lag_with_the_daemons_credentials(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["full"]
    config = _config(docs)
    assert "replicas" not in one(docs, "Deployment")["spec"]  # the autoscaler owns it
    scaled = one(docs, "ScaledObject")
    assert scaled["spec"]["scaleTargetRef"]["name"] == FULLNAME
    assert (scaled["spec"]["minReplicaCount"], scaled["spec"]["maxReplicaCount"]) == (1, 4)
    triggers = scaled["spec"]["triggers"]
    assert [t["metadata"]["topic"] for t in triggers] == [config["kafka"]["spans_topic"], config["kafka"]["logs_topic"]]
    for trigger in triggers:
        assert trigger["type"] == "kafka"
        meta = trigger["metadata"]
        assert meta["consumerGroup"] == config["kafka"]["group_id"]
        assert meta["bootstrapServers"] == config["kafka"]["bootstrap_servers"]
        assert (meta["tls"], meta["sasl"]) == ("enable", "scram_sha512")
        assert trigger["authenticationRef"]["name"] == f"{FULLNAME}-kafka"
    auth = one(docs, "TriggerAuthentication")
    refs = {r["parameter"]: (r["name"], r["key"]) for r in auth["spec"]["secretTargetRef"]}
    assert refs == {
        "password": ("kafka-sasl", "password"),
        "ca": ("kafka-tls", "ca.crt"),
        "cert": ("kafka-tls", "tls.crt"),
        "key": ("kafka-tls", "tls.key"),
    }
    (username,) = auth["spec"]["env"]
    env = {e["name"]: e for e in _pod(docs)["containers"][0]["env"]}
    assert env[username["name"]]["value"] == "monitor" and username["containerName"] == "monitor"

    hpa = one(rendered["full-hpa"], "HorizontalPodAutoscaler")
    assert hpa["spec"]["metrics"][0]["resource"]["name"] == "cpu"
    assert hpa["spec"]["scaleTargetRef"]["name"] == FULLNAME


def test_weekly_report_cronjob(rendered: dict[str, list[dict[str, Any]]], synced_chart: Path) -> None:
    docs = rendered["full"]
    cron = one(docs, "CronJob")
    assert cron["spec"]["schedule"] == "0 6 * * 1" and cron["spec"]["timeZone"] == "Etc/UTC"  # Monday 06:00 UTC
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["args"] == [
        "report",
        "--config",
        "/etc/monitor/monitor.yaml",
        "--out",
        "/reports",
        "--format",
        "html,md,json",
        "--webhook",
    ]
    env = {e["name"]: e for e in container["env"]}
    assert env["MONITOR_REPORT_WEBHOOK_URL"]["valueFrom"]["secretKeyRef"] == {"name": "report-webhook", "key": "url"}
    assert env["MONITOR_STORE__URL"]["valueFrom"]["secretKeyRef"]["name"] == "monitor-store"
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert {"/etc/monitor", "/tmp", "/reports"} <= mounts
    # no webhook Secret: no --webhook
    no_webhook = render(_with(FULL_VALUES, **{"report.webhook.existingSecret": ""}), synced_chart)
    assert (
        "--webhook"
        not in one(no_webhook, "CronJob")["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"]
    )


def test_prometheus_rule_wraps_the_rules_file(rendered: dict[str, list[dict[str, Any]]], synced_chart: Path) -> None:
    rule = one(rendered["full"], "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    source = yaml.safe_load((synced_chart / RULES_COPY).read_text())
    assert rule["spec"]["groups"] == source["groups"]
    monitor = one(rendered["full"], "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    assert (endpoint["port"], endpoint["path"]) == ("http-metrics", "/metrics")
    assert monitor["spec"]["selector"]["matchLabels"] == one(rendered["full"], "Service")["spec"]["selector"]
    # the rules select the daemon by job; the ServiceMonitor's job is the Service's app.kubernetes.io/name
    assert monitor["spec"]["jobLabel"] == "app.kubernetes.io/name"
    assert one(rendered["full"], "Service")["metadata"]["labels"]["app.kubernetes.io/name"] == "agent-tool-monitor"


def test_prometheus_rule_links_and_labels_are_yours(synced_chart: Path) -> None:
    source = yaml.safe_load((synced_chart / RULES_COPY).read_text())
    values = _with(
        FULL_VALUES,
        **{
            "prometheusRule.grafanaUrl": "https://grafana.corp/",
            "prometheusRule.runbookUrl": "https://wiki.corp/atm-runbook",
            "prometheusRule.alertLabels": {"team": "ml-platform", "severity": "overridden?"},
        },
    )
    groups = one(render(values, synced_chart), "PrometheusRule")["spec"]["groups"]
    alerts = [r for g in groups for r in g["rules"] if "alert" in r]
    source_alerts = [r for g in source["groups"] for r in g["rules"] if "alert" in r]
    assert [a["alert"] for a in alerts] == [a["alert"] for a in source_alerts]
    for alert, original in zip(alerts, source_alerts, strict=True):
        assert alert["labels"]["team"] == "ml-platform"
        assert alert["labels"]["severity"] == original.get("labels", {}).get("severity", "overridden?")  # theirs win
        assert alert["expr"] == original["expr"]
        for key, text in alert.get("annotations", {}).items():
            assert "grafana.example.com" not in text and "github.com/example" not in text, (alert["alert"], key)
    recording = [r for g in groups for r in g["rules"] if "record" in r]
    assert all("team" not in r.get("labels", {}) for r in recording)


def test_dashboards_become_sidecar_configmaps(rendered: dict[str, list[dict[str, Any]]], synced_chart: Path) -> None:
    sources = {p.name: json.loads(p.read_text()) for p in (synced_chart / DASHBOARDS_COPY).glob("*.json")}
    assert sources
    maps = [d for d in rendered["full"] if d["kind"] == "ConfigMap" and "grafana_dashboard" in d["metadata"]["labels"]]
    assert len(maps) == len(sources)
    shipped: dict[str, Any] = {}
    for config_map in maps:
        assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
        assert config_map["metadata"]["annotations"] == {"grafana_folder": "Agents"}
        ((name, text),) = config_map["data"].items()
        shipped[name] = json.loads(text)
        assert len(text.encode()) < 1024 * 1024  # a ConfigMap holds at most 1 MiB
    assert shipped == sources
    off = render(_with(FULL_VALUES, **{"dashboards.enabled": False}), synced_chart)
    assert not [d for d in off if "grafana_dashboard" in d["metadata"].get("labels", {})]


def test_network_policy_and_disruption_budget(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["full"]
    policy = one(docs, "NetworkPolicy")
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    (ingress,) = policy["spec"]["ingress"]
    assert ingress["ports"] == [{"port": "http-metrics", "protocol": "TCP"}]
    ports = {p["port"] for rule in policy["spec"]["egress"] for p in rule.get("ports", [])}
    assert {53, 9092, 9093, 5432, 443, 4318} <= ports
    assert one(docs, "PodDisruptionBudget")["spec"]["maxUnavailable"] == 1
    open_egress = one(rendered["tls-ca-sasl-plain-sqlite"], "NetworkPolicy")
    assert open_egress["spec"]["policyTypes"] == ["Ingress"] and "egress" not in open_egress["spec"]


def test_sqlite_on_a_claim_and_tls_without_client_certificate(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["tls-ca-sasl-plain-sqlite"]
    pod = _pod(docs)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["data"]["persistentVolumeClaim"] == {"claimName": "monitor-sqlite"}
    kafka = _config(docs)["kafka"]
    assert kafka["security_protocol"] == "SASL_SSL"
    assert kafka["tls"] == {"check_hostname": True, "ca_file": "/var/run/secrets/kafka-tls/ca.crt"}
    assert kafka["sasl"] == {
        "mechanism": "PLAIN",
        "username": "u",
        "password_file": "/var/run/secrets/kafka-sasl/password",
    }
    assert volumes["kafka-tls"]["secret"]["secretName"] == "kafka-ca"


def test_oauthbearer_and_sasl_plaintext(rendered: dict[str, list[dict[str, Any]]]) -> None:
    docs = rendered["oauthbearer"]
    kafka = _config(docs)["kafka"]
    assert kafka["security_protocol"] == "SASL_SSL"
    assert kafka["tls"] == {"check_hostname": True}  # the system CAs: nothing mounted
    assert kafka["sasl"] == {
        "mechanism": "OAUTHBEARER",
        "oauth": {
            "endpoint_url": "https://login.example/oauth2/token",
            "client_id": "monitor",
            "client_secret_file": "/var/run/secrets/kafka-sasl/client-secret",
            "scope": "kafka",
            "extensions": {"logicalCluster": "lkc-123"},
        },
    }
    volumes = {v["name"]: v for v in _pod(docs)["volumes"]}
    assert "kafka-tls" not in volumes
    assert volumes["kafka-sasl"]["secret"]["items"] == [{"key": "client-secret", "path": "client-secret"}]
    assert not find(docs, "TriggerAuthentication")  # KEDA uses the one named in authenticationRef
    for trigger in one(docs, "ScaledObject")["spec"]["triggers"]:
        assert trigger["authenticationRef"] == {"name": "kafka-oauth-keda"}
        assert trigger["metadata"]["sasl"] == "oauthbearer"

    docs = rendered["sasl-plaintext"]
    kafka = _config(docs)["kafka"]
    assert kafka["security_protocol"] == "SASL_PLAINTEXT" and "tls" not in kafka
    auth = one(docs, "TriggerAuthentication")
    assert [r["parameter"] for r in auth["spec"]["secretTargetRef"]] == ["password"]
    assert "tls" not in one(docs, "ScaledObject")["spec"]["triggers"][0]["metadata"]


def test_the_guides_values_file_installs(synced_chart: Path) -> None:
    """docs/deploy.md's production values file: schema, lint, render, validation, a valid monitor.yaml."""
    text = (ROOT / "docs" / "deploy.md").read_text()
    found = re.search(r"\(`my-values\.yaml`\):\s*```yaml\n(.*?)\n```", text, re.DOTALL)
    assert found, "docs/deploy.md: no ```yaml block after (`my-values.yaml`):"
    values = yaml.safe_load(found.group(1))
    report = helm.lint(str(synced_chart), values=values, strict=True, namespace=NAMESPACE)
    assert report["errors"] == [] and [m for m in report["messages"] if m["severity"] >= 2] == [], report
    docs = render(values, synced_chart)
    for doc in docs:
        validate_object(doc, KUBE_VERSIONS[-1])
    kinds = {d["kind"] for d in docs}
    assert {"ServiceMonitor", "PrometheusRule", "ScaledObject", "CronJob", "NetworkPolicy"} <= kinds
