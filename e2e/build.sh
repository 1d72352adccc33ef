#!/usr/bin/env bash
# Builds the real tier's components from the Go module proxy (docs/testing.md, "The real tier").
#
#   e2e/build.sh [STEP ...]   STEP: kustomize kwok etcd kubernetes argocd helm (default: all of them;
#                             the gitops tier needs argocd and helm); prints the bin directory last
#   e2e/build.sh --bin-dir    prints the bin directory only
#
# Versions live in e2e/versions.env alone. Each component is built into a cache directory of its own outside the
# work tree, named by its version (~/.cache/cutover-tier/<step>-<version>), so a second run builds nothing and a
# version bump rebuilds that component alone; the bin directory links the current versions' binaries. A module the
# proxy does not serve is named and stops the build: nothing is fetched from anywhere but the Go module proxy.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"

root="${CUTOVER_TIER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cutover-tier}"
key="$(grep -E '^[A-Z_]+=' "$here/versions.env" | sha256sum | cut -c1-12)"  # the versions, not the comments
bin="$root/bin-$key"
work="$root/work"
export GOFLAGS="${GOFLAGS:--buildvcs=false} -trimpath"
export GOTOOLCHAIN="${GOTOOLCHAIN:-local}"

exec 3>&2  # progress goes to the caller's stderr; each step's own output to its log
say() { printf 'e2e/build: %s\n' "$*" >&3; }
die() { say "$*"; exit 1; }
# where the binaries are (or will be), building nothing: the Makefile asks at parse time, before any target, so
# `make demo` on a machine without Go must get its answer here, before Go is looked for
if [ "${1:-}" = --bin-dir ]; then echo "$bin"; exit 0; fi
command -v go >/dev/null || die "go not found: the real tier builds its components with Go ≥ 1.26 (Debian: golang, or go.dev)"

# Runs one step unless its binaries are all there, printing how long it took; links them into the bin directory.
step() {
  local name="$1" version="$2"; shift 2
  local outputs=("$@")
  out="$root/$name-$version"  # where build_<name> puts its binaries
  local missing=0 f
  for f in "${outputs[@]}"; do [ -e "$out/$f" ] || missing=1; done
  if [ "$missing" = 0 ]; then
    say "$name $version: cached"
  else
    local start=$SECONDS
    say "$name $version: building ${outputs[*]} …"
    mkdir -p "$out"
    if ! "build_$name" >"$work/$name.log" 2>&1; then
      tail -25 "$work/$name.log" >&3
      die "$name: failed after $((SECONDS - start)) s (whole log: $work/$name.log)"
    fi
    for f in "${outputs[@]}"; do [ -e "$out/$f" ] || die "$name: $f was not built"; done
    say "$name $version: done in $((SECONDS - start)) s"
  fi
  # relinked only when it points elsewhere: ln -sfn removes the link before making it anew, and another run of the
  # tier (or the fast suite's kustomize) may be starting that binary meanwhile
  for f in "${outputs[@]}"; do [ "$(readlink "$bin/$f")" = "$out/$f" ] || ln -sfn "$out/$f" "$bin/$f"; done
}

# Stops with the module's name when the proxy does not serve it at that version.
served() {
  go list -m -json "$1@$2" >/dev/null 2>"$work/served.$$.err" ||
    die "the Go module proxy does not serve $1@$2: $(tail -1 "$work/served.$$.err")"
}

# A wrapper module of our own for a module whose go.mod replaces its siblings with relative paths (which
# `go install mod@version` refuses): the replaces become the siblings' published versions.
wrapper() {
  local dir="$work/$1"; shift
  rm -rf "$dir" && mkdir -p "$dir"
  printf 'module cutover.e2e/%s\n\ngo 1.26\n' "$(basename "$dir")" >"$dir/go.mod"
  (cd "$dir" && "$@")
}

