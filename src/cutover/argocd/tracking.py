"""Which Application a resource ArgoCD created belongs to, read from the tracking ArgoCD writes on every object it
applies, hooks included (argo-cd v3.5 `controller/state.go` and `controller/hook.go`: `SetAppInstance` on each
target object and on each hook it creates): the annotation `argocd.argoproj.io/tracking-id`,
`<instance>:<group>/<kind>:<namespace>/<name>` (annotation tracking, the default since 3.0,
`util/argo/resource_tracking.go`), or the label `app.kubernetes.io/instance` (label tracking, a value cut at 63
characters, so read only when no annotation is there). `<instance>` is the Application's name, or
`<namespace>_<name>` when it lives outside the controller's namespace (`Application.InstanceName`). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["INSTANCE", "TRACKING_ID", "application_of"]

TRACKING_ID = "argocd.argoproj.io/tracking-id"
INSTANCE = "app.kubernetes.io/instance"


def application_of(metadata: Mapping[str, Any], *, controller_namespace: str) -> tuple[str, str] | None:
    """(namespace, name) of the Application that applied the object with `metadata`; None when it carries no
    tracking of ArgoCD's (it was not applied by ArgoCD, or another tool wrote the label)."""
    annotations = metadata.get("annotations") or {}
    tracked = str(annotations.get(TRACKING_ID) or "")
    instance, sep, rest = tracked.partition(":")
    if not (sep and instance and "/" in rest):
        instance = str((metadata.get("labels") or {}).get(INSTANCE) or "")
    if not instance or ":" in instance or "/" in instance:
        return None
    namespace, underscore, name = instance.partition("_")
    return (namespace, name) if underscore and namespace and name else (controller_namespace, instance)
