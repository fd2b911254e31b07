{{/*
The install namespace: the release namespace, or resize-guard when none was given (Helm's
`default`; resize-guard labels its namespace Pod Security restricted, which `default` must not be).
*/}}
{{- define "resize-guard.namespace" -}}
{{- if eq .Release.Namespace "default" -}}
resize-guard
{{- else -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end }}

{{/*
Labels on every object: Helm's usual ones plus those deploy/base/kustomization.yaml adds.
*/}}
{{- define "resize-guard.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/part-of: resize-guard
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}

{{/*
The selector labels of one program: (dict "component" "webhook").
*/}}
{{- define "resize-guard.selectorLabels" -}}
app.kubernetes.io/name: resize-guard
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/*
A program's image: (dict "image" .Values.image.webhook "root" $).
*/}}
{{- define "resize-guard.image" -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion | toString) -}}
{{- end }}

{{/*
The policy.yaml text: a string as written, a map as YAML.
*/}}
{{- define "resize-guard.policy" -}}
{{- if kindIs "string" .Values.policy -}}
{{- .Values.policy -}}
{{- else if .Values.policy -}}
{{- toYaml .Values.policy | printf "%s\n" -}}
{{- end -}}
{{- end }}

{{/*
The pod-level fields both Deployments share after their own: (dict "program" .Values.webhook "root" $).
*/}}
{{- define "resize-guard.podExtras" -}}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .program.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .program.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/*
The webhook configuration (mutating or validating): its common fields, selectors, annotations.
*/}}
{{- define "resize-guard.webhookCommon" -}}
rules:
  - {operations: [UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods/resize], scope: Namespaced}
admissionReviewVersions: [v1]
sideEffects: NoneOnDryRun
failurePolicy: {{ .Values.webhooks.failurePolicy }}
timeoutSeconds: {{ .Values.webhooks.timeoutSeconds }}
matchPolicy: Equivalent
{{- end }}
{{- define "resize-guard.webhookSelectors" -}}
{{- with .Values.webhooks.namespaceSelector }}
namespaceSelector:
  {{- tpl (toYaml .) $ | nindent 2 }}
{{- end }}
{{- with .Values.webhooks.objectSelector }}
objectSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{- define "resize-guard.webhookAnnotations" -}}
{{- if eq .Values.certificates.mode "cert-manager" }}
annotations:
  cert-manager.io/inject-ca-from: {{ include "resize-guard.namespace" . }}/resize-guard-webhook
{{- end }}
{{- end }}

{{/*
Fails on settings that cannot work.
*/}}
{{- define "resize-guard.validate" -}}
{{- if and .Values.priorityClass.create (hasPrefix "system-" .Values.priorityClass.name) -}}
{{- fail (printf "priorityClass.create=true cannot create %q (system- names are reserved): set priorityClass.create=false to use that existing class" .Values.priorityClass.name) -}}
{{- end -}}
{{- if and .Values.priorityClass.create (not .Values.priorityClass.name) -}}
{{- fail "priorityClass.create=true needs priorityClass.name" -}}
{{- end -}}
{{- if and .Values.resourceQuota.create (not .Values.resourceQuota.priorityClasses) -}}
{{- fail "resourceQuota.create=true needs resourceQuota.priorityClasses" -}}
{{- end -}}
{{- end }}
