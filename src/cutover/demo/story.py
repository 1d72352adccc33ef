"""`cutover demo`: a cutover on the simulated reference scenario, narrated, with no cluster and no Git host.

A vLLM pod serves the Service; a candle-vllm pod starts and loads its model for eleven simulated
minutes. The PostSync step follows it on its startup-probe timeline (over the real Kubernetes client,
against the emulated API server), proves the served names, and commits the selector change to a
GitHub double backed by a real bare repository. ArgoCD's part is played by the demo: it syncs the
commit, the PreSync gate proves the target again, the Service is patched in place, and the next
PostSync checks the switch. Fake event-loop time (looptime) turns the minutes into about a second.
Then an operator rolls back, and the next PostSync respects the hold. With CUTOVER_SLACK_WEBHOOK (or a
bot token and channel) set, the story's milestones are posted to Slack afterwards, in real time.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
from pathlib import Path

import looptime

from cutover import cluster, logs, manifest, notify, outcome, phases, plan
from cutover.context import Run
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import NAMESPACE, SERVICE, Script, World
from cutover.errors import CutoverError
from cutover.githost.base import Author
from cutover.githost.github import GitHub
from cutover.results import Result

SERVICE_FILE = "k8s/apps/llm-serving/reasoning-long-service.yaml"
HEADER = """# reasoning-long-predictor: the stable name clients use for the long-context reasoning model.
# cutover edits only the selector below; every other line, this comment included, stays as it is.
"""
SLACK_BUDGET = 30.0  # seconds of real time to post the story's milestones, one a second
TOKEN = "demo-token-of-the-simulated-git-host"  # noqa: S105 -- the simulated host's own


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


def _service_file() -> str:
    return HEADER + f"""apiVersion: v1
kind: Service
metadata:
  name: {SERVICE}
  namespace: {NAMESPACE}
spec:
  type: ClusterIP
  selector:
    app.kubernetes.io/name: llm-reasoning   # the vLLM pods
    component: predictor
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
    kube: cluster.Cluster
    host: GitHub
    plan: plan.Plan
    author: Author

    def run(self, identity: str) -> Run:
        """What one hook Job works with: its own identity (the pod name) on the Lease."""
        return Run.create(self.kube, self.plan, self.host, identity=identity, author=self.author)

    def told(self, result: Result) -> str:
        return outcome.render(result, self.plan).summary


async def story(workdir: Path) -> int:
    repo = BareRepo(workdir / "gitops.git")
    seed = repo.commit({SERVICE_FILE: _service_file()}, "Add the reasoning-long Service\n")
    async with World() as world, FakeContentsHost(repo, token=TOKEN) as fake:
        world.admit_jobs()
        sim_argocd.seed_application(world, revision=seed)
        say(f"Simulated cluster: Service {NAMESPACE}/{SERVICE} (ClusterIP {world.cluster_ip}, ports 80 and 8080), "
            "a GitOps repository, an ArgoCD Application")
        vllm = world.add_pod("vllm", ready=True)
        await world.settled()
        say(f"vLLM pod {vllm.name} serves 'reasoning-long' and 'reasoning' at {vllm.ip}")
        candle = world.add_pod("candle", Script(pull=45, load=11 * 60))
        say(f"The operator sets target: candle. candle-vllm pod {candle.name} starts: 45 s image pull, then "
            "11 min loading weights (startupProbe allows 120 × 15 s = 30 min)")
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url))
        kube = await asyncio.to_thread(cluster.connect, kubeconfig=str(world.kubeconfig(workdir / "kubeconfig")))
        host = GitHub(url=the_plan.git.url, branch="main", token=TOKEN, api_url=fake.url)
        cast = Cast(world, repo, seed, kube, host, the_plan, Author(the_plan.git.author.name,
                                                                    the_plan.git.author.email))
        try:
            await _cutover(cast)
            await _rollback(cast)
        except CutoverError as exc:
            print(f"cutover demo: FAILED (cause {exc.cause}) — {exc.message}")
            return int(exc.exit_code)
        finally:
            await host.aclose()
            await kube.aclose()
        probes = [path for _, path, _ in candle.engine.requests]
        say(f"The candle-vllm double saw {len(probes)} requests, none before it was Ready: {', '.join(probes)}")
        print("cutover demo: OK — vllm -> candle, committed once, applied in place, verified; rolled back and held")
        return 0


