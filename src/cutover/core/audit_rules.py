"""`cutover audit`'s rules (docs/sources.md), for syncs that ran no hook: whether ArgoCD is behind cutover's newest
commit, gave up on it, or synced a hop of a handoff without its hooks, and so what the audit does. Pure; called
by the audit phase."""

from __future__ import annotations

from datetime import datetime, timedelta

from cutover.core import commits, decide, steps
from cutover.core.views import ApplicationView, Commit
from cutover.plan import Plan


def audit_step(observed: steps.Observed, plan: Plan, *, verified: str | None,
               now: datetime) -> steps.Verify | steps.Check | steps.Continue | steps.Stalled | steps.Nothing:
    """`cutover audit` (docs/sources.md), for syncs that ran no hook (argo-cd#22795, #25475, #27875): a hop of a
    handoff that ArgoCD synced without its hooks is followed by the next hop (`Continue`); a switch ArgoCD applied
    that no PostSync verified (`verified`: the cutover commit last verified) is verified now; otherwise the live
    backend's names are checked. Git and the Service not agreeing is ArgoCD's to finish, and so is a cutover commit
    ArgoCD has yet to apply (`argocd_behind`: a free or a restore leaves the selector as it is), unless ArgoCD's
    sync of that commit failed (`Stalled`: nothing would apply it; a free's or a restore's is said after the live
    backend's check, `Check.stalled`); a selector of no backend of the plan is not ours. A person's commit synced
    without hooks starts nothing here: the audit finishes what cutover began."""
    live, git = commits.backend_of(plan, observed.live.selector), commits.backend_of(plan, observed.in_git)
    if live is None or git is None:
        return steps.Nothing("the Service or Git selects no backend of the plan: not ours to audit")
    stalled = argocd_gave_up(observed)
    if live != git:
        return stalled or steps.Nothing(f"ArgoCD has yet to apply {git} (the Service selects {live})")
    behind = argocd_behind(observed, now=now)
    if behind is not None:
        return steps.Nothing(behind)
    left = _hop_left(observed, plan)
    if left is not None:
        return left
    # A free or a restore whose sync failed leaves the selector as Git has it (as does any commit whose failed
    # operation runs on): the live backend is checked first (a gap a Terminate left open is its alert, with its
    # hint), then the step ArgoCD will not apply again by itself.
    step_stalled = stalled if stalled is not None and (stalled.step or stalled.waiting) else None
    last = observed.last
    if git == plan.handoff.bridge and commits.bridge_hop(last, plan) is not None:
        # its hops verify it on handoff.bridgeNames, never the audit on every served name (the bridge serves only
        # those): a stalled step is said once the bridge is checked on them
        return steps.Check(live, step_stalled) if step_stalled is not None else \
            steps.Nothing(f"a handoff through the bridge {git} is under way: its hops verify it")
    unverified = last is not None and last.trailers.to == git and last.sha != verified
    return steps.Verify(git) if unverified else steps.Check(live, step_stalled)


# How long after a cutover commit an Application with no operation since may still be about to sync it: ArgoCD
# polls Git every 3 minutes (timeout.reconciliation) plus up to 1 minute of jitter when no refresh or webhook
# tells it sooner. Past this, a commit no operation followed belongs to what ArgoCD leaves as it is (a workload in
# another Application, a commit that changed nothing it renders): the audit goes on.
APPLY_WINDOW = timedelta(minutes=10)


def argocd_behind(observed: steps.Observed, *, now: datetime) -> str | None:
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
    newest = commits.newest_commit(observed)
    if newest is None or newest.date is None or app.operation_started is None:
        return None  # no cutover commit to wait for, or an Application no operation ever synced: nothing to tell
    compared = app.hydrator.dry_sha if app.hydrator is not None else app.sync_revision
    if compared == newest.sha or app.operation_started >= newest.date or now - newest.date > APPLY_WINDOW:
        return None
    return f"ArgoCD has yet to apply {newest.sha[:12]} ({newest.title})"


def target_left(observed: steps.Observed, plan: Plan) -> str | None:
    """Why no PostSync will take the step the plan asks for, when ArgoCD has nothing left to sync: the sync of the
    plan's new target failed before cutover's PostSync ran (a team's hook in an earlier wave), and the fix changed a
    hook alone, which leaves the Application Synced (hooks are no managed resource), so no sync comes. None when a
    PostSync would do nothing, a sync is running or pending, or the Application cannot be read."""
    app = observed.application
    if app is None or app.operation_phase in ("Running", "Terminating") or app.sync_status != "Synced":
        return None
    step = decide.next_step(observed, plan)
    if not isinstance(step, steps.Advance | steps.Restore | steps.Free):
        return None
    return (f"the plan's target is {plan.target}, the Service selects "
            f"{commits.backend_of(plan, observed.live.selector) or 'no backend of the plan'}, and ArgoCD has nothing "
            "left to sync: no PostSync will take the cutover (did the last sync fail before cutover's PostSync ran?)")


def _hop_left(observed: steps.Observed, plan: Plan) -> steps.Continue | None:
    """The next hop of a handoff whose last hop ArgoCD synced without hooks: no PostSync will take it."""
    unhooked = synced_without_hooks(observed)
    step = decide.next_step(observed, plan) if unhooked is not None else None
    if unhooked is None or not isinstance(step, steps.Advance | steps.Restore | steps.Free):
        return None
    return steps.Continue(step, unhooked.sha)


def argocd_gave_up(observed: steps.Observed) -> steps.Stalled | None:
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
    ours = commits.ours(observed)
    failed = next((commit for commit in ours if commit.sha == applied), None)
    if failed is None or any(commits.after(commit, failed) for commit in ours):
        return None
    return steps.Stalled(f"{app.failure()}; ArgoCD does not sync a revision it failed again by itself", failed.sha,
                   _step_label(failed))


def _runs_on(observed: steps.Observed, app: ApplicationView, revision: str) -> steps.Stalled | None:
    """An operation that can only end Failed and runs on (`ApplicationView.failed_waiting`: a resource refused,
    ArgoCD waiting for the rest's health, which may never come) holds back every commit of ours: no sync starts
    while it runs. Said for our newest commit when the operation synced one of ours or began before it (SyncFail's
    way back, committed while it runs); a person's failed revision with all of ours applied is not ours to say."""
    applied = revision if app.hydrator is None else app.hydrator.dry_of(revision)
    newest = commits.newest_commit(observed)
    if newest is None or newest.date is None:
        return None
    synced_ours = any(commit.sha == applied for commit in commits.ours(observed))
    if not synced_ours and (app.operation_started is None or app.operation_started >= newest.date):
        return None
    waiting = app.operation_message or "the rest of the sync"
    return steps.Stalled(f"{app.failure()}; the operation can only end Failed, still waits on {waiting}, and ArgoCD "
                         f"starts no other sync while it runs", newest.sha, _step_label(newest), waiting)


def _step_label(commit: Commit) -> str | None:
    """"free vllm", "restore candle": a handoff's step; None for a switch."""
    trailers = commit.trailers
    return f"{trailers.step} {trailers.backend}" if trailers.step in ("free", "restore") else None


def synced_without_hooks(observed: steps.Observed) -> Commit | None:
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
    ours = commits.ours(observed)
    synced = next((commit for commit in ours if commit.sha == applied), None)
    if synced is None or any(commits.after(commit, synced) for commit in ours):
        return None  # a person's commit, or an older one of ours (a newer one is still to sync)
    return synced
