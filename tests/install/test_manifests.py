"""What ships for the cluster (hooks/, jobs/, manifests/): every kustomization builds with real kustomize (what
ArgoCD runs) and its output is valid against a pinned Kubernetes schema (ArgoCD's own CRD schemas for its
kinds); hook Jobs shaped the way ArgoCD needs; least privilege in every Role; an example that fits together."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

import contracts
from cutover import plan
from cutover.sources import kustomize_build

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = "1.33.0"  # the schema version the manifests are checked against
WORKLOADS = {"pods", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs", "services",
             "replicationcontrollers", "inferenceservices", "*"}
WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}


# Kinds whose schemas no registry CI installs from serves: held to what cutover needs of them instead
# (tests/install/test_fleet_example.py: Kargo's Stages, GitOps Promoter's strategy)
NOT_SERVED = ("kargo.akuity.io/", "promoter.argoproj.io/")


def documents() -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for folder in ("hooks", "jobs", "fleet", "manifests"):
        for path in sorted((ROOT / folder).rglob("*.yaml")):
            if path.name == "kustomization.yaml":
                continue
            for doc in YAML(typ="safe").load_all(path.read_text()):
                # plans and Helm values are read by cutover and by charts, not applied: tested below; a
                # local-config object (manifests/workload's `cutover-workload`) is kustomize's alone
                if doc and "kind" in doc and doc.get("apiVersion") != "cutover/v1alpha1" and not _local(doc) \
                        and not str(doc.get("apiVersion")).startswith(NOT_SERVED):
                    found.append((path.relative_to(ROOT), doc))
    return found


def _local(doc: dict[str, Any]) -> bool:
    return (doc.get("metadata", {}).get("annotations") or {}).get("config.kubernetes.io/local-config") == "true"


DOCS = documents()
KUSTOMIZATIONS = sorted(found.parent.relative_to(ROOT) for folder in ("hooks", "jobs", "fleet", "manifests")
                        for found in (ROOT / folder).rglob("kustomization.yaml"))


def built(directory: Path) -> list[dict[str, Any]]:
    """`kustomize build`, with the real binary (kustomize, or kubectl's): a missing one fails the test, loudly."""
    done = subprocess.run([*kustomize_build.require(), str(ROOT / directory)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, f"kustomize build {directory} failed: {done.stderr}"
    return kustomize_build.documents(done.stdout, where=str(directory))


@pytest.mark.parametrize("directory", KUSTOMIZATIONS, ids=str)
def test_every_kustomization_builds_with_real_kustomize_into_valid_objects(directory: Path) -> None:
    objects = built(directory)
    spec = YAML(typ="safe").load((ROOT / directory / "kustomization.yaml").read_text())
    assert objects or set(spec) == {"apiVersion", "kind", "images"}  # the image Component only renames
    for doc in objects:
        if doc["apiVersion"] == "argoproj.io/v1alpha1":  # ArgoCD's kinds, against ArgoCD's own CRD schemas
            assert contracts.crd_validator(doc["kind"].lower()).is_valid(doc), doc["metadata"]["name"]
        else:
            kubernetes_validate.validate(doc, KUBERNETES, strict=True)


@pytest.mark.parametrize(("path", "doc"), DOCS, ids=[f"{p}:{d['kind']}/{d['metadata']['name']}" for p, d in DOCS])
def test_every_file_as_written_is_valid_too(path: Path, doc: dict[str, Any]) -> None:
    """Also what no kustomization builds (the Applications, applied by hand), and what an overlay would patch."""
    if doc["apiVersion"] == "argoproj.io/v1alpha1":
        assert contracts.crd_validator(doc["kind"].lower()).is_valid(doc)
    else:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_the_example_application_renders_the_hooks_under_its_own_names() -> None:
    jobs = [doc for doc in built(Path("manifests/examples/llm-serving/workload")) if doc["kind"] == "Job"]
    names = sorted(job["metadata"]["name"] for job in jobs)
    assert names == ["cutover-postsync-llm-serving", "cutover-presync-llm-serving", "cutover-syncfail-llm-serving"]
    assert all(len(name) <= 63 for name in names)  # a Job's name is a label value on its pods


def test_every_kustomization_lists_files_that_exist() -> None:
    kustomizations = [ROOT / directory / "kustomization.yaml" for directory in KUSTOMIZATIONS]
    assert len(kustomizations) >= 8
    for kustomization in kustomizations:
        spec = YAML(typ="safe").load(kustomization.read_text())
        for entry in spec.get("resources", []) + spec.get("components", []):
            assert (kustomization.parent / entry).exists(), f"{kustomization}: {entry}"


HOOKS = [doc for path, doc in DOCS if path.parts[0] == "hooks"]
CRONJOBS = [doc for path, doc in DOCS if doc["kind"] == "CronJob"]


def test_three_hooks_one_per_phase() -> None:
    phases = sorted(doc["metadata"]["annotations"]["argocd.argoproj.io/hook"] for doc in HOOKS)
    assert phases == ["PostSync", "PreSync", "SyncFail"]


@pytest.mark.parametrize("job", [*HOOKS, *(cronjob["spec"]["jobTemplate"] | {"metadata": cronjob["metadata"]}
                                     for cronjob in CRONJOBS)], ids=lambda job: job["metadata"]["name"])
def test_every_job_tells_cutover_its_deadline(job: dict[str, Any]) -> None:
    """CUTOVER_DEADLINE_SECONDS mirrors activeDeadlineSeconds, so that cutover says when a plan needs longer
    (src/cutover/core/deadline.py) instead of being killed mid-wait without a word; the shipped value is the one
    `cutover plan` compares with."""
    from cutover.core import deadline

    spec = job["spec"]
    (container,) = spec["template"]["spec"]["containers"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["CUTOVER_DEADLINE_SECONDS"] == str(spec["activeDeadlineSeconds"])
    if job["metadata"]["name"] in ("cutover-run", "cutover-rollback"):  # every hop, and ArgoCD's apply waited for
        assert spec["activeDeadlineSeconds"] >= 1800 + 600 + deadline.MARGIN
    else:
        assert spec["activeDeadlineSeconds"] == deadline.SHIPPED


@pytest.mark.parametrize("job", HOOKS, ids=lambda job: job["metadata"]["name"])
def test_hook_jobs_are_shaped_for_argocd(job: dict[str, Any]) -> None:
    meta, spec = job["metadata"], job["spec"]
    assert "generateName" not in meta  # kustomize refuses it (kubernetes-sigs/kustomize#641)
    assert len(meta["name"]) <= 30  # room for an Application's nameSuffix within 63
    assert meta["annotations"]["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
    assert spec["activeDeadlineSeconds"] > 1800 + 300  # above the 30-minute budget, with room to prove and commit
    assert spec["backoffLimit"] == 1
    _check_pod(spec["template"]["spec"], job["metadata"]["annotations"]["argocd.argoproj.io/hook"].lower())


@pytest.mark.parametrize("cronjob", CRONJOBS, ids=lambda cronjob: cronjob["metadata"]["name"])
def test_manual_cronjobs_never_fire_by_themselves_and_the_audit_every_5_minutes(cronjob: dict[str, Any]) -> None:
    name, spec = cronjob["metadata"]["name"], cronjob["spec"]
    assert name in ("cutover-rollback", "cutover-run", "cutover-audit")
    if name == "cutover-audit":  # docs/sources.md: every 5 minutes, not suspended, one at a time
        assert (spec["suspend"], spec["schedule"], spec["concurrencyPolicy"]) == (False, "*/5 * * * *", "Forbid")
    else:
        assert spec["suspend"] is True
    # the audit's Job never fails on a finding: ArgoCD would count the CronJob Degraded and fail the syncs
    options = ["--exit-zero"] if name == "cutover-audit" else []
    _check_pod(spec["jobTemplate"]["spec"]["template"]["spec"], name[8:], options)


def _check_pod(pod: dict[str, Any], command: str, options: list[str] | None = None) -> None:
    (container,) = pod["containers"]
    assert container["args"] == [command, *(options or [])]
    assert pod["serviceAccountName"] == "cutover"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    env = {item["name"]: item for item in container["env"]}
    assert "batch.kubernetes.io/job-name" in env["CUTOVER_JOB_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
    mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
    # /tmp: the one writable path (an emptyDir) on a read-only root filesystem
    assert mounts == {"/etc/cutover", "/var/run/secrets/cutover/git", "/var/run/secrets/cutover/slack",
                      "/var/run/secrets/cutover/argocd", "/tmp"}  # noqa: S108


def test_no_role_writes_services_pods_or_workloads() -> None:
    rules = [(doc["metadata"], rule) for _, doc in DOCS if doc["kind"] in ("Role", "ClusterRole")
             for rule in doc["rules"]]
    assert rules
    for meta, rule in rules:
        writes = WRITES & set(rule["verbs"])
        touched = WORKLOADS & set(rule["resources"])
        # the one exception: the nudge's Job, in cutover's own namespace (docs/sources.md, "After the hook"),
        # which cutover-jobs-nudge-only holds to `cutover nudge` (below)
        nudge = meta["name"] == "cutover-holders" and rule == {"apiGroups": ["batch"], "resources": ["jobs"],
                                                               "verbs": ["create"]}
        assert nudge or not (writes and touched), f"{meta['namespace']}/{meta['name']}: {rule}"
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    written = sorted({(resource, verb) for _, rule in rules for resource in rule["resources"]
                      for verb in WRITES & set(rule["verbs"])})
    # the Application's patch (the refresh) is the administrator's Role (docs/install.md, step 2), none shipped
    assert written == [("events", "create"), ("jobs", "create"), ("leases", "create"), ("leases", "update")]
    (policy,) = [doc for _, doc in DOCS if doc["kind"] == "ValidatingAdmissionPolicy"
                 and doc["metadata"]["name"] == "cutover-jobs-nudge-only"]
    assert "c.args == ['nudge']" in policy["spec"]["validations"][0]["expression"]
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {"apiGroups": ["batch"], "apiVersions": ["*"], "resources": ["jobs"], "operations": ["CREATE"]}]
    for meta, rule in rules:  # what is read back or rewritten is named: one Application, the plan's Leases
        if set(rule["verbs"]) & {"get", "update", "patch"} and set(rule["resources"]) & {"applications", "leases"}:
            assert rule.get("resourceNames"), f"{meta['name']}: {rule}"
    assert not [rule for _, rule in rules if "events.k8s.io" in rule["apiGroups"]]  # never used
    # cluster-wide, only the optional capacity reader (docs/capacity.md): nodes and pods, listed, nothing else
    cluster_wide = [(path, doc) for path, doc in DOCS if doc["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    assert {(str(path), doc["kind"]) for path, doc in cluster_wide} == {
        ("manifests/capacity/clusterrole-capacity.yaml", "ClusterRole"),
        ("manifests/capacity/clusterrole-capacity.yaml", "ClusterRoleBinding")}
    (reader,) = [doc for _, doc in cluster_wide if doc["kind"] == "ClusterRole"]
    assert reader["rules"] == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
                               {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]}]


def test_the_base_grants_nothing_cluster_wide() -> None:
    """The capacity reader is opt-in: the base and the workload Component hold no cluster-scoped role."""
    for directory in (Path("manifests/base"), Path("manifests/workload")):
        assert not [doc for doc in built(directory) if doc["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_in_its_own_namespace_cutover_reads_pods_and_makes_its_nudge() -> None:
    """Enough to see whether a Lease holder's pod has ended (lease._holder_gone), to make the nudge's Job from the
    audit CronJob (docs/sources.md, "After the hook") and to read a hook's own Job for ArgoCD's tracking on it (a
    fleet's shared plan, docs/fleet.md), nothing more."""
    (role,) = [doc for _, doc in DOCS if doc["kind"] == "Role" and doc["metadata"]["namespace"] == "cutover"]
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]},
                             {"apiGroups": ["batch"], "resources": ["cronjobs"], "verbs": ["get"]},
                             {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["create"]},
                             {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]}]
    hooks = [doc for path, doc in DOCS if doc["kind"] in ("Job", "CronJob")]
    assert len(hooks) >= 6  # three hooks, three CronJobs
    for job in hooks:
        spec = job["spec"]["jobTemplate"]["spec"] if job["kind"] == "CronJob" else job["spec"]
        (container,) = spec["template"]["spec"]["containers"]
        env = {item["name"]: item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath")
               for item in container["env"]}
        assert env["POD_NAME"] == "metadata.name" and env["POD_NAMESPACE"] == "metadata.namespace", job["metadata"]


def test_cutovers_application_puts_nothing_in_argocds_namespace_and_its_project_may_not() -> None:
    """A project that may put Roles in ArgoCD's namespace may bind any of ArgoCD's: the refresh Role there is an
    administrator's (docs/install.md, step 2), for the one Application, get and patch."""
    assert not [doc for doc in built(Path("manifests/examples/llm-serving/cutover"))
                if doc["metadata"].get("namespace") == "argocd"]
    projects = YAML(typ="safe").load_all((ROOT / "manifests/examples/llm-serving/appproject.yaml").read_text())
    (own,) = [doc for doc in projects if doc["metadata"]["name"] == "cutover"]
    assert "argocd" not in {destination["namespace"] for destination in own["spec"]["destinations"]}
    install = (ROOT / "docs" / "install.md").read_text()
    assert ("kubectl -n argocd create role cutover-refresh-llm-serving --verb=get,patch \\\n"
            "  --resource=applications.argoproj.io --resource-name=llm-serving") in install


def test_the_example_plan_fits_the_example_service_and_engines() -> None:
    (configmap,) = [doc for _, doc in DOCS if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "cutover-plan"]
    (the_plan,) = plan.parse(configmap["data"]["plan.yaml"])
    (service,) = [doc for path, doc in DOCS if doc["kind"] == "Service" and path.parts[2:3] == ("llm-serving",)]
    deployments = {doc["metadata"]["name"]: doc for _, doc in DOCS if doc["kind"] == "Deployment"}
    assert service["spec"]["selector"] == the_plan.backends["vllm"].selector  # serving vLLM today
    for name, backend in the_plan.backends.items():
        labels = [d["spec"]["template"]["metadata"]["labels"] for d in deployments.values()]
        matching = [pod for pod in labels if all(pod.get(k) == v for k, v in backend.selector.items())]
        assert len(matching) == 1, name  # each backend's selector picks exactly one engine's pods
    assert (ROOT / the_plan.git.path).exists()  # the plan points at the Service file in this layout
    policies = [doc for _, doc in DOCS if doc["kind"] == "NetworkPolicy" and doc["metadata"]["namespace"] ==
                "llm-serving"]
    admitted = {peer["namespaceSelector"]["matchLabels"]["kubernetes.io/metadata.name"]
                for policy in policies for rule in policy["spec"]["ingress"] for peer in rule["from"]}
    assert admitted == {"poimen", "cutover"}


EXAMPLES = ROOT / "manifests" / "examples"


def _example_plan(name: str) -> plan.Plan:
    (one,) = plan.parse((EXAMPLES / name / "plan.yaml").read_text(), source=f"{name}/plan.yaml")
    assert (ROOT / one.git.path).exists()
    return one


def test_the_kustomize_example_renders_the_plans_effective_selector() -> None:
    example = _example_plan("kustomize-overlay")
    assert example.git.source == "kustomize" and example.git.render_path is not None
    (service,) = [doc for doc in built(Path(example.git.render_path)) if doc["kind"] == "Service"]
    assert service["spec"]["selector"] == example.backends["vllm"].selector  # with the overlay's env: prod


def test_the_helm_example_writes_a_values_key_the_file_holds() -> None:
    example = _example_plan("helm-values")
    values = YAML(typ="safe").load((ROOT / example.git.path).read_text())
    assert values[example.git.selector_path] == example.backends["vllm"].git_value
    (app,) = [doc for path, doc in DOCS if path.parts[2:3] == ("helm-values",) and doc["kind"] == "Application"]
    assert [source["repoURL"] for source in app["spec"]["sources"]][1] == example.git.url  # multi-source


def test_the_hydrator_example_commits_to_the_dry_source() -> None:
    example = _example_plan("hydrator")
    (app,) = [doc for path, doc in DOCS if path.parts[2:3] == ("hydrator",) and doc["kind"] == "Application"]
    dry = app["spec"]["sourceHydrator"]["drySource"]
    assert example.git.branch == dry["targetRevision"] and example.git.path.startswith(dry["path"] + "/")
    assert example.git.branch != app["spec"]["sourceHydrator"]["syncSource"]["targetBranch"]




@pytest.mark.parametrize("path", sorted({*(ROOT / "e2e" / "fixtures").rglob("plan*.yaml"),
                                         *(ROOT / "manifests" / "examples").rglob("plan*.yaml")}),
                         ids=lambda path: str(path.relative_to(ROOT)))
def test_every_plan_the_repository_ships_or_the_tier_runs_reads(path: Path) -> None:
    """Each plan ConfigMap (or plan file) of the examples and the real tier passes the plan reader, so that a rule
    added to the reader meets them here, not an hour into the tier."""
    documents = [doc for doc in YAML(typ="safe").load_all(path.read_text()) if doc]
    texts = [doc["data"]["plan.yaml"] for doc in documents if doc.get("kind") == "ConfigMap" and
             "plan.yaml" in doc.get("data", {})] or [path.read_text()]
    for text in texts:
        assert plan.parse(text, source=str(path.relative_to(ROOT)))


def test_a_fleets_cluster_gates_verifies_and_marks_and_writes_nothing() -> None:
    """fleet/ (docs/fleet.md): the gate first in PreSync, the verifier in the Sync phase at wave 1000 (after the
    Service and the engines are applied and Healthy), the mark of a verified switch at 1001, SyncFail's report; no
    PostSync and no CronJob, which would write to Git. The verifier is the shipped PostSync pod with its command,
    phase and deadline changed: the pod the admission policy compares field by field."""
    objects = {f"{doc['kind']}/{doc['metadata']['name']}": doc for doc in built(Path("fleet"))}
    assert sorted(objects) == ["ConfigMap/cutover-verified", "Job/cutover-presync", "Job/cutover-syncfail",
                               "Job/cutover-verify"]
    said = {name: doc["metadata"]["annotations"] for name, doc in objects.items()}
    order = {name: (notes.get("argocd.argoproj.io/hook"), notes.get("argocd.argoproj.io/sync-wave"))
             for name, notes in said.items()}
    assert order == {"Job/cutover-presync": ("PreSync", "-1000"), "Job/cutover-verify": ("Sync", "1000"),
                     "ConfigMap/cutover-verified": (None, "1001"), "Job/cutover-syncfail": ("SyncFail", None)}
    verify = objects["Job/cutover-verify"]
    postsync = next(doc for doc in built(Path("hooks")) if doc["metadata"]["name"] == "cutover-postsync")
    (container,) = verify["spec"]["template"]["spec"]["containers"]
    assert container["args"] == ["verify", "--synced"]
    env = {item["name"]: item.get("value") for item in container["env"]}
    assert env["CUTOVER_DEADLINE_SECONDS"] == str(verify["spec"]["activeDeadlineSeconds"]) == "600"
    shipped = postsync["spec"]["template"]["spec"]
    env_back = [dict(item, value="2400") if item["name"] == "CUTOVER_DEADLINE_SECONDS" else item
                for item in container["env"]]
    changed = {**verify["spec"]["template"]["spec"], "containers": [{**container, "args": ["postsync"],
                                                                     "env": env_back}]}
    assert changed == shipped  # the same pod but for its command and deadline