async def _cutover(cast: Cast) -> None:
    say("ArgoCD syncs; the PostSync hook runs: cutover postsync")
    report = await phases.postsync(cast.run("cutover-postsync-demo"))
    print(cast.told(report))
    (commit, *_) = cast.repo.log(SERVICE_FILE)
    say(f"The commit {commit.sha[:12]}, as a reviewer sees it:")
    print(commit.message.rstrip())
    before, _ = cast.repo.read(SERVICE_FILE, cast.seed)  # type: ignore[misc]
    after, _ = cast.repo.read(SERVICE_FILE)  # type: ignore[misc]
    print(manifest.SelectorEdit(before, after, {}, {}).diff(SERVICE_FILE).rstrip())
    say("ArgoCD syncs that commit; the PreSync gate proves the target again: cutover presync")
    gate = await phases.presync(cast.run("cutover-presync-demo"),
                                job_name=f"cutover-presync-{commit.sha[:7]}-presync-1764457200")
    print(cast.told(gate))
    say("ArgoCD patches the Service's selector in place (same object, same ClusterIP)")
    sim_argocd.apply_git(cast.world, cast.repo, SERVICE_FILE)
    say("The PostSync hook of that sync checks the switch: cutover postsync")
    verified = await phases.postsync(cast.run("cutover-postsync-demo-2"))
    print(cast.told(verified))


async def _rollback(cast: Cast) -> None:
    say("Suppose candle misbehaves: an operator runs the rollback Job "
        "(kubectl -n cutover create job --from=cronjob/cutover-rollback ...): cutover rollback")
    async with sim_argocd.running(cast.world, cast.repo, SERVICE_FILE):
        back = await phases.rollback(cast.run("cutover-rollback-demo"))
    print(cast.told(back))
    (rollback_commit, *_) = cast.repo.log(SERVICE_FILE)
    print(rollback_commit.message.rstrip())
    say("The next sync's PostSync respects the hold until the plan's target changes: cutover postsync")
    held = await phases.postsync(cast.run("cutover-postsync-demo-3"))
    print(cast.told(held))


def _slack_from_env() -> notify.Webhook | notify.Bot | None:
    """CUTOVER_SLACK_WEBHOOK, or CUTOVER_SLACK_BOT_TOKEN with CUTOVER_SLACK_CHANNEL: see the messages first."""
    token, channel = os.environ.get("CUTOVER_SLACK_BOT_TOKEN"), os.environ.get("CUTOVER_SLACK_CHANNEL")
    if token and channel:
        return notify.Bot(token, channel, api=os.environ.get("CUTOVER_SLACK_API", "https://slack.com/api"))
    webhook = os.environ.get("CUTOVER_SLACK_WEBHOOK")
    return notify.Webhook(webhook) if webhook else None


async def _post(outbox: notify.Outbox, transport: notify.Webhook | notify.Bot) -> int:
    """After the story: send what it said, in real time (the story itself ran in fake time)."""
    sender = notify.Sender(transport, outbox)
    sender.start()
    await sender.flush(budget=SLACK_BUDGET)
    return sender.sent


def main(args: argparse.Namespace) -> int:
    transport = _slack_from_env()
    outbox = notify.Outbox()
    secrets = [value for value in (os.environ.get("CUTOVER_SLACK_WEBHOOK"), os.environ.get("CUTOVER_SLACK_BOT_TOKEN"))
               if value]
    logs.configure(fmt=args.log_format or ("console" if sys.stdout.isatty() else "json"), level=args.log_level,
                   stream=sys.stdout, secrets=secrets, sinks=[notify.SlackSink(outbox)] if transport else [])
    loop = looptime.new_event_loop(start=0)
    try:
        with tempfile.TemporaryDirectory(prefix="cutover-demo-") as workdir:
            code = loop.run_until_complete(story(Path(workdir)))
    finally:
        loop.close()
    if transport is not None:
        sent = asyncio.run(_post(outbox, transport))
        print(f"cutover demo: {sent} message(s) posted to Slack ({transport.host})")
    return code
