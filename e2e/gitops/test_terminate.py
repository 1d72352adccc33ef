"""A Terminate through the real argocd-server on ArgoCD 3.5, whose controller deletes the running hook Jobs (from
3.4 on: argo-cd PR #25916, gitops-engine's sync_context.go): the PostSync's pod gets SIGTERM in the middle of
whatever it does.

- during the PostSync's wait (the target answers 503, cutover retries its names): nothing committed, the Lease
  given back, exit 143 said; a person's next sync runs the PostSync again, which waits, proves and commits once;
- right after the PostSync's commit: the commit stands, once; ArgoCD's next sync of it (a new revision) applies it
  with both hooks, and the switch is verified;
- an application-controller `--sync-timeout` shorter than the wait, which `cutover plan` names beforehand: ArgoCD
  ends the sync the same way (controller/appcontroller.go: "operation is terminating due to timeout"), nothing is
  committed, and since auto-sync does not try a failed revision again, a person's sync resumes once the timeout is
  raised;
- an apply failing in cutover's PostSync wave (a team's own hook the apiserver refuses, which ArgoCD's client-side
  dry run let through): SyncFail starts at once, beside cutover's PostSync (gitops-engine: "one or more objects
  failed to apply" while hooks run); it reports once per failed sync and rolls back nothing, since the revision
  that failed kept the Service's selector, even when the PostSync's switch lands in Git before SyncFail looks; in
  an earlier wave (a smoke test's default, 0), the sync fails before cutover's PostSync starts: nothing is
  committed;
- kube-proxy stopped on the node (a crash-looping one): ArgoCD applies the switch and the EndpointSlices follow, but
  the ClusterIP's rules still lead to the old engine, which serves the same names; the PostSync's check through the
  Service asks who answers, fails with the old engine named once kube-proxy's window has passed, and rollback.auto
  brings Git back;
- the hooks rendered without a delete policy (3.3+: BeforeHookCreation): each sync makes its hook Jobs anew;
- the engines committed in two sync waves, the target's progress deadline shorter than its startup: `cutover plan`,
  run as a pod from the workload's CronJob, refuses a recreate over them (exit 2) and names the deadline, before
  anything is committed."""

from __future__ import annotations

import json
import re
import time

import pytest

from conftest import MEASURED
from cutover import plan
from cutover.core import deadline
from tier import gitops

CANDLE, VLLM = gitops.CANDLE, gitops.VLLM
DEPLOYMENT = {"vllm": "llm-reasoning", "candle": "llm-reasoning-candle"}
POSTSYNC = "cutover-postsync-llm-serving"
SYNCFAIL = "cutover-syncfail-llm-serving"
# A team's own PostSync hook in cutover's wave (1000, hooks/postsync-job.yaml), which the apiserver refuses (a
# ConfigMap key holds no space) while ArgoCD's dry run, always client-side (gitops-engine sync_context.go,
# applyObject), lets it through. BROKEN_EARLIER: the same at wave 0, where a team's smoke test sits by default.
def team_hook(name: str, phase: str, wave: int | None, data: str) -> str:
    """A team's own hook as a ConfigMap in the workload's file: ArgoCD creates it when its phase and wave run."""
    at = f'    argocd.argoproj.io/sync-wave: "{wave}"\n' if wave is not None else ""
    return (f"---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {name}\n  namespace: llm-serving\n"
            f"  annotations:\n    argocd.argoproj.io/hook: {phase}\n"
            f"    argocd.argoproj.io/hook-delete-policy: BeforeHookCreation\n{at}data:\n  {data}\n")


BROKEN_HOOK = team_hook("smoke-test-results", "PostSync", 1000, "last run: never")
BROKEN_EARLIER = BROKEN_HOOK.replace('    argocd.argoproj.io/sync-wave: "1000"\n', "")


@pytest.fixture(scope="module", autouse=True)
def both_engines(argo: gitops.GitOpsTier) -> None:
    """Both engines deployed, as the story leaves them: when the module runs without the story (CI runs it in a shard
    of its own), the engines the story's first commit adds are committed first, the target unchanged."""
    found = argo.git.repo.read(gitops.ENGINES)
    if found is not None and "name: llm-reasoning-candle" in found[0]:
        return
    files = argo.story_files(serving(argo))
    added = argo.commit(files, "Add candle-vllm beside vLLM, reasoning-long unchanged\n")
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=added, timeout=300)


