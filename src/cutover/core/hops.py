"""A handoff's hops (docs/capacity.md): recreate's swap, a bridge's path one hop at a time, the gap a free opens,
a restore that holds, a rollback under way, a restore ArgoCD has yet to sync, and retirement. Pure: each rule reads
an `Observed` and the plan. Called by `decide`, `audit_rules` and the phases."""

from __future__ import annotations

from datetime import datetime, timedelta

from cutover.core import commits, steps
from cutover.core.views import Commit
from cutover.plan import Plan


def swapped(observed: steps.Observed, plan: Plan, source: str | None, to: str) -> str | None:
    """recreate: the source freed in the hop that restores the target (break before make, consented to)."""
    if plan.handoff.strategy != "recreate" or source is None or source == to:
        return None
    return None if source in observed.workloads.freed or plan.backends[source].workload is None else source


def bridged(observed: steps.Observed, plan: Plan, *, to: str, hold: str | None, explicit: bool) -> steps.Step | None:
    """handoff.strategy bridge (docs/capacity.md): the path source → bridge → `to`, one hop per step, each decided
    from Git. From a running source: switch to the bridge. On the bridge: once ArgoCD applied it, free the backend
    at the other end of the path (restoring `to` in the same commit when Git holds it freed), then switch to `to`.
    Going back to where the path began while it still runs is one switch. A rollback's path (its hop to the bridge
    holds) is finished by PostSync too. None: no bridge in this step (the other rules decide)."""
    bridge = plan.handoff.bridge
    if plan.handoff.strategy != "bridge" or bridge is None:
        return None
    git, hop = commits.backend_of(plan, observed.in_git), commits.bridge_hop(observed.last, plan)
    if git == bridge and hop is not None:
        if not explicit and hop.trailers.hold:
            to = hold = hop.trailers.hold
        return None if to == bridge else _on_bridge(observed, plan, hop, to=to, hold=hold, explicit=explicit)
    if git is None or git in (to, bridge) or to == bridge:
        return None
    if plan.backends[git].workload is None or git in observed.workloads.freed:
        return None
    return steps.Advance(git, bridge, hold, bridge=bridge, toward=to)


def _on_bridge(observed: steps.Observed, plan: Plan, hop: Commit, *, to: str, hold: str | None,
               explicit: bool) -> steps.Step:
    """Git selects the bridge, by `hop`: the next hop of the path to `to`."""
    bridge, freed = hop.trailers.to or "", observed.workloads.freed
    if dict(observed.live.selector) != dict(plan.backends[bridge].selector):
        return steps.AwaitApply(bridge)
    origin = hop.trailers.source
    other = (hop.trailers.toward if to == origin else origin) or ""
    if to == origin and to not in freed:
        return steps.Advance(bridge, to, hold, bridge=bridge)  # back where the path began: it still runs
    if other in plan.backends and other != to and plan.backends[other].workload is not None and other not in freed:
        served = other == origin  # the other end that never had the Service is not drained
        return steps.Restore(to, to, hold, free=other, drain=served) if to in freed else steps.Free(other, to, served)
    if to in freed:
        return steps.Restore(to, to, hold)
    # the free synced alone, its restore pushed after it (`restore_unsynced`): no pod of `to` to wait for yet
    restore = None if explicit else restore_unsynced(observed, to)
    return steps.Advance(other, to, hold, bridge=bridge) if restore is None else steps.AwaitApply(to, restore.sha)


def path_source(observed: steps.Observed, plan: Plan) -> str | None:
    """Where the cutover a hop belongs to came from: the backend Git selects, or on a bridge the one the path left
    (so that every hop of a path names one cutover, one Slack thread)."""
    git, hop = commits.backend_of(plan, observed.in_git), commits.bridge_hop(observed.last, plan)
    return hop.trailers.source if hop is not None and git == plan.handoff.bridge else git


def restore_unsynced(observed: steps.Observed, to: str) -> Commit | None:
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
    syncing = next((commit for commit in commits.ours(observed) if commit.sha == app.operation_revision), None)
    return restored if syncing is not None and commits.pushed_before(syncing, restored) else None


def on_capacity_held(observed: steps.Observed, plan: Plan, *, source: str | None, to: str) -> steps.Free | None:
    """The target fits only once the source is gone: strategy recreate frees the source (maxGap is the consent to
    the gap); a source freed already is waited on; any other strategy stops (`capacity_held_by_source`)."""
    freed = swapped(observed, plan, source, to)
    return None if freed is None else steps.Free(freed, to)


