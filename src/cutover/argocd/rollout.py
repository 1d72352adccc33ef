"""A fleet's rollout as ArgoCD records it (docs/fleet.md), read for `cutover status --fleet`: the ApplicationSet's
progressive sync status, one entry per generated Application (`status.applicationStatus`: its step, and Waiting,
Pending, Progressing or Healthy, argo-cd v3.5 `applicationset/progressivesync`), beside each Application's own sync
and health and what cutover's hooks said in its last operation (`operationState.syncResult.resources`: a hook's phase
and message, which ArgoCD takes from the hook's Job: cutover's outcome line). Pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

__all__ = ["ClusterStep", "earlier_steps", "steps_of"]


@dataclasses.dataclass(frozen=True)
class ClusterStep:
    application: str
    step: str  # the RollingSync step, "1" first
    status: str  # the ApplicationSet's: Waiting | Pending | Progressing | Healthy
    message: str
    revision: str | None  # the revision the step syncs
    sync: str | None  # the Application's sync status: Synced | OutOfSync
    health: str | None
    operation: str | None  # its last operation's phase
    hooks: tuple[tuple[str, str, str], ...] = ()  # cutover's hooks of that operation: name, phase, message

    def said(self) -> str:
        revision = f" {self.revision[:12]}" if self.revision else ""
        state = ", ".join(part for part in (self.sync, self.health) if part) or "not synced yet"
        hooks = "; ".join(f"{name} {phase}" + (f": {message}" if message else "") for name, phase, message in
                          self.hooks)
        return (f"{self.application}: step {self.step} {self.status}{revision} ({state}"
                + (f"; last sync {self.operation}" if self.operation else "") + ")"
                + (f" — {hooks}" if hooks else "") + (f" [{self.message}]" if self.message else ""))

    def as_data(self) -> dict[str, Any]:
        return {"application": self.application, "step": self.step, "status": self.status, "message": self.message,
                "revision": self.revision, "sync": self.sync, "health": self.health, "operation": self.operation,
                "hooks": [{"name": name, "phase": phase, "message": message} for name, phase, message in self.hooks]}


def steps_of(applicationset: Mapping[str, Any], applications: Mapping[str, Mapping[str, Any]]) -> list[ClusterStep]:
    """One line per Application of the ApplicationSet, in step order; `applications` by name (one missing: not
    made yet)."""
    found = []
    for entry in (applicationset.get("status") or {}).get("applicationStatus") or ():
        name = str(entry.get("application") or "")
        app = applications.get(name) or {}
        status = app.get("status") or {}
        operation = status.get("operationState") or {}
        resources = (operation.get("syncResult") or {}).get("resources") or ()
        hooks = tuple((str(r.get("name")), str(r.get("hookPhase") or r.get("status") or "?"),
                       str(r.get("message") or "")) for r in resources
                      if isinstance(r, Mapping) and r.get("hookType") and str(r.get("name", "")).startswith("cutover-"))
        revisions = entry.get("targetRevisions") or ()
        found.append(ClusterStep(
            application=name, step=str(entry.get("step") or "?"), status=str(entry.get("status") or "?"),
            message=str(entry.get("message") or ""), revision=str(revisions[0]) if revisions else None,
            sync=(status.get("sync") or {}).get("status"), health=(status.get("health") or {}).get("status"),
            operation=operation.get("phase"), hooks=hooks))
    return sorted(found, key=lambda step: (_number(step.step), step.application))


def _number(step: str) -> int:
    return int(step) if step.isdigit() else 1 << 30


def earlier_steps(applicationset: Mapping[str, Any], application: str) -> tuple[str, ...] | None:
    """The Applications of the steps before `application`'s, as the ApplicationSet's RollingSync orders them
    (`status.applicationStatus[].step`); None when it does not step that Application (another strategy, or not one
    of its Applications yet). The gate of a later step waits for these (docs/fleet.md, "The order of the steps")."""
    if ((applicationset.get("spec") or {}).get("strategy") or {}).get("type") != "RollingSync":
        return None
    entries = [entry for entry in (applicationset.get("status") or {}).get("applicationStatus") or ()
               if isinstance(entry, Mapping)]
    mine = next((str(entry.get("step") or "") for entry in entries if entry.get("application") == application),
                None)
    if mine is None or not mine.isdigit():  # not one of its Applications yet, or in no step (RollingSync says -1)
        return None
    return tuple(sorted(str(entry.get("application")) for entry in entries
                        if entry.get("application") and _number(str(entry.get("step") or "")) < int(mine)))
