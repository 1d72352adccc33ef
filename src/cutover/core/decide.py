"""Pure decisions about the switch: given what a step observed (plain data), what to do next. No I/O, no clock.

The phases read the world once per step into a `steps.Observed` (the live Service, the selector in Git, the last
cutover commit's trailers, the Application) and ask `next_step`; everything they do is the answer's story. The
rules are split by concern, each read in one sitting: this module (the switch: PostSync's and a run's next step,
the gate's, SyncFail's, a rollback's target), `hops` (a handoff's path), `audit_rules` (the audit), `commits` (what
cutover's commits say), `switch` (the writer's and the verification's view of a switch), over `steps` (the words).

docs/guarantees.md, one place each:
  #1  commit only on fresh proof ...... `gate.judge`, asked by the writer right before each write, and
                                           `gate.foreign`: a selector that picks another backend's pods is final
  #2  only the selector changes ....... `yaml_edit.guard`, run by every source's edit before anything is written
  #3  no cluster write but Events, the Lease, the refresh and the nudge: `CLUSTER_WRITES`; no `Step` writes
                                           the Service
  #4  one cutover per Service ......... `lease_rules.judge` on the Service's Lease
  #5  a re-run never commits twice .... `switch.git_step` (ALREADY: Git holds it), `commits.held_by` (a rollback's
                                           hold), `rollback_to` (a rollback already in Git is finished, not redone),
                                           `steps.Workloads` (a handoff's free or restore already in Git is not
                                           made again; `hops.restore_hold` after a gap was exceeded)
Called by the phases and by tests/core/test_decide.py (a row per rule) and tests/core/test_invariants.py.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping

from cutover.core import commits, hops, steps
from cutover.core.views import ServiceView
from cutover.errors import InvalidInput
from cutover.plan import Plan

# docs/guarantees.md #3: what cutover ever writes in a cluster (cluster.Cluster has no other write).
CLUSTER_WRITES = ("events", "leases", "applications: the refresh annotation and the notice",
                  "jobs: the nudge after a hook's commit, in cutover's own namespace")


def next_step(observed: steps.Observed, plan: Plan, *, to: str | None = None, hold: str | None = None) -> steps.Step:
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
    going = None if explicit else hops.rolling_back(observed, plan)
    if going is not None:  # a rollback that restored its backend first: the switch back is next
        to = hold = going
    bridged = hops.bridged(observed, plan, to=to, hold=hold, explicit=explicit)
    if bridged is not None:
        return bridged
    wanted = dict(plan.backends[to].selector)
    if dict(observed.in_git) != wanted or hold is not None:
        return _toward(observed, plan, to=to, hold=hold, explicit=explicit)
    if dict(observed.live.selector) != wanted:
        return steps.AwaitApply(to)
    return steps.Verify(to)


def _toward(observed: steps.Observed, plan: Plan, *, to: str, hold: str | None, explicit: bool) -> steps.Step:
    """Git not at `to`: the switch, or first the restore of `to`'s workload."""
    source = commits.backend_of(plan, observed.in_git)
    if to in observed.workloads.freed:  # a backend freed in Git runs no pods to wait for: its workload comes back first
        return steps.Restore(to, to, hold, hops.swapped(observed, plan, source, to))
    restore = None if explicit else hops.restore_unsynced(observed, to)
    return steps.Advance(source, to, hold) if restore is None else steps.AwaitApply(to, restore.sha)


def _after_failed_verification(observed: steps.Observed, plan: Plan, *, to: str,
                               hold: str | None) -> steps.RollBack | steps.Nothing:
    if hold is not None or not plan.rollback_auto:
        return steps.Nothing("verification failed; no rollback (" + ("a rollback is not rolled back" if hold else
                                                                "rollback.auto is off") + ")")
    if observed.last is None:  # the first sync of an install, or a switch made by hand: not ours to undo
        return steps.Nothing("verification failed; no rollback (no cutover commit switched the Service)")
    return steps.RollBack(commits.previous_backend(plan, to, observed.last))


def _hold(observed: steps.Observed, plan: Plan) -> steps.Hold | None:
    """A rollback's hold (on the selector's commit), or a restore's after a gap was exceeded (on the workload's)."""
    held = commits.held_by(observed.last, plan, lifted=observed.hold_lifted)
    if held is not None and observed.last is not None:
        return steps.Hold(held, observed.last.sha, observed.last.author)
    restored = hops.restore_hold(observed, plan)
    if restored is not None and restored.trailers.hold:
        return steps.Hold(restored.trailers.hold, restored.sha, restored.author)
    return None


def presync_step(wanted: Mapping[str, str], live: ServiceView, plan: Plan) -> steps.Gate | steps.Nothing:
    """No selector change in the revision: nothing to gate; a change to no backend of the plan: not ours."""
    if dict(wanted) == dict(live.selector):
        return steps.Nothing("no_change")
    target = commits.backend_of(plan, wanted)
    return steps.Nothing("not_ours") if target is None else steps.Gate(target)


