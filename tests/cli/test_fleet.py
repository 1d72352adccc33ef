"""A fleet's cluster (docs/fleet.md) through the real CLI, against the simulated cluster and Git host: the fleet's
commit chooses the backend, the PreSync gate proves the backend that revision selects, `verify --synced` checks the
switch ArgoCD applied, and nothing that would write runs."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from test_cli import FIXTURE, TOKEN, Run, cli_runner

import contracts
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import Script, World
from cutover.plan import GitDocument
from cutover.sources import yaml_edit
from doubles.slack import FakeSlack

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
CANDLE = {"app.kubernetes.io/name": "llm-reasoning-candle", "component": "predictor"}


@pytest.fixture
def cutover(world: World, tmp_path: Path) -> Run:
    return cli_runner(world, tmp_path)


def fleet_plan(world: World, url: str, **more: Any) -> str:
    """The reference plan as a fleet's cluster has it: no target, no rollback of its own."""
    text = world.plan_text(git_api_url=url, **more).replace("target: candle\n", "").replace(
        "rollback:\n  auto: true\n", "")
    assert "target:" not in text and "rollback:" not in text
    return "mode: fleet\n" + text


def switched() -> str:
    return yaml_edit.edit_selector(FIXTURE.read_text(), document=GitDocument("Service", "reasoning-long-predictor"),
                                   selector_path="spec.selector", selector=CANDLE).after


def job(command: str, revision: str, phase: str) -> dict[str, str]:
    """A hook Job's name as ArgoCD generates it: <name>-<revision[:7]>-<phase>-<started>."""
    return {"CUTOVER_JOB_NAME": f"cutover-{command}-{revision[:7]}-{phase}-1764457200"}


