"""`cutover demo`: the proof engine at work on the simulated reference scenario, narrated.

A vLLM pod serves the Service; a candle-vllm pod starts and loads its model for eleven simulated
minutes; `cutover verify --backend candle --wait` follows it on its startup-probe timeline, over the
real Kubernetes client against the emulated API server, and proves the served names on the pod.
Fake event-loop time (looptime) turns the minutes into about a second. The Git commit, the ArgoCD
sync and the rollback join the demo as those parts are built.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path

import looptime

from cutover import cluster, commands, logs, plan
from cutover.errors import CutoverError
from cutover.sim.world import SERVICE, Script, World


def say(text: str) -> None:
    print(f"\n==> {text}", flush=True)


async def story(workdir: Path) -> int:
    async with World() as world:
        world.admit_jobs()
        say(f"Simulated cluster up: Service llm-serving/{SERVICE} (ClusterIP 10.96.40.17, ports 80 and 8080)")
        vllm = world.add_pod("vllm", ready=True)
        await asyncio.sleep(0)
        say(f"vLLM pod {vllm.name} serves 'reasoning-long' and 'reasoning' at {vllm.ip}")
        candle = world.add_pod("candle", Script(pull=45, load=11 * 60))
        say(f"candle-vllm pod {candle.name} created: 45 s image pull, then 11 min loading weights "
            "(startupProbe allows 120 × 15 s = 30 min)")
        plan_file = workdir / "plan.yaml"
        plan_file.write_text(world.plan_text())
        (the_plan,) = plan.load(str(plan_file))
        kube = await asyncio.to_thread(cluster.connect, kubeconfig=str(world.kubeconfig(workdir / "kubeconfig")))
        say("cutover verify --backend candle --wait")
        try:
            report = await commands.verify(kube, the_plan, backend="candle", wait=True)
        except CutoverError as exc:
            print(f"cutover verify: FAILED (cause {exc.cause}) — {exc.message}")
            return int(exc.exit_code)
        finally:
            await kube.aclose()
        print(report.summary)
        for line in report.lines:
            print(line)
        probes = [path for _, path, _ in candle.engine.requests]
        say(f"The candle-vllm double saw {len(probes)} requests, none before it bound: {', '.join(probes)}")
        say("Next in the full product: the selector commit to Git, the ArgoCD sync, verification "
            "through the Service, and a rollback.")
        print(f"cutover demo: OK — candle proven after {report.data['waitedSeconds']:.0f} simulated seconds")
        return 0


def main(args: argparse.Namespace) -> int:
    logs.configure(fmt=args.log_format or ("console" if sys.stdout.isatty() else "json"), level=args.log_level,
                   stream=sys.stdout)
    loop = looptime.new_event_loop(start=0)
    try:
        with tempfile.TemporaryDirectory(prefix="cutover-demo-") as workdir:
            return loop.run_until_complete(story(Path(workdir)))
    finally:
        loop.close()
