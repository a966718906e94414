{{/*
A Node service (origin, avatar-resolver, purge-service): Deployment, Service and PodDisruptionBudget.
(dict "root" $ "component" "origin" "port" 8800 "metricsPort" 9800 "values" .Values.origin "replicas" n "data" volume-or-nil)
*/}}
{{- define "cdn.nodeService" -}}
{{- $root := .root -}}
{{- $name := printf "%s-%s" (include "cdn.fullname" $root) .component -}}
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ $name }}
  labels: {{- include "cdn.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
  annotations: {{- include "cdn.lintExceptions" $root | nindent 4 }}
spec:
  {{- if not .autoscaled }}
  replicas: {{ .replicas }}
  {{- end }}
  revisionHistoryLimit: 3
  {{- if .recreate }}
  # one pod holds the uploads' volume (ReadWriteOnce): the old one goes before the new one mounts it
  strategy: { type: Recreate }
  {{- end }}
  selector:
    matchLabels: {{- include "cdn.selector" (dict "root" $root "component" .component) | nindent 6 }}
  template:
    metadata:
      labels: {{- include "cdn.selector" (dict "root" $root "component" .component) | nindent 8 }}
        {{- include "cdn.labels" $root | nindent 8 }}
      annotations:
        checksum/settings: {{ include (print $root.Template.BasePath "/settings.yaml") $root | sha256sum }}
    spec:
      {{- include "cdn.podSecurity" $root | nindent 6 }}
      automountServiceAccountToken: false
      # no Service's address as variables: a Service named like a setting (s3 → S3_PORT=tcp://…) broke the
      # render (#50's stage)
      enableServiceLinks: false
      terminationGracePeriodSeconds: 30
      {{- include "cdn.spread" (dict "root" $root "component" .component) | nindent 6 }}
      containers:
        - name: {{ .component }}
          image: {{ include "cdn.appImage" $root }}
          imagePullPolicy: {{ $root.Values.image.pullPolicy }}
          command: ["{{ .component }}/bin/{{ .component }}"]
          {{- include "cdn.envFrom" $root | nindent 10 }}
          {{- $secrets := index (include "cdn.programSecrets" $root | fromJson) .component }}
          {{- include "cdn.secretEnv" (dict "root" $root "keys" $secrets.keys "redisUser" $secrets.redisUser) | nindent 10 }}
          ports:
            - { name: http, containerPort: {{ .port }} }
            - { name: metrics, containerPort: {{ .metricsPort }} }
          readinessProbe:
            httpGet: { path: /healthz, port: http }
            periodSeconds: 5
            failureThreshold: 2
          livenessProbe:
            # the process answers at all (readiness also says whether it can serve: Redis, the store)
            tcpSocket: { port: http }
            initialDelaySeconds: 10
            periodSeconds: 10
            failureThreshold: 6
          {{- include "cdn.containerSecurity" $root | nindent 10 }}
          resources: {{- toYaml .values.resources | nindent 12 }}
          volumeMounts:
            - { name: data, mountPath: /data }
            - { name: tmp, mountPath: /tmp }
      volumes:
        - name: tmp
          emptyDir: { sizeLimit: 256Mi }
        {{- if .claim }}
        - name: data
          persistentVolumeClaim: { claimName: {{ .claim }} }
        {{- else }}
        - name: data
          emptyDir: { sizeLimit: {{ .dataSize | default "64Mi" }} }
        {{- end }}
---
apiVersion: v1
kind: Service
metadata:
  name: {{ $name }}
  labels: {{- include "cdn.labels" $root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  selector: {{- include "cdn.selector" (dict "root" $root "component" .component) | nindent 4 }}
  ports:
    - { name: http, port: {{ .port }}, targetPort: http }
    - { name: metrics, port: {{ .metricsPort }}, targetPort: metrics }
---
{{ include "cdn.pdb" (dict "root" $root "component" .component "pdb" .values.pdb) }}
{{- end -}}

{{/* Replicas of one component spread over nodes and zones when the cluster has several. */}}
{{- define "cdn.spread" -}}
topologySpreadConstraints:
  - maxSkew: 1
    topologyKey: kubernetes.io/hostname
    whenUnsatisfiable: ScheduleAnyway
    labelSelector:
      matchLabels: {{- include "cdn.selector" . | nindent 8 }}
{{- end -}}
