"""Reading the sync a hook runs in, and judging when ArgoCD has applied our commit (pure), plus the
Application reads, the refresh request and Events over the emulated API server."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from cutover.argocd import operation
from cutover.argocd.operation import SyncState
from cutover.core import views as argocd_views
from cutover.core.views import ApplicationView
from cutover.demo import argocd as sim_argocd
from cutover.demo.world import NAMESPACE, SERVICE, World
from cutover.kube import cluster

SHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
OTHER = "ffffeeee" + SHA[8:]
T0 = datetime(2026, 1, 1, tzinfo=UTC)


def app(**fields: object) -> ApplicationView:
    base = ApplicationView("argocd", "llm-serving", "Synced", SHA, "Healthy", "Succeeded", SHA,
                           T0 + timedelta(seconds=10), T0 + timedelta(seconds=40), False)
    return dataclasses.replace(base, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("job", "application", "expected"), [
    ("cutover-presync-0a1b2c3-presync-1764457200", app(), operation.Revision(SHA, "job+operation")),
    ("cutover-presync-0a1b2c3-presync-1764457200", app(operation_revision=None), operation.Revision("0a1b2c3", "job")),
    ("cutover-presync-0a1b2c3-presync-1764457200", app(operation_revision=OTHER), operation.Revision("0a1b2c3", "job")),
    (None, app(), operation.Revision(SHA, "operation")),
    ("cutover-rollback-1764457200", app(operation_revision=None), None),  # a manual Job: no revision in its name
])
def test_the_revision_being_synced(job: str | None, application: ApplicationView,
                                   expected: operation.Revision | None) -> None:
    assert operation.syncing_revision(job, application) == expected


COMMITTED = T0 + timedelta(seconds=20)


@pytest.mark.parametrize(("application", "state"), [
    (app(), SyncState.SYNCED),
    (app(sync_revision=OTHER, operation_revision=OTHER, operation_started=T0 + timedelta(seconds=60)),
     SyncState.WAITING),  # a newer operation, not on ours: wait
    (app(health="Progressing"), SyncState.WAITING),
    (app(operation_phase="Running"), SyncState.WAITING),
    (app(operation_phase="Failed"), SyncState.FAILED),
    # failed, and running on: a resource refused, no hook left, ArgoCD waiting for the rest's health
    (app(operation_phase="Running", operation_finished=None, operation_failures=("Deployment/x: denied",)),
     SyncState.FAILED),
    (app(operation_phase="Running", operation_finished=None, operation_failures=("Deployment/x: denied",),
         operation_hooks_running=True), SyncState.WAITING),  # SyncFail at work: ArgoCD's to finish
    (app(operation_phase="Running", operation_failures=("Deployment/x: denied",)),
     SyncState.WAITING),  # `finishedAt` on a Running operation: ArgoCD's retry is pending
    (app(sync_revision=OTHER, operation_revision=OTHER, sync_status="OutOfSync"),
     SyncState.REFRESH_AGAIN),  # argo-cd#21902: began before our commit, ended without it
    (app(sync_revision=OTHER, operation_revision=OTHER, sync_status="OutOfSync", refresh_requested=True),
     SyncState.WAITING),  # asked already, and ArgoCD has not picked it up yet
])
def test_judging_whether_our_commit_is_applied(application: ApplicationView, state: SyncState) -> None:
    assert operation.judge_sync(application, revision=SHA, committed_at=COMMITTED) is state


APPS = "argoproj.io/v1alpha1/applications"


# What the real ArgoCD (v3.5.3, the tier's application-controller log) holds once a policy refused a Deployment's
# apply beside another that waits for a GPU, after its SyncFail hook ended: Running, no finishedAt, for good.
def runs_on(syncfail: str) -> dict[str, Any]:
    return {"phase": "Running", "message": "waiting for healthy state of apps/Deployment/llm-reasoning-candle",
            "startedAt": "2026-12-05T03:06:23Z", "operation": {"sync": {"revision": SHA}},
            "syncResult": {"revision": SHA, "resources": sim_argocd.refused_beside_a_wait(
                "llm-reasoning", "llm-reasoning-candle", syncfail=syncfail)}}


@pytest.mark.parametrize(("syncfail", "waits"), [("Succeeded", True), ("Running", False)])
async def test_a_failed_operation_that_runs_on_is_read_as_such(world: World, kube: cluster.Cluster, syncfail: str,
                                                                waits: bool) -> None:
    seeded = sim_argocd.application(revision=SHA)
    seeded["status"]["operationState"] = runs_on(syncfail)
    world.kube.apply(APPS, seeded)
    view = await kube.application("argocd", "llm-serving")
    assert (view.failed_waiting, view.operation_hooks_running) == (waits, not waits)
    assert view.operation_waiting == ("Deployment/llm-reasoning-candle",)  # the refused one is not waited for
    assert view.failure().startswith(f"ArgoCD's sync of {SHA[:12]} failed: Deployment/llm-reasoning: error when ")


async def test_application_refresh_and_events_over_the_api(world: World, kube: cluster.Cluster) -> None:
    seeded = sim_argocd.application(revision=SHA)
    seeded["status"]["operationState"] = {"phase": "Running", "startedAt": "2026-01-01T00:00:10Z",
                                          "operation": {"sync": {"revision": SHA}}}
    world.kube.apply(APPS, seeded)
    view = await kube.application("argocd", "llm-serving")
    assert (view.operation_phase, view.operation_revision, view.refresh_requested) == ("Running", SHA, False)
    await kube.request_refresh("argocd", "llm-serving")
    stored = world.kube.stored(APPS, "argocd", "llm-serving")
    assert stored is not None and stored["metadata"]["annotations"] == {"argocd.argoproj.io/refresh": "normal"}
    assert stored["status"]["operationState"]["phase"] == "Running"  # a merge patch touches nothing else
    service = await kube.service(NAMESPACE, SERVICE)
    await kube.record_event(service, reason="CutoverCommitted", message="vllm -> candle in 0a1b2c3", at=T0)
    (event,) = world.kube.objects("/v1/events", NAMESPACE)
    assert event["involvedObject"] == {"apiVersion": "v1", "kind": "Service", "name": SERVICE,
                                       "namespace": NAMESPACE, "uid": service.uid}
    assert (event["reason"], event["type"], event["source"]) == ("CutoverCommitted", "Normal",
                                                                 {"component": "cutover"})


def multi_source(*, repo_url: str = "https://github.com/Acme/gitops", revisions: tuple[str, str] = ("1.4.2", SHA),
                 synced: tuple[str, str] = ("1.4.2", OTHER)) -> dict[str, object]:
    """A multi-source Application: a chart from a Helm repository, then the plan's repository with its values."""
    seeded = sim_argocd.application(sources=[
        {"repoURL": "https://charts.example.invalid", "chart": "llm", "targetRevision": "1.4.2"},
        {"repoURL": repo_url, "targetRevision": "main", "path": "k8s/apps/llm-serving", "ref": "values"}])
    seeded["status"]["sync"]["revisions"] = list(synced)
    seeded["status"]["operationState"] = {"phase": "Running", "startedAt": "2026-01-01T00:00:10Z",
                                          "operation": {"sync": {"revisions": list(revisions)}},
                                          "syncResult": {"revision": "", "revisions": list(revisions)}}
    return seeded


