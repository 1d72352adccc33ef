"""A stand-in for ArgoCD's automated sync in the simulated world, rendering as ArgoCD renders.

An Application (valid against ArgoCD's own CRD schema; the tests check every write) names a source path in a
real bare repository, or a Source Hydrator's dry source. A sync checks the tree out at the revision, renders
the path the way ArgoCD's repo-server does (real kustomize when the path holds a kustomization, every
YAML/JSON file of the directory otherwise), applies the rendered Service's selector to the live Service in
place, and records what ArgoCD records: `operationState.operation.sync.revision`, `syncResult.revision`,
`status.sync.revision`. With the hydrator, a sync first hydrates (renders the dry path at the dry branch's
head, commits `<syncSource.path>/manifest.yaml` to the sync branch, records
`status.sourceHydrator.currentOperation`) and applies the hydrated revision. When asked to refresh (the
annotation cutover sets), or on its own poll, it syncs the branch head. Used by the demo and the tests of
`run`, `rollback` and the hooks.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import subprocess
import tempfile
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from pathlib import Path, PurePosixPath
from typing import Any

from ruamel.yaml import YAML

from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import NAMESPACE, SERVICE, World
from cutover.errors import CutoverError, InvalidInput
from cutover.sources import kustomize_build

APPS = "argoproj.io/v1alpha1/applications"
APPLICATION, ARGOCD_NAMESPACE = "llm-serving", "argocd"
REPO_URL = "https://github.com/acme/gitops.git"
DEFAULT_PATH = "k8s/apps/llm-serving"  # the directory of the reference scenario's Service file


SYNC_BRANCH, SYNC_PATH = "environments/prod", "llm-serving"  # where a hydrator Application's manifests go


def application(*, revision: str | None = None, path: str = DEFAULT_PATH,
                sources: list[dict[str, Any]] | None = None, hydrator: bool = False) -> dict[str, Any]:
    """An Application as a person writes it, synced and healthy at `revision`; with `hydrator`, through ArgoCD
    3.x's Source Hydrator (dry source `path` on main, hydrated to environments/prod)."""
    spec: dict[str, Any] = {
        "project": "llm-serving",
        "destination": {"server": "https://kubernetes.default.svc", "namespace": NAMESPACE},
        "syncPolicy": {"automated": {"prune": True, "selfHeal": True}},
    }
    if hydrator:
        spec["sourceHydrator"] = {"drySource": {"repoURL": REPO_URL, "targetRevision": "main", "path": path},
                                  "syncSource": {"targetBranch": SYNC_BRANCH, "path": SYNC_PATH}}
    elif sources is not None:
        spec["sources"] = sources
    else:
        spec["source"] = {"repoURL": REPO_URL, "targetRevision": "main", "path": path}
    status: dict[str, Any] = {"sync": {"status": "Synced", **({"revision": revision} if revision else {})},
                              "health": {"status": "Healthy"}}
    return {"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
            "metadata": {"name": APPLICATION, "namespace": ARGOCD_NAMESPACE}, "spec": spec, "status": status}


def seed_application(world: World, *, revision: str | None = None, path: str = DEFAULT_PATH,
                     sources: list[dict[str, Any]] | None = None, hydrator: bool = False) -> None:
    world.kube.apply(APPS, application(revision=revision, path=path, sources=sources, hydrator=hydrator))


def _hydrator(world: World) -> dict[str, Any] | None:
    stored = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION) or {}
    found = (stored.get("spec") or {}).get("sourceHydrator")
    return dict(found) if found else None


