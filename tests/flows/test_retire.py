"""handoff.retire (docs/capacity.md) over the emulated cluster, the engine doubles and a GitHub double over a real bare
repository, in fake time: after a verified switch the backend it left stays up for `after` (a rollback stays
instant), then the next cutover run after that (here the audit CronJob; a PostSync alike) drains and frees it by a
commit, once; a rollback after retirement restores it first and waits for it."""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from cutover import plan
from cutover.core import milestones
from cutover.core.clock import Clock
from cutover.core.trailers import Trailers
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.flows import commands, explicit, phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster, lease
from helpers import named, told
from one_gpu import ENGINES, ENGINES_FILE, PATH, WORKLOADS, engines_follow_git

pytestmark = pytest.mark.looptime


@pytest.fixture
async def both(world: World, repo: BareRepo) -> None:
    """Room for both: vLLM serves, candle runs beside it (parallel, make-before-break)."""
    sim_argocd.seed_application(world)
    repo.commit({ENGINES: ENGINES_FILE.replace("replicas: 0", "replicas: 1")}, "Add the engines, both running\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()


def retire_plan(make_plan: Any, after: str) -> plan.Plan:
    built: plan.Plan = make_plan(workloads=WORKLOADS, handoff=f"{{retire: {{after: {after}}}, drainTimeout: 1m}}")
    return built


def steps(repo: BareRepo) -> list[tuple[str | None, str | None]]:
    return [(t.step, t.backend) for t in (Trailers.parse(entry.message) for entry in repo.log(ENGINES))
            if t.is_cutover]


async def switched(world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, the_plan: plan.Plan) -> Any:
    await phases.postsync(Run.create(kube, the_plan, host, identity="job-1"))
    sim_argocd.apply_git(world, repo, PATH)
    return told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-2")), the_plan)


async def test_the_source_is_retired_once_after_the_switch_by_the_next_run_after_it(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, both: None,
        events: list[dict[str, Any]]) -> None:
    the_plan = retire_plan(make_plan, "1h")
    verified = await switched(world, kube, host, repo, the_plan)
    assert verified.data["verified"] is True and "retired" not in verified.data  # an hour to roll back instantly
    notes = await lease.notes(kube, namespace="llm-serving", service="reasoning-long-predictor")
    switch = datetime.fromisoformat(repo.log(PATH)[0].date)
    assert datetime.fromisoformat(notes[lease.RETIRE_AT]) == switch + timedelta(hours=1)  # the switch's date in Git

    shown = told(await commands.show_plan(kube, the_plan, host=host), the_plan)
    assert shown.data["handoff"]["retire"] == {"backend": "vllm", "at": notes[lease.RETIRE_AT]}
    await asyncio.sleep(30 * 60)
    early = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-1")), the_plan)
    assert early.data["audit"] == "checked" and "retired" not in early.data and steps(repo) == []
    await asyncio.sleep(31 * 60)
    retired = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-2")), the_plan)
    assert retired.data["retired"]["backend"] == "vllm" and retired.data["retired"]["drain"]["by"] == "metrics"
    assert "vllm retired (drained and freed in" in retired.summary
    assert steps(repo) == [("free", "vllm")]
    text, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert text == ENGINES_FILE.replace("replicas: 1  # vLLM", "replicas: 0  # vLLM").replace(
        "replicas: 0\n  template", "replicas: 1\n  template")  # only vLLM's field changed
    (said,) = named(events, milestones.RETIRED)
    assert said["backend"] == "vllm" and said["after"] == 3600
    again = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-3")), the_plan)
    assert "retired" not in again.data and steps(repo) == [("free", "vllm")]  # once
    reasons = [event["reason"] for event in world.kube.objects("/v1/events", "llm-serving")]
    assert reasons.count("CutoverRetired") == 1


async def test_a_later_postsync_retires_as_the_audit_does(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, both: None) -> None:
    the_plan = retire_plan(make_plan, "1m")
    await switched(world, kube, host, repo, the_plan)
    await asyncio.sleep(61)
    later = told(await phases.postsync(Run.create(kube, the_plan, host, identity="job-3")), the_plan)
    assert later.data["verified"] is True and later.data["retired"]["backend"] == "vllm"
    assert steps(repo) == [("free", "vllm")]


async def test_a_rollback_after_retirement_restores_the_source_and_waits_for_it(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, both: None) -> None:
    the_plan = retire_plan(make_plan, "1m")
    await switched(world, kube, host, repo, the_plan)
    await asyncio.sleep(61)
    await phases.audit(Run.create(kube, the_plan, host, identity="audit-1"))
    assert steps(repo) == [("free", "vllm")]
    async with engines_follow_git(world, repo, gpu=False):  # room for both
        back = told(await explicit.rollback(Run.create(kube, the_plan, host, identity="job-rollback")), the_plan)
    assert back.data["to"] == "vllm" and back.data["verified"] is True
    assert steps(repo) == [("restore", "vllm"), ("free", "vllm")]  # newest first
    text, _ = repo.read(ENGINES)  # type: ignore[misc]
    assert text == ENGINES_FILE.replace("replicas: 0", "replicas: 1")  # vLLM exactly as it was
    last = Trailers.parse(repo.log(PATH)[0].message)
    assert (last.to, last.hold) == ("vllm", "vllm")


async def test_a_retirement_that_fails_leaves_the_verified_switch_standing_and_is_tried_again(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, both: None,
        events: list[dict[str, Any]]) -> None:
    """Another cutover holds the Service's Lease when the retirement is due: the audit still reports the live
    backend checked, warns `handoff.retire_failed` (the switch stands verified), and a later run retires."""
    the_plan = retire_plan(make_plan, "1m")
    await switched(world, kube, host, repo, the_plan)
    await asyncio.sleep(61)
    async with lease.hold(kube, namespace="llm-serving", service="reasoning-long-predictor", me="job-other",
                          now=Clock().now):
        checked = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-1")), the_plan)
    assert checked.data["audit"] == "checked" and "retired" not in checked.data and steps(repo) == []
    (failed,) = named(events, "handoff.retire_failed")
    assert failed["backend"] == "vllm" and failed["cause"] == "lock_held" and "the next cutover run" in failed["hint"]
    again = told(await phases.audit(Run.create(kube, the_plan, host, identity="audit-2")), the_plan)
    assert again.data["retired"]["backend"] == "vllm"