build_kustomize() {
  served sigs.k8s.io/kustomize/kustomize/v5 "$KUSTOMIZE_VERSION"
  GOBIN="$out" go install -ldflags "-s -w" "sigs.k8s.io/kustomize/kustomize/v5@$KUSTOMIZE_VERSION"
}

build_kwok() {
  served sigs.k8s.io/kwok "$KWOK_VERSION"
  # the tier runs kwok alone (no kwokctl); every build here links without symbols or DWARF, which no test reads
  GOBIN="$out" go install -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION"
  # kwok's own node Stages (a node that initializes at once and keeps its Lease), taken from the module as
  # released: a --config that brings pod Stages of its own brings none for nodes
  local dir
  dir="$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)",/\1/p')"
  cat "$dir/kustomize/stage/node/fast/node-initialize.yaml" <(echo ---) \
    "$dir/kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" >"$out/kwok-node-stages.yaml"
}

build_etcd() {
  served go.etcd.io/etcd/server/v3 "$ETCD_VERSION"
  wrapper etcd sh -c '
    set -e
    for m in api/v3 client/pkg/v3 client/v3 pkg/v3; do
      go list -m -json "go.etcd.io/etcd/$m@$0" >/dev/null
      go mod edit -replace "go.etcd.io/etcd/$m=go.etcd.io/etcd/$m@$0"
    done
    go get "go.etcd.io/etcd/server/v3@$0"
    go build -ldflags "-s -w" -o "$1/etcd" go.etcd.io/etcd/server/v3' "$ETCD_VERSION" "$out"
}