def hydrate(world: World, repo: BareRepo, *, into: BareRepo | None = None) -> str:
    """What the hydrator does with the dry branch's head: render the dry path, commit the manifests to the sync
    branch (as the Argo CD bot) of the dry repository or, with syncSource.repoURL, of `into`, record the operation.
    The hydrated revision."""
    spec = _hydrator(world)
    assert spec is not None
    dry = repo.head(spec["drySource"]["targetRevision"])
    assert dry is not None
    docs = render(repo, dry, spec["drySource"]["path"])
    out = io.StringIO()
    YAML(typ="safe", pure=True).dump_all(docs, out)
    target = f"{spec['syncSource']['path']}/manifest.yaml"
    hydrated = (into or repo).commit({target: out.getvalue()}, f"[Argo CD Bot] hydrate {dry}\n", name="Argo CD",
                           email="argo-cd@example.invalid", branch=spec["syncSource"]["targetBranch"])
    world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {"sourceHydrator": {"currentOperation": {
        "drySHA": dry, "hydratedSHA": hydrated, "phase": "Hydrated", "message": "", "startedAt": world.kube.stamp(),
        "finishedAt": world.kube.stamp(), "sourceHydrator": spec}}}})
    return hydrated


def _revisions(world: World, revision: str) -> list[str] | None:
    """A multi-source Application's revisions: `revision` for the plan's repository, the others' own."""
    stored = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION) or {}
    sources = (stored.get("spec") or {}).get("sources")
    if not sources:
        return None
    return [revision if source.get("repoURL") == REPO_URL else str(source.get("targetRevision", ""))
            for source in sources]


SUCCEEDED = "successfully synced (no more tasks)"  # the real ArgoCD's message for a finished sync (v3.2.11, v3.5.3)


def _source(world: World) -> dict[str, Any] | None:
    """The Application's single source, as ArgoCD copies it into the operation, its result and the history."""
    stored = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION) or {}
    found = (stored.get("spec") or {}).get("source")
    return dict(found) if found else None


def operation_state(world: World, phase: str, revision: str, *, message: str | None = None,
                    finished: bool = True, resources: list[dict[str, Any]] | None = None,
                    selected: list[dict[str, str]] | None = None) -> dict[str, Any]:
    """`status.operationState` as ArgoCD writes it for an automated sync of `revision` (`revisions[]`, one per
    source, for a multi-source Application), shaped like the real ArgoCD's (e2e/gitops: `prune` and `source`
    copied into the operation, `retry`, the result's `resources`, "successfully synced (no more tasks)").
    `selected`: the objects a selective sync names in `operation.sync.resources` (`group`, `kind`, `name`), as a
    self-heal sync does; ArgoCD runs no hook for it."""
    revisions = _revisions(world, revision)
    source = _source(world)
    sync: dict[str, Any] = {"revisions": revisions} if revisions else {"revision": revision}
    result: dict[str, Any] = {"revision": "", "revisions": revisions} if revisions else {"revision": revision}
    if source and not revisions:
        sync["source"] = result["source"] = source
    sync["prune"] = True  # the Applications' syncPolicy.automated.prune
    if selected:
        sync["resources"] = selected
    if resources is not None:
        result["resources"] = resources
    state: dict[str, Any] = {"operation": {"sync": sync, "initiatedBy": {"automated": True}, "retry": {}},
                             "phase": phase, "startedAt": world.kube.stamp(), "syncResult": result}
    if finished:
        state["finishedAt"] = world.kube.stamp()
    if message or (phase == "Succeeded" and finished):
        state["message"] = message or SUCCEEDED
    return state


def service_result() -> dict[str, Any]:
    """The Service's line in a sync's result, as the real ArgoCD records a selector patched in place."""
    return {"group": "", "version": "v1", "kind": "Service", "namespace": NAMESPACE, "name": SERVICE,
            "status": "Synced", "message": f"service/{SERVICE} configured", "syncPhase": "Sync",
            "hookPhase": "Succeeded"}


