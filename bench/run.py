"""Benchmarks of the proof engine, one command, one table (`make bench`; `--smoke` for CI).

Ratios are taken inside one run because these machines are noisy. Measured:
  1. a target pod turning Ready (engine bound) → `names.proven` logged: p50 and p95, real time; and Ready →
     `git.committed` through a whole `cutover postsync` on the GitHub double (fake time skips only the startup)
  2. Kubernetes API requests per watched pod over a 30-minute startup (fake time), 1 and 10 pods
  3. engine requests sent before the target container started
  4. whole-process wall time of `cutover --help` and of a `cutover verify` on a proven target,
     each as a ratio to `python -c "import kubernetes.client"`
  5. peak RSS of `cutover verify --wait`
  6. a compare-and-swap commit round trip (read, edit, guard, write) per Git provider on the local doubles
  7. the selector edit with its guard on a 2,000-line multi-document file
  8. the cost per logged event of the Slack sink with Slack down and its queue full
  9. Slack messages posted for a whole 30-minute cutover in bot mode, and requests in all (fake time)
 10. installed size of cutover and its runtime dependencies (what the image adds to python:3.11-slim + git);
     full runs only, as it installs from the package index
 11. 50 Services in one `cutover postsync` (fake time): its timeline against the slowest Service alone, API
     requests per Service against that one, and the CPU the process spent on it
 12. the render check per commit of a kustomize source (the tree from the GitHub double's archive, kustomize
     build of the current and the candidate revision, the comparison) on the example overlay and on a
     200-resource overlay
 13. Ready → the live Service switched, a whole `cutover run` through the simulated ArgoCD (refresh, no poll),
     the Service in a kustomize overlay: real time, fake time skipping only the startup
 14. the cost of fitness (docs/fitness.md) on a warm target of 2 pods, `verify.fitness: {requests: 3, maxLatency: 1s}`:
     requests per target pod per proof beyond the name proof's, and the time a proof takes with fitness less
     the time without, real time, with the engine doubles answering at once and in 50 ms
 15. the drain of an idle vLLM source (docs/capacity.md): its length in fake time, real time, /metrics reads
 16. the capacity judgment on a 500-node cluster with 30 pods bound to each
 17. handoff.strategy recreate on one GPU (docs/capacity.md), three PostSyncs in fake time with ArgoCD's part played
     between them at once: the gap (free commit → verified) over the target's startup (pull + load), and
     Kubernetes API requests per pod over the whole path
 18. handoff.strategy bridge on one GPU, four PostSyncs likewise (vLLM → coder → candle): the path over the target's
     startup, the bridged name's failed requests through the Service, API requests per pod
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, MutableMapping
from pathlib import Path
from typing import Any

import looptime
import structlog

from cutover import plan
from cutover.core.repository import Author, GitHost
from cutover.core.trailers import Trailers
from cutover.core.views import NodeView, Placement, PodView
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import Script, World
from cutover.engines import api as engine_api
from cutover.flows import drain, explicit, phases, wait, writeback
from cutover.flows.context import Run
from cutover.githost.gitea import Gitea
from cutover.githost.github import GitHub
from cutover.githost.gitlab import GitLab
from cutover.githost.gitpush import GitPush
from cutover.kube import capacity, cluster
from cutover.sources import yaml_edit

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the doubles only tests and benchmarks use
from doubles import fleet
from doubles.githttp import GitHttpServer
from doubles.gitlab import FakeGitLab

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


SERVICE_FILE = ROOT / "tests" / "fixtures" / "reasoning-long-service.yaml"
GIT_PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"


async def _commit_rounds(host: GitHost, the_plan: plan.Plan, runs: int) -> float:
    samples = []
    for index in range(runs):
        target = "candle" if index % 2 == 0 else "vllm"  # flip, so that every round commits
        text = writeback.message(the_plan, trailers=Trailers(id=str(index), to=target, plan=the_plan.name), proof=None)
        start = time.perf_counter()
        result = await writeback.commit_selector(host, the_plan, to_backend=target, text=text,
                                                 author=Author("cutover", "cutover@example.invalid"))
        samples.append(time.perf_counter() - start)
        assert result.committed
    await host.aclose()
    return statistics.median(samples)


async def bench_git(runs: int) -> dict[str, float]:
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    world = World.__new__(World)
    world.port = 8080
    (the_plan,) = plan.parse(world.plan_text())
    results: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for flavor in ("github", "gitea", "gitlab", "git"):
            repo = BareRepo(Path(tmp) / f"{flavor}.git")
            repo.commit({GIT_PATH: SERVICE_FILE.read_text()}, "seed\n")
            if flavor == "gitlab":
                async with FakeGitLab(repo, token="t") as lab:
                    host: GitHost = GitLab(url="https://gitlab.example/acme/gitops", branch="main", token="t",
                                           api_url=lab.url)
                    results[flavor] = await _commit_rounds(host, the_plan, runs)
            elif flavor == "git":
                async with GitHttpServer(Path(tmp), username="x-access-token", password="t") as server:
                    host = GitPush(url=f"{server.url}/git.git", branch="main", token="t")
                    results[flavor] = await _commit_rounds(host, the_plan, runs)
            else:
                async with FakeContentsHost(repo, flavor=flavor, token="t") as fake:
                    kind = GitHub if flavor == "github" else Gitea
                    host = kind(url="https://example.invalid/acme/gitops", branch="main", token="t", api_url=fake.url)
                    results[flavor] = await _commit_rounds(host, the_plan, runs)
    return results


def bench_edit(runs: int) -> tuple[float, int]:
    service = SERVICE_FILE.read_text()
    filler = "".join(f"---\n# config map {i}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-{i}\ndata:\n"
                     + "".join(f"  key{j}: value-{j}  # note {j}\n" for j in range(42)) for i in range(20))
    text = filler + "---\n" + service + filler.replace("cm-", "other-")
    document = plan.GitDocument("Service", "reasoning-long-predictor")
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        yaml_edit.edit_selector(text, document=document, selector_path="spec.selector",
                               selector={"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"})
        samples.append(time.perf_counter() - start)
    return statistics.median(samples), len(text.splitlines())


def bench_slack_overhead(events: int) -> float:
    """Microseconds per event added by the sink, Slack down and the queue full, in one loop."""
    import io

    from cutover import logs
    from cutover.slack import blocks, sink

    async def measure(with_sink: bool) -> float:
        outbox = sink.Outbox(size=10)
        for index in range(10):
            outbox.put(blocks.Message(f"k{index}", "started", {"event": "cutover.started"}), now=0.0)
        logs.configure(fmt="json", stream=io.StringIO(), sinks=[sink.SlackSink(outbox)] if with_sink else [])
        log = structlog.get_logger("cutover")
        start = time.perf_counter()
        for index in range(events):
            log.info("git.committed", service="ns/svc", cutover="c", commit=str(index))
        return (time.perf_counter() - start) / events * 1e6

    # Once each to warm up (the first loop pays structlog's first calls), then alternated, the fastest of each kept:
    # a difference of two single loops is below the noise of a loaded machine and once came out negative.
    samples: dict[bool, list[float]] = {False: [], True: []}
    for with_sink in (False, True) * 6:
        samples[with_sink].append(asyncio.run(measure(with_sink)))
    structlog.reset_defaults()
    return min(samples[True][1:]) - min(samples[False][1:])


async def _slack_messages() -> tuple[int, int]:
    from cutover import logs
    from cutover.githost.github import GitHub
    from cutover.slack import sink, transports
    from doubles.slack import FakeSlack

    with tempfile.TemporaryDirectory() as tmp:
        repo = BareRepo(Path(tmp) / "gitops.git")
        repo.commit({GIT_PATH: SERVICE_FILE.read_text()}, "seed\n")
        async with World() as world, FakeContentsHost(repo, token="t") as fake, FakeSlack() as slack:
            world.admit_jobs()
            world.add_pod("vllm", ready=True)
            world.add_pod("candle", Script(pull=60, load=27 * 60))
            (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url))
            outbox = sink.Outbox()
            import io

            logs.configure(fmt="json", stream=io.StringIO(), sinks=[sink.SlackSink(outbox)])
            sender = sink.Sender(transports.Bot(slack.token, "C1", api=slack.url + "/api"), outbox)
            sender.start()
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            host = GitHub(url=the_plan.git.url, branch="main", token="t", api_url=fake.url)
            from cutover.flows import phases
            from cutover.flows.context import Run

            await phases.postsync(Run.create(kube, the_plan, host, identity="bench",
                                             author=Author("c", "c@example.invalid")))
            await sender.flush(budget=120)
            await host.aclose()
            await kube.aclose()
            structlog.reset_defaults()
            posted = sum(1 for post in slack.posted if post.path.endswith("chat.postMessage"))
            return posted, len(slack.posted)


def bench_slack_messages() -> tuple[int, int]:
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(_slack_messages())
    finally:
        loop.close()


def bench_installed_size() -> tuple[float, float]:
    """MB that the image's build stage installs, cutover and its locked runtime without the demo and test extras;
    then after packaging/prune.py, as that stage runs it."""
    sys.path.insert(0, str(ROOT / "packaging"))
    import prune

    pip = [sys.executable, "-m", "pip", "install", "--quiet", "--no-compile", "--no-deps"]
    with tempfile.TemporaryDirectory() as target:
        lock = str(ROOT / "packaging" / "requirements.lock")
        subprocess.run([*pip, "--require-hashes", "--target", target, "-r", lock], check=True, capture_output=True)
        subprocess.run([*pip, "--no-build-isolation", "--target", target, str(ROOT)], check=True, capture_output=True)
        total = sum(path.stat().st_size for path in Path(target).rglob("*") if path.is_file())
        freed = prune.prune(Path(target))
    return total / 1e6, (total - freed) / 1e6


def bench_scale(count: int) -> dict[str, float]:
    starts = fleet.startups(count)
    slowest = max(starts, key=lambda script: script.pull + script.load)
    loop = looptime.new_event_loop(start=0)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            one = loop.run_until_complete(fleet.cutover([slowest], Path(tmp) / "one"))
            many = loop.run_until_complete(fleet.cutover(starts, Path(tmp) / "many"))
    finally:
        loop.close()
    assert (one.code, one.commits, many.code, many.commits) == (0, 1, 0, count), (one, many)
    return {"count": count, "timeline_ratio": many.seconds / one.seconds, "minutes": many.seconds / 60,
            "requests_per_service": many.requests / count, "requests_one": one.requests, "cpu_many": many.cpu,
            "cpu_one": one.cpu}


class _Between:
    """A structlog processor noting the real time between two events of a command."""

    def __init__(self, first: str, last: str) -> None:
        self.first, self.last = first, last
        self.at: dict[str, float] = {}

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> Any:
        if event.get("event") in (self.first, self.last):
            self.at.setdefault(str(event["event"]), time.perf_counter())
        return event

    @property
    def seconds(self) -> float:
        return self.at[self.last] - self.at[self.first]


def bench_commit_latency(runs: int) -> float:
    samples = []
    for run in range(runs):
        between = _Between("target.ready", "git.committed")
        loop = looptime.new_event_loop(start=0)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                outcome = loop.run_until_complete(fleet.cutover([Script(pull=30, load=600)], Path(tmp) / str(run),
                                                                observers=[between]))
        finally:
            loop.close()
        assert outcome.commits == 1, outcome
        samples.append(between.seconds)
    return statistics.median(samples)


# --- 12, 13: kustomize sources --------------------------------------------------------------------------

APP = "k8s/apps/llm-serving"
OVERLAY = f"{APP}/overlays/prod"
BASE_FILE = f"{APP}/base/service.yaml"


def _overlay_tree(extra: int) -> dict[str, str]:
    """The example layout: a base Service (and `extra` ConfigMaps), the prod overlay adding a selector label."""
    service = ("apiVersion: v1\nkind: Service\nmetadata:\n  name: reasoning-long-predictor\n"
               "  namespace: llm-serving\nspec:\n  selector:\n    app.kubernetes.io/name: llm-reasoning\n"
               "    serving.kserve.io/inferenceservice: reasoning\n  ports:\n"
               "    - {name: http, port: 80, targetPort: 8080}\n    - {name: engine, port: 8080, targetPort: 8080}\n")
    maps = "".join(f"---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: config-{i}, namespace: llm-serving}}\n"
                   f"data: {{index: '{i}'}}\n" for i in range(extra))
    resources = "  - service.yaml\n" + ("  - configmaps.yaml\n" if extra else "")
    return {BASE_FILE: service, f"{APP}/base/configmaps.yaml": maps or "---\n",
            f"{APP}/base/kustomization.yaml": f"apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                               f"resources:\n{resources}",
            f"{OVERLAY}/kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                             "resources: [../../base]\nlabels:\n  - pairs: {component: predictor}\n"
                                             "    includeSelectors: true\n"}


async def _render_checks(extra: int, runs: int) -> float:
    from cutover import sources

    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        repo = BareRepo(Path(tmp) / "gitops.git")
        repo.commit(_overlay_tree(extra), "overlay\n")
        async with FakeContentsHost(repo, token="t") as fake:
            world = World.__new__(World)
            world.port = 8080
            (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=BASE_FILE,
                                                     git_more=f"source: kustomize\nrender: {{path: {OVERLAY}}}"))
            host = GitHub(url=the_plan.git.url, branch="main", token="t", api_url=fake.url)
            for _ in range(runs):
                source = sources.for_plan(the_plan, host=host)  # a fresh source: the archive is fetched again
                version = await host.read(BASE_FILE)
                start = time.perf_counter()
                edit = await source.edit(version, the_plan.backends["candle"].selector, where=BASE_FILE)
                samples.append(time.perf_counter() - start)
                assert edit.changed
            await host.aclose()
    return statistics.median(samples)


def bench_render_checks(runs: int) -> dict[str, float]:
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    return {"example": asyncio.run(_render_checks(0, runs)), "200 resources": asyncio.run(_render_checks(199, runs))}


async def _switch_once(tmp: Path, between: _Between) -> None:
    from cutover.demo import argocd as sim_argocd
    from cutover.flows.context import Run

    structlog.configure(processors=[between, lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    repo = BareRepo(tmp / "gitops.git")
    repo.commit(_overlay_tree(0), "overlay\n")
    async with World() as world, FakeContentsHost(repo, token="t") as fake:
        world.admit_jobs()
        world.add_pod("vllm", ready=True)
        world.add_pod("candle", Script(pull=30, load=600))
        sim_argocd.seed_application(world, revision=repo.head(), path=OVERLAY)
        sim_argocd.apply_git(world, repo, BASE_FILE)
        (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, git_path=BASE_FILE,
                                                 git_more="source: kustomize"))
        kube = cluster.connect(kubeconfig=str(world.kubeconfig(tmp / "kubeconfig")), environ={})
        host = GitHub(url=the_plan.git.url, branch="main", token="t", api_url=fake.url)
        try:
            async with sim_argocd.running(world, repo, BASE_FILE):
                await explicit.run(Run.create(kube, the_plan, host, identity="bench"))
        finally:
            await host.aclose()
            await kube.aclose()


def bench_switch(runs: int) -> float:
    samples = []
    for _ in range(runs):
        between = _Between("target.ready", "argocd.synced")
        loop = looptime.new_event_loop(start=0)
        try:
            with tempfile.TemporaryDirectory() as tmp:
                loop.run_until_complete(_switch_once(Path(tmp), between))
        finally:
            loop.close()
        samples.append(between.seconds)
    structlog.reset_defaults()
    return statistics.median(samples)


async def _fitness_once(world: World, kube: cluster.Cluster, the_plan: plan.Plan) -> tuple[float, int]:
    pods = [pod for pod in world.pods.values() if pod.backend == "candle"]
    before = [len(pod.engine.requests) for pod in pods]
    began = time.perf_counter()
    await wait.prove_backend(kube, the_plan, the_plan.backends["candle"], wait=False)
    took = time.perf_counter() - began
    return took, max(len(pod.engine.requests) - count for pod, count in zip(pods, before, strict=True))


async def _fitness(latency: float, runs: int) -> dict[str, float]:
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    with tempfile.TemporaryDirectory() as tmp:
        async with World() as world:
            world.admit_jobs()
            for pod in [world.add_pod("vllm", ready=True), *(world.add_pod("candle", ready=True) for _ in range(2))]:
                pod.engine.latency = latency
            await world.settled()
            plain, = plan.parse(world.plan_text())
            fit, = plan.parse(world.plan_text(fitness="{requests: 3, maxLatency: 1s}"))
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            try:
                without = [await _fitness_once(world, kube, plain) for _ in range(runs)]
                with_ = [await _fitness_once(world, kube, fit) for _ in range(runs)]
            finally:
                await kube.aclose()
    return {"added": statistics.median(t for t, _ in with_) - statistics.median(t for t, _ in without),
            "requests": max(n for _, n in with_) - max(n for _, n in without)}


def bench_fitness(runs: int) -> dict[str, dict[str, float]]:
    return {f"{latency * 1000:.0f} ms": asyncio.run(_fitness(latency, runs)) for latency in (0.0, 0.05)}


async def _drain_idle(runs: int) -> dict[str, float]:
    """docs/capacity.md: the drain of an idle vLLM source of 2 pods: its length in fake time (one poll: the second
    idle read), the real time it takes, and /metrics reads per pod."""
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    with tempfile.TemporaryDirectory() as tmp:
        async with World() as world:
            world.admit_jobs()
            sources = [world.add_pod("vllm", ready=True) for _ in range(2)]
            await world.settled()
            (the_plan,) = plan.parse(world.plan_text())
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            try:
                pods, _ = await kube.pods("llm-serving", the_plan.backends["vllm"].selector)
                real, fake = [], []
                async with engine_api.new_client(timeout=5) as client:
                    for _ in range(runs):
                        began, loop_began = time.perf_counter(), asyncio.get_running_loop().time()
                        await drain.drain_backend(client, the_plan.backends["vllm"], pods, within=300)
                        real.append(time.perf_counter() - began)
                        fake.append(asyncio.get_running_loop().time() - loop_began)
            finally:
                await kube.aclose()
    reads = sum(1 for pod in sources for _, path, _ in pod.engine.requests if path == "/metrics")
    return {"fake": statistics.median(fake), "real": statistics.median(real), "reads": reads / len(sources) / runs}


def bench_drain(runs: int) -> dict[str, float]:
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(_drain_idle(runs))
    finally:
        loop.close()


def bench_capacity(runs: int) -> float:
    """The capacity judgment (docs/capacity.md) on a 500-node cluster with 30 pods bound to each: real time."""
    nodes = [NodeView(f"n{i}", {"gpu": "yes"}, {"nvidia.com/gpu": 8000, "cpu": 64000, "pods": 110000})
             for i in range(500)]
    bound = [PodView("ns", f"p{i}-{j}", "", {}, node_name=f"n{i}", requests={"nvidia.com/gpu": 250, "cpu": 2000,
                                                                            "pods": 1000})
             for i in range(500) for j in range(30)]
    pending = PodView("ns", "t", "", {}, requests={"nvidia.com/gpu": 1000, "cpu": 4000, "pods": 1000},
                      placement=Placement(node_selector={"gpu": "yes"}))
    took = []
    for _ in range(runs):
        began = time.perf_counter()
        capacity.judge(target="t", pending=pending, needed=1, nodes=nodes, bound=bound, source="s",
                       source_pods=bound[:30], short=("nvidia.com/gpu",))
        took.append(time.perf_counter() - began)
    return statistics.median(took)


RECREATE_ENGINES = """apiVersion: apps/v1
kind: Deployment
metadata: {name: llm-reasoning}
spec:
  replicas: 1
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: candle}
spec:
  replicas: 0
