"""One pod's container as a local process: run by the shim under `unshare --mount`, in a mount namespace of its own.

Reads the pod's plan (JSON, from the shim), bind-mounts each prepared volume at its mount path and the
termination-message file at its path, makes the root read-only when the container asks for
`readOnlyRootFilesystem`, drops to the container's user and groups, and execs the command with exactly the pod's
environment. What the kubelet and the container runtime do for a container, with no image: the binary is the
project's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True)


def main(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    for source, target, _ in spec["mounts"]:  # mount points, as an image would carry them
        if not os.path.exists(target):
            if os.path.isdir(source):
                os.makedirs(target, exist_ok=True)
            else:
                Path(target).parent.mkdir(parents=True, exist_ok=True)
                Path(target).touch()
    # Every source, and the project's own files (its virtualenv, its source), held open before anything is
    # mounted: a volume that lands over a directory holding them (the pod's /tmp over a run directory or a
    # checkout in /tmp) hides nothing then, whatever the order. Sources are bound from the held descriptors; the
    # project's directories are bound back where a mount covered them.
    held = {path: os.open(path, os.O_PATH) for path in {*(m[0] for m in spec["mounts"]), *spec["keep"]}}
    for fd in held.values():
        os.set_inheritable(fd, True)
    for source, target, read_only in spec["mounts"]:
        mount("--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{held[source]}", target)
        if read_only:
            mount("-o", "remount,bind,ro", target)
    for path in spec["keep"]:
        if any(path.startswith(target.rstrip("/") + "/") for _, target, _ in spec["mounts"]):
            os.makedirs(path, exist_ok=True)
            mount("--no-canonicalize", "--bind", f"/proc/{os.getpid()}/fd/{held[path]}", path)
    if spec["read_only_root"]:  # last: a bind made from a read-only mount would be read-only too
        mount("-o", "remount,bind,ro", "/")
    os.chdir(spec["working_dir"])
    if spec["gid"] is not None:
        os.setgroups(spec["groups"])
        os.setgid(spec["gid"])
    if spec["uid"] is not None:
        os.setuid(spec["uid"])
    os.execve(spec["argv"][0], spec["argv"], spec["env"])  # noqa: S606


if __name__ == "__main__":
    main(sys.argv[1])
