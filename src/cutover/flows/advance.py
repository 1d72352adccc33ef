"""Advancing a cutover: under the Service's Lease, wait for the backend on its startup timeline, prove it, and
commit its selector with compare-and-swap, asking the commit gate (docs/guarantees.md #1) right before the write; then
ask ArgoCD to refresh and record an Event. A dry run proves and shows the diff, and writes nothing. Called by the
phases, for a cutover and for a rollback alike.
"""

from __future__ import annotations

import functools

import structlog

from cutover.core import decide, gate, milestones
from cutover.core.results import Advanced, Proven, WouldAdvance
from cutover.core.trailers import Trailers
from cutover.errors import NamesNotProven, TargetNotReady
from cutover.flows import sync, writeback
from cutover.flows.context import Run
from cutover.flows.wait import prove_backend
from cutover.kube import lease

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


async def advance(run: Run, observed: decide.Observed, seen: writeback.Seen | None, step: decide.Advance) -> Advanced:
    """Hold the Lease, wait and prove `step.to`, commit its selector, ask for a refresh."""
    plan, live = run.plan, observed.live
    log.info(milestones.STARTED, source=step.source, to=step.to, dry_run=run.dry_run)
    async with lease.hold(run.cluster, namespace=plan.service.namespace, service=plan.service.name,
                          me=run.identity, now=run.clock.now) as held:
        proofs: list[Proven] = [await prove_backend(run.cluster, plan, plan.backend(step.to), wait=True)]
        await no_foreign_pods(run, step.to)
        ident = decide.cutover_id(plan, from_backend=step.source, to_backend=step.to, service_uid=live.uid)
        structlog.contextvars.bind_contextvars(cutover_id=ident)  # one Slack thread per cutover
        trailers = Trailers(id=ident, source=step.source, to=step.to, plan=plan.name, service_uid=live.uid or None,
                            cluster_ip=live.cluster_ip or None, hold=step.hold)
        result = await writeback.commit_selector(
            run.host, plan, source=run.source, to_backend=step.to, author=run.author, seen=seen,
            text=writeback.message(plan, trailers=trailers, proof=_proof(proofs[-1], run), note=run.source.note),
            before_write=functools.partial(_before_write, run, held, step.to, proofs))
    await sync.refresh(run)
    await run.event(live, "CutoverRolledBack" if step.hold else "CutoverCommitted",
                    f"{step.source} -> {step.to} in {result.sha[:12]}")
    if step.hold:
        log.info(milestones.ROLLED_BACK, source=step.source, to=step.to, commit=result.sha, hold=step.hold)
    return Advanced(step.source, step.to, result.committed, result.sha, result.url, ident)


async def _before_write(run: Run, held: lease.Held, to: str, proofs: list[Proven]) -> None:
    """Right before the write: the Lease is still ours, and docs/guarantees.md #1 holds on the pods the selector picks
    now (prove again once if the proof went stale or pods left Ready since; a pod of another backend is final)."""
    await lease.confirm(run.cluster, held)
    plan = run.plan
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


async def would_advance(run: Run, seen: writeback.Seen, step: decide.Advance) -> WouldAdvance:
    """--dry-run: the proof (not waiting) and the exact diff; nothing written anywhere."""
    plan = run.plan
    log.info(milestones.STARTED, source=step.source, to=step.to, dry_run=True)
    proven = await prove_backend(run.cluster, plan, plan.backend(step.to), wait=False)
    await no_foreign_pods(run, step.to)
    edit = await run.source.edit(seen.version, plan.backend(step.to).selector, where=plan.git.path)
    log.info("cutover.dry_run", source=step.source, to=step.to, would_commit=edit.changed)
    return WouldAdvance(step.source, step.to, proven, edit.diff(plan.git.path), edit.changed)


def _proof(proven: Proven, run: Run) -> writeback.Proof:
    return writeback.Proof(pods=tuple(f"{proof.pod} ({proof.address})" for proof in proven.proofs),
                           names=run.plan.verify.served_names,
                           method=proven.proofs[0].method if proven.proofs else "", waited=proven.waited,
                           proven_at=proven.proven_at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                           table=proven.fitness.table() if proven.fitness else ())
