{{/* The release's name prefix of every object. */}}
{{- define "cdn.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{/* Labels of every object; "component" is added per object. */}}
{{- define "cdn.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* Selector labels of one component: (dict "root" $ "component" "origin") */}}
{{- define "cdn.selector" -}}
app.kubernetes.io/name: {{ .root.Chart.Name }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "cdn.appImage" -}}
{{ .Values.image.app.repository }}:{{ .Values.image.app.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "cdn.componentsImage" -}}
{{ .Values.image.components.repository }}:{{ .Values.image.components.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "cdn.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-secrets" (include "cdn.fullname" .)) -}}
{{- end -}}

{{/* Every pod: non-root (uid 10001, the images' "cdn-origin"; each pod is apart), no privilege escalation, default seccomp. */}}
{{- define "cdn.podSecurity" -}}
securityContext:
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  fsGroup: 10001
  seccompProfile: { type: RuntimeDefault }
{{- end -}}

{{/* Every container: read-only root filesystem (writes go to emptyDirs or volumes), no capabilities. */}}
{{- define "cdn.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  runAsNonRoot: true
  runAsUser: 10001
  runAsGroup: 10001
  capabilities: { drop: [ALL] }
{{- end -}}

{{/* The settings of every program: the ConfigMap and the Secret (optional keys). */}}
{{- define "cdn.envFrom" -}}
envFrom:
  - configMapRef: { name: {{ include "cdn.fullname" . }}-settings }
{{- end -}}

{{/*
The secrets a program holds, and no other: each key of `keys` from the stack's Secret (absent keys are
absent), and with `redisUser` its Redis credentials (the embedded Redis: that ACL user's own password, from
the chart's redis-users Secret; another Redis: the one given). A libvips exploit in the origin yields the
origin's secrets, not the webhook keys, the admin tokens or Redis' own password.
(dict "root" $ "keys" (list "UPLOAD_TOKENS" …) "redisUser" "origin")
*/}}
{{- define "cdn.secretEnv" -}}
{{- $root := .root -}}
{{- $secret := include "cdn.secretName" $root -}}
{{- $embedded := eq $root.Values.redis.mode "embedded" -}}
{{- $acl := and .aclPasswords $embedded -}}
{{- if or .keys .redisUser $acl }}
env:
{{- range .keys }}
  - name: {{ . }}
    valueFrom: { secretKeyRef: { name: {{ $secret }}, key: {{ . }}, optional: true } }
{{- end }}
{{- if and .redisUser $embedded }}
  - { name: REDIS_USERNAME, value: {{ .redisUser }} }
  - name: REDIS_PASSWORD
    valueFrom: { secretKeyRef: { name: {{ include "cdn.fullname" $root }}-redis-users, key: {{ .redisUser }} } }
{{- else if .redisUser }}
  - name: REDIS_PASSWORD
    valueFrom: { secretKeyRef: { name: {{ $secret }}, key: REDIS_PASSWORD, optional: true } }
{{- end }}
{{- if $acl }}
  - name: REDIS_ACL_PASSWORDS
    valueFrom: { secretKeyRef: { name: {{ include "cdn.fullname" $root }}-redis-users, key: REDIS_ACL_PASSWORDS } }
{{- end }}
{{- else }}
env: []
{{- end }}
{{- end -}}

{{/*
The render step of a pod running nginx, varnish, haproxy or redis: infra/render.js (the same templates and
settings as the native stack and compose) writes the configs into the pod's /stack emptyDir, given only the
secrets that pod's configs hold. (dict "root" $ "keys" (list …) "aclPasswords" bool)
*/}}
{{- define "cdn.renderInit" -}}
{{- $root := .root -}}
- name: render
  image: {{ include "cdn.appImage" $root }}
  imagePullPolicy: {{ $root.Values.image.pullPolicy }}
  command: ["node", "infra/render.js"]
  {{- include "cdn.envFrom" $root | nindent 2 }}
  {{- include "cdn.secretEnv" (dict "root" $root "keys" (.keys | default list) "aclPasswords" .aclPasswords) | nindent 2 }}
  {{- include "cdn.containerSecurity" $root | nindent 2 }}
  resources: {{- toYaml $root.Values.render.resources | nindent 4 }}
  volumeMounts:
    - { name: stack, mountPath: /stack }
    - { name: tmp, mountPath: /tmp }
{{- end -}}

{{/* A container's rendered settings, read by a shell before it starts its program. */}}
{{- define "cdn.withSettings" -}}
{{ include "cdn.loadSettings" . }} exec {{ . }}
{{- end -}}

{{/* The shell words that put the stack's settings (rendered into /stack/env) in the environment. */}}
{{- define "cdn.loadSettings" -}}
set -a; . /stack/env; set +a;
{{- end -}}

{{/* The scratch volumes of a pod with a render step. */}}
{{- define "cdn.stackVolumes" -}}
- name: stack
  emptyDir: { sizeLimit: 256Mi }
- name: tmp
  emptyDir: { sizeLimit: 64Mi }
{{- end -}}

{{/* Varnish's pods by their stable names behind the headless Service, host:port, comma separated. */}}
{{- define "cdn.varnishNodes" -}}
{{- $name := include "cdn.fullname" . -}}
{{- $nodes := list -}}
{{- range $i := until (int .Values.varnish.replicas) -}}
{{- $nodes = append $nodes (printf "%s-varnish-%d.%s-varnish-headless.%s.svc.%s:6081" $name $i $name $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- join "," $nodes -}}
{{- end -}}

{{/*
The linter's findings this chart does not follow, each for a reason:
- container-image-pull-policy: images are pinned by version (appVersion), so IfNotPresent gets the image
  wanted, and clusters without a registry (images loaded onto the nodes) still start pods.
- *-has-host-podantiaffinity: replicas spread over nodes by topologySpreadConstraints (see cdn.spread),
  ScheduleAnyway, so a one-node cluster still runs every replica; a required anti-affinity would not.
- deployment-replicas: the default values are the one-box stack (one of each); a fleet's values set two
  or more (ci/multi-node-values.yaml).
- deployment-strategy: the origin with uploads on its volume (store.type fs, ReadWriteOnce) must stop
  before its successor mounts the volume (Recreate); with s3 it rolls.
*/}}
{{- define "cdn.lintExceptions" -}}
kube-score/ignore: container-image-pull-policy,deployment-has-host-podantiaffinity,statefulset-has-host-podantiaffinity,deployment-replicas,deployment-strategy
{{- end -}}

{{/* One component's PodDisruptionBudget: (dict "root" $ "component" "varnish" "pdb" .Values.varnish.pdb) */}}
{{- define "cdn.pdb" -}}
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata:
  name: {{ include "cdn.fullname" .root }}-{{ .component }}
  labels: {{- include "cdn.labels" .root | nindent 4 }}
    app.kubernetes.io/component: {{ .component }}
spec:
  maxUnavailable: {{ .pdb.maxUnavailable }}
  selector:
    matchLabels: {{- include "cdn.selector" (dict "root" .root "component" .component) | nindent 6 }}
{{- end -}}
