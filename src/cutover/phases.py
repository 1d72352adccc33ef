"""The phases users run as ArgoCD hooks and Jobs, told with the pieces below them.

Built so far: `presync`, the gate. It finds the revision being synced, reads the Service's selector
there, and compares it with the live Service. No change pending: done at once (no waiting, no
engine request). A change to a backend of the plan: prove that backend's pods now (on their startup
timeline if they are still starting) and check that the new selector picks none of another backend's
pods; any failure exits non-zero, so ArgoCD aborts the sync and the Service keeps its selector
(reference/argocd-hooks.md §1.4). The gate writes nothing. Called by the CLI.
"""

from __future__ import annotations

from collections.abc import Mapping

import structlog

from cutover import argocd, manifest
from cutover.cluster import Cluster
from cutover.commands import Report
from cutover.errors import ClusterError, NamesNotProven
from cutover.githost.base import GitHost
from cutover.plan import Plan
from cutover.wait import prove_backend

log = structlog.get_logger("cutover")


def backend_of(plan: Plan, selector: Mapping[str, str]) -> str | None:
    return next((name for name, backend in plan.backends.items() if dict(backend.selector) == dict(selector)),
                None)


async def presync(cluster: Cluster, plan: Plan, host: GitHost, *, job_name: str | None) -> Report:
    structlog.contextvars.bind_contextvars(service=f"{plan.service.namespace}/{plan.service.name}",
                                           cutover=plan.name, phase="presync")
    revision = await _syncing_revision(cluster, plan, job_name)
    ref = revision.sha if revision else None
    version = await host.read(plan.git.path, ref=ref)
    wanted = manifest.read_selector(version.content, document=plan.git.document,
                                    selector_path=plan.git.selector_path, source=f"{plan.git.path}@{ref or 'head'}")
    live = await cluster.service(plan.service.namespace, plan.service.name)
    shown = ref[:12] if ref else plan.git.branch
    if dict(wanted) == dict(live.selector):
        log.info("presync.no_change", revision=shown)
        return Report(summary=f"no selector change in {shown}: nothing to gate", data={"changed": False})
    target = backend_of(plan, wanted)
    if target is None:
        log.warning("presync.unknown_selector", revision=shown, selector=dict(wanted),
                    hint="the selector in Git is no backend of the plan: not ours to gate")
        return Report(summary=f"the selector in {shown} is no backend of the plan: not gated",
                      data={"changed": True, "backend": None})
    log.info("presync.gating", revision=shown, to=target, live=backend_of(plan, live.selector))
    proven = await prove_backend(cluster, plan, plan.backend(target), wait=True)
    await _no_foreign_pods(cluster, plan, target)
    return Report(summary=f"{shown} switches the Service to {target}: proven on {len(proven.pods)} pod(s)",
                  data={"changed": True, "backend": target, "proof": proven.as_data()})


async def _syncing_revision(cluster: Cluster, plan: Plan, job_name: str | None) -> argocd.Revision | None:
    app = None
    if plan.argocd is not None:
        try:
            app = await cluster.application(plan.argocd.namespace, plan.argocd.application)
        except ClusterError as exc:
            log.warning("argocd.unreadable", error=exc.message, cause=exc.cause, hint=exc.hint)
    revision = argocd.syncing_revision(job_name, app)
    if revision is None:
        log.warning("presync.revision_unknown", hint="no hook Job name and no ArgoCD operation: reading the "
                                                     "branch head, which may be newer than the revision synced")
    return revision


async def _no_foreign_pods(cluster: Cluster, plan: Plan, target: str) -> None:
    """Guarantee 1: the new selector must pick none of another backend's pods."""
    selector = plan.backend(target).selector
    chosen, _ = await cluster.pods(plan.service.namespace, selector)
    for name, backend in plan.backends.items():
        if name == target:
            continue
        foreign = [pod.name for pod in chosen if pod.matches(backend.selector)]
        if foreign:
            raise NamesNotProven(
                f"the {target} selector also picks pods of backend {name}: {', '.join(foreign)}",
                cause="selector_overlap",
                hint=f"make the {target} selector pick only its own pods (add a distinguishing label)")

