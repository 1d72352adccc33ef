"""`cutover init` (the newcomer's P11: eight manual steps, none generated): a workload's layout as docs/install.md
lays it out, written from one command and built offline from the release's archive; what it writes for the tier's
second workload renders exactly what the tier installs for it (e2e/fixtures/cutover/chat-prod), and for the first
what the example's does; the administrator's commands printed; nothing overwritten; bad flags named."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from test_cli import cli_runner

import contracts
import cutover
from cutover import plan
from cutover.demo.world import World
from cutover.sources import kustomize_build

ROOT = Path(__file__).resolve().parents[2]
REPOSITORY = "https://github.com/acme/gitops.git"


def init(*args: str, into: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "cutover", "init", "--into", str(into), *args],
                          capture_output=True, text=True, check=False, timeout=60)


def built(directory: Path) -> list[dict[str, Any]]:
    return asyncio.run(kustomize_build.build(directory, where=str(directory)))


@pytest.fixture(scope="module")
def repo(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A repository with the release unpacked in vendor/, and the two workloads `cutover init` wrote into it."""
    tmp_path = tmp_path_factory.mktemp("init")
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import release
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    root = tmp_path / "repo"
    (root / "vendor").mkdir(parents=True)
    with tarfile.open(fileobj=__import__("io").BytesIO(release.archived(cutover.__version__))) as tar:
        tar.extractall(root / "vendor", filter="data")
    vendored = str(root / "vendor" / f"cutover-{cutover.__version__}")
    first = init("--first", "--application", "llm-serving", "--namespace", "llm-serving", "--service",
                 "reasoning-long-predictor", "--port", "8080", "--repository", REPOSITORY, "--release", vendored,
                 into=root)
    assert first.returncode == 0, first.stdout + first.stderr
    further = init("--application", "chat-prod", "--namespace", "llm-serving", "--service", "chat-predictor",
                   "--port", "8080", "--repository", REPOSITORY, "--release", vendored, into=root)
    assert further.returncode == 0, further.stdout + further.stderr
    assert "under resources: chat-prod and chat-prod/namespace" in further.stdout
    top = root / "cutover" / "kustomization.yaml"  # as the output says
    top.write_text(top.read_text().replace("  - llm-serving\n", "  - llm-serving\n  - chat-prod\n"
                                                                "  - chat-prod/namespace\n"))
    return root


