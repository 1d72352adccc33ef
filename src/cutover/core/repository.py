"""The Git host as the core and every wing see it: a branch of a repository whose files are read with a version and
written with compare-and-swap, their history, the whole tree, scratch branches and change requests.

`GitHost` is the protocol; a provider implements it in a module of `cutover.githost` (`githost.PROVIDERS` names
the classes). The values here travel between the wings (a selector source reads a `FileVersion`, the ArgoCD
render check commits as an `Author`), so they live in the core, beside `views.Commit`. No I/O here.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Self

from cutover.core.views import Commit
from cutover.errors import InvalidInput
from cutover.plan import GitSettings


@dataclasses.dataclass(frozen=True)
class FileVersion:
    content: str
    version: str  # what the host compares on write: a blob sha, or a commit id
    head: str | None = None  # the branch's commit when read, where the host tells it


@dataclasses.dataclass(frozen=True)
class Written:
    sha: str
    url: str | None = None


@dataclasses.dataclass(frozen=True)
class ChangeRequest:
    """A pull or merge request that carries the selector change."""

    number: str
    url: str
    branch: str


@dataclasses.dataclass(frozen=True)
class ChangeState:
    state: str  # open | merged | closed
    merge_sha: str | None = None


@dataclasses.dataclass(frozen=True)
class Author:
    name: str
    email: str


class GitHost(abc.ABC):
    """A branch of a repository on some host."""

    name: str = "git"

    @classmethod
    @abc.abstractmethod
    def connect(cls, settings: GitSettings) -> Self:
        """A client for the plan's repository and branch, with its credentials (`githost.PROVIDERS` names the class)."""

    @abc.abstractmethod
    async def read(self, path: str, *, ref: str | None = None) -> FileVersion:
        """The file at the branch head, or at `ref` (a commit, or its 7-character prefix)."""

    @abc.abstractmethod
    async def write(self, path: str, content: str, *, expected: FileVersion, message: str,
                    author: Author) -> Written:
        """Commit `content`, only if the file is still at `expected` (StaleVersion otherwise)."""

    @abc.abstractmethod
    async def history(self, path: str, *, limit: int = 20, page: int = 1) -> list[Commit]:
        """The commits that touched `path`, newest first: `limit` of them, the `page`-th such batch."""

    @abc.abstractmethod
    async def snapshot(self, ref: str, into: Path) -> Path:
        """The whole tree at `ref` (the branch or a commit), written out under `into`: what ArgoCD renders from."""

    async def scratch(self, path: str, content: str, *, message: str, author: Author, branch: str) -> str:
        """Commit `content` at `path` on `branch`, made anew from the base branch's head; that commit's sha. A
        candidate for ArgoCD's API to render before anything reaches the base branch (it renders only what Git
        holds); `drop` removes the branch again."""
        raise InvalidInput(f"argocd.server: {self.name} cannot hold a scratch branch", cause="not_implemented",
                           hint="render-check through the ArgoCD API with another provider")

    async def drop(self, branch: str) -> None:
        """Delete `branch` (a scratch branch); best effort."""
        return

    async def open_change(self, path: str, rewrite: Callable[[str], str], *, message: str, author: Author,
                          branch: str, title: str, body: str) -> ChangeRequest:
        """Make `branch` from the base branch's head, commit `rewrite(file as it is there)` on it and open a
        request to merge it. An open request from that branch is returned as it is: a re-run opens no second."""
        raise InvalidInput(f"git.mode pull-request: {self.name} has no pull requests", cause="not_implemented",
                           hint="use mode: direct with this provider")

    async def change_state(self, change: ChangeRequest) -> ChangeState:
        raise NotImplementedError

    async def aclose(self) -> None:
        return None
