"""`cutover audit`, for syncs that run no hook (argo-cd#22795, #25475; docs/sources.md): a switch ArgoCD applied that no
PostSync verified is verified by the next audit (and rolled back when it does not check out); a live backend
that stops proving its names is an alert (exit 6, an Event), and so is a cutover commit whose sync failed (exit 7);
otherwise it exits 0 and commits nothing."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from cutover import plan
from cutover.core.results import Advanced, Audited
from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import NAMESPACE, World
from cutover.errors import SyncTimeout, VerificationFailed
from cutover.flows import phases
from cutover.flows.context import Run
from cutover.githost.github import GitHub
from cutover.kube import cluster, lease
from helpers import named

pytestmark = pytest.mark.looptime

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
LEASES = "coordination.k8s.io/v1/leases"


def cutover_commits(repo: BareRepo) -> list[str]:
    return [entry.message.split("\n", 1)[0] for entry in repo.log(PATH) if entry.message.startswith("cutover(")]


def verified_mark(world: World) -> str | None:
    stored = world.kube.stored(LEASES, NAMESPACE, "cutover-reasoning-long-predictor") or {}
    return (stored.get("metadata", {}).get("annotations") or {}).get(lease.VERIFIED)


async def audit(kube: cluster.Cluster, the_plan: plan.Plan, host: GitHub, n: int = 1) -> Audited:
    return await phases.audit(Run.create(kube, the_plan, host, identity=f"cutover-audit-{n}"))


@pytest.mark.parametrize("always", [False, True], ids=["refresh-true", "refresh-always"])
async def test_a_switch_applied_without_hooks_is_verified_by_the_next_audit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]], always: bool) -> None:
    world.add_pod("vllm", ready=True)
    candle = world.add_pod("candle", ready=True)
    the_plan = make_plan()
    assert the_plan.argocd is not None
    the_plan = dataclasses.replace(the_plan, argocd=dataclasses.replace(the_plan.argocd, refresh_always=always))
    sim_argocd.seed_application(world)
    committed = await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))
    assert isinstance(committed, Advanced) and committed.committed
    sim_argocd.apply_git(world, repo, PATH)  # a selective self-heal sync: applied, and no PostSync hook runs
    first = await audit(kube, the_plan, host)
    assert (first.state, first.backend, first.commit) == ("verified", "candle", committed.sha)
    (unverified,) = named(events, "audit.unverified")
    assert named(events, "service.verified")
    # the hint names what a person can change: with `always`, the fixed self-heal delay ArgoCD may lack
    assert ("argocd-cmd-params-cm" in unverified["hint"]) is always and "argo-cd#22795" in unverified["hint"]
    assert verified_mark(world) == committed.sha
    again = await audit(kube, the_plan, host, 2)  # five minutes later: verified already, the names still answer
    assert (again.state, again.backend) == ("checked", "candle")
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]  # no second commit
    assert candle.engine.requests  # checked on the pods themselves


async def test_a_postsync_that_verified_leaves_nothing_for_the_audit_to_verify(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sim_argocd.seed_application(world)
    await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))
    sim_argocd.apply_git(world, repo, PATH)
    await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-2"))  # the hook did run
    assert (await audit(kube, the_plan, host)).state == "checked"


async def test_a_live_backend_that_stops_proving_its_names_is_an_alert(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    vllm = world.add_pod("vllm", ready=True)
    the_plan = make_plan()
    vllm.engine.served_names = ("reasoning",)  # someone dropped --served-model-name reasoning-long
    with pytest.raises(VerificationFailed) as caught:
        await audit(kube, the_plan, host)
    assert (caught.value.cause, caught.value.exit_code) == ("live_backend_unproven", 6)
    assert "'reasoning-long' is not in /v1/models" in caught.value.message
    (event,) = [e for e in world.kube.objects("/v1/events", NAMESPACE) if e["reason"] == "CutoverLiveBackendUnproven"]
    assert event["type"] == "Warning"
    assert cutover_commits(repo) == []  # an alert only


async def test_a_switch_that_does_not_check_out_is_rolled_back_by_the_audit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sim_argocd.seed_application(world)
    await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))
    sim_argocd.apply_git(world, repo, PATH, endpoints=False)  # the EndpointSlices never follow
    with pytest.raises(VerificationFailed) as caught:
        await audit(kube, the_plan, host)
    assert caught.value.cause == "verification_failed_rolled_back" and caught.value.exit_code == 6
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): candle -> vllm",
                                     "cutover(reasoning-long-predictor): vllm -> candle"]
    assert "Cutover-Hold: vllm" in repo.log(PATH)[0].message


async def test_nothing_to_audit_while_argocd_has_yet_to_apply_git(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any, tmp_path: Path) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sim_argocd.seed_application(world)
    await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))  # not applied yet
    found = await audit(kube, the_plan, host)
    assert (found.state, found.detail) == ("skipped", "ArgoCD has yet to apply candle (the Service selects vllm)")
    assert len(cutover_commits(repo)) == 1


async def test_a_cutover_commit_whose_sync_failed_is_an_alert_until_a_sync_applies_it(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any) -> None:
    """ArgoCD's automated sync does not try a revision it failed again: the tier saw a sync of cutover's commit end
    Error (a health check's Lua timed out under load) and the handoff wait, the audit saying "yet to apply" every 5
    minutes. Now it is an alert (exit 7, an Event) naming ArgoCD's message, each run until a sync applies it."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    the_plan = make_plan()
    sim_argocd.seed_application(world)
    committed = await phases.postsync(Run.create(kube, the_plan, host, identity="cutover-postsync-1"))
    assert isinstance(committed, Advanced) and committed.committed
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {"operationState": sim_argocd.operation_state(
        world, "Running", committed.sha, finished=False)}})
    assert (await audit(kube, the_plan, host)).state == "skipped"  # while it syncs, ArgoCD's to finish
    message = "ComparisonError: error setting app health: failed to get resource health for \"CronJob\""
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {"operationState": sim_argocd.operation_state(
        world, "Error", committed.sha, message=message)}})
    for n in (2, 3):  # each run says it again: nothing else would
        with pytest.raises(SyncTimeout) as caught:
            await audit(kube, the_plan, host, n)
        assert (caught.value.cause, caught.value.exit_code) == ("argocd_sync_failed", 7)
        assert caught.value.message == f"ArgoCD's sync of {committed.sha[:12]} ended Error: {message}; ArgoCD does " \
                                       f"not sync a revision it failed again by itself"
        assert f"sync llm-serving again: the cutover goes on from {committed.sha[:12]}" in caught.value.hint
        assert "to stay on vllm, set the plan's target to vllm" in caught.value.hint
    alerts = [e for e in world.kube.objects("/v1/events", NAMESPACE) if e["reason"] == "CutoverSyncFailed"]
    assert alerts and all(e["type"] == "Warning" for e in alerts)
    assert len(cutover_commits(repo)) == 1  # an alert only
    sim_argocd.apply_git(world, repo, PATH)  # a person's sync applies it: the audit verifies as ever
    assert (await audit(kube, the_plan, host, 4)).state == "verified"


