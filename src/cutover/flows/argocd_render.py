"""The render check through ArgoCD's API (`argocd.server`, docs/sources.md), around any source cutover cannot render
itself (a Helm chart above all; a plain manifest too).

ArgoCD renders only what Git holds, so the candidate goes to a scratch branch first (`GitHost.scratch`, made
anew from the base head, never merged): the API renders it and the base branch's head, `render_check.check`
compares them, and the branch is deleted again whatever the outcome. The PreSync gate asks the API for the
revision being synced, so a chart's selector is judged as ArgoCD renders it. Called through the `Source`
protocol; the inner source still reads and edits the file.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import structlog

from cutover.argocd.api import ArgoCDApi
from cutover.core.repository import Author, FileVersion, GitHost
from cutover.plan import Plan
from cutover.sources import render_check
from cutover.sources.base import SelectorEdit, Source

log = structlog.get_logger("cutover")

_COMMIT = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")  # a commit id (SHA-1 or SHA-256): what it renders never changes
Position = Callable[[], Awaitable[int | None]]  # the plan's source among a multi-source Application's


@dataclasses.dataclass
class ApiChecked:
    inner: Source
    api: ArgoCDApi
    host: GitHost
    plan: Plan
    position: Position | None = None
    note: str | None = ("Render-checked through the ArgoCD API: the candidate on a scratch branch and the branch "
                        "head; one Service with the target's selector, nothing else changed.")
    kind: str = dataclasses.field(init=False)
    _rendered: dict[tuple[str, int | None], list[dict[str, Any]]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.kind = self.inner.kind

    async def selector(self, version: FileVersion, *, ref: str | None, where: str) -> dict[str, str]:
        if ref is None:  # the branch head, as the file says (the plan's gitValues map a scalar)
            return await self.inner.selector(version, ref=ref, where=where)
        docs = await self._manifests(ref)  # the gate: as ArgoCD renders it
        service = self.plan.service
        return render_check.selector_of(render_check.service(docs, namespace=service.namespace, name=service.name,
                                                     where=f"ArgoCD's render of {ref[:12]}"))

    async def edit(self, version: FileVersion, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        edit = self.inner.rewrite(version.content, selector, where=where)  # the file edit; the check is here
        branch = self.plan.branch(f"check-{self.plan.name}")
        author = Author(self.plan.git.author.name, self.plan.git.author.email)
        candidate = await self.host.scratch(self.plan.git.path, edit.after, author=author, branch=branch,
                                            message=f"cutover: render check of {self.plan.name} (never merged)\n")
        try:
            position = await self._position()
            current = await self.api.manifests(self.plan.git.branch, position=position)
            proposed = await self.api.manifests(candidate, position=position)
        finally:
            await self.host.drop(branch)
        service = self.plan.service
        render_check.check(current, proposed, namespace=service.namespace, name=service.name, wanted=selector,
                       written=edit.new, where=f"ArgoCD's render of {where}")
        log.info("render.checked", via="argocd-api", candidate=candidate[:12], selector=render_check.shown(selector))
        return edit

    async def render(self, version: FileVersion, *, ref: str | None) -> list[dict[str, Any]] | None:
        return await self._manifests(ref or self.plan.git.branch)

    async def _manifests(self, revision: str) -> list[dict[str, Any]]:
        """ArgoCD's render of `revision`; of a commit id once per source (the gate reads its selector and its sync
        order), of a branch each time (it moves)."""
        position = await self._position()
        if not _COMMIT.fullmatch(revision):
            return await self.api.manifests(revision, position=position)
        if (revision, position) not in self._rendered:
            self._rendered[revision, position] = await self.api.manifests(revision, position=position)
        return self._rendered[revision, position]

    def rewrite(self, content: str, written: Mapping[str, str], *, where: str) -> SelectorEdit:
        return self.inner.rewrite(content, written, where=where)

    async def _position(self) -> int | None:
        return await self.position() if self.position is not None else None