async def test_the_gate_proves_the_backend_the_fleets_commit_selects(cutover: Run, world: World,
                                                                      tmp_path: Path) -> None:
    """No target in the plan: the revision being synced names it. Proven there, the sync goes on; a backend that
    cannot be placed is refused with the nodes' figures, aimed at that backend."""
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({PATH: FIXTURE.read_text()}, "seed\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    async with FakeContentsHost(repo, token=TOKEN) as host:
        text = fleet_plan(world, host.url)
        fleet = repo.commit({PATH: switched()}, "Fleet: reasoning-long to candle-vllm everywhere\n")
        gate = await cutover("presync", plan=text, env=job("presync", fleet, "presync"))
        status = await cutover("status", plan=text)
    assert gate.code == 0, gate.stderr[-2000:]
    assert f"{fleet[:7]} switches the Service to candle: proven on 1 pod(s)" in gate.outcome
    proven = next(event for event in gate.events if event.get("event") == "names.proven")
    # the fleet change's Slack thread, the same from every cluster (the Service and the revision), and this
    # cluster's line in it (its Application): tests/slack/test_fleet_threads.py
    change = hashlib.sha256(f"fleet:{proven['service']}:{fleet[:7]}".encode()).hexdigest()[:12]
    assert (proven["cutover_id"], proven["fleet"], proven["cluster"]) == (change, fleet[:7], "llm-serving")
    assert status.code == 0 and "a fleet's cluster: the Service selects vllm; the fleet's commits choose the " \
                                "backend" in status.stdout


async def test_the_gate_refuses_a_backend_the_fleets_commit_selects_that_cannot_be_placed(
        cutover: Run, world: World, tmp_path: Path) -> None:
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({PATH: FIXTURE.read_text()}, "seed\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(fault="unschedulable"))
    await world.settled()
    async with FakeContentsHost(repo, token=TOKEN) as host:
        fleet = repo.commit({PATH: switched()}, "Fleet: reasoning-long to candle-vllm everywhere\n")
        gate = await cutover("presync", plan=fleet_plan(world, host.url), env=job("presync", fleet, "presync"))
    assert gate.code == 3 and "cause unschedulable" in gate.outcome and "nvidia.com/gpu" in gate.outcome


ENGINES = "k8s/apps/llm-serving/engines.yaml"
RECREATE = {"workloads": {backend: f"{{kind: Deployment, name: {name}, path: {ENGINES}}}"
                          for backend, name in (("vllm", "llm-reasoning"), ("candle", "candle"))},
            "handoff": "{strategy: recreate, maxGap: 30m}"}


def engines(*, vllm: int, candle: int) -> str:
    """Both engines' Deployments (one GPU each) at these replica counts."""
    labels = {"llm-reasoning": {"app.kubernetes.io/name": "llm-reasoning", "component": "predictor",
                                "serving.kserve.io/inferenceservice": "reasoning"}, "candle": CANDLE}
    return "".join(f"""---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: {name}, namespace: llm-serving}}
spec:
  replicas: {count}
  selector: {{matchLabels: {json.dumps(labels[name])}}}
  template:
    metadata: {{labels: {json.dumps(labels[name])}}}
    spec:
      containers: [{{name: engine, image: "example.invalid/engine:1", resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
""" for name, count in (("llm-reasoning", vllm), ("candle", candle)))


async def test_a_fleets_recreate_swaps_first_and_switches_once_the_target_is_proven(cutover: Run, world: World,
                                                                                     tmp_path: Path) -> None:
    """A cluster whose only card vLLM holds, its plan `handoff: recreate` (docs/fleet.md). A fleet's commit that
    starts candle beside vLLM is refused before ArgoCD applies it (capacity_held_by_source, the node's figures); one
    that switches to candle while it stops vLLM and starts candle is refused at once (switch_before_start: no
    cluster switches before its own target is proven). The swap (the selector as it is, vLLM 0, candle 1) passes the
    gate, which judges that candle fits once vLLM is gone; its verifier says the name is dark until the next commit
    (exit 0: the step goes on). The next commit switches: the gate proves candle, the verifier verifies. Nothing is
    committed by cutover."""
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({PATH: FIXTURE.read_text(), ENGINES: engines(vllm=1, candle=0)}, "seed\n")
    world.add_node("gpu-1", gpus=1)
    vllm = world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    await world.settled()
    async with FakeContentsHost(repo, token=TOKEN) as host:
        text = fleet_plan(world, host.url, **RECREATE)
        beside = repo.commit({ENGINES: engines(vllm=1, candle=1)}, "Fleet: candle beside vLLM\n")
        refused = await cutover("presync", plan=text, env=job("presync", beside, "presync"))
        both = repo.commit({PATH: switched(), ENGINES: engines(vllm=0, candle=1)}, "Fleet: all at once\n")
        at_once = await cutover("presync", plan=text, env=job("presync", both, "presync"))
        swap = repo.commit({PATH: FIXTURE.read_text(), ENGINES: engines(vllm=0, candle=1)}, "Fleet: the swap\n")
        gate = await cutover("presync", plan=text, env=job("presync", swap, "presync"))
        world.delete_pod(vllm.name)  # ArgoCD's sync of the swap: vLLM stopped, candle started, the selector kept
        world.add_pod("candle", ready=True, gpus=1, node="gpu-1")
        await world.settled()
        dark = await cutover("verify", "--synced", plan=text, env=job("verify", swap, "sync"))
        switch = repo.commit({PATH: switched()}, "Fleet: reasoning-long to candle-vllm\n")
        proven = await cutover("presync", plan=text, env=job("presync", switch, "presync"))
        sim_argocd.apply_git(world, repo, PATH, revision=switch)
        await world.settled()
        verified = await cutover("verify", "--synced", plan=text,
                                 env={**job("verify", switch, "sync"), "CUTOVER_DEADLINE_SECONDS": "600"})
    assert refused.code == 3 and "cause capacity_held_by_source" in refused.outcome, refused.outcome
    assert "stop vllm in the commit that starts candle" in refused.outcome, refused.outcome
    assert at_once.code == 3 and "cause switch_before_start" in at_once.outcome, at_once.outcome
    assert gate.code == 0, gate.stderr[-2000:]
    assert f"{swap[:7]} stops vllm and starts candle, the selector as it is (a fleet's recreate): candle fits once " \
           "vllm is gone" in gate.outcome, gate.outcome
    assert dark.code == 0 and "the name is unanswered until the fleet's next commit switches to candle" in \
        dark.outcome, dark.outcome
    assert proven.code == 0 and f"{switch[:7]} switches the Service to candle: proven on 1 pod(s)" in proven.outcome
    assert verified.code == 0 and "verified: the Service selects candle, 1 endpoint(s)" in verified.outcome
    assert not [entry for entry in repo.log(limit=10) if entry.message.startswith("cutover(")]  # nothing committed


async def test_verify_synced_checks_the_switch_argocd_applied_and_fails_the_sync_when_it_did_not_land(
        cutover: Run, world: World, tmp_path: Path) -> None:
    """The Sync-phase verifier (wave 1000): after ArgoCD applied the fleet's commit, the Service selects candle and
    its endpoints are candle's Ready pods, every name answered through the Service: exit 0. A Service ArgoCD has
    not switched (in a later wave, or another Application's) fails it (exit 6), so the wave that marks the cluster
    done is never applied."""
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({PATH: FIXTURE.read_text()}, "seed\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    async with FakeContentsHost(repo, token=TOKEN) as host, FakeSlack() as slack:
        text = fleet_plan(world, host.url, slack=True)
        said = {"CUTOVER_SLACK_WEBHOOK": slack.webhook}  # the verifier is a hook: it speaks, as the gate does
        fleet = repo.commit({PATH: switched()}, "Fleet: reasoning-long to candle-vllm everywhere\n")
        early = await cutover("verify", "--synced", plan=text, env={**job("verify", fleet, "sync"), **said})
        sim_argocd.apply_git(world, repo, PATH, revision=fleet)
        await world.settled()
        verified = await cutover("verify", "--synced", plan=text,  # as fleet/ runs it: a 600 s deadline
                                 env={**job("verify", fleet, "sync"), "CUTOVER_DEADLINE_SECONDS": "600", **said})
    stages = [post.body["blocks"][1]["fields"][0]["text"].split("\n")[1] for post in slack.posted]
    assert [stage for stage in stages if "." not in stage] == ["failed", "verified"], stages  # beside warnings
    failure = next(post.body for post in slack.posted if "switch_not_applied" in json.dumps(post.body))
    assert "the revision" in json.dumps(failure) and "sync-wave" in json.dumps(failure)  # the message, the hint
    assert early.code == 6 and "cause switch_not_applied" in early.outcome, early.outcome
    assert f"the Service selects vllm, the revision {fleet[:7]} selects candle" in early.outcome
    assert "revert the fleet's commit" not in early.outcome  # not a verification of a landed switch: a layout's
    assert verified.code == 0, verified.stderr[-2000:]
    assert "verified: the Service selects candle, 1 endpoint(s)" in verified.outcome
    assert not [event for event in verified.events if event["event"] == "job.deadline_short"]  # no maxWait here
    assert not repo.log(limit=5)[0].message.startswith("cutover(")  # nothing committed


async def test_one_plan_for_every_cluster_finds_its_application_in_the_hooks_tracking(cutover: Run, world: World,
                                                                                       tmp_path: Path) -> None:
    """A fleet's plan names no argocd.application (one plan for every cluster): the hook reads its own Job, where
    ArgoCD wrote the tracking of the Application that created it, and reads the revision being synced from that
    Application's operation. Here the branch has moved on since (back to vLLM) while the sync applies the fleet's
    commit (candle): read from the branch head, the verification would fail."""
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({PATH: FIXTURE.read_text()}, "seed\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    async with FakeContentsHost(repo, token=TOKEN) as host:
        text = fleet_plan(world, host.url).replace("argocd:\n  application: llm-serving\n", "argocd:\n  namespace: "
                                                                                         "argocd\n")
        assert "application:" not in text
        fleet = repo.commit({PATH: switched()}, "Fleet: reasoning-long to candle-vllm everywhere\n")
        sim_argocd.apply_git(world, repo, PATH, revision=fleet)
        repo.commit({PATH: FIXTURE.read_text()}, "Fleet: back to vLLM (the next change, not synced yet)\n")
        sim_argocd.seed_application(world, revision=fleet)
        world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {"operationState": {
            "phase": "Running", "startedAt": "2026-12-07T05:00:00Z", "operation": {"sync": {"revision": fleet}}}}})
        world.kube.apply("batch/v1/jobs", {"metadata": {
            "name": "cutover-verify-fleet", "namespace": "cutover",
            "annotations": {"argocd.argoproj.io/tracking-id": "llm-serving:batch/Job:cutover/cutover-verify-fleet"}}})
        await world.settled()
        hook = {"CUTOVER_JOB_NAME": "cutover-verify-fleet", "POD_NAMESPACE": "cutover"}
        found = await cutover("verify", "--synced", plan=text, env=hook)
        untracked = await cutover("verify", "--synced", plan=text, env={**hook, "CUTOVER_JOB_NAME": "someone-elses"})
    assert found.code == 0, found.stderr[-2000:]
    assert any(event["event"] == "argocd.application_found" and event["application"] == "llm-serving"
               for event in found.events)
    assert untracked.code == 6 and "cause switch_not_applied" in untracked.outcome  # the branch head: vLLM
    assert any(event["event"] == "argocd.application_unknown" for event in untracked.events)


@pytest.mark.parametrize("command", ["postsync", "run", "rollback", "audit", "plan", "nudge"])
async def test_a_fleets_cluster_runs_nothing_that_writes(cutover: Run, world: World, command: str) -> None:
    result = await cutover(command, plan=fleet_plan(world, "https://127.0.0.1:1"))
    assert result.code == 2, result.outcome
    assert f"{command}: plan reasoning-long is a fleet's (mode: fleet)" in result.outcome
    assert "expected one of presync, verify, syncfail, status" in result.outcome


@pytest.mark.parametrize("args", [(), ("--backend", "candle", "--synced")])
async def test_verify_takes_a_backend_or_the_synced_revision(cutover: Run, args: tuple[str, ...]) -> None:
    result = await cutover("verify", *args)
    assert result.code == 2 and "invalid arguments" in result.outcome and "--backend" in result.outcome and \
        "--synced" in result.outcome, result.outcome


def _application(name: str, *, sync: str, health: str, operation: str | None = None,
                 hooks: tuple[tuple[str, str, str], ...] = (), revision: str = "a" * 40) -> dict[str, object]:
    app = sim_argocd.application(revision=revision)
    app["metadata"]["name"] = name
    app["status"] = {"sync": {"status": sync, "revision": revision}, "health": {"status": health}}
    if operation is not None:
        app["status"]["operationState"] = {
            "phase": operation, "startedAt": "2026-12-07T05:00:00Z", "operation": {"sync": {"revision": revision}},
            "syncResult": {"revision": revision, "resources": [
                {"group": "batch", "version": "v1", "kind": "Job", "namespace": "cutover", "name": hook,
                 "hookType": kind, "hookPhase": phase, "message": message, "status": "Synced", "syncPhase": kind}
                for hook, kind, phase, message in ((hook, "PreSync" if "presync" in hook else "Sync", phase, message)
                                                   for hook, phase, message in hooks)]}}
    contracts.check_application(app)
    return app


async def test_status_over_the_fleet_reads_each_clusters_step_and_what_its_hooks_said(cutover: Run,
                                                                                      world: World) -> None:
    """`cutover status --fleet`, on the cluster ArgoCD runs in: the canary switched and verified, the next cluster's
    gate refused (its step stalled there), the last one waiting; a line each, in step order, with no plan needed."""
    canary, east, west = (f"reasoning-long-gpu-{name}" for name in ("canary", "east", "west"))
    revision = "b" * 40
    appset = {"apiVersion": "argoproj.io/v1alpha1", "kind": "ApplicationSet",
              "metadata": {"name": "reasoning-long", "namespace": "argocd"},
              "spec": {"generators": [{"list": {"elements": []}}], "template": {
                  "metadata": {"name": "x"}, "spec": {"project": "llm-fleet", "destination": {}}}},
              "status": {"applicationStatus": [
                  {"application": west, "step": "2", "status": "Waiting", "message": "waiting for step 1",
                   "targetRevisions": [revision]},
                  {"application": east, "step": "2", "status": "Progressing", "message": "application resource "
                   "became Progressing", "targetRevisions": [revision]},
                  {"application": canary, "step": "1", "status": "Healthy", "message": "Application resource "
                   "completed a sync successfully", "targetRevisions": [revision]}]}}
    assert not list(contracts.crd_validator("applicationset").iter_errors(appset))
    world.kube.apply("argoproj.io/v1alpha1/applicationsets", appset)
    world.kube.apply(sim_argocd.APPS, _application(canary, sync="Synced", health="Healthy", operation="Succeeded",
                                                   revision=revision, hooks=(
        ("cutover-presync-fleet", "Succeeded", "cutover presync: OK — bbbbbbb switches the Service to candle"),
        ("cutover-verify-fleet", "Succeeded", "cutover verify: OK — verified: the Service selects candle"))))
    world.kube.apply(sim_argocd.APPS, _application(east, sync="OutOfSync", health="Healthy", operation="Failed",
                                                   revision=revision, hooks=(
        ("cutover-presync-fleet", "Failed", "cutover presync: FAILED (exit 3, cause unschedulable)"),)))
    world.kube.apply(sim_argocd.APPS, _application(west, sync="OutOfSync", health="Healthy"))
    result = await cutover("status", "--fleet", "argocd/reasoning-long")
    json_result = await cutover("status", "--fleet", "reasoning-long", "--output", "json")
    assert result.code == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert lines[0] == "fleet reasoning-long: 1 of 3 cluster(s) Healthy and Synced"
    assert lines[1].startswith(f"  {canary}: step 1 Healthy bbbbbbbbbbbb (Synced, Healthy; last sync Succeeded) — "
                               "cutover-presync-fleet Succeeded: cutover presync: OK")
    assert f"  {east}: step 2 Progressing bbbbbbbbbbbb (OutOfSync, Healthy; last sync Failed) — " \
           "cutover-presync-fleet Failed: cutover presync: FAILED (exit 3, cause unschedulable)" in lines[2]
    assert lines[3].startswith(f"  {west}: step 2 Waiting bbbbbbbbbbbb (OutOfSync, Healthy)")
    document = json.loads(json_result.stdout)
    assert [cluster["application"] for cluster in document["clusters"]] == [canary, east, west]
    missing = await cutover("status", "--fleet", "argocd/nobody")
    assert missing.code == 2 and "--fleet: expected an ApplicationSet argocd/nobody, found none" in missing.outcome
    crafted = await cutover("status", "--fleet", "argocd/../../api/v1/namespaces/cutover/secrets/x")
    assert crafted.code == 2 and "--fleet: expected [NAMESPACE/]APPLICATIONSET" in crafted.outcome
