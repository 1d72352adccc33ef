"""Git hosts behind one protocol (`base.GitHost`), chosen by the plan's `git.provider`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from cutover.errors import InvalidInput
from cutover.githost.base import GitHost
from cutover.plan import GitSettings

__all__ = ["GitHost", "connect", "token"]

SSH_KEY_FILE = "/var/run/secrets/cutover/git/ssh-privatekey"  # the key of a kubernetes.io/ssh-auth Secret
KNOWN_HOSTS_FILE = "/var/run/secrets/cutover/git/known_hosts"


def token(settings: GitSettings) -> str | None:
    """The token from git.tokenFile, else CUTOVER_GIT_TOKEN; never logged."""
    if settings.token_file:
        try:
            return Path(settings.token_file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise InvalidInput(f"git.tokenFile {settings.token_file}: cannot read: {exc.strerror}",
                               cause="git_token_missing", hint="mount the token Secret at that path") from exc
    return os.environ.get("CUTOVER_GIT_TOKEN") or None


def connect(settings: GitSettings) -> GitHost:
    if settings.provider == "github":
        from cutover.githost.github import GitHub  # noqa: PLC0415 -- one provider's code per process

        return GitHub(url=settings.url, branch=settings.branch, token=token(settings), api_url=settings.api_url)
    if settings.provider in ("gitea", "forgejo"):
        from cutover.githost.gitea import Gitea  # noqa: PLC0415

        return Gitea(url=settings.url, branch=settings.branch, token=token(settings), api_url=settings.api_url)
    if settings.provider == "gitlab":
        from cutover.githost.gitlab import GitLab  # noqa: PLC0415

        return GitLab(url=settings.url, branch=settings.branch, token=token(settings), api_url=settings.api_url)
    if settings.provider == "git":
        from cutover.githost.gitpush import GitPush  # noqa: PLC0415

        if shutil.which("git") is None:
            raise InvalidInput("git.provider git: expected the git program on PATH, found none",
                               cause="git_missing", hint="use the image built with --target with-git, or a hosting "
                                                         "API provider (github, gitlab, gitea, forgejo)")

        if settings.url.startswith(("https://", "http://")):
            return GitPush(url=settings.url, branch=settings.branch, token=token(settings))
        key = Path(os.environ.get("CUTOVER_GIT_SSH_KEY_FILE", SSH_KEY_FILE))
        if not key.exists():
            raise InvalidInput(f"git.url is an SSH address but there is no key at {key}", cause="git_ssh_setup",
                               hint="mount the deploy key there, or set CUTOVER_GIT_SSH_KEY_FILE")
        known = Path(os.environ.get("CUTOVER_GIT_KNOWN_HOSTS_FILE", KNOWN_HOSTS_FILE))
        return GitPush(url=settings.url, branch=settings.branch, ssh_key=key, known_hosts=known)
    raise InvalidInput(f"git.provider {settings.provider!r} is not supported in this version",
                       cause="not_implemented", hint="use provider: github, gitlab, gitea, forgejo or git")