def serving(argo: gitops.GitOpsTier) -> str:
    return "candle" if argo.service().spec.selector == CANDLE else "vllm"


def plan_for(target: str) -> str:
    plan = gitops.with_target((gitops.cluster.ROOT / gitops.PLAN).read_text(), target).replace(
        "        compare: true\n", "        compare: false\n")  # vLLM's shorter context is not the point here
    assert "compare: false" in plan
    return plan


def postsync_logs(argo: gitops.GitOpsTier, since: float) -> dict[str, str]:
    """The log of each PostSync pod started since `since`, by pod name (the shim keeps them after the pods)."""
    return argo.hook_logs(since, POSTSYNC)


def test_a_terminate_during_the_postsync_wait_commits_nothing_and_the_next_sync_resumes(
        argo: gitops.GitOpsTier) -> None:
    target = "vllm" if serving(argo) == "candle" else "candle"
    argo.engines.fault(DEPLOYMENT[target], "503")  # every name 503: cutover retries while its budget lasts
    known, since = set(argo.git.cutover_commits()), time.time()
    try:
        person = argo.commit({gitops.PLAN: plan_for(target)}, f"Hand reasoning-long to {target}\n")
        argo.wait("the PostSync retrying the target's names", lambda: '"names.retry"' in argo.job_log(POSTSYNC),
                  timeout=180)
        asked = time.monotonic()
        argo.argocd.terminate("llm-serving")
        state = argo.wait_operation("llm-serving", person)
        ended = argo.wait("the PostSync's pod to end", lambda: next(
            (log for log in postsync_logs(argo, since).values() if "terminated, nothing half-done" in log), None),
            timeout=60)
        took = time.monotonic() - asked
    finally:
        argo.engines.fault(DEPLOYMENT[target], None)
    assert state["phase"] in ("Failed", "Error"), state
    assert '"names.retry"' in ended and '"git.committed"' not in ended
    assert set(argo.git.cutover_commits()) == known  # nothing committed
    assert not argo.lease_holder()  # the Lease given back: the next run takes it at once
    assert argo.service().spec.selector == (CANDLE if target == "vllm" else VLLM)

    argo.sync("llm-serving", person)  # a person's next sync of the same revision
    switch = argo.wait("the resumed PostSync's commit", lambda: next(
        (sha for sha in argo.git.cutover_commits()[:1] if sha not in known), None), timeout=180)
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=180)
    assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
    assert [sha for sha in argo.git.cutover_commits() if sha not in known] == [switch]  # once
    MEASURED.append(f"Terminate during the PostSync's wait: its pod ended (exit 143, the Lease given back) "
                    f"{took:.1f} s after the Terminate was asked; nothing committed; the next sync committed once")


def test_a_terminate_right_after_the_commit_leaves_one_commit_that_the_next_sync_applies(
        argo: gitops.GitOpsTier) -> None:
    target = "vllm" if serving(argo) == "candle" else "candle"
    known = set(argo.git.cutover_commits())
    person = argo.commit({gitops.PLAN: plan_for(target)}, f"Hand reasoning-long to {target}\n")
    switch = argo.wait("cutover's commit", lambda: next(
        (sha for sha in argo.git.cutover_commits()[:1] if sha not in known), None), timeout=180, every=0.1)
    landed = argo.argocd.terminate("llm-serving")  # on a loaded machine the sync may have ended already
    state = argo.wait_operation("llm-serving", person)
    app = argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=240)
    assert app["status"]["operationState"]["phase"] == "Succeeded"
    hooks = {r["name"] for r in app["status"]["operationState"]["syncResult"]["resources"] if r.get("hookType")}
    assert {"cutover-presync-llm-serving", POSTSYNC} <= hooks  # the switch gated and verified, not a bare apply
    assert [sha for sha in argo.git.cutover_commits() if sha not in known] == [switch]  # once
    assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
    when = "landed" if landed else "too late: the sync had ended"
    MEASURED.append(f"Terminate right after the PostSync's commit ({when}): that sync ended {state['phase']}; "
                    f"the commit stood alone and the next sync applied it with both hooks")


