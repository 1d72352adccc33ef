"""`cutover demo`: a cutover on the simulated reference scenario, narrated, with no cluster and no Git host.

A vLLM pod serves the Service; a candle-vllm pod starts and loads its model for eleven simulated
minutes. The PostSync step follows it on its startup-probe timeline (over the real Kubernetes client,
against the emulated API server), proves the served names, and commits the selector change to a
GitHub double backed by a real bare repository. ArgoCD's part is played by the demo: it syncs the
commit, the PreSync gate proves the target again, the Service is patched in place, and the next
PostSync checks the switch. Fake event-loop time (looptime) turns the minutes into about a second.
Then an operator rolls back, and the next PostSync respects the hold. A second act tells the same handoff on a node
with one GPU, which vLLM holds (the reference cluster's "4 of 4 GPUs allocated", one card standing for them; the
operator's commit has candle-vllm stopped beside it), by handoff.strategy recreate: the source freed and
the target started in one commit, the target waited for within maxGap and switched to, the gap measured. A third
act hands over on the same cluster by handoff.strategy bridge, a client asking through the Service all along. With
CUTOVER_SLACK_WEBHOOK (or a bot token and channel) set, the story's milestones are posted to Slack afterwards, in
real time.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import dataclasses
import os
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import looptime
import structlog

from cutover import logs, plan
from cutover.cli import outcome
from cutover.core import milestones
from cutover.core.repository import Author
from cutover.core.results import Result, Verified
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo, LogEntry
from cutover.demo.world import NAMESPACE, SERVICE, Asked, Script, SimPod, World
from cutover.errors import CutoverError
from cutover.flows import explicit, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster
from cutover.slack import sink, transports
from cutover.sources import kustomize_build, yaml_edit

SERVICE_FILE = "k8s/apps/llm-serving/reasoning-long-service.yaml"  # without kustomize: one plain file
BASE_FILE = "k8s/apps/llm-serving/base/reasoning-long-service.yaml"
OVERLAY = "k8s/apps/llm-serving/overlays/prod"
HEADER = """# reasoning-long-predictor: the stable name clients use for the long-context reasoning model.
# cutover edits only the selector below; every other line, this comment included, stays as it is.
"""
BASE = "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [reasoning-long-service.yaml]\n"
PROD = """# What ArgoCD renders for the Application: the base, with component: predictor in every selector.
apiVersion: kustomize.config.k8s.io/v1beta1
kind: Kustomization
resources: [../../base]
labels:
  - pairs: {component: predictor}
    includeSelectors: true
"""
FITNESS = "{requests: 3, maxLatency: 2s, stream: true, compare: true}"
WARM_UP = 180  # seconds a Ready candle-vllm answers slowly (compiling, filling caches)
SLACK_BUDGET = 60.0  # seconds of real time to post the story's milestones, one a second
TOKEN = "demo-token-of-the-simulated-git-host"  # noqa: S105 -- the simulated host's own


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


async def _engines(world: World) -> SimPod:
    """The live vLLM pod, and the candle-vllm pod that starts, loads for 11 minutes, then warms up."""
    vllm = world.add_pod("vllm", ready=True)
    vllm.engine.latency = 0.42  # what its answers take (fake time: the demo does not wait for them)
    await world.settled()
    say(f"vLLM pod {vllm.name} serves 'reasoning-long' and 'reasoning' at {vllm.ip}")
    candle = world.add_pod("candle", Script(pull=45, load=11 * 60))
    candle.engine.latency, candle.engine.cold_latency = 0.31, 6.0
    candle.engine.cold_until = asyncio.get_running_loop().time() + 45 + 11 * 60 + WARM_UP
    say(f"The operator sets target: candle. candle-vllm pod {candle.name} starts: 45 s image pull, then "
        "11 min loading weights (startupProbe allows 120 × 15 s = 30 min); once Ready it still answers "
        "slowly while it warms up (6 s a generation; the fitness table's warm-up says for how long)")
    return candle


def _service_file(*, overlay: bool) -> str:
    shared = "" if overlay else "\n    component: predictor"
    return HEADER + f"""apiVersion: v1
kind: Service
metadata:
  name: {SERVICE}
  namespace: {NAMESPACE}
spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: llm-reasoning   # which engine's pods: cutover's to change{shared}
    serving.kserve.io/inferenceservice: reasoning
  ports:
    - {{name: http, port: 80, targetPort: 8080}}
    - {{name: engine, port: 8080, targetPort: 8080}}
