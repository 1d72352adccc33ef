"""`git.source: kustomize`: the file (a base Service, or an overlay's patch of it) is part of a kustomize tree.

The plan's backend selectors are the *effective* selectors, as ArgoCD applies them (docs/sources.md): the build may
add labels to a selector (`commonLabels`, `labels[].includeSelectors`, a base that the file patches). So the
selector the source reports is the rendered one: the tree at the revision, checked out from the Git host
(`GitHost.snapshot`), with the file as it was read, built by real kustomize (never imitated). An edit writes
what makes the build produce the wanted selector (the wanted one less what the build adds), then builds the
candidate and runs the render check (`render_check.check`) before anything is written.

The directory built is `git.render.path`, else the Application's source path, else the file's directory.
Called by the phases, the writer and the gate through the `Source` protocol.
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import weakref
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar

import structlog

from cutover.core.repository import FileVersion
from cutover.plan import GitSettings, ServiceRef
from cutover.sources import kustomize_build, render_check, yaml_edit
from cutover.sources.base import Locate, SelectorEdit, Trees

log = structlog.get_logger("cutover")


@dataclasses.dataclass
class KustomizeSource:
    git: GitSettings
    service: ServiceRef
    host: Trees
    locate: Locate | None = None
    kind: str = "kustomize"
    renders_itself: ClassVar[bool] = True  # builds the tree with real kustomize before every commit
    needs_kustomize: ClassVar[bool] = True
    note: str | None = ("Render-checked: kustomize build of the candidate and current revision; one Service with "
                        "the target's selector, nothing else changed.")
    _trees: dict[tuple[str, str], Path] = dataclasses.field(default_factory=dict)
    _scratch: Path = dataclasses.field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="cutover-render-")))
    _directory: str | None = None
    _built: dict[tuple[str, str, str, str], list[dict[str, Any]]] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:  # the trees go with the source (a pod's /tmp is an emptyDir anyway)
        weakref.finalize(self, shutil.rmtree, self._scratch, True)

    @classmethod
    def from_settings(cls, settings: GitSettings, *, host: Trees | None, service: ServiceRef | None,
                      locate: Locate | None = None, **_: object) -> KustomizeSource:
        kustomize_build.require()  # at start: a kustomize source without kustomize is a clear error, not a late one
        assert host is not None, "a kustomize source renders from the Git host's tree"
        assert service is not None
        return cls(settings, service, host, locate)

    async def selector(self, version: FileVersion, *, ref: str | None, where: str) -> dict[str, str]:
        docs = await self._render(version, version.content, ref=ref, where=where)
        found = render_check.service(docs, namespace=self.service.namespace, name=self.service.name, where=where)
        return render_check.selector_of(found)

    async def edit(self, version: FileVersion, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        current = await self._render(version, version.content, ref=None, where=where)
        effective = render_check.selector_of(render_check.service(current, namespace=self.service.namespace,
                                                          name=self.service.name, where=where))
        in_file = self._file_selector(version.content, where=where)
        added = {key: value for key, value in effective.items() if in_file.get(key) != value}
        written = {key: value for key, value in selector.items() if added.get(key) != value}
        edit = self.rewrite(version.content, written, where=where)
        candidate = await self._render(version, edit.after, ref=None, where=where)
        render_check.check(current, candidate, namespace=self.service.namespace, name=self.service.name,
                       wanted=selector, written=written, where=where)
        log.info("render.checked", path=await self._render_path(), selector=render_check.shown(selector),
                 written=render_check.shown(written))
        return edit

    async def render(self, version: FileVersion, *, ref: str | None) -> list[dict[str, Any]] | None:
        return await self._render(version, version.content, ref=ref, where=f"{self.git.path}@{ref or 'head'}")

    def rewrite(self, content: str, written: Mapping[str, str], *, where: str) -> SelectorEdit:
        return yaml_edit.edit_selector(content, document=self.git.document, selector_path=self.git.selector_path,
                                      selector=written, source=where)

    def _file_selector(self, content: str, *, where: str) -> dict[str, str]:
        return yaml_edit.read_selector(content, document=self.git.document, selector_path=self.git.selector_path,
                                      source=where)

    async def _render_path(self) -> str:
        if self._directory is None:
            found = self.git.render_path or (await self.locate() if self.locate else None)
            self._directory = found or str(PurePosixPath(self.git.path).parent)
        return self._directory

    async def _tree(self, version: FileVersion, ref: str | None) -> Path:
        """The tree at `ref` (default: the branch), fetched once per revision and file version."""
        key = (ref or self.git.branch, version.version)
        if key not in self._trees:
            into = self._scratch / f"tree-{len(self._trees)}"
            self._trees[key] = await self.host.snapshot(ref or self.git.branch, into)
        return self._trees[key]

    async def check_workload(self, version: FileVersion, after: str, *, path: str, kind: str, name: str,
                             field: tuple[str, ...], wanted: str | None) -> bool:
        """The render check of a free or a restore (`render_check.workload`): the build with `path` as Git holds it
        (`version`) and as the edit leaves it (`after`). False when the render holds no such workload."""
        where = f"{path} (rendered)"
        current = await self._render(version, version.content, ref=None, where=where, path=path)
        candidate = await self._render(version, after, ref=None, where=where, path=path)
        checked = render_check.workload(current, candidate, kind=kind, name=name, field=field, wanted=wanted,
                                        where=where)
        log.info("render.checked" if checked else "render.unchecked", path=await self._render_path(),
                 workload=f"{kind}/{name}", field=".".join(field))
        return checked

    async def _render(self, version: FileVersion, content: str, *, ref: str | None,
                      where: str, path: str | None = None) -> list[dict[str, Any]]:
        """kustomize build of the render path, in a copy of the tree whose file (`path`, default git.path) holds
        `content`; built once per tree and content (the gate reads the selector and the sync order of one
        render)."""
        key = (ref or self.git.branch, version.version, path or self.git.path, content)
        if key not in self._built:
            self._built[key] = await self._build(version, content, ref=ref, path=path)
        return self._built[key]

    async def _build(self, version: FileVersion, content: str, *, ref: str | None,
                     path: str | None) -> list[dict[str, Any]]:
        pristine = await self._tree(version, ref)
        work = Path(tempfile.mkdtemp(dir=self._scratch, prefix="build-"))
        try:
            shutil.copytree(pristine, work, dirs_exist_ok=True)
            (work / (path or self.git.path)).write_bytes(content.encode("utf-8"))
            directory = await self._render_path()
            return await kustomize_build.build(work / directory, where=f"{directory}@{(ref or self.git.branch)[:12]}")
        finally:
            shutil.rmtree(work, ignore_errors=True)
