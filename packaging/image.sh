#!/usr/bin/env bash
# Builds the Dockerfile's two images with podman and checks what a build can show (docs/testing.md, "The image").
#
#   packaging/image.sh     (`make image`)   builds cutover:dev and cutover:dev-git, checks both, prints their sizes
#
# No registry is reachable where this runs, so the two base images the Dockerfile names are stand-ins made here
# under the same names: python:3.11-slim from Debian's packages (mmdebstrap: Debian's python3 with a venv at
# /usr/local, where the official image keeps its Python), and registry.k8s.io/kustomize/kustomize at the version the
# tests use, from the tier's own kustomize build (e2e/build.sh). podman keeps its images in its own storage, outside
# the work tree, so a second run builds only what changed. What a stand-in cannot show: anything particular to the
# official CPython build or its pip.
#
# It fails on every defect it can see in a built image: the user is not 65532:65532 with a group of its own,
# something outside /tmp is written at run time (the root filesystem is read-only), the kustomize is not the tests'
# version, the version is not the package's, the pruned packages are back, pip is there, or the with-git target lacks
# git or ssh.
set -euo pipefail
cd "$(dirname "$0")/.."
source e2e/versions.env

cache="${CUTOVER_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/cutover-image}"
mkdir -p "$cache"
say() { printf 'image: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }
for tool in podman mmdebstrap runc; do
  command -v "$tool" >/dev/null || die "$tool not found: install Debian's podman, runc and mmdebstrap"
done

# podman's rootful defaults raise hard limits (nofile 1048576) that a VM may forbid even to root, and crun may not
# run under hybrid cgroups: a configuration of our own, named by CONTAINERS_CONF, touches nothing of the system's.
cat >"$cache/containers.conf" <<'EOF'
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
[engine]
runtime = "runc"
EOF
export CONTAINERS_CONF="$cache/containers.conf"

version="$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' src/cutover/__init__.py)"
[ -n "$version" ] || die "no __version__ in src/cutover/__init__.py"
python_base=docker.io/library/python:3.11-slim
kustomize_base="registry.k8s.io/kustomize/kustomize:$KUSTOMIZE_VERSION"

# The host's CA bundle and pip's configuration, read-only, for the build's own downloads (a proxy with a CA of its
# own): mounted into the build steps, never copied into a layer.
mounts=()
for file in /etc/ssl/certs/ca-certificates.crt /etc/pip.conf; do
  [ -f "$file" ] && mounts+=(-v "$file:$file:ro")
done

# The stand-in's recipe: debian:bookworm-slim's path excludes and apt clean-up (debuerreotype's docker-clean:
# without it the with-git layer keeps apt's caches), Debian's python3 with a venv at /usr/local.
make_python_base() {
  mmdebstrap --quiet --variant=minbase --include=ca-certificates,netbase,tzdata,python3,python3-venv \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --aptopt='APT::Install-Recommends "false"' \
    --customize-hook='chroot "$1" python3 -m venv /usr/local' \
    --customize-hook='{
      echo "DPkg::Post-Invoke { \"rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true\"; };"
      echo "Dir::Cache::pkgcache \"\";"
      echo "Dir::Cache::srcpkgcache \"\";"
    } > "$1/etc/apt/apt.conf.d/docker-clean"' \
    --customize-hook='rm -f "$1"/var/cache/apt/*.bin && rm -rf "$1"/var/lib/apt/lists/*' \
    bookworm "$1" >&2
}
recipe="$(declare -f make_python_base | sha256sum | cut -c1-12)"  # a changed recipe makes the stand-in again
if [ "$(podman image inspect --format '{{index .Labels "cutover.stand-in"}}' "$python_base" 2>/dev/null)" != \
     "$recipe" ]; then
  start=$SECONDS
  say "making a stand-in $python_base from Debian's packages …"
  make_python_base "$cache/python-base.tar"
  podman import --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change "LABEL cutover.stand-in=$recipe" "$cache/python-base.tar" \
    "$python_base" >/dev/null
  rm -f "$cache/python-base.tar"
  say "stand-in $python_base made in $((SECONDS - start)) s"
fi

if ! podman image exists "$kustomize_base"; then
  # the one built already (.ci/run builds it first) without relinking it under a suite running it meanwhile
  kustomize="$(e2e/build.sh --bin-dir)/kustomize"
  [ -x "$kustomize" ] || kustomize="$(e2e/build.sh kustomize 2>/dev/null)/kustomize"
  [ -x "$kustomize" ] || die "no kustomize from e2e/build.sh"
  rm -rf "$cache/kustomize-root" && mkdir -p "$cache/kustomize-root/app"
  cp "$(readlink -f "$kustomize")" "$cache/kustomize-root/app/kustomize"
  tar -C "$cache/kustomize-root" -cf "$cache/kustomize.tar" app
  podman import --change 'ENTRYPOINT ["/app/kustomize"]' "$cache/kustomize.tar" "$kustomize_base" >/dev/null
  rm -rf "$cache/kustomize-root" "$cache/kustomize.tar"
  say "stand-in $kustomize_base made from the tests' kustomize"
fi

build() {  # TAG [--target STAGE]
  local tag="$1"; shift
  local start=$SECONDS
  podman build --quiet --pull=never --network host "${mounts[@]}" -t "$tag" "$@" . >/dev/null ||
    die "podman build of $tag failed"
  say "built $tag in $((SECONDS - start)) s"
}
build cutover:dev
build cutover:dev-git --target with-git

# Each check runs the image as a pod of the shipped Jobs does: read-only root, /tmp the only writable place, the
# image's own user, no network.
run() {  # IMAGE ENTRYPOINT ARGS...
  local image="$1" entrypoint="$2"; shift 2
  podman run --rm --read-only --read-only-tmpfs=false --tmpfs /tmp --network none --entrypoint "$entrypoint" \
    "$image" "$@"
}
check() {  # IMAGE
  local image="$1" found
  found="$(run "$image" id)"
  [ "$found" = "uid=65532(cutover) gid=65532(cutover) groups=65532(cutover)" ] ||
    die "$image runs as '$found', not uid and gid 65532 (cutover)"
  found="$(run "$image" cutover --version)"
  [[ "$found" == *"$version"* ]] || die "$image's cutover --version says '$found', not $version"
  run "$image" cutover verify --help >/dev/null || die "$image: cutover verify --help failed"
  found="$(run "$image" kustomize version)"
  [ "$found" = "$KUSTOMIZE_VERSION" ] || die "$image carries kustomize '$found', the tests use $KUSTOMIZE_VERSION"
  run "$image" python3 -c '
import importlib.util, sys
back = [name for name in ("aiohttp", "kubernetes.aio", "cutover.demo", "kubernetes.client.api.apps_v1_api")
        if importlib.util.find_spec(name)]
sys.exit("not pruned: " + ", ".join(back) if back else 0)' || die "$image: packaging/prune.py's work is undone"
  run "$image" python3 -c '
import importlib.util, sys
back = [name for name in ("pip", "setuptools", "wheel") if importlib.util.find_spec(name)]
sys.exit("an installer in the image: " + ", ".join(back) if back else 0)' || die "$image carries an installer"
}
check cutover:dev
check cutover:dev-git
run cutover:dev-git git --version >/dev/null || die "cutover:dev-git has no git"
run cutover:dev-git ssh -V 2>/dev/null || die "cutover:dev-git has no ssh"
if run cutover:dev git --version >/dev/null 2>&1; then die "cutover:dev carries git: it belongs to with-git only"; fi

size() { podman image inspect --format '{{.Size}}' "$1" | awk '{printf "%.1f MB", $1 / 1e6}'; }
say "sizes: cutover:dev $(size cutover:dev), cutover:dev-git $(size cutover:dev-git) (the base, a stand-in: $(size "$python_base"))"