def _objects(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def test_a_further_workload_renders_what_the_tier_installs_for_it(repo: Path) -> None:
    made = _objects(built(repo / "cutover" / "chat-prod"))
    tier = _objects(built(ROOT / "e2e" / "fixtures" / "cutover" / "chat-prod"))
    assert made == tier
    namespace = _objects(built(repo / "cutover" / "chat-prod" / "namespace"))
    assert namespace == _objects(built(ROOT / "e2e" / "fixtures" / "cutover" / "chat-prod" / "namespace"))


def test_the_first_workload_renders_what_the_example_does(repo: Path) -> None:
    made = _objects(built(repo / "cutover" / "llm-serving"))
    example = _objects(built(ROOT / "manifests" / "examples" / "llm-serving" / "cutover" / "llm-serving"))
    assert made == example
    everything = built(repo / "cutover")  # cutover's own Application, both workloads in it, offline
    roles = {doc["metadata"]["name"] for doc in everything if doc["kind"] == "Role"}
    assert {"cutover", "cutover-chat-prod"} <= roles
    assert {doc["metadata"]["name"] for doc in everything if doc["kind"] == "Namespace"} == {
        "cutover", "cutover-chat-prod"}


def test_the_hooks_and_their_plan_build_and_read(repo: Path) -> None:
    hooks = built(repo / "chat-prod" / "hooks")
    placed = {(doc["kind"], doc["metadata"]["name"]): doc["metadata"]["namespace"] for doc in hooks}
    assert placed[("ConfigMap", "cutover-plan-chat-prod")] == "cutover-chat-prod"
    assert placed[("Job", "cutover-presync-chat-prod")] == "cutover-chat-prod"
    (config,) = [doc for doc in hooks if doc["kind"] == "ConfigMap"]
    (read,) = plan.parse(config["data"]["plan.yaml"])
    assert read.name == "chat-prod" and read.target == "vllm" and read.service.name == "chat-predictor"
    project = YAML(typ="safe").load((repo / "chat-prod" / "appproject.yaml").read_text())
    assert [d["namespace"] for d in project["spec"]["destinations"]] == ["llm-serving", "cutover-chat-prod"]


def test_nothing_is_overwritten_and_bad_flags_are_named(repo: Path) -> None:
    again = init("--application", "chat-prod", "--namespace", "llm-serving", "--service", "chat-predictor",
                 "--port", "8080", "--repository", REPOSITORY, into=repo)
    assert again.returncode == 2 and "exists: cutover init writes new files only" in again.stderr
    for flags, words in [(("--application", "Chat_Prod"), "--application: expected a DNS label"),
                         (("--port", "0"), "--port: expected a port from 1 to 65535"),
                         (("--repository", "git@github.com:acme/gitops.git"), "--repository: expected an https://")]:
        given = dict(zip(flags[::2], flags[1::2], strict=True))
        args = {"--application": "x", "--namespace": "llm-serving", "--service": "s", "--port": "8080",
                "--repository": REPOSITORY, **given}
        done = init(*[part for pair in args.items() for part in pair], into=repo / "elsewhere")
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert not (repo / "elsewhere").exists()  # nothing written


def test_a_fleets_workload_renders_the_fleets_hooks_the_mark_and_its_applicationset(repo: Path) -> None:
    """`cutover init --fleet` (docs/fleet.md): the hooks render the fleet's (the gate, the Sync-phase verifier at
    wave 1000, the mark at 1001, SyncFail; no CronJob, nothing that writes), the mark's labels are the Service's
    selector once the kustomization beside the Service names `mark` as the output says, the plan reads as a fleet's,
    and the ApplicationSet (one ring per step, in the order given) and the project hold to ArgoCD's CRDs."""
    done = init("--fleet", "gpu-canary=canary,gpu-east=main,gpu-west=main", "--application", "reasoning-long",
                "--namespace", "llm-serving", "--service", "reasoning-long-predictor", "--port", "8080",
                "--repository", REPOSITORY, "--credentials-namespace", "cutover",
                "--release", str(repo / "vendor" / f"cutover-{cutover.__version__}"), into=repo)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "resources: hooks, components: mark" in done.stdout and "read only: no paths" in done.stdout
    assert "p, role:cutover-reasoning-long, applicationsets, get, reasoning-long/*, allow" in done.stdout
    fleet = repo / "reasoning-long"
    example = ROOT / "manifests" / "examples" / "llm-serving" / "workload"
    for name in ("service.yaml", "engines.yaml"):
        (fleet / name).write_text((example / name).read_text())
    (fleet / "kustomization.yaml").write_text("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\n"
                                              "resources: [service.yaml, engines.yaml, hooks]\ncomponents: [mark]\n")
    objects = _objects(built(fleet))
    assert not [name for kind, name in objects if kind == "CronJob"]
    verifier = objects[("Job", "cutover-verify-reasoning-long")]
    annotations = verifier["metadata"]["annotations"]
    assert (annotations["argocd.argoproj.io/hook"], annotations["argocd.argoproj.io/sync-wave"]) == ("Sync", "1000")
    assert verifier["spec"]["template"]["spec"]["containers"][0]["args"][:2] == ["verify", "--synced"]
    mark = objects[("ConfigMap", "cutover-verified-reasoning-long")]
    assert mark["metadata"]["labels"] == objects[("Service", "reasoning-long-predictor")]["spec"]["selector"]
    (read,) = plan.parse(objects[("ConfigMap", "cutover-plan-reasoning-long")]["data"]["plan.yaml"])
    assert read.fleet and not read.target and read.argocd is not None and not read.argocd.application
    appset = YAML(typ="safe").load((fleet / "applicationset.yaml").read_text())
    assert not list(contracts.crd_validator("applicationset").iter_errors(appset))
    steps = appset["spec"]["strategy"]["rollingSync"]["steps"]
    assert [step["matchExpressions"][0]["values"] for step in steps] == [["canary"], ["main"]]
    project = YAML(typ="safe").load((fleet / "appproject.yaml").read_text())
    assert not list(contracts.crd_validator("appproject").iter_errors(project))
    assert {d["name"] for d in project["spec"]["destinations"]} == {"gpu-canary", "gpu-east", "gpu-west"}
    bad = init("--fleet", "gpu-east=main,gpu-east=canary", "--application", "x", "--namespace", "llm-serving",
               "--service", "s", "--port", "8080", "--repository", REPOSITORY, into=repo / "elsewhere")
    assert bad.returncode == 2 and "--fleet: expected CLUSTER=RING,..." in bad.stderr, bad.stderr


def _written_plan(into: Path, application: str) -> plan.Plan:
    config = YAML(typ="safe").load((into / application / "hooks" / "plan-configmap.yaml").read_text())
    (read,) = plan.parse(config["data"]["plan.yaml"])
    return read


@pytest.mark.parametrize(("cards", "strategy"), [(1, "recreate"), (2, "parallel")])
async def test_the_strategy_chosen_from_the_clusters_capacity_when_asked(
        world: World, tmp_path: Path, repo: Path, cards: int, strategy: str) -> None:
    """`--strategy auto` reads the Service, the pods it selects and the nodes (nothing else, nothing written there):
    on a node whose only card vLLM holds, candle (judged as one more pod like vLLM's) fits only once vLLM's pods are
    gone: recreate, with each engine's workload and a maxGap to set; with a free card: parallel. Either way the
    source backend's selector is the Service's own, and the verdict with the node's figures is printed."""
    world.add_node("gpu-1", gpus=cards)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    await world.settled()
    run = cli_runner(world, tmp_path)
    into = tmp_path / "repo"
    done = await run("init", "--application", "llm-serving", "--namespace", "llm-serving", "--service",
                     "reasoning-long-predictor", "--port", "8080", "--repository", REPOSITORY, "--first",
                     "--release", str(repo / "vendor" / f"cutover-{cutover.__version__}"), "--into", str(into),
                     "--strategy", "auto")
    assert done.code == 0, done.stdout + done.stderr
    assert "capacity (read from the cluster): candle " in done.stdout and "gpu-1" in done.stdout
    assert f"→ handoff: {strategy}" in done.stdout
    written = _written_plan(into, "llm-serving")
    assert written.handoff.strategy == strategy
    service = world.kube.stored("/v1/services", "llm-serving", "reasoning-long-predictor") or {}
    assert dict(written.backends["vllm"].selector) == service["spec"]["selector"]
    if strategy == "recreate":
        assert written.handoff.max_gap == 45 * 60 and written.backends["candle"].workload is not None
    # read only: GETs, and the access review that asks whether the nodes may be listed (a question, no object)
    assert not [r for r in world.kube if r.method != "GET" and not r.url.path.endswith("/selfsubjectaccessreviews")]


async def test_a_strategy_read_from_a_service_that_is_not_there_is_named(world: World, tmp_path: Path,
                                                                        repo: Path) -> None:
    run = cli_runner(world, tmp_path)
    missing = await run("init", "--application", "chat", "--namespace", "llm-serving", "--service", "nobody",
                        "--port", "8080", "--repository", REPOSITORY, "--into", str(tmp_path / "x"),
                        "--strategy", "auto")
    assert missing.code == 2 and "--service: expected a Service llm-serving/nobody in the cluster" in \
        missing.outcome and not (tmp_path / "x").exists()
    fleet = await run("init", "--application", "chat", "--namespace", "llm-serving", "--service", "chat",
                      "--port", "8080", "--repository", REPOSITORY, "--into", str(tmp_path / "y"),
                      "--strategy", "recreate", "--fleet", "a=canary")
    assert fleet.code == 2 and "--strategy: expected parallel with --fleet, found recreate" in fleet.outcome
    offline = init("--application", "chat", "--namespace", "llm-serving", "--service", "chat", "--port", "8080",
                   "--repository", REPOSITORY, "--strategy", "recreate", "--release",
                   str(repo / "vendor" / f"cutover-{cutover.__version__}"), into=tmp_path / "z")
    assert offline.returncode == 0, offline.stderr
    assert _written_plan(tmp_path / "z", "chat").handoff.strategy == "recreate"