def test_a_sync_timeout_shorter_than_the_wait_commits_nothing_and_cutover_plan_named_it(
        argo: gitops.GitOpsTier) -> None:
    target = "vllm" if serving(argo) == "candle" else "candle"
    text = plan_for(target)
    (read,) = plan.parse(text)
    # seconds from the sync's start: past the PreSync (about 7 s here), inside the PostSync's retries of the target's
    # names (about 25 s); on a loaded machine it may cut the PreSync instead, the same ending
    short = 20
    assert deadline.sync_timeout(read) > short, deadline.sync_timeout_note(read)  # `cutover plan` said so
    argo.engines.fault(DEPLOYMENT[target], "503")
    known, since = set(argo.git.cutover_commits()), time.time()
    try:
        with argo.argocd.sync_timeout(short):
            person = argo.commit({gitops.PLAN: text}, f"Hand reasoning-long to {target}\n")
            state = argo.wait_operation("llm-serving", person, timeout=short + 120)
            logs = argo.wait("every hook's pod to end", lambda: (found := argo.hook_logs(since)) and all(
                "\ncutover " in log for log in found.values()) and found, timeout=60)
    finally:
        argo.engines.fault(DEPLOYMENT[target], None)
    assert state["phase"] in ("Failed", "Error") and "terminated" in state.get("message", "").lower(), state
    cut = [name.split("_")[1].rsplit("-", 1)[0] for name, log in logs.items()
           if "terminated, nothing half-done" in log]
    assert not any('"git.committed"' in log for log in logs.values())
    assert set(argo.git.cutover_commits()) == known  # nothing committed
    assert not argo.lease_holder()
    assert argo.service().spec.selector == (CANDLE if target == "vllm" else VLLM)

    argo.sync("llm-serving", person)  # the timeout raised (here: none, the default), a person syncs again
    switch = argo.wait("the resumed PostSync's commit", lambda: next(
        (sha for sha in argo.git.cutover_commits()[:1] if sha not in known), None), timeout=180)
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=180)
    assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
    assert [sha for sha in argo.git.cutover_commits() if sha not in known] == [switch]
    MEASURED.append(f"--sync-timeout {short}s against a plan needing {deadline.sync_timeout(read):g}s: the sync "
                    f"ended {state['phase']} ({state.get('message', '')}), the hook pod cut: "
                    f"{', '.join(cut) or 'none (between hooks)'} (exit 143), nothing committed; a person's sync "
                    f"afterwards committed once")


