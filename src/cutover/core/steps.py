"""The pure core's vocabulary: what one step of a phase read (`Observed`, with what Git says of the workloads,
`Workloads`) and the steps the decisions answer with (`Step`; the audit's `Check`, `Continue`, `Stalled`; the
gate's `Gate`; SyncFail's `GiveBack`). Plain data: the rules that choose them are `decide` (the switch), `hops`
(a handoff's path), `audit_rules` and `commits` (what cutover's commits say). Called by the phases, which tell
each step's story."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from cutover.core.views import ApplicationView, Commit, LeaseView, ServiceView


@dataclasses.dataclass(frozen=True)
class Workloads:
    """What Git says of the backends' workloads (docs/capacity.md): which are freed now, and the newest cutover
    commit that freed or restored each (read from the workload's own file)."""

    freed: frozenset[str] = frozenset()
    steps: Mapping[str, Commit] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Observed:
    """What one step of a phase read, once."""

    live: ServiceView
    in_git: Mapping[str, str]  # the selector in Git at the branch head
    last: Commit | None  # the newest cutover commit of this plan that switched the selector
    application: ApplicationView | None = None
    lease: LeaseView | None = None
    verification_failed: bool = False  # the applied switch did not check out (set after `Verify`)
    workloads: Workloads = Workloads()
    hold_lifted: str | None = None  # the rollback commit whose hold the plan's target ended (the Lease's note)


@dataclasses.dataclass(frozen=True)
class Hold:
    """A rollback holds the Service on `on` while the plan still names the target rolled back from."""

    on: str
    commit: str
    author: str = ""  # who made the hold's commit: named, since anyone who can push can write the trailer


@dataclasses.dataclass(frozen=True)
class Advance:
    """Wait for `to`, prove it, commit its selector (and, on a rollback, hold there). On a path through a bridge
    (docs/capacity.md) `bridge` names it: `to` is the bridge itself when `toward` (where the path goes on to) is
    given, proven on handoff.bridgeNames; else the hop from the bridge to the end of the path."""

    source: str | None
    to: str
    hold: str | None = None
    bridge: str | None = None
    toward: str | None = None


@dataclasses.dataclass(frozen=True)
class AwaitApply:
    """Git selects `to`; ArgoCD has yet to apply it. With `restore`: Git restored `to`'s workload in that commit of
    ours, which the sync running now does not hold (`restore_unsynced`); the sync of it starts the pods."""

    to: str
    restore: str | None = None


@dataclasses.dataclass(frozen=True)
class Verify:
    """The Service selects `backend` as Git does: check the switch through the Service."""

    backend: str


@dataclasses.dataclass(frozen=True)
class RollBack:
    """The switch failed: commit `to`'s selector by the same guarded path, and hold there."""

    to: str


@dataclasses.dataclass(frozen=True)
class Restore:
    """The backend a switch goes to is freed in Git: restore its workload first, by a commit, and let the next step
    wait for its pods. Under strategy recreate the source is drained and freed in the same hop (`free`): ArgoCD then
    applies both at once, and waits for the target's health with the source's card given back (a target scaled up
    beside a source that holds its card would keep the sync Progressing, and PostSync would never run)."""

    backend: str
    to: str
    hold: str | None = None
    free: str | None = None
    drain: bool = True  # the backend freed served the Service: drain it first


@dataclasses.dataclass(frozen=True)
class Free:
    """Make room for `to`: drain `backend` (unless it never served) and free it. Strategy recreate: the target fits
    only once the source is gone; strategy bridge: the bridge carries the Service (verified first)."""

    backend: str
    to: str
    serving: bool = True


@dataclasses.dataclass(frozen=True)
class Nothing:
    reason: str


@dataclasses.dataclass(frozen=True)
class Check:
    """`cutover audit`: the switch is verified already; does the live backend still prove its names? `stalled`: and
    then, with the live backend serving, a handoff step ArgoCD failed to apply, which the audit reports."""

    backend: str
    stalled: Stalled | None = None


@dataclasses.dataclass(frozen=True)
class Stalled:
    """`cutover audit`: ArgoCD's sync of cutover's newest commit ended Failed or Error and nothing applied it since.
    ArgoCD's automated sync does not try a revision it failed again (retry.limit counts within one operation), so
    without a person the Service keeps the old selector while Git holds the new one, or (`step`: "free vllm",
    "restore candle") the handoff waits for a workload Git changed and the cluster did not. `waiting`: the
    operation that failed still runs, on a wait that may never end (`ApplicationView.failed_waiting`): what ArgoCD
    says it waits for."""

    reason: str
    commit: str
    step: str | None = None
    waiting: str | None = None


@dataclasses.dataclass(frozen=True)
class Continue:
    """`cutover audit`: ArgoCD synced cutover's hop `commit` without running its hooks, so no PostSync took the next
    hop of the handoff (`synced_without_hooks`): the audit takes `step`, as that PostSync would have."""

    step: Advance | Restore | Free
    commit: str


@dataclasses.dataclass(frozen=True)
class Gate:
    """PreSync: the revision being synced switches the Service to `backend`; prove it before ArgoCD applies it."""

    backend: str


Step = Hold | Advance | Restore | Free | AwaitApply | Verify | RollBack | Nothing


@dataclasses.dataclass(frozen=True)
class GiveBack:
    """A gap is open (recreate's; a bridge's with names unanswered) and the handoff failed: free `to` (the target,
    which never served) and restore `source`, holding the Service on it (under bridge, as a rollback's restore: the
    switch back from the bridge follows)."""

    source: str
    to: str
