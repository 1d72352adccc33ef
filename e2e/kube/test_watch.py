"""Scenario d: a watch whose resourceVersion an etcd compaction took away (410 Gone) is listed again, and the wait
ends as it would have: the apiserver restarts during `verify --wait` after etcd was compacted past the version
cutover's watch holds, so the resumed watch is refused as too old.

On a loaded machine the restarted apiserver may answer nothing for seconds: the watch then retries on connection
errors and the wait proves the pod from its own lists before the watch ever asks again, so no 410 is seen. Both
ways are the guarantee (the wait ends as it would have, the watch never stalls it); the test asserts the one
that happened, never a timing."""

from __future__ import annotations

from kube.test_wait import verify_job
from tier.cluster import Tier


def test_a_watch_expired_by_compaction_is_listed_again(faults: Tier) -> None:
    faults.kubectl("-n", "llm-serving", "scale", "deployment/fault-slow-ok", "--replicas=1")
    verify_job(faults, "verify-compaction", "slow-ok", plan="cutover-plan-faults")
    faults.wait("the verify Job's watch", lambda: "target.watching" in faults.job_log("verify-compaction"), 30)
    for n in range(20):  # resourceVersions the watch never saw, then compacted away
        faults.kubectl("-n", "default", "create", "configmap", f"churn-{n}")
    faults.plane.compact_etcd()
    faults.plane.restart_apiserver()
    result = faults.finished("verify-compaction", timeout=120)
    assert result.succeeded, result
    # listed again after the 410, or resumed through the outage and proven from a fresh list before it came
    assert "cluster.watch_expired" in result.log or "cluster.retry" in result.log, result.log[-3000:]
    assert result.message.startswith("cutover verify: OK — backend slow-ok proven"), result.message