def fleet_swap(plan: Plan, *, live: str | None, freed: Collection[str], started: Collection[str]) -> str | None:
    """A fleet's recreate (docs/fleet.md), its first commit: the revision leaves the Service's selector as it is,
    stops the engine it selects (`live`, among the backends its render stops) and starts one other backend: that
    one, which the fleet's next commit switches to once its gate has proven it. None for any other revision."""
    if not plan.fleet or plan.handoff.strategy != "recreate" or live is None or live not in freed:
        return None
    others = [name for name in started if name != live]
    return others[0] if len(others) == 1 else None


def switch_before_start(plan: Plan, *, leaving: str | None, freed: Collection[str], started: Collection[str],
                        target_pods: int) -> bool:
    """A fleet's commit that switches the Service to a target with no pod yet, which the same sync starts while it
    stops the engine serving now: the gate could only wait for pods that ArgoCD starts after it, and no cluster may
    switch before its own target is proven (docs/fleet.md: the swap first, the switch next)."""
    return plan.fleet and target_pods == 0 and plan.target in started and leaving is not None and leaving in freed


def syncfail_step(observed: steps.Observed, plan: Plan, *,
                  tried: Mapping[str, str] | None = None) -> steps.GiveBack | steps.RollBack | steps.Nothing:
    """A failed sync changes nothing, unless a gap is open (recreate's, or a bridge's that leaves names
    unanswered: the target never became healthy, the card goes back to the source), or rollback.auto and the
    failed sync held a selector it could not apply: then Git goes back to what the Service still selects, so
    ArgoCD is not left retrying a failing revision.

    `tried` is the selector of the revision whose sync failed (Git's head when unknown). From ArgoCD 3.4 SyncFail
    starts at once when an apply fails beside a running hook, so a PostSync may commit its switch while SyncFail
    runs: that commit was never tried, and rolling it back would undo a proven switch for a failure not its own."""
    if plan.fleet:
        return steps.Nothing("a fleet's rollback is the revert of its commit (docs/fleet.md)")
    serving = commits.backend_of(plan, observed.live.selector)
    wanted = commits.backend_of(plan, observed.in_git if tried is None else tried)
    gave_up = hops.origin(observed, plan, serving)
    if gave_up is not None and hops.gap_opened(observed, plan, source=gave_up, to=plan.target) is not None:
        return steps.GiveBack(gave_up, plan.target)
    if not plan.rollback_auto or serving is None or wanted == serving:
        return steps.Nothing("the Service keeps its selector")
    return steps.RollBack(serving)


def rollback_to(observed: steps.Observed, plan: Plan) -> str:
    """Where a manual rollback goes: finish a rollback already in Git (its Job was killed, or it ran twice),
    else back to where the last cutover came from (docs/guarantees.md #5)."""
    now, last = commits.backend_of(plan, observed.in_git), observed.last
    if last is not None and last.trailers.hold and last.trailers.hold == now:
        return now
    hop = commits.bridge_hop(last, plan)
    if hop is not None and hop.trailers.hold and hop.trailers.hold in plan.backends:
        return hop.trailers.hold  # a rollback through the bridge, stopped on it
    to = commits.previous_backend(plan, now, last)
    if (last is None or last.trailers.to != now) and to == plan.target and now != plan.target:
        # No cutover brought Git to `now`: "the other backend" would be the plan's target, the cutover itself.
        raise InvalidInput(f"nothing to roll back: Git selects {now} and no cutover of this plan moved it there; "
                           f"going to {to} would be the cutover, not its rollback", cause="rollback_nothing",
                           hint=f"to stop a pending cutover, set the plan's target to {now}; to switch, use "
                                f"{plan.job('run')}")
    return to


def thread(observed: steps.Observed, plan: Plan, step: steps.Step) -> str | None:
    """The cutover a step belongs to (its `Cutover-Id`, its Slack thread), known before anything of it is said: every
    hop of a path, a re-run and a later Job's verification speak of one cutover. None where no cutover is at work."""
    uid = observed.live.uid
    if isinstance(step, steps.Advance):
        return commits.cutover_id(plan, from_backend=step.source, to_backend=step.toward or step.to, service_uid=uid)
    if isinstance(step, (steps.Restore, steps.Free)) or (isinstance(step, steps.AwaitApply) and step.restore):
        return commits.cutover_id(plan, from_backend=hops.path_source(observed, plan), to_backend=step.to,
                                  service_uid=uid)
    if isinstance(step, (steps.AwaitApply, steps.Verify)) and observed.last is not None:
        return observed.last.trailers.id or None
    return None


def hop(step: steps.Step) -> str | None:
    """Which hop of its cutover a step is: a switch or wait names the backend it goes to, a verification the one it
    checks, a free or restore the backend it changes."""
    if isinstance(step, (steps.Advance, steps.AwaitApply)):
        return step.to
    if isinstance(step, steps.Verify):
        return step.backend
    if isinstance(step, steps.Free):
        return f"free {step.backend}"
    if isinstance(step, steps.Restore):
        return f"restore {step.backend}"
    return None