async def test_the_audit_command_line_exits_0_then_6_and_the_cronjobs_0(world: World, repo: BareRepo,
                                                                        tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """`cutover audit`: exit 0 and an OK outcome while the live backend serves; exit 6 with the cause on the last
    line once it does not. The CronJob's `--exit-zero` says the same and ends 0 (its failed Job would make ArgoCD
    count the CronJob Degraded and fail the Application's syncs)."""
    import contextlib
    import io

    import structlog

    from conftest import GIT_TOKEN
    from cutover.cli import main
    from cutover.demo.contents import FakeContentsHost

    vllm = world.add_pod("vllm", ready=True)
    await world.settled()
    async with FakeContentsHost(repo, token=GIT_TOKEN) as fake:
        (tmp_path / "plan.yaml").write_text(world.plan_text(git_api_url=fake.url))
        for name, value in {"CUTOVER_PLAN": str(tmp_path / "plan.yaml"), "CUTOVER_GIT_TOKEN": GIT_TOKEN,
                            "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig")), "HOSTNAME": "audit-1",
                            "CUTOVER_TERMINATION_LOG": str(tmp_path / "termination-log")}.items():
            monkeypatch.setenv(name, value)
        outcomes, logged = [], []

        def seen(logger: Any, method: str, entry: dict[str, Any]) -> dict[str, Any]:
            logged.append(dict(entry))
            return entry

        for extra in ([], [], ["--exit-zero"]):
            with contextlib.redirect_stdout(io.StringIO()) as out:
                code = await main.arun(["--log-format", "json", "audit", *extra], observers=[seen])
            structlog.reset_defaults()
            outcomes.append((code, out.getvalue().strip().splitlines()[-1]))
            vllm.engine.served_names = ("reasoning",)  # then a served name goes missing
    assert outcomes[0] == (0, "cutover audit: OK — the live backend vllm still serves every name")
    assert outcomes[1][0] == 6 and "cause live_backend_unproven" in outcomes[1][1]
    assert outcomes[2] == (0, outcomes[1][1])  # the same alert, as the CronJob runs it
    assert [entry["exit"] for entry in named(logged, "audit.exit_zero")] == [6]
    assert (tmp_path / "termination-log").read_text() == outcomes[2][1]
    assert cutover_commits(repo) == []


async def test_a_target_no_sync_will_take_is_said_by_the_audit(
        world: World, kube: cluster.Cluster, host: GitHub, repo: BareRepo, make_plan: Any,
        events: list[dict[str, Any]]) -> None:
    """The sync of the plan's new target failed before cutover's PostSync ran (a team's hook in an earlier wave),
    and the team's fix changed that hook alone: the Application is Synced, ArgoCD starts no sync, and no PostSync
    takes the cutover. The audit checks the live backend as ever, and says what is left and how to go on."""
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    sim_argocd.seed_application(world)
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {
        "sync": {"status": "Synced", "revision": repo.head()},
        "operationState": sim_argocd.operation_state(world, "Failed", repo.head() or "", message="hook failed")}})
    done = await audit(kube, make_plan(), host)
    assert (done.state, done.backend) == ("checked", "vllm")
    (left,) = named(events, "audit.target_left")
    assert left["level"] == "warning" and "the plan's target is candle, the Service selects vllm" in left["reason"]
    assert "cutover-run-llm-serving" in left["hint"]
    world.kube.merge(sim_argocd.APPS, "argocd", "llm-serving", {"status": {"sync": {"status": "OutOfSync"}}})
    events.clear()  # a sync is coming (OutOfSync): nothing to say
    await audit(kube, make_plan(), host, 2)
    assert not named(events, "audit.target_left")
