"""Asking ArgoCD to look at Git now, and waiting until it has applied our commit; the rules are `argocd.operation`'s.

A refresh is the annotation `argocd.argoproj.io/refresh: normal` on the Application (ArgoCD removes it once
it has refreshed); a failed request only logs, since ArgoCD polls Git every few minutes anyway. Waiting for
the apply polls the live Service and the Application: done when the Service selects the backend and the
Application is healthy and idle; an operation that began before our commit and ended without it is refreshed
again (argo-cd#21902). Called by the phases.
"""

from __future__ import annotations

import asyncio
from datetime import datetime

import structlog

from cutover.argocd import operation
from cutover.core import commits
from cutover.core.views import ApplicationView
from cutover.errors import ClusterError, SyncTimeout
from cutover.flows.context import Run, read_application
from cutover.kube import nudge_job
from cutover.plan import ArgoCD

SYNC_WAIT = 600.0  # seconds `run` and `rollback` give ArgoCD to apply their commit
SYNC_POLL = 10.0  # seconds between looks at the Service and the Application while waiting for that

log = structlog.get_logger("cutover")


async def refresh(run: Run) -> None:
    """Ask ArgoCD to compare with Git now, unless one of its operations is running (a hook's commit, mostly): from
    ArgoCD 3.4 a comparison with the new revision during an operation makes the sync that follows a self-heal of the
    changed objects only, without hooks (argo-cd#27875; seen on v3.5.3: no PreSync gate, no PostSync verification).
    ArgoCD compares with Git itself when its operation ends, and syncs the commit, hooks and all. `refresh: always`
    asks even then: with the fixed self-heal delay (docs/install.md) that comparison is followed by a full sync."""
    plan = run.plan
    if plan.argocd is None or not plan.argocd.refresh or run.dry_run:
        return
    try:
        if run.api is not None:  # no write permission on the Application needed (docs/security.md)
            phase = await run.api.operation_phase()
            if not _deferred(plan.argocd, phase):
                await run.api.refresh()
                log.info("argocd.refresh_requested", application=plan.argocd.application, via="api", operation=phase)
                return
            await nudge(run)
            return
        app = await run.cluster.application(plan.argocd.namespace, plan.argocd.application)
        if _deferred(plan.argocd, app.operation_phase):
            await nudge(run)
            return
        await run.cluster.request_refresh(plan.argocd.namespace, plan.argocd.application,
                                          hydrate=app.hydrator is not None)
        log.info("argocd.refresh_requested", application=plan.argocd.application, operation=app.operation_phase)
    except ClusterError as exc:  # ArgoCD polls Git every few minutes anyway
        log.warning("argocd.refresh_failed", error=exc.message, cause=exc.cause, hint=exc.hint)


async def nudge(run: Run) -> None:
    """A hook's commit, pushed while the hook's own operation runs: the nudge Job (`cutover nudge`, made from the
    workload's audit CronJob) outlives the operation, asks for the refresh once it has ended and sees the sync start
    (docs/sources.md, "After the hook"). Without it ArgoCD syncs the commit at its next look at Git, minutes later
    under its defaults. Best effort: a nudge that cannot be made is said, and ArgoCD still polls."""
    cronjob = nudge_job.audit_cronjob(run.hook_job)
    if cronjob is None:
        return  # not a hook of the Component: a run by hand refreshes itself once no operation runs
    namespace = run.cluster.own_namespace
    try:
        found = await run.cluster.cronjob(namespace, cronjob)
        if found is None:
            log.warning("argocd.nudge_unmade", cronjob=f"{namespace}/{cronjob}", hint="the hooks Component ships "
                        "the audit CronJob this nudge is made from: ArgoCD syncs the commit at its next look at Git")
            return
        job = nudge_job.nudge_job(found, name=nudge_job.job_name(cronjob, int(run.clock.now().timestamp())))
        made = await run.cluster.create_job(job)
    except ClusterError as exc:  # ArgoCD polls Git every few minutes anyway
        log.warning("argocd.nudge_unmade", error=exc.message, cause=exc.cause,
                    hint="grant the cutover ServiceAccount get on cronjobs and create on jobs in its namespace "
                         "(manifests/namespace/role-cutover.yaml); ArgoCD syncs the commit at its next look at Git")
        return
    log.info("argocd.nudge_made", job=f"{namespace}/{job['metadata']['name']}", made=made)


