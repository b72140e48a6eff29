{{- define "kafka-watchdog.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kafka-watchdog.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kafka-watchdog.labels" -}}
{{ include "kafka-watchdog.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The configuration as the pod reads it: the user's, with the two keys the chart owns. */}}
{{- define "kafka-watchdog.config" -}}
{{- $cfg := deepCopy .Values.config -}}
{{- $http := deepCopy (default (dict) $cfg.http) -}}
{{- $_ := set $http "listen" (printf "0.0.0.0:%v" .Values.service.port) -}}
{{- $_ := set $cfg "http" $http -}}
{{- $_ := set $cfg "state_dir" "/var/lib/kafka-watchdog" -}}
{{- if ne .Values.clusterLabel "cluster" -}}
{{- $metrics := deepCopy (default (dict) $cfg.metrics) -}}
{{- $_ := set $metrics "cluster_label" .Values.clusterLabel -}}
{{- $_ := set $cfg "metrics" $metrics -}}
{{- end -}}
{{- /* Replicas find each other by their stable StatefulSet names under the headless
     service (a certificate for *.<release>-pods.<namespace>.svc serves them all): shared
     silences, and one message per event to receivers that do not deduplicate. */ -}}
{{- if and .Values.peers.enabled (gt (int .Values.replicaCount) 1) (not (hasKey $cfg "peers")) -}}
{{- $scheme := ternary "https" "http" (not (empty (dig "http" "tls" "" .Values.config))) -}}
{{- $full := include "kafka-watchdog.fullname" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.replicaCount) -}}
{{- $urls = append $urls (printf "%s://%s-%d.%s-pods.%s.svc:%v" $scheme $full $i $full $.Release.Namespace $.Values.service.port) -}}
{{- end -}}
{{- $_ := set $cfg "peers" (dict "urls" $urls) -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* HTTPS when the configuration serves TLS: the probes must speak it too. */}}
{{- define "kafka-watchdog.scheme" -}}
{{- if and (not .Values.existingConfigMap) (dig "http" "tls" "" .Values.config) -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* The ServiceAccount the pods run as. */}}
{{- define "kafka-watchdog.serviceAccountName" -}}
{{- default (include "kafka-watchdog.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}
