"""Many Services in one simulated world, for the scale run: Service i has its own name, its own vLLM and
candle-vllm pods (a `fleet` label tells them apart), its own file in the GitOps repository and its own entry
under the plan's `cutovers:`. Used by bench/run.py and tests/flows/test_scale.py.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import os
import random
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import structlog

from cutover.core.clock import Clock
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import BACKENDS, NAMESPACE, SERVED_NAMES, Script, World

TOKEN = "fleet-token-of-the-simulated-git-host"


def service(index: int) -> str:
    return f"model-{index:02d}"


def path(index: int) -> str:
    return f"k8s/apps/llm-serving/{service(index)}-service.yaml"


def _labels(backend: str, index: int) -> dict[str, str]:
    return {**BACKENDS[backend]["labels"], "fleet": service(index)}


def _flow(labels: dict[str, str]) -> str:
    return "{" + ", ".join(f"{key}: {value}" for key, value in labels.items()) + "}"


def _file(index: int) -> str:
    selector = "".join(f"\n    {key}: {value}" for key, value in _labels("vllm", index).items())
    return f"""# {service(index)}: one of the fleet's stable names; cutover edits only the selector.
apiVersion: v1
kind: Service
metadata:
  name: {service(index)}
  namespace: {NAMESPACE}
spec:
  type: ClusterIP
  selector:{selector}
  ports:
    - {{name: http, port: 80, targetPort: {8080}}}
"""


def deploy(world: World, repo: BareRepo, scripts: Sequence[Script]) -> None:
    """For each script: a Service selecting a serving vLLM pod, and a candle-vllm pod starting on the script."""
    world.kube.align(Clock().now())  # several fleets may run one after another in one fake-time loop
    # count requests with `world.kube.served`: kmock matches each request by walking its log, which keeps only the
    # latest (fifty Services: 36 s of CPU with ten kept, 20 s with one; under CI's load the first ran past 60 s)
    world.kube.keep = 1
    for index, script in enumerate(scripts):
        world.kube.apply("/v1/services", {
            "metadata": {"name": service(index), "namespace": NAMESPACE},
            "spec": {"type": "ClusterIP", "clusterIP": f"10.96.{index // 250}.{index % 250 + 1}",
                     "selector": _labels("vllm", index),
                     "ports": [{"name": "http", "port": 80, "targetPort": world.port, "protocol": "TCP"}]}})
        world.add_pod("vllm", ready=True, labels={"fleet": service(index)})
        world.add_pod("candle", script, labels={"fleet": service(index)})
    repo.commit({path(index): _file(index) for index in range(len(scripts))}, "Add the fleet's Services\n")


def plan_text(world: World, count: int, *, git_api_url: str) -> str:
    """One plan file with `count` cutovers, vLLM → candle-vllm each."""
    entries = []
    for index in range(count):
        backends = "".join(
            f"\n      {name}: {{selector: {_flow(_labels(name, index))}, engine: {BACKENDS[name]['engine']}, "
            f"port: {world.port}}}" for name in ("vllm", "candle"))
        entries.append(f"""  - metadata: {{name: {service(index)}}}
    service: {{namespace: {NAMESPACE}, name: {service(index)}, ports: [80]}}
    backends:{backends}
    target: candle
    verify: {{servedNames: [{", ".join(SERVED_NAMES)}], proof: auto, minReadyPods: 1, maxWait: 30m,
              requestTimeout: 10s}}
    git: {{provider: github, url: "https://github.com/acme/gitops.git", apiUrl: "{git_api_url}", apiHosts: [127.0.0.1],
           allowInsecure: true, branch: main, path: {path(index)},
           document: {{kind: Service, name: {service(index)}}}}}
    argocd: {{application: llm-serving}}
    rollback: {{auto: true}}
""")
    return "apiVersion: cutover/v1alpha1\nkind: CutoverPlan\ncutovers:\n" + "".join(entries)


@dataclasses.dataclass
class Outcome:
    code: int
    seconds: float  # loop time from start to exit: the cutover's own timeline
    requests: int  # to the Kubernetes API, during the command
    commits: int
    cpu: float  # seconds of this process's CPU the command took


def startups(count: int, seed: int = 7) -> list[Script]:
    """Startup times spread as a fleet's are: 20–120 s of image pull, 5–25 minutes of model load."""
    rng = random.Random(seed)
    return [Script(pull=rng.uniform(20, 120), load=rng.uniform(300, 1500)) for _ in range(count)]


async def cutover(starts: Sequence[Script], root: Path, *, observers: Sequence[Any] = ()) -> Outcome:
    """`cutover postsync` over a plan with one cutover per script, in this process and loop (fake time under
    looptime), against a fresh world and a GitHub double."""
    from cutover.cli import main
    from cutover.demo import argocd as sim_argocd
    from cutover.demo.contents import FakeContentsHost

    root.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 -- before anything runs
    async with World() as world:
        world.admit_jobs()
        repo = BareRepo(root / "gitops.git")
        deploy(world, repo, starts)
        sim_argocd.seed_application(world, revision=repo.head())
        async with FakeContentsHost(repo, token=TOKEN) as host:
            (root / "plan.yaml").write_text(plan_text(world, len(starts), git_api_url=host.url))
            environ = {"CUTOVER_PLAN": str(root / "plan.yaml"), "CUTOVER_GIT_TOKEN": TOKEN, "HOSTNAME": "cutover-fleet",
                       "KUBECONFIG": str(world.kubeconfig(root / "kubeconfig")),
                       "CUTOVER_TERMINATION_LOG": str(root / "termination-log")}
            await world.settled()
            loop = asyncio.get_running_loop()
            before, started, cpu = world.kube.served, loop.time(), time.process_time()
            with mock.patch.dict(os.environ, environ), contextlib.redirect_stdout(io.StringIO()):
                try:
                    code = await main.arun(["--log-level", "info" if observers else "error", "--log-format", "json",
                                           "postsync"], observers=observers)
                finally:
                    structlog.reset_defaults()
            seconds, requests, cpu = loop.time() - started, world.kube.served - before, time.process_time() - cpu
        commits = sum(1 for entry in repo.log(limit=10 * len(starts) + 10) if entry.message.startswith("cutover("))
    return Outcome(code, seconds, requests, commits, cpu)
