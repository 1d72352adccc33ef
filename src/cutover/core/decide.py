"""Pure decisions: given what a step observed (plain data), what to do next. No I/O, no clock.

The phases read the world once per step into an `Observed` (the live Service, the selector in Git, the last
cutover commit's trailers, the Application) and ask `next_step`; everything they do is the answer's story.

docs/guarantees.md, one place each:
  #1  commit only on fresh proof ...... `gate.judge`, asked by the writer right before each write, and
                                           `gate.foreign`: a selector that picks another backend's pods is final
  #2  only the selector changes ....... `yaml_edit.guard`, run by every source's edit before anything is written
  #3  no cluster write but Events, the Lease and the refresh: `CLUSTER_WRITES`; no `Step` writes the Service
  #4  one cutover per Service ......... `lease_rules.judge` on the Service's Lease
  #5  a re-run never commits twice .... `git_step` (ALREADY: Git holds it), `held_by` (a rollback's hold),
                                           `rollback_to` (a rollback already in Git is finished, not redone),
                                           `Workloads` (a handoff's free or restore already in Git is not made
                                           again; `restore_hold` after a gap was exceeded)
Called by the phases and by tests/core/test_decide.py (a row per rule) and tests/core/test_invariants.py.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from cutover.core.proofs import PodProof
from cutover.core.trailers import Trailers
from cutover.core.views import ApplicationView, Commit, LeaseView, ServiceView
from cutover.errors import InvalidInput
from cutover.plan import Plan

# docs/guarantees.md #3: what cutover ever writes in a cluster (cluster.Cluster has no other write).
CLUSTER_WRITES = ("events", "leases", "applications: the refresh annotation and the notice")


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


# --- what to do next -----------------------------------------------------------------------------------------


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


def next_step(observed: Observed, plan: Plan, *, to: str | None = None, hold: str | None = None) -> Step:
    """PostSync's choice (`to` None), or an explicit run's (`to` given; `hold` given for a rollback).

    In order: a failed verification rolls back (rollback.auto; a rollback is never rolled back again); a
    rollback's hold stops PostSync (an explicit run is how a person lifts it); Git not at the backend (or a
    rollback to finish): advance, restoring the backend first where Git holds it freed; Git there but the Service
    not yet: wait for ArgoCD; both there: verify."""
    explicit, to = to is not None, to or plan.target
    if observed.verification_failed:
        return _after_failed_verification(observed, plan, to=to, hold=hold)
    held = None if explicit else _hold(observed, plan)
    if held is not None:
        return held
    going = None if explicit else rolling_back(observed, plan)
    if going is not None:  # a rollback that restored its backend first: the switch back is next
        to = hold = going
    bridged = _bridged(observed, plan, to=to, hold=hold, explicit=explicit)
    if bridged is not None:
        return bridged
    wanted = dict(plan.backends[to].selector)
    if dict(observed.in_git) != wanted or hold is not None:
        return _toward(observed, plan, to=to, hold=hold, explicit=explicit)
    if dict(observed.live.selector) != wanted:
        return AwaitApply(to)
    return Verify(to)


def _toward(observed: Observed, plan: Plan, *, to: str, hold: str | None, explicit: bool) -> Step:
    """Git not at `to`: the switch, or first the restore of `to`'s workload."""
    source = backend_of(plan, observed.in_git)
    if to in observed.workloads.freed:  # a backend freed in Git runs no pods to wait for: its workload comes back first
        return Restore(to, to, hold, _swapped(observed, plan, source, to))
    restore = None if explicit else restore_unsynced(observed, to)
    return Advance(source, to, hold) if restore is None else AwaitApply(to, restore.sha)


def _after_failed_verification(observed: Observed, plan: Plan, *, to: str, hold: str | None) -> RollBack | Nothing:
    if hold is not None or not plan.rollback_auto:
        return Nothing("verification failed; no rollback (" + ("a rollback is not rolled back" if hold else
                                                                "rollback.auto is off") + ")")
    if observed.last is None:  # the first sync of an install, or a switch made by hand: not ours to undo
        return Nothing("verification failed; no rollback (no cutover commit switched the Service)")
    return RollBack(previous_backend(plan, to, observed.last))


