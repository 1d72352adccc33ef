"""Scenario c: the Service's Lease on a real apiserver, with the real Job controller.

A PostSync whose process is SIGKILLed while it holds the Lease and waits: the Job controller's replacement pod
(backoffLimit 1; exit 137 is no verdict in podFailurePolicy) takes the Lease over at once, as its holder's pod
has ended, and finishes with one commit. Then two PostSyncs at once for the next change: they serialize on the
Lease, and the history holds one commit for that change, not two.
"""

from __future__ import annotations

import time

from tier.cluster import Tier
from tier.shim import Container

CANDLE = "app.kubernetes.io/name=llm-reasoning-candle"
SERVICE_FILE = "manifests/examples/llm-serving/workload/service.yaml"


def holder(tier: Tier, job: str) -> Container | None:
    for container in list(tier.shim.running.values()):
        if container is not None and container.pod["metadata"]["labels"].get("batch.kubernetes.io/job-name") == job:
            return container
    return None


def test_a_killed_holder_is_taken_over_by_the_jobs_next_pod(tier: Tier) -> None:
    tier.kubectl("-n", "llm-serving", "delete", "pod", "-l", CANDLE, "--wait=false")
    before = len(tier.git.cutover_commits())
    tier.job_from_cronjob("cutover-run-llm-serving", "postsync-killed", ["postsync"])
    tier.wait("the PostSync holding the Lease and waiting", lambda: "lock.acquired" in tier.job_log(
        "postsync-killed") and "target.watching" in tier.job_log("postsync-killed"), 60)
    container = holder(tier, "postsync-killed")
    assert container is not None
    killed_at = time.monotonic()
    tier.shim.sigkill(container)
    result = tier.finished("postsync-killed", timeout=180)
    assert result.succeeded, result
    pods = tier.core.list_namespaced_pod("cutover", label_selector="batch.kubernetes.io/job-name=postsync-killed")
    codes = sorted(p.status.container_statuses[0].state.terminated.exit_code for p in pods.items)
    assert codes == [0, 137]
    assert "lock.taken_over" in result.log, result.log[-3000:]
    # at once: not after the Lease's 60 s without renewal
    assert time.monotonic() - killed_at < 50
    assert len(tier.git.cutover_commits()) == before + 1


def test_two_postsyncs_at_once_make_one_commit(tier: Tier) -> None:
    # a person puts the selector back on vLLM in Git (the live Service never left it: no ArgoCD here)
    seeded = tier.git.repo.read(SERVICE_FILE, tier.git.seed)
    assert seeded is not None
    tier.git.repo.commit({SERVICE_FILE: seeded[0]}, "Back on vLLM for now\n")
    tier.kubectl("-n", "llm-serving", "delete", "pod", "-l", CANDLE, "--wait=false")  # a wait both overlap in
    before = len(tier.git.cutover_commits())
    tier.job_from_cronjob("cutover-run-llm-serving", "postsync-a", ["postsync"])
    tier.job_from_cronjob("cutover-run-llm-serving", "postsync-b", ["postsync"])
    first, second = tier.finished("postsync-a", timeout=180), tier.finished("postsync-b", timeout=180)
    assert len(tier.git.cutover_commits()) == before + 1
    outcomes = sorted((r.exit_code for r in (first, second)), key=lambda c: c or 0)
    # one commits; the other waited for the Lease and found the change made (0), or saw a live holder (8)
    assert outcomes in ([0, 0], [0, 8]), (first, second)
    assert 8 in outcomes or "lock.waiting" in first.log + second.log, (first.log[-2000:], second.log[-2000:])
