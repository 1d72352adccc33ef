"""`cutover run` and `cutover rollback` (docs/commands.md): a whole cutover outside a sync, in one Job. Each hop is
decided on a fresh look at Git (`decide.next_step`, as PostSync's), taken with the same pieces (`advance`), and the
Job waits for ArgoCD to apply what it committed (`sync.await_applied`), then verifies through the Service.

ArgoCD runs cutover's hooks in the syncs of the Job's own commits, and those hooks take the path's next hops too (a
rollback through a bridge is finished by PostSync). However fast they go, the Job follows: a Service already at the
path's end is past the hop it waited for, and the Service's Lease held by a hook once the Job has written is a hop
under way, waited for and looked at again, not a failure. Called by the CLI.
"""

from __future__ import annotations

import asyncio

import structlog

from cutover.core import decide, milestones, steps
from cutover.core.results import Advanced, Completed, Result
from cutover.errors import LockHeld
from cutover.flows import advance, phases, sync, writeback
from cutover.flows.context import Run
from cutover.kube import lease_rules

log = structlog.get_logger("cutover")

# at most: switch to a bridge, see it applied, free the source (restoring the target), switch, and one more
# look: never a loop
HOPS = 6


async def run(run: Run, *, to: str | None = None) -> Result:
    """A whole cutover outside a sync: wait, prove, commit, wait for ArgoCD to apply it, verify.
    An explicit run ignores a rollback's hold: it is how a person lifts it."""
    run.bind("run")
    observed, seen = await phases.observe(run)
    return await _run(run, observed, seen, to=to or run.plan.target)


async def rollback(run: Run) -> Result:
    """Back to the backend the last cutover left, by the same guarded path, then hold there."""
    run.bind("rollback")
    observed, seen = await phases.observe(run)
    previous = decide.rollback_to(observed, run.plan)
    return await _run(run, observed, seen, to=previous, hold=previous)


async def _run(run: Run, observed: steps.Observed, seen: writeback.Seen, *, to: str,
               hold: str | None = None) -> Result:
    plan, loop = run.plan, asyncio.get_running_loop()
    commit, committed_at, wrote, taken = None, None, False, 0
    follow_until: float | None = None
    while taken < HOPS:  # the hops of a handoff (docs/capacity.md), each decided on a fresh look at Git
        taken += 1
        step = decide.next_step(observed, plan, to=to, hold=hold)
        phases.in_thread(observed, plan, step)
        if run.dry_run and isinstance(step, steps.Advance):
            return await advance.would_advance(run, seen, step)
        if run.dry_run and isinstance(step, (steps.Restore, steps.Free)):
            return await advance.would_make_room(run, step)
        try:
            if isinstance(step, (steps.Restore, steps.Free)):
                await phases.bridge_carries(run, observed, seen)
                await advance.make_room(run, observed, step)
                wrote = True
            elif isinstance(step, steps.AwaitApply) and step.to != to and observed.last is not None:
                # the bridge: ArgoCD applies it (and the bridge is checked) before anything is freed
                last = observed.last
                await sync.await_applied(run, to=step.to, commit=last.sha, path_end=to,
                                         committed_at=committed_at or last.date or run.clock.now())
            elif isinstance(step, steps.Advance):
                done = await advance.hop(run, observed, seen, step)
                wrote = True
                if isinstance(done, Advanced):
                    # When the commit landed, not when the run began: the wait before it may have taken 30 minutes,
                    # and an operation that began during that wait is one that can end without our commit
                    # (argo-cd#21902).
                    commit, committed_at = done.sha, run.clock.now()
                    if done.to == to:
                        break
            else:
                break
        except LockHeld as held:
            follow_until = _following(held, wrote=wrote, until=follow_until, now=loop.time())
            taken -= 1  # a hop under way in a hook is no hop of ours
            await asyncio.sleep(lease_rules.POLL)
        observed, seen = await phases.observe(run)
    if commit is None:
        commit = observed.last.sha if observed.last else ""
        committed_at = observed.last.date if observed.last and observed.last.date else run.clock.now()
    assert committed_at is not None
    started = loop.time()
    await sync.await_applied(run, to=to, commit=commit, committed_at=committed_at)
    log.info(milestones.SYNCED, commit=commit[:12], waited=round(loop.time() - started))
    after, _ = await phases.observe(run)
    verified = await phases.verified_switch(run, after, None, backend=to, to=to, hold=hold)
    if hold:
        log.info(milestones.HELD, on=hold, commit=commit[:12], hint=run.plan.resume(hold))
    log.info(milestones.COMPLETED, to=to, commit=commit[:12])
    return Completed(verified, commit, to)


def _following(held: LockHeld, *, wrote: bool, until: float | None, now: float) -> float:
    """The Service's Lease held by another: before this Job wrote anything, another cutover runs (exit 8, as
    ever); after, the hook of a sync of this Job's commit takes the path's next hop, followed for as long as ArgoCD's
    apply is (`sync.SYNC_WAIT`). A Lease taken from under this Job is never followed."""
    if not wrote or held.cause == "lock_lost" or (until is not None and now >= until):
        raise held
    log.info("run.following", reason=held.message,
             hint="a hook of ArgoCD's sync of this run's commit takes the next hop; looked at again once it ends")
    return until if until is not None else now + sync.SYNC_WAIT
