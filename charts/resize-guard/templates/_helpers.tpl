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
The Pod Security level the install namespace can enforce: restricted, or privileged when the
webhook uses the node's network (host namespaces are outside restricted and baseline).
*/}}
{{- define "resize-guard.podSecurityLevel" -}}
{{- ternary "privileged" "restricted" .Values.webhook.hostNetwork -}}
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
{{- if .image.digest -}}
{{- printf "%s@%s" .image.repository .image.digest -}}
{{- else -}}
{{- printf "%s:%s" .image.repository (.image.tag | default .root.Chart.AppVersion | toString) -}}
{{- end -}}
{{- end }}

{{/*
The policy.yaml text: a string as written, a map as YAML.
*/}}
{{- define "resize-guard.policy" -}}
{{- $config := .Values.policy.config -}}
{{- if kindIs "string" $config -}}
{{- $config -}}
{{- else if $config -}}
{{- toYaml $config | printf "%s\n" -}}
{{- end -}}
{{- end }}

{{/*
The pod template's metadata: (dict "program" .Values.webhook "selector" $sel).
*/}}
{{- define "resize-guard.podMetadata" -}}
{{- with .program.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
labels:
  {{- with .program.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- .selector | nindent 2 }}
{{- end }}

{{/*
The pod's securityContext: the program's podSecurityContext, else what passes Pod Security
restricted.
*/}}
{{- define "resize-guard.podSecurityContext" -}}
{{- with .podSecurityContext }}
{{- toYaml . }}
{{- else -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
seccompProfile: {type: RuntimeDefault}
{{- end }}
{{- end }}

{{/*
The container's securityContext: the program's securityContext, else the restricted one.
*/}}
{{- define "resize-guard.securityContext" -}}
{{- with .securityContext }}
{{- toYaml . }}
{{- else -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities: {drop: [ALL]}
seccompProfile: {type: RuntimeDefault}
{{- end }}
{{- end }}

{{/*
The container's env: the pod's namespace and name, then the program's extraEnv.
*/}}
{{- define "resize-guard.env" -}}
- {name: POD_NAMESPACE, valueFrom: {fieldRef: {fieldPath: metadata.namespace}}}
- {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
- {name: MIMALLOC_ARENA_EAGER_COMMIT, value: "0"}
{{- with .extraEnv }}
{{ toYaml . }}
{{- end }}
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
{{- with .Values.webhooks.matchConditions }}
matchConditions:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}
{{/*
The admission probe's entry (controller/src/admission_probe.rs; deploy/base/webhook-configurations.yaml
says why): the main entry's Service, path, failurePolicy and timeout, none of its selectors or
matchConditions, called only for a dry-run resize by resize-guard's controller or its
post-install check of a pod in the account's own namespace. (dict "path" "/mutate" "root" $)
*/}}
{{- define "resize-guard.probeWebhook" -}}
- name: probe.resize-guard.io
  clientConfig:
    service: {name: resize-guard-webhook, namespace: {{ include "resize-guard.namespace" .root }}, path: {{ .path }}, port: 443}
  rules:
    - {operations: [UPDATE], apiGroups: [""], apiVersions: [v1], resources: [pods/resize], scope: Namespaced}
  admissionReviewVersions: [v1]
  sideEffects: NoneOnDryRun
  failurePolicy: {{ .root.Values.webhooks.failurePolicy }}
  timeoutSeconds: {{ .root.Values.webhooks.timeoutSeconds }}
  matchPolicy: Equivalent
  matchConditions:
    - name: resize-guard-admission-probe
      expression: >-
        has(request.dryRun) && request.dryRun &&
        (request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':resize-guard-controller' ||
        request.userInfo.username == 'system:serviceaccount:' + request.namespace + ':resize-guard-check')
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
The policy this chart renders, as a map (empty with policy.create=false: the chart cannot know it).
*/}}
{{- define "resize-guard.renderedPolicy" -}}
{{- if .Values.policy.create -}}
{{- include "resize-guard.policy" . | fromYaml | default (dict) | toJson -}}
{{- else -}}
{}
{{- end -}}
{{- end }}

{{/*
"true" when the rendered policy deletes victims (preemption.pdb: bestEffort) / reverts Infeasible
resizes (feasibility.revertInfeasible: true); empty otherwise.
*/}}
{{- define "resize-guard.policyDeletes" -}}
{{- $p := include "resize-guard.renderedPolicy" . | fromJson -}}
{{- if eq (toString (dig "preemption" "pdb" "respect" $p)) "bestEffort" -}}true{{- end -}}
{{- end }}
{{- define "resize-guard.policyReverts" -}}
{{- $p := include "resize-guard.renderedPolicy" . | fromJson -}}
{{- if eq (toString (dig "feasibility" "revertInfeasible" false $p)) "true" -}}true{{- end -}}
{{- end }}

{{/*
"true" when the controller's ClusterRole gets `delete pods` / `patch pods/resize`:
rbac.controller.deletePods / resizePods, where auto follows the rendered policy.
*/}}
{{- define "resize-guard.grantsDeletes" -}}
{{- $v := .Values.rbac.controller.deletePods -}}
{{- if eq (toString $v) "auto" -}}{{ include "resize-guard.policyDeletes" . }}{{- else if $v -}}true{{- end -}}
{{- end }}
{{- define "resize-guard.grantsResizes" -}}
{{- $v := .Values.rbac.controller.resizePods -}}
{{- if eq (toString $v) "auto" -}}{{ include "resize-guard.policyReverts" . }}{{- else if $v -}}true{{- end -}}
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
{{- if and (include "resize-guard.policyDeletes" .) (not (include "resize-guard.grantsDeletes" .)) -}}
{{- fail "policy.config sets preemption.pdb: bestEffort (victims are deleted) but rbac.controller.deletePods=false leaves the controller without `delete pods`: the API server would refuse every preemption. Set rbac.controller.deletePods=auto (or true), or preemption.pdb: respect" -}}
{{- end -}}
{{- if and (include "resize-guard.policyReverts" .) (not (include "resize-guard.grantsResizes" .)) -}}
{{- fail "policy.config sets feasibility.revertInfeasible: true but rbac.controller.resizePods=false leaves the controller without `patch pods/resize`: the API server would refuse every revert. Set rbac.controller.resizePods=auto (or true), or revertInfeasible: false" -}}
{{- end -}}
{{- if and .Values.resourceQuota.create (not .Values.resourceQuota.priorityClasses) -}}
{{- fail "resourceQuota.create=true needs resourceQuota.priorityClasses" -}}
{{- end -}}
{{- end }}