def test_an_apply_failing_beside_the_postsync_starts_syncfail_which_rolls_back_nothing_it_never_tried(
        argo: gitops.GitOpsTier) -> None:
    target = "vllm" if serving(argo) == "candle" else "candle"
    leaving = serving(argo)
    engines = argo.git.repo.read(gitops.ENGINES)
    assert engines is not None
    known, since = set(argo.git.cutover_commits()), time.time()
    person = argo.commit({gitops.PLAN: plan_for(target), gitops.ENGINES: engines[0] + BROKEN_HOOK},
                         f"Hand reasoning-long to {target}, and keep the smoke test's results\n")

    def reports(revision: str) -> list[str]:
        """SyncFail's report of the sync of `revision` (on a loaded machine the next sync's may be there already)."""
        return [line for log in argo.hook_logs(since, SYNCFAIL).values() for line in log.splitlines()
                if '"cutover.failed"' in line and f"sync of {revision[:12]} failed" in line]

    try:
        state = argo.wait_operation("llm-serving", person, timeout=240)
        assert state["phase"] == "Failed", state
        results = {r["name"]: r for r in state["syncResult"]["resources"]}
        assert results["smoke-test-results"]["status"] == "SyncFailed", results["smoke-test-results"]
        assert results[POSTSYNC]["hookPhase"] == "Succeeded" and results[SYNCFAIL]["hookPhase"] == "Succeeded"
        switch = argo.wait("the PostSync's commit", lambda: next(
            (sha for sha in argo.git.cutover_commits()[:1] if sha not in known), None), timeout=60)
        (report,) = reports(person)
        assert f'"serving": "{leaving}"' in report and f'"tried": "{leaving}"' in report, report
        first = "before" if f'"git": "{leaving}"' in report else "after"  # the PostSync's commit, as SyncFail read Git

        # ArgoCD syncs cutover's commit next (a new revision): the switch is applied in the Sync phase, and the broken
        # hook fails that sync's PostSync wave again: SyncFail reports again and, the Service on what that revision
        # holds, rolls back nothing
        again = argo.wait_operation("llm-serving", switch, timeout=240)
        assert again["phase"] == "Failed", again
        assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
        assert [sha for sha in argo.git.cutover_commits() if sha not in known] == [switch]  # no rollback commit
        assert len(reports(switch)) == 1  # one report per failed sync
    finally:  # whatever happened, the team fixes its hook: every later sync would fail on it
        fixed = argo.commit({gitops.ENGINES: engines[0]}, "Drop the smoke test's results\n")
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=fixed, timeout=240)
    assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
    MEASURED.append(f"an apply failing beside the PostSync: SyncFail ran beside it ({first} its switch reached Git), "
                    f"one report per failed sync, nothing rolled back; the operation's message: "
                    f"{state.get('message', '')!r}")


def test_a_team_postsync_hook_failing_before_cutovers_leaves_nothing_committed(argo: gitops.GitOpsTier) -> None:
    """cutover's PostSync runs at wave 1000, after a team's own PostSync hooks (wave 0 by default): one that fails
    fails the sync before cutover's PostSync starts, so no switch is committed while a smoke test fails. SyncFail
    reports and rolls back nothing. The team's fix changes a hook alone, which leaves the Application Synced (hooks
    are no managed resource: ArgoCD starts no sync for it), so the person syncs once more, and that sync's PostSync
    commits the switch."""
    target = "vllm" if serving(argo) == "candle" else "candle"
    leaving = serving(argo)
    engines = argo.git.repo.read(gitops.ENGINES)
    assert engines is not None
    known = set(argo.git.cutover_commits())
    person = argo.commit({gitops.PLAN: plan_for(target), gitops.ENGINES: engines[0] + BROKEN_EARLIER},
                         f"Hand reasoning-long to {target}, with a smoke test that fails\n")
    try:
        state = argo.wait_operation("llm-serving", person, timeout=240)
        assert state["phase"] == "Failed", state
        ran = {r["name"]: r.get("hookPhase") for r in state["syncResult"]["resources"] if r.get("hookType")}
        assert POSTSYNC not in ran, ran  # never started: its wave comes after the failed one
        assert [sha for sha in argo.git.cutover_commits() if sha not in known] == []
        assert serving(argo) == leaving
    finally:
        fixed = argo.commit({gitops.ENGINES: engines[0]}, "Drop the failing smoke test\n")
    argo.wait_app("llm-serving", synced=True, revision=fixed, timeout=120)
    argo.sync("llm-serving", fixed)  # a person's sync (`argocd app sync`): hooks and all
    switch = argo.wait("the PostSync's commit once the hook is fixed", lambda: next(
        (sha for sha in argo.git.cutover_commits()[:1] if sha not in known), None), timeout=240)
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=240)
    assert serving(argo) == target and fixed
    MEASURED.append("a team's PostSync hook failing at wave 0: the sync failed before cutover's PostSync (wave 1000) "
                    "started, nothing committed; a person's sync once the hook was fixed committed the switch")


# A team's own PreSync hooks where ArgoCD users put them (its DB-migration example sits at wave -1; 0 is the
# default): ConfigMaps, so that each one's creation is the marker that its wave ran.
TEAM_PRESYNC = "".join(team_hook(f"team-presync-wave{wave}", "PreSync", wave, 'ran: "yes"') for wave in (-1, 0))
TEAM_MARKERS = {"team-presync-wave-1", "team-presync-wave0"}