"""


@dataclasses.dataclass
class Cast:
    """Who plays in the story: the world, the repository and the clients cutover uses."""

    world: World
    repo: BareRepo
    seed: str
    path: str  # the file cutover edits
    kube: cluster.Cluster
    host: GitHub
    plan: plan.Plan
    author: Author

    def run(self, identity: str) -> Run:
        """What one Job works with: its own identity (the pod name) on the Lease."""
        return Run.create(self.kube, self.plan, self.host, identity=identity, author=self.author)

    async def postsync(self, identity: str) -> Result:
        """A PostSync hook Job, run while ArgoCD's operation runs (as it does): a commit it makes is nudged by a Job
        made from the workload's audit CronJob, not refreshed at once (docs/sources.md, "After the hook")."""
        run = Run.create(self.kube, self.plan, self.host, identity=identity, author=self.author,
                         hook_job=f"cutover-postsync-{sim_argocd.APPLICATION}")
        with sim_argocd.syncing(self.world, self.repo):
            return await phases.postsync(run)

    def install(self) -> Cast:
        """The workload's audit CronJob beside the hooks, as the hooks Component ships it: what a nudge is made from."""
        self.world.kube.apply("batch/v1/cronjobs", {
            "apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": f"cutover-audit-{sim_argocd.APPLICATION}", "namespace": self.kube.own_namespace},
            "spec": {"schedule": "*/5 * * * *", "jobTemplate": {"spec": {"template": {"spec": {
                "serviceAccountName": "cutover", "restartPolicy": "Never",
                "containers": [{"name": "cutover", "image": "ghcr.io/acme/cutover", "args": ["audit", "--exit-zero"]}],
            }}}}}})
        return self

    def told(self, result: Result) -> str:
        return outcome.render(result, self.plan).summary


async def story(workdir: Path) -> int:
    repo = BareRepo(workdir / "gitops.git")
    overlay = kustomize_build.command() is not None  # the kustomize story where kustomize is there (kubectl has it)
    path = BASE_FILE if overlay else SERVICE_FILE
    files = {BASE_FILE: _service_file(overlay=True), f"{OVERLAY}/kustomization.yaml": PROD,
             "k8s/apps/llm-serving/base/kustomization.yaml": BASE} if overlay else {
        SERVICE_FILE: _service_file(overlay=False)}
    seed = repo.commit(files, "Add the reasoning-long Service\n")
    async with World() as world, FakeContentsHost(repo, token=TOKEN) as fake:
        world.admit_jobs()
        sim_argocd.seed_application(world, revision=seed, path=OVERLAY if overlay else sim_argocd.DEFAULT_PATH)
        say(f"Simulated cluster: Service {NAMESPACE}/{SERVICE} (ClusterIP {world.cluster_ip}, ports 80 and 8080), "
            "a GitOps repository, an ArgoCD Application")
        if overlay:
            say(f"The Service lives in a kustomize tree: {BASE_FILE}, and the prod overlay ArgoCD renders "
                f"({OVERLAY}) adds component: predictor to every selector. The plan names the effective selectors; "
                "cutover renders the tree with real kustomize before it commits anything")
        else:
            say("kustomize is not on PATH here: the story of a plain Service file (install kubectl for the "
                "kustomize overlay story)")
        candle = await _engines(world)
        text = world.plan_text(git_api_url=fake.url, git_path=path, fitness=FITNESS,
                               git_more="source: kustomize" if overlay else "")
        (the_plan,) = plan.parse(text)
        say("The plan, as the cutover-plan ConfigMap holds it (the operator's commit set its target: candle):")
        _show_plan(text)
        say(f"It asks for fitness: {FITNESS} — every Ready pod answers within 2 s, streams to "
            "data: [DONE], and is no smaller than the live vLLM (context, Ready pods)")
        kube = await asyncio.to_thread(cluster.connect, kubeconfig=str(world.kubeconfig(workdir / "kubeconfig")))
        host = GitHub(url=the_plan.git.url, branch="main", token=TOKEN, api_url=fake.url)
        cast = Cast(world, repo, seed, path, kube, host, the_plan, Author(the_plan.git.author.name,
                                                                          the_plan.git.author.email)).install()
        try:
            await _cutover(cast)
            await _rollback(cast)
        except CutoverError as exc:
            print(f"cutover demo: FAILED (cause {exc.cause}) — {exc.message}")
            return int(exc.exit_code)
        finally:
            await host.aclose()
            await kube.aclose()
        early = sum(1 for when in candle.engine.request_times if candle.ready_at is None or when < candle.ready_at)
        seen = collections.Counter(f"{method} {path}" for method, path, _ in candle.engine.requests)
        say(f"The candle-vllm double saw {sum(seen.values())} requests, {early} before it was Ready: "
            + ", ".join(f"{count} × {what}" for what, count in sorted(seen.items())))
    try:
        gap = await _one_gpu(workdir)
        asked = await _bridged(workdir)
    except CutoverError as exc:
        print(f"cutover demo: FAILED (cause {exc.cause}) — {exc.message}")
        return int(exc.exit_code)
    print(f"cutover demo: OK — vllm -> candle, committed once, applied in place, verified; rolled back and held; "
          f"on one GPU by recreate, a gap of {gap / 60:.0f} min; by bridge, {len(asked.failed)} of "
          f"{asked.answered + len(asked.failed)} requests for reasoning failed")
    return 0 if not asked.failed else 1


