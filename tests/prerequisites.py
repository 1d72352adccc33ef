"""What `make test` needs besides Python and the .venv, checked before the suite runs: each missing tool is
named with the package that brings it, so a fresh machine fails in one line instead of in forty tests.
The list is the README's; `test_docs` keeps the two in step."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable


def _http_backend() -> bool:
    if shutil.which("git") is None:
        return False
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=False).stdout.strip()
    return os.access(os.path.join(exec_path, "git-http-backend"), os.X_OK)


# (what, the check, the Debian package or the way to get it)
NEEDS: list[tuple[str, Callable[[], bool], str]] = [
    ("git", lambda: shutil.which("git") is not None, "git"),
    ("git-http-backend", _http_backend, "git"),
    # The product's own SSH transport: `git` starts OpenSSH's client; the tests' server side is asyncssh (PyPI).
    ("ssh (OpenSSH's client)", lambda: shutil.which("ssh") is not None, "openssh-client"),
    ("kustomize v5 (or kubectl, which bundles it)", lambda: bool(shutil.which("kustomize") or shutil.which("kubectl")),
     "`make kustomize` builds the pinned one from the Go module proxy (needs Go 1.26 or newer)"),
]


def missing() -> list[tuple[str, str]]:
    return [(what, source) for what, present, source in NEEDS if not present()]


def main() -> int:
    absent = missing()
    if not absent:
        return 0
    packages = sorted({source for _, source in absent if " " not in source})
    print("make test: these tools are missing (the tests run the real ones):", file=sys.stderr)
    for what, source in absent:
        print(f"  - {what}: {source}", file=sys.stderr)
    if packages:
        print(f"on Debian or Ubuntu: apt-get install {' '.join(packages)}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
