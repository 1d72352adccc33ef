"""Scenario b: the ServiceAccount and Roles as shipped (manifests/base), judged by the real authorizer.

What cutover's commands ask of the API is allowed (no 403 for its ServiceAccount anywhere in the audit log of
the tier's runs), and what it must never do is refused: writing Services or workloads (the selector changes
through Git: docs/guarantees.md #3), reading Secrets, creating pods, exec.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from tier.cluster import SA, Tier

FORBIDDEN = [
    ("patch", "services", "llm-serving"),
    ("update", "services", "llm-serving"),
    ("delete", "services", "llm-serving"),
    ("patch", "deployments.apps", "llm-serving"),
    ("create", "pods", "llm-serving"),
    ("create", "pods", "cutover"),
    ("create", "pods/exec", "llm-serving"),
    ("create", "pods/exec", "cutover"),
    ("get", "secrets", "cutover"),
    ("get", "secrets", "llm-serving"),
    ("list", "secrets", "argocd"),
    ("patch", "endpointslices.discovery.k8s.io", "llm-serving"),
    ("create", "jobs.batch", "llm-serving"),
    ("patch", "jobs.batch", "cutover"),
    ("delete", "jobs.batch", "cutover"),
    ("create", "cronjobs.batch", "cutover"),
    ("patch", "networkpolicies.networking.k8s.io", "llm-serving"),
]
ALLOWED = [
    ("get", "services", "llm-serving"),
    ("watch", "pods", "llm-serving"),
    ("list", "endpointslices.discovery.k8s.io", "llm-serving"),
    ("create", "events", "llm-serving"),
    ("create", "leases.coordination.k8s.io", "llm-serving"),
    ("get", "pods", "cutover"),
    # the nudge (docs/sources.md, "After the hook"): its Job, made from the audit CronJob; cutover-jobs-nudge-only
    # admits no other Job of the ServiceAccount's (test_admission.py)
    ("get", "cronjobs.batch", "cutover"),
    ("create", "jobs.batch", "cutover"),
    # a hook's own Job, for the Application ArgoCD's tracking on it names (a fleet's shared plan, docs/fleet.md)
    ("get", "jobs.batch", "cutover"),
]


@pytest.mark.parametrize(("verb", "resource", "namespace"), FORBIDDEN)
def test_the_service_account_cannot(tier: Tier, verb: str, resource: str, namespace: str) -> None:
    done = tier.kubectl("auth", "can-i", verb, resource, "-n", namespace, as_sa=True, check=False)
    assert done.stdout.strip() == "no", (verb, resource, namespace, done.stdout, done.stderr)


@pytest.mark.parametrize(("verb", "resource", "namespace"), ALLOWED)
def test_the_service_account_can(tier: Tier, verb: str, resource: str, namespace: str) -> None:
    done = tier.kubectl("auth", "can-i", verb, resource, "-n", namespace, as_sa=True, check=False)
    assert done.stdout.strip() == "yes", (verb, resource, namespace, done.stdout, done.stderr)


FIRST, FURTHER = SA, "system:serviceaccount:cutover-chat-prod:cutover"  # llm-serving's; chat-prod's (More Services)
APART = [  # one ServiceAccount per workload: each holds its own Lease, Application and pods, and no other's
    (FURTHER, "update", "leases.coordination.k8s.io/cutover-chat-predictor", "llm-serving", "yes"),
    (FURTHER, "get", "leases.coordination.k8s.io/cutover-reasoning-long-predictor", "llm-serving", "no"),
    (FURTHER, "update", "leases.coordination.k8s.io/cutover-reasoning-long-predictor", "llm-serving", "no"),
    (FIRST, "update", "leases.coordination.k8s.io/cutover-chat-predictor", "llm-serving", "no"),
    (FURTHER, "patch", "applications.argoproj.io/chat-prod", "argocd", "yes"),
    (FURTHER, "patch", "applications.argoproj.io/llm-serving", "argocd", "no"),
    (FIRST, "patch", "applications.argoproj.io/chat-prod", "argocd", "no"),
    (FURTHER, "get", "pods", "cutover-chat-prod", "yes"),
    (FURTHER, "get", "pods", "cutover", "no"),
    (FIRST, "get", "pods", "cutover-chat-prod", "no"),
    (FURTHER, "get", "secrets", "cutover", "no"),
    (FURTHER, "get", "secrets", "cutover-chat-prod", "no"),  # its own are mounted, never read through the API
    (FURTHER, "create", "jobs.batch", "cutover", "no"),
    (FURTHER, "get", "jobs.batch", "cutover", "no"),
    (FURTHER, "create", "pods", "cutover-chat-prod", "no"),
]


@pytest.mark.parametrize("case", APART, ids=[" ".join(case[1:4]) + f" ({case[0].split(':')[2]})" for case in APART])
def test_a_workloads_service_account_reaches_no_other_workloads_lease_application_or_pods(
        tier: Tier, case: tuple[str, str, str, str, str]) -> None:
    user, verb, resource, namespace, answer = case
    done = tier.kubectl("auth", "can-i", verb, resource, "-n", namespace, "--as", user, check=False)
    assert done.stdout.strip() == answer, (user, verb, resource, namespace, done.stdout, done.stderr)


def test_status_runs_with_the_shipped_rbac(tier: Tier) -> None:
    tier.job_from_cronjob("cutover-run-llm-serving", "status", ["status", "--output", "json"])
    result = tier.finished("status")
    assert result.succeeded, result
    assert '"liveBackend": "vllm"' in result.log and '"target": "candle"' in result.log, result.log[-2000:]


COMMANDS = [  # what the hooks, the CronJobs and a person run; the ones that would wait for ArgoCD as dry runs
    ("presync", ["presync"]),
    ("syncfail", ["syncfail"]),
    ("audit", ["audit"]),
    ("run", ["run", "--dry-run"]),
    ("rollback", ["rollback", "--dry-run"]),
    ("plan", ["plan"]),
]


@pytest.mark.parametrize(("name", "args"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_each_command_is_allowed_what_it_asks(tier: Tier, name: str, args: list[str]) -> None:
    """Not every command has work to do here (no ArgoCD operation to gate, nothing failed): what it does ask of
    the API must be allowed, and it must end with a verdict, never an internal error."""
    job = f"rbac-{name}"
    tier.job_from_cronjob("cutover-run-llm-serving", job, args)
    result = tier.finished(job, timeout=120)
    assert result.exit_code not in (1, None), result
    pods = {p.metadata.name for p in tier.core.list_namespaced_pod(
        "cutover", label_selector=f"batch.kubernetes.io/job-name={job}").items}
    refused = [(e["verb"], e["requestURI"]) for e in tier.audit()
               if e.get("responseStatus", {}).get("code") == 403
               and set(e["user"].get("extra", {}).get("authentication.kubernetes.io/pod-name", [])) & pods]
    assert refused == [], result.log[-2000:]


@pytest.mark.after_all
def test_no_request_of_the_service_account_was_refused(tier: Tier) -> None:
    """Run after every other scenario (conftest): each of their Jobs ran as the ServiceAccount. While the
    apiserver restarts (test_watch) it refuses until its RBAC caches sync (kubernetes#121635): cutover retries
    those (tests/kube/test_cluster.py), and they are not the Roles' doing."""
    events = tier.audit()
    assert events, "the audit log holds no request of the ServiceAccount"
    refused = [(e["verb"], e["requestURI"], e["responseStatus"]["code"]) for e in events
               if e.get("responseStatus", {}).get("code") == 403 and not restarting(tier, e["stageTimestamp"])]
    assert refused == []


def restarting(tier: Tier, stamp: str) -> bool:
    at = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    return any(began <= at <= ready + timedelta(seconds=5) for began, ready in tier.plane.restarts)
