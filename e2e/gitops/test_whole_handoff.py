"""handoff.strategy recreate through the real ArgoCD, the real scheduler and the real Deployment controller
(docs/capacity.md): the GPU node has room for one engine (another team's pod holds its other card, as "4 of 4 GPUs
allocated" does), so the target stays Pending while the source runs. A person's commit sets the target and the
strategy; PostSync frees the source by a commit, the next sync's PostSync waits for the target and switches, the
one after verifies and says the gap. Then the way back with a maxGap nobody could keep: the source is restored first,
the target freed, and when the gap runs out the target is given up (freed) and the source restored, with a hold."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from conftest import MEASURED
from cutover.core.trailers import Trailers
from tier import gitops

CANDLE, VLLM = gitops.CANDLE, gitops.VLLM
DEPLOYMENT = {"vllm": "llm-reasoning", "candle": "llm-reasoning-candle"}
HOLDER = """apiVersion: v1
kind: Pod
metadata:
  name: coder
  namespace: default
spec:
  nodeSelector: {nvidia.com/gpu.present: "true"}
  containers:
    - name: coder
      image: example.invalid/coder:1
      resources:
        limits: {nvidia.com/gpu: 1}
"""


def serving(argo: gitops.GitOpsTier) -> str:
    return "candle" if argo.service().spec.selector == CANDLE else "vllm"


def engines_with(argo: gitops.GitOpsTier, replicas: dict[str, int]) -> str:
    """engines.yaml at the head with each named Deployment's replicas set (both present, as the story left them)."""
    found = argo.git.repo.read(gitops.ENGINES)
    assert found is not None
    text = found[0]
    if "name: llm-reasoning-candle" not in text:  # run on its own: the repository before the story
        text = (gitops.cluster.ROOT / gitops.ENGINES).read_text()
    for backend, count in replicas.items():
        text, done = re.subn(rf"(  name: {DEPLOYMENT[backend]}\n  namespace: llm-serving\n(?:  annotations: .*\n)?"
                             rf"spec:\n  replicas: )\d+", rf"\g<1>{count}", text)  # an earlier scenario's note
        assert done == 1, backend
    return text


def recreate_plan(target: str, max_gap: str) -> str:
    plan = gitops.with_target((gitops.cluster.ROOT / gitops.PLAN).read_text(), target).replace(
        "        compare: true\n", "        compare: false\n")  # vLLM's shorter context is not the point here
    for backend, engine in (("vllm", "vllm"), ("candle", "candle-vllm")):
        plan = plan.replace(f"        engine: {engine}\n", f"        engine: {engine}\n        workload: {{kind: "
                                                            f"Deployment, name: {DEPLOYMENT[backend]}, path: "
                                                            f"{gitops.ENGINES}}}\n", 1)
    assert plan.count("workload:") == 2
    return plan.rstrip("\n") + f"\n    handoff: {{strategy: recreate, maxGap: {max_gap}, drainTimeout: 10s}}\n"


def pods(argo: gitops.GitOpsTier, backend: str) -> list[str]:
    return [pod.metadata.name for pod in argo.core.list_namespaced_pod(
        "llm-serving", label_selector=f"app.kubernetes.io/name={DEPLOYMENT[backend]}").items]


def events(log: str, name: str) -> list[dict[str, object]]:
    """The structured events called `name` in a pod's log (its JSON lines)."""
    found = []
    for line in log.splitlines():
        if line.startswith("{") and f'"{name}"' in line:
            event = json.loads(line)
            if event.get("event") == name:
                found.append(event)
    return found


def handoff_commits(argo: gitops.GitOpsTier, since: set[str]) -> list[Trailers]:
    """cutover's commits since `since`, newest first, as their trailers."""
    return [Trailers.parse(entry.message) for entry in argo.git.repo.log(limit=30)
            if entry.sha not in since and entry.message.startswith("cutover(")]


