"""A cluster with one GPU for the handoff's flow tests (docs/capacity.md): the engines' Deployments in Git (one file,
one card each), and the Deployment controller and scheduler of the emulated node as far as a handoff needs them
(`reconcile`), following Git beside the stand-in for ArgoCD's sync (`engines_follow_git`)."""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import AsyncIterator, Callable, Coroutine
from typing import Any

import structlog

from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import Script, World

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
ENGINES = "k8s/apps/llm-serving/engines.yaml"
ENGINES_FILE = """\
# one card each: the node has one (4 of 4 GPUs allocated)
apiVersion: apps/v1
kind: Deployment
metadata:
  name: llm-reasoning
spec:
  replicas: 1  # vLLM
  template: {}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: candle-reasoning
spec:
  replicas: 0
  template: {}
"""
WORKLOADS = {"vllm": f"{{kind: Deployment, name: llm-reasoning, path: {ENGINES}}}",
             "candle": f"{{kind: Deployment, name: candle-reasoning, path: {ENGINES}}}"}



DEPLOYMENTS = {"vllm": "llm-reasoning", "candle": "candle-reasoning"}


def replicas(text: str, backend: str) -> int:
    found = re.search(rf"name: {DEPLOYMENTS[backend]}\nspec:\n  replicas: (\d+)", text)
    assert found is not None
    return int(found.group(1))


def deployed(repo: BareRepo) -> dict[str, int]:
    """Each engine's replicas as the engines file in Git holds them."""
    text, _ = repo.read(ENGINES)  # type: ignore[misc]
    return {backend: replicas(text, backend) for backend in DEPLOYMENTS}


def reconcile(world: World, repo: BareRepo, *, gpu: bool = True,
              wanted: Callable[[BareRepo], dict[str, int]] = deployed) -> None:
    """The Deployment controller and the scheduler of the emulated one-GPU node, as far as the handoff needs them,
    once: each engine's pods follow its replicas in Git (ArgoCD applied; `wanted` reads them), and a pod is bound to
    the card only while no other engine's pod holds it (Pending, Unschedulable, until then). `gpu` False: pods need
    no card."""
    counts = wanted(repo)
    for backend in DEPLOYMENTS:
        pods = [pod for pod in world.pods.values() if pod.backend == backend]
        if counts[backend] == 0:
            for pod in pods:
                world.delete_pod(pod.name)
            continue
        holders = [pod for pod in world.pods.values() if pod.node and pod.backend != backend] if gpu else []
        pending = [pod for pod in pods if pod.node is None] if gpu else []
        if (pods and not pending) or (pending and holders):
            continue
        for pod in pending:
            world.delete_pod(pod.name)
        world.add_pod(backend, Script(pull=20, load=60) if not holders else Script(fault="unschedulable"),
                      gpus=1 if gpu else 0, node=None if holders else ("gpu-1" if gpu else None))


@contextlib.asynccontextmanager
async def engines_follow_git(world: World, repo: BareRepo, *, gpu: bool = True,
                             wanted: Callable[[BareRepo], dict[str, int]] = deployed) -> AsyncIterator[None]:
    """`reconcile` every 5 s, beside the stand-in for ArgoCD's sync of the Service."""

    async def follow() -> None:
        while True:
            reconcile(world, repo, gpu=gpu, wanted=wanted)
            await asyncio.sleep(5)

    task = asyncio.create_task(follow())
    try:
        async with sim_argocd.running(world, repo, PATH):
            yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def killed_at(world: World, hop: Coroutine[Any, Any, Any], event: str, *, hard: bool) -> None:
    """Run a phase and kill it when it logs `event` (never, if it does not): SIGTERM lets go of the Lease on the way
    out; SIGKILL (`hard`) does not, so the Lease stays held, as the cluster saw it then, until it expires."""
    task = asyncio.create_task(hop)
    held: list[Any] = []

    def killer(logger: Any, method: str, entry: dict[str, Any]) -> dict[str, Any]:
        if entry.get("event") == event and not task.done():
            if hard:  # whatever the process does on its way out never reaches the cluster
                held.append(world.kube.stored("coordination.k8s.io/v1/leases", "llm-serving",
                                              "cutover-reasoning-long-predictor"))
            task.cancel()
        return entry

    processors = structlog.get_config()["processors"]
    structlog.configure(processors=[killer, *processors])
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await task
    finally:
        structlog.configure(processors=processors)
    if held and held[0] is not None:
        world.kube.apply("coordination.k8s.io/v1/leases", held[0])
