{{/* The name of every object of the release. */}}
{{- define "terdut.name" -}}
{{- if eq .Release.Name "terdut-server" -}}terdut-server{{- else -}}{{ printf "%s-terdut-server" .Release.Name | trunc 63 | trimSuffix "-" }}{{- end -}}
{{- end -}}

{{/* The labels that select the release's pods. */}}
{{- define "terdut.selector" -}}
app.kubernetes.io/name: terdut-server
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{/* The labels of every object. */}}
{{- define "terdut.labels" -}}
{{ include "terdut.selector" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The host of publicURL. */}}
{{- define "terdut.host" -}}
{{- $u := urlParse .Values.publicURL -}}
{{- if not (has $u.scheme (list "http" "https")) -}}{{- fail (printf "publicURL %q: want an http or https URL" .Values.publicURL) -}}{{- end -}}
{{- regexReplaceAll ":[0-9]+$" $u.host "" -}}
{{- end -}}

{{/* The operator's service-account issuer. */}}
{{- define "terdut.issuer" -}}
{{- $sa := .Values.operator.serviceAccount -}}
{{- if $sa.issuer -}}{{ $sa.issuer }}
{{- else if eq $sa.layout "inCluster" -}}https://kubernetes.default.svc.cluster.local
{{- else -}}{{- fail "operator.serviceAccount.issuer: the external layout (EKS, GKE, AKS) needs the cluster's issuer URL (kubectl get --raw /.well-known/openid-configuration shows it)" -}}
{{- end -}}
{{- end -}}

{{/* Whether the pod mounts its own token and the cluster's CA (the API server is asked). */}}
{{- define "terdut.kubeAPIAccess" -}}
{{- $sa := .Values.operator.serviceAccount -}}
{{- if and (eq .Values.operator.identity "serviceAccount") (or (eq $sa.layout "inCluster") $sa.tokenReview) -}}true{{- end -}}
{{- end -}}

{{/* http or https, for the probes and the scrape. */}}
{{- define "terdut.scheme" -}}
{{- if .Values.tls.enabled -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}

{{/* Refusals of values that pass the schema but must not be installed as they are. */}}
{{- define "terdut.validate" -}}
{{- $sso := .Values.sso -}}
{{- if $sso.enabled -}}
{{- if not $sso.issuer -}}{{- fail "sso.issuer: single sign-on (sso.enabled) needs the provider's issuer URL" -}}{{- end -}}
{{- if and (not $sso.allowedGroups) (not $sso.allowAllAccounts) -}}
{{- fail "sso.allowedGroups is empty: every account the provider authenticates could sign in. List the groups that may (sso.allowedGroups), or set sso.allowAllAccounts: true if every account of the provider may (docs/sso.md#with-the-chart)" -}}
{{- end -}}
{{- if and $sso.allowedGroups $sso.allowAllAccounts -}}
{{- fail "sso.allowAllAccounts is true and sso.allowedGroups lists groups: say one or the other" -}}
{{- end -}}
{{- else if $sso.issuer -}}
{{- fail "sso.issuer is set but sso.enabled is not true: single sign-on is off unless sso.enabled is true (before chart 0.2.0 it defaulted to true). Set sso.enabled: true to keep it, or remove sso.issuer" -}}
{{- end -}}
{{- $am := .Values.alertmanager -}}
{{- $ports := dict "ports.people" .Values.ports.people "ports.operator" .Values.ports.operator -}}
{{- if .Values.metrics.enabled -}}{{- $_ := set $ports "metrics.port" .Values.metrics.port -}}{{- end -}}
{{- range $name, $port := $ports -}}
{{- if eq (int $port) (int $am.webhookPort) -}}
{{- fail (printf "alertmanager.webhookPort %d is also %s: give Alertmanager's webhook a port of its own (8082 by default)" (int $port) $name) -}}
{{- end -}}
{{- end -}}
{{- if and .Values.trustedProxies .Values.networkPolicy.enabled -}}
{{- range $am.namespaces -}}
{{- if has . $.Values.networkPolicy.people.namespaces -}}
{{- fail (printf "networkPolicy.people.namespaces lists %s, which alertmanager.namespaces names too, and trustedProxies is set: any pod of %s could name any client address on the people's port. Alertmanager reaches its webhook's port (alertmanager.webhookPort); admit only the proxies' namespace to the people's port (docs/install.md#each-layout)" . .) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if and $am.config.enabled .Values.networkPolicy.enabled (not $am.namespaces) -}}
{{- fail "alertmanager.config.enabled sends Alertmanager to the webhook's port, and alertmanager.namespaces admits no namespace to it: name the namespace of the Alertmanager pods (monitoring by default)" -}}
{{- end -}}
{{- end -}}
