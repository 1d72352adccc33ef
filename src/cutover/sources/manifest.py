"""`git.source: manifest`: a plain YAML file that ArgoCD applies as written (the reference scenario).

The selector is the mapping at `git.selectorPath` of the document `git.document` names; the edit and its
guard are `cutover.manifest`'s, line by line, comments and all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from cutover import manifest
from cutover.plan import GitDocument, GitSettings
from cutover.sources.base import SelectorEdit


@dataclasses.dataclass(frozen=True)
class ManifestSource:
    document: GitDocument
    selector_path: str
    kind: str = "manifest"

    @classmethod
    def from_settings(cls, settings: GitSettings) -> ManifestSource:
        return cls(settings.document, settings.selector_path)

    def read_selector(self, content: str, *, where: str) -> dict[str, str]:
        return manifest.read_selector(content, document=self.document, selector_path=self.selector_path,
                                      source=where)

    def edit(self, content: str, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        return manifest.edit_selector(content, document=self.document, selector_path=self.selector_path,
                                      selector=selector, source=where)
