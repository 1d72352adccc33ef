"""The gitops tier: the Kubernetes tier with the pinned ArgoCD running beside it, the example installed the way
docs/install.md installs it (kubectl for the namespaces, the Secrets, the projects and the Applications; ArgoCD
for everything else), and what the scenarios read back from ArgoCD (the Applications' operation and sync state).

The tier's repository is the user's: it starts as this repository's manifests and the tier's overlays of the
example (e2e/fixtures/cutover, e2e/fixtures/workload: the image the shim runs, the timeline in seconds, the
tier's Git host), with the workload as it was before its first cutover, vLLM alone.
"""

from __future__ import annotations

import re
import time
from typing import Any

import kubernetes

from tier import argocd, charts, cluster, githost

EXAMPLES = cluster.ROOT / "manifests" / "examples"
EXAMPLE = EXAMPLES / "llm-serving"
ENGINES = "manifests/examples/llm-serving/workload/engines.yaml"
SERVICE = "manifests/examples/llm-serving/workload/service.yaml"
INGRESS = "manifests/examples/llm-serving/workload/networkpolicy-ingress.yaml"
PLAN = "e2e/fixtures/workload/plan.yaml"
WORKLOAD = "e2e/fixtures/workload/kustomization.yaml"  # the tier's overlay of the example's workload
VLLM = {"app.kubernetes.io/name": "llm-reasoning", "component": "predictor",
        "serving.kserve.io/inferenceservice": "reasoning"}  # the backends' selectors, as the plan has them
CANDLE = {"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"}
PATHS = {  # the example's Application paths → the tier's overlays of them (the user's own paths)
    "manifests/examples/llm-serving/cutover": "e2e/fixtures/cutover",
    "manifests/examples/llm-serving/workload": "e2e/fixtures/workload",
    # the overlay with the engines and hooks beside it (e2e/fixtures/chat-prod)
    "manifests/examples/kustomize-overlay/overlays/prod": "e2e/fixtures/chat-prod",
}


def without_candle(engines: str) -> str:
    """engines.yaml as the repository held it before the first cutover: the vLLM Deployment alone."""
    documents = re.split(r"(?m)^---\n", engines)
    return "---\n".join(doc for doc in documents if "name: llm-reasoning-candle" not in doc)


def with_target(plan_text: str, target: str) -> str:
    return re.sub(r"(?m)^(\s+)target: \w+$", rf"\g<1>target: {target}", plan_text, count=1)


