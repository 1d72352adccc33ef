"""Scenario h, ArgoCD 3.5's Source Hydrator between cutover's commit and the cluster: the kustomize-overlay example's
Application turned to `spec.sourceHydrator` as its user-guide turns one (a `repository-write` Secret, the dry source
on main, the rendered manifests pushed by the real commit-server to `environments/prod`, which ArgoCD syncs). A
person's commit of the plan's target to the dry source; the PreSync gates the hydrated manifest the sync applies,
the PostSync proves the engine and commits to the dry source, and ArgoCD hydrates that commit and syncs the
hydrated one. The workload's rollback Job commits back and waits until ArgoCD has hydrated its commit and synced the
render. Then a dry commit that renders the same: the commit-server pushes no new
hydrated commit, only its git note, and cutover's own reading of the real Application takes the existing hydrated
commit as the one applied (what docs/sources.md says of 3.3+)."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import kubernetes

from conftest import MEASURED
from cutover import plan
from cutover.argocd import operation
from cutover.demo.gitrepo import BareRepo
from cutover.kube import payloads
from tier import githost, gitops

EXAMPLES = gitops.cluster.ROOT / "manifests" / "examples"
APP, SERVICE = "chat-prod", "chat-predictor"
CREDENTIALS = f"cutover-{APP}"  # its credentials namespace: its hooks, CronJobs and Secrets (docs/install.md)
PLAN_FILE = "e2e/fixtures/chat-prod/hooks/plan.yaml"
BASE = "manifests/examples/kustomize-overlay/base/service.yaml"  # the Service file cutover writes (dry)
SYNC_BRANCH, SYNC_PATH = "environments/prod", "chat-prod"
MANIFEST = f"{SYNC_PATH}/manifest.yaml"
NOTES = "refs/notes/hydrator.metadata"  # commitserver/commit/commit.go: NoteNamespace


def test_h_cutover_commits_the_dry_source_and_waits_for_argocds_hydrated_sync(argo: gitops.GitOpsTier) -> None:
    (chat,) = plan.parse((EXAMPLES / "kustomize-overlay" / "plan.yaml").read_text())
    _hydrating(argo)
    app = argo.wait(f"{APP} hydrated and synced from {SYNC_BRANCH}", lambda: _hydrated(argo), timeout=240)
    manifest = _at(argo, MANIFEST, SYNC_BRANCH)
    # the hooks and the plan are rendered into the hydrated manifest with everything else: ArgoCD runs them from it
    assert f"name: cutover-presync-{APP}" in manifest and f"name: cutover-plan-{APP}" in manifest

    serving = re.search(r"(?m)^\s+target: (\w+)$", _at(argo, PLAN_FILE))  # candle after scenario f, else vllm
    assert serving is not None
    now = serving.group(1)
    other = "candle" if now == "vllm" else "vllm"
    before = argo.git.cutover_commits(chat.name)[:1]
    started = gitops.time.monotonic()
    plan_text = gitops.with_target(_at(argo, PLAN_FILE), other).replace(  # vLLM's shorter context is not the point
        "fitness: {requests: 1, maxLatency: 5s}", "fitness: {requests: 1, maxLatency: 5s, compare: false}")
    assert "compare: false" in plan_text
    argo.git.repo.commit({PLAN_FILE: plan_text}, f"Hand {APP}'s name to {other}\n")
    _webhook(argo)
    switch = argo.wait(f"cutover's commit for {APP}", lambda: next(
        (sha for sha in argo.git.cutover_commits(chat.name)[:1] if [sha] != before), None), timeout=240)
    app = argo.wait(f"{APP} hydrated from cutover's {switch[:7]} and synced", lambda: _hydrated(argo, switch),
                    timeout=240)
    MEASURED.append(f"scenario h: the person's commit to cutover's switch hydrated and synced: "
                    f"{gitops.elapsed(started):.1f} s")

    assert argo.core.read_namespaced_service(SERVICE, "llm-serving").spec.selector == chat.backends[other].selector
    hydrated = app["status"]["sourceHydrator"]["currentOperation"]["hydratedSHA"]
    assert argo.git.repo.head(SYNC_BRANCH) == hydrated != switch  # ArgoCD applied the rendered commit, not ours
    assert f"name: {chat.backends[other].selector['app.kubernetes.io/name']}" in \
        _at(argo, MANIFEST, SYNC_BRANCH).split("kind: Service", 1)[1]
    state = app["status"]["operationState"]
    assert state["phase"] == "Succeeded", state.get("message")
    assert state["syncResult"]["revision"] == hydrated
    hooks = {(r["hookType"], r["name"], r["hookPhase"]) for r in state["syncResult"]["resources"] if r.get("hookType")}
    assert hooks == {("PreSync", f"cutover-presync-{APP}", "Succeeded"),
                     ("PostSync", f"cutover-postsync-{APP}", "Succeeded")}
    # gated on the hydrated manifest
    assert "presync.hydrated" in argo.job_log(f"cutover-presync-{APP}", namespace=CREDENTIALS)
    assert "verified" in argo.job_log(f"cutover-postsync-{APP}", namespace=CREDENTIALS)
    # cutover's own reading of the real Application: its dry commit is applied as the hydrated one, in sync
    view = payloads.application_view(app)
    assert operation.applied_revision(view, switch) == hydrated
    assert operation.judge_sync(view, revision=hydrated, committed_at=_committed(argo, switch)) is \
        operation.SyncState.SYNCED

    # the workload's rollback: its commit to the dry source, then waiting for ArgoCD to hydrate and sync it
    argo.kubectl("-n", CREDENTIALS, "create", "job", f"--from=cronjob/cutover-rollback-{APP}", "cutover-rollback-h")
    started = gitops.time.monotonic()
    rollback = argo.finished("cutover-rollback-h", timeout=300, namespace=CREDENTIALS)
    MEASURED.append(f"scenario h: the rollback Job, its dry commit hydrated, synced and verified: "
                    f"{gitops.elapsed(started):.1f} s")
    assert rollback.succeeded, rollback.log[-3000:]
    back = argo.git.cutover_commits(chat.name)[0]
    assert back != switch
    assert "argocd.hydrating" in rollback.log  # it saw the hydrator still at work on its dry commit, and waited
    app = argo.wait(f"{APP} hydrated from the rollback's {back[:7]} and synced", lambda: _hydrated(argo, back),
                    timeout=120)
    assert argo.core.read_namespaced_service(SERVICE, "llm-serving").spec.selector == chat.backends[now].selector
    hydrated = app["status"]["sourceHydrator"]["currentOperation"]["hydratedSHA"]

    # a dry commit that renders the same (a comment): the commit-server records it in a note, no new hydrated commit
    quiet = argo.git.repo.commit({BASE: _at(argo, BASE) + "# owned by the platform team\n"},
                                 "Say who owns the chat Service\n")
    _webhook(argo)
    app = argo.wait(f"{APP} to take {quiet[:7]} without a new hydrated commit", lambda: _hydrated(argo, quiet),
                    timeout=240)
    assert argo.git.repo.head(SYNC_BRANCH) == hydrated  # no new hydrated commit
    note = json.loads(argo.git.repo.git("notes", f"--ref={NOTES}", "show", hydrated))
    assert note.get("drySha") == quiet, note
    view = payloads.application_view(app)
    assert operation.applied_revision(view, quiet) == hydrated == view.sync_revision
    MEASURED.append(f"scenario h: a dry commit rendering the same was noted on {hydrated[:7]} (no new commit)")


def _hydrating(argo: gitops.GitOpsTier) -> None:
    """The example's Application (scenario f's; installed here if f did not run) turned to the Source Hydrator, with
    the push Secret the user-guide has a user create beside the pull one."""
    try:
        argo.app(APP)
    except kubernetes.client.ApiException as exc:
        if exc.status != 404:
            raise
        argo.install_application(APP, argo.users_copy((EXAMPLES / "kustomize-overlay" / "application.yaml")
                                                       .read_text()), SERVICE)
    argo.kubectl("-n", "argocd", "create", "secret", "generic", "gitops-repo-write", "--from-literal=type=git",
                 f"--from-literal=url={githost.REPO_URL}", f"--from-literal=username={githost.READER[0]}",
                 f"--from-literal=password={githost.READER[1]}")
    argo.kubectl("-n", "argocd", "label", "secret", "gitops-repo-write",
                 "argocd.argoproj.io/secret-type=repository-write")
    dry = argo.app(APP)["spec"]["source"]
    hydrator = {"drySource": {"repoURL": dry["repoURL"], "targetRevision": "main", "path": dry["path"]},
                "syncSource": {"targetBranch": SYNC_BRANCH, "path": SYNC_PATH}}
    argo.custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd", "applications", APP,
                                               {"spec": {"source": None, "sourceHydrator": hydrator}})


def _hydrated(argo: gitops.GitOpsTier, dry: str | None = None) -> dict[str, Any] | None:
    """The Application once its current hydration (of `dry`, when given) ended Hydrated and its hydrated commit is
    synced, Healthy, with no operation running."""
    app = argo.app(APP)
    status = app.get("status", {})
    current = status.get("sourceHydrator", {}).get("currentOperation") or {}
    if current.get("phase") != "Hydrated" or (dry is not None and current.get("drySHA") != dry):
        return None
    sync = status.get("sync", {})
    if sync.get("revision") != current.get("hydratedSHA") or sync.get("status") != "Synced" or \
            status.get("health", {}).get("status") != "Healthy":
        return None
    if app.get("operation") or status.get("operationState", {}).get("phase") == "Running":
        return None
    return app


def _webhook(argo: gitops.GitOpsTier) -> None:
    """What the repository's webhook does for a hydrator Application: hydrate now, and compare."""
    argo.kubectl("-n", "argocd", "annotate", "--overwrite", "application", APP, "argocd.argoproj.io/hydrate=normal",
                 "argocd.argoproj.io/refresh=normal")


