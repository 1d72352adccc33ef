"""Selector sources, chosen by name (`kinds.SOURCES`): what kind of file `git.path` is. Each kind is a module
here with a `from_settings` constructor; `base.Source` is the protocol they keep."""

from __future__ import annotations

import importlib

from cutover.argocdapi import ArgoCDApi
from cutover.githost.base import GitHost
from cutover.kinds import SOURCES
from cutover.plan import GitSettings, Plan
from cutover.sources.api import ApiChecked, Position
from cutover.sources.base import SelectorEdit, Source, Trees
from cutover.sources.kustomize import Locate

__all__ = ["SelectorEdit", "Source", "for_plan", "offline"]


def for_plan(plan: Plan, *, host: GitHost | None = None, locate: Locate | None = None, api: ArgoCDApi | None = None,
             position: Position | None = None) -> Source:
    """The plan's source; `host` for the kinds that render from the repository, `locate` for the Application's
    source path (the default directory to render). With the ArgoCD API (`api`), a kind that cannot render
    itself is render-checked through it (`position`: the plan's source in a multi-source Application)."""
    source = _for(plan.git, plan=plan, host=host, locate=locate)
    if api is not None and host is not None and source.kind != "kustomize":  # kustomize renders for itself
        return ApiChecked(source, api, host, plan, position)
    return source


def offline(plan: Plan, *, checkout: Trees) -> Source:
    """The plan's source on a local checkout (`cutover diff`): the same edit and, for a kind that renders itself,
    the same render check as before a commit; nothing that needs the Git host or the ArgoCD API."""
    return _for(plan.git, plan=plan, host=checkout, locate=None)


def _for(settings: GitSettings, *, plan: Plan, host: Trees | None, locate: Locate | None) -> Source:
    module, name = SOURCES[settings.source]  # the plan accepts only names of this table
    kind = getattr(importlib.import_module(module), name)
    source: Source = kind.from_settings(settings, host=host, service=plan.service, plan=plan, locate=locate)
    return source
