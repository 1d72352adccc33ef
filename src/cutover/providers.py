"""Git hosting providers, one row each: which module speaks to it, and which public hosts imply it. Pure data.

The plan validates `git.provider` against `PROVIDERS` (and infers it from a public host); `githost.connect`
loads the row's module and asks its class to connect. Adding a provider (Bitbucket, say) is one module under
`githost/` and one row here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

__all__ = ["PROVIDERS", "Provider", "by_host"]


@dataclasses.dataclass(frozen=True)
class Provider:
    name: str
    module: str  # the module under cutover.githost that speaks to it
    host_class: str  # its GitHost class, which has `connect(settings)`
    hosts: tuple[str, ...] = ()  # public hosts for which `git.provider` may be left out


PROVIDERS: Mapping[str, Provider] = {provider.name: provider for provider in (
    Provider("github", "cutover.githost.github", "GitHub", hosts=("github.com",)),
    Provider("gitlab", "cutover.githost.gitlab", "GitLab", hosts=("gitlab.com",)),
    Provider("gitea", "cutover.githost.gitea", "Gitea"),
    Provider("forgejo", "cutover.githost.gitea", "Gitea", hosts=("codeberg.org",)),  # Forgejo speaks Gitea's API
    Provider("git", "cutover.githost.gitpush", "GitPush"),  # plain git over HTTPS or SSH
)}


def by_host(host: str) -> str | None:
    """The provider a public host implies, or None."""
    return next((name for name, provider in PROVIDERS.items() if host.lower() in provider.hosts), None)