# kubernetes' go.mod points every staging module (k8s.io/api, k8s.io/apiserver, …) at ./staging: each becomes its
# published v0.<minor>.<patch>, read from that go.mod so a new release's new staging module is not missed.
build_kubernetes() {
  served k8s.io/kubernetes "$KUBERNETES_VERSION"
  local mod staging_version="v0.${KUBERNETES_VERSION#v1.}"
  mod="$(go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  local -a staging
  mapfile -t staging < <(sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*#\1#p' "$mod")
  [ "${#staging[@]}" -gt 0 ] || die "kubernetes: no staging replaces found in $mod"
  # The sample-* modules are examples kubernetes does not build from; a staging module the proxy lacks is left
  # unreplaced and named, and go names it again should a command need it after all.
  local m; local -a published=()
  for m in "${staging[@]}"; do
    if go list -m -json "$m@$staging_version" >/dev/null 2>&1; then published+=("$m")
    else say "kubernetes: $m@$staging_version is not served by the Go module proxy; building without it"; fi
  done
  local version_pkg ldflags=""
  for version_pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $version_pkg.gitVersion=$KUBERNETES_VERSION -X $version_pkg.gitTreeState=clean"
    ldflags+=" -X $version_pkg.gitMajor=1 -X $version_pkg.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  done
  wrapper kubernetes sh -c '
    set -e
    version="$1"; staging_version="$2"; out="$3"; ldflags="$4"; shift 4
    for m in "$@"; do go mod edit -replace "$m=$m@$staging_version"; done
    go get "k8s.io/kubernetes@$version"
    for c in kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl; do
      go get "k8s.io/kubernetes/cmd/$c@$version"
    done
    go build -p 2 -ldflags "-s -w $ldflags" -o "$out/" k8s.io/kubernetes/cmd/kube-apiserver \
      k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kube-scheduler k8s.io/kubernetes/cmd/kube-proxy \
      k8s.io/kubernetes/cmd/kubectl
  ' _ "$KUBERNETES_VERSION" "$staging_version" "$out" "$ldflags" "${published[@]}"
}

build_helm() {  # for ArgoCD's repo-server, which renders charts with the helm on its PATH
  served helm.sh/helm/v3 "$HELM_VERSION"
  GOBIN="$out" go install -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" \
    "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
}

# ArgoCD's go.mod replaces modules too: the Kubernetes staging modules at published versions, and from v3.3 on its
# gitops-engine with a local directory. That one becomes the nested module the proxy serves at the release's commit
# (ARGOCD_ENGINE), once its pseudo-version's time is the tag's: a version bump cannot keep a stale engine. Any other
# local replace is named and stops the build.
build_argocd() {
  served github.com/argoproj/argo-cd/v3 "$ARGOCD_VERSION"
  local mod engine=github.com/argoproj/argo-cd/gitops-engine
  mod="$(go mod download -json "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)",/\1/p')"
  if [ -n "${ARGOCD_ENGINE:-}" ]; then
    # the checksum database has answered 404 once for a fresh pseudo-version, then served it: asked twice
    go list -m -json "$engine@$ARGOCD_ENGINE" >/dev/null 2>&1 || served "$engine" "$ARGOCD_ENGINE"
    local tagged stamp
    tagged="$(go list -m -json "github.com/argoproj/argo-cd/v3@$ARGOCD_VERSION" | python3 -c '
import json, sys, datetime
print(datetime.datetime.fromisoformat(json.load(sys.stdin)["Time"].replace("Z", "+00:00")).strftime("%Y%m%d%H%M%S"))')"
    stamp="$(echo "$ARGOCD_ENGINE" | cut -d- -f2)"
    [ "$stamp" = "$tagged" ] || die "argocd: ARGOCD_ENGINE $ARGOCD_ENGINE is not argo-cd $ARGOCD_VERSION's commit " \
      "(its time $stamp, the tag's $tagged): set the engine pseudo-version of that release"
  fi
  wrapper argocd sh -c '
    set -e
    go mod edit -json "$1" | ENGINE="$4" python3 -c "
import json, os, sys
for r in json.load(sys.stdin).get(\"Replace\") or []:
    old, new = r[\"Old\"], r[\"New\"]
    if not new.get(\"Version\"):
        if old[\"Path\"] == \"github.com/argoproj/argo-cd/gitops-engine\" and os.environ[\"ENGINE\"]:
            new = {\"Path\": old[\"Path\"], \"Version\": os.environ[\"ENGINE\"]}
        else:
            sys.exit(\"argocd: go.mod replaces \" + old[\"Path\"] + \" with the local directory \" + new[\"Path\"])
    print(old[\"Path\"] + (\"@\" + old[\"Version\"] if old.get(\"Version\") else \"\") + \"=\" + new[\"Path\"] + \"@\" + new[\"Version\"])
" >replaces
    while read -r r; do go mod edit -replace "$r"; done <replaces
    go get "github.com/argoproj/argo-cd/v3/cmd@$2"
    go build -p 2 -ldflags "-s -w -X github.com/argoproj/argo-cd/v3/common.version=${2#v}" -o "$3/argocd" \
      github.com/argoproj/argo-cd/v3/cmd
  ' _ "$mod" "$ARGOCD_VERSION" "$out" "${ARGOCD_ENGINE:-}"
}

declare -A products=(
  [kustomize]="kustomize"
  [kwok]="kwok kwok-node-stages.yaml"
  [etcd]="etcd"
  [kubernetes]="kube-apiserver kube-controller-manager kube-scheduler kube-proxy kubectl"
  [argocd]="argocd"
  [helm]="helm"
)
declare -A versions=(
  [kustomize]="$KUSTOMIZE_VERSION" [kwok]="$KWOK_VERSION" [etcd]="$ETCD_VERSION"
  [kubernetes]="$KUBERNETES_VERSION" [argocd]="$ARGOCD_VERSION" [helm]="$HELM_VERSION"
)
mkdir -p "$bin" "$work"
steps=("$@")
[ "${#steps[@]}" -gt 0 ] || steps=(kustomize kwok etcd kubernetes argocd helm)
total=$SECONDS
for s in "${steps[@]}"; do
  [ -n "${products[$s]:-}" ] || die "unknown step $s (expected one of: ${!products[*]})"
  # shellcheck disable=SC2086
  step "$s" "${versions[$s]}" ${products[$s]}
done
say "all in $((SECONDS - total)) s; binaries in $bin"
echo "$bin"