def refused_beside_a_wait(refused: str, waiting: str, *, syncfail: str = "Succeeded") -> list[dict[str, Any]]:
    """A sync's result once the apply of Deployment `refused` was denied (an admission policy) while Deployment
    `waiting`, applied in the same sync, waits for its health, and the SyncFail hook's Job is in phase `syncfail`:
    the real tier's, a free refused while the target waits for the card (e2e/gitops/test_whole_handoff.py)."""
    def deployment(name: str, **line: str) -> dict[str, Any]:
        return {"group": "apps", "version": "v1", "kind": "Deployment", "namespace": NAMESPACE, "name": name,
                "syncPhase": "Sync", **line}

    denied = f"error when patching \"/dev/shm/1508291392\": deployments.apps \"{refused}\" is forbidden: " \
             f"ValidatingAdmissionPolicy 'keep-one-replica' with binding 'keep-one-replica' denied request: " \
             f"{refused} keeps one replica"
    return [deployment(refused, status="SyncFailed", hookPhase="Failed", message=denied),
            deployment(waiting, status="Synced", hookPhase="Running", message=f"deployment.apps/{waiting} configured"),
            {**hook_result("SyncFail", 0), "hookPhase": syncfail}]


Hook = Callable[[], Awaitable[int]]  # a hook Job's container: its exit code
FAILED = "one or more synchronization tasks completed unsuccessfully"  # the real ArgoCD's, for a failed hook
HOOK_DONE = "Reached expected number of succeeded pods"  # a finished Job's condition message (Kubernetes 1.31+)


def hook_result(kind: str, code: int, *, application: str = APPLICATION) -> dict[str, Any]:
    """A hook Job's line in a sync's result, as the real ArgoCD records it: the Component's Job name with the
    Application's suffix, its phase the hook type's, and (from v3.5; v3.2 gave a hook none) a sync status."""
    return {"group": "batch", "version": "v1", "kind": "Job", "namespace": "cutover", "status": "Synced",
            "name": f"cutover-{kind.lower()}-{application}",
            "message": HOOK_DONE if code == 0 else f"Container cutover for pod cutover/cutover-{kind.lower()}-"
                                                   f"{application}-x7k2q failed with exit code {code} matching "
                                                   f"FailJob rule at index 0",  # the Jobs' podFailurePolicy
            "hookType": kind, "hookPhase": "Succeeded" if code == 0 else "Failed", "syncPhase": kind}


async def sync_with_hooks(world: World, repo: BareRepo, path: str, head: str, hooks: Mapping[str, Hook],
                          *, endpoints: bool = True) -> str:
    """One sync as the real ArgoCD runs it with hooks: the operation Running while they run (a hook reads its own
    sync's revision there), PreSync, then the Service, then PostSync; a failed hook ends the sync Failed, with
    nothing applied after it, once SyncFail ran inside the still-Running operation. The phase it ended in."""
    resources: list[dict[str, Any]] = []

    def running() -> None:
        world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {"operationState": operation_state(
            world, "Running", head, finished=False, resources=list(resources))}})

    for step in ("PreSync", "Sync", "PostSync"):
        running()
        if step == "Sync":
            apply_git(world, repo, path, endpoints=endpoints, revision=head)
            resources.append(service_result())
            continue
        if step not in hooks:
            continue
        code = await hooks[step]()
        resources.append(hook_result(step, code))
        if code != 0:
            if "SyncFail" in hooks:
                running()
                resources.append(hook_result("SyncFail", await hooks["SyncFail"]()))
            world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {"operationState": operation_state(
                world, "Failed", head, message=FAILED, resources=resources)}})
            return "Failed"
    world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {"operationState": operation_state(
        world, "Succeeded", head, resources=resources)}})
    return "Succeeded"


def history_entry(world: World, revision: str, started: str) -> dict[str, Any]:
    """One `status.history` item, appended by every sync that ended (the real ArgoCD's shape; ids from 0, on
    past the 10 entries kept)."""
    stored = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION) or {}
    history = (stored.get("status") or {}).get("history") or []
    entry: dict[str, Any] = {"id": history[-1]["id"] + 1 if history else 0, "revision": revision,
                             "deployStartedAt": started,
                             "deployedAt": world.kube.stamp(), "initiatedBy": {"automated": True}}
    source = _source(world)
    if source:
        entry["source"] = source
    return entry


