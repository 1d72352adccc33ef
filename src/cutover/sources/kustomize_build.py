"""Running real kustomize, as ArgoCD's repo-server does for a source path that holds a kustomization.

kustomize is found as `kustomize` (the image carries a pinned binary) or as `kubectl kustomize` (kubectl bundles
it; v5.5 here, ArgoCD 3.x bundles a kustomize 5.x: its `hack/tool-versions.sh`). A build runs in a child
process with a deadline of its own; its output is parsed into documents (a `kind: List` is opened into its
items). Never imitated in Python: a build that real kustomize refuses is refused here. Called by the selector
sources and the render check, and by the demo's ArgoCD stand-in.
"""

from __future__ import annotations

import asyncio
import io
import ipaddress
import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from cutover.errors import InvalidInput

BUILD_TIMEOUT = 60.0  # seconds one build may take; a 200-resource overlay builds in well under one
KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")

__all__ = ["BUILD_TIMEOUT", "KUSTOMIZATIONS", "RenderFailed", "build", "command", "documents", "holds_kustomization",
           "require"]


class RenderFailed(InvalidInput):
    """kustomize refused the tree (or timed out): what ArgoCD would refuse too. Exit 2, nothing committed."""

    default_cause = "render_failed"


def command(environ: Mapping[str, str] | None = None) -> tuple[str, ...] | None:
    """The argv prefix of a kustomize build: `kustomize build`, else `kubectl kustomize`; None without either.
    CUTOVER_KUSTOMIZE names a binary explicitly."""
    environ = os.environ if environ is None else environ
    path, explicit = environ.get("PATH"), environ.get("CUTOVER_KUSTOMIZE")
    if explicit:
        return (explicit, "build") if shutil.which(explicit, path=path) else None
    if shutil.which("kustomize", path=path):
        return ("kustomize", "build")
    if shutil.which("kubectl", path=path):
        return ("kubectl", "kustomize")
    return None


def require() -> tuple[str, ...]:
    found = command()
    if found is None:
        raise InvalidInput("git.source kustomize: expected a kustomize binary (kustomize, or kubectl with its bundled "
                           "kustomize) on PATH, found neither", cause="kustomize_missing",
                           hint="use the cutover image (it carries kustomize), or install kubectl (it bundles "
                                "kustomize) or a kustomize v5 binary")
    return found


def holds_kustomization(directory: Path) -> bool:
    return any((directory / name).is_file() for name in KUSTOMIZATIONS)


async def build(directory: Path, *, where: str) -> list[dict[str, Any]]:
    """`kustomize build DIRECTORY`, parsed; `where` names it (path and revision) in errors. The child runs in a
    worker thread with a deadline on the real clock: its work is real, whatever the event loop's clock says."""
    argv = [*require(), str(directory)]
    local = await asyncio.to_thread(loopback_reference, directory)
    if local is not None:
        raise _remote(where, local)
    try:
        done = await asyncio.to_thread(subprocess.run, argv, capture_output=True, timeout=BUILD_TIMEOUT,
                                       env=_environment(), check=False)
    except subprocess.TimeoutExpired:
        raise RenderFailed(f"{where}: kustomize build did not finish within {BUILD_TIMEOUT:.0f}s",
                           hint="does the kustomization fetch remote bases? ArgoCD would time out too") from None
    if done.returncode != 0:
        words = " ".join(done.stderr.decode(errors="replace").split())[-400:]
        if "127.0.0.1:9" in words or "git@" in words or "ssh:" in words.lower():
            raise _remote(where, words[-200:])
        raise RenderFailed(f"{where}: kustomize build failed: {words}",
                           hint="run `kubectl kustomize` on that directory: ArgoCD cannot render it either")
    return documents(done.stdout.decode(), where=where)


def _remote(where: str, what: str) -> RenderFailed:
    """A remote resource, refused before the build (this machine's) or by the build (the refusing proxy, ssh)."""
    return RenderFailed(f"{where}: the kustomization names a remote resource, which cutover's render does not fetch "
                        f"({what})", hint="vendor the remote base into the repository (a render reads only the tree a "
                                          "reviewer saw), or render through argocd.server")


# a URL's host, after its scheme and any user: Go's HTTP client never sends loopback through a proxy
# (net/http/httpproxy: "localhost" and loopback addresses are always direct), so those are refused before a build
URL_HOST = re.compile(r"(?i)\b(?:https?|git|ssh)://(?:[^/@\s'\"]*@)?(\[[^\]/]+\]|[^/:\s?#'\"]+)")
MAX_KUSTOMIZATIONS = 1000  # followed from one build; a repository's archive holds at most 20,000 entries


def loopback_reference(directory: Path) -> str | None:
    """The first URL naming this machine (localhost, a loopback address) in the kustomizations a build of
    `directory` reads (its own, and the local directories its resources, components and bases name), or None.
    Every other remote reference meets the refusing proxy; these would not."""
    seen: set[Path] = set()
    todo = [directory]
    while todo and len(seen) < MAX_KUSTOMIZATIONS:
        folder = todo.pop().resolve()
        if folder in seen:
            continue
        seen.add(folder)
        for name in KUSTOMIZATIONS:
            if not (folder / name).is_file():
                continue
            text = (folder / name).read_text(errors="replace")
            for found in URL_HOST.finditer(text):
                if _loopback(found.group(1)):
                    return found.group(0)
            todo += [folder / entry for entry in _entries(text) if (folder / entry).is_dir()]
    return None


def _loopback(host: str) -> bool:
    host = host.strip("[]").rstrip(".").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _entries(text: str) -> list[str]:
    """What a kustomization's resources, components and bases name (strings only; an unreadable file has none:
    kustomize will say why)."""
    try:
        spec = YAML(typ="safe").load(text)
    except YAMLError:
        return []
    if not isinstance(spec, dict):
        return []
    lists = [spec.get(key) for key in ("resources", "components", "bases")]
    return [entry for found in lists if isinstance(found, list) for entry in found if isinstance(entry, str)]


def documents(text: str, *, where: str) -> list[dict[str, Any]]:
    """YAML (or JSON) documents, a `kind: List` opened into its items, empty documents dropped."""
    try:
        loaded = list(YAML(typ="safe").load_all(io.StringIO(text)))
    except YAMLError as exc:
        raise RenderFailed(f"{where}: the rendered output is not YAML: {' '.join(str(exc).split())[:200]}") from exc
    found: list[dict[str, Any]] = []
    for doc in loaded:
        if isinstance(doc, dict) and doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            found += [item for item in doc["items"] if isinstance(item, dict)]
        elif isinstance(doc, dict):
            found.append(doc)
    return found


NOWHERE = "http://127.0.0.1:9"  # the discard port: a proxy that refuses every connection at once


def _environment() -> dict[str, str]:
    """A build reads only the tree (docs/security.md): no credentials, and every remote resource (`resources: -
    https://…`, a git URL) sent to a proxy that refuses, so kustomize cannot fetch what no review saw; HOME for
    its cache in a read-only image."""
    proxies = dict.fromkeys(("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy", "all_proxy"),
                            NOWHERE)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("TMPDIR", "/tmp"),  # noqa: S108
            "LC_ALL": "C", **proxies, "NO_PROXY": "", "no_proxy": "", "GIT_SSH_COMMAND": "false",
            "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
