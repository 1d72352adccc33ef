"""Where a repository keeps the selector (`git.source`, docs/sources.md), one row each: the module and class under
`cutover.sources` that reads and edits it. Pure data. The plan validates `git.source` against this table; a new
layout (a Helm chart with an engine key of its own, say) is one module under `sources/` and one row here.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["SOURCES"]

SOURCES: Mapping[str, tuple[str, str]] = {
    "manifest": ("cutover.sources.manifest", "ManifestSource"),  # a plain YAML file ArgoCD applies as written
    "kustomize": ("cutover.sources.kustomize", "KustomizeSource"),  # a base Service or an overlay's patch
    "helm-values": ("cutover.sources.helm", "HelmValuesSource"),  # a values file: a mapping, or a scalar
}