def test_a_teams_presync_hooks_run_after_the_gate_and_not_at_all_when_it_refuses(argo: gitops.GitOpsTier) -> None:
    """cutover's gate ships at PreSync wave -1000: a team's PreSync hooks at -1 and 0 run after it decided. A person's
    commit points the Service at an engine that answers 503: the gate refuses, and neither team hook
    runs in that sync (no marker, none in the operation's result). A sync the gate lets through runs the gate and
    both."""
    leaving = serving(argo)
    target = "vllm" if leaving == "candle" else "candle"
    engines = argo.git.repo.read(gitops.ENGINES)
    assert engines is not None
    argo.engines.fault(DEPLOYMENT[target], "503")  # what the real vLLM (vllm's pods) and the double both do
    try:
        person = argo.commit({gitops.SERVICE: argo.service_file(CANDLE if target == "candle" else VLLM),
                              gitops.ENGINES: engines[0] + TEAM_PRESYNC},
                             f"Point reasoning-long at {target} by hand, with the team's PreSync hooks\n")
        state = argo.wait_operation("llm-serving", person, timeout=240)
        markers = {cm.metadata.name for cm in argo.core.list_namespaced_config_map("llm-serving").items} & TEAM_MARKERS
    finally:
        argo.engines.fault(DEPLOYMENT[target], None)
    ran = {r["name"]: r.get("hookPhase") for r in state["syncResult"]["resources"] if r.get("hookType")}
    assert state["phase"] == "Failed" and ran.get("cutover-presync-llm-serving") == "Failed", (state, ran)
    assert not set(ran) & TEAM_MARKERS, ran  # never started: their waves come after the refused gate
    assert markers == set(), markers  # and so never wrote their marker
    # SyncFail's commit back (rollback.auto) leaves the Application Synced without a sync: its Service is as Git
    # has it again and hooks are no managed resource. A person's sync of it, which the gate lets through, runs
    # the gate first and both team hooks after it.
    back = argo.git.cutover_commits()[0]
    argo.wait_app("llm-serving", synced=True, revision=back, timeout=240)
    argo.sync("llm-serving", back)
    after = argo.wait_operation("llm-serving", back, timeout=240)
    hooks = {r["name"]: r.get("hookPhase") for r in after["syncResult"]["resources"] if r.get("hookType")}
    assert after["phase"] == "Succeeded" and set(hooks) >= {*TEAM_MARKERS, "cutover-presync-llm-serving"}, hooks
    assert serving(argo) == leaving
    dropped = argo.commit({gitops.ENGINES: engines[0]}, "Drop the team's PreSync hooks\n")
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=dropped, timeout=240)
    MEASURED.append(f"a team's PreSync hooks at waves -1 and 0: the gate (wave -1000) refused the person's commit and "
                    f"neither ran (markers right after: {sorted(markers) or 'none'}); a person's sync the gate let "
                    "through ran the gate and both")


def recreate_over(target: str, name: str) -> str:
    """The plan ConfigMap `name` in cutover's namespace: a recreate to `target` over both engines' Deployments."""
    text = plan_for(target).replace("  name: cutover-plan\n", f"  name: {name}\n", 1)
    for backend, engine in (("vllm", "vllm"), ("candle", "candle-vllm")):
        text = text.replace(f"        engine: {engine}\n", f"        engine: {engine}\n        workload: {{kind: "
                                                          f"Deployment, name: {DEPLOYMENT[backend]}, path: "
                                                          f"{gitops.ENGINES}}}\n", 1)
    assert text.count("workload:") == 2 and f"name: {name}" in text
    return text.rstrip("\n") + "\n    handoff: {strategy: recreate, maxGap: 45m, drainTimeout: 10s}\n"


