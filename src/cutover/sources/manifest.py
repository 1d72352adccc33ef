"""`git.source: manifest`: a plain YAML (or JSON) file that ArgoCD applies as written (the reference scenario).

The selector is the mapping at `git.selectorPath` of the document `git.document` names (a document of its own
or an item of a `kind: List`); the edit and its guard are `cutover.manifest`'s, line by line, comments and
all. What the file holds is what ArgoCD applies, so there is nothing to render.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, ClassVar

from cutover.core.repository import FileVersion
from cutover.plan import GitDocument, GitSettings
from cutover.sources import yaml_edit
from cutover.sources.base import SelectorEdit


@dataclasses.dataclass(frozen=True)
class ManifestSource:
    document: GitDocument
    selector_path: str
    kind: str = "manifest"
    renders_itself: ClassVar[bool] = False  # the ArgoCD API renders it, when there is one
    needs_kustomize: ClassVar[bool] = False
    note: str | None = None

    @classmethod
    def from_settings(cls, settings: GitSettings, **_: object) -> ManifestSource:
        return cls(settings.document, settings.selector_path)

    async def selector(self, version: FileVersion, *, ref: str | None, where: str) -> dict[str, str]:
        return self.read_selector(version.content, where=where)

    async def edit(self, version: FileVersion, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        return self.rewrite(version.content, selector, where=where)

    async def render(self, version: FileVersion, *, ref: str | None) -> list[dict[str, Any]] | None:
        return yaml_edit.documents(version.content, source="git.path")  # the file alone: what cutover reads

    def read_selector(self, content: str, *, where: str) -> dict[str, str]:
        return yaml_edit.read_selector(content, document=self.document, selector_path=self.selector_path,
                                      source=where)

    def rewrite(self, content: str, written: Mapping[str, str], *, where: str) -> SelectorEdit:
        return yaml_edit.edit_selector(content, document=self.document, selector_path=self.selector_path,
                                      selector=written, source=where)
