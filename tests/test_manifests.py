"""What ships for the cluster (hooks/, jobs/, manifests/): valid against a pinned Kubernetes schema, hook
Jobs shaped the way ArgoCD needs, least privilege in every Role, and an example that fits together."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
from ruamel.yaml import YAML

from cutover import plan

ROOT = Path(__file__).resolve().parent.parent
KUBERNETES = "1.33.0"  # the schema version the manifests are checked against
WORKLOADS = {"pods", "deployments", "statefulsets", "daemonsets", "replicasets", "jobs", "cronjobs", "services",
             "replicationcontrollers", "inferenceservices", "*"}
WRITES = {"create", "update", "patch", "delete", "deletecollection", "*"}


def documents() -> list[tuple[Path, dict[str, Any]]]:
    found = []
    for folder in ("hooks", "jobs", "manifests"):
        for path in sorted((ROOT / folder).rglob("*.yaml")):
            if path.name == "kustomization.yaml":
                continue
            for doc in YAML(typ="safe").load_all(path.read_text()):
                if doc:
                    found.append((path.relative_to(ROOT), doc))
    return found


DOCS = documents()
NATIVE = [(path, doc) for path, doc in DOCS if doc["apiVersion"] != "argoproj.io/v1alpha1"]


def as_argocd_creates_it(doc: dict[str, Any]) -> dict[str, Any]:
    """ArgoCD names a generateName hook <prefix><revision[:7]>-<phase>-<unix seconds> (reference §1.7)."""
    rendered = copy.deepcopy(doc)
    meta = rendered["metadata"]
    if "generateName" in meta:
        phase = meta["annotations"]["argocd.argoproj.io/hook"].lower()
        meta["name"] = f"{meta.pop('generateName')}0a1b2c3-{phase}-1764457200"
    return rendered


@pytest.mark.parametrize(("path", "doc"), NATIVE, ids=[f"{p}:{d['kind']}/{d['metadata'].get('name') or 'hook'}"
                                                       for p, d in NATIVE])
def test_valid_against_the_kubernetes_schema_strictly(path: Path, doc: dict[str, Any]) -> None:
    kubernetes_validate.validate(as_argocd_creates_it(doc), KUBERNETES, strict=True)


def test_every_kustomization_lists_files_that_exist() -> None:
    kustomizations = [found for folder in ("hooks", "jobs", "manifests")
                      for found in (ROOT / folder).rglob("kustomization.yaml")]
    assert len(kustomizations) == 5
    for kustomization in kustomizations:
        spec = YAML(typ="safe").load(kustomization.read_text())
        for entry in spec.get("resources", []) + spec.get("components", []):
            assert (kustomization.parent / entry).exists(), f"{kustomization}: {entry}"


HOOKS = [doc for path, doc in DOCS if path.parts[0] == "hooks"]
CRONJOBS = [doc for path, doc in DOCS if doc["kind"] == "CronJob"]


def test_three_hooks_one_per_phase() -> None:
    phases = sorted(doc["metadata"]["annotations"]["argocd.argoproj.io/hook"] for doc in HOOKS)
    assert phases == ["PostSync", "PreSync", "SyncFail"]


@pytest.mark.parametrize("job", HOOKS, ids=lambda job: job["metadata"]["generateName"])
def test_hook_jobs_are_shaped_for_argocd(job: dict[str, Any]) -> None:
    meta, spec = job["metadata"], job["spec"]
    assert len(meta["generateName"]) <= 36  # argo-cd#9184: the generated suffix takes 25-27 of 63
    assert len(as_argocd_creates_it(job)["metadata"]["name"]) <= 63
    assert meta["annotations"]["argocd.argoproj.io/hook-delete-policy"] == "BeforeHookCreation"
    assert spec["activeDeadlineSeconds"] > 1800 + 300  # above the 30-minute budget, with room to prove and commit
    assert spec["backoffLimit"] == 1
    _check_pod(spec["template"]["spec"], job["metadata"]["annotations"]["argocd.argoproj.io/hook"].lower())


@pytest.mark.parametrize("cronjob", CRONJOBS, ids=lambda cronjob: cronjob["metadata"]["name"])
def test_manual_cronjobs_never_fire_by_themselves(cronjob: dict[str, Any]) -> None:
    assert cronjob["spec"]["suspend"] is True
    assert cronjob["metadata"]["name"] in ("cutover-rollback", "cutover-run")
    _check_pod(cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"], cronjob["metadata"]["name"][8:])


def _check_pod(pod: dict[str, Any], command: str) -> None:
    (container,) = pod["containers"]
    assert container["args"] == [command]
    assert pod["serviceAccountName"] == "cutover"
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"] == {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                            "capabilities": {"drop": ["ALL"]}}
    env = {item["name"]: item for item in container["env"]}
    assert "batch.kubernetes.io/job-name" in env["CUTOVER_JOB_NAME"]["valueFrom"]["fieldRef"]["fieldPath"]
    mounts = {mount["mountPath"] for mount in container["volumeMounts"]}
    # /tmp: the one writable path (an emptyDir) on a read-only root filesystem
    assert mounts == {"/etc/cutover", "/var/run/secrets/cutover/git", "/var/run/secrets/cutover/slack",
                      "/tmp"}  # noqa: S108


def test_no_role_writes_services_pods_or_workloads() -> None:
    rules = [(doc["metadata"], rule) for _, doc in DOCS if doc["kind"] in ("Role", "ClusterRole")
             for rule in doc["rules"]]
    assert rules
    for meta, rule in rules:
        writes = WRITES & set(rule["verbs"])
        touched = WORKLOADS & set(rule["resources"])
        assert not (writes and touched), f"{meta['namespace']}/{meta['name']}: {rule}"
        assert "*" not in rule["verbs"] and "*" not in rule["resources"] and "*" not in rule["apiGroups"]
    written = sorted({(resource, verb) for _, rule in rules for resource in rule["resources"]
                      for verb in WRITES & set(rule["verbs"])})
    assert written == [("applications", "patch"), ("events", "create"), ("events", "patch"),
                       ("leases", "create"), ("leases", "update")]
    assert not [doc for _, doc in DOCS if doc["kind"] in ("ClusterRole", "ClusterRoleBinding")]


def test_the_argocd_role_reaches_one_application_only() -> None:
    (role,) = [doc for _, doc in DOCS if doc["kind"] == "Role" and doc["metadata"]["namespace"] == "argocd"]
    (rule,) = role["rules"]
    assert rule["resourceNames"] == ["llm-serving"] and set(rule["verbs"]) == {"get", "watch", "patch"}


def test_the_example_plan_fits_the_example_service_and_engines() -> None:
    (configmap,) = [doc for _, doc in DOCS if doc["kind"] == "ConfigMap" and doc["metadata"]["name"] == "cutover-plan"]
    (the_plan,) = plan.parse(configmap["data"]["plan.yaml"])
    (service,) = [doc for _, doc in DOCS if doc["kind"] == "Service"]
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
