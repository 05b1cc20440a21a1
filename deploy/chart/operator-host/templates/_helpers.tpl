{{/* The chart's names. Generated RBAC (templates/rbac.yaml) uses these too. */}}

{{/* Names of every object: the release name, or fullnameOverride. */}}
{{- define "operator-host.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "operator-host.serviceAccountName" -}}
{{- default (include "operator-host.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{/* The leader election Lease: --leader-election-id. */}}
{{- define "operator-host.leaseName" -}}
{{- default (include "operator-host.fullname" .) .Values.leaderElection.id -}}
{{- end -}}

{{/* The Secret the replicas share the webhook's certificate through. */}}
{{- define "operator-host.webhookCertSecret" -}}
{{- printf "%s-webhook-cert" (include "operator-host.fullname" .) -}}
{{- end -}}

{{/* The plugins' ConfigMaps, NAMESPACE/NAME each. */}}
{{- define "operator-host.pluginConfigMaps" -}}
{{- if .Values.plugins.configMaps -}}
{{- toYaml .Values.plugins.configMaps -}}
{{- else -}}
{{- toYaml (list (printf "%s/%s-plugins" .Release.Namespace (include "operator-host.fullname" .))) -}}
{{- end -}}
{{- end -}}

{{/* The container image: by digest when image.digest is set (what `cargo
xtask image` prints), else by tag. */}}
{{- define "operator-host.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- end -}}
{{- end -}}

{{- define "operator-host.selectorLabels" -}}
app.kubernetes.io/name: operator-host
app.kubernetes.io/instance: {{ .Release.Name }}
control-plane: controller-manager
{{- end -}}

{{- define "operator-host.labels" -}}
{{ include "operator-host.selectorLabels" . }}
app.kubernetes.io/part-of: operator-host
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}
