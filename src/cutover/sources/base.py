"""Where the selector lives in Git (SPEC §9): one small protocol, one module per kind.

A source reads the selector a file holds and makes the edit that puts another selector there, with the guard
that nothing else changed (SPEC §6.2). The phases, the writer and `cutover diff` see only this protocol, so a
new kind of file (a kustomize overlay, Helm values) is a new module, not a new branch in any of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from cutover.manifest import SelectorEdit

__all__ = ["SelectorEdit", "Source"]


class Source(Protocol):
    kind: str

    def read_selector(self, content: str, *, where: str) -> dict[str, str]:
        """The selector as the file holds it; `where` names the file (and revision) in error messages."""
        ...

    def edit(self, content: str, selector: Mapping[str, str], *, where: str) -> SelectorEdit:
        """The file with `selector` in place, guarded: every other byte unchanged (GuardFailed otherwise)."""
        ...