def _swapped(observed: Observed, plan: Plan, source: str | None, to: str) -> str | None:
    """recreate: the source freed in the hop that restores the target (break before make, consented to)."""
    if plan.handoff.strategy != "recreate" or source is None or source == to:
        return None
    return None if source in observed.workloads.freed or plan.backends[source].workload is None else source


def _bridged(observed: Observed, plan: Plan, *, to: str, hold: str | None, explicit: bool) -> Step | None:
    """handoff.strategy bridge (docs/capacity.md): the path source → bridge → `to`, one hop per step, each decided
    from Git. From a running source: switch to the bridge. On the bridge: once ArgoCD applied it, free the backend
    at the other end of the path (restoring `to` in the same commit when Git holds it freed), then switch to `to`.
    Going back to where the path began while it still runs is one switch. A rollback's path (its hop to the bridge
    holds) is finished by PostSync too. None: no bridge in this step (the other rules decide)."""
    bridge = plan.handoff.bridge
    if plan.handoff.strategy != "bridge" or bridge is None:
        return None
    git, hop = backend_of(plan, observed.in_git), bridge_hop(observed.last, plan)
    if git == bridge and hop is not None:
        if not explicit and hop.trailers.hold:
            to = hold = hop.trailers.hold
        return None if to == bridge else _on_bridge(observed, plan, hop, to=to, hold=hold)
    if git is None or git in (to, bridge) or to == bridge:
        return None
    if plan.backends[git].workload is None or git in observed.workloads.freed:
        return None
    return Advance(git, bridge, hold, bridge=bridge, toward=to)


def _on_bridge(observed: Observed, plan: Plan, hop: Commit, *, to: str, hold: str | None) -> Step:
    """Git selects the bridge, by `hop`: the next hop of the path to `to`."""
    bridge, freed = hop.trailers.to or "", observed.workloads.freed
    if dict(observed.live.selector) != dict(plan.backends[bridge].selector):
        return AwaitApply(bridge)
    origin = hop.trailers.source
    other = (hop.trailers.toward if to == origin else origin) or ""
    if to == origin and to not in freed:
        return Advance(bridge, to, hold, bridge=bridge)  # back where the path began: it still runs
    if other in plan.backends and other != to and plan.backends[other].workload is not None and other not in freed:
        served = other == origin  # the other end that never had the Service is not drained
        return Restore(to, to, hold, free=other, drain=served) if to in freed else Free(other, to, served)
    return Restore(to, to, hold) if to in freed else Advance(other, to, hold, bridge=bridge)


def path_source(observed: Observed, plan: Plan) -> str | None:
    """Where the cutover a hop belongs to came from: the backend Git selects, or on a bridge the one the path left
    (so that every hop of a path names one cutover, one Slack thread)."""
    git, hop = backend_of(plan, observed.in_git), bridge_hop(observed.last, plan)
    return hop.trailers.source if hop is not None and git == plan.handoff.bridge else git


def bridge_hop(last: Commit | None, plan: Plan) -> Commit | None:
    """The newest switch, when it was the hop to the plan's bridge on a path elsewhere."""
    bridge = plan.handoff.bridge
    if last is None or bridge is None or last.trailers.to != bridge or last.trailers.bridge != bridge:
        return None
    return last if last.trailers.toward else None


def _hold(observed: Observed, plan: Plan) -> Hold | None:
    """A rollback's hold (on the selector's commit), or a restore's after a gap was exceeded (on the workload's)."""
    held = held_by(observed.last, plan)
    if held is not None and observed.last is not None:
        return Hold(held, observed.last.sha, observed.last.author)
    restored = restore_hold(observed, plan)
    if restored is not None and restored.trailers.hold:
        return Hold(restored.trailers.hold, restored.sha, restored.author)
    return None


