{{/* Names and labels */}}
{{- define "atm.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "atm.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "atm.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "atm.selectorLabels" -}}
app.kubernetes.io/name: {{ include "atm.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "atm.labels" -}}
helm.sh/chart: {{ include "atm.chart" . }}
{{ include "atm.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: agent-tool-monitor
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "atm.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "atm.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "atm.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Where files are mounted: the settings point at them. */}}
{{- define "atm.paths" -}}
config: /etc/monitor
anthropic: /var/run/secrets/anthropic
kafkaTls: /var/run/secrets/kafka-tls
kafkaSasl: /var/run/secrets/kafka-sasl
{{- end }}

{{/*
The results store: "secret" (PostgreSQL URL from store.existingSecret, in MONITOR_STORE__URL),
"url" (config.store.url, not SQLite) or "sqlite" (the default file, or a sqlite URL in config.store.url).
*/}}
{{- define "atm.storeKind" -}}
{{- $url := dig "store" "url" "" .Values.config }}
{{- if .Values.store.existingSecret }}secret
{{- else if and $url (not (hasPrefix "sqlite" $url)) }}url
{{- else }}sqlite
{{- end }}
{{- end }}

{{/*
Settings the chart derives from its values (they win over the same keys of .Values.config).
The Kafka security keys are monitor/settings.py's kafka.security_protocol, kafka.tls and kafka.sasl: files,
never secrets, in the configuration.
*/}}
{{- define "atm.derivedConfig" -}}
{{- $paths := include "atm.paths" . | fromYaml }}
{{- $kafka := dict "bootstrap_servers" .Values.kafka.bootstrapServers "spans_topic" .Values.kafka.spansTopic "group_id" .Values.kafka.groupId }}
{{- if .Values.kafka.logsTopic }}
{{- $_ := set $kafka "logs_topic" .Values.kafka.logsTopic }}
{{- end }}
{{- $tlsOn := .Values.kafka.tls.enabled }}
{{- $saslOn := .Values.kafka.sasl.enabled }}
{{- if or $tlsOn $saslOn }}
{{- $_ := set $kafka "security_protocol" (ternary (ternary "SASL_SSL" "SASL_PLAINTEXT" $tlsOn) "SSL" $saslOn) }}
{{- end }}
{{- with .Values.kafka.tls }}
{{- if .enabled }}
{{- $tls := dict "check_hostname" .checkHostname }}
{{- if .caKey }}{{- $_ := set $tls "ca_file" (printf "%s/%s" $paths.kafkaTls .caKey) }}{{- end }}
{{- if .certKey }}{{- $_ := set $tls "cert_file" (printf "%s/%s" $paths.kafkaTls .certKey) }}{{- end }}
{{- if .keyKey }}{{- $_ := set $tls "key_file" (printf "%s/%s" $paths.kafkaTls .keyKey) }}{{- end }}
{{- if .keyPasswordKey }}{{- $_ := set $tls "key_password_file" (printf "%s/%s" $paths.kafkaTls .keyPasswordKey) }}{{- end }}
{{- $_ := set $kafka "tls" $tls }}
{{- end }}
{{- end }}
{{- with .Values.kafka.sasl }}
{{- if .enabled }}
{{- $sasl := dict "mechanism" .mechanism }}
{{- if eq .mechanism "OAUTHBEARER" }}
{{- if .oauth.endpointUrl }}
{{- $oauth := dict "endpoint_url" .oauth.endpointUrl "client_id" .oauth.clientId "client_secret_file" (printf "%s/client-secret" $paths.kafkaSasl) }}
{{- with .oauth.scope }}{{- $_ := set $oauth "scope" . }}{{- end }}
{{- with .oauth.extensions }}{{- $_ := set $oauth "extensions" . }}{{- end }}
{{- $_ := set $sasl "oauth" $oauth }}
{{- end }}
{{- else }}
{{- $_ := set $sasl "username" .username }}
{{- $_ := set $sasl "password_file" (printf "%s/password" $paths.kafkaSasl) }}
{{- end }}
{{- $_ := set $kafka "sasl" $sasl }}
{{- end }}
{{- end }}
{{- $cfg := dict "kafka" $kafka "http" (dict "port" (int .Values.httpPort)) }}
{{- if eq (include "atm.storeKind" .) "sqlite" }}
{{- if not (dig "store" "url" "" .Values.config) }}
{{- $_ := set $cfg "store" (dict "url" (printf "sqlite:///%s" .Values.store.sqlite.path)) }}
{{- end }}
{{- end }}
{{- if .Values.judge.enabled }}
{{- $_ := set $cfg "judge" (dict "enabled" true "api_key_file" (printf "%s/%s" $paths.anthropic .Values.judge.apiKeyKey)) }}
{{- end }}
{{- toYaml $cfg }}
{{- end }}

{{/* The monitor.yaml the daemon and the report job read. */}}
{{- define "atm.monitorConfig" -}}
{{- $merged := mustMergeOverwrite (deepCopy .Values.config) (include "atm.derivedConfig" . | fromYaml) }}
{{- toYaml $merged }}
{{- end }}

{{/* The environment variable holding the report webhook URL (report.webhook_url_env). */}}
{{- define "atm.webhookEnv" -}}
{{- dig "report" "webhook_url_env" "MONITOR_REPORT_WEBHOOK_URL" .Values.config }}
{{- end }}

{{/* Combinations the chart refuses, with the fix. */}}
{{- define "atm.validate" -}}
{{- $sqlite := eq (include "atm.storeKind" .) "sqlite" }}
{{- if and $sqlite (gt (int .Values.replicaCount) 1) (not .Values.autoscaling.enabled) }}
{{- fail "replicaCount > 1 needs PostgreSQL: SQLite is a file in one pod. Set store.existingSecret (a Secret with a postgresql+psycopg:// URL)" }}
{{- end }}
{{- if and $sqlite .Values.autoscaling.enabled }}
{{- fail "autoscaling needs PostgreSQL: SQLite is a file in one pod. Set store.existingSecret (a Secret with a postgresql+psycopg:// URL)" }}
{{- end }}
{{- if and $sqlite .Values.report.enabled }}
{{- fail "report.enabled needs PostgreSQL: the report job cannot read the daemon's SQLite file. Set store.existingSecret" }}
{{- end }}
{{- if and .Values.judge.enabled (not .Values.judge.existingSecret) }}
{{- fail "judge.enabled needs judge.existingSecret: a Secret holding the Anthropic API key (key judge.apiKeyKey)" }}
{{- end }}
{{- with .Values.kafka.tls }}
{{- if and .enabled (or .caKey .certKey .keyPasswordKey) (not .existingSecret) }}
{{- fail "kafka.tls.caKey, certKey and keyPasswordKey name keys of kafka.tls.existingSecret: set it (a Secret with the CA certificate, and the client certificate and key for mutual TLS), or set caKey \"\" for the system CAs" }}
{{- end }}
{{- if ne (empty .certKey) (empty .keyKey) }}
{{- fail "kafka.tls.certKey and kafka.tls.keyKey go together (mutual TLS needs both the client certificate and its key)" }}
{{- end }}
{{- if and .keyPasswordKey (not .certKey) }}
{{- fail "kafka.tls.keyPasswordKey is only used with a client certificate (kafka.tls.certKey and keyKey)" }}
{{- end }}
{{- end }}
{{- with .Values.kafka.sasl }}
{{- if .enabled }}
{{- if eq .mechanism "OAUTHBEARER" }}
{{- $tokenFile := dig "kafka" "sasl" "oauth" "token_file" "" $.Values.config }}
{{- if and (not .oauth.endpointUrl) (not $tokenFile) }}
{{- fail "kafka.sasl.mechanism OAUTHBEARER needs a token: kafka.sasl.oauth.endpointUrl, clientId and existingSecret (the client-credentials grant), or config.kafka.sasl.oauth.token_file (a token file you mount)" }}
{{- end }}
{{- if and .oauth.endpointUrl (or (not .oauth.clientId) (not .existingSecret)) }}
{{- fail "kafka.sasl.oauth.endpointUrl needs kafka.sasl.oauth.clientId and kafka.sasl.existingSecret (holding the client secret under kafka.sasl.oauth.clientSecretKey)" }}
{{- end }}
{{- else if or (not .existingSecret) (not .username) }}
{{- fail "kafka.sasl.enabled needs kafka.sasl.username and kafka.sasl.existingSecret (a Secret holding the password)" }}
{{- end }}
{{- end }}
{{- end }}
{{- if gt (int .Values.autoscaling.minReplicas) (int .Values.autoscaling.maxReplicas) }}
{{- fail "autoscaling.minReplicas must not exceed autoscaling.maxReplicas" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (eq .Values.autoscaling.mode "keda") .Values.kafka.sasl.enabled (eq .Values.kafka.sasl.mechanism "OAUTHBEARER") (not .Values.autoscaling.keda.authenticationRef) }}
{{- fail "KEDA cannot reuse the daemon's OAUTHBEARER credentials: create a TriggerAuthentication for the kafka scaler and name it in autoscaling.keda.authenticationRef" }}
{{- end }}
{{- end }}

{{/* The volumes and mounts the daemon and the report job share (config, /tmp, secrets). */}}
{{- define "atm.commonVolumes" -}}
- name: config
  configMap:
    name: {{ include "atm.fullname" . }}
- name: tmp
  emptyDir:
    sizeLimit: 256Mi
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  secret:
    secretName: {{ .Values.kafka.tls.existingSecret }}
    defaultMode: 288  # 0440
{{- end }}
{{- with .Values.kafka.sasl }}
{{- if and .enabled .existingSecret }}
- name: kafka-sasl
  secret:
    secretName: {{ .existingSecret }}
    defaultMode: 288  # 0440
    items:
      {{- if eq .mechanism "OAUTHBEARER" }}
      - key: {{ .oauth.clientSecretKey }}
        path: client-secret
      {{- else }}
      - key: {{ .passwordKey }}
        path: password
      {{- end }}
{{- end }}
{{- end }}
{{- range .Values.extraSecretMounts }}
- name: {{ .name }}
  secret:
    secretName: {{ .secretName }}
    {{- if hasKey . "defaultMode" }}
    defaultMode: {{ .defaultMode }}
    {{- end }}
    {{- with .items }}
    items:
      {{- toYaml . | nindent 6 }}
    {{- end }}
{{- end }}
{{- end }}

{{- define "atm.commonVolumeMounts" -}}
{{- $paths := include "atm.paths" . | fromYaml -}}
- name: config
  mountPath: {{ $paths.config }}
  readOnly: true
- name: tmp
  mountPath: /tmp
{{- if and .Values.kafka.tls.enabled .Values.kafka.tls.existingSecret }}
- name: kafka-tls
  mountPath: {{ $paths.kafkaTls }}
  readOnly: true
{{- end }}
{{- if and .Values.kafka.sasl.enabled .Values.kafka.sasl.existingSecret }}
- name: kafka-sasl
  mountPath: {{ $paths.kafkaSasl }}
  readOnly: true
{{- end }}
{{- range .Values.extraSecretMounts }}
- name: {{ .name }}
  mountPath: {{ .mountPath }}
  readOnly: true
{{- end }}
{{- end }}

{{/* Environment shared by the daemon and the report job. */}}
{{- define "atm.commonEnv" -}}
{{- if .Values.store.existingSecret }}
- name: MONITOR_STORE__URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.store.existingSecret }}
      key: {{ .Values.store.urlKey }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The daemon's environment. */}}
{{- define "atm.daemonEnv" -}}
{{- if and .Values.kafka.sasl.enabled (ne .Values.kafka.sasl.mechanism "OAUTHBEARER") }}
# Not read by the daemon (its username is in monitor.yaml): KEDA's TriggerAuthentication reads it.
- name: KAFKA_SASL_USERNAME
  value: {{ .Values.kafka.sasl.username | quote }}
{{- end }}
{{- include "atm.commonEnv" . }}
{{- end }}

{{/* The report job's environment: the webhook URL (report.webhook_url_env) from its Secret. */}}
{{- define "atm.reportEnv" -}}
{{- if .Values.report.webhook.existingSecret }}
- name: {{ include "atm.webhookEnv" . }}
  valueFrom:
    secretKeyRef:
      name: {{ .Values.report.webhook.existingSecret }}
      key: {{ .Values.report.webhook.urlKey }}
{{- end }}
{{- include "atm.commonEnv" . }}
{{- end }}