def test_engines_in_two_waves_and_a_short_progress_deadline_are_refused_by_cutover_plan(
        argo: gitops.GitOpsTier) -> None:
    """Issue 52's proof of the sync order on the real render: a team commits the target's Deployment at sync-wave 1
    (after the engine serving now, at 0) with a progressDeadlineSeconds of 30, under the startup the plan waits for
    (its startup probe's budget, bounded by verify.maxWait: the tier's 60 s; in production the default 600 s under
    a 30-minute probe). Under recreate the swap would deadlock (ArgoCD waits for the earlier wave's engine to be
    Healthy, which waits for the card the later wave's still holds), and the target's sync would fail at its
    deadline: `cutover plan`, from the workload's CronJob as a person runs it, reads the branch head through the Git
    host (the Service's file and the engines' the workloads name) and refuses (exit 2, `engines_in_two_waves`),
    naming the deadline too. Nothing is committed."""
    leaving = serving(argo)
    target = "vllm" if leaving == "candle" else "candle"
    found = argo.git.repo.read(gitops.ENGINES)
    assert found is not None
    engines = found[0]
    marker = f"  name: {DEPLOYMENT[target]}\n  namespace: llm-serving\n"
    assert marker in engines
    # the wave beside an earlier scenario's annotations, if any; a deadline under the plan's startup wait
    waved, done = re.subn(rf"({re.escape(marker)})(?:  annotations: {{(.*)}}\n)?(spec:\n  replicas: \d+\n)"
                          r"  progressDeadlineSeconds: \d+.*\n",
                          lambda m: f'{m[1]}  annotations: {{argocd.argoproj.io/sync-wave: "1"'
                                    f'{", " + m[2] if m[2] else ""}}}\n{m[3]}  progressDeadlineSeconds: 30\n',
                          engines)
    assert done == 1, engines
    plan_file = argo.dir / "cutover-plan-waves.yaml"
    plan_file.write_text(recreate_over(target, "cutover-plan-waves"))
    argo.kubectl("apply", "-f", str(plan_file))
    try:
        committed = argo.commit({gitops.ENGINES: waved}, f"{DEPLOYMENT[target]} in a wave of its own\n")
        argo.wait_app("llm-serving", synced=True, healthy=True, revision=committed, timeout=240)
        known = set(argo.git.cutover_commits())
        argo.job_from_cronjob("cutover-run-llm-serving", "cutover-plan-waves", ["plan", "--output", "json"],
                              plan="cutover-plan-waves", kept=True)
        result = argo.finished("cutover-plan-waves", timeout=180)
    finally:
        argo.kubectl("delete", "-f", str(plan_file), "--ignore-not-found")
        back = argo.commit({gitops.ENGINES: engines}, f"{DEPLOYMENT[target]} back in the engines' wave\n")
        argo.wait_app("llm-serving", synced=True, healthy=True, revision=back, timeout=240)
    assert not result.succeeded and result.exit_code == 2, result
    lines = result.log.splitlines()  # the report, indented, between the pod's one-line JSON logs
    report = json.loads("\n".join(lines[lines.index("{"):len(lines) - lines[::-1].index("}")]))
    causes = {finding["cause"]: finding for finding in report["syncOrder"]}
    assert {"engines_in_two_waves", "progress_deadline_before_startup"} <= set(causes), report["syncOrder"]
    assert causes["engines_in_two_waves"]["refuse"] and not report["ready"], report
    assert set(argo.git.cutover_commits()) == known  # `cutover plan` commits nothing
    assert serving(argo) == leaving
    MEASURED.append(f"engines in two waves under recreate: cutover plan (a pod from the CronJob) refused, exit 2: "
                    f"{causes['engines_in_two_waves']['message'][:140]}…; and said "
                    f"{causes['progress_deadline_before_startup']['message'][:140]}…")


