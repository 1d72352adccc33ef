"""Git hosts behind one protocol (`core.repository.GitHost`), chosen by the plan's `git.provider` from `PROVIDERS`: a
registry of the classes themselves, one row per provider. Adding one (Bitbucket, say) is a module here and a row
below, and its name in `plan.PROVIDERS`.
"""

from __future__ import annotations

from collections.abc import Mapping

from cutover.core.repository import GitHost
from cutover.githost.gitea import Gitea
from cutover.githost.github import GitHub
from cutover.githost.gitlab import GitLab
from cutover.githost.gitpush import GitPush
from cutover.plan import GitSettings

__all__ = ["PROVIDERS", "GitHost", "connect"]

PROVIDERS: Mapping[str, type[GitHost]] = {
    "github": GitHub,  # and GitHub Enterprise
    "gitlab": GitLab,
    "gitea": Gitea,
    "forgejo": Gitea,  # Forgejo speaks Gitea's API
    "git": GitPush,  # plain git over HTTPS or SSH
}


def connect(settings: GitSettings) -> GitHost:
    """A client for the plan's repository, from the provider's class (the plan accepts only names of this table)."""
    return PROVIDERS[settings.provider].connect(settings)
