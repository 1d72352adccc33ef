"""The phases users run as ArgoCD hooks and Jobs: the story, told with the pieces below them.

Each phase reads the world once (`observe`), asks `decide` what to do, and does it. `postsync` advances a
cutover (hold the Lease, wait and prove, commit with compare-and-swap, ask ArgoCD to refresh) or, once ArgoCD
has applied the commit, checks the switch (`verification`); a rollback's hold stops it. `presync` is the gate:
a revision that switches the Service to a backend of the plan must prove that backend now, or ArgoCD aborts
the sync and the Service keeps its selector (docs/sources.md: a failed PreSync hook stops the sync); it writes nothing;
in a fleet's later step it first waits for the steps before its own (`step_order`, docs/fleet.md).
`syncfail` reports; `explicit` (run, rollback) does the whole cutover outside a sync with the same pieces.
Called by the CLI with a `context.Run`; each returns a typed result (`results`).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import NoReturn

import structlog

from cutover.argocd import operation
from cutover.core import audit_rules, commits, decide, hops, milestones, pickup, steps
from cutover.core.results import (
    Advanced,
    Audited,
    Awaiting,
    Freed,
    Gated,
    Held,
    Restored,
    Result,
    SyncFailed,
    Verified,
    WouldAdvance,
    runs_on,
)
from cutover.core.trailers import Trailers
from cutover.core.views import ApplicationView, Commit
from cutover.errors import CutoverError, SyncTimeout, VerificationFailed
from cutover.flows import advance, drain, handoff, starting, step_order, sync, verification, writeback
from cutover.flows.context import Run
from cutover.flows.wait import prove_backend
from cutover.kube import lease
from cutover.plan import Plan
from cutover.sources.manifest import ManifestSource

log = structlog.get_logger("cutover")


async def observe(run: Run) -> tuple[steps.Observed, writeback.Seen]:
    """The live Service, the file in Git and its history: one read each."""
    plan = run.plan
    live = await run.cluster.service(plan.service.namespace, plan.service.name)
    version = await run.host.read(plan.git.path)
    history = await writeback.history(run.host, plan)
    in_git = await run.source.selector(version, ref=None, where=plan.git.path)
    seen = writeback.Seen(version, history, in_git)
    workloads = await handoff.workloads(run, seen)
    last = commits.last_cutover(history, plan)
    return steps.Observed(live, in_git, last, workloads=workloads, hold_lifted=await _hold_lifted(run, last)), seen


async def _hold_lifted(run: Run, last: Commit | None) -> str | None:
    """A rollback's hold lasts until the plan's target changes (docs/guarantees.md #5): the first run that sees the
    target changed notes it on the Service's Lease, so that a target set back to the one rolled back from later is a
    new cutover, not the old hold (issue 54's C2)."""
    if last is None or not last.trailers.hold:
        return None
    plan = run.plan
    noted = (await lease.notes(run.cluster, namespace=plan.service.namespace, service=plan.service.name)).get(
        lease.HOLD_LIFTED)
    lifting = commits.hold_lifted(last, plan, lifted=noted)
    if lifting is not None and not run.dry_run:
        await lease.annotate(run.cluster, namespace=plan.service.namespace, service=plan.service.name,
                             notes={lease.HOLD_LIFTED: lifting})
        log.info("rollback.hold_lifted", commit=lifting[:12], target=plan.target,
                 reason="the plan's target changed since the rollback")
        return lifting
    return noted


# --- presync ---------------------------------------------------------------------------------------------------


async def presync(run: Run, *, job_name: str | None) -> Gated:
    run.bind("presync")
    plan = run.plan
    app, ref, shown = await syncing(run, job_name, phase="presync")
    wanted = await synced_selector(run, app, ref)
    live = await run.cluster.service(plan.service.namespace, plan.service.name)
    step = decide.presync_step(wanted, live, plan)
    if plan.fleet:  # docs/fleet.md: the revision chooses the target (else the Service's own backend stays it)
        aim = commits.backend_of(plan, wanted) or commits.backend_of(plan, live.selector)
        run = dataclasses.replace(run, plan=plan.aimed(aim)) if aim else run
        plan = run.plan
    docs = None
    if (app is None or app.hydrator is None) and plan.target:  # the Source Hydrator's: the dry side only
        docs = await starting.ahead(run, ref=ref, gating=isinstance(step, steps.Gate))
    if isinstance(step, steps.Nothing):
        if step.reason == "no_change":
            serving = commits.backend_of(plan, live.selector)
            swapped = await starting.fleet_swap(run, docs, live=serving)
            if swapped is not None:
                await step_order.after_earlier_steps(run, app, ref)
                return Gated(shown, changed=False, backend=swapped, after=serving)
            log.info("presync.no_change", revision=shown)
            return Gated(shown, changed=False)
        log.warning("presync.unknown_selector", revision=shown, selector=dict(wanted),
                    hint="the selector in Git is no backend of the plan: not ours to gate")
        return Gated(shown, changed=True)
    leaving = commits.backend_of(plan, live.selector)
    await starting.no_switch_before_start(run, docs, leaving=leaving)
    log.info("presync.gating", revision=shown, to=step.backend, live=leaving)
    raced = pickup.self_heal_race(app, always=plan.argocd.refresh_always, nudge=plan.argocd.refresh) \
        if plan.argocd is not None and not plan.fleet else None  # a fleet's engine turns automated sync off
    if raced is not None:
        log.info("presync.self_heal_race", message=raced, hint=pickup.SELF_HEAL_HINT)
    waited = await step_order.after_earlier_steps(run, app, ref)  # a fleet's later step: after the earlier ones
    bridging = step.backend == plan.handoff.bridge  # its names only (docs/capacity.md)
    proven = await prove_backend(run.cluster, plan.for_bridge() if bridging else plan, plan.backend(step.backend),
                                 wait=True, budget=plan.verify.max_wait - waited if waited else None,
                                 budget_of="what the steps before this cluster's left of verify.maxWait")
    await advance.no_foreign_pods(run, step.backend)
    for warning in await drain.safety(run.cluster, plan, leaving=leaving, to=step.backend):
        log.warning("drain.unsafe", backend=leaving, message=warning,
                    hint=f"streams in flight on {leaving} may be cut (docs/capacity.md, before you free an engine)")
    return Gated(shown, True, step.backend, proven)


async def syncing(run: Run, job_name: str | None, *, phase: str) -> tuple[ApplicationView | None, str | None, str]:
    """The Application, the revision a hook's sync applies (None: unknown, the branch head stands for it, said)
    and how it is shown. A fleet's cluster speaks in its fleet change's Slack thread from here on."""
    app = await sync.application(run)
    revision = operation.syncing_revision(job_name, app)
    ref = revision.sha if revision else None
    plan = run.plan
    if plan.fleet and ref is not None:  # one thread per fleet change, a line per cluster (its Application)
        cluster = plan.argocd.application if plan.argocd is not None and plan.argocd.application else None
        # by the revision's first 7 characters: all a hook Job's name gives (argocd.operation), the same everywhere
        structlog.contextvars.bind_contextvars(cutover_id=commits.fleet_change(plan, ref[:7]), fleet=ref[:7],
                                               cluster=cluster or plan.service.namespace)
    if revision is None:
        log.warning(f"{phase}.revision_unknown", hint="no hook Job name and no ArgoCD operation: reading the "
                                                      "branch head, which may be newer than the revision synced")
    return app, ref, ref[:12] if ref else plan.git.branch


async def synced_selector(run: Run, app: ApplicationView | None, ref: str | None) -> dict[str, str]:
    """The selector in the revision being synced, as ArgoCD renders it: through the plan's source, or, with the
    Source Hydrator, straight from the hydrated manifest the sync applies (docs/sources.md)."""
    plan = run.plan
    hydrator = app.hydrator if app is not None and ref is not None else None
    if hydrator is not None and ref is not None and hydrator.elsewhere:
        # hydrated into a repository cutover's token does not reach (syncSource.repoURL): the dry revision ArgoCD
        # rendered into that commit, rendered here the way the plan's source renders it
        dry = hydrator.dry_of(ref)
        log.info("presync.hydrated_elsewhere", repository=hydrator.sync_repo, revision=ref[:12],
                 dry=dry[:12] if dry else None)
        if dry is None:
            log.warning("presync.revision_unknown", hint="the hydrator no longer says which dry commit it rendered "
                                                         "into the revision being synced: reading the branch head")
        ref = dry
    elif hydrator is not None and ref is not None:
        path = operation.repository_path(hydrator.manifest, what="the Source Hydrator's syncSource.path")
        version = await run.host.read(path, ref=ref)
        log.info("presync.hydrated", manifest=path, revision=ref[:12], branch=hydrator.sync_branch)
        return await ManifestSource(plan.git.document, "spec.selector").selector(version, ref=ref,
                                                                                 where=f"{path}@{ref}")
    version = await run.host.read(plan.git.path, ref=ref)
    return await run.source.selector(version, ref=ref, where=f"{plan.git.path}@{ref or 'head'}")  # rendered


async def _failed_selector(run: Run, app: ApplicationView | None) -> dict[str, str] | None:
    """The selector in the revision whose sync failed, as that sync rendered it; None when the Application does not
    name it or it cannot be read (then Git's head stands for it, as before ArgoCD 3.4)."""
    revision = app.operation_revision if app else None
    if revision is None:
        return None
    try:
        return await synced_selector(run, app, revision)
    except CutoverError as exc:
        log.warning("syncfail.revision_unreadable", revision=revision[:12], error=exc.message, cause=exc.cause,
                    hint="judged by Git's head instead: a commit made beside the failed sync counts as tried")
        return None


# --- postsync --------------------------------------------------------------------------------------------------


async def postsync(run: Run) -> Result:
    run.bind("postsync")
    observed, seen = await observe(run)
    if observed.workloads.steps:  # a handoff's hops: does the sync running this hook hold them (restore_unsynced)
        observed = dataclasses.replace(observed, application=await sync.application(run))
    step = decide.next_step(observed, run.plan)
    in_thread(observed, run.plan, step)
    if isinstance(step, steps.Hold):
        log.info(milestones.HELD, on=step.on, commit=step.commit[:12], author=step.author, target=run.plan.target)
        return Held(step.on, step.commit, step.author)
    if isinstance(step, (steps.Restore, steps.Free, steps.Advance)):
        return await _take(run, observed, seen, step)
    if isinstance(step, steps.AwaitApply) and step.restore is not None:
        syncing = observed.application.operation_revision if observed.application else None
        log.info("handoff.restore_unsynced", backend=step.to, restore=step.restore[:12],
                 syncing=(syncing or "")[:12], hint="ArgoCD syncs the restore when this sync ends, or at its next "
                                                    "look; that sync's PostSync waits for the pods and switches")
        await sync.refresh(run)
        return Awaiting(step.to, restore=step.restore, syncing=syncing)
    if isinstance(step, steps.AwaitApply):
        await sync.refresh(run)
        return Awaiting(step.to)
    assert isinstance(step, steps.Verify)
    verified = await verified_switch(run, observed, seen, backend=step.backend)
    log.info(milestones.COMPLETED, to=step.backend, commit=observed.last.sha[:12] if observed.last else None)
    return verified


async def _take(run: Run, observed: steps.Observed, seen: writeback.Seen,
                step: steps.Restore | steps.Free | steps.Advance) -> Restored | Freed | Advanced | WouldAdvance:
    """One hop of a handoff, or the switch: PostSync's, or the audit's when ArgoCD synced the last hop without
    running its hooks."""
    if isinstance(step, steps.Advance):
        return await (advance.would_advance(run, seen, step) if run.dry_run else
                      advance.hop(run, observed, seen, step))
    if run.dry_run:
        return await advance.would_make_room(run, step)
    await bridge_carries(run, observed, seen)
    return await advance.make_room(run, observed, step)


def in_thread(observed: steps.Observed, plan: Plan, step: steps.Step) -> None:
    """Every event from here on names the step's cutover (`decide.thread`) and hop: its Slack thread from the first
    word, not from its commit on, and what a re-run of the hop would say again."""
    ident = decide.thread(observed, plan, step)
    if ident:
        structlog.contextvars.bind_contextvars(cutover_id=ident, hop=decide.hop(step))


async def verified_switch(run: Run, observed: steps.Observed, seen: writeback.Seen | None, *, backend: str,
                          to: str | None = None, hold: str | None = None) -> Verified:
    """The switch checked through the Service; on failure, the rollback `decide` asks for (the outcome stays
    exit 6)."""
    trailers = observed.last.trailers if observed.last else Trailers()
    try:
        verified = await verification.verify(run, observed.live, trailers, backend)
    except VerificationFailed as failure:
        step = decide.next_step(dataclasses.replace(observed, verification_failed=True), run.plan, to=to, hold=hold)
        if not isinstance(step, steps.RollBack):
            raise
        raise await _roll_back_after(run, failure, observed, seen, source=backend, to=step.to) from failure
    if observed.last is not None and not run.dry_run:  # for `cutover audit`: this switch needs no second look
        gap = await _gap_closed(run, observed, backend)
        await lease.annotate(run.cluster, namespace=run.plan.service.namespace, service=run.plan.service.name,
                             notes={lease.VERIFIED: observed.last.sha, **_retire_note(run, observed)})
        return dataclasses.replace(verified, gap=gap, retired=await _retire_if_due(run, observed,
                                                                                    verified=observed.last.sha))
    return verified


def _retire_note(run: Run, observed: steps.Observed) -> dict[str, str]:
    """handoff.retire: when the backend this switch left will be retired, kept beside the verification on the
    Lease (the deadline itself is the switch's date in Git: `hops.retire_at`)."""
    last = observed.last
    if last is None or hops.retiring(observed, run.plan, verified=last.sha) is None:
        return {}
    return {lease.RETIRE_AT: hops.retire_at(last, run.plan).isoformat()}


async def _retire_if_due(run: Run, observed: steps.Observed, *, verified: str | None) -> Freed | None:
    """handoff.retire (docs/capacity.md): the backend a verified switch left, drained and freed by a commit once
    `after` has passed since the switch; whichever run comes first after that does it."""
    step = hops.retire_step(observed, run.plan, verified=verified, now=run.clock.now())
    if step is None or run.dry_run:
        return None
    assert observed.last is not None
    try:
        freed = await advance.make_room(run, observed, step)
    except CutoverError as exc:  # the switch stands verified; the next run after this one tries again
        log.warning("handoff.retire_failed", backend=step.backend, cause=exc.cause, message=exc.message,
                    hint=f"{exc.hint}; the next cutover run (a hook, the audit CronJob) retires {step.backend}")
        return None
    log.info(milestones.RETIRED, backend=step.backend, to=step.to, switched=observed.last.sha[:12],
             after=run.plan.handoff.retire_after, commit=freed.sha or None)
    await run.event(observed.live, "CutoverRetired", f"{step.backend} retired {run.plan.handoff.retire_after:g}s "
                    f"after the switch to {step.to}" + (f" in {freed.sha[:12]}" if freed.sha else ""))
    assert isinstance(freed, Freed)
    return freed


async def _gap_closed(run: Run, observed: steps.Observed, backend: str) -> float | None:
    """handoff.strategy recreate: the gap's length, from the free commit to this first verification of the switch
    that closed it (docs/capacity.md); said once, as `handoff.gap_closed` and an Event."""
    last = observed.last
    assert last is not None
    opened = hops.gap_opened(observed, run.plan, source=last.trailers.source, to=backend)
    if opened is None or opened.date is None:
        return None
    notes = await lease.notes(run.cluster, namespace=run.plan.service.namespace, service=run.plan.service.name)
    if notes.get(lease.VERIFIED) == last.sha:
        return None  # verified before: the gap was said then
    gap = (run.clock.now() - opened.date).total_seconds()
    log.info(milestones.GAP_CLOSED, source=last.trailers.source, to=backend, seconds=round(gap, 1),
             opened=opened.sha[:12], max_gap=run.plan.handoff.max_gap)
    await run.event(observed.live, "CutoverGapClosed", f"{backend} serves again after a gap of {gap:.0f}s")
    return gap


async def _roll_back_after(run: Run, failure: VerificationFailed, observed: steps.Observed,
                           seen: writeback.Seen | None, *, source: str, to: str) -> VerificationFailed:
    """rollback.auto: the first hop of the way back to `to`, as a rollback run would take it (docs/capacity.md: a
    freed backend is restored first; on a bridged path the bridge carries the Service meanwhile); the next syncs
    take the rest."""
    log.error(milestones.FAILED, cause="verification_failed", message=failure.message, then=f"roll back to {to}")
    if run.dry_run:
        return VerificationFailed(f"{failure.message}; dry run: would roll back to {to}", hint=failure.hint)
    step = decide.next_step(observed, run.plan, to=to, hold=to)
    try:
        if isinstance(step, (steps.Restore, steps.Free)):
            room = await advance.make_room(run, observed, step)
            return VerificationFailed(f"{failure.message}; rolling back to {to}: {_room_said(room)}",
                                      cause="verification_failed_rolled_back",
                                      hint=f"the next syncs switch the Service back to {to} once it is proven; fix "
                                           f"the target; {run.plan.resume(to)}")
        hop = step if isinstance(step, steps.Advance) else steps.Advance(source, to, hold=to)
        back = await advance.advance(run, observed, seen, hop)
    except CutoverError as exc:
        return VerificationFailed(f"{failure.message}; the rollback to {to} failed too: {exc.message}",
                                  cause="rollback_failed", hint=exc.hint)
    by = f" through the bridge {back.to}" if back.to != to else ""
    return VerificationFailed(f"{failure.message}; rolled back to {to}{by} in {back.sha[:12]}",
                              cause="verification_failed_rolled_back",
                              hint="the Service goes back once ArgoCD syncs the rollback; fix the target; "
                                   f"{run.plan.resume(to)}")


def _room_said(room: Restored | Freed) -> str:
    what = "restored" if isinstance(room, Restored) else "freed"
    return f"{room.backend} {what} in {room.sha[:12]}" if room.sha else f"{room.backend} {what} already"


async def bridge_carries(run: Run, observed: steps.Observed, seen: writeback.Seen | None) -> None:
    """handoff.strategy bridge: before anything is freed, the bridge the Service selects is checked through the
    Service on handoff.bridgeNames (docs/capacity.md); failing that, rollback.auto goes back to where the path
    began, which still runs."""
    plan, bridge = run.plan, run.plan.handoff.bridge
    if bridge is None or commits.bridge_hop(observed.last, plan) is None or \
            commits.backend_of(plan, observed.in_git) != bridge:
        return
    assert observed.last is not None
    try:
        await verification.verify(dataclasses.replace(run, plan=plan.for_bridge()), observed.live,
                                  observed.last.trailers, bridge)
    except VerificationFailed as failure:
        step = decide.next_step(dataclasses.replace(observed, verification_failed=True), plan, to=bridge)
        if not isinstance(step, steps.RollBack):
            raise
        raise await _roll_back_after(run, failure, observed, seen, source=bridge, to=step.to) from failure
    log.info(milestones.BRIDGE_VERIFIED, bridge=bridge, names=list(plan.handoff.bridge_names),
             commit=observed.last.sha[:12])


# --- audit ---------------------------------------------------------------------------------------------------


async def audit(run: Run) -> Audited:
    """What each workload's CronJob cutover-audit-<application> runs (docs/sources.md): take the hop no hook took
    (ArgoCD synced the last one without hooks), finish a verification no hook did (rolling back on failure as
    PostSync would), or check that the live backend still proves its names (an alert otherwise: Event, Slack, exit
    6). It commits nothing but such a hop or rollback, and a retirement that is due (handoff.retire)."""
    run.bind("audit")
    plan = run.plan
    observed, seen = await observe(run)
    observed = dataclasses.replace(observed, application=await sync.application(run))
    notes = await lease.notes(run.cluster, namespace=plan.service.namespace, service=plan.service.name)
    step = audit_rules.audit_step(observed, plan, verified=notes.get(lease.VERIFIED), now=run.clock.now())
    if isinstance(step, steps.Nothing):
        log.info("audit.skipped", reason=step.reason)
        if pickup.pickup(observed) is pickup.Pickup.BEHIND:  # a net under the nudge: no hook's Job asked for it
            await sync.refresh(run)
        return Audited("skipped", None, step.reason)
    if isinstance(step, steps.Continue):
        return await _continued(run, observed, seen, step)
    if isinstance(step, steps.Stalled):
        await _stalled(run, observed, step)
    if isinstance(step, steps.Verify):
        last = observed.last
        log.warning("audit.unverified", backend=step.backend, commit=last.sha[:12] if last else None,
                    hint=f"verifying a switch synced without its hooks: {_hookless(plan)}")
        hold = last.trailers.hold if last else None
        done = await verified_switch(run, observed, seen, backend=step.backend, to=step.backend, hold=hold)
        return Audited("verified", step.backend, "applied without a PostSync hook", last.sha if last else None,
                       retired=done.retired)
    gap = hops.gap_opened(observed, plan, source=step.backend, to=plan.target)
    bridging = step.backend == plan.handoff.bridge and commits.bridge_hop(observed.last, plan) is not None
    held_to = plan.for_bridge() if bridging else plan  # a bridge carrying a handoff: on its names
    await verification.still_serving(dataclasses.replace(run, plan=held_to), observed.live, step.backend, gap=gap)
    if step.stalled is not None:
        await _stalled(run, observed, step.stalled)
    if (left := audit_rules.target_left(observed, plan)) is not None:
        log.warning("audit.target_left", reason=left, hint=f"sync the Application, or run {plan.job('run')}")
    retired = await _retire_if_due(run, observed, verified=notes.get(lease.VERIFIED))
    return Audited("checked", step.backend, "the live backend proves its names", retired=retired)


async def _stalled(run: Run, observed: steps.Observed, found: steps.Stalled) -> NoReturn:
    """A cutover commit whose sync failed: an alert (Event, Slack, exit 7), every run until a sync applies it; the
    audit syncs nothing itself (its ServiceAccount may not start an operation)."""
    app = run.plan.argocd.application if run.plan.argocd else "the Application"
    live = commits.backend_of(run.plan, observed.live.selector)
    # an operation that runs on is ended first: ArgoCD starts no other sync while one runs
    ended = f", end the operation that runs on (argocd app terminate-op {app})" if found.waiting else ""
    hint = f"read why in ArgoCD (argocd app get {app}){ended}, mend it and sync {app} again: the cutover goes on " \
           f"from {found.commit[:12]}"
    if found.step is not None:  # the live backend serves (checked): the handoff waits for this step
        hint += f" ({found.step}); {live} serves the Service meanwhile"
    else:
        hint += f"; or, to stay on {live}, set the plan's target to {live}"
    await run.event(observed.live, "CutoverSyncFailed", found.reason, warning=True)
    raise SyncTimeout(found.reason, cause="argocd_sync_failed", hint=hint)


async def _continued(run: Run, observed: steps.Observed, seen: writeback.Seen, found: steps.Continue) -> Audited:
    """A hop ArgoCD synced without its hooks: the next one, taken here (the CronJob's schedule is then how long the
    handoff waited; docs/capacity.md)."""
    in_thread(observed, run.plan, found.step)
    log.warning("audit.continuing", commit=found.commit[:12], hop=decide.hop(found.step),
                hint=f"taking the next hop, ArgoCD having synced {found.commit[:12]} without its hooks: "
                     f"{_hookless(run.plan)}")
    done = await _take(run, observed, seen, found.step)
    if isinstance(done, WouldAdvance):
        return Audited("continued", done.to, "would take the next hop (dry run)", found.commit)
    detail = _room_said(done) if isinstance(done, Restored | Freed) else \
        f"{done.source} -> {done.to} in {done.sha[:12]}"
    return Audited("continued", done.to, detail, found.commit)


def _hookless(plan: Plan) -> str:
    return operation.hookless(always=plan.argocd is not None and plan.argocd.refresh_always)


# --- syncfail --------------------------------------------------------------------------------------------------


async def syncfail(run: Run) -> SyncFailed:
    """Say what failed, with its cause; change nothing, unless `decide.syncfail_step` asks for a rollback."""
    run.bind("syncfail")
    plan = run.plan
    app = await sync.application(run)
    message = app.failure() if app else "the sync failed (the Application could not be read)"
    observed, seen = await observe(run)
    tried = await _failed_selector(run, app)
    serving, wanted = commits.backend_of(plan, observed.live.selector), commits.backend_of(plan, observed.in_git)
    waiting = app.failed_waits_on if app is not None else ()
    log.error(milestones.FAILED, cause="argocd_sync_failed", message=message, serving=serving, git=wanted,
              tried=commits.backend_of(plan, tried) if tried is not None else wanted,
              hint="read the Application's message and notice, and the hook Jobs' logs where they are kept "
                   f"(kubectl -n {plan.jobs_namespace} logs job/...; docs/install.md, \"A switch sooner\")"
                   + _runs_on(plan, waiting))
    await run.event(observed.live, "CutoverSyncFailed", f"{message}; the Service still selects {serving}",
                    warning=True)
    step = decide.syncfail_step(observed, plan, tried=tried)
    if isinstance(step, steps.Nothing) or run.dry_run:
        return SyncFailed(message, serving, waiting=waiting)
    if isinstance(step, steps.GiveBack):
        async with lease.hold(run.cluster, namespace=plan.service.namespace, service=plan.service.name,
                              me=run.identity, now=run.clock.now) as held:
            given = await handoff.give_back(run, observed, source=step.source, to=step.to,
                                            before_write=functools.partial(lease.confirm, run.cluster, held))
        return SyncFailed(message, serving, given.sha, waiting)
    back = await advance.advance(run, observed, seen, steps.Advance(wanted, step.to, hold=step.to))
    return SyncFailed(message, serving, back.sha, waiting)


def _runs_on(plan: Plan, waiting: tuple[str, ...]) -> str:
    """A failed operation that still waits for a resource's health runs on, and ArgoCD starts no other sync (a
    commit going back included) until it ends: a target waiting for the card a refused free was to give it never
    ends it."""
    if not waiting:
        return ""
    app = plan.argocd.application if plan.argocd else "the Application"
    return f"; {runs_on(waiting)}: if it cannot be, end it (argocd app terminate-op {app}), mend the cause and " \
           f"sync {app} again"
