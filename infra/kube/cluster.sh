#!/usr/bin/env bash
# A one-node Kubernetes on this machine (#50), from what the registries here serve: kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy and kubectl built from the k8s.io/kubernetes Go
# module (infra/kube/build.sh), CoreDNS from its Go module, Debian's etcd, containerd, runc and CNI plugins. No
# image registry is reachable: the pause image is built here from Kubernetes' own pause.c, and the stack's
# images come from Podman (./infra/stack compose builds them), imported into containerd.
#   infra/kube/cluster.sh up | down | status | images | test | kubectl ARGS…
# Everything it starts runs as root (kubelet and containerd need it) and lives under KUBE_DIR
# (/var/lib/image-cdn-stack/kube); the pods run as the chart says (non-root). `down` stops it all and removes
# the pods' network (bridge, iptables chains), keeping the built binaries and images.
set -euo pipefail

ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
KUBE_VERSION="${KUBE_VERSION:-v1.34.2}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.12.4}"
TOOLS="${BUILT_TOOLS_DIR:-/var/cache/image-cdn-stack/tools}"
BIN="$TOOLS/kubernetes-$KUBE_VERSION"
COREDNS="$TOOLS/coredns-$COREDNS_VERSION/coredns"
K="${KUBE_DIR:-/var/lib/image-cdn-stack/kube}"
PAUSE_IMAGE=localhost/pause:3.10
POD_CIDR=10.244.0.0/24
CLUSTER_CIDR=10.244.0.0/16
SERVICE_CIDR=10.96.0.0/16
SERVICE_IP=10.96.0.1
ETCD_PORT="${KUBE_ETCD_PORT:-12379}"
API_PORT="${KUBE_API_PORT:-16443}"
SOCK="$K/containerd/containerd.sock"
NODE="$(hostname | tr '[:upper:]' '[:lower:]')"

say() { printf '\033[1m%s\033[0m\n' "$*"; }
die() { echo "kube: $*" >&2; exit 1; }

host_ip() {
  local dev
  dev="$(ip -4 route show default | awk '{ for (i = 1; i < NF; i++) if ($i == "dev") { print $(i + 1); exit } }')"
  ip -4 -o addr show dev "${dev:-lo}" | awk '{ split($4, a, "/"); print a[1]; exit }'
}

kubectl() { "$BIN/kubectl" --kubeconfig "$K/admin.conf" "$@"; }