def _at(argo: gitops.GitOpsTier, path: str, branch: str | None = None) -> str:
    found = argo.git.repo.read(path, branch)
    assert found is not None, f"{path}@{branch or 'main'}"
    return found[0]


def _committed(argo: gitops.GitOpsTier, sha: str) -> datetime:
    return datetime.fromisoformat(next(entry.date for entry in argo.git.repo.log(limit=50) if entry.sha == sha))


def test_h_hydrated_into_another_repository_the_gate_renders_the_dry_revision(argo: gitops.GitOpsTier) -> None:
    """`syncSource.repoURL` (ArgoCD 3.5): the rendered manifests go to a repository cutover's token does not reach.
    The workload's run Job commits to the dry source and waits; ArgoCD hydrates that commit into the other
    repository and syncs it, and the PreSync gates the dry revision the hydrator rendered into it."""
    (chat,) = plan.parse((EXAMPLES / "kustomize-overlay" / "plan.yaml").read_text())
    deployments = BareRepo(argo.git.repo.path.parent / "deployments.git")
    deployments.commit({"README.md": "Rendered manifests, written by ArgoCD's hydrator\n"}, "Start\n")
    url = githost.REPO_URL.replace("/gitops.git", "/deployments.git")
    for name, kind in (("deployments-repo", "repository"), ("deployments-repo-write", "repository-write")):
        argo.kubectl("-n", "argocd", "create", "secret", "generic", name, "--from-literal=type=git",
                     f"--from-literal=url={url}", f"--from-literal=username={githost.READER[0]}",
                     f"--from-literal=password={githost.READER[1]}")
        argo.kubectl("-n", "argocd", "label", "secret", name, f"argocd.argoproj.io/secret-type={kind}")
    argo.kubectl("-n", "argocd", "patch", "appproject", APP, "--type", "json", "-p",
                 json.dumps([{"op": "add", "path": "/spec/sourceRepos/-", "value": url}]))
    argo.custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd", "applications", APP, {
        "spec": {"sourceHydrator": {"syncSource": {"repoURL": url}}}})
    # ArgoCD hydrates a dry commit once: the one already hydrated is not rendered into the new repository until the
    # next (the user guide says to push an empty commit; seen here: "unable to resolve 'environments/prod'")
    argo.git.repo.commit({BASE: _at(argo, BASE) + "# rendered into the deployments repository\n"},
                         "Hydrate into the deployments repository\n")
    _webhook(argo)
    argo.wait(f"{APP} hydrated into {url}", lambda: (app := _hydrated(argo)) and deployments.head(SYNC_BRANCH) ==
              app["status"]["sourceHydrator"]["currentOperation"]["hydratedSHA"], timeout=240)

    target = re.search(r"(?m)^\s+target: (\w+)$", _at(argo, PLAN_FILE))
    assert target is not None
    known = set(argo.git.cutover_commits(chat.name))
    started = gitops.time.monotonic()
    argo.kubectl("-n", CREDENTIALS, "create", "job", f"--from=cronjob/cutover-run-{APP}", "cutover-run-h")
    run = argo.finished("cutover-run-h", timeout=300, namespace=CREDENTIALS)
    assert run.succeeded, run.log[-3000:]
    (switch,) = [sha for sha in argo.git.cutover_commits(chat.name) if sha not in known]
    app = argo.wait(f"{APP} hydrated from {switch[:7]} into {url} and synced", lambda: _hydrated(argo, switch),
                    timeout=120)
    MEASURED.append(f"scenario h, hydrated into another repository: the run Job's switch hydrated, gated, synced and "
                    f"verified: {gitops.elapsed(started):.1f} s")
    hydrated = app["status"]["sourceHydrator"]["currentOperation"]["hydratedSHA"]
    assert deployments.resolve(hydrated) == hydrated and argo.git.repo.resolve(hydrated) is None
    assert argo.core.read_namespaced_service(SERVICE, "llm-serving").spec.selector == \
        chat.backends[target.group(1)].selector
    hooks = {(r["hookType"], r["hookPhase"]) for r in app["status"]["operationState"]["syncResult"]["resources"]
             if r.get("hookType")}
    assert hooks == {("PreSync", "Succeeded"), ("PostSync", "Succeeded")}
    gate = argo.job_log(f"cutover-presync-{APP}", namespace=CREDENTIALS)
    assert '"presync.hydrated_elsewhere"' in gate and f'"dry": "{switch[:12]}"' in gate, gate[-2000:]
