"""A fleet's step order, kept by a later step's gate (docs/fleet.md, "The order of the steps"): before it proves its
own target, the gate of a cluster that RollingSync steps waits until every Application of the steps before its own
has synced the same revision and proven it (`core.fleet_order`), and refuses at once when one of them failed it.
RollingSync keeps that order itself unless a later step's Application is refreshed first (argo-cd#29410): then the
later cluster's sync starts early and its gate holds it. Best effort: an ApplicationSet or Application it may not
read is said and the gate goes on, judging its own cluster as before. Called by `phases.presync`.
"""

from __future__ import annotations

import asyncio

import structlog

from cutover.argocd import rollout
from cutover.core import fleet_order
from cutover.core.views import ApplicationView
from cutover.errors import ClusterError, TargetNotReady
from cutover.flows.context import Run
from cutover.kube import payloads

POLL = 5.0  # seconds between looks at the earlier steps' Applications

log = structlog.get_logger("cutover")

UNREAD_HINT = ("grant the cutover ServiceAccount get on the ApplicationSet and on its Applications in ArgoCD's "
               "namespace (docs/fleet.md); without it a later step's gate proves its own cluster only, and a step "
               "RollingSync starts early (argo-cd#29410) switches beside the earlier one")


async def after_earlier_steps(run: Run, app: ApplicationView | None, revision: str | None) -> float:
    """Wait, within verify.maxWait, until the steps before this cluster's synced `revision`; the seconds waited
    (the gate's own proof has what is left). Nothing to wait for outside a fleet, without the Application or the
    revision, or for an Application no RollingSync steps."""
    plan = run.plan
    if not plan.fleet or app is None or app.applicationset is None or revision is None:
        return 0.0
    try:
        found = await run.argocd_object("applicationsets", app.namespace, app.applicationset)
    except ClusterError as exc:
        log.warning("fleet.order_unread", applicationset=app.applicationset, error=exc.message, cause=exc.cause,
                    hint=UNREAD_HINT)
        return 0.0
    earlier = rollout.earlier_steps(found or {}, app.name)
    if not earlier:
        return 0.0
    started = run.clock.monotonic()
    waiting: tuple[str, ...] = ()
    while True:
        try:
            read = await asyncio.gather(*(_application(run, app.namespace, name) for name in earlier))
            standing = fleet_order.standing(read, revision)
        except ClusterError as exc:
            log.warning("fleet.order_unread", applications=list(earlier), error=exc.message, cause=exc.cause,
                        hint=UNREAD_HINT)
            return run.clock.monotonic() - started
        waited = run.clock.monotonic() - started
        if standing.failed:
            raise TargetNotReady(
                f"an earlier step's sync of {revision[:7]} failed: {'; '.join(standing.failed)}",
                cause="earlier_step_failed",
                hint="this cluster switches after the steps before it (RollingSync started it early, argo-cd#29410); "
                     "once their sync passes, RollingSync syncs this step again (docs/fleet.md)")
        if standing.ready:
            if waiting:
                log.info("fleet.earlier_steps_done", applications=list(earlier), waited=round(waited, 1))
            return waited
        if standing.waiting != waiting:
            waiting = standing.waiting
            log.info("fleet.earlier_steps_waiting", revision=revision[:7], waiting=list(waiting),
                     hint="RollingSync started this step before the steps before it synced the revision "
                          "(argo-cd#29410): this cluster's switch waits for them (docs/fleet.md)")
        if waited >= plan.verify.max_wait:
            raise TargetNotReady(
                f"the steps before this cluster's did not sync {revision[:7]} within verify.maxWait "
                f"({plan.verify.max_wait:g}s): {'; '.join(waiting)}", cause="earlier_step_unfinished",
                hint="see where the fleet stands (cutover status --fleet); RollingSync syncs this step again once "
                     "the steps before it are done")
        await asyncio.sleep(min(POLL, plan.verify.max_wait - waited))


async def _application(run: Run, namespace: str, name: str) -> ApplicationView:
    """An earlier step's Application with the revisions of the plan's source; one not made yet waits."""
    found = await run.argocd_object("applications", namespace, name)
    if found is None:
        return ApplicationView(namespace=namespace, name=name, sync_status="not made yet", sync_revision=None,
                               health=None, operation_phase=None, operation_revision=None, operation_started=None,
                               operation_finished=None, refresh_requested=False)
    return payloads.application_view(found).for_source(run.plan.git.url, run.plan.git.branch)