def audit_step(observed: Observed, plan: Plan, *, verified: str | None,
               now: datetime) -> Verify | Check | Continue | Stalled | Nothing:
    """`cutover audit` (docs/sources.md), for syncs that ran no hook (argo-cd#22795, #25475, #27875): a hop of a
    handoff that ArgoCD synced without its hooks is followed by the next hop (`Continue`); a switch ArgoCD applied
    that no PostSync verified (`verified`: the cutover commit last verified) is verified now; otherwise the live
    backend's names are checked. Git and the Service not agreeing is ArgoCD's to finish, and so is a cutover commit
    ArgoCD has yet to apply (`argocd_behind`: a free or a restore leaves the selector as it is), unless ArgoCD's
    sync of that commit failed (`Stalled`: nothing would apply it; a free's or a restore's is said after the live
    backend's check, `Check.stalled`); a selector of no backend of the plan is not ours. A person's commit synced
    without hooks starts nothing here: the audit finishes what cutover began."""
    live, git = backend_of(plan, observed.live.selector), backend_of(plan, observed.in_git)
    if live is None or git is None:
        return Nothing("the Service or Git selects no backend of the plan: not ours to audit")
    stalled = argocd_gave_up(observed)
    if live != git:
        return stalled or Nothing(f"ArgoCD has yet to apply {git} (the Service selects {live})")
    behind = argocd_behind(observed, now=now)
    if behind is not None:
        return Nothing(behind)
    left = _hop_left(observed, plan)
    if left is not None:
        return left
    # A free or a restore whose sync failed leaves the selector as Git has it (as does any commit whose failed
    # operation runs on): the live backend is checked first (a gap a Terminate left open is its alert, with its
    # hint), then the step ArgoCD will not apply again by itself.
    step_stalled = stalled if stalled is not None and (stalled.step or stalled.waiting) else None
    last = observed.last
    if git == plan.handoff.bridge and bridge_hop(last, plan) is not None:
        # its hops verify it on handoff.bridgeNames, never the audit on every served name (the bridge serves only
        # those): a stalled step is said once the bridge is checked on them
        return Check(live, step_stalled) if step_stalled is not None else \
            Nothing(f"a handoff through the bridge {git} is under way: its hops verify it")
    unverified = last is not None and last.trailers.to == git and last.sha != verified
    return Verify(git) if unverified else Check(live, step_stalled)


# How long after a cutover commit an Application with no operation since may still be about to sync it: ArgoCD
# polls Git every 3 minutes (timeout.reconciliation) plus up to 1 minute of jitter when no refresh or webhook
# tells it sooner. Past this, a commit no operation followed belongs to what ArgoCD leaves as it is (a workload in
# another Application, a commit that changed nothing it renders): the audit goes on.
APPLY_WINDOW = timedelta(minutes=10)


def argocd_behind(observed: Observed, *, now: datetime) -> str | None:
    """Why ArgoCD may not have applied all that Git holds of this plan (None: it has, as far as the Application
    tells). A workload step (a free, a restore) changes no selector: between its commit and ArgoCD's sync the live
    backend may have no pods, and an audit checking it then fails for nothing, which ArgoCD 3.x's CronJob health
    turns into a Degraded resource that fails the very sync bringing the pods back. The newest cutover commit is
    applied once an operation began after it, or the Application compared that very commit. OutOfSync alone says
    nothing: many Applications stay OutOfSync for a field someone else's controller sets, and the audit would
    never run."""
    app = observed.application
    if app is None or app.failed_waiting:  # it applies nothing more until a person ends it: the stall says so
        return None
    if app.operation_phase in ("Running", "Terminating"):
        return f"ArgoCD is syncing {(app.operation_revision or '?')[:12]}"
    newest = newest_commit(observed)
    if newest is None or newest.date is None or app.operation_started is None:
        return None  # no cutover commit to wait for, or an Application no operation ever synced: nothing to tell
    compared = app.hydrator.dry_sha if app.hydrator is not None else app.sync_revision
    if compared == newest.sha or app.operation_started >= newest.date or now - newest.date > APPLY_WINDOW:
        return None
    return f"ArgoCD has yet to apply {newest.sha[:12]} ({newest.title})"