@pytest.fixture(scope="module")
def one_card(argo: gitops.GitOpsTier) -> Iterator[tuple[str, str]]:
    """The source serving alone, its target scaled to 0, then another team's pod on the node's other card."""
    source = serving(argo)
    target = "vllm" if source == "candle" else "candle"
    setup = argo.commit({gitops.ENGINES: engines_with(argo, {source: 1, target: 0}),
                         gitops.PLAN: recreate_plan(source, "90s")},
                        f"reasoning-long on {source} alone; the second card goes to the coder\n")
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=setup, timeout=180)
    argo.wait(f"{target}'s pods gone", lambda: not pods(argo, target), timeout=60)
    holder = argo.dir / "coder.yaml"
    holder.write_text(HOLDER)
    argo.kubectl("apply", "-f", str(holder))
    argo.wait("the coder bound to the GPU node", lambda: argo.core.read_namespaced_pod(
        "coder", "default").spec.node_name == "kwok-gpu-0", timeout=60)
    yield source, target
    argo.kubectl("delete", "-f", str(holder), "--wait=false")


def test_recreate_frees_the_source_then_switches_and_says_the_gap(argo: gitops.GitOpsTier,
                                                                  one_card: tuple[str, str]) -> None:
    source, target = one_card
    before = {entry.sha for entry in argo.git.repo.log(limit=30)}
    started = time.monotonic()
    argo.commit({gitops.PLAN: recreate_plan(target, "90s")},  # the target's workload stays stopped in Git
                f"Hand reasoning-long to {target} on one card\n")
    switch = argo.wait("cutover's switch", lambda: next(
        (entry.sha for entry in argo.git.repo.log(limit=30) if entry.sha not in before
         and Trailers.parse(entry.message).to == target and not Trailers.parse(entry.message).step), None),
        timeout=240)
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=180)
    closed = argo.wait("the verification's gap", lambda: next(
        iter(events(argo.job_log("cutover-postsync-llm-serving"), "handoff.gap_closed")), None), timeout=120)
    took = time.monotonic() - started
    gap = float(closed["seconds"])
    MEASURED.append(f"recreate {source} -> {target} on one card: the person's commit to the switch verified "
                    f"{took:.1f} s, the gap (free commit to verified) {gap:.1f} s")

    switched, start, free = handoff_commits(argo, before)  # one of each: never two
    assert (free.step, free.backend, free.previous, free.to) == ("free", source, "1", target)
    assert (start.step, start.backend, start.to) == ("restore", target, target)
    assert (switched.step, switched.source, switched.to) == (None, source, target)
    assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
    assert not pods(argo, source)  # freed: the Deployment at 0, its card the target's now
    assert 0 < gap < took


def test_a_gap_nobody_can_keep_gives_the_card_back_and_holds(argo: gitops.GitOpsTier,
                                                             one_card: tuple[str, str]) -> None:
    """Back to the first engine with maxGap 1s: the engine serving now is drained and freed and the first one
    restored in one hop; once the gap has run out the card goes back (the first one, which never served, freed
    again; the other restored): exit 6 gap_exceeded, the Service never left it, and the next sync holds."""
    first, now = one_card
    assert serving(argo) == now  # where the previous scenario left it
    before = {entry.sha for entry in argo.git.repo.log(limit=30)}
    argo.commit({gitops.PLAN: recreate_plan(first, "1s")}, f"Back to {first}, with no gap to spare\n")
    restored = argo.wait("the restore that gives up", lambda: next(
        (t for t in handoff_commits(argo, before) if t.step == "restore" and t.hold), None), timeout=300)
    assert (restored.backend, restored.hold, restored.to) == (now, now, first)
    steps = [(t.step, t.backend) for t in handoff_commits(argo, before)]
    assert steps == [("restore", now), ("free", first), ("restore", first), ("free", now)], steps
    head = argo.git.repo.head()
    app = argo.wait_app("llm-serving", synced=True, healthy=True, revision=head, timeout=180)
    assert app["status"]["operationState"]["phase"] == "Succeeded"
    assert "cutover.held" in argo.job_log("cutover-postsync-llm-serving")  # the sync of the restore holds
    assert argo.service().spec.selector == (CANDLE if now == "candle" else VLLM)  # never left it
    argo.wait(f"{now} serving again", lambda: pods(argo, now) and not pods(argo, first), timeout=60)
    logs = "".join(path.read_text() for path in sorted(argo.shim.dir.glob("cutover_cutover-postsync-*.log")))
    (failed,) = [event for event in events(logs, "cutover.failed") if event.get("cause") == "gap_exceeded"]
    MEASURED.append(f"recreate with maxGap 1s: {failed['message']}")
