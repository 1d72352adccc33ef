"""The render check (docs/sources.md): what ArgoCD will apply after our edit, against what it applies now. Pure.

Exactly one Service `namespace/name` must come out, with the target's selector, and nothing else in the
rendered output may differ from the current revision's: not another object, not another field of the Service.
When the selector comes out different, the message names the rendered selector and what added to it (labels
the build puts into selectors through `commonLabels`, `labels[].includeSelectors`, a base the file patches),
so a person can see which layer to change. Called by the selector sources before every commit and by the gate.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from cutover.errors import InvalidInput

__all__ = ["RenderMismatch", "check", "service", "shown"]


class RenderMismatch(InvalidInput):
    """What ArgoCD would apply is not the switch: exit 2, nothing committed or pushed."""

    default_cause = "render_mismatch"


def shown(selector: Mapping[str, str]) -> str:
    return ",".join(f"{key}={value}" for key, value in selector.items()) or "(empty)"


def _identity(doc: Mapping[str, Any], namespace: str) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return (str(doc.get("apiVersion", "")), str(doc.get("kind", "")), str(meta.get("namespace") or namespace),
            str(meta.get("name", "")))


def service(docs: Sequence[Mapping[str, Any]], *, namespace: str, name: str, where: str) -> Mapping[str, Any]:
    """The one Service `namespace/name` of a render (a document without a namespace takes the Application's)."""
    found = [doc for doc in docs if _identity(doc, namespace)[1:] == ("Service", namespace, name)]
    if len(found) != 1:
        raise RenderMismatch(f"{where}: expected exactly one Service {namespace}/{name} in the rendered output, "
                             f"found {len(found)}", hint="check git.render.path: it must be the directory ArgoCD "
                                                         "builds for the Application that owns the Service")
    return found[0]


def selector_of(doc: Mapping[str, Any]) -> dict[str, str]:
    return {str(key): str(value) for key, value in ((doc.get("spec") or {}).get("selector") or {}).items()}


def check(current: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]], *, namespace: str, name: str,
          wanted: Mapping[str, str], written: Mapping[str, str], where: str) -> None:
    """`current` and `candidate`: the renders before and after the edit, which wrote `written` into the file so
    that the build yields `wanted`."""
    after = service(candidate, namespace=namespace, name=name, where=where)
    rendered = selector_of(after)
    if rendered != dict(wanted):
        added = {key: value for key, value in rendered.items() if written.get(key) != value}
        by_build = f"; the build adds {shown(added)} beyond what {where} holds" if added else ""
        raise RenderMismatch(f"{where}: the rendered Service selects {shown(rendered)}, not {shown(wanted)}"
                             f"{by_build}", hint="the selector is also set elsewhere (commonLabels, labels with "
                                                 "includeSelectors, a base or another patch): edit the plan's "
                                                 "effective selectors or point git.path at the layer that sets it")
    before = {_identity(doc, namespace): doc for doc in current}
    now = {_identity(doc, namespace): doc for doc in candidate}
    key = _identity(after, namespace)
    changed = sorted(f"{kind}/{obj}" for ident in before.keys() | now.keys() if ident != key
                     and before.get(ident) != now.get(ident) for _, kind, _, obj in [ident])
    if changed or _without_selector(before.get(key)) != _without_selector(after):
        what = ", ".join(changed) if changed else f"Service/{name} beyond its selector"
        raise RenderMismatch(f"{where}: the edit changes more than the selector in the rendered output: {what}",
                             hint="git.path is read by more than the Service's selector; point it at the layer "
                                  "that sets only the selector")


def _without_selector(doc: Mapping[str, Any] | None) -> Any:
    if doc is None:
        return None
    spec = {key: value for key, value in (doc.get("spec") or {}).items() if key != "selector"}
    return {**doc, "spec": spec}