def source_path(world: World, fallback: str) -> str:
    """The path the Application renders: its source's (the plan's repository's, for a multi-source one)."""
    app = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION) or {}
    spec = app.get("spec") or {}
    sources = spec.get("sources") or [spec.get("source") or {}]
    ours = [source for source in sources if source.get("repoURL") == REPO_URL and source.get("path")]
    return str(ours[0]["path"]) if ours else fallback


def render(repo: BareRepo, revision: str, path: str) -> list[dict[str, Any]]:
    """What ArgoCD's repo-server makes of `path` at `revision`."""
    with tempfile.TemporaryDirectory(prefix="argocd-render-") as scratch:
        directory = repo.checkout(revision, Path(scratch) / "repo") / path
        where = f"{path}@{revision[:12]}"
        if kustomize_build.holds_kustomization(directory):
            built = subprocess.run([*kustomize_build.require(), str(directory)], capture_output=True, text=True,
                                   timeout=kustomize_build.BUILD_TIMEOUT, check=False)
            if built.returncode != 0:
                raise kustomize_build.RenderFailed(f"{where}: {' '.join(built.stderr.split())[-300:]}")
            return kustomize_build.documents(built.stdout, where=where)
        files = sorted(item for item in directory.iterdir() if item.suffix in (".yaml", ".yml", ".json"))
        return [doc for item in files
                for doc in kustomize_build.documents(item.read_text(), where=f"{where}/{item.name}")]


def rendered_selector(repo: BareRepo, revision: str, path: str) -> dict[str, str]:
    services = [doc for doc in render(repo, revision, path) if doc.get("kind") == "Service"
                and (doc.get("metadata") or {}).get("name") == SERVICE
                and (doc["metadata"].get("namespace") or NAMESPACE) == NAMESPACE]
    if len(services) != 1:
        raise InvalidInput(f"{path}@{revision[:12]}: {len(services)} Services named {SERVICE} rendered")
    return dict((services[0].get("spec") or {}).get("selector") or {})


def apply_git(world: World, repo: BareRepo, path: str, *, endpoints: bool = True, revision: str | None = None) -> str:
    """What a sync does to the Service: patch its selector in place (same object, same ClusterIP), as the
    Application's source renders it at `revision` (default: the branch head). `path` is the Service file; its
    directory is rendered unless the Application names a path; a hydrator Application syncs its hydrated branch
    (`revision`: a hydrated commit). The revision synced."""
    spec = _hydrator(world)
    if spec is not None:
        synced = revision or repo.head(spec["syncSource"]["targetBranch"])
        rendered_path = spec["syncSource"]["path"]
    else:
        synced = revision or repo.head()
        rendered_path = source_path(world, str(PurePosixPath(path).parent))
    assert synced is not None
    selector = rendered_selector(repo, synced, rendered_path)
    world.kube.merge("/v1/services", NAMESPACE, SERVICE, {"spec": {"selector": None}})
    world.kube.merge("/v1/services", NAMESPACE, SERVICE, {"spec": {"selector": selector}})
    if endpoints:
        world.sync_endpoints()
    return synced