def _hop_left(observed: Observed, plan: Plan) -> Continue | None:
    """The next hop of a handoff whose last hop ArgoCD synced without hooks: no PostSync will take it."""
    unhooked = synced_without_hooks(observed)
    step = next_step(observed, plan) if unhooked is not None else None
    return Continue(step, unhooked.sha) if unhooked is not None and isinstance(step, Advance | Restore | Free) \
        else None


def _ours(observed: Observed) -> list[Commit]:
    """This plan's newest cutover commits: the last switch, and each backend's last free or restore."""
    return [commit for commit in (observed.last, *observed.workloads.steps.values()) if commit is not None]


def newest_commit(observed: Observed) -> Commit | None:
    """The newest cutover commit of this plan: a switch, a free or a restore (by its date in Git; within one second,
    a step's restore, which is pushed after its free)."""
    dated = [commit for commit in _ours(observed) if commit.date is not None]
    return max(dated, key=lambda commit: (commit.date or datetime.min, commit.trailers.step == "restore")) \
        if dated else None


def argocd_gave_up(observed: Observed) -> Stalled | None:
    """Cutover's commit whose sync was the Application's last operation (with the Source Hydrator: the sync of what
    it hydrated of it), when that ended Failed or Error and no commit of ours is newer. A newer revision ArgoCD
    compared since does not matter: one that changes what the Application renders it syncs at once (an operation
    then runs), and one it finds no change in (the manifest-generate-paths annotation) it skips like the failed
    one (controller/appcontroller.go, `alreadyAttemptedSync`). Or an operation that failed and runs on
    (`_runs_on`). The view's revisions are the plan's source's already (`ApplicationView.for_source`)."""
    app = observed.application
    if app is None or app.operation_revision is None:
        return None
    if app.failed_waiting:
        return _runs_on(observed, app, app.operation_revision)
    if app.operation_phase not in ("Failed", "Error"):
        return None
    applied = app.operation_revision if app.hydrator is None else app.hydrator.dry_of(app.operation_revision)
    ours = _ours(observed)
    failed = next((commit for commit in ours if commit.sha == applied), None)
    if failed is None or any(_after(commit, failed) for commit in ours):
        return None
    return Stalled(f"{app.failure()}; ArgoCD does not sync a revision it failed again by itself", failed.sha,
                   _step_label(failed))


def _runs_on(observed: Observed, app: ApplicationView, revision: str) -> Stalled | None:
    """An operation that can only end Failed and runs on (`ApplicationView.failed_waiting`: a resource refused,
    ArgoCD waiting for the rest's health, which may never come) holds back every commit of ours: no sync starts
    while it runs. Said for our newest commit when the operation synced one of ours or began before it (SyncFail's
    way back, committed while it runs); a person's failed revision with all of ours applied is not ours to say."""
    applied = revision if app.hydrator is None else app.hydrator.dry_of(revision)
    newest = newest_commit(observed)
    if newest is None or newest.date is None:
        return None
    synced_ours = any(commit.sha == applied for commit in _ours(observed))
    if not synced_ours and (app.operation_started is None or app.operation_started >= newest.date):
        return None
    waiting = app.operation_message or "the rest of the sync"
    return Stalled(f"{app.failure()}; the operation can only end Failed, still waits on {waiting}, and ArgoCD starts "
                   f"no other sync while it runs", newest.sha, _step_label(newest), waiting)


def _step_label(commit: Commit) -> str | None:
    """"free vllm", "restore candle": a handoff's step; None for a switch."""
    trailers = commit.trailers
    return f"{trailers.step} {trailers.backend}" if trailers.step in ("free", "restore") else None


