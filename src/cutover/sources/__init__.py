"""Selector sources, chosen by name (`KINDS`): what kind of file `git.path` is. Today `manifest`; each kind is
a module here with a `from_settings` constructor (`base.Source` is the protocol they keep)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping

from cutover.plan import GitSettings
from cutover.sources.base import SelectorEdit, Source

__all__ = ["KINDS", "SelectorEdit", "Source", "for_git"]

KINDS: Mapping[str, tuple[str, str]] = {  # kind -> (module, class)
    "manifest": ("cutover.sources.manifest", "ManifestSource"),
}


def for_git(settings: GitSettings, *, kind: str = "manifest") -> Source:
    module, name = KINDS[kind]
    source: Source = getattr(importlib.import_module(module), name).from_settings(settings)
    return source
