"""What each command found or did, as typed results; `outcome` turns them into the lines people and machines read.

The phases and the read-only commands return these (never text); only the CLI renders them. Pure data.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from cutover.core.proofs import Fitted, PodProof
from cutover.core.views import PodView


@dataclasses.dataclass(frozen=True)
class Proven:
    """A backend's Ready pods answered every served name."""

    backend: str
    pods: tuple[PodView, ...]
    proofs: tuple[PodProof, ...]
    waited: float  # seconds from the start of the wait to the last proof
    proven_at: datetime
    fitness: Fitted | None = None  # docs/fitness.md, when verify.fitness is set

    def as_data(self) -> dict[str, object]:
        return {**({"fitness": self.fitness.as_data()} if self.fitness else {}),
            "backend": self.backend,
            "provenAt": self.proven_at.isoformat(),
            "waitedSeconds": round(self.waited, 3),
            "pods": [{"name": proof.pod, "address": proof.address, "method": proof.method,
                      "names": list(proof.proven)} for proof in self.proofs],
        }


@dataclasses.dataclass(frozen=True)
class Gated:
    """PreSync: `revision` (shown short) changes the selector or not; when it switches to a backend of the
    plan, that backend's proof."""

    revision: str
    changed: bool
    backend: str | None = None
    proven: Proven | None = None
    after: str | None = None  # a fleet's recreate, its first commit: the backend it stops (`backend`: it starts)


@dataclasses.dataclass(frozen=True)
class Held:
    on: str
    commit: str
    author: str = ""


@dataclasses.dataclass(frozen=True)
class Advanced:
    """Git holds `to`'s selector: committed now, or already (by an earlier run of the same cutover)."""

    source: str | None
    to: str
    committed: bool
    sha: str
    url: str | None
    id: str
    toward: str | None = None  # the hop to a bridge (docs/capacity.md): where the path goes on to


@dataclasses.dataclass(frozen=True)
class Freed:
    """A hop of a handoff (docs/capacity.md): `backend` drained and its workload freed in Git, to make room for
    `to`; under strategy recreate the gap opens once ArgoCD applies it."""

    backend: str
    to: str
    committed: bool
    sha: str
    url: str | None
    drained: dict[str, object]  # the drain's measure (`flows.drain.Drained.as_data`)
    dry_run: bool = False  # --dry-run: what would be freed; nothing drained or written


@dataclasses.dataclass(frozen=True)
class Restored:
    """A hop of a handoff: `backend`'s workload written back in Git as it was before its free."""

    backend: str
    to: str
    committed: bool
    sha: str
    url: str | None
    value: str | None  # the value written back (None: the field removed, as before the free)
    dry_run: bool = False  # --dry-run: what would be restored; nothing written


@dataclasses.dataclass(frozen=True)
class WouldAdvance:
    """--dry-run: proven now, and the exact diff that would be committed; nothing written."""

    source: str | None
    to: str
    proven: Proven
    diff: str
    changed: bool


@dataclasses.dataclass(frozen=True)
class Awaiting:
    """Git selects `to`; ArgoCD has yet to apply it (a refresh was asked for). With `restore`: Git restored `to`'s
    workload in that commit, which the sync of `syncing` does not hold."""

    to: str
    restore: str | None = None
    syncing: str | None = None


@dataclasses.dataclass(frozen=True)
class Unowned:
    """The revision (shown short) selects no backend of the plan: not cutover's to `what` (gate, verify)."""

    revision: str
    what: str


@dataclasses.dataclass(frozen=True)
class Dark:
    """A fleet's recreate, its first commit synced (docs/fleet.md): `backend`, which the Service still selects,
    stopped and `to` started; the name unanswered until the fleet's next commit switches to `to`."""

    revision: str
    backend: str
    to: str


@dataclasses.dataclass(frozen=True)
class Verified:
    backend: str
    endpoints: tuple[str, ...]
    gap: float | None = None  # seconds from the source freed to this verification (handoff.strategy recreate)
    retired: Freed | None = None  # handoff.retire: the backend the switch left, drained and freed now
    same_object: bool = True  # checked against the commit's record of the Service (a fleet's sync has none)


