"""A `Run`: everything one plan's command works with, passed as one value instead of a hidden contextvar and
half a dozen parameters: the cluster, the plan, the Git host and the selector source, who holds the Lease, who
authors commits, the clock, and whether this is a dry run (docs/commands.md: no commit, no Lease, no refresh, no Event).

Its one behaviour is the best-effort Event (docs/guarantees.md #7: it never changes an outcome, never waits over 5 s).
Built by the CLI (and the demo and tests); used by the phases, `verification` and `sync`.
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import structlog

from cutover import sources
from cutover.argocd import operation
from cutover.argocd.api import ArgoCDApi
from cutover.core.clock import Clock
from cutover.core.repository import Author, GitHost
from cutover.core.views import ApplicationView, ServiceView
from cutover.errors import ClusterError
from cutover.flows.argocd_render import ApiChecked
from cutover.kube import payloads
from cutover.kube.cluster import Cluster
from cutover.plan import ArgoCD, Plan

SIDE_EFFECT_BUDGET = 5.0  # seconds an Event may take; it never changes the outcome (docs/guarantees.md #7)

log = structlog.get_logger("cutover")


@dataclasses.dataclass(frozen=True)
class Run:
    cluster: Cluster
    plan: Plan
    host: GitHost
    source: sources.Source
    identity: str  # the Lease holder: the pod's name in a Job
    author: Author
    clock: Clock
    dry_run: bool = False
    api: ArgoCDApi | None = None  # the ArgoCD API, with argocd.server: refreshes and renders through it
    hook_job: str | None = None  # the hook Job this runs in (CUTOVER_JOB_NAME): a commit made in it is nudged
    muted: list[str] = dataclasses.field(default_factory=list)  # the Event whose write found the API silent, if any

    @classmethod
    def create(cls, cluster: Cluster, plan: Plan, host: GitHost, *, identity: str = "cutover",
               author: Author | None = None, dry_run: bool = False, api: ArgoCDApi | None = None,
               hook_job: str | None = None) -> Run:
        """Inside the event loop (the clock follows it)."""

        async def application() -> ApplicationView | None:  # read when first needed
            if plan.argocd is None:
                return None
            try:
                return await read_application(cluster, api, plan.argocd)
            except ClusterError as exc:
                log.warning("argocd.unreadable", error=exc.message, cause=exc.cause, hint=exc.hint)
                return None

        async def locate() -> str | None:  # the directory the Application renders
            app = await application()
            found = app.source_path(plan.git.url, plan.git.branch) if app else None
            return operation.repository_path(found, what="the Application's source path") \
                if found is not None else None

        async def position() -> int | None:  # the plan's source among a multi-source Application's
            app = await application()
            return app.position(plan.git.url, plan.git.branch) if app and app.sources else None

        source = sources.for_plan(plan, host=host, locate=locate)
        if api is not None and not sources.SOURCES[plan.git.source].renders_itself:
            source = ApiChecked(source, api, host, plan, position)  # ArgoCD renders what cutover cannot
        return cls(cluster, plan, host, source, identity, author or Author(plan.git.author.name,
                                                                          plan.git.author.email),
                   Clock(), dry_run, api, hook_job)

    async def argocd_object(self, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        """One of ArgoCD's objects (an Application, an ApplicationSet): through the Kubernetes API where ArgoCD runs
        in this cluster, else, with argocd.server, through ArgoCD's API (a fleet's spoke cluster, whose Application
        lives on the hub: docs/fleet.md). None when neither holds it; ClusterError when the one asked last refused."""
        return await _argocd_object(self.cluster, self.api, plural, namespace, name)

    def bind(self, phase: str) -> None:
        """Name the Service, the plan and the phase on every event of this task (Slack threads by them)."""
        structlog.contextvars.bind_contextvars(service=f"{self.plan.service.namespace}/{self.plan.service.name}",
                                               cutover=self.plan.name, phase=phase)

    async def event(self, service: ServiceView, reason: str, message: str, *, warning: bool = False) -> None:
        """A Kubernetes Event on the Service, best effort; none in a dry run. One that found the Events API silent
        (its budget spent) mutes the rest of the run's: reporting holds the exit once, never once per Event."""
        if self.dry_run or self.muted:
            return
        try:
            async with asyncio.timeout(SIDE_EFFECT_BUDGET):
                await self.cluster.record_event(service, reason=reason, message=message, warning=warning,
                                                at=self.clock.now())
        except TimeoutError:
            self.muted.append(reason)
            log.warning("event.failed", reason=reason, error=f"no answer within {SIDE_EFFECT_BUDGET:g}s",
                        hint="the Kubernetes Events API is silent: this run records no further Event")
        except ClusterError as exc:
            log.warning("event.failed", reason=reason, error=str(exc))


async def read_application(cluster: Cluster, api: ArgoCDApi | None, settings: ArgoCD) -> ApplicationView:
    """The plan's Application, where it is (`Run.argocd_object`); ClusterError when it cannot be read or is not
    there."""
    found = await _argocd_object(cluster, api, "applications", settings.namespace, settings.application)
    if found is None:
        raise ClusterError(f"no Application {settings.namespace}/{settings.application}", cause="cluster_not_found",
                           hint="check argocd.application and argocd.namespace; in a cluster ArgoCD does not run "
                                "in, set argocd.server")
    return payloads.application_view(found)


async def _argocd_object(cluster: Cluster, api: ArgoCDApi | None, plural: str, namespace: str,
                         name: str) -> dict[str, Any] | None:
    try:
        found = await cluster.argocd_object(plural, namespace, name)
    except ClusterError:
        if api is None:
            raise
        found = None
    if found is not None or api is None:
        return found
    return await api.argocd_object(plural, namespace, name)