def synced_without_hooks(observed: Observed) -> Commit | None:
    """The newest cutover commit, when the Application's last operation synced it (and nothing newer) and ran no
    hook: a selective sync, whose hooks ArgoCD skips (controller/sync.go), as it makes the self-heal of a commit
    pushed while the previous sync ran (a hop's own commit, pushed by its PostSync) once it compared that commit
    during the sync (argo-cd#27875; its fix was reverted in 3.4 and 3.5 by #28692). No PostSync then takes the
    next hop. None when one may: a full sync, an operation running or failed (a Terminate leaves a gap for a
    person's next sync, docs/capacity.md)."""
    app = observed.application
    if app is None or app.operation_phase != "Succeeded" or not app.operation_selective:
        return None
    applied = app.hydrator.dry_sha if app.hydrator is not None else app.operation_revision
    ours = _ours(observed)
    synced = next((commit for commit in ours if commit.sha == applied), None)
    if synced is None or any(_after(commit, synced) for commit in ours):
        return None  # a person's commit, or an older one of ours (a newer one is still to sync)
    return synced


def restore_unsynced(observed: Observed, to: str) -> Commit | None:
    """Our commit that restored `to`'s workload, when the sync running now is of an older commit of ours: a hop
    pushes its free and then its restore, and ArgoCD may resolve the branch between the two pushes (seen on
    v3.5.3: the sync of the free, 2 s after the restore was pushed). That sync's PostSync would wait for pods that no
    sync has asked for yet, holding the very operation whose end lets ArgoCD sync the restore. None when ArgoCD's
    operation is not known to run an older commit of ours (a person's commit cannot be ordered: waited for as
    before)."""
    app, restored = observed.application, observed.workloads.steps.get(to)
    if app is None or app.hydrator is not None or app.operation_phase != "Running" or restored is None \
            or restored.trailers.step != "restore":
        return None
    syncing = next((commit for commit in _ours(observed) if commit.sha == app.operation_revision), None)
    return restored if syncing is not None and _pushed_before(syncing, restored) else None


def _pushed_before(commit: Commit, other: Commit) -> bool:
    """By date; within one second (a date's precision) a hop's free is pushed before its restore."""
    if commit.date is None or other.date is None or commit.sha == other.sha:
        return False
    return commit.date < other.date or (commit.date == other.date and commit.trailers.step == "free"
                                          and other.trailers.step == "restore")


def _after(commit: Commit, other: Commit) -> bool:
    return commit.date is not None and other.date is not None and commit.date > other.date


def presync_step(wanted: Mapping[str, str], live: ServiceView, plan: Plan) -> Gate | Nothing:
    """No selector change in the revision: nothing to gate; a change to no backend of the plan: not ours."""
    if dict(wanted) == dict(live.selector):
        return Nothing("no_change")
    target = backend_of(plan, wanted)
    return Nothing("not_ours") if target is None else Gate(target)


@dataclasses.dataclass(frozen=True)
class GiveBack:
    """A recreate's gap is open and the handoff failed: free `to` (the target, which never served) and restore
    `source`, holding the Service on it."""

    source: str
    to: str


def syncfail_step(observed: Observed, plan: Plan, *, tried: Mapping[str, str] | None = None) -> GiveBack | RollBack | \
        Nothing:
    """A failed sync changes nothing, unless a recreate's gap is open (the target never became healthy: the card
    goes back to the source), or rollback.auto and the failed sync held a selector it could not apply: then Git goes
    back to what the Service still selects, so ArgoCD is not left retrying a failing revision.

    `tried` is the selector of the revision whose sync failed (Git's head when unknown). From ArgoCD 3.4 SyncFail
    starts at once when an apply fails beside a running hook, so a PostSync may commit its switch while SyncFail
    runs: that commit was never tried, and rolling it back would undo a proven switch for a failure not its own."""
    serving = backend_of(plan, observed.live.selector)
    wanted = backend_of(plan, observed.in_git if tried is None else tried)
    if serving is not None and gap_opened(observed, plan, source=serving, to=plan.target) is not None:
        return GiveBack(serving, plan.target)
    if not plan.rollback_auto or serving is None or wanted == serving:
        return Nothing("the Service keeps its selector")
    return RollBack(serving)