def gap_opened(observed: steps.Observed, plan: Plan, *, source: str | None, to: str) -> Commit | None:
    """The commit that opened the gap a switch to `to` closes: under recreate, the free of `source` by a cutover
    heading for `to`; under bridge, the switch to the bridge on a path from `source` to `to` once `source` is freed,
    when names go unanswered meanwhile (`dark_since`). None when no gap is open (the source runs, or was freed by
    hand; a bridge that answers every served name)."""
    if plan.handoff.strategy == "bridge":
        return dark_since(observed, plan, source=source, to=to)
    return gap_commit(observed.workloads, source=source, to=to)


def dark_since(observed: steps.Observed, plan: Plan, *, source: str | None, to: str) -> Commit | None:
    """strategy bridge: the switch to the bridge that left `plan.dark_names` unanswered, on the path from `source`
    (freed in Git since) to `to`; handoff.maxGap bounds it from that commit's date, as recreate's from its free. A
    rollback's way back through the bridge is not bounded: it is the remedy (docs/capacity.md)."""
    hop = commits.bridge_hop(observed.last, plan)
    if not plan.dark_names or hop is None or commits.backend_of(plan, observed.in_git) != plan.handoff.bridge:
        return None
    trailers = hop.trailers
    if trailers.hold or trailers.source != source or trailers.toward != to or source not in observed.workloads.freed:
        return None
    return hop


def origin(observed: steps.Observed, plan: Plan, serving: str | None) -> str | None:
    """The backend a gap in service gave up, from the backend the Service selects: under bridge the path's source
    while the bridge serves, else `serving` itself."""
    hop = commits.bridge_hop(observed.last, plan)
    return hop.trailers.source if hop is not None and serving == plan.handoff.bridge else serving


def given_back(plan: Plan, *, source: str, to: str) -> steps.Restore:
    """The restore that gives the card back to `source` once a gap failed, holding on it: under recreate it names
    the target given up on (`restore_hold` holds the Service there); under bridge it is a rollback's restore
    (`rolling_back`), so that the next hop switches from the bridge back to `source`."""
    return steps.Restore(source, source if plan.handoff.strategy == "bridge" else to, hold=source)


def gap_commit(workloads: steps.Workloads, *, source: str | None, to: str) -> Commit | None:
    """`gap_opened`, on what Git says of the workloads alone (`cutover plan` has no more)."""
    if source is None or source not in workloads.freed:
        return None
    commit = workloads.steps.get(source)
    if commit is None or commit.trailers.step != "free" or commit.trailers.to != to:
        return None
    return commit


def restore_hold(observed: steps.Observed, plan: Plan) -> Commit | None:
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


def retire_step(observed: steps.Observed, plan: Plan, *, verified: str | None, now: datetime) -> steps.Free | None:
    """handoff.retire (docs/capacity.md): once a verified switch to the plan's target is `after` old in Git, the
    backend it left is drained and freed, by whichever cutover run comes first after that (a hook, the audit
    CronJob)."""
    step = retiring(observed, plan, verified=verified)
    return step if step is not None and observed.last is not None and now >= retire_at(observed.last, plan) else None


def retiring(observed: steps.Observed, plan: Plan, *, verified: str | None) -> steps.Free | None:
    """The retirement to come, whenever its time is: the backend a verified switch to the plan's target left. Not
    after a rollback (its hold), not a backend freed already, and not when anyone freed or restored that backend
    since the switch: a person's restore is not undone."""
    after, last = plan.handoff.retire_after, observed.last
    if after is None or last is None or last.date is None or last.sha != verified or last.trailers.hold:
        return None
    to, source = last.trailers.to, last.trailers.source
    if to != plan.target or commits.backend_of(plan, observed.in_git) != to or \
            commits.backend_of(plan, observed.live.selector) != to:
        return None
    if source is None or source == to or source not in plan.backends or plan.backends[source].workload is None:
        return None
    since = observed.workloads.steps.get(source)
    if source in observed.workloads.freed or (since is not None and since.date is not None and
                                              since.date >= last.date):
        return None
    return steps.Free(source, to)


def retire_at(last: Commit, plan: Plan) -> datetime:
    """When the backend a switch left is retired: the switch's date in Git plus handoff.retire.after."""
    assert last.date is not None
    assert plan.handoff.retire_after is not None
    return last.date + timedelta(seconds=plan.handoff.retire_after)


def rolling_back(observed: steps.Observed, plan: Plan) -> str | None:
    """A rollback under way: it restored the backend it goes back to (a restore holding on itself, newer than the
    last switch) and Git does not select it yet. Where it goes, or None."""
    last = observed.last
    for commit in observed.workloads.steps.values():
        trailers = commit.trailers
        if trailers.step != "restore" or not trailers.hold or trailers.to != trailers.hold \
                or trailers.hold == plan.target or trailers.hold not in plan.backends:
            continue
        newer = last is None or last.date is None or commit.date is None or commit.date >= last.date
        if newer and commits.backend_of(plan, observed.in_git) != trailers.hold:
            return trailers.hold
    return None
