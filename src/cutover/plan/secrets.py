"""Secrets from mounted files and the environment, read one way: stripped of surrounding whitespace (a Secret
written with `echo` ends in a newline, which once became six retries of an unusable header, and an exception
text that carried the Slack token). Never logged. Used by the Git hosts, the ArgoCD API, Slack and the
redactor's list of what to hide.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

from cutover.errors import InvalidInput
from cutover.plan.field import Field

__all__ = ["SECRETS_DIR", "from_env", "from_file", "in_cluster", "pod_key", "secret_file", "secrets_dir"]

SECRETS_DIR = "/var/run/secrets/cutover"  # where the Jobs mount the Secrets; CUTOVER_SECRETS_DIR elsewhere


def from_file(path: str | None, *, field: str, cause: str, hint: str) -> str | None:
    """The secret in `path` (None without a path); a path that cannot be read is `cause`, exit 2."""
    if not path:
        return None
    try:
        return Path(path).read_text(encoding="utf-8").strip() or None
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise InvalidInput(f"{field} {path}: cannot read: {why}", cause=cause, hint=hint) from exc


def from_env(name: str) -> str | None:
    return (os.environ.get(name) or "").strip() or None


def in_cluster() -> bool:
    """Whether this is one of cutover's pods (the kubelet sets the API's address): the Secrets are mounted, and
    nothing in the pod's environment may widen where they are read or sent."""
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


def secrets_dir() -> str:
    """Where the Secrets are: their mount in a pod; on a person's machine, CUTOVER_SECRETS_DIR may name another."""
    return SECRETS_DIR if in_cluster() else os.environ.get("CUTOVER_SECRETS_DIR") or SECRETS_DIR


def secret_file(node: Field, secret: str, key: str) -> str | None:
    """A file a credential is read from: only in its own Secret's directory (`git`, `argocd`, `slack` under the
    secrets directory), so that a plan can neither have the pod's own ServiceAccount token read and sent as a
    credential nor send one Secret's token where another's goes (the Git token as ArgoCD's). In a pod, only the
    Secret's own `key`, as the shipped Jobs mount it: no plan chooses which file of a mount is the credential (a
    mount that renames keys would otherwise hand the plan another file as the token, or the token without its
    bounds)."""
    if node.value is None:
        return None
    path = node.string()
    fixed = pod_key(node, path, secret, key, what="the credential")
    if fixed is not None:
        return fixed
    root = (secrets_dir().rstrip("/") or "") + f"/{secret}"
    normal = posixpath.normpath(path)
    mounted = f"{SECRETS_DIR}/{secret}/"
    if secrets_dir().rstrip("/") != SECRETS_DIR and normal.startswith(mounted):
        # a person's machine with CUTOVER_SECRETS_DIR: the plan the Jobs mount runs as it is, its files read there
        normal = f"{root}/{normal[len(mounted):]}"
    if not path.startswith("/") or not normal.startswith(root + "/"):
        raise node.fail(f"a file under {root}/ (its Secret's mount"
                        + ("" if in_cluster() else "; CUTOVER_SECRETS_DIR names another root") + ")")
    return normal


def pod_key(node: Field, path: str, secret: str, key: str, *, what: str) -> str | None:
    """In a pod, the one file `path` may be: `secret`'s own `key` where the shipped Jobs mount it (else the plan
    key `node` fails); None off a pod, where the caller's own rule applies."""
    if not in_cluster():
        return None
    fixed = f"{SECRETS_DIR}/{secret}/{key}"
    if posixpath.normpath(path) != fixed:
        raise node.fail(f"{fixed} (in a pod {what} is the Secret's key `{key}`, where the shipped Jobs mount it)")
    return fixed
