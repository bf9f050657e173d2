#!/usr/bin/env bash
# Builds a real Kubernetes control plane (etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler) plus kwok from Go modules into a
# cache folder outside the clone, for tests that start it. See README.md.
#
# Usage: testkit/controlplane/build.sh
# The last line printed on stdout is the folder holding the binaries; all
# progress goes to stderr. Re-runs with everything present take well under a
# second. Set NODEWRIGHT_CONTROLPLANE_CACHE to move the cache.
set -euo pipefail

K8S_VERSION=v1.36.3   # keep in sync with kube/go.mod
ETCD_VERSION=v3.6.16  # keep in sync with etcd/go.mod
KWOK_VERSION=v0.8.0   # keep in sync with kwok/go.mod
HELM_VERSION=v4.3.2   # keep in sync with helm/go.mod (for the chart's tests)
TOXIPROXY_VERSION=v2.12.0  # keep in sync with toxiproxy/go.mod (for the fault tests)

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
cache_root="${NODEWRIGHT_CONTROLPLANE_CACHE:-$HOME/.cache/nodewright/controlplane}"
out="$cache_root/k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
bin="$out/bin"
stages="$out/kwok-stages"

binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kwok helm toxiproxy-server)

log() { echo "controlplane/build.sh: $*" >&2; }

all_present() {
  local b
  for b in "${binaries[@]}"; do [[ -x "$bin/$b" ]] || return 1; done
  [[ -d "$stages" ]]
}

# Fast path: nothing to do.
if all_present; then
  echo "$bin"
  exit 0
fi

mkdir -p "$bin"

# Serialise concurrent runs (e.g. several test binaries starting at once) so
# the slow build happens once; the others then find everything present.
if command -v flock >/dev/null 2>&1; then
  exec 9>"$out/.lock"
  flock 9
  rm -rf "$out"/.build.*  # left by a killed run; no other run is active now
fi

command -v go >/dev/null 2>&1 || { log "go is not on PATH"; exit 1; }

# Never touch the clone: use the committed go.mod/go.sum as they are, ignore
# any go.work above us. Static binaries, no C toolchain needed. GOCACHE and
# GOMODCACHE stay at Go's defaults (outside the clone).
export GOWORK=off CGO_ENABLED=0
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=readonly"

tmp="$(mktemp -d "$out/.build.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT

# go_build <module dir> <ldflags> <binary=package>...
# Builds the missing binaries of one module into $tmp, then moves each into
# $bin with an atomic rename, so an interrupted build never leaves a partial
# binary under its final name.
go_build() {
  local mod="$1" ldflags="$2"; shift 2
  local names=() pkgs=() pair name
  for pair in "$@"; do
    name="${pair%%=*}"
    [[ -x "$bin/$name" ]] && continue
    names+=("$name"); pkgs+=("${pair#*=}")
  done
  ((${#names[@]})) || return 0
  log "building ${names[*]} (module $mod) ..."
  local start=$SECONDS
  go build -C "$here/$mod" -trimpath -ldflags "$ldflags" -o "$tmp/" "${pkgs[@]}"
  for name in "${names[@]}"; do
    mv -f "$tmp/$name" "$bin/$name"
  done
  log "built ${names[*]} in $((SECONDS - start))s"
}

# Same -X flags as kubernetes' hack/lib/version.sh, so --version reports the
# release rather than v0.0.0-master+$Format:%H$.
k8s_minor="${K8S_VERSION#v1.}"; k8s_minor="${k8s_minor%%.*}"
k8s_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  k8s_ldflags+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitMajor=1"
  k8s_ldflags+=" -X $pkg.gitMinor=$k8s_minor"
done

# etcd and kwok take their version from constants in their sources.
go_build etcd "-s -w" etcd=.
go_build kwok "-s -w" kwok=sigs.k8s.io/kwok/cmd/kwok
go_build helm "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  helm=helm.sh/helm/v4/cmd/helm
# toxiproxy's command package is named `server`: built under the name its project uses.
if [[ ! -x "$bin/toxiproxy-server" ]]; then
  log "building toxiproxy-server (module toxiproxy) ..."
  start=$SECONDS
  go build -C "$here/toxiproxy" -trimpath \
    -ldflags "-s -w -X github.com/Shopify/toxiproxy/v2.Version=$TOXIPROXY_VERSION" \
    -o "$tmp/toxiproxy-server" github.com/Shopify/toxiproxy/v2/cmd/server
  mv -f "$tmp/toxiproxy-server" "$bin/toxiproxy-server"
  log "built toxiproxy-server in $((SECONDS - start))s"
fi
go_build kube "$k8s_ldflags" \
  kube-apiserver=k8s.io/kubernetes/cmd/kube-apiserver \
  kube-controller-manager=k8s.io/kubernetes/cmd/kube-controller-manager \
  kube-scheduler=k8s.io/kubernetes/cmd/kube-scheduler

# kwok does nothing to nodes and pods without Stage objects. Copy the stock
# "fast" node/pod stages and the node heartbeat from the kwok module, flat,
# for `kwok --config <file> ...`.
if [[ ! -d "$stages" ]]; then
  kwok_dir="$(go list -C "$here/kwok" -f '{{.Module.Dir}}' \
    sigs.k8s.io/kwok/kustomize/stage/node/fast)"
  mkdir "$tmp/stages"
  for s in node/fast node/heartbeat pod/fast; do
    for f in "$kwok_dir/kustomize/stage/$s"/*.yaml; do
      [[ "$(basename "$f")" == kustomization.yaml ]] && continue
      install -m 0644 "$f" "$tmp/stages/"
    done
  done
  mv "$tmp/stages" "$stages"
  log "copied kwok stages: $(cd "$stages" && echo *.yaml)"
fi

all_present || { log "some outputs are missing in $out"; exit 1; }
echo "$bin"
