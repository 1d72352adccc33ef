"""The plan's `git:` section: where the selector lives, which host is written through, and who may get the token."""

from __future__ import annotations

import re
from pathlib import PurePosixPath
from urllib.parse import urlsplit

from cutover.plan.field import Field
from cutover.plan.model import GIT_MODES, PROVIDERS, PUBLIC_HOSTS, SOURCES, GitAuthor, GitDocument, GitSettings
from cutover.plan.secrets import pod_key, secret_file

_GIT_KEYS = ("provider", "url", "apiUrl", "apiHosts", "allowInsecure", "branch", "path", "document", "selectorPath",
             "mode", "author", "tokenFile", "source", "render", "caFile")
DEFAULT_API_HOSTS = {"github.com": "api.github.com", "www.github.com": "api.github.com"}  # api_root's


def host_of(url: str) -> str:
    """The host of an https:// URL or an SSH address (git@host:path, ssh://user@host/path), lower case."""
    scp = re.match(r"^[\w.-]+@([\w.-]+):", url)
    return (scp.group(1) if scp else urlsplit(url).hostname or "").lower()


def _check_api_host(api_url: Field, hosts: Field, url: str) -> tuple[str, ...]:
    """The Git token goes to git.url's host only (and to api.github.com for github.com), or to a host that
    git.apiHosts names: a plan's apiUrl cannot carry it anywhere else. The hosts git.apiHosts lists."""
    listed: tuple[str, ...] = ()
    if hosts.value is not None:
        if not isinstance(hosts.value, list) or not all(isinstance(h, str) and h.strip() for h in hosts.value):
            raise hosts.fail("a list of host names")
        listed = tuple(h.strip().lower() for h in hosts.value)
    if api_url.value is None:
        return listed
    home = host_of(url)
    found = host_of(api_url.string())
    if found not in {home, DEFAULT_API_HOSTS.get(home, home), *listed}:
        raise api_url.fail(f"a URL on git.url's host {home} (or on a host git.apiHosts lists, to send the Git "
                           f"token there)")
    return listed


def read_git(node: Field) -> GitSettings:
    source = node.child("source").string(default="manifest", choices=tuple(SOURCES))
    needs_document = SOURCES[source].needs_document
    node.mapping(_GIT_KEYS, required=("url", "path", "document") if needs_document else ("url", "path"))
    url_field = node.child("url")
    url = url_field.string()
    allow_insecure = node.child("allowInsecure").boolean(default=False)
    check_url(url_field, url, allow_insecure=allow_insecure, ssh_ok=True)
    api_url = node.child("apiUrl")
    if api_url.value is not None:
        check_url(api_url, api_url.string(), allow_insecure=allow_insecure, ssh_ok=False)
    _check_api_host(api_url, node.child("apiHosts"), url)
    document = node.child("document")
    if document.value is not None or needs_document:
        document.mapping(("kind", "name"), required=("kind", "name"))
    author = node.child("author")
    if author.value is not None:
        author.mapping(("name", "email"))
    return GitSettings(
        provider=_read_provider(node.child("provider"), url),
        url=url,
        api_url=api_url.value,
        allow_insecure=allow_insecure,
        branch=_read_branch(node.child("branch")),
        path=read_repo_path(node.child("path")),
        document=GitDocument(kind=document.child("kind").string(), name=document.child("name").string())
        if document.value is not None else GitDocument("", ""),
        selector_path=_read_selector_path(node.child("selectorPath")),
        mode=node.child("mode").string(default="direct", choices=GIT_MODES),
        author=GitAuthor(
            name=author.child("name").string(default="cutover"),
            email=author.child("email").string(default="cutover@example.invalid"),
        ),
        token_file=secret_file(node.child("tokenFile"), "git", "token"),
        source=source,
        render_path=_read_render(node.child("render")),
        ca_file=_ca_file(node.child("caFile")),
    )


def _read_render(node: Field) -> str | None:
    if node.value is None:
        return None
    node.mapping(("path",), required=("path",))
    return read_repo_path(node.child("path")).rstrip("/") or "."


def _ca_file(node: Field) -> str | None:
    """The CA the Git host's certificate is checked against. In a pod, only the Git Secret's own `ca.crt`: a trust
    anchor in a file the plan's writers control (the plan's own ConfigMap) would let them read the token on the
    way (the review's N6)."""
    if node.value is None:
        return None
    path = node.string()
    return pod_key(node, path, "git", "ca.crt", what="the Git host's CA") or path


def check_url(node: Field, url: str, *, allow_insecure: bool, ssh_ok: bool) -> None:
    if ssh_ok and (url.startswith("ssh://") or re.match(r"^[\w.-]+@[\w.-]+:", url)):
        return
    parts = urlsplit(url)
    if parts.scheme == "http" and not allow_insecure:
        raise node.fail("an https:// URL (plain http:// only with git.allowInsecure: true, for local test servers)")
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise node.fail("an https:// URL" + (" or an SSH address" if ssh_ok else ""))
    if parts.username or parts.password:
        raise node.fail("a URL without credentials (use git.tokenFile or CUTOVER_GIT_TOKEN)")


def _read_provider(node: Field, url: str) -> str:
    if node.value is not None:
        return node.string(choices=PROVIDERS)
    host = (urlsplit(url).hostname or "").lower()
    implied = PUBLIC_HOSTS.get(host)
    if implied is not None:
        return implied
    raise node.fail(f"one of {', '.join(PROVIDERS)} (cannot tell from the host {host!r})")


def read_repo_path(node: Field) -> str:
    path = node.string()
    if path.startswith("/") or ".." in PurePosixPath(path).parts or "\\" in path:
        raise node.fail("a path relative to the repository root, without '..'")
    return path


_BAD_REF = re.compile(r"[\x00-\x20\x7f~^:?*\[\\]|\.\.|@\{|//")


def _read_branch(node: Field) -> str:
    """A branch name as `git check-ref-format --branch` accepts it: it reaches hosting URLs and refspecs."""
    branch = node.string(default="main")
    parts = branch.split("/")
    if _BAD_REF.search(branch) or branch == "@" or branch.endswith((".lock", "/", ".")) or any(
            not part or part.startswith(".") for part in parts):
        raise node.fail("a branch name (no spaces, '..', '~^:?*[\\', empty or dot-led parts, '.lock' ending)")
    return branch


def _read_selector_path(node: Field) -> str:
    path = node.string(default="spec.selector")
    if any(not part for part in path.split(".")):
        raise node.fail("a dotted path such as spec.selector")
    return path
