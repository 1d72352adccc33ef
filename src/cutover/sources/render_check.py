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

__all__ = ["RenderMismatch", "check", "service", "shown", "workload"]


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


def workload(current: Sequence[Mapping[str, Any]], candidate: Sequence[Mapping[str, Any]], *, kind: str, name: str,
             field: tuple[str, ...], wanted: str | None, where: str) -> bool:
    """The render check of a free or a restore (docs/capacity.md): in what ArgoCD will apply, the workload `kind/name`
    holds `wanted` at `field` (None: not checked, a restore writes back what the file held) and nothing else differs.
    False when the render holds no such workload (it is another Application's): not checked."""
    def found(docs: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        return [doc for doc in docs if doc.get("kind") == kind and (doc.get("metadata") or {}).get("name") == name]

    after, before = found(candidate), found(current)
    if not after and not before:
        return False
    if len(after) != 1 or len(before) != 1:
        raise RenderMismatch(f"{where}: expected one {kind} {name} in the rendered output, found {len(after)}",
                             hint="name the workload the build renders once (backends.<name>.workload)")
    value = _at(after[0], field)
    if wanted is not None and str(value) != wanted:
        raise RenderMismatch(f"{where}: the rendered {kind} {name} holds {'.'.join(field)} = {value!r}, not "
                             f"{wanted!r}: the build sets it elsewhere", hint="another layer sets this field (a "
                             "kustomization `replicas:` entry, a patch): point backends.<name>.workload.path at it")
    others = [doc for doc in candidate if doc is not after[0]] != [doc for doc in current if doc is not before[0]]
    if others or _without(after[0], field) != _without(before[0], field):
        raise RenderMismatch(f"{where}: the edit changes more than {kind} {name}'s {'.'.join(field)} in the rendered "
                             "output", hint="the workload's file is read by more than that field; point "
                                            "backends.<name>.workload.path at the layer that sets only it")
    return True


def _at(doc: Mapping[str, Any], field: tuple[str, ...]) -> Any:
    node: Any = doc
    for key in field:
        node = node.get(key) if isinstance(node, Mapping) else None
    return node


def _without(doc: Mapping[str, Any], field: tuple[str, ...]) -> Any:
    if not field or not isinstance(doc, Mapping):
        return doc
    head, rest = field[0], field[1:]
    if not rest:
        return {key: value for key, value in doc.items() if key != head}
    return {**doc, head: _without(doc.get(head) or {}, rest)}