def rollback_to(observed: Observed, plan: Plan) -> str:
    """Where a manual rollback goes: finish a rollback already in Git (its Job was killed, or it ran twice),
    else back to where the last cutover came from (docs/guarantees.md #5)."""
    now, last = backend_of(plan, observed.in_git), observed.last
    if last is not None and last.trailers.hold and last.trailers.hold == now:
        return now
    hop = bridge_hop(last, plan)
    if hop is not None and hop.trailers.hold and hop.trailers.hold in plan.backends:
        return hop.trailers.hold  # a rollback through the bridge, stopped on it
    to = previous_backend(plan, now, last)
    if (last is None or last.trailers.to != now) and to == plan.target and now != plan.target:
        # No cutover brought Git to `now`: "the other backend" would be the plan's target, the cutover itself.
        raise InvalidInput(f"nothing to roll back: Git selects {now} and no cutover of this plan moved it there; "
                           f"going to {to} would be the cutover, not its rollback", cause="rollback_nothing",
                           hint=f"to stop a pending cutover, set the plan's target to {now}; to switch, use "
                                f"{plan.job('run')}")
    return to


# --- the rules the steps are made of --------------------------------------------------------------------------


def backend_of(plan: Plan, selector: Mapping[str, str]) -> str | None:
    """The backend of the plan whose selector this is, exactly; None for any other selector."""
    return next((name for name, backend in plan.backends.items() if dict(backend.selector) == dict(selector)),
                None)


def held_by(last: Commit | None, plan: Plan) -> str | None:
    """The backend a rollback holds the Service on, while the plan still names the target rolled back from (on a
    path through a bridge, the switch that left it may be the bridge's: any other target than the hold's then). A
    rollback's hop to its bridge holds nothing yet: it says where the path ends."""
    if last is None or not last.trailers.hold or last.trailers.to != last.trailers.hold:
        return None
    trailers = last.trailers
    if trailers.source == plan.target or (trailers.bridge and trailers.hold != plan.target):
        return trailers.hold
    return None


def previous_backend(plan: Plan, now: str | None, last: Commit | None) -> str:
    """Where a rollback goes: the last cutover's source, else the plan's only other backend."""
    came_from = last.trailers.source if last is not None else None
    if last is not None and last.trailers.to == now and came_from in plan.backends and came_from != now:
        assert came_from is not None
        return came_from
    others = [name for name in plan.backends if name != now]
    if len(others) == 1:
        return others[0]
    raise InvalidInput(f"cannot tell which backend to roll back to (Git selects {now}; no cutover commit says "
                       f"where it came from)", cause="rollback_unknown",
                       hint="run `cutover run --to BACKEND` with the backend to go back to")


def last_cutover(history: Sequence[Commit], plan: Plan) -> Commit | None:
    """The newest cutover commit of this plan that switched the selector: the state the phases read back (a commit
    that freed or restored a workload is not one: its trailers speak of a backend, not of the Service)."""
    return next((commit for commit in history if commit.trailers.plan == plan.name and not commit.trailers.step),
                None)


def commit_to(history: Sequence[Commit], plan: Plan, to: str) -> Commit | None:
    """The newest cutover commit of this plan that switched to `to`: what made Git hold it."""
    return next((commit for commit in history if commit.trailers.plan == plan.name and commit.trailers.to == to
                 and not commit.trailers.step), None)


def last_step(history: Sequence[Commit], plan: Plan, backend: str) -> Commit | None:
    """The newest commit of this plan that freed or restored `backend`'s workload."""
    return next((commit for commit in history if commit.trailers.plan == plan.name and commit.trailers.step
                 and commit.trailers.backend == backend), None)


# --- the handoff (docs/capacity.md) -----------------------------------------------------------------------------


def on_capacity_held(observed: Observed, plan: Plan, *, source: str | None, to: str) -> Free | None:
    """The target fits only once the source is gone: strategy recreate frees the source (maxGap is the consent to
    the gap); a source freed already is waited on; any other strategy stops (`capacity_held_by_source`)."""
    freed = _swapped(observed, plan, source, to)
    return None if freed is None else Free(freed, to)


