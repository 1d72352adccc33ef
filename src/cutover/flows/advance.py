"""Advancing a cutover: under the Service's Lease, wait for the backend on its startup timeline, prove it, and
commit its selector with compare-and-swap, asking the commit gate (docs/guarantees.md #1) right before the write; then
ask ArgoCD to refresh and record an Event. A dry run proves and shows the diff, and writes nothing. Called by the
phases, for a cutover and for a rollback alike.
"""

from __future__ import annotations

import functools

import structlog

from cutover.core import commits, gate, hops, milestones, steps
from cutover.core.results import Advanced, Freed, Proven, Restored, WouldAdvance
from cutover.core.trailers import Trailers
from cutover.core.views import Commit
from cutover.errors import CutoverError, NamesNotProven, TargetNotReady
from cutover.flows import handoff, sync, writeback
from cutover.flows.context import Run
from cutover.flows.wait import prove_backend
from cutover.kube import lease
from cutover.plan import Plan

log = structlog.get_logger("cutover")


async def no_foreign_pods(run: Run, target: str) -> None:
    """Guarantee 1, early: the new selector must pick none of another backend's pods."""
    plan = run.plan
    selected, _ = await run.cluster.pods(plan.service.namespace, plan.backend(target).selector)
    _refuse_foreign(gate.foreign(selected, target=target, backends=_selectors(run)), target)


def _selectors(run: Run) -> dict[str, dict[str, str]]:
    return {name: dict(backend.selector) for name, backend in run.plan.backends.items()}


def _refuse_foreign(found: tuple[tuple[str, str], ...], target: str) -> None:
    if found:
        raise NamesNotProven(
            f"the {target} selector also picks pods of backend {found[0][1]}: {', '.join(pod for pod, _ in found)}",
            cause="selector_overlap",
            hint=f"make the {target} selector pick only its own pods (add a distinguishing label)")


async def advance(run: Run, observed: steps.Observed, seen: writeback.Seen | None, step: steps.Advance) -> Advanced:
    """Hold the Lease, wait and prove `step.to`, commit its selector, ask for a refresh. Never frees a backend:
    what a rollback and SyncFail use to go back to what still runs."""
    result = await hop(run, observed, seen, step, may_free=False)
    assert isinstance(result, Advanced)
    return result


async def hop(run: Run, observed: steps.Observed, seen: writeback.Seen | None, step: steps.Advance, *,
              may_free: bool = True) -> Advanced | Freed:
    """`advance`, as one hop of a handoff (docs/capacity.md): where the target fits only once the source is gone and
    the strategy frees it (`hops.on_capacity_held`), the source is drained and freed instead (the next hop waits);
    while a gap is open (`hops.gap_opened`) the wait is bounded by what is left of handoff.maxGap, and a target
    not proven in it restores the source (`handoff.gap_failed`)."""
    plan, live = run.plan, observed.live
    proving = plan.for_bridge() if step.toward is not None else plan  # the hop to a bridge: its names only
    log.info(milestones.BRIDGING if step.toward else milestones.STARTED, source=step.source, to=step.to,
             toward=step.toward, dry_run=run.dry_run)
    opened = hops.gap_opened(observed, plan, source=step.source, to=step.to)
    deadline = _gap_deadline(run, opened)
    freed_source = opened is not None or (step.bridge is not None and step.source in observed.workloads.freed)
    async with lease.hold(run.cluster, namespace=plan.service.namespace, service=plan.service.name,
                          me=run.identity, now=run.clock.now) as held:
        confirm = functools.partial(lease.confirm, run.cluster, held)
        freed: Freed | None = None
        try:
            proofs: list[Proven] = [await prove_backend(
                run.cluster, proving, plan.backend(step.to), wait=True, source_freed=freed_source,
                budget=None if deadline is None else deadline - run.clock.monotonic())]
            await no_foreign_pods(run, step.to)
        except CutoverError as exc:
            free = hops.on_capacity_held(observed, plan, source=step.source, to=step.to) \
                if may_free and exc.cause == "capacity_held_by_source" else None
            if free is not None:
                freed = await handoff.free(run, observed, free, before_write=confirm)
            elif opened is not None and step.source is not None and deadline is not None:
                raise await handoff.gap_failed(run, observed, opened, exc, source=step.source, to=step.to,
                                               deadline=deadline, before_write=confirm) from exc
            else:
                _bridge_serves(run, observed, step, exc)
                raise
        else:
            ident = commits.cutover_id(plan, from_backend=step.source, to_backend=step.toward or step.to,
                                      service_uid=live.uid)
            structlog.contextvars.bind_contextvars(cutover_id=ident)  # one Slack thread per cutover, bridge or not
            trailers = Trailers(id=ident, source=step.source, to=step.to, plan=plan.name,
                                service_uid=live.uid or None, cluster_ip=live.cluster_ip or None, hold=step.hold,
                                bridge=step.bridge, toward=step.toward)
            result = await writeback.commit_selector(
                run.host, plan, source=run.source, to_backend=step.to, author=run.author, seen=seen,
                text=writeback.message(proving, trailers=trailers, proof=_proof(proofs[-1], proving),
                                       note=run.source.note),
                before_write=functools.partial(_before_write, run, held, step.to, proofs, proving))
    await sync.refresh(run)
    if freed is not None:
        return freed
    await _committed(run, observed, step, result.sha)
    return Advanced(step.source, step.to, result.committed, result.sha, result.url, ident, step.toward)