"""


ENGINES_PATH, SERVICE_PATH = "k8s/apps/llm-serving/engines.yaml", "k8s/apps/llm-serving/reasoning-long-service.yaml"


@contextlib.asynccontextmanager
async def _one_gpu(handoff: str, *, coder: bool = False) -> AsyncIterator[tuple[World, BareRepo, Any, Any, Any]]:
    """A one-GPU node with vLLM serving on it, candle committed stopped, the plan's `handoff`: (world, repo, kube,
    host, plan)."""
    structlog.configure(processors=[lambda *_: (_ for _ in ()).throw(structlog.DropEvent)])
    with tempfile.TemporaryDirectory() as tmp:
        repo = BareRepo(Path(tmp) / "gitops.git")
        repo.commit({SERVICE_PATH: (ROOT / "tests" / "fixtures" / "reasoning-long-service.yaml").read_text(),
                     ENGINES_PATH: RECREATE_ENGINES}, "seed\n")
        async with World() as world, FakeContentsHost(repo, token="t") as fake:
            world.admit_jobs()
            sim_argocd.seed_application(world)
            world.add_node("gpu-1", gpus=1)
            world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
            if coder:
                world.add_pod("coder", ready=True)
            await world.settled()
            workloads = {"vllm": f"{{kind: Deployment, name: llm-reasoning, path: {ENGINES_PATH}}}",
                         "candle": f"{{kind: Deployment, name: candle, path: {ENGINES_PATH}}}"}
            (the_plan,) = plan.parse(world.plan_text(git_api_url=fake.url, workloads=workloads, coder=coder,
                                                     handoff=handoff))
            kube = cluster.connect(kubeconfig=str(world.kubeconfig(Path(tmp) / "kubeconfig")), environ={})
            host = GitHub(url=the_plan.git.url, branch="main", token="t", api_url=fake.url)
            try:
                yield world, repo, kube, host, the_plan
            finally:
                await host.aclose()
                await kube.aclose()


def _api_requests(world: World) -> int:
    return len([r for r in world.kube if r.url.path.startswith(("/api/", "/apis/"))])


def _candle_on_the_card(world: World, pull: float, load: float) -> None:
    for pod in [pod for pod in world.pods.values() if pod.backend == "vllm"]:
        world.delete_pod(pod.name)
    world.add_pod("candle", Script(pull=pull, load=load), gpus=1, node="gpu-1")


async def _recreate_once(pull: float, load: float) -> tuple[float, float, int]:
    """One recreate, vLLM -> candle on a one-GPU node: (gap, startup, API requests)."""
    async with _one_gpu("{strategy: recreate, maxGap: 30m}") as (world, repo, kube, host, the_plan):
        before = _api_requests(world)
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
        _candle_on_the_card(world, pull, load)
        await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
        sim_argocd.apply_git(world, repo, SERVICE_PATH)
        verified = await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
        api = _api_requests(world) - before
    gap = getattr(verified, "gap", None)
    assert gap is not None
    return gap, pull + load, api


async def _bridge_once(pull: float, load: float) -> dict[str, float]:
    """One handoff by bridge, vLLM -> coder -> candle on a one-GPU node, four PostSyncs: the path (first PostSync
    to verified) over the target's startup, API requests per pod, and what a client asking for the bridged name
    through the Service every 10 s saw."""
    loop = asyncio.get_running_loop()
    handoff = "{strategy: bridge, bridge: coder, bridgeNames: [reasoning], maxGap: 45m}"
    async with _one_gpu(handoff, coder=True) as (world, repo, kube, host, the_plan):
        before = _api_requests(world)
        async with world.client("reasoning", every=10) as asked:
            started = loop.time()
            await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
            sim_argocd.apply_git(world, repo, SERVICE_PATH)
            await phases.postsync(Run.create(kube, the_plan, host, identity="job-2"))
            _candle_on_the_card(world, pull, load)
            await phases.postsync(Run.create(kube, the_plan, host, identity="job-3"))
            sim_argocd.apply_git(world, repo, SERVICE_PATH)
            await phases.postsync(Run.create(kube, the_plan, host, identity="job-4"))
            path = loop.time() - started
        api = _api_requests(world) - before
    return {"path": path, "startup": pull + load, "ratio": path / (pull + load), "requests_per_pod": api / 3,
            "answered": asked.answered, "failed": len(asked.failed)}


def bench_bridge() -> dict[str, float]:
    loop = looptime.new_event_loop(start=0)
    try:
        return loop.run_until_complete(_bridge_once(45, 11 * 60))
    finally:
        loop.close()


def bench_recreate() -> dict[str, float]:
    loop = looptime.new_event_loop(start=0)
    try:
        gap, startup, api = loop.run_until_complete(_recreate_once(45, 11 * 60))
    finally:
        loop.close()
    return {"gap": gap, "startup": startup, "ratio": gap / startup, "requests_per_pod": api / 2}


TIER_TIMING = Path(__file__).resolve().parents[1] / "build" / "tier-timing.json"


def tier_timing() -> list[tuple[str, str, str]]:
    """Row 19, from the real tier's last timing run on this machine (e2e/gitops/test_timing.py keeps its figures in
    build/tier-timing.json): commit → live as a share of ArgoCD's scaled look, and the gate's sync against a sync with
    a no-op PreSync hook of the same image. Ratios inside that one run; the clock of a benchmark run here could
    not say them (no ArgoCD here)."""
    if not TIER_TIMING.exists():
        return [("19. commit → live / ArgoCD's scaled look, real tier", "(no tier run: make e2e TIER=gitops "
                 "SCENARIOS=e2e/gitops/test_timing.py)", "")]
    kept = json.loads(TIER_TIMING.read_text())
    poll, p50, gate = kept["poll"], kept["p50"], kept.get("sync_to_live", {})
    rows = [(f"19. commit → live / ArgoCD's scaled look ({poll:g} s), {mode}, tier run {kept['at']}",
             f"{seconds / poll:.2f}", "< 1" if mode == "the nudge" else "")
            for mode, seconds in p50.items() if mode not in ("baseline", "a no-op PreSync hook")]
    if "the gate" in gate and "a no-op PreSync hook" in gate:
        rows.append(("19. sync start → live: cutover's gate / a no-op PreSync hook, same run",
                     f"{gate['the gate'] / gate['a no-op PreSync hook']:.2f}×", "≤ 1.25×"))
    return rows


TIER_FLEET = Path(__file__).resolve().parents[1] / "build" / "tier-fleet.json"


def tier_fleet() -> list[tuple[str, str, str]]:
    """Row 20, from the real tier's last fleet run on this machine (e2e/gitops/test_fleet.py keeps it in
    build/tier-fleet.json): the fleet's commit to its last step's cluster verified, against the sum of each step's
    sync as ArgoCD timed it (one cluster a step: each step's slowest). Near 1: the steps cost their syncs, and
    RollingSync's stepping and ArgoCD's pickup add little."""
    if not TIER_FLEET.exists():
        return [("20. a fleet: commit → last step verified / the steps' syncs, real tier", "(no fleet run: "
                 "CUTOVER_FLEET_TIER=1 make e2e TIER=gitops SCENARIOS=e2e/gitops/test_fleet.py)", "")]
    kept = json.loads(TIER_FLEET.read_text())
    return [(f"20. a fleet: commit → last step verified / the sum of the steps' syncs ({len(kept['syncs'])} steps), "
             f"tier run {kept['at']}", f"{kept['total'] / sum(kept['syncs']):.2f}×", "≈ 1")]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--smoke", action="store_true", help="few iterations: checks that the benchmarks run")
    args = parser.parse_args()
    runs = 5 if args.smoke else 60
    latency = asyncio.run(bench_latency(runs))
    requests = bench_requests()
    cli = asyncio.run(_serve_and_run(2 if args.smoke else 7))
    git = asyncio.run(bench_git(2 if args.smoke else 20))
    edit, lines = bench_edit(2 if args.smoke else 10)
    overhead = bench_slack_overhead(2000 if args.smoke else 20000)
    installed = None if args.smoke else bench_installed_size()
    slack_posts = bench_slack_messages()
    scale = bench_scale(10 if args.smoke else 50)
    to_commit = bench_commit_latency(2 if args.smoke else 10)
    renders = bench_render_checks(2 if args.smoke else 10)
    switch = bench_switch(2 if args.smoke else 10)
    fitness = bench_fitness(2 if args.smoke else 10)
    drained = bench_drain(2 if args.smoke else 10)
    judged = bench_capacity(2 if args.smoke else 20)
    recreated = bench_recreate()
    bridged = bench_bridge()
    rows = [
        ("1. Ready → names.proven p50 (s)", f"{latency['p50']:.3f}", "≤ 0.25"),
        ("1. Ready → names.proven p95 (s)", f"{latency['p95']:.3f}", ""),
        ("1. Ready → git.committed p50, whole `cutover postsync`, GitHub double (s)", f"{to_commit:.3f}", ""),
        ("2. API requests per pod, 30 min, 1 pod", f"{requests[1][0]:.1f}", "≤ 12"),
        ("2. API requests per pod, 30 min, 10 pods", f"{requests[10][0]:.1f}", "≤ 12"),
        ("3. engine requests before container start", str(requests[1][1] + requests[10][1]), "0"),
        ("4. `cutover --help` / import kubernetes.client", f"{cli['help'] / cli['import']:.2f}×", "≤ 3×"),
        ("4. `cutover verify` (proven) / import kubernetes.client", f"{cli['verify'] / cli['import']:.2f}×", "≤ 3×"),
        ("5. peak RSS of `cutover verify --wait` (MB)", f"{cli['rss_mb']:.0f}", "≤ 80"),
        *((f"6. CAS commit round trip p50, {name} (s)", f"{value:.3f}", "") for name, value in git.items()),
        (f"7. edit + guard, {lines}-line multi-document file (s)", f"{edit:.3f}", ""),
        ("8. Slack sink cost per event, Slack down, queue full (µs)", f"{overhead:.1f}", "≤ 1000"),
        ("9. Slack messages posted, whole 30-minute cutover, bot mode", str(slack_posts[0]), "≤ 10"),
        ("9. Slack requests in all (progress updates the head ≤ 1/min)", str(slack_posts[1]), ""),
        ("10. installed size, cutover + locked runtime dependencies / pruned for the image (MB)",
         f"{installed[0]:.0f} / {installed[1]:.0f}" if installed is not None else "(full runs)", ""),
        (f"11. {scale['count']} Services, one process: timeline / slowest alone ({scale['minutes']:.0f} min)",
         f"{scale['timeline_ratio']:.2f}×", "≤ 2×"),
        (f"11. API requests per Service, {scale['count']} Services / one alone",
         f"{scale['requests_per_service']:.0f} / {scale['requests_one']}", "no worse"),
        (f"11. CPU seconds, {scale['count']} Services / one alone",
         f"{scale['cpu_many']:.1f} / {scale['cpu_one']:.1f}", ""),
        *((f"12. render check per commit, kustomize, {name} overlay (s)", f"{value:.2f}", "≤ 1")
          for name, value in renders.items()),
        ("13. Ready → live Service switched p50, `cutover run`, kustomize overlay, simulated ArgoCD (s)",
         f"{switch:.2f}", "≤ 5"),
        ("14. fitness requests per target pod per proof, beyond the name proof (requests 3 × 2 names)",
         f"{fitness['0 ms']['requests']:.0f}", "≤ 7"),
        *((f"14. time fitness adds to a proof, warm target, engine answering in {name} (s)",
           f"{value['added']:.3f}", "≤ 2 (2 × maxLatency)") for name, value in fitness.items()),
        ("15. drain of an idle vLLM source, 2 pods: length in fake time (s)", f"{drained['fake']:.1f}",
         "1 (the second idle read)"),
        ("15. drain of an idle vLLM source, 2 pods: real time (s)", f"{drained['real']:.3f}", ""),
        ("15. drain of an idle vLLM source: /metrics reads per pod", f"{drained['reads']:.0f}", "2"),
        ("16. capacity judgment, 500 nodes × 30 bound pods (s)", f"{judged:.3f}", "≤ 0.5"),
        (f"17. recreate on one GPU: gap / target startup ({recreated['gap']:.0f} s / {recreated['startup']:.0f} s)",
         f"{recreated['ratio']:.2f}×", "≤ 1.1× (+ ArgoCD's syncs in a cluster)"),
        ("17. recreate on one GPU: Kubernetes API requests per pod over the path (3 PostSyncs)",
         f"{recreated['requests_per_pod']:.0f}", ""),
        (f"18. bridge on one GPU: path / target startup ({bridged['path']:.0f} s / {bridged['startup']:.0f} s)",
         f"{bridged['ratio']:.2f}×", "≤ 1.1× (+ ArgoCD's syncs in a cluster)"),
        ("18. bridge on one GPU: requests for the bridged name that failed, one every 10 s along the path",
         f"{bridged['failed']:.0f} of {bridged['answered'] + bridged['failed']:.0f}", "0"),
        ("18. bridge on one GPU: Kubernetes API requests per pod over the path (4 PostSyncs, 3 pods)",
         f"{bridged['requests_per_pod']:.0f}", ""),
        *tier_timing(),
        *tier_fleet(),
    ]
    print(f"cutover benchmarks — {time.strftime('%Y-%m-%d')}, {platform.machine()}, {os.cpu_count()} cores, "
          f"Python {platform.python_version()}{' (smoke run)' if args.smoke else ''}")
    print(f"  import kubernetes.client: {cli['import']:.3f} s; runs: {runs}")
    width = max(len(row[0]) for row in rows)
    print(f"| {'measure'.ljust(width)} | value | goal |")
    print(f"|{'-' * (width + 2)}|-------|------|")
    for name, value, goal in rows:
        print(f"| {name.ljust(width)} | {value} | {goal} |")
    print(json.dumps({"latency": latency, "requests_per_pod": {k: v[0] for k, v in requests.items()}, "cli": cli,
                      "git": git, "edit": edit, "slack_overhead_us": overhead, "slack_posts": slack_posts,
                      "scale": scale, "ready_to_commit": to_commit, "render_checks": renders,
                      "ready_to_switched": switch, "fitness": fitness, "drain": drained,
                      "capacity_judgment": judged, "recreate": recreated, "bridge": bridged}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
