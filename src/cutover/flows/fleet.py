"""A fleet's cluster (docs/fleet.md): the fleet's engine writes one commit for every cluster and syncs them step by
step; cutover gates each cluster's sync (the PreSync, `phases.presync`, aimed at the backend the revision selects)
and verifies it in the Sync phase, in a wave after the Service and the engines, so that a failed verification fails
the sync before the wave that marks it done, and the engine's step stalls on this cluster. Nothing here commits: the
rollback is the revert of the fleet's commit, which each cluster's gate proves on its way back.
"""

from __future__ import annotations

import dataclasses

import structlog

from cutover.argocd import rollout, tracking
from cutover.core import commits, decide
from cutover.core.results import Dark, Unowned, Verified
from cutover.core.trailers import Trailers
from cutover.errors import ClusterError, CutoverError, InvalidInput, VerificationFailed
from cutover.flows import starting, verification
from cutover.flows.context import Run
from cutover.flows.phases import synced_selector, syncing
from cutover.kube.cluster import Cluster
from cutover.plan import Plan

log = structlog.get_logger("cutover")


async def own_application(cluster: Cluster, plan: Plan, *, job: str | None, namespace: str | None) -> Plan:
    """A fleet's plan, one for every cluster, may name no Application (`argocd.application`): the hook's own Job
    says which, in the tracking ArgoCD wrote on it when it created the hook (`tracking.application_of`). Without it
    (outside a hook, no tracking, the Job unreadable) the plan goes on with no Application, and the revision synced
    is the branch head's, said by the phase that reads it."""
    if not plan.fleet or plan.argocd is None or plan.argocd.application:
        return plan
    body = None
    if job and namespace:
        try:
            body = await cluster.job(namespace, job)
        except ClusterError as exc:
            log.warning("argocd.application_unread", job=job, error=exc.message, cause=exc.cause, hint=exc.hint)
    found = tracking.application_of(body.get("metadata") or {}, controller_namespace=plan.argocd.namespace) \
        if body else None
    if found is None:
        log.warning("argocd.application_unknown", job=job,
                    hint="a fleet's plan names no argocd.application and this is no hook ArgoCD created (its "
                         "tracking names the Application): the revision synced is read from the branch head")
        return dataclasses.replace(plan, argocd=None)
    application_namespace, name = found
    log.info("argocd.application_found", application=name, namespace=application_namespace, job=job)
    return dataclasses.replace(plan, argocd=dataclasses.replace(plan.argocd, application=name,
                                                                namespace=application_namespace))


async def verify_synced(run: Run, *, job_name: str | None) -> Verified | Unowned | Dark:
    """`cutover verify --synced`, a Sync-phase hook: the revision being synced selects a backend of the plan, the
    live Service selects exactly that (ArgoCD applied it in an earlier wave), and the switch checks out as a
    PostSync's verification has it (the Service's endpoints are that backend's Ready pods, every served name answered
    through every port by its engine). VerificationFailed (exit 6) otherwise; a selector of no backend is not
    cutover's to verify (said, exit 0), as the gate lets it pass."""
    run.bind("verify")
    plan = run.plan
    app, ref, shown = await syncing(run, job_name, phase="verify")
    wanted = await synced_selector(run, app, ref)
    backend = commits.backend_of(plan, wanted)
    if backend is None:
        log.warning("verify.unknown_selector", revision=shown, selector=dict(wanted),
                    hint="the selector in Git is no backend of the plan: not ours to verify")
        return Unowned(shown, "verified")
    if plan.fleet:
        run = dataclasses.replace(run, plan=plan.aimed(backend))
    live = await run.cluster.service(plan.service.namespace, plan.service.name)
    if dict(live.selector) != dict(wanted):
        raise VerificationFailed(
            f"the Service selects {commits.backend_of(plan, live.selector) or dict(live.selector)}, the revision "
            f"{shown} selects {backend}", cause="switch_not_applied",
            hint="this hook runs in a wave after the Service (argocd.argoproj.io/sync-wave 1000): give the Service an "
                 "earlier wave, and keep it in the Application this hook belongs to (docs/fleet.md)")
    if run.plan.handoff.strategy == "recreate":  # a swap's sync leaves the selector on the engine it stopped
        dark = await _swapped(run, ref, backend, shown)
        if dark is not None:
            return dark
    log.info("verify.synced", revision=shown, backend=backend)
    verified = await verification.verify(run, live, Trailers(), backend)
    return dataclasses.replace(verified, same_object=False)  # no commit of cutover's recorded the Service before


async def _swapped(run: Run, ref: str | None, backend: str, shown: str) -> Dark | None:
    """A fleet's recreate, its first commit (`decide.fleet_swap`): the Service still selects `backend`, which that
    revision stopped, so there is nothing to verify until the fleet's next commit switches to the backend it
    started, which that commit's gate proves first. Said, and not a failure: the step goes on."""
    plan = run.plan
    try:
        docs = await starting.judged(run.host, run.source, plan, await run.host.read(plan.git.path, ref=ref),
                                     ref=ref)
    except CutoverError as exc:  # unrendered: verified as any switch (a stopped engine fails that, said there)
        log.warning("sync_order.unread", error=exc.message, cause=exc.cause, hint=exc.hint)
        return None
    freed, started = starting.swap(docs, plan)
    to = decide.fleet_swap(plan, live=backend, freed=freed, started=started)
    if to is None:
        return None
    log.info("handoff.dark_until_switch", source=backend, to=to, max_gap=plan.handoff.max_gap, revision=shown,
             hint=f"the fleet's next commit switches the Service to {to} once it runs (docs/fleet.md)")
    return Dark(shown, backend, to)


async def steps(cluster: Cluster, *, namespace: str, name: str) -> list[rollout.ClusterStep]:
    """`cutover status --fleet`: where the fleet's change stands in each cluster, read on the cluster ArgoCD runs in:
    the ApplicationSet's step and status per Application, its sync and health, and what cutover's hooks said."""
    found = await cluster.argocd_object("applicationsets", namespace, name)
    if found is None:
        raise InvalidInput(f"--fleet: expected an ApplicationSet {namespace}/{name}, found none",
                           hint="name the ApplicationSet that generates the clusters' Applications (NAMESPACE/NAME, "
                                "argocd by default), on the cluster ArgoCD runs in (--context)")
    names = [str(entry.get("application") or "") for entry in (found.get("status") or {}).get("applicationStatus")
             or ()]
    applications = {app: body for app in names if (body := await cluster.argocd_object("applications", namespace,
                                                                                         app)) is not None}
    return rollout.steps_of(found, applications)
