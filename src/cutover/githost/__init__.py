"""Git hosts behind one protocol (`base.GitHost`), chosen by the plan's `git.provider` from the `providers` table."""

from __future__ import annotations

import importlib

from cutover.githost.base import GitHost
from cutover.plan import GitSettings
from cutover.providers import PROVIDERS

__all__ = ["GitHost", "connect"]


def connect(settings: GitSettings) -> GitHost:
    """A client for the plan's repository: the provider's row names its module and class (one module loaded)."""
    provider = PROVIDERS[settings.provider]  # the plan accepts only names of this table
    host: type[GitHost] = getattr(importlib.import_module(provider.module), provider.host_class)
    return host.connect(settings)