async def autosync(world: World, repo: BareRepo, path: str, *, every: float = 5.0, poll: float | None = None,
                   endpoint_lag: float = 0.0, hooks: Mapping[str, Hook] | None = None) -> None:
    """Sync when asked to refresh; with `poll`, also when Git moved and `poll` seconds passed since the last
    look (ArgoCD's reconciliation timeout, 180 s by default); and when Git moved while a sync ran (ArgoCD compares
    with Git as each operation ends: a hook's commit is synced next, hooks and all). `endpoint_lag`: the
    EndpointSlice controller catches up with the new selector only that many seconds after the sync. `hooks`: the
    hook Jobs each sync runs (`sync_with_hooks`); without them a sync applies the Service alone, as a hookless sync
    does."""
    loop = asyncio.get_running_loop()
    looked, synced, moved = loop.time(), repo.head(), False
    while True:
        await asyncio.sleep(every)
        stored = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION)
        asked = stored is not None and "argocd.argoproj.io/refresh" in (stored["metadata"].get("annotations") or {})
        polled = poll is not None and loop.time() - looked >= poll
        if polled:
            looked = loop.time()
        if stored is None or not (asked or moved or (polled and repo.head() != synced)):
            continue
        moved = False
        synced = head = repo.head()
        started = world.kube.stamp()
        assert head is not None
        # taken as the sync starts: a refresh asked for while it runs (a PostSync's commit) is the next one's
        world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"metadata": {"annotations": {
            "argocd.argoproj.io/refresh": None, "argocd.argoproj.io/hydrate": None}}})
        try:
            if _hydrator(world) is not None:  # hydrate the dry head, then sync the hydrated revision
                head = hydrate(world, repo)
            if hooks:
                if await sync_with_hooks(world, repo, path, head, hooks, endpoints=not endpoint_lag) == "Failed":
                    world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {"sync": {"status": "OutOfSync"}}})
                    continue
            else:
                apply_git(world, repo, path, endpoints=not endpoint_lag, revision=head)
        except CutoverError as exc:  # a tree ArgoCD cannot render: its sync fails, the live objects stay
            world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {
                "status": {"operationState": operation_state(world, "Failed", head, message=exc.message)}})
            continue
        if endpoint_lag:
            loop.call_later(endpoint_lag, world.sync_endpoints)
        history = [*((stored.get("status") or {}).get("history") or []), history_entry(world, head, started)]
        world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {
            "status": {"sync": {"status": "Synced", **({"revisions": _revisions(world, head)} if _revisions(
                world, head) else {"revision": head})}, "health": {"status": "Healthy"},
                       "operationState": _succeeded(world, head, hooked=bool(hooks)),
                       "history": history[-10:], "reconciledAt": started}})  # ArgoCD keeps 10 by default
        moved = repo.head() != head  # committed while the sync ran: compared with as the operation ends


def _succeeded(world: World, head: str, *, hooked: bool) -> dict[str, Any]:
    if hooked:  # sync_with_hooks recorded it, the hooks' lines included
        stored = world.kube.stored(APPS, ARGOCD_NAMESPACE, APPLICATION) or {}
        return dict(stored["status"]["operationState"])
    return operation_state(world, "Succeeded", head, resources=[service_result()])


@contextlib.contextmanager
def syncing(world: World, repo: BareRepo) -> Iterator[None]:
    """The Application while a sync's PostSync hook runs: its operation Running on the branch head (a commit the
    hook pushes then is compared with only once the operation ends: cutover leaves the refresh to its nudge Job),
    Succeeded once the hook has ended."""
    head = repo.head() or ""
    world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {
        "operationState": operation_state(world, "Running", head, finished=False)}})
    try:
        yield
    finally:
        world.kube.merge(APPS, ARGOCD_NAMESPACE, APPLICATION, {"status": {
            "operationState": operation_state(world, "Succeeded", head)}})


@contextlib.asynccontextmanager
async def running(world: World, repo: BareRepo, path: str, *, poll: float | None = None,
                  endpoint_lag: float = 0.0, hooks: Mapping[str, Hook] | None = None) -> AsyncIterator[None]:
    """Start it from the code that waits on it: under fake time, a timer set up elsewhere may never fire."""
    task = asyncio.create_task(autosync(world, repo, path, poll=poll, endpoint_lag=endpoint_lag, hooks=hooks),
                               name="argocd stand-in")
    try:
        yield
    finally:
        task.cancel()
        (outcome,) = await asyncio.gather(task, return_exceptions=True)
        if isinstance(outcome, Exception):  # the stand-in broke: say so, not a confusing timeout elsewhere
            raise outcome