# The cluster's certificates: one CA; the apiserver's serving certificate; admin (system:masters: kubectl, the
# controller manager, the scheduler, kube-proxy, CoreDNS and the apiserver's calls to the kubelet); the
# kubelet's (system:node:NAME, for the Node authorizer, also its serving certificate); the service-account keys.
pki() {
  local p="$K/pki" ip="$1"
  [ -f "$p/admin.crt" ] && return 0
  mkdir -p "$p" && chmod 700 "$p"
  openssl req -x509 -newkey rsa:2048 -nodes -keyout "$p/ca.key" -out "$p/ca.crt" -days 3650 -subj /CN=kube-ca 2>/dev/null
  cert apiserver /CN=kube-apiserver "IP:127.0.0.1,IP:$SERVICE_IP,IP:$ip,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local"
  cert admin /O=system:masters/CN=admin ""
  cert kubelet "/O=system:nodes/CN=system:node:$NODE" "IP:127.0.0.1,IP:$ip,DNS:$NODE"
  openssl genrsa -out "$p/sa.key" 2048 2>/dev/null
  openssl rsa -in "$p/sa.key" -pubout -out "$p/sa.pub" 2>/dev/null
  chmod 600 "$p"/*.key
}

# cert NAME SUBJECT SANS: a key and a certificate signed by the CA
cert() {
  local p="$K/pki" ext
  ext="$(mktemp)"
  printf 'basicConstraints=CA:FALSE\nkeyUsage=digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth,clientAuth\n' >"$ext"
  [ -n "$3" ] && echo "subjectAltName=$3" >>"$ext"
  openssl req -newkey rsa:2048 -nodes -keyout "$p/$1.key" -out "$p/$1.csr" -subj "$2" 2>/dev/null
  openssl x509 -req -in "$p/$1.csr" -CA "$p/ca.crt" -CAkey "$p/ca.key" -CAcreateserial -out "$p/$1.crt" -days 3650 \
    -extfile "$ext" 2>/dev/null
  rm -f "$ext" "$p/$1.csr"
}

# kubeconfig NAME CERT: a kubeconfig for the apiserver on this machine with CERT's key
kubeconfig() {
  cat >"$K/$1.conf" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: local
  cluster: { server: "https://127.0.0.1:$API_PORT", certificate-authority: "$K/pki/ca.crt" }
users:
- name: $2
  user: { client-certificate: "$K/pki/$2.crt", client-key: "$K/pki/$2.key" }
contexts:
- name: local
  context: { cluster: local, user: $2 }
current-context: local
EOF
  chmod 600 "$K/$1.conf"
}

configs() {
  local ip="$1" restrict_oom=false
  # CAP_SYS_RESOURCE (bit 24 of the effective set) lets a process lower an oom_score_adj
  (( (0x$(awk '/^CapEff/ { print $2 }' /proc/self/status) >> 24) & 1 )) || restrict_oom=true
  mkdir -p "$K/logs" "$K/run" "$K/cni" "$K/containerd" "$K/kubelet"
  kubeconfig admin admin
  kubeconfig kubelet kubelet
  cat >"$K/containerd/config.toml" <<EOF
version = 2
root = "$K/containerd/root"
state = "$K/containerd/state"
[grpc]
  address = "$SOCK"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  # a sandbox asks for oom_score_adj -998, which needs CAP_SYS_RESOURCE: a machine (a VM's root, a container)
  # without it fails every pod with runc's "can't get final child's PID from pipe"; this keeps containerd's own
  restrict_oom_score_adj = $restrict_oom
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$K/cni"
EOF
  cat >"$K/cni/10-kube.conflist" <<EOF
{
  "cniVersion": "0.4.0",
  "name": "kube",
  "plugins": [
    {
      "type": "bridge", "bridge": "kube0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
      "ipam": { "type": "host-local", "ranges": [[{ "subnet": "$POD_CIDR" }]], "routes": [{ "dst": "0.0.0.0/0" }],
                "dataDir": "$K/cni-ipam" }
    },
    { "type": "portmap", "capabilities": { "portMappings": true } }
  ]
}
EOF
  cat >"$K/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
containerRuntimeEndpoint: unix://$SOCK
authentication:
  anonymous: { enabled: false }
  webhook: { enabled: true }
  x509: { clientCAFile: "$K/pki/ca.crt" }
authorization: { mode: Webhook }
tlsCertFile: "$K/pki/kubelet.crt"
tlsPrivateKeyFile: "$K/pki/kubelet.key"
clusterDomain: cluster.local
clusterDNS: ["$ip"]
resolvConf: /etc/resolv.conf
evictionHard: { "memory.available": "100Mi", "nodefs.available": "1%", "imagefs.available": "1%" }
imageGCHighThresholdPercent: 100
healthzPort: 0
readOnlyPort: 0
EOF
  cat >"$K/Corefile" <<EOF
.:53 {
    bind $ip
    errors
    kubernetes cluster.local in-addr.arpa ip6.arpa {
        kubeconfig $K/admin.conf local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
    cache 5
}
EOF
}

# start NAME COMMAND…: in its own session, its output in logs/NAME.log, its pid in run/NAME.pid
start() {
  local name="$1"
  shift
  if [ -f "$K/run/$name.pid" ] && kill -0 "$(cat "$K/run/$name.pid")" 2>/dev/null; then return 0; fi
  setsid "$@" >>"$K/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$K/run/$name.pid"
}

# wait_for WHAT SECONDS COMMAND…
wait_for() {
  local what="$1" limit="$2" started=$SECONDS
  shift 2
  until "$@" >/dev/null 2>&1; do
    [ $((SECONDS - started)) -ge "$limit" ] && die "$what not ready in $limit s (logs: $K/logs)"
    sleep 1
  done
}

# The pause image every pod's sandbox runs: Kubernetes' own pause.c (in the module's build/pause), static
pause_image() {
  ctr -a "$SOCK" -n k8s.io images ls -q | grep -qx "$PAUSE_IMAGE" && return 0
  local src work
  src="$(GOFLAGS=-mod=mod /usr/local/go/bin/go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  work="$(mktemp -d)"
  mkdir -p "$work/rootfs"
  gcc -Os -static -DVERSION="3.10" -o "$work/rootfs/pause" "$src/build/pause/linux/pause.c"
  tar -C "$work/rootfs" -cf "$work/rootfs.tar" pause
  podman import --change 'ENTRYPOINT ["/pause"]' "$work/rootfs.tar" "$PAUSE_IMAGE" >/dev/null
  podman save --format oci-archive -o "$work/pause.tar" "$PAUSE_IMAGE" >/dev/null
  ctr -a "$SOCK" -n k8s.io images import --base-name localhost/pause "$work/pause.tar" >/dev/null
  rm -rf "$work"
}

# The stack's two images and the compose stack's S3 server (built by Podman: ./infra/stack compose build),
# handed to containerd
images() {
  local version image attempt
  version="$(sed -n 's/^appVersion: "\(.*\)"$/\1/p' "$ROOT/infra/helm/image-cdn-stack/Chart.yaml")"
  for image in image-cdn-stack-app image-cdn-stack-components image-cdn-stack-versitygw; do
    podman image exists "docker.io/library/$image:$version" || die "no image $image:$version: ./infra/stack compose build"
    # containerd may still be collecting the snapshots of the image this one replaces (same tag, shared
    # layers) while it unpacks: "failed to prepare extraction snapshot … parent snapshot … does not exist",
    # seen once in a clean clone's kube stage; a second import finds the layers settled
    for attempt in 1 2 3; do
      podman save --format docker-archive "docker.io/library/$image:$version" 2>/dev/null |
        ctr -a "$SOCK" -n k8s.io images import - >/dev/null && break
      [ "$attempt" = 3 ] && die "could not import $image:$version into containerd"
      say "importing $image:$version again (containerd: see above)"
      sleep 2
    done
  done
}

# Debian's parts of the cluster, installed when missing
packages() {
  local missing=()
  command -v etcd >/dev/null || missing+=(etcd-server)
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v iptables >/dev/null || missing+=(iptables)
  [ -x /usr/lib/cni/bridge ] || missing+=(containernetworking-plugins)
  [ ${#missing[@]} -eq 0 ] && return 0
  say "installing ${missing[*]}"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
}

up() {
  [ "$(id -u)" = 0 ] || die "kubelet and containerd need root"
  packages
  for tool in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
    [ -x "$BIN/$tool" ] || "$ROOT/infra/kube/build.sh"
  done
  [ -x "$COREDNS" ] || GOBIN="$(dirname "$COREDNS")" GOFLAGS=-mod=mod /usr/local/go/bin/go install "github.com/coredns/coredns@$COREDNS_VERSION"
  local ip
  ip="$(host_ip)"
  [ -n "$ip" ] || die "no address of this machine to advertise"
  mkdir -p "$K" && chmod 700 "$K"
  pki "$ip"
  configs "$ip"
  modprobe br_netfilter 2>/dev/null || true
  sysctl -q -w net.bridge.bridge-nf-call-iptables=1 net.ipv4.ip_forward=1 >/dev/null 2>&1 || true

  start containerd containerd --config "$K/containerd/config.toml"
  start etcd etcd --name kube --data-dir "$K/etcd" --listen-client-urls "http://127.0.0.1:$ETCD_PORT" \
    --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" --listen-peer-urls http://127.0.0.1:12380 \
    --initial-advertise-peer-urls http://127.0.0.1:12380 --initial-cluster kube=http://127.0.0.1:12380
  wait_for etcd 30 curl -fsS "http://127.0.0.1:$ETCD_PORT/health"
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
    --advertise-address "$ip" --secure-port "$API_PORT" --service-cluster-ip-range "$SERVICE_CIDR" \
    --client-ca-file "$K/pki/ca.crt" --tls-cert-file "$K/pki/apiserver.crt" --tls-private-key-file "$K/pki/apiserver.key" \
    --kubelet-client-certificate "$K/pki/admin.crt" --kubelet-client-key "$K/pki/admin.key" \
    --kubelet-certificate-authority "$K/pki/ca.crt" \
    --service-account-key-file "$K/pki/sa.pub" --service-account-signing-key-file "$K/pki/sa.key" \
    --service-account-issuer https://kubernetes.default.svc.cluster.local \
    --authorization-mode Node,RBAC --allow-privileged=true
  wait_for kube-apiserver 90 kubectl get --raw /readyz
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$K/admin.conf" \
    --bind-address 127.0.0.1 --service-account-private-key-file "$K/pki/sa.key" --root-ca-file "$K/pki/ca.crt" \
    --cluster-signing-cert-file "$K/pki/ca.crt" --cluster-signing-key-file "$K/pki/ca.key" \
    --use-service-account-credentials --allocate-node-cidrs --cluster-cidr "$CLUSTER_CIDR" --node-cidr-mask-size 24 \
    --service-cluster-ip-range "$SERVICE_CIDR"
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$K/admin.conf" --bind-address 127.0.0.1
  wait_for containerd 30 ctr -a "$SOCK" version
  pause_image
  start kubelet "$BIN/kubelet" --config "$K/kubelet.yaml" --kubeconfig "$K/kubelet.conf" \
    --hostname-override "$NODE" --node-ip "$ip" --root-dir "$K/kubelet"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$K/admin.conf" --hostname-override "$NODE" \
    --cluster-cidr "$CLUSTER_CIDR" --proxy-mode iptables --conntrack-max-per-core 0
  start coredns "$COREDNS" -conf "$K/Corefile"
  wait_for "the node" 120 sh -c "'$BIN/kubectl' --kubeconfig '$K/admin.conf' get node '$NODE' -o jsonpath='{.status.conditions[?(@.type==\"Ready\")].status}' | grep -qx True"
  say "Kubernetes $KUBE_VERSION up: node $NODE Ready; kubectl: $0 kubectl …"
}

down() {
  local name
  for name in coredns kube-proxy kubelet kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop "$name"
  done
  # the pods' containers and their shims outlive containerd: killed through it first
  if [ -S "$SOCK" ]; then
    for task in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$SOCK" -n k8s.io tasks kill -s SIGKILL "$task" >/dev/null 2>&1 || true
    done
    sleep 1
    for task in $(ctr -a "$SOCK" -n k8s.io tasks ls -q 2>/dev/null); do
      ctr -a "$SOCK" -n k8s.io tasks delete -f "$task" >/dev/null 2>&1 || true
    done
  fi
  stop containerd
  pkill -f "containerd --config $K/containerd/config.toml" 2>/dev/null || true
  pkill -f "containerd-shim-runc-v2 .*-address $SOCK" 2>/dev/null || true
  ip link delete kube0 2>/dev/null || true
  # kube-proxy's own rules, by kube-proxy (the machine's other rules, Podman's among them, stay)
  [ -x "$BIN/kube-proxy" ] && "$BIN/kube-proxy" --cleanup >/dev/null 2>&1 || true
  grep -o " $K/[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null || true
  say "Kubernetes down (state kept in $K; rm -rf it for a new cluster)"
}

# stop NAME: TERM, then KILL after 10 s
stop() {
  local file="$K/run/$1.pid" pid
  [ -f "$file" ] || return 0
  pid="$(cat "$file")"
  kill "$pid" 2>/dev/null || { rm -f "$file"; return 0; }
  for _ in $(seq 1 20); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$file"
}

status() {
  local name
  for name in containerd etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy coredns; do
    if [ -f "$K/run/$name.pid" ] && kill -0 "$(cat "$K/run/$name.pid")" 2>/dev/null; then
      printf '%-24s running (pid %s)\n' "$name" "$(cat "$K/run/$name.pid")"
    else
      printf '%-24s stopped\n' "$name"
    fi
  done
  [ -f "$K/admin.conf" ] && kubectl get nodes,pods -A -o wide 2>/dev/null || true
}

case "${1:-}" in
up) up ;;
down) down ;;
status) status ;;
# exec: whoever started this (the stage's port-forwards) stops kubectl itself when it stops this process
kubectl) shift; exec "$BIN/kubectl" --kubeconfig "$K/admin.conf" "$@" ;;
images) images ;;
test) up && node --test --test-force-exit --test-reporter=spec "$ROOT/infra/kube/stage.js" ;;
*) echo "usage: $0 up | down | status | images | test | kubectl ARGS…" >&2; exit 2 ;;
esac