ENGINES_FILE = "k8s/apps/llm-serving/engines.yaml"
ENGINES = """# one card each, on a node with one free: vLLM serves, candle-vllm is committed stopped
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm-reasoning, namespace: llm-serving}
spec:
  replicas: 1
  template: {spec: {containers: [{name: vllm, resources: {limits: {nvidia.com/gpu: 1}}}]}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: llm-reasoning-candle, namespace: llm-serving}
spec:
  replicas: 0
  template: {spec: {containers: [{name: candle-vllm, resources: {limits: {nvidia.com/gpu: 1}}}]}}
"""
RECREATE = "{strategy: recreate, maxGap: 20m, drainTimeout: 1m}"


@contextlib.asynccontextmanager
async def _on_one_gpu(workdir: Path, name: str, handoff: str, *, coder: bool = False) -> AsyncIterator[Cast]:
    """The reference cluster of acts two and three: a node with one GPU, vLLM serving on it, candle-vllm committed
    stopped beside it in Git (and `coder` on cards of its own), the plan's `handoff`."""
    repo = BareRepo(workdir / f"{name}.git")
    repo.commit({SERVICE_FILE: _service_file(overlay=False), ENGINES_FILE: ENGINES},
                "reasoning-long on vLLM; candle-vllm committed stopped\n")
    async with World() as world, FakeContentsHost(repo, token=TOKEN) as fake:
        world.admit_jobs()
        sim_argocd.seed_application(world)
        world.add_node("gpu-1", gpus=1)
        world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
        if coder:
            world.add_pod("coder", ready=True)
        await world.settled()
        workloads = {backend: f"{{kind: Deployment, name: {name}, path: {ENGINES_FILE}}}"
                     for backend, name in (("vllm", "llm-reasoning"), ("candle", "llm-reasoning-candle"))}
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=SERVICE_FILE, workloads=workloads,
                                                 handoff=handoff, coder=coder))
        kube = await asyncio.to_thread(cluster.connect, kubeconfig=str(world.kubeconfig(workdir / f"{name}.kube")))
        host = GitHub(url=the_plan.git.url, branch="main", token=TOKEN, api_url=fake.url)
        try:
            yield Cast(world, repo, "", SERVICE_FILE, kube, host, the_plan,
                       Author(the_plan.git.author.name, the_plan.git.author.email)).install()
        finally:
            await host.aclose()
            await kube.aclose()


def _show_plan(text: str) -> None:
    for line in text.rstrip().splitlines():
        print(f"  {line}")


def _show_operators_commit(cast: Cast, *, whole: bool = True) -> None:
    """What the act starts from: the operator's commit, candle-vllm stopped in Git beside vLLM (the engines file, or
    a word that it is act two's), and the plan's target and handoff."""
    (entry,) = cast.repo.log(ENGINES_FILE, limit=1)
    say(f"The operator's commit {entry.sha[:12]} ({entry.message.splitlines()[0]}): {ENGINES_FILE}"
        + ("" if whole else ", as in act two"))
    if whole:
        _show_plan(ENGINES)
    say(f"and the plan: target: {cast.plan.target}, each backend's workload in that file, handoff: "
        f"{cast.plan.handoff.strategy}")


def _candle_takes_the_card(world: World) -> None:
    """What ArgoCD and the scheduler do with the free: vLLM's pod goes, candle-vllm's is bound to its card."""
    for pod in [pod for pod in world.pods.values() if pod.backend == "vllm"]:
        world.delete_pod(pod.name)
    world.add_pod("candle", Script(pull=45, load=11 * 60), gpus=1, node="gpu-1")


