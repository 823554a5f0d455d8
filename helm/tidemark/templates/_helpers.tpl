{{/* Names, labels, addresses and the pod every service runs in. */}}

{{- define "tidemark.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* At most 38 characters: a Deployment's pod name adds "-planner" and 17 more, and a pod's
host name (which its advertised address uses) must fit 63. */}}
{{- define "tidemark.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 38 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 38 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 38 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* A component's resource name; short enough for pod host names (63). */}}
{{- define "tidemark.componentName" -}}
{{- printf "%s-%s" (include "tidemark.fullname" .root) .component -}}
{{- end -}}

{{- define "tidemark.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tidemark.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "tidemark.labels" -}}
{{ include "tidemark.selectorLabels" . }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/part-of: tidemark
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "tidemark.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "tidemark.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The headless Service's host name of a component: what clients dial and the certificate names. */}}
{{- define "tidemark.host" -}}
{{- printf "%s.%s.svc.%s" (include "tidemark.componentName" .) .root.Release.Namespace .root.Values.clusterDomain -}}
{{- end -}}

{{- define "tidemark.markerAddress" -}}
{{- printf "dns:///%s:%v" (include "tidemark.host" (dict "root" . "component" "marker")) .Values.marker.port -}}
{{- end -}}

{{- define "tidemark.plannerAddress" -}}
{{- printf "dns:///%s:%v" (include "tidemark.host" (dict "root" . "component" "planner")) .Values.planner.port -}}
{{- end -}}

{{/* The index replicas' per-pod addresses, comma-separated, in pod order. */}}
{{- define "tidemark.indexAddresses" -}}
{{- $name := include "tidemark.componentName" (dict "root" . "component" "index") -}}
{{- $host := include "tidemark.host" (dict "root" . "component" "index") -}}
{{- $addresses := list -}}
{{- range $ordinal := until (int .Values.index.replicaCount) -}}
{{- $addresses = append $addresses (printf "%s-%d.%s:%v" $name $ordinal $host $.Values.index.port) -}}
{{- end -}}
{{- join "," $addresses -}}
{{- end -}}

{{- define "tidemark.tlsSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{- printf "%s-tls" (include "tidemark.fullname" .) -}}
{{- else -}}
{{- .Values.tls.existingSecret -}}
{{- end -}}
{{- end -}}

{{- define "tidemark.clientTlsSecret" -}}
{{- if .Values.tls.certManager.enabled -}}
{{- printf "%s-client-tls" (include "tidemark.fullname" .) -}}
{{- else -}}
{{- .Values.tls.clientSecret -}}
{{- end -}}
{{- end -}}

{{/* The Secret of the accepted tokens: auth.existingSecret, else the chart's own. */}}
{{- define "tidemark.tokensSecret" -}}
{{- default (printf "%s-tokens" (include "tidemark.fullname" .)) .Values.auth.existingSecret -}}
{{- end -}}

{{- define "tidemark.clientTokenSecret" -}}
{{- default (include "tidemark.tokensSecret" .) .Values.auth.clientSecret -}}
{{- end -}}

{{/* Where clients (Spark pods, the test pod) mount tls.clientSecret. */}}
{{- define "tidemark.clientTlsDir" -}}/etc/tidemark/client-tls{{- end -}}

{{/* What the schema cannot say: refused at render, naming the value. */}}
{{- define "tidemark.validate" -}}
{{- $tls := .Values.tls -}}
{{- if and $tls.mutual (not $tls.enabled) -}}
{{- fail "tls.mutual: mutual TLS needs tls.enabled" -}}
{{- end -}}
{{- if and $tls.certManager.enabled (not $tls.enabled) -}}
{{- fail "tls.certManager.enabled: cert-manager certificates need tls.enabled" -}}
{{- end -}}
{{- if and $tls.enabled $tls.certManager.enabled (not $tls.certManager.issuerRef.name) -}}
{{- fail "tls.certManager.issuerRef.name: cert-manager needs the issuer that signs the certificates" -}}
{{- end -}}
{{- if and $tls.enabled (not $tls.certManager.enabled) (not $tls.existingSecret) -}}
{{- fail "tls.existingSecret: TLS is on (tls.enabled) without a Secret: name one holding tls.crt, tls.key and ca.crt, or set tls.certManager.enabled" -}}
{{- end -}}
{{- if and $tls.enabled (not $tls.certManager.enabled) (not $tls.clientSecret) -}}
{{- fail "tls.clientSecret: TLS is on (tls.enabled) without the Secret clients mount: name one holding ca.crt (and tls.crt, tls.key with tls.mutual), or set tls.certManager.enabled" -}}
{{- end -}}
{{- if and (not .Values.allowedRoots) (not .Values.allowAnyRoot) -}}
{{- fail "allowedRoots: name the table prefixes the services may touch (e.g. s3://lake/tables), or set allowAnyRoot: true to serve every table the storage credentials reach" -}}
{{- end -}}
{{- if and .Values.allowedRoots .Values.allowAnyRoot -}}
{{- fail "allowAnyRoot: true contradicts allowedRoots; drop one of them" -}}
{{- end -}}
{{- if not (or .Values.marker.enabled .Values.index.enabled .Values.planner.enabled) -}}
{{- fail "marker.enabled: every service is disabled; enable at least one of marker, index, planner" -}}
{{- end -}}
{{- range $component := list "marker" "index" "planner" -}}
{{- $values := index $.Values $component -}}
{{- if has (int $.Values.healthPort) (list (int $values.port) (int $values.metricsPort)) -}}
{{- fail (printf "healthPort: %v is also %s's gRPC or metrics port" $.Values.healthPort $component) -}}
{{- end -}}
{{- if eq $component "index" -}}
{{- range $worker := untilStep 1 (int $values.workers) 1 -}}
{{- if has (add $values.metricsPort $worker | int) (list (int $values.port) (int $.Values.healthPort)) -}}
{{- fail (printf "index.workers: worker %d's metrics port %v (index.metricsPort + %d) is also the gRPC or health port" $worker (add $values.metricsPort $worker) $worker) -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- if eq (int $values.port) (int $values.metricsPort) -}}
{{- fail (printf "%s.metricsPort: %v is also %s.port" $component $values.metricsPort $component) -}}
{{- end -}}
{{- if and (hasKey $values "autoscaling") $values.autoscaling.enabled (gt (int $values.autoscaling.minReplicas) (int $values.autoscaling.maxReplicas)) -}}
{{- fail (printf "%s.autoscaling.minReplicas: %v is above maxReplicas %v" $component $values.autoscaling.minReplicas $values.autoscaling.maxReplicas) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pod of one service: (dict "root" $ "component" "marker"). */}}
{{- define "tidemark.podTemplate" -}}
{{- $root := .root -}}
{{- $component := .component -}}
{{- $values := index $root.Values $component -}}
{{- $name := include "tidemark.componentName" . -}}
metadata:
  labels:
    {{- include "tidemark.labels" . | nindent 4 }}
    {{- with $root.Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  {{- with $root.Values.podAnnotations }}
  annotations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
spec:
  serviceAccountName: {{ include "tidemark.serviceAccountName" $root }}
  automountServiceAccountToken: {{ or $root.Values.serviceAccount.automountServiceAccountToken (hasKey $root.Values.serviceAccount.annotations "eks.amazonaws.com/role-arn") }}
  {{- /* A StatefulSet's pod gets the DNS name <pod>.<headless service>: the address it
  advertises (a marker replica sends callers to the owner's), which the certificate's
  wildcard names. A Deployment's pod (the planner's, which names no owner) gets none. */}}
  subdomain: {{ $name }}
  terminationGracePeriodSeconds: {{ add (int $root.Values.gracePeriodS) 15 }}
  {{- include "tidemark.podSecurityContext" $root | nindent 2 }}
  {{- with $root.Values.image.pullSecrets }}
  imagePullSecrets:
    {{- range . }}
    - name: {{ . }}
    {{- end }}
  {{- end }}
  {{- with $root.Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $root.Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  containers:
    - name: {{ $component }}
      image: {{ include "tidemark.image" $root }}
      imagePullPolicy: {{ $root.Values.image.pullPolicy }}
      args:
        - {{ $component }}
        - --host=0.0.0.0
        - --port={{ $values.port }}
        {{- if hasKey $values "bulkPort" }}
        - --bulk-port={{ $values.bulkPort }}
        {{- end }}
        - --metrics-port={{ $values.metricsPort }}
        - --health-port={{ $root.Values.healthPort }}
        - --advertise-address=$(POD_NAME).{{ include "tidemark.host" . }}:{{ $values.port }}
        {{- if eq $component "index" }}
        - --workers={{ $values.workers }}
        {{- end }}
        - --max-connection-age-s={{ $root.Values.maxConnectionAgeS }}
        - --grace-period={{ $root.Values.gracePeriodS }}
        - --log-level={{ $root.Values.logLevel }}
        - --log-format={{ $root.Values.logFormat }}
        {{- range $root.Values.allowedRoots }}
        - --allowed-root={{ . }}
        {{- end }}
        {{- if $root.Values.tls.enabled }}
        - --tls-cert=/etc/tidemark/tls/tls.crt
        - --tls-key=/etc/tidemark/tls/tls.key
        {{- if $root.Values.tls.mutual }}
        - --tls-client-ca=/etc/tidemark/tls/ca.crt
        {{- end }}
        {{- end }}
        {{- if $root.Values.auth.enabled }}
        - --auth-token-file=/etc/tidemark/auth/{{ $root.Values.auth.tokensKey }}
        {{- end }}
      env:
        - name: POD_NAME
          valueFrom:
            fieldRef:
              fieldPath: metadata.name
        {{- if eq $component "index" }}
        - name: TMPDIR
          value: /var/cache/tidemark
        - name: TIDEMARK_INDEX_BLOCK_CACHE_BYTES
          value: {{ $values.blockCacheBytes | int64 | quote }}
        {{- end }}
        {{- if and (eq $component "planner") $values.tables }}
        - name: TIDEMARK_PLANNER_TABLES
          value: {{ join "," $values.tables | quote }}
        {{- end }}
        {{- with $root.Values.s3.endpoint }}
        - name: AWS_ENDPOINT_URL
          value: {{ . | quote }}
        {{- end }}
        {{- with $root.Values.s3.region }}
        - name: AWS_DEFAULT_REGION
          value: {{ . | quote }}
        {{- end }}
        {{- with $root.Values.s3.existingSecret }}
        - name: AWS_ACCESS_KEY_ID
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $root.Values.s3.accessKeyIdKey }}
        - name: AWS_SECRET_ACCESS_KEY
          valueFrom:
            secretKeyRef:
              name: {{ . }}
              key: {{ $root.Values.s3.secretAccessKeyKey }}
        {{- end }}
        {{- with $root.Values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        {{- with $values.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      ports:
        - name: grpc
          containerPort: {{ $values.port }}
          protocol: TCP
        {{- if hasKey $values "bulkPort" }}
        - name: bulk
          containerPort: {{ $values.bulkPort }}
          protocol: TCP
        {{- end }}
        - name: metrics
          containerPort: {{ $values.metricsPort }}
          protocol: TCP
        {{- if eq $component "index" }}
        {{- range $worker := include "tidemark.extraWorkers" $root | fromJsonArray }}
        - name: metrics-w{{ $worker }}
          containerPort: {{ add $values.metricsPort $worker }}
          protocol: TCP
        {{- end }}
        {{- end }}
        - name: health
          containerPort: {{ $root.Values.healthPort }}
          protocol: TCP
      {{- /* Native gRPC probes dial the plaintext health port: they speak neither TLS nor a
      token. Liveness asks the overall status (the process serves), never the storage. */}}
      startupProbe:
        grpc:
          port: {{ $root.Values.healthPort }}
          service: ""
        periodSeconds: {{ $root.Values.probes.startup.periodSeconds }}
        failureThreshold: {{ $root.Values.probes.startup.failureThreshold }}
      readinessProbe:
        grpc:
          port: {{ $root.Values.healthPort }}
          service: {{ include "tidemark.grpcService" $component }}
        periodSeconds: {{ $root.Values.probes.readiness.periodSeconds }}
        failureThreshold: {{ $root.Values.probes.readiness.failureThreshold }}
      livenessProbe:
        grpc:
          port: {{ $root.Values.healthPort }}
          service: ""
        periodSeconds: {{ $root.Values.probes.liveness.periodSeconds }}
        failureThreshold: {{ $root.Values.probes.liveness.failureThreshold }}
      resources:
        {{- toYaml $values.resources | nindent 8 }}
      {{- include "tidemark.containerSecurityContext" $root | nindent 6 }}
      volumeMounts:
        - name: tmp
          mountPath: /tmp
        {{- if eq $component "index" }}
        - name: cache
          mountPath: /var/cache/tidemark
        {{- end }}
        {{- if $root.Values.tls.enabled }}
        - name: tls
          mountPath: /etc/tidemark/tls
          readOnly: true
        {{- end }}
        {{- if $root.Values.auth.enabled }}
        - name: auth
          mountPath: /etc/tidemark/auth
          readOnly: true
        {{- end }}
  volumes:
    - name: tmp
      emptyDir: {}
    {{- if eq $component "index" }}
    - name: cache
      emptyDir:
        sizeLimit: {{ $values.cacheSizeLimit }}
    {{- end }}
    {{- if $root.Values.tls.enabled }}
    - name: tls
      secret:
        secretName: {{ include "tidemark.tlsSecret" $root }}
    {{- end }}
    {{- if $root.Values.auth.enabled }}
    - name: auth
      secret:
        secretName: {{ include "tidemark.tokensSecret" $root }}
        items:
          - key: {{ $root.Values.auth.tokensKey }}
            path: {{ $root.Values.auth.tokensKey }}
    {{- end }}
{{- end -}}

{{- define "tidemark.grpcService" -}}
{{- get (dict "marker" "tidemark.marker.v1.MarkerService" "index" "tidemark.index.v1.IndexService" "planner" "tidemark.planner.v1.PlannerService") . -}}
{{- end -}}

{{- define "tidemark.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{/* Pod Security Standard "restricted", on every pod the chart makes (test pods too). */}}
{{- define "tidemark.podSecurityContext" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: {{ .Values.runAsUser }}
  runAsGroup: {{ .Values.runAsUser }}
  fsGroup: {{ .Values.runAsUser }}
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{- define "tidemark.containerSecurityContext" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  capabilities:
    drop:
      - ALL
  seccompProfile:
    type: RuntimeDefault
{{- end -}}

{{/* The client's TLS settings as env (name, value), for the test pod and for NOTES' Spark settings. */}}
{{- define "tidemark.clientTlsEnvPairs" -}}
{{- $dir := include "tidemark.clientTlsDir" . -}}
TIDEMARK_CLIENT_TLS_CA_PATH: {{ $dir }}/ca.crt
{{- if .Values.tls.mutual }}
TIDEMARK_CLIENT_TLS_CERT_PATH: {{ $dir }}/tls.crt
TIDEMARK_CLIENT_TLS_KEY_PATH: {{ $dir }}/tls.key
{{- end }}
{{- end -}}

{{- define "tidemark.clientTlsEnv" -}}
{{- range $name, $value := fromYaml (include "tidemark.clientTlsEnvPairs" .) }}
- name: {{ $name }}
  value: {{ $value }}
{{- end }}
{{- end -}}

{{/* The index's extra worker processes (1..workers-1): worker i serves /metrics on metricsPort+i. */}}
{{- define "tidemark.extraWorkers" -}}
{{- if .Values.index.enabled -}}
{{- untilStep 1 (int .Values.index.workers) 1 | toJson -}}
{{- else -}}
[]
{{- end -}}
{{- end -}}
