"""A stand-in for ArgoCD's automated sync in the simulated world: when asked to refresh, apply the Service
selector that Git holds to the live Service, in place, and report the Application synced and healthy.
Used by the demo and the tests of `run` and `rollback`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

from cutover import manifest
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import NAMESPACE, SERVICE, World
from cutover.errors import CutoverError
from cutover.plan import GitDocument

APPS = "argoproj.io/v1alpha1/applications"
DOCUMENT = GitDocument("Service", SERVICE)


def seed_application(world: World, *, revision: str | None = None) -> None:
    world.kube.apply(APPS, {"metadata": {"name": "llm-serving", "namespace": "argocd"}, "spec": {},
                            "status": {"sync": {"status": "Synced", "revision": revision},
                                       "health": {"status": "Healthy"}}})


def apply_git(world: World, repo: BareRepo, path: str, *, endpoints: bool = True) -> None:
    """What a sync does to the Service: patch its selector in place (same object, same ClusterIP)."""
    content, _ = repo.read(path)  # type: ignore[misc]
    selector = manifest.read_selector(content, document=DOCUMENT, selector_path="spec.selector")
    world.kube.merge("/v1/services", NAMESPACE, SERVICE, {"spec": {"selector": None}})
    world.kube.merge("/v1/services", NAMESPACE, SERVICE, {"spec": {"selector": selector}})
    if endpoints:
        world.sync_endpoints()


async def autosync(world: World, repo: BareRepo, path: str, *, every: float = 5.0, poll: float | None = None,
                   endpoint_lag: float = 0.0) -> None:
    """Sync when asked to refresh; with `poll`, also when Git moved and `poll` seconds passed since the last
    look (ArgoCD's reconciliation timeout, 180 s by default). `endpoint_lag`: the EndpointSlice controller
    catches up with the new selector only that many seconds after the sync."""
    loop = asyncio.get_running_loop()
    looked, synced = loop.time(), repo.head()
    while True:
        await asyncio.sleep(every)
        application = world.kube.stored(APPS, "argocd", "llm-serving")
        asked = application is not None and "argocd.argoproj.io/refresh" in (
            application["metadata"].get("annotations") or {})
        polled = poll is not None and loop.time() - looked >= poll
        if polled:
            looked = loop.time()
        if application is None or not (asked or (polled and repo.head() != synced)):
            continue
        synced = head = repo.head()
        try:
            apply_git(world, repo, path, endpoints=not endpoint_lag)
        except CutoverError as exc:  # a file ArgoCD cannot render: its sync fails, the live objects stay
            world.kube.merge(APPS, "argocd", "llm-serving", {
                "metadata": {"annotations": {"argocd.argoproj.io/refresh": None}},
                "status": {"operationState": {"phase": "Failed", "message": exc.message,
                                              "syncResult": {"revision": head}}}})
            continue
        if endpoint_lag:
            loop.call_later(endpoint_lag, world.sync_endpoints)
        world.kube.merge(APPS, "argocd", "llm-serving", {
            "metadata": {"annotations": {"argocd.argoproj.io/refresh": None}},
            "status": {"sync": {"status": "Synced", "revision": head}, "health": {"status": "Healthy"},
                       "operationState": {"phase": "Succeeded", "syncResult": {"revision": head}}}})


@contextlib.asynccontextmanager
async def running(world: World, repo: BareRepo, path: str, *, poll: float | None = None,
                  endpoint_lag: float = 0.0) -> AsyncIterator[None]:
    """Start it from the code that waits on it: under fake time, a timer set up elsewhere may never fire."""
    task = asyncio.create_task(autosync(world, repo, path, poll=poll, endpoint_lag=endpoint_lag),
                               name="argocd stand-in")
    try:
        yield
    finally:
        task.cancel()
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
        if isinstance(outcome, Exception):  # the stand-in broke: say so, not a confusing timeout elsewhere
            raise outcome
