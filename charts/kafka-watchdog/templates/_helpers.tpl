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
{{- if not (hasKey $http "runbooks_url") -}}
{{- $_ := set $http "runbooks_url" (include "kafka-watchdog.runbooksUrl" .) -}}
{{- end -}}
{{- $_ := set $cfg "http" $http -}}
{{- $_ := set $cfg "state_dir" "/var/lib/kafka-watchdog" -}}
{{- /* Replicas find each other by their stable StatefulSet names under the headless
     service (a certificate for *.<release>-pods.<namespace>.svc serves them all): shared
     silences, and one message per event to receivers that do not deduplicate. */ -}}
{{- if and (include "kafka-watchdog.peersActive" .) (not (hasKey $cfg "peers")) -}}
{{- $scheme := ternary "https" "http" (not (empty (dig "http" "tls" "" .Values.config))) -}}
{{- $full := include "kafka-watchdog.fullname" . -}}
{{- $urls := list -}}
{{- range $i := until (int .Values.replicaCount) -}}
{{- $urls = append $urls (printf "%s://%s-%d.%s-pods.%s.svc:%v" $scheme $full $i $full $.Release.Namespace $.Values.service.port) -}}
{{- end -}}
{{- $_ := set $cfg "peers" (dict "urls" $urls "key_env" "KW_PEER_KEY") -}}
{{- end -}}
{{- toYaml $cfg -}}
{{- end -}}

{{/* Where the runbooks are read: runbooks.baseUrl, else /runbooks through the Service. */}}
{{- define "kafka-watchdog.runbooksUrl" -}}
{{- if .Values.runbooks.baseUrl -}}
{{- trimSuffix "/" .Values.runbooks.baseUrl -}}
{{- else -}}
{{- printf "%s://%s.%s.svc:%v/runbooks" (lower (include "kafka-watchdog.scheme" .)) (include "kafka-watchdog.fullname" .) .Release.Namespace .Values.service.port -}}
{{- end -}}
{{- end -}}

{{/* HTTPS when the configuration serves TLS: the probes must speak it too. */}}
{{- define "kafka-watchdog.scheme" -}}
{{- if and (not .Values.existingConfigMap) (dig "http" "tls" "" .Values.config) -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* The ServiceAccount the pods run as. */}}
{{- define "kafka-watchdog.serviceAccountName" -}}
{{- default (include "kafka-watchdog.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* Whether the replicas ask each other (peers:), and so need the peer key: "true" or "". */}}
{{- define "kafka-watchdog.peersActive" -}}
{{- if and .Values.peers.enabled (or (gt (int .Values.replicaCount) 1) (hasKey .Values.config "peers")) -}}true{{- end -}}
{{- end -}}

{{/* The Secret holding the peer key: the user's, or the one the chart makes. */}}
{{- define "kafka-watchdog.peerKeySecret" -}}
{{- default (printf "%s-peer-key" (include "kafka-watchdog.fullname" .)) .Values.peers.existingSecret -}}
{{- end -}}