def gap_opened(observed: Observed, plan: Plan, *, source: str | None, to: str) -> Commit | None:
    """The free commit that opened the gap a switch to `to` closes: `source` freed in Git by a cutover heading for
    `to`. None when no gap is open (the source runs, or was freed by hand; under strategy bridge the bridge serves)."""
    if plan.handoff.strategy == "bridge":
        return None
    return gap_commit(observed.workloads, source=source, to=to)


def gap_commit(workloads: Workloads, *, source: str | None, to: str) -> Commit | None:
    """`gap_opened`, on what Git says of the workloads alone (`cutover plan` has no more)."""
    if source is None or source not in workloads.freed:
        return None
    commit = workloads.steps.get(source)
    if commit is None or commit.trailers.step != "free" or commit.trailers.to != to:
        return None
    return commit


def restore_hold(observed: Observed, plan: Plan) -> Commit | None:
    """A restore after a gap was exceeded holds the Service on the restored backend while the plan still names the
    target it gave up on, until a later switch; without it the next sync would free the source again."""
    for commit in observed.workloads.steps.values():
        trailers = commit.trailers
        if trailers.step != "restore" or not trailers.hold or trailers.to != plan.target:
            continue
        last = observed.last
        if last is None or last.date is None or commit.date is None or commit.date >= last.date:
            return commit
    return None


def retire_step(observed: Observed, plan: Plan, *, verified: str | None, now: datetime) -> Free | None:
    """handoff.retire (docs/capacity.md): once a verified switch to the plan's target is `after` old in Git, the
    backend it left is drained and freed, by whichever cutover run comes first after that (a hook, the audit
    CronJob)."""
    step = retiring(observed, plan, verified=verified)
    return step if step is not None and observed.last is not None and now >= retire_at(observed.last, plan) else None


def retiring(observed: Observed, plan: Plan, *, verified: str | None) -> Free | None:
    """The retirement to come, whenever its time is: the backend a verified switch to the plan's target left. Not
    after a rollback (its hold), not a backend freed already, and not when anyone freed or restored that backend
    since the switch: a person's restore is not undone."""
    after, last = plan.handoff.retire_after, observed.last
    if after is None or last is None or last.date is None or last.sha != verified or last.trailers.hold:
        return None
    to, source = last.trailers.to, last.trailers.source
    if to != plan.target or backend_of(plan, observed.in_git) != to or backend_of(plan, observed.live.selector) != to:
        return None
    if source is None or source == to or source not in plan.backends or plan.backends[source].workload is None:
        return None
    since = observed.workloads.steps.get(source)
    if source in observed.workloads.freed or (since is not None and since.date is not None and
                                              since.date >= last.date):
        return None
    return Free(source, to)


def retire_at(last: Commit, plan: Plan) -> datetime:
    """When the backend a switch left is retired: the switch's date in Git plus handoff.retire.after."""
    assert last.date is not None
    assert plan.handoff.retire_after is not None
    return last.date + timedelta(seconds=plan.handoff.retire_after)


def rolling_back(observed: Observed, plan: Plan) -> str | None:
    """A rollback under way: it restored the backend it goes back to (a restore holding on itself, newer than the
    last switch) and Git does not select it yet. Where it goes, or None."""
    last = observed.last
    for commit in observed.workloads.steps.values():
        trailers = commit.trailers
        if trailers.step != "restore" or not trailers.hold or trailers.to != trailers.hold \
                or trailers.hold == plan.target or trailers.hold not in plan.backends:
            continue
        newer = last is None or last.date is None or commit.date is None or commit.date >= last.date
        if newer and backend_of(plan, observed.in_git) != trailers.hold:
            return trailers.hold
    return None


