"""Where a credential may go, said by the Secret that holds it, never by the plan (docs/security.md).

A writer of a workload's path writes the plan; an administrator writes the Secrets. So in a pod (where the Secrets
are mounted) the Git Secret names the repository its token may reach (`repository`), the branches (`branches`,
globs; `main` when absent) and the files (`paths`, globs; any file of the repository when absent) cutover may write,
the API hosts besides the repository's own (`apiHosts`) and, if any, the commits' author (`author`, `Name <email>`);
the ArgoCD Secret names the server its token may reach (`server`). A plan that goes anywhere else is refused before
any request (exit 2 `credential_unbound`), naming the plan key and the Secret key. Pure: the caller reads the
Secret's files (`read`) and asks `check`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path
from urllib.parse import urlsplit

from cutover.errors import InvalidInput
from cutover.plan.git import DEFAULT_API_HOSTS
from cutover.plan.model import GitAuthor, Plan

GIT_KEYS = ("repository", "branches", "paths", "apiHosts", "author")
GIT_CREDENTIALS = ("token", "ssh-privatekey")  # what the Git Secret holds that could be sent somewhere
# Every key each Secret may hold, by the name its mount gives the file: a file of any other name is a key renamed or
# added by the pod's mount (`items:`), parting a credential from its bounds, and refused in a pod.
KNOWN = {"git": (*GIT_KEYS, *GIT_CREDENTIALS, "ca.crt", "known_hosts"), "argocd": ("token", "server", "ca.crt"),
         "slack": ("webhook", "token", "channels")}
NOT_SECRET = {"git": (*GIT_KEYS, "ca.crt", "known_hosts"), "argocd": ("server", "ca.crt"), "slack": ("channels",)}
CAUSE = "credential_unbound"
HINT = ("the Secret says where its credential may go (docs/install.md, step 2); change the plan to stay there, or "
        "have the Secret's owner widen it")


@dataclasses.dataclass(frozen=True)
class Bounds:
    """What the mounted Secrets allow; None where a Secret says nothing (or holds no credential)."""

    git_credential: bool = False
    repository: str | None = None
    branches: tuple[str, ...] = ("main",)
    paths: tuple[str, ...] = ("**",)
    api_hosts: tuple[str, ...] = ()
    author: GitAuthor | None = None
    argocd_credential: bool = False
    argocd_server: str | None = None
    strays: tuple[str, ...] = ()  # in a pod: files of a Secret's mount that no key of it is (`<secret>/<file>`)
    slack_channels: tuple[str, ...] = ()  # the channels the Slack bot token may post to (none: any)


def read(secrets: Path, *, in_pod: bool = False) -> Bounds:
    """The bounds in the Secrets mounted under `secrets` (`git/…`, `argocd/…`); a list is one item per line (or
    comma-separated), blank lines and `#` comments skipped. `in_pod`: the Jobs' own mounts, where `paths` has no
    default (a mount that leaves the key out must not widen the token to every file) and a file no key of its
    Secret is (`strays`) is refused by `check`."""
    git, argocd = secrets / "git", secrets / "argocd"
    found = {key: _text(git / key) for key in GIT_KEYS}
    author = found["author"]
    return Bounds(
        git_credential=any((git / name).is_file() for name in GIT_CREDENTIALS),
        repository=found["repository"],
        branches=_items(found["branches"]) or ("main",),
        paths=_items(found["paths"]) or (() if in_pod else ("**",)),
        api_hosts=tuple(host.lower() for host in _items(found["apiHosts"])),
        author=_author(author) if author else None,
        argocd_credential=(argocd / "token").is_file(),
        argocd_server=_text(argocd / "server"),
        slack_channels=_items(_text(secrets / "slack" / "channels")),
        strays=tuple(stray for secret in KNOWN for stray in mounted(secrets, secret) if
                     stray.split("/", 1)[1] not in KNOWN[secret]) if in_pod else (),
    )


def mounted(secrets: Path, secret: str) -> list[str]:
    """The files of a Secret's mount, `<secret>/<name>`, without the kubelet's own (`..data`, `..<timestamp>`)."""
    try:
        return sorted(f"{secret}/{entry.name}" for entry in (secrets / secret).iterdir()
                      if not entry.name.startswith(".."))
    except OSError:
        return []


def secret_values(secrets: Path) -> list[str]:
    """Everything a credential may be under `secrets`: every file of the Secrets' mounts but the bounds (which
    name repositories, branches and files, read in every log line), whatever its name or shape; for the
    redactor."""
    values: list[str] = []
    for secret in KNOWN:
        for name in mounted(secrets, secret):
            if name.split("/", 1)[1] in NOT_SECRET[secret]:
                continue
            text = _text(secrets / name, limit=1 << 16)
            if text:
                values += [text, *(line.strip() for line in text.splitlines() if len(line.strip()) >= 8)]
    return values


def check(plan: Plan, bounds: Bounds) -> Plan:
    """`plan` within what the Secrets allow, with the Secret's author when it names one; raises InvalidInput
    naming the plan key and the Secret key otherwise."""
    if bounds.strays:
        raise InvalidInput(f"the Secrets' mounts hold {', '.join(bounds.strays)}, which is no key cutover reads: a "
                           "mount that renames or adds keys (`items:`) parts a credential from its bounds",
                           cause=CAUSE, hint="mount cutover-git, cutover-argocd and cutover-slack whole, as the "
                                             "shipped Jobs do, and keep only cutover's keys in them (docs/install.md, "
                                             "step 2)")
    if bounds.git_credential:
        _git_within(plan, bounds)
    channel = plan.slack.channel if plan.slack is not None else None
    if channel is not None and bounds.slack_channels and channel not in bounds.slack_channels:
        raise _refused("notify.slack.channel", "cutover-slack/channels",
                       f"expected a channel the Secret lists ({', '.join(bounds.slack_channels)}), found {channel}")
    server = plan.argocd.server if plan.argocd is not None else None
    if bounds.argocd_credential and server is not None and (
            bounds.argocd_server is None or _server(server) != _server(bounds.argocd_server)):
        raise _refused("argocd.server", "cutover-argocd/server",
                       f"expected the server the Secret names ({bounds.argocd_server or 'none'}), found {server}")
    return _authored(plan, bounds)


def _git_within(plan: Plan, bounds: Bounds) -> None:
    """The Git token's bounds: its repository, branches, files, scheme and API hosts."""
    git = plan.git
    if not bounds.paths and not plan.fleet:  # a fleet's cluster writes nothing: a read-only token needs no files
        raise _refused("git.path", "cutover-git/paths",
                       "the Secret cutover-git names no files its credential may write: in a pod it must (a "
                       "mount that left the key out would otherwise open every file of the repository)")
    if bounds.repository is None:
        raise _refused("git.url", "cutover-git/repository",
                       f"the Secret cutover-git names no repository its credential may go to (found {git.url})")
    if _repository(git.url) != _repository(bounds.repository):
        raise _refused("git.url", "cutover-git/repository",
                       f"expected the repository the Secret names ({bounds.repository}), found {git.url}")
    if not allows(bounds.branches, git.branch):
        raise _refused("git.branch", "cutover-git/branches",
                       f"expected a branch the Secret allows ({', '.join(bounds.branches)}), found {git.branch}")
    for key, path in _written(plan):
        if not allows(bounds.paths, path):
            raise _refused(key, "cutover-git/paths",
                           f"expected a file the Secret allows ({', '.join(bounds.paths)}), found {path}")
    if git.allow_insecure or urlsplit(git.url).scheme == "http":
        raise _refused("git.allowInsecure", "cutover-git/repository",
                       "https:// only in a pod: plain http:// would send the token in clear")
    if git.api_url and not _api_root(git.api_url):
        raise _refused("git.apiUrl", "cutover-git/apiHosts",
                       f"an https:// API root (the host, or a path ending in /api/v1, /api/v3 or /api/v4, no "
                       f"query), found {git.api_url}")
    for host in _api_hosts(plan):
        if host not in bounds.api_hosts:
            raise _refused("git.apiUrl", "cutover-git/apiHosts",
                           f"expected the repository's host or one the Secret lists "
                           f"({', '.join(bounds.api_hosts) or 'none'}), found {host}")


