{{/* Names and labels live here, so every template agrees on them. */}}

{{- define "writegate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "writegate.fullname" -}}
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

{{/* A component's resource name: <fullname>-<suffix>, within 63 characters. */}}
{{- define "writegate.componentName" -}}
{{- $full := include "writegate.fullname" .root -}}
{{- printf "%s-%s" ($full | trunc (int (sub 62 (len .suffix)))) .suffix | trimSuffix "-" }}
{{- end }}

{{- define "writegate.controlPlaneName" -}}{{ include "writegate.fullname" . }}{{- end }}
{{- define "writegate.controlPlaneMetricsName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "metrics") }}{{- end }}
{{- define "writegate.injectorName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "injector") }}{{- end }}
{{- define "writegate.injectorTlsSecret" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "injector-tls") }}{{- end }}
{{- define "writegate.configName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "config") }}{{- end }}
{{- define "writegate.systemsApplyName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "systems-apply") }}{{- end }}
{{- define "writegate.migrateName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "migrate") }}{{- end }}
{{/*
A StatefulSet's name, within 52 characters: its pods carry a controller-revision-hash label,
<name>-<hash of about 10>, and a label value is at most 63 (a longer name creates no pods).
*/}}
{{- define "writegate.statefulName" -}}
{{- $full := include "writegate.fullname" .root -}}
{{- printf "%s-%s" ($full | trunc (int (sub 51 (len .suffix))) | trimSuffix "-") .suffix }}
{{- end }}
{{- define "writegate.postgresqlName" -}}{{ include "writegate.statefulName" (dict "root" . "suffix" "postgresql") }}{{- end }}
{{- define "writegate.redisName" -}}{{ include "writegate.statefulName" (dict "root" . "suffix" "redis") }}{{- end }}
{{- define "writegate.masterKeyName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "master-key") }}{{- end }}
{{- define "writegate.dashboardName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "dashboard") }}{{- end }}
{{- define "writegate.proxyMonitorName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "proxy") }}{{- end }}
{{- define "writegate.injectorCaName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "injector-ca") }}{{- end }}
{{- define "writegate.selfSignedIssuerName" -}}{{ include "writegate.componentName" (dict "root" . "suffix" "selfsigned") }}{{- end }}

{{/* Cluster-scoped, so the namespace is part of the name: two releases never collide. */}}
{{- define "writegate.webhookConfigName" -}}
{{- printf "%s-%s" (include "writegate.injectorName" .) .Release.Namespace | trunc 253 | trimSuffix "-" }}
{{- end }}
{{- define "writegate.injectionPolicyName" -}}
{{- printf "%s-%s-injected" (include "writegate.injectorName" .) .Release.Namespace | trunc 253 | trimSuffix "-" }}
{{- end }}

{{- define "writegate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "writegate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "writegate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "writegate.labels" -}}
helm.sh/chart: {{ include "writegate.chart" . }}
app.kubernetes.io/name: {{ include "writegate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: writegate
{{- end }}

{{/* Selector labels of one component: control-plane, injector, migrate, postgresql, redis. */}}
{{- define "writegate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "writegate.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "writegate.componentLabels" -}}
{{ include "writegate.labels" .root }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "writegate.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{- define "writegate.proxyImage" -}}
{{- $repo := default .Values.image.repository .Values.injector.proxy.repository }}
{{- $tag := default (default .Chart.AppVersion .Values.image.tag) .Values.injector.proxy.tag }}
{{- printf "%s:%s" $repo $tag }}
{{- end }}

{{/* Where the database URL comes from: the bundled server's Secret or the user's. */}}
{{- define "writegate.databaseSecretRef" -}}
{{- if .Values.postgresql.enabled -}}
name: {{ include "writegate.postgresqlName" . }}
key: url
{{- else -}}
name: {{ required "externalDatabase.existingSecret is required (or set postgresql.enabled for a bundled trial database)" .Values.externalDatabase.existingSecret }}
key: {{ .Values.externalDatabase.key }}
{{- end }}
{{- end }}

{{- define "writegate.redisSecretRef" -}}
{{- if .Values.redis.enabled -}}
name: {{ include "writegate.redisName" . }}
key: url
{{- else -}}
name: {{ required "externalRedis.existingSecret is required (or set redis.enabled for a bundled trial Redis)" .Values.externalRedis.existingSecret }}
key: {{ .Values.externalRedis.key }}
{{- end }}
{{- end }}

{{- define "writegate.masterKeySecretName" -}}
{{- if .Values.masterKey.generate -}}
{{ include "writegate.masterKeyName" . }}
{{- else -}}
{{ required "masterKey.existingSecret is required (a 32-byte key from `writegate keygen`; or masterKey.generate for a trial)" .Values.masterKey.existingSecret }}
{{- end }}
{{- end }}

{{/* A preferred spread of a component's replicas across nodes, unless affinity is set. */}}
{{- define "writegate.affinity" -}}
{{- if .affinity }}
{{- toYaml .affinity }}
{{- else }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "writegate.selectorLabels" (dict "root" .root "component" .component) | nindent 12 }}
{{- end }}
{{- end }}

{{/* The restricted Pod Security profile for writegate's own containers (image user 1000). */}}
{{- define "writegate.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 1000
runAsGroup: 1000
fsGroup: 1000
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "writegate.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end }}

{{/*
The settings file both processes read (WRITEGATE_CONFIG). Chart-derived values are merged
over .Values.settings, so one key never means two things.
*/}}
{{- define "writegate.settings" -}}
{{- /* A routes ConfigMap (deprecated) only when one is named: unset, proxies get no file. */}}
{{- $defaults := dict "proxySecret" .Values.injector.defaults.proxySecret }}
{{- with .Values.injector.defaults.routesConfigMap }}{{ $_ := set $defaults "routesConfigMap" . }}{{ end }}
{{- with .Values.injector.defaults.tlsCaSecret }}{{ $_ := set $defaults "tlsCaSecret" . }}{{ end }}
{{- $chart := dict
  "server" (dict "port" (int .Values.controlPlane.port) "trustProxy" .Values.controlPlane.trustProxy)
  "metrics" (dict "port" (int .Values.metrics.port))
  "log" (dict "level" .Values.controlPlane.logLevel)
  "injector" (dict
    "port" (int .Values.injector.port)
    "tls" (dict "certFile" "/etc/writegate/injector-tls/tls.crt" "keyFile" "/etc/writegate/injector-tls/tls.key")
    "defaults" $defaults
    "proxy" (dict
      "image" (include "writegate.proxyImage" .)
      "imagePullPolicy" .Values.image.pullPolicy
      "port" (int .Values.injector.proxy.port)
      "metricsPort" (int .Values.injector.proxy.metricsPort)
      "tlsPort" (int .Values.injector.proxy.tlsPort)
      "routesKey" .Values.injector.proxy.routesKey
      "logLevel" .Values.injector.proxy.logLevel
      "nativeSidecar" .Values.injector.proxy.nativeSidecar
      "noProxy" .Values.injector.proxy.noProxy
      "resources" .Values.injector.proxy.resources)
    "enforce" .Values.injector.enforce)
-}}
{{- /* Pods listen on every interface of both families, `::` (the settings' own default is loopback; on a node without IPv6 `::` falls back to 0.0.0.0); `settings` may say otherwise. */}}
{{- $listen := dict "server" (dict "host" "::") "metrics" (dict "host" "::") "injector" (dict "host" "::") }}
{{- toYaml (mergeOverwrite $listen (deepCopy .Values.settings) $chart) }}
{{- end }}

{{/*
A PodDisruptionBudget that keeps every replica up lets no node drain evict one: the drain
waits for ever. It must keep fewer than the replicas; a percentage counts as Kubernetes
rounds it, up (51% of 2 is 2).
*/}}
{{- define "writegate.pdbLeavesRoom" -}}
{{- $replicas := int .replicas }}
{{- if kindIs "string" .minAvailable }}
{{- $kept := div (add (mul (atoi (trimSuffix "%" .minAvailable)) $replicas) 99) 100 }}
{{- if ge (int $kept) $replicas }}
{{- fail (printf "%s.pdb.minAvailable (%s of %d replicas, that is %d) must keep fewer than the %s's replicas, or no node drain can evict one" .setting .minAvailable $replicas (int $kept) .setting) }}
{{- end }}
{{- else if ge (int .minAvailable) $replicas }}
{{- fail (printf "%s.pdb.minAvailable (%d) must be below the %s's replicas (%d), or no node drain can evict one" .setting (int .minAvailable) .setting $replicas) }}
{{- end }}
{{- end }}

{{/*
The injected proxy listens on each of these ports: two the same and it exits at start, in
every pod the injector changes (as the settings refuse, src/config/schema.ts).
*/}}
{{- define "writegate.proxyPortsDistinct" -}}
{{- $proxy := .Values.injector.proxy }}
{{- $seen := dict }}
{{- range $key := list "port" "metricsPort" "tlsPort" }}
{{- $port := toString (index $proxy $key) }}
{{- with index $seen $port }}
{{- fail (printf "injector.proxy.%s (%s) must differ from injector.proxy.%s: the injected proxy listens on each" $key $port .) }}
{{- end }}
{{- $_ := set $seen $port $key }}
{{- end }}
{{- end }}