def thread(observed: Observed, plan: Plan, step: Step) -> str | None:
    """The cutover a step belongs to (its `Cutover-Id`, its Slack thread), known before anything of it is said: every
    hop of a path, a re-run and a later Job's verification speak of one cutover. None where no cutover is at work."""
    uid = observed.live.uid
    if isinstance(step, Advance):
        return cutover_id(plan, from_backend=step.source, to_backend=step.toward or step.to, service_uid=uid)
    if isinstance(step, (Restore, Free)) or (isinstance(step, AwaitApply) and step.restore is not None):
        return cutover_id(plan, from_backend=path_source(observed, plan), to_backend=step.to, service_uid=uid)
    if isinstance(step, (AwaitApply, Verify)) and observed.last is not None:
        return observed.last.trailers.id or None
    return None


def hop(step: Step) -> str | None:
    """Which hop of its cutover a step is: a switch or wait names the backend it goes to, a verification the one it
    checks, a free or restore the backend it changes."""
    if isinstance(step, (Advance, AwaitApply)):
        return step.to
    if isinstance(step, Verify):
        return step.backend
    if isinstance(step, Free):
        return f"free {step.backend}"
    if isinstance(step, Restore):
        return f"restore {step.backend}"
    return None


def cutover_id(plan: Plan, *, from_backend: str | None, to_backend: str, service_uid: str) -> str:
    """Stable for one intent (this Service, from, to), so that re-runs speak of the same cutover."""
    seed = f"{plan.service.namespace}/{plan.service.name}:{service_uid}:{from_backend}->{to_backend}"
    return hashlib.sha256(seed.encode()).hexdigest()[:12]


class GitStep(enum.Enum):
    ALREADY = "already"  # Git holds the target selector: nothing to write (docs/guarantees.md #5)
    WRITE = "write"  # Git holds another backend's selector: write ours
    FOREIGN = "foreign"  # Git holds a selector that is no backend of the plan: someone else's change


def git_step(current: Mapping[str, str], *, target: Mapping[str, str], known: Sequence[Mapping[str, str]]) -> GitStep:
    """What the writer does with the file it just read."""
    if dict(current) == dict(target):
        return GitStep.ALREADY
    if any(dict(current) == dict(selector) for selector in known):
        return GitStep.WRITE
    return GitStep.FOREIGN


# --- after the switch -----------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class SwitchProblems:
    """What is wrong with an applied switch: `final` (a re-created Service, a new ClusterIP) cannot be waited
    away; `endpoints` (the EndpointSlices are not the target's Ready pods) may settle within seconds."""

    final: tuple[str, ...] = ()
    endpoints: str | None = None

    def __bool__(self) -> bool:
        return bool(self.final or self.endpoints)

    def messages(self) -> list[str]:
        return [*self.final, *([self.endpoints] if self.endpoints else [])]


def switch_problems(trailers: Trailers, live: ServiceView, *, ready: set[str], serving: set[str]) -> SwitchProblems:
    """The applied switch against the cutover commit's trailers (recorded before the switch) and the
    endpoints: the same Service object, and endpoints that are exactly the target's Ready pods."""
    final = []
    if trailers.service_uid and trailers.service_uid != live.uid:
        final.append(f"the Service was re-created (uid {live.uid}, was {trailers.service_uid})")
    if trailers.cluster_ip and trailers.cluster_ip != live.cluster_ip:
        final.append(f"the ClusterIP changed to {live.cluster_ip} (was {trailers.cluster_ip})")
    endpoints = None
    if serving != ready or not ready:
        endpoints = f"EndpointSlices serve {sorted(serving)}, the target's Ready pods are {sorted(ready)}"
    return SwitchProblems(tuple(final), endpoints)


def look_again(problems: SwitchProblems, *, now: float, deadline: float, poll: float) -> bool:
    """The endpoint-finality rule: only endpoints that differ are looked at again (the EndpointSlice
    controller rewrites the slices seconds after it sees the selector change), and only while time is left."""
    return bool(problems.endpoints) and not problems.final and now + poll <= deadline


def retry_through_service(proof: PodProof, *, now: float, deadline: float, retry_in: float) -> bool:
    """A proof through the Service is tried again only when every problem may pass (kube-proxy may trail the
    EndpointSlice) and the next try still falls within the window."""
    return not proof.ok and all(problem.retryable for problem in proof.problems) and now + retry_in <= deadline