async def test_a_multi_source_application_names_the_revision_of_the_plans_source(
        world: World, kube: cluster.Cluster) -> None:
    world.kube.apply(APPS, multi_source())  # the CRD schema accepts it (checked on every write)
    view = await kube.application("argocd", "llm-serving")
    ours = view.for_source("https://github.com/acme/gitops.git", "main")  # spelled differently, the same repository
    assert (ours.operation_revision, ours.sync_revision) == (SHA, OTHER)
    # a named hook Job (no revision in its name) learns the revision from the operation, at our source's position
    assert operation.syncing_revision("cutover-presync-llm-serving", ours) == operation.Revision(SHA, "operation")
    assert view.for_source("https://github.com/other/repo.git", "main") is view  # not ours: nothing to pick


def test_a_repository_listed_twice_is_picked_on_the_plans_branch() -> None:
    view = dataclasses.replace(app(), sources=(
        argocd_views.SourceView("https://github.com/acme/gitops.git", "release"),
        argocd_views.SourceView("https://github.com/acme/gitops.git", "main")), operation_revisions=(OTHER, SHA))
    assert view.for_source("https://github.com/acme/gitops", "main").operation_revision == SHA


async def test_an_application_the_api_server_would_refuse_is_refused_by_the_test_world(world: World) -> None:
    broken = sim_argocd.application()
    del broken["spec"]["destination"]
    with pytest.raises(AssertionError, match="destination"):
        world.kube.apply(APPS, broken)


@pytest.mark.parametrize(("phase", "waits"), [("Running", True), ("Terminating", True), ("Succeeded", False),
                                               ("Failed", False), (None, False)])
def test_a_refresh_waits_for_a_running_operation(phase: str | None, waits: bool) -> None:
    """argo-cd#27875: a comparison with a new revision during an operation makes the next sync hook-less."""
    assert operation.refresh_waits(phase) is waits
    assert operation.refresh_waits(phase, always=True) is False  # `argocd.refresh: always`: the fixed self-heal delay