def _authored(plan: Plan, bounds: Bounds) -> Plan:
    """Commits are cutover's own or the Secret's: a plan may not sign them as someone else."""
    named = plan.git.author
    allowed = bounds.author or GitAuthor()
    if named not in (GitAuthor(), allowed):
        raise _refused("git.author", "cutover-git/author",
                       f"expected cutover's own author or the one the Secret names ({allowed.name} <{allowed.email}>),"
                       f" found {named.name} <{named.email}>")
    return dataclasses.replace(plan, git=dataclasses.replace(plan.git, author=allowed))


def _written(plan: Plan) -> Iterable[tuple[str, str]]:
    """Every file cutover may edit for this plan: the selector's, and the workloads' a handoff frees; none for a
    fleet's cluster, which commits nothing (docs/fleet.md)."""
    if plan.fleet:
        return
    yield "git.path", plan.git.path
    for name, backend in plan.backends.items():
        if backend.workload is not None:
            yield f"backends.{name}.workload.path", backend.workload.path or plan.git.path


def _api_root(url: str) -> bool:
    """An API's root, where the hosts' clients append their own paths: https, no query or fragment, and a path that
    is empty or ends in a host's API prefix (GitHub Enterprise /api/v3, GitLab /api/v4, Gitea and Forgejo
    /api/v1), so that no plan aims the token's requests at a path of its choosing (N5)."""
    parts = urlsplit(url)
    path = parts.path.rstrip("/")
    return parts.scheme == "https" and not parts.query and not parts.fragment and ".." not in path.split("/") and \
        (path == "" or re.search(r"/api/v[134]$", path) is not None)


