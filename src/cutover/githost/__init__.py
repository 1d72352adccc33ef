"""Git hosts behind one protocol (`base.GitHost`), chosen by the plan's `git.provider`."""

from __future__ import annotations

import os
from pathlib import Path

from cutover.errors import InvalidInput
from cutover.githost.base import GitHost
from cutover.plan import GitSettings

__all__ = ["GitHost", "connect", "token"]


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
        if not settings.url.startswith(("https://", "http://")):
            raise InvalidInput(f"git.url: SSH addresses are not supported in this version, found {settings.url!r}",
                               cause="not_implemented", hint="use an https:// URL with a token")
        from cutover.githost.gitpush import GitPush  # noqa: PLC0415

        return GitPush(url=settings.url, branch=settings.branch, token=token(settings))
    raise InvalidInput(f"git.provider {settings.provider!r} is not supported in this version",
                       cause="not_implemented", hint="use provider: github, gitlab, gitea, forgejo or git")