def _deferred(argocd: ArgoCD, phase: str | None) -> bool:
    if not operation.refresh_waits(phase, always=argocd.refresh_always):
        return False
    log.info("argocd.refresh_deferred", application=argocd.application, operation=phase,
             reason="ArgoCD compares with Git when its operation ends; a refresh now would sync the commit without "
                    "hooks (argo-cd#27875)", hint="with the fixed self-heal delay, `argocd.refresh: always` asks now "
                                                  "(docs/install.md)")
    return True


async def application(run: Run) -> ApplicationView | None:
    """The plan's Application with the revisions of the plan's source, or None (no `argocd:` in the plan, or
    unreadable: said in the log)."""
    try:
        return await _application(run)
    except ClusterError as exc:
        log.warning("argocd.unreadable", error=exc.message, cause=exc.cause, hint=exc.hint)
        return None


async def _application(run: Run) -> ApplicationView | None:
    plan = run.plan
    if plan.argocd is None:
        return None
    app = await read_application(run.cluster, run.api, plan.argocd)
    return app.for_source(plan.git.url, plan.git.branch)


async def await_applied(run: Run, *, to: str, commit: str, committed_at: datetime,
                        path_end: str | None = None) -> None:
    """Until the live Service selects `to` (ArgoCD applied our commit) and the Application is healthy. `path_end`:
    `to` is a hop on a path (a bridge) that ends there, and the hooks of ArgoCD's syncs take the path's hops too:
    a Service that selects the path's end already is past `to`, however briefly it selected `to` between looks."""
    plan = run.plan
    loop = asyncio.get_running_loop()
    deadline = loop.time() + SYNC_WAIT
    target = dict(plan.backend(to).selector)
    end = dict(plan.backend(path_end).selector) if path_end is not None else None
    while True:
        live = await run.cluster.service(plan.service.namespace, plan.service.name)
        app = await _application(run)
        if dict(live.selector) == target and (app is None or (app.health == "Healthy" and
                                                              app.operation_phase != "Running")):
            return
        if end is not None and dict(live.selector) == end:
            log.info("argocd.path_ahead", commit=commit[:12], hop=to, live=path_end)
            return
        if app is not None:
            await _judged(run, app, commit=commit, committed_at=committed_at)
        if loop.time() + SYNC_POLL > deadline:
            raise SyncTimeout(f"ArgoCD did not apply {commit[:12]} within {SYNC_WAIT:.0f}s",
                              hint="check the Application in ArgoCD; re-run to continue from where this stopped")
        log.info("argocd.waiting", commit=commit[:12], live=commits.backend_of(plan, live.selector))
        await asyncio.sleep(SYNC_POLL)


async def _judged(run: Run, app: ApplicationView, *, commit: str, committed_at: datetime) -> None:
    revision = operation.applied_revision(app, commit)
    if revision is None:  # the Source Hydrator has yet to render our dry commit to the sync branch
        hydrator = app.hydrator
        log.info("argocd.hydrating", commit=commit[:12], phase=hydrator.phase if hydrator else None,
                 hydrating=(hydrator.dry_sha or "")[:12] if hydrator else None)
        return
    state = operation.judge_sync(app, revision=revision, committed_at=committed_at)
    if state is operation.SyncState.FAILED:
        waits = f"; the operation runs on ({app.operation_message}) and no other sync starts until it ends: " \
                f"argocd app terminate-op {app.name}" if app.failed_waiting else ""
        raise SyncTimeout(app.failure(), cause="argocd_sync_failed",
                          hint=f"read the operation's message: argocd app get {app.name}{waits}")
    if state is operation.SyncState.REFRESH_AGAIN:
        log.info("argocd.refresh_again", commit=commit[:12], hint="an older operation ended without it")
        await refresh(run)