def test_a_data_path_still_leading_to_the_old_engine_fails_the_verification(argo: gitops.GitOpsTier) -> None:
    leaving = serving(argo)
    target = "vllm" if leaving == "candle" else "candle"
    engine = {"vllm": "vllm", "candle": "candle-vllm"}
    known, since = set(argo.git.cutover_commits()), time.time()
    with argo.plane.stopped("kube-proxy"):  # its iptables rules stay, leading the ClusterIP to the pods it last saw
        argo.commit({gitops.PLAN: plan_for(target)}, f"Hand reasoning-long to {target}\n")
        commits = argo.wait("the switch and the rollback after its failed verification", lambda: (
            new if len(new := [sha for sha in argo.git.cutover_commits() if sha not in known]) >= 2 else None),
            timeout=300)
    rollback, switch = commits[0], commits[1]
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=rollback, timeout=240)
    assert argo.service().spec.selector == (CANDLE if leaving == "candle" else VLLM)
    logs = "\n".join(postsync_logs(argo, since).values())
    said = f"answered by {engine[leaving]} (owned_by in /v1/models), not {engine[target]}"
    assert said in logs and "verification_failed" in logs, logs[-3000:]
    MEASURED.append(f"kube-proxy stopped: the switch {switch[:7]} applied, the ClusterIP still led to {leaving}: "
                    f"the PostSync said '{said}' after the window and rollback.auto committed {rollback[:7]}")

    # kube-proxy back, the person goes to the target again as the hold's hint says: the workload's run Job (setting
    # the target away and back would hold again: the hold reads the last cutover commit)
    argo.kubectl("-n", "cutover", "create", "job", "--from=cronjob/cutover-run-llm-serving", "cutover-run-proxy")
    run = argo.finished("cutover-run-proxy", timeout=300)
    assert run.succeeded, run.log[-3000:]
    again = argo.git.cutover_commits()[0]
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=again, timeout=240)
    assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)


WORKLOAD = "e2e/fixtures/workload/kustomization.yaml"
# A team's patch that drops the delete policy from every hook it copies (docs/sources.md: keep it; from 3.3 ArgoCD
# gives such a hook BeforeHookCreation, gitops-engine's hook/delete_policy.go, argo-cd#25170).
NO_DELETE_POLICY = """  - target: {kind: Job, annotationSelector: argocd.argoproj.io/hook}
    patch: |-
      - op: remove
        path: /metadata/annotations/argocd.argoproj.io~1hook-delete-policy
"""


def test_hooks_without_a_delete_policy_are_made_anew_by_every_sync(argo: gitops.GitOpsTier) -> None:
    """The workload's hooks rendered without `hook-delete-policy`: ArgoCD 3.5 deletes each sync's hook Job before
    making it again, so two switches in a row are each gated by a PreSync and verified by a PostSync of their own."""
    found = argo.git.repo.read(WORKLOAD)
    assert found is not None
    original = found[0]
    made: list[str] = []
    try:
        for round_ in range(2):
            target = "vllm" if serving(argo) == "candle" else "candle"
            known = set(argo.git.cutover_commits())
            files = {gitops.PLAN: plan_for(target)}
            if round_ == 0:
                files[WORKLOAD] = original.rstrip("\n") + "\n" + NO_DELETE_POLICY
            argo.commit(files, f"Hand reasoning-long to {target}" + (", the hooks without a delete policy\n"
                                                                      if round_ == 0 else "\n"))
            switch = argo.wait("cutover's commit", lambda known=known: next(
                (sha for sha in argo.git.cutover_commits()[:1] if sha not in known), None), timeout=240)
            app = argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=240)
            result = app["status"]["operationState"]["syncResult"]
            hooks = {r["name"]: r.get("hookPhase") for r in result["resources"] if r.get("hookType")}
            assert hooks.get(POSTSYNC) == "Succeeded", hooks  # the switch verified by its own sync's PostSync
            job = argo.batch.read_namespaced_job(POSTSYNC, "cutover")
            assert "argocd.argoproj.io/hook-delete-policy" not in (job.metadata.annotations or {})
            made.append(job.metadata.uid)
            assert argo.service().spec.selector == (CANDLE if target == "candle" else VLLM)
            assert [sha for sha in argo.git.cutover_commits() if sha not in known] == [switch]  # gated, once
    finally:
        back = argo.commit({WORKLOAD: original}, "The hooks with their delete policy again\n")
        argo.wait_app("llm-serving", synced=True, healthy=True, revision=back, timeout=240)
    assert len(set(made)) == 2, made  # each sync made its PostSync Job anew
    MEASURED.append("hooks without a delete policy on 3.5: two switches in a row, each gated and verified by hook "
                    "Jobs made anew (BeforeHookCreation by default)")
