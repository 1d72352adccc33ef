"""Selector sources, chosen by the plan's `git.source` from `SOURCES`: what kind of file `git.path` is. Each kind is
a module here with a `from_settings` constructor and the row's traits (`renders_itself`, `needs_kustomize`);
`base.Source` is the protocol they keep. A new layout is a module, a row below and its `SourceFormat` in
`plan.SOURCES`."""

from __future__ import annotations

from collections.abc import Mapping

from cutover.core.repository import GitHost
from cutover.plan import GitSettings, Plan
from cutover.sources import kustomize_build
from cutover.sources.base import Locate, SelectorEdit, Source, SourceKind, Trees
from cutover.sources.helm import HelmValuesSource
from cutover.sources.kustomize import KustomizeSource
from cutover.sources.manifest import ManifestSource

__all__ = ["SOURCES", "SelectorEdit", "Source", "check_tools", "for_plan", "offline"]

SOURCES: Mapping[str, SourceKind] = {  # the classes: `from_settings` builds one, `renders_itself` says who renders
    "manifest": ManifestSource,  # a plain YAML file ArgoCD applies as written
    "kustomize": KustomizeSource,  # a base Service or an overlay's patch: rendered with real kustomize here
    "helm-values": HelmValuesSource,  # a values file: a mapping, or a scalar the chart turns into the selector
}


def for_plan(plan: Plan, *, host: GitHost | None = None, locate: Locate | None = None) -> Source:
    """The plan's source; `host` for the kinds that render from the repository, `locate` for the Application's
    source path (the default directory to render). A kind that cannot render itself (`renders_itself`) is
    render-checked through the ArgoCD API by the caller that has one (`flows.argocd_render.ApiChecked`)."""
    return _for(plan.git, plan=plan, host=host, locate=locate)


def check_tools(plan: Plan) -> None:
    """Before anything connects: the programs the plan's source needs are here (`kustomize_missing`, exit 2)."""
    if SOURCES[plan.git.source].needs_kustomize:
        kustomize_build.require()


def offline(plan: Plan, *, checkout: Trees) -> Source:
    """The plan's source on a local checkout (`cutover diff`): the same edit and, for a kind that renders itself,
    the same render check as before a commit; nothing that needs the Git host or the ArgoCD API."""
    return _for(plan.git, plan=plan, host=checkout, locate=None)


def _for(settings: GitSettings, *, plan: Plan, host: Trees | None, locate: Locate | None) -> Source:
    source: Source = SOURCES[settings.source].from_settings(settings, host=host, service=plan.service, plan=plan,
                                                            locate=locate)
    return source