async def _one_gpu(workdir: Path) -> float:
    """The second act: the same handoff where the GPU cannot hold both engines. The gap it measured, in seconds."""
    say("Act two: a node with one GPU, which vLLM holds (the reference cluster had 4 of 4 GPUs allocated; one card "
        "stands for them here). Make-before-break cannot start candle beside vLLM, so the operator consents to a "
        "gap: handoff " + RECREATE)
    async with _on_one_gpu(workdir, "one-gpu", RECREATE) as cast:
        _show_operators_commit(cast)
        say("The sync of the operator's commit runs PostSync: drain vLLM, free it, start candle, in one hop")
        print(cast.told(await cast.postsync("cutover-postsync-gpu-1")))
        for entry in reversed(cast.repo.log(ENGINES_FILE, limit=2)):
            print(f"  {entry.sha[:12]} {entry.message.splitlines()[0]}")
        say("ArgoCD applies both: vLLM's pod terminates, candle-vllm's is bound to the card it left (45 s pull, "
            "11 min loading). The gap is open: the Service selects pods that are gone")
        _candle_takes_the_card(cast.world)
        say("The next sync's PostSync waits for candle within what is left of maxGap, proves it, switches")
        print(cast.told(await cast.postsync("cutover-postsync-gpu-2")))
        sim_argocd.apply_git(cast.world, cast.repo, SERVICE_FILE)
        say("ArgoCD applies the switch; the PostSync after it verifies and says how long the gap lasted")
        verified = await cast.postsync("cutover-postsync-gpu-3")
        print(cast.told(verified))
    assert isinstance(verified, Verified)
    assert verified.gap is not None
    return verified.gap


BRIDGE = "{strategy: bridge, bridge: coder, bridgeNames: [reasoning], maxGap: 45m, drainTimeout: 1m}"


async def _bridged(workdir: Path) -> Asked:
    """The third act: one GPU again, by bridge: `coder`, on cards of its own, also answers `reasoning`, and carries
    it while vLLM is freed and candle starts. What a client asking for `reasoning` saw all along."""
    say("Act three: the same node, by bridge. The coder deployment, on cards of its own, also answers reasoning; "
        "it carries that name while vLLM's card goes to candle-vllm (reasoning-long, which coder does not serve, "
        "goes unanswered meanwhile: maxGap is the consent): handoff " + BRIDGE)
    async with _on_one_gpu(workdir, "bridge", BRIDGE, coder=True) as cast, \
            cast.world.client("reasoning", every=10) as asked:
        _show_operators_commit(cast, whole=False)
        say("A client pod in another namespace (poimen, where the Service's users run) asks for reasoning through "
            "the Service's ClusterIP every 10 s. The sync of the operator's commit runs PostSync: prove coder on "
            "reasoning, switch to it")
        print(cast.told(await cast.postsync("cutover-postsync-bridge-1")))
        sim_argocd.apply_git(cast.world, cast.repo, SERVICE_FILE)
        say("ArgoCD applies it. The next PostSync checks coder through the Service, drains vLLM, frees it and "
            "starts candle, in one sync")
        print(cast.told(await cast.postsync("cutover-postsync-bridge-2")))
        _candle_takes_the_card(cast.world)
        say("candle-vllm loads on the card vLLM left, while coder answers reasoning; the next PostSync waits for "
            "it, proves it, switches")
        print(cast.told(await cast.postsync("cutover-postsync-bridge-3")))
        sim_argocd.apply_git(cast.world, cast.repo, SERVICE_FILE)
        say("ArgoCD applies the switch; the PostSync after it verifies it through the Service")
        print(cast.told(await cast.postsync("cutover-postsync-bridge-4")))
    say(f"The client asked for reasoning {asked.answered + len(asked.failed)} times along the path: "
        f"{asked.answered} answered, {len(asked.failed)} failed")
    return asked


async def _cutover(cast: Cast) -> None:
    say("ArgoCD syncs; the PostSync hook runs: cutover postsync")
    report = await cast.postsync("cutover-postsync-demo")
    print(cast.told(report))
    commit = _show_commit(cast)
    say("The hook pushed that commit while its own sync ran, which ArgoCD compares with Git only once it ends: the "
        "nudge Job it made (cutover nudge, from the audit CronJob) asks ArgoCD to refresh then, and ArgoCD syncs the "
        "commit in seconds, hooks and all")
    say("ArgoCD syncs that commit; the PreSync gate proves the target again: cutover presync")
    gate = await phases.presync(cast.run("cutover-presync-demo"),
                                job_name=f"cutover-presync-{commit.sha[:7]}-presync-1764457200")
    print(cast.told(gate))
    say("ArgoCD patches the Service's selector in place (same object, same ClusterIP)")
    sim_argocd.apply_git(cast.world, cast.repo, cast.path)
    say("The PostSync hook of that sync checks the switch: cutover postsync")
    verified = await cast.postsync("cutover-postsync-demo-2")
    print(cast.told(verified))


