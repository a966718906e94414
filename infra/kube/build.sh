#!/bin/sh
# Builds Kubernetes' own programs from the k8s.io/kubernetes Go module (#50), once for this machine, into
# $BUILT_TOOLS_DIR/kubernetes-$KUBE_VERSION (outside the clone, as the other built tools). The module cannot be
# `go install`ed as is: its go.mod replaces the staging modules (k8s.io/api, k8s.io/client-go, …) with local
# paths. Each is published as a module at the matching v0 version, so the build drops those replaces in favour
# of them (and the module's go.work). About 7 minutes on 2 cores with a warm Go build cache, much longer cold.
set -eu
KUBE_VERSION="${KUBE_VERSION:-v1.34.2}"
STAGING_VERSION="v0.$(echo "$KUBE_VERSION" | cut -d. -f2-)"
TOOLS="${BUILT_TOOLS_DIR:-/var/cache/image-cdn-stack/tools}"
OUT="$TOOLS/kubernetes-$KUBE_VERSION"
GO="${GO:-$(command -v go || echo /usr/local/go/bin/go)}"
export GOFLAGS=-mod=mod GOTOOLCHAIN=auto
work="$(dirname "$TOOLS")/build/kubernetes-$KUBE_VERSION"
started=$(date +%s)
echo "building Kubernetes $KUBE_VERSION's programs into $OUT (once for this machine)"
src="$("$GO" mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
rm -rf "$work" && mkdir -p "$(dirname "$work")" && cp -r "$src" "$work" && chmod -R u+w "$work"
cd "$work"
rm -f go.work go.work.sum
for module in $(sed -n 's#^[[:space:]]*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' go.mod); do
  "$GO" mod edit -dropreplace="$module" -require="$module@$STAGING_VERSION"
done
minor="$(echo "$KUBE_VERSION" | cut -d. -f2)"
mkdir -p "$OUT.partial"
for program in kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl; do
  "$GO" build -trimpath -o "$OUT.partial/$program" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=$minor" "./cmd/$program"
done
rm -rf "$OUT" && mv "$OUT.partial" "$OUT" && chmod 755 "$OUT" "$OUT"/*
rm -rf "$work"
echo "built Kubernetes $KUBE_VERSION in $(($(date +%s) - started)) s"
