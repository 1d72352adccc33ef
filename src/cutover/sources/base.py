"""Where the selector lives in Git (docs/sources.md): one small protocol, one module per kind.

A source says which selector ArgoCD applies from a file version (the effective one: for a kustomize tree, what
the build renders; for a plain manifest, what the file holds) and makes the edit that gets another one applied,
with the guard that nothing else in the file changed (docs/guarantees.md #2) and, where it can render, the render check
(docs/sources.md). The phases, the writer, the gate and `cutover plan` see only this protocol, so a new kind of layout
is a new module, not a new branch in any of them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, Protocol

from cutover.core.repository import FileVersion
from cutover.plan import GitSettings, Plan, ServiceRef
from cutover.sources.yaml_edit import SelectorEdit

__all__ = ["Locate", "SelectorEdit", "Source", "SourceKind", "Trees"]

Locate = Callable[[], Awaitable[str | None]]  # the Application's source path, when it can be read


class Trees(Protocol):
    """Where a source that renders gets the repository's tree: the Git host (`GitHost.snapshot`), or a local
    checkout for the offline `cutover diff` (`sources.checkout`)."""

    async def snapshot(self, ref: str, into: Path) -> Path:
        ...


class Source(Protocol):
    @property
    def kind(self) -> str:
        """The `git.source` name."""
        ...

    @property
    def note(self) -> str | None:
        """What the commit body says about the check behind the edit (None: the file guard only)."""
        ...

    async def selector(self, version: FileVersion, *, ref: str | None, where: str) -> dict[str, str]:
        """The selector ArgoCD applies with this version of the file, at `ref` (default: the branch); `where`
        names the file (and revision) in error messages."""
        ...

    async def edit(self, version: FileVersion, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        """The file with what makes ArgoCD apply `selector`, guarded (and render-checked where it can be)."""
        ...

    async def render(self, version: FileVersion, *, ref: str | None) -> list[dict[str, Any]] | None:
        """What ArgoCD applies at `ref` (default: the branch) with this version of the file, as far as this source
        sees it (`sync_order.findings` reads it); None when it cannot render."""
        ...

    def rewrite(self, content: str, written: Mapping[str, str], *, where: str) -> SelectorEdit:
        """The same edit made again on another copy of the file (a pull request's branch): `written` is the
        `SelectorEdit.new` of the checked edit."""
        ...


class SourceKind(Protocol):
    """A row of `sources.SOURCES`: the class of a kind of source, with its traits."""

    renders_itself: bool  # it renders what ArgoCD will apply (kustomize); else the ArgoCD API checks, if any
    needs_kustomize: bool  # the program must be here before anything connects (`kustomize_missing`, exit 2)

    def from_settings(self, settings: GitSettings, *, host: Trees | None, service: ServiceRef, plan: Plan,
                      locate: Locate | None) -> Source:
        ...