def _show_commit(cast: Cast) -> LogEntry:
    """The file's newest commit as a reviewer sees it: its message, then its diff against the one before."""
    (commit, parent, *_) = cast.repo.log(cast.path)
    say(f"The commit {commit.sha[:12]}, as a reviewer sees it:")
    print(commit.message.rstrip())
    before, _ = cast.repo.read(cast.path, parent.sha)  # type: ignore[misc]
    after, _ = cast.repo.read(cast.path, commit.sha)  # type: ignore[misc]
    print(yaml_edit.SelectorEdit(before, after, {}, {}).diff(cast.path).rstrip())
    return commit


async def _rollback(cast: Cast) -> None:
    say(f"Suppose candle misbehaves: an operator runs {cast.plan.job('rollback')}: cutover rollback")
    async with sim_argocd.running(cast.world, cast.repo, cast.path):
        back = await explicit.rollback(cast.run("cutover-rollback-demo"))
    print(cast.told(back))
    _show_commit(cast)
    say("The next sync's PostSync respects the hold until the plan's target changes: cutover postsync")
    held = await cast.postsync("cutover-postsync-demo-3")
    print(cast.told(held))


class Narration:
    """The console's lines in the story's own clock (it runs in fake time: real timestamps would all read the
    same second), and the wait's progress every 5 simulated minutes instead of every 30 s (a pod log keeps
    them all; a reader of the story does not need 24 alike). Slack's sink sits before it and hears everything."""

    EVERY = 300.0

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop, self.last_waiting = loop, -1.0

    def __call__(self, logger: object, method: str, event: dict[str, Any]) -> dict[str, Any]:
        now = int(self.loop.time())
        event["timestamp"] = f"T+{now // 60:02d}:{now % 60:02d}"
        if event.get("event") == milestones.WAITING:
            elapsed = float(event.get("elapsed") or 0)
            if 0 <= self.last_waiting <= elapsed < self.last_waiting + self.EVERY:
                raise structlog.DropEvent
            self.last_waiting = elapsed
        return event


def _slack_from_env() -> transports.Webhook | transports.Bot | None:
    """CUTOVER_SLACK_WEBHOOK, or CUTOVER_SLACK_BOT_TOKEN with CUTOVER_SLACK_CHANNEL: see the messages first."""
    token, channel = os.environ.get("CUTOVER_SLACK_BOT_TOKEN"), os.environ.get("CUTOVER_SLACK_CHANNEL")
    if token and channel:
        return transports.Bot(token, channel, api=os.environ.get("CUTOVER_SLACK_API", "https://slack.com/api"))
    webhook = os.environ.get("CUTOVER_SLACK_WEBHOOK")
    return transports.Webhook(webhook) if webhook else None


async def _post(outbox: sink.Outbox, transport: transports.Webhook | transports.Bot) -> int:
    """After the story: send what it said, in real time (the story itself ran in fake time)."""
    sender = sink.Sender(transport, outbox)
    sender.start()
    await sender.flush(budget=SLACK_BUDGET)
    return sender.sent


def main(args: argparse.Namespace) -> int:
    transport = _slack_from_env()
    outbox = sink.Outbox()
    secrets = [value for value in (os.environ.get("CUTOVER_SLACK_WEBHOOK"), os.environ.get("CUTOVER_SLACK_BOT_TOKEN"))
               if value]
    # the narration reads as a story wherever it is printed (a CI log, a pipe); JSON is one flag away
    loop = looptime.new_event_loop(start=0)
    fmt = args.log_format or "console"
    narration = [Narration(loop)] if fmt == "console" else []
    logs.configure(fmt=fmt, level=args.log_level, stream=sys.stdout, secrets=secrets,
                   sinks=[*([sink.SlackSink(outbox)] if transport else []), *narration])
    try:
        with tempfile.TemporaryDirectory(prefix="cutover-demo-") as workdir:
            code = loop.run_until_complete(story(Path(workdir)))
    finally:
        loop.close()
    if transport is not None:
        sent = asyncio.run(_post(outbox, transport))
        print(f"cutover demo: {sent} message(s) posted to Slack ({transport.host})")
    return code