class GitOpsTier(cluster.Tier):
    def start_argocd(self, version: str) -> None:
        self.argocd = argocd.ArgoCD(self.plane, version, githost.GIT_ADDRESS[0], self.git_ca)
        self.kubectl("create", "namespace", argocd.NAMESPACE)
        self.argocd.install(self)
        self.argocd.start()
        self.custom = kubernetes.client.CustomObjectsApi(self.api)
        self.charts = charts.ChartRepository(cluster.ROOT / "e2e" / "fixtures" / "charts", self.plane.dir,
                                             self.git_ca)
        self.charts.start(self.engines.loop)

    def stop_argocd(self) -> None:
        self.charts.stop(self.engines.loop)

    # --- docs/install.md, step by step ---------------------------------------------------------------------------

    def seed_before_first_cutover(self) -> str:
        """The user's repository before the story: vLLM serves, the plan's target is vllm."""
        engines = (cluster.ROOT / ENGINES).read_text()
        plan = (cluster.ROOT / PLAN).read_text()
        return self.git.repo.commit({ENGINES: without_candle(engines), PLAN: with_target(plan, "vllm")},
                                    "Serve reasoning-long with vLLM\n")

    def install_as_documented(self) -> None:
        """Steps 3 and 4 (the cutover kustomization, the hooks and the plan beside the Service) are the repository's
        content, seeded by TierGitHost; the rest is kubectl, then waiting for ArgoCD."""
        # step 2: the namespaces (the workload's may exist already; each credentials namespace holds its Secrets
        # before cutover's sync: `cutover`, and one per further workload, "More Services"),
        self.kubectl("create", "namespace", "llm-serving")
        for namespace in cluster.WRITABLE:
            self.kubectl("create", "namespace", namespace)
            self.kubectl("label", "namespace", namespace, "cutover.dev/credentials=true",
                         "pod-security.kubernetes.io/enforce=restricted")
            # the Git token cutover writes with, where it may go (here the Git host's CA too), never committed,
            self.git_secret(namespace)
        # and ArgoCD's read access to the repositories, the workloads' and the platform's: repository Secrets
        for name, url in (("gitops-repo", githost.REPO_URL), ("platform-repo", githost.PLATFORM_URL)):
            self.kubectl("-n", "argocd", "create", "secret", "generic", name, "--from-literal=type=git",
                         f"--from-literal=url={url}", f"--from-literal=username={githost.READER[0]}",
                         f"--from-literal=password={githost.READER[1]}")
            self.kubectl("-n", "argocd", "label", "secret", name, "argocd.argoproj.io/secret-type=repository")
        # the administrator's Role for each workload's refresh (step 2): chat-helm's plan asks argocd-server instead
        self.grant_refresh("llm-serving")
        self.grant_refresh("chat-prod", namespace="cutover-chat-prod")
        self.grant_refresh("chat-helm", namespace="cutover-chat-helm", verbs="get")
        # steps 5 and 6: the projects (the further workloads' too, applied before their scenarios apply their
        # Applications) and the Applications, with the repository's URL (here the tier's paths) set
        for name, source in (("appproject.yaml", EXAMPLE / "appproject.yaml"),
                             ("appproject-chat-prod.yaml", EXAMPLES / "kustomize-overlay" / "appproject.yaml"),
                             ("appproject-chat-helm.yaml", EXAMPLES / "helm-values" / "appproject.yaml"),
                             ("applications.yaml", EXAMPLE / "applications.yaml")):
            path = self.dir / name
            path.write_text(self.users_copy(source.read_text()))
            self.kubectl("apply", "-f", str(path))
        for name in ("cutover", "llm-serving"):
            self.wait_app(name, synced=True, healthy=True, timeout=180)

    @staticmethod
    def users_copy(text: str) -> str:
        text = text.replace("https://github.com/acme/gitops.git", githost.REPO_URL)
        text = text.replace("https://github.com/acme/platform.git", githost.PLATFORM_URL)
        text = text.replace("https://charts.example.invalid/llm", charts.URL)
        for example, ours in PATHS.items():
            text = text.replace(f"path: {example}\n", f"path: {ours}\n")
        return text

    def install_application(self, name: str, application: str, service: str) -> Any:
        """An Application applied as a user applies it, synced (its first PreSync without a plan, its PostSync finding
        the target already serving) and Healthy; the live Service it made."""
        path = self.dir / f"{name}.yaml"
        path.write_text(application)
        self.kubectl("apply", "-f", str(path))
        self.wait_app(name, synced=True, healthy=True, timeout=240)
        return self.core.read_namespaced_service(service, "llm-serving")

    def argocd_token_secret(self, namespace: str = "cutover") -> None:
        """The `cutover-argocd` Secret (argocd.server mode) in a workload's credentials namespace: the `cutover`
        account's API key, made once."""
        try:
            self.core.read_namespaced_secret("cutover-argocd", namespace)
        except kubernetes.client.ApiException as exc:
            if exc.status != 404:
                raise
            self.kubectl("-n", namespace, "create", "secret", "generic", "cutover-argocd",
                         f"--from-literal=token={self.argocd.account_token()}",
                         f"--from-literal=server={argocd.SERVER_URL}")

    # --- a person's commit ---------------------------------------------------------------------------------------

    def story_files(self, target: str) -> dict[str, str]:
        """The commit that starts the cutover (docs/install.md, step 8): both engines, the plan's new target."""
        return {ENGINES: (cluster.ROOT / ENGINES).read_text(),
                PLAN: with_target((cluster.ROOT / PLAN).read_text(), target)}

    def service_file(self, selector: dict[str, str]) -> str:
        """The Service file at the branch head with `selector` written by hand, as a person edits it."""
        found = self.git.repo.read(SERVICE)
        assert found is not None
        text, _ = found
        head, _, rest = text.partition("  selector:\n")
        tail = rest[rest.index("  ports:"):]
        lines = "".join(f"    {key}: {value}\n" for key, value in selector.items())
        return f"{head}  selector:\n{lines}{tail}"

    def touched_engines(self, note: str) -> dict[str, str]:
        """engines.yaml at the head with a note on the vLLM Deployment: a change ArgoCD syncs, no pod restarts."""
        found = self.git.repo.read(ENGINES)
        assert found is not None
        text = found[0].replace("  name: llm-reasoning\n  namespace: llm-serving\n",
                                f"  name: llm-reasoning\n  namespace: llm-serving\n  annotations: {{note: {note!r}}}\n",
                                1)
        return {ENGINES: text}

    def hook_logs(self, since: float, job: str = "cutover-*sync-llm-serving") -> dict[str, str]:
        """The log of each pod of the hook Jobs named like `job` written since `since`, by file name (the shim keeps
        them after the pods)."""
        return {path.name: path.read_text() for path in sorted(self.shim.dir.glob(f"cutover_{job}-*.log"))
                if path.stat().st_mtime >= since}

    def lease_holder(self) -> Any:
        """Who holds the reference Service's Lease (empty once given back)."""
        lease = kubernetes.client.CoordinationV1Api(self.api).read_namespaced_lease(
            "cutover-reasoning-long-predictor", "llm-serving")
        return lease.spec.holder_identity

    def commit(self, files: dict[str, str], message: str) -> str:
        sha = self.git.repo.commit(files, message)
        self.refresh("llm-serving")  # what the repository's webhook does; without it ArgoCD polls
        return sha

    def refresh(self, name: str) -> None:
        self.kubectl("-n", "argocd", "annotate", "--overwrite", "application", name,
                     "argocd.argoproj.io/refresh=normal")

    def sync(self, app: str, revision: str) -> None:
        """A person's sync of `revision` (`argocd app sync`): the whole Application, hooks and all."""
        operation = {"operation": {"initiatedBy": {"username": "e2e"}, "sync": {"revision": revision}}}
        self.custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd", "applications", app,
                                                   operation)

    def nudge_log(self, timeout: float = 240.0) -> str:
        """The log of the newest nudge Job (docs/sources.md, "After the hook"), once it finished."""
        def newest() -> str | None:
            jobs = self.batch.list_namespaced_job("cutover", label_selector="app.kubernetes.io/component=nudge").items
            return max(jobs, key=lambda job: job.metadata.creation_timestamp).metadata.name if jobs else None

        name = self.wait("a nudge Job", newest, timeout)
        self.finished(name, timeout=timeout)
        return self.job_log(name)

    def audited(self, job: str) -> str:
        """`cutover audit` run now, as a person runs it (a Job from the workload's CronJob): its log once it
        succeeded, with those of the CronJob's own Jobs (every 5 minutes: one may have come first and done the work,
        and the other found it done)."""
        self.kubectl("-n", "cutover", "create", "job", "--from=cronjob/cutover-audit-llm-serving", job)
        audit = self.finished(job, timeout=180)
        assert audit.succeeded, audit.log[-3000:]
        scheduled = [j.metadata.name for j in self.batch.list_namespaced_job("cutover").items
                     if any(owner.name == "cutover-audit-llm-serving" for owner in j.metadata.owner_references or [])]
        return audit.log + "".join(self.job_log(name) for name in scheduled)

    def sync_only(self, app: str, revision: str, *, kind: str, name: str, namespace: str) -> None:
        """A selective sync, as `argocd app sync --resource :<kind>:<name>` asks for it: the operation names
        the resources, and ArgoCD runs no hook."""
        resource = {"group": "", "kind": kind, "name": name, "namespace": namespace}
        operation = {"operation": {"initiatedBy": {"username": "e2e"},
                                   "sync": {"revision": revision, "resources": [resource]}}}
        self.custom.patch_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd", "applications", app,
                                                   operation)

    # --- what ArgoCD holds ---------------------------------------------------------------------------------------

    def app(self, name: str) -> dict[str, Any]:
        found: dict[str, Any] = self.custom.get_namespaced_custom_object("argoproj.io", "v1alpha1", "argocd",
                                                                          "applications", name)
        return found

    def wait_app(self, name: str, *, synced: bool = False, healthy: bool = False, revision: str | None = None,
                 timeout: float = 120.0) -> dict[str, Any]:
        def ready() -> dict[str, Any] | None:
            app = self.app(name)
            status = app.get("status", {})
            if synced and status.get("sync", {}).get("status") != "Synced":
                return None
            if healthy and status.get("health", {}).get("status") != "Healthy":
                return None
            sync = status.get("sync", {})
            if revision and revision not in [sync.get("revision"), *sync.get("revisions", ())]:  # one, or sources
                return None
            if app.get("operation") or status.get("operationState", {}).get("phase") == "Running":
                return None
            return app

        what = f"Application {name}" + (" Synced" if synced else "") + (" Healthy" if healthy else "") + (
            f" at {revision[:7]}" if revision else "")
        return dict(self.wait(what, ready, timeout, every=0.5))

    def wait_operation(self, name: str, revision: str, timeout: float = 180.0) -> dict[str, Any]:
        """The operation that synced `revision`, once it ended (Succeeded, Failed or Error). Watched, not polled:
        ArgoCD may start the next operation within the same second (an automated sync of the PostSync's commit right
        after a failed sync), and a poll every half second missed the one it waited for (CI, test_terminate)."""
        def ended(app: dict[str, Any]) -> dict[str, Any] | None:
            state = app.get("status", {}).get("operationState", {})
            if state.get("syncResult", {}).get("revision") != revision and \
                    state.get("operation", {}).get("sync", {}).get("revision") != revision:
                return None
            return dict(state) if state.get("phase") in ("Succeeded", "Failed", "Error") else None

        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            self.plane.check_alive()
            app = self.app(name)  # listed, then every change after it: none is missed between the two
            if found := ended(app):
                return found
            watch = kubernetes.watch.Watch()
            for event in watch.stream(self.custom.list_namespaced_custom_object, "argoproj.io", "v1alpha1", "argocd",
                                      "applications", field_selector=f"metadata.name={name}",
                                      resource_version=app["metadata"]["resourceVersion"],
                                      timeout_seconds=max(1, min(30, int(left)))):
                if event["type"] == "ERROR":  # the version expired: list again
                    break
                if found := ended(event["object"]):
                    watch.stop()
                    return found
        raise AssertionError(f"timed out after {timeout:.0f} s waiting for Application {name}'s sync of "
                             f"{revision[:7]} to end (logs: {self.dir})")

    def service(self) -> Any:
        return self.core.read_namespaced_service("reasoning-long-predictor", "llm-serving")


def version() -> str:
    for line in (cluster.ROOT / "e2e" / "versions.env").read_text().splitlines():
        if line.startswith("ARGOCD_VERSION="):
            return line.split("=", 1)[1].split()[0]
    raise RuntimeError("e2e/versions.env names no ARGOCD_VERSION")


def elapsed(since: float) -> float:
    return time.monotonic() - since

