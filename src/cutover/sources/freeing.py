"""Freeing and restoring a backend through Git (docs/capacity.md): which file and which one field hold what a
backend's workload runs, the value that frees it, and the edit that writes back exactly what was there. Pure: the
edits are `field_edit`'s, guarded the same way.

| workload | file | field | freed |
|---|---|---|---|
| Deployment, StatefulSet | the object's own file (or a patch of it) | `spec.replicas` | `0` |
| Deployment, StatefulSet | a `kustomization.yaml` | its `replicas:` entry named for the object, `count` | `0` |
| Deployment, StatefulSet | a Helm values file (`valuesKey`) | that key | `0` |
| InferenceService | the object's file | `metadata.annotations["serving.kserve.io/stop"]` | `"true"` |

KServe stops a predictor while the annotation is "true" (its Deployment, Service and pods removed, the GPUs freed)
and starts it again when the annotation goes or reads "false"; a Deployment frees its GPUs at zero replicas.
"""

from __future__ import annotations

import dataclasses
from pathlib import PurePosixPath

from cutover.core.trailers import Trailers
from cutover.plan import Backend, GitDocument, Workload
from cutover.sources.field_edit import FieldEdit, FieldRef, Item, Value, set_field

KSERVE_STOP = "serving.kserve.io/stop"
_KUSTOMIZATIONS = ("kustomization.yaml", "kustomization.yml", "Kustomization")
ABSENT = "absent"  # Cutover-Previous for a field the file did not hold


@dataclasses.dataclass(frozen=True)
class Freeing:
    """Where a backend's workload is freed: the file, the field in it, and the value that frees it."""

    backend: str
    path: str
    field: FieldRef
    freed: str | int


def freeing(backend: Backend, *, default_path: str, namespace: str | None = None) -> Freeing:
    """The field that frees `backend` (its `workload`), in its file (`workload.path`, else `default_path`);
    `namespace`, the Service's: the only one its document may name."""
    workload = backend.workload
    if workload is None:
        raise ValueError(f"backend {backend.name} names no workload")  # the plan reader requires one where freed
    path = workload.path or default_path
    field = dataclasses.replace(_field(workload, path), namespace=namespace)
    return Freeing(backend.name, path, field, "true" if workload.kind == "InferenceService" else 0)


def _field(workload: Workload, path: str) -> FieldRef:
    if workload.kind == "InferenceService":
        return FieldRef(GitDocument("InferenceService", workload.name), ("metadata", "annotations", KSERVE_STOP))
    if workload.values_key is not None:
        return FieldRef(GitDocument("", ""), tuple(workload.values_key.split(".")), values=True)
    if PurePosixPath(path).name in _KUSTOMIZATIONS:
        return FieldRef(GitDocument("", ""), ("replicas", Item("name", workload.name), "count"))
    return FieldRef(GitDocument(workload.kind, workload.name), ("spec", "replicas"))


def rendered_field(workload: Workload) -> tuple[str, ...]:
    """Where the rendered object holds what frees it, whichever file sets it (a `replicas:` entry renders into the
    Deployment's spec.replicas)."""
    if workload.kind == "InferenceService":
        return ("metadata", "annotations", KSERVE_STOP)
    return ("spec", "replicas")


def free(text: str, where: Freeing, *, source: str = "file") -> FieldEdit:
    """The free: the field set to the freeing value; `old` and `created` are what the restore will need (they go
    into the commit's trailers, `previous` and `added`)."""
    return set_field(text, where.field, where.freed, source=source)


def restore(text: str, where: Freeing, *, previous: str | None, added: int, source: str = "file") -> FieldEdit:
    """Exactly what was there before the free: its value (a number stays a number), or no field at all, with the
    mappings the free added on the way to it."""
    value: Value = None
    if previous is not None and previous != ABSENT:
        value = int(previous) if isinstance(where.freed, int) and previous.lstrip("-").isdigit() else previous
    return set_field(text, where.field, value, source=source, drop=added)


@dataclasses.dataclass(frozen=True)
class PutBack:
    """What a restore writes: the value (or ABSENT), the mappings the free added, and whether a free commit recorded
    them (False: a workload committed stopped, started for the first time)."""

    value: str
    added: int
    recorded: bool


def put_back(where: Freeing, freed_by: Trailers | None, *, replicas: int) -> PutBack:
    """Exactly what the free commit's trailers recorded; for a workload no cutover commit freed (committed stopped,
    to be started by the handoff), `replicas` for a replica count and the stop annotation `"false"` for an
    InferenceService (KServe's own word for running: one line changes, and the person's `annotations:` mapping,
    its comments and layout stay, where removing its only key would leave it empty)."""
    if freed_by is not None and freed_by.step == "free" and freed_by.previous and \
            _plausible(where, freed_by.previous, freed_by.added):
        return PutBack(freed_by.previous, int(freed_by.added or 0), True)
    return PutBack("false" if isinstance(where.freed, str) else str(replicas), 0, False)


MAX_REPLICAS = 1000  # a restored count above this is no engine's: the trailer is not believed
MAX_ADDED = 8  # the free adds at most the mappings on the way to the field (spec.replicas, an annotation, a values key)


def _plausible(where: Freeing, previous: str, added: str | None) -> bool:
    """Whether a free commit's `Cutover-Previous` (and `Cutover-Added`) can be what the field held: a trailer is
    text anyone who may commit could write, and a restore writes it back. A replica count from 0 to MAX_REPLICAS,
    the stop annotation's "true" or "false", or no field at all; otherwise the restore starts the workload as one
    committed stopped (`put_back`'s default)."""
    if added is not None and (not added.isdigit() or int(added) > MAX_ADDED):
        return False
    if previous == ABSENT:
        return True
    if isinstance(where.freed, str):
        return previous in ("true", "false")
    return previous.isdigit() and int(previous) <= MAX_REPLICAS


def previous_of(edit: FieldEdit) -> str:
    """What Cutover-Previous records for a free."""
    return ABSENT if edit.old is None else edit.old
