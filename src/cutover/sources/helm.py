"""`git.source: helm-values`: a values file of the chart that renders the Service.

`git.selectorPath` names either the selector mapping itself (`service.selector`) or a scalar the chart turns
into the selector (`engine: vllm`); for a scalar each backend's `gitValue` is what is written for it, and a
backend's effective selector (what the live Service carries) is the plan's. Without a chart renderer here,
such an edit is not render-checked (said in the log and, through `note`, in the commit body); with
`argocd.server` the ArgoCD API renders it (docs/sources.md). Called through the `Source` protocol.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

import structlog

from cutover.core.repository import FileVersion
from cutover.errors import InvalidInput
from cutover.plan import Backend, GitDocument, GitSettings, Plan
from cutover.sources import render_check, yaml_edit
from cutover.sources.base import SelectorEdit

log = structlog.get_logger("cutover")

VALUES = GitDocument("", "")  # a values file: its only document


@dataclasses.dataclass(frozen=True)
class HelmValuesSource:
    value_path: str
    backends: Mapping[str, Backend]
    kind: str = "helm-values"
    renders_itself: ClassVar[bool] = False  # the ArgoCD API renders it, when there is one
    needs_kustomize: ClassVar[bool] = False
    note: str | None = "Not render-checked: a Helm values edit, and no ArgoCD API (argocd.server) to render the chart."

    @classmethod
    def from_settings(cls, settings: GitSettings, *, plan: Plan, **_: object) -> HelmValuesSource:
        return cls(settings.selector_path, plan.backends)

    async def selector(self, version: FileVersion, *, ref: str | None, where: str) -> dict[str, str]:
        value = yaml_edit.read_value(version.content, value_path=self.value_path, source=where)
        if isinstance(value, dict):
            if any(backend.git_value is not None for backend in self.backends.values()):
                raise InvalidInput(f"{where}: {self.value_path} holds a mapping, and the plan gives gitValue for a "
                                   "scalar", cause="invalid_plan", hint="drop backends.<name>.gitValue: the "
                                                                        "mapping is the selector")
            return value
        backend = self._by_value(value, where=where)
        # A value no backend has: no backend's selector either, so the writer stops at someone else's change.
        return dict(backend.selector) if backend else {self.value_path: value}

    async def edit(self, version: FileVersion, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        edit = self.rewrite(version.content, selector, where=where)
        log.warning("render.unchecked", path=where, selector=render_check.shown(selector),
                    hint="not render-checked: set argocd.server so that the ArgoCD API renders the chart")
        return edit

    async def render(self, version: FileVersion, *, ref: str | None) -> list[dict[str, Any]] | None:
        return None  # a chart renders in ArgoCD (argocd.server: `ApiChecked.render`)

    def rewrite(self, content: str, written: Mapping[str, str], *, where: str) -> SelectorEdit:
        value = yaml_edit.read_value(content, value_path=self.value_path, source=where)
        if isinstance(value, dict):
            return yaml_edit.edit_selector(content, document=VALUES, selector_path=self.value_path, selector=written,
                                          source=where)
        backend = next(backend for backend in self.backends.values() if dict(backend.selector) == dict(written))
        self._by_value(value, where=where)  # the scalar is one the plan knows how to write
        edit = yaml_edit.edit_value(content, value_path=self.value_path, value=str(backend.git_value), source=where)
        return dataclasses.replace(edit, old=self._selector_of(value), new=dict(written))

    def _by_value(self, value: str, *, where: str) -> Backend | None:
        if all(backend.git_value is None for backend in self.backends.values()):
            raise InvalidInput(f"{where}: {self.value_path} holds the scalar {value!r}; expected backends.<name>."
                               "gitValue for each backend (what this key holds for it)", cause="invalid_plan",
                               hint="add gitValue to every backend, e.g. gitValue: vllm")
        return next((backend for backend in self.backends.values() if backend.git_value == value), None)

    def _selector_of(self, value: str) -> dict[str, str]:
        backend = next((backend for backend in self.backends.values() if backend.git_value == value), None)
        return dict(backend.selector) if backend else {self.value_path: value}
