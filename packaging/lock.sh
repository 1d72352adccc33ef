#!/usr/bin/env bash
# The hashed locks, each covering every transitive dependency, regenerated from pyproject.toml (`make lock`):
#   packaging/requirements.lock  the runtime: what the image installs (Dockerfile, --require-hashes)
#   packaging/demo.lock          the runtime, the demo extra and the build backend: what `make demo` installs
#   packaging/build.lock         the build backend alone, as demo.lock pins it: what the image builds cutover with
#   packaging/test.lock          all of that and the test, lint and bench tools: what `make test`, `make lint`,
#                                `make bench` and .ci/run install
# Each is compiled under one before it as a constraint, so they all agree on every package they share: the
# suite tests the versions the image ships. pip-compile keeps a lock's existing pins unless asked otherwise, so a
# run without arguments changes only what pyproject.toml changed; to upgrade (docs/testing.md, "Dependencies"):
#   make lock ARGS='--upgrade-package cryptography'    one package (and what it needs), in every lock it is in
#   make lock ARGS=--upgrade                           everything
set -euo pipefail
cd "$(dirname "$0")/.."

PIP_TOOLS=7.6.2
env=$(mktemp -d)
trap 'rm -rf "$env"' EXIT
python3 -m venv "$env"
"$env/bin/pip" install --quiet --disable-pip-version-check "pip-tools==$PIP_TOOLS"

# The project itself is never pinned (the test extra names its own demo extra): listed as "unsafe", it is left out
# of the file, and setuptools (unsafe by default) is pinned like any other package.
# where pip-compile lists the packages it left out, at the end of its output
LEFT_OUT='^# WARNING: The following packages were not pinned\|^# The following packages are considered'
compile() {  # compile OUTPUT HEADER [pip-compile options...]
  local out=$1 header=$2
  shift 2
  "$env/bin/pip-compile" --quiet --generate-hashes --strip-extras --no-header --unsafe-package llm-cutover \
    --no-emit-find-links --no-emit-index-url "$@" ${ARGS:-} -o "$out.new" pyproject.toml
  # pip-compile ends with the packages it left out (the project alone, else stop): the lock ends before that
  local left
  left=$(sed -n "/$LEFT_OUT/,\$p" "$out.new" | grep -v '^#' || true)
  left=$(grep -v "^llm-cutover\b" <<<"$left" || true)
  if [ -n "$left" ]; then
    echo "packaging/lock.sh: $out: left unpinned: $left" >&2
    exit 1
  fi
  { printf '%s\n' "$header" ''
    sed "/$LEFT_OUT/,\$d" "$out.new"
  } | sed -e :a -e '/^\n*$/{$d;N;ba' -e '}' > "$out"  # no blank line at the end
  rm -f "$out.new"
}
seed() {  # pip-compile reads the existing pins from its output file: start from the current lock
  [ -f "$1" ] && cp "$1" "$1.new" || true
}

seed packaging/requirements.lock
compile packaging/requirements.lock "# The image's runtime dependencies, exact and hashed: the Dockerfile installs them with --require-hashes.
# Regenerate with \`make lock\` (packaging/lock.sh)."
seed packaging/demo.lock
compile packaging/demo.lock "# What \`make demo\` installs: the runtime as packaging/requirements.lock pins it, the demo extra and the build
# backend of the editable install, exact and hashed. Regenerate with \`make lock\` (packaging/lock.sh)." \
  --extra demo --build-deps-for editable -c packaging/requirements.lock
seed packaging/build.lock
compile packaging/build.lock "# The build backend alone, exact and hashed: the Dockerfile installs it before cutover (--no-build-isolation), so
# the image's build fetches nothing unpinned. Regenerate with \`make lock\` (packaging/lock.sh)." \
  --build-deps-for wheel --only-build-deps -c packaging/demo.lock
seed packaging/test.lock
compile packaging/test.lock "# What \`make test\`, \`make lint\`, \`make bench\` and .ci/run install: packaging/demo.lock's pins and the test,
# lint and bench tools, exact and hashed. Regenerate with \`make lock\` (packaging/lock.sh)." \
  --extra demo --extra test --build-deps-for editable -c packaging/demo.lock
