"""Benchmarks of the proof engine, one command, one table (`make bench`; `--smoke` for CI).

Ratios are taken inside one run because these machines are noisy. Measured:
  1. a target pod turning Ready (engine bound) → `names.proven` logged: p50 and p95, real time
  2. Kubernetes API requests per watched pod over a 30-minute startup (fake time), 1 and 10 pods
  3. engine requests sent before the target container started
  4. whole-process wall time of `cutover --help` and of a `cutover verify` on a proven target,
     each as a ratio to `python -c "import kubernetes.client"`
  5. peak RSS of `cutover verify --wait`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

import looptime
import structlog

from cutover import cluster, plan, wait
from cutover.sim.world import Script, World

ROOT = Path(__file__).resolve().parent.parent


class _Stamp:
    """A structlog processor that notes when `names.proven` is logged (loop clock)."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        if event.get("event") == "names.proven":
            self.at = asyncio.get_running_loop().time()
        raise structlog.DropEvent


async def _latency_once(world: World, kube: cluster.Cluster, the_plan: plan.Plan, stamp: _Stamp) -> float:
    pod = world.add_pod("candle", Script(pull=0, fault="never_binds"))  # running, waiting to be told
    task = asyncio.create_task(wait.prove_backend(kube, the_plan, the_plan.backends["candle"], wait=True))
    await asyncio.sleep(0.05)
    stamp.at = None
    await pod.engine.bind()
    ready_at = asyncio.get_running_loop().time()
    pod.become_ready()
    await task
    world.delete_pod(pod.name)
    assert stamp.at is not None
    return stamp.at - ready_at


async def bench_latency(runs: int) -> dict[str, float]:
    stamp = _Stamp()
    structlog.configure(processors=[stamp])
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        async with World() as world:
            world.admit_jobs()
            (the_plan,) = plan.parse(world.plan_text())
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            try:
                for _ in range(runs):
                    samples.append(await _latency_once(world, kube, the_plan, stamp))
            finally:
                await kube.aclose()
    samples.sort()
    return {"p50": statistics.median(samples), "p95": samples[max(0, int(len(samples) * 0.95) - 1)]}


async def _requests_per_pod(pods: int) -> tuple[float, int]:
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    with tempfile.TemporaryDirectory() as tmp:
        async with World() as world:
            world.admit_jobs()
            (the_plan,) = plan.parse(world.plan_text(min_ready=pods))
            started = [world.add_pod("candle", Script(pull=30, load=29 * 60 - 60)) for _ in range(pods)]
            for pod in started:  # listen from creation on, so a probe sent too early would be seen
                await pod.engine.bind()
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            try:
                await wait.prove_backend(kube, the_plan, the_plan.backends["candle"], wait=True)
            finally:
                await kube.aclose()
            api = [r for r in world.kube if r.url.path.startswith(("/api/", "/apis/"))]
            before_start = sum(1 for pod in started for at in pod.engine.request_times
                               if pod.started_loop_time is None or at < pod.started_loop_time)
            return len(api) / pods, before_start


def bench_requests() -> dict[str, Any]:
    results: dict[str, Any] = {}
    for pods in (1, 10):
        loop = looptime.new_event_loop(start=0)
        try:
            per_pod, early = loop.run_until_complete(_requests_per_pod(pods))
        finally:
            loop.close()
        results[pods] = (per_pod, early)
    return results


def _wall(argv: list[str], env: dict[str, str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(argv, env=env, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


async def _serve_and_run(runs: int) -> dict[str, float]:
    """Start a world with a proven target; time CLI processes and read a --wait run's peak RSS."""
    with tempfile.TemporaryDirectory() as tmp:
        async with World() as world:
            world.admit_jobs()
            world.add_pod("candle", ready=True)
            await asyncio.sleep(0.1)
            plan_file = Path(tmp) / "plan.yaml"
            plan_file.write_text(world.plan_text())
            env = {"PATH": os.environ["PATH"], "CUTOVER_PLAN": str(plan_file),
                   "KUBECONFIG": str(world.kubeconfig(Path(tmp) / "kubeconfig")),
                   "CUTOVER_TERMINATION_LOG": str(Path(tmp) / "termination-log")}
            python = sys.executable
            base = await asyncio.to_thread(_wall, [python, "-c", "import kubernetes.client"], env, runs)
            helptime = await asyncio.to_thread(_wall, [python, "-m", "cutover", "--help"], env, runs)
            verify = await asyncio.to_thread(_wall, [python, "-m", "cutover", "verify", "--backend", "candle"],
                                             env, runs)
            rss_code = ("import resource, subprocess, sys; subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL,"
                        " stderr=subprocess.DEVNULL); print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
            out = await asyncio.to_thread(subprocess.run, [python, "-c", rss_code, python, "-m", "cutover", "verify",
                                                           "--backend", "candle", "--wait"],
                                          env=env, capture_output=True, text=True, check=True)
            return {"import": base, "help": helptime, "verify": verify, "rss_mb": int(out.stdout) / 1024}


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="few iterations: checks that the benchmarks run")
    args = parser.parse_args()
    runs = 5 if args.smoke else 60
    latency = asyncio.run(bench_latency(runs))
    requests = bench_requests()
    cli = asyncio.run(_serve_and_run(2 if args.smoke else 7))
    rows = [
        ("1. Ready → names.proven p50 (s)", f"{latency['p50']:.3f}", "≤ 0.25"),
        ("1. Ready → names.proven p95 (s)", f"{latency['p95']:.3f}", ""),
        ("2. API requests per pod, 30 min, 1 pod", f"{requests[1][0]:.1f}", "≤ 12"),
        ("2. API requests per pod, 30 min, 10 pods", f"{requests[10][0]:.1f}", "≤ 12"),
        ("3. engine requests before container start", str(requests[1][1] + requests[10][1]), "0"),
        ("4. `cutover --help` / import kubernetes.client", f"{cli['help'] / cli['import']:.2f}×", "≤ 3×"),
        ("4. `cutover verify` (proven) / import kubernetes.client", f"{cli['verify'] / cli['import']:.2f}×", "≤ 3×"),
        ("5. peak RSS of `cutover verify --wait` (MB)", f"{cli['rss_mb']:.0f}", "≤ 80"),
    ]
    print(f"cutover benchmarks — {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}{' (smoke run)' if args.smoke else ''}")
    print(f"  import kubernetes.client: {cli['import']:.3f} s; runs: {runs}")
    width = max(len(row[0]) for row in rows)
    print(f"| {'measure'.ljust(width)} | value | goal |")
    print(f"|{'-' * (width + 2)}|-------|------|")
    for name, value, goal in rows:
        print(f"| {name.ljust(width)} | {value} | {goal} |")
    print(json.dumps({"latency": latency, "requests_per_pod": {k: v[0] for k, v in requests.items()}, "cli": cli}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
