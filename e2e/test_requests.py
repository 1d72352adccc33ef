"""Scenario e: the Kubernetes API requests one `verify --wait` makes for one target pod, counted in the real
apiserver's audit log (by the Job pod's bound token), beside what the emulator counts for the same wait (the
reference plan, one candle-vllm pod that loads in 6 s). Goal: at most 12 per pod per 30-minute wait
(bench 2 measures the 30 minutes in fake time; here the wait is the scaled one)."""

from __future__ import annotations

import collections
import tempfile
from pathlib import Path

import looptime
import structlog

from conftest import MEASURED
from cutover import cluster, plan, wait
from cutover.demo.world import Script, World
from tier.cluster import Tier

POD_NAME = "authentication.kubernetes.io/pod-name"
GOAL = 12


def real_requests(tier: Tier, job: str) -> collections.Counter[str]:
    pods = {p.metadata.name for p in tier.core.list_namespaced_pod(
        "cutover", label_selector=f"batch.kubernetes.io/job-name={job}").items}
    counted: collections.Counter[str] = collections.Counter()
    for event in tier.audit():
        if set(event["user"].get("extra", {}).get(POD_NAME, [])) & pods:
            ref = event.get("objectRef", {})
            counted[f"{event['verb']} {ref.get('resource', event['requestURI'])}"] += 1
    return counted


async def _emulated(load: float) -> collections.Counter[str]:
    with tempfile.TemporaryDirectory() as tmp:
        async with World() as world:
            world.admit_jobs()
            (the_plan,) = plan.parse(world.plan_text())
            pod = world.add_pod("candle", Script(pull=0.5, load=load))
            await pod.engine.bind()
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            try:
                await wait.prove_backend(kube, the_plan, the_plan.backends["candle"], wait=True)
            finally:
                await kube.aclose()
            counted: collections.Counter[str] = collections.Counter()
            for request in world.kube:
                if request.url.path.startswith(("/api/", "/apis/")):
                    counted[audit_name(request.method, request.url.path, request.url.query.get("watch"))] += 1
            return counted


def audit_name(method: str, path: str, watch: str | None) -> str:
    """A request as the audit log names it: the verb (list and watch for a collection) and the resource."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]  # after /api/v1 or /apis/<group>/<version>
    if rest[:1] == ["namespaces"] and len(rest) > 2:
        rest = rest[2:]
    resource, named = rest[0], len(rest) > 1
    verbs = {"GET": "get" if named else ("watch" if watch == "true" else "list"), "POST": "create",
             "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
    return f"{verbs[method]} {resource}"


def emulated_requests(load: float) -> collections.Counter[str]:
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(_emulated(load))
    finally:
        loop.close()
        structlog.reset_defaults()


def test_api_requests_per_target_pod_over_the_wait(tier: Tier, record_property: object) -> None:
    tier.kubectl("-n", "llm-serving", "delete", "pod", "-l", "app.kubernetes.io/name=llm-reasoning-candle",
                 "--wait=false")
    tier.job_from_cronjob("cutover-run", "verify-count", ["verify", "--backend", "candle", "--wait"])
    result = tier.finished("verify-count")
    assert result.succeeded, result
    real = real_requests(tier, "verify-count")
    emulated = emulated_requests(6.0)
    table = "\n".join(f"  {what:<40} real {real.get(what, 0):>3}   emulator {emulated.get(what, 0):>3}"
                      for what in sorted(set(real) | set(emulated)))
    MEASURED.append(f"\nAPI requests of one verify --wait, one target pod:\n{table}\n"
                    f"  {'total':<40} real {sum(real.values()):>3}   emulator {sum(emulated.values()):>3}")
    assert 0 < sum(real.values()) <= GOAL, table