async def _committed(run: Run, observed: steps.Observed, step: steps.Advance, sha: str) -> None:
    via = f" toward {step.toward}" if step.toward else f" (bridged by {step.bridge})" if step.bridge else ""
    reason = "CutoverRolledBack" if step.hold and step.hold == step.to else \
        "CutoverBridged" if step.toward else "CutoverCommitted"
    await run.event(observed.live, reason, f"{step.source} -> {step.to}{via} in {sha[:12]}")
    if step.toward:
        log.info(milestones.BRIDGED, source=step.source, bridge=step.to, toward=step.toward, commit=sha,
                 names=list(run.plan.handoff.bridge_names))
    elif step.hold:
        log.info(milestones.ROLLED_BACK, source=step.source, to=step.to, commit=sha, hold=step.hold)


def _bridge_serves(run: Run, observed: steps.Observed, step: steps.Advance, exc: CutoverError) -> None:
    """The last hop of a bridged path failed: nothing is rolled back, since the bridge serves the bridged names and
    the source is freed; say so, and how to go back."""
    if step.bridge is None or step.toward is not None or step.source not in observed.workloads.freed:
        return
    log.warning("handoff.bridge_serving", bridge=step.bridge, to=step.to, cause=exc.cause,
                names=list(run.plan.handoff.bridge_names),
                hint=f"the bridge {step.bridge} keeps serving {', '.join(run.plan.handoff.bridge_names)}; fix "
                     f"{step.to} and sync again, or run {run.plan.job('rollback')} to bring {step.source} back")


def _gap_deadline(run: Run, opened: Commit | None) -> float | None:
    """The loop time by which the target must be proven: handoff.maxGap after the free commit that opened the gap
    (its date in Git: the deadline outlives the Job that made it)."""
    if opened is None:
        return None
    # a plan no longer on recreate (changed while the gap was open) still bounds it, by the startup budget
    max_gap = run.plan.handoff.max_gap if run.plan.handoff.max_gap is not None else run.plan.verify.max_wait
    spent = (run.clock.now() - opened.date).total_seconds() if opened.date is not None else 0.0
    return run.clock.monotonic() + max_gap - max(0.0, spent)