def _api_hosts(plan: Plan) -> Iterable[str]:
    """The hosts the Git token goes to besides the repository's own (and api.github.com for github.com)."""
    home = (urlsplit(plan.git.url).hostname or "").lower()
    implied = {home, DEFAULT_API_HOSTS.get(home, home)}  # the plan reader's own rule
    hosts = {(urlsplit(plan.git.api_url).hostname or "").lower()} if plan.git.api_url else set()
    return sorted(hosts - implied)


def _repository(url: str) -> str:
    """A repository URL as compared: scheme and host lowercased, without a trailing `/` or `.git`."""
    scp = re.match(r"^([\w.-]+)@([\w.-]+):(.*)$", url)
    if scp:
        url = f"ssh://{scp[1]}@{scp[2]}/{scp[3]}"
    parts = urlsplit(url.strip())
    path = parts.path.rstrip("/").removesuffix(".git")
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{path}"


def _server(url: str) -> str:
    parts = urlsplit(url.strip())
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"


def allows(patterns: Iterable[str], path: str) -> bool:
    """Whether any of the Secret's globs (`paths`, `branches`) takes `path`."""
    return any(_match(pattern, path) for pattern in patterns)


def _match(pattern: str, value: str) -> bool:
    """A glob: `**` any characters, `*` and `?` none of them a `/`."""
    regex = "".join(".*" if part == "**" else "[^/]*" if part == "*" else "[^/]" if part == "?" else re.escape(part)
                    for part in re.split(r"(\*\*|\*|\?)", pattern))
    return re.fullmatch(regex, value) is not None


def _refused(plan_key: str, secret_key: str, message: str) -> InvalidInput:
    return InvalidInput(f"{plan_key}: {message} ({secret_key})", cause=CAUSE, hint=HINT)


def _text(path: Path, *, limit: int = 1 << 20) -> str | None:
    try:
        with path.open(encoding="utf-8") as file:
            return file.read(limit).strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def _items(text: str | None) -> tuple[str, ...]:
    if not text:
        return ()
    lines = (line.split("#", 1)[0] for line in text.splitlines())
    return tuple(item.strip() for line in lines for item in line.split(",") if item.strip())


def _author(text: str) -> GitAuthor:
    found = re.fullmatch(r"\s*(.+?)\s*<([^<>\s]+@[^<>\s]+)>\s*", text)
    if found is None:
        raise InvalidInput(f"cutover-git/author: expected `Name <email>`, found {text!r}", cause=CAUSE,
                           hint="write the Secret's author key as `Name <email>`")
    return GitAuthor(found[1], found[2])


__all__ = ["CAUSE", "GIT_KEYS", "KNOWN", "Bounds", "allows", "check", "mounted", "read", "secret_values"]