@dataclasses.dataclass(frozen=True)
class Completed:
    """`run` and `rollback`: committed (or found in Git), applied by ArgoCD, verified."""

    verified: Verified
    commit: str
    to: str


def runs_on(waiting: tuple[str, ...]) -> str:
    """What a failed operation that still waits for a health means: SyncFail's line and its hint say it alike."""
    return f"the operation runs on until {', '.join(waiting)} is healthy, and no other sync starts meanwhile"


@dataclasses.dataclass(frozen=True)
class SyncFailed:
    message: str
    serving: str | None
    rollback_commit: str | None = None  # Git went back to what the Service still selects
    # what the failed operation still waits for to be healthy: it runs on until then, and no other sync starts
    waiting: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class Audited:
    """`cutover audit`: what it found, and what it did (took the hop after one ArgoCD synced without hooks, verified a
    switch no hook verified, or checked the live backend's names)."""

    state: str  # continued | verified | checked | skipped
    backend: str | None
    detail: str
    commit: str | None = None
    retired: Freed | None = None  # handoff.retire: the backend the switch left, drained and freed by this audit


@dataclasses.dataclass(frozen=True)
class Nudged:
    """`cutover nudge`: where ArgoCD stood with the hook's commit when the nudge ended."""

    state: str  # taken | nothing | running | not_taken
    commit: str | None  # the plan's newest cutover commit
    waited: float  # seconds from the nudge's start
    refreshes: int  # refreshes it asked for


@dataclasses.dataclass(frozen=True)
class Status:
    """The state `cutover status` shows: plain data, as `--output json` prints it."""

    state: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Shown:
    """`cutover plan`: the status, whether the target is provable now, and the diff that would be committed."""

    status: Status
    proven: Proven | None
    unprovable: dict[str, Any] | None  # error, cause, hint and exitCode when the target is not provable now
    diff: dict[str, Any] | None  # changed, patch, version; or error, cause, hint; None without a Git host
    path: str
    drain: tuple[str, ...] = ()  # drain-safety warnings for the backend the switch leaves (docs/capacity.md)
    jobs: tuple[str, ...] = ()  # the hook Jobs' deadline and ArgoCD's sync timeout against the plan's path
    sync_timeout: float = 0.0  # seconds: the least ArgoCD sync timeout (other than none) this plan's syncs need
    sync_order: tuple[dict[str, Any], ...] = ()  # cause, message, hint, refuse: what in the render delays a hop

    @property
    def blocked(self) -> dict[str, Any] | None:
        """Why the plan cannot go ahead now (`cutover plan` is a pre-flight gate): the render holds what no hop
        of it survives (exit 2), or a switch is pending, the Service not on the target, and the target is not
        provable now; None when it can, or when nothing is pending."""
        refused = next((found for found in self.sync_order if found["refuse"]), None)
        if refused is not None:
            return {"error": refused["message"], "cause": refused["cause"], "hint": refused["hint"], "exitCode": 2}
        pending = self.status.state.get("liveBackend") != self.status.state.get("target")
        if self.started_by_handoff:
            return None
        return self.unprovable if pending and self.proven is None else None

    @property
    def started_by_handoff(self) -> bool:
        """The target is stopped in Git and the strategy starts it (recreate, bridge): no pod to prove yet is how
        such a handoff begins, not a reason to stop (issue 54's C7)."""
        handoff = self.status.state.get("handoff") or {}
        return self.proven is None and handoff.get("strategy") in ("recreate", "bridge") and \
            self.status.state.get("target") in (handoff.get("freed") or ())


@dataclasses.dataclass(frozen=True)
class Diffed:
    """`cutover diff`: the patch of the edit on a local file (empty when nothing changes)."""

    file: str
    patch: str
    selector: str  # the selector written, as k=v,k=v
    selector_path: str


Result = Proven | Gated | Held | Advanced | Freed | Restored | WouldAdvance | Awaiting | Verified | Completed | \
    SyncFailed | Audited | Nudged | Status | Shown | Diffed | Unowned | Dark