async def make_room(run: Run, observed: steps.Observed, step: steps.Restore | steps.Free) -> Restored | Freed:
    """A hop of a handoff that is no switch, under the Service's Lease, then a refresh: ArgoCD applies it in one
    sync. `Restore`: a freed backend's workload written back (the backend it replaces drained and freed first, in
    the same commit, when the strategy frees it); `Free`: a backend drained and freed (strategy bridge, once the
    bridge carries the Service)."""
    plan = run.plan
    async with lease.hold(run.cluster, namespace=plan.service.namespace, service=plan.service.name,
                          me=run.identity, now=run.clock.now) as held:
        confirm = functools.partial(lease.confirm, run.cluster, held)
        if isinstance(step, steps.Free):
            done: Restored | Freed = await handoff.free(run, observed, step, before_write=confirm,
                                                        serving=step.serving)
        else:
            if step.free is not None:
                await handoff.free(run, observed, steps.Free(step.free, step.to), before_write=confirm,
                                   serving=step.drain)
            done = await handoff.restore(run, observed, step, before_write=confirm)
    await sync.refresh(run)
    return done


async def _before_write(run: Run, held: lease.Held, to: str, proofs: list[Proven], plan: Plan) -> None:
    """Right before the write: the Lease is still ours, and docs/guarantees.md #1 holds on the pods the selector picks
    now (prove again once if the proof went stale or pods left Ready since; a pod of another backend is final)."""
    await lease.confirm(run.cluster, held)
    for attempt in range(2):
        selected, _ = await run.cluster.pods(plan.service.namespace, plan.backend(to).selector)
        proven = {proof.pod: proofs[-1].proven_at for proof in proofs[-1].proofs}
        verdict = gate.judge(selected, target=to, backends=_selectors(run), proven=proven, now=run.clock.now(),
                             min_ready=plan.verify.min_ready_pods)
        _refuse_foreign(verdict.foreign, to)
        if verdict.open:
            return
        if attempt:
            raise TargetNotReady(f"backend {to} changed after its proof: {verdict.short}", cause="target_changed",
                                 hint="the target's pods are not steady; look at their restarts and probes")
        proofs.append(await prove_backend(run.cluster, plan, plan.backend(to), wait=False))


async def would_make_room(run: Run, step: steps.Restore | steps.Free) -> Restored | Freed:
    """--dry-run of a restore or a free: said, nothing written."""
    if isinstance(step, steps.Free):
        log.info("cutover.dry_run", free=step.backend, to=step.to)
        return Freed(step.backend, step.to, False, "", None, {}, dry_run=True)
    log.info("cutover.dry_run", restore=step.backend, free=step.free, to=step.to)
    return Restored(step.backend, step.to, False, "", None, None, dry_run=True)


async def would_advance(run: Run, seen: writeback.Seen, step: steps.Advance) -> WouldAdvance:
    """--dry-run: the proof (not waiting) and the exact diff; nothing written anywhere."""
    plan = run.plan
    log.info(milestones.BRIDGING if step.toward else milestones.STARTED, source=step.source, to=step.to,
             toward=step.toward, dry_run=True)
    proving = plan.for_bridge() if step.toward is not None else plan
    proven = await prove_backend(run.cluster, proving, plan.backend(step.to), wait=False)
    await no_foreign_pods(run, step.to)
    edit = await run.source.edit(seen.version, plan.backend(step.to).selector, where=plan.git.path)
    log.info("cutover.dry_run", source=step.source, to=step.to, would_commit=edit.changed)
    return WouldAdvance(step.source, step.to, proven, edit.diff(plan.git.path), edit.changed)


def _proof(proven: Proven, plan: Plan) -> writeback.Proof:
    return writeback.Proof(pods=tuple(f"{proof.pod} ({proof.address})" for proof in proven.proofs),
                           names=plan.verify.served_names,
                           method=proven.proofs[0].method if proven.proofs else "", waited=proven.waited,
                           proven_at=proven.proven_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                           table=proven.fitness.table() if proven.fitness else ())
