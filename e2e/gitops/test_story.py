"""Scenario a, the reference story through the real ArgoCD: a person's commit adds the candle-vllm workload and
sets the plan's target; ArgoCD syncs it; its PostSync hook waits on the scaled startup timeline, proves the names
and commits the selector through the Git API; ArgoCD, refreshed, syncs that commit, its PreSync hook gates it, and
the PostSync after it verifies. The Service keeps its UID and ClusterIP, and selfHeal reverts nothing."""

from __future__ import annotations

import base64
import json
import time

import argocd_observed
from conftest import MEASURED
from tier import gitops
from tier.images import IMAGE_GIT

CANDLE, VLLM = gitops.CANDLE, gitops.VLLM


def test_a_commit_that_sets_the_target_ends_with_the_service_switched_and_verified(argo: gitops.GitOpsTier) -> None:
    before = argo.service()
    assert before.spec.selector != CANDLE
    started = time.monotonic()
    person = argo.commit(argo.story_files("candle"), "Add candle-vllm for reasoning-long and hand the name to it\n")
    switch = argo.wait(  # cutover's own commit, made by the PostSync hook of the sync of the person's
        "cutover's commit", lambda: next(iter(argo.git.cutover_commits()), None), timeout=180)
    app = argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch, timeout=180)
    MEASURED.append(f"scenario a: the person's commit to the switch synced and verified: "
                    f"{gitops.elapsed(started):.1f} s")

    (argo.dir / "application-after-a.json").write_text(json.dumps(app, indent=1))
    seen = argocd_observed.observations(app)  # the stand-in's reference (tests/argocd_observed.py)
    (argo.dir / "observed-after-a.json").write_text(json.dumps(seen, indent=1) + "\n")
    assert seen == argocd_observed.story(), "the real ArgoCD no longer records what tests/fixtures/argocd-story.json" \
                                             f" says: compare {argo.dir / 'observed-after-a.json'}"
    # ArgoCD synced the person's commit, then cutover's, each to success, and nothing after them
    history = [entry["revision"] for entry in app["status"]["history"]]
    assert history[-2:] == [person, switch]
    assert app["status"]["operationState"]["phase"] == "Succeeded"
    hooks = {(r["hookType"], r["name"], r["hookPhase"]) for r in app["status"]["operationState"]["syncResult"][
        "resources"] if r.get("hookType")}
    assert hooks == {("PreSync", "cutover-presync-llm-serving", "Succeeded"),
                     ("PostSync", "cutover-postsync-llm-serving", "Succeeded")}
    assert app["status"]["operationState"]["operation"]["sync"]["revision"] == switch

    # the Service patched in place: same object, same ClusterIP, the candle-vllm pods behind it
    after = argo.service()
    assert after.spec.selector == CANDLE
    assert (after.metadata.uid, after.spec.cluster_ip) == (before.metadata.uid, before.spec.cluster_ip)
    assert "verified" in argo.job_log("cutover-postsync-llm-serving")
    # and says so on the Application's own page (ArgoCD 3.5's notice annotations, docs/reporting.md)
    notice = (app["metadata"].get("annotations") or {}).get("notice.argocd.argoproj.io/content", "")
    assert notice.startswith("cutover reasoning-long (postsync): OK — "), notice

    # selfHeal reverts nothing: a refresh later, the Application is still Synced at cutover's commit
    argo.refresh("llm-serving")
    settled = argo.wait_app("llm-serving", synced=True, healthy=True, revision=switch)
    assert [entry["revision"] for entry in settled["status"]["history"]] == history
    assert argo.service().spec.selector == CANDLE


def test_c_a_manual_rollback_goes_back_and_the_next_sync_keeps_the_hold(argo: gitops.GitOpsTier) -> None:
    """`kubectl create job --from=cronjob/cutover-rollback-llm-serving` (the workload's CronJob, synced with its
    hooks; the real Job controller): the previous selector committed through the same guarded path, synced by ArgoCD;
    then a sync of someone else's commit runs PostSync, which holds instead of re-applying the plan's target,
    candle."""
    assert argo.service().spec.selector == CANDLE  # where scenario a left it
    commits_before = argo.git.cutover_commits()
    argo.kubectl("-n", "cutover", "create", "job", "--from=cronjob/cutover-rollback-llm-serving",
                 "cutover-rollback-e2e")
    rollback = argo.finished("cutover-rollback-e2e", timeout=240)
    assert rollback.succeeded, rollback.log[-3000:]
    back = argo.git.cutover_commits()[0]
    assert back not in commits_before
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=back)
    assert argo.service().spec.selector == VLLM
    assert "cutover.held" in argo.job_log("cutover-postsync-llm-serving")  # the sync of the rollback's commit

    other = argo.commit(argo.touched_engines("rollback drill done"), "Note the rollback drill\n")
    app = argo.wait_app("llm-serving", synced=True, healthy=True, revision=other, timeout=180)
    assert app["status"]["operationState"]["phase"] == "Succeeded"
    assert "cutover.held" in argo.job_log("cutover-postsync-llm-serving")
    assert argo.service().spec.selector == VLLM and argo.git.cutover_commits()[0] == back  # nothing re-applied


def test_b_d_the_gate_aborts_an_unproven_selector_and_syncfail_reports_why(argo: gitops.GitOpsTier) -> None:
    """A person's commit sets the Service's selector to candle's while the candle engine answers without generating:
    the PreSync gate fails (exit 4), ArgoCD aborts the sync before the Service is touched and runs the SyncFail
    hook, which reports the cause and (rollback.auto) brings Git back to what the Service selects."""
    assert argo.service().spec.selector == VLLM
    argo.engines.fault("llm-reasoning-candle", "no-token")
    try:
        person = argo.commit({gitops.SERVICE: argo.service_file(CANDLE)}, "Point reasoning-long at candle by hand\n")
        state = argo.wait_operation("llm-serving", person, timeout=240)
    finally:
        argo.engines.fault("llm-reasoning-candle", None)
    assert state["phase"] == "Failed"
    hooks = {r["name"]: r for r in state["syncResult"]["resources"] if r.get("hookType")}
    presync = hooks["cutover-presync-llm-serving"]
    assert presync["hookPhase"] == "Failed"
    MEASURED.append(f"scenario b: the operation's message: {state['message']!r}; the hook's: {presync['message']!r}")
    assert "exit code 4" in presync["message"]  # what ArgoCD shows: the Job's own failure condition
    gate = argo.finished("cutover-presync-llm-serving")
    assert gate.exit_code == 4 and "exit 4" in gate.message  # the gate's verdict, in its pod's status
    assert argo.service().spec.selector == VLLM  # the Service was never touched
    syncfail = argo.wait("the SyncFail hook", lambda: hooks_of(argo).get("cutover-syncfail-llm-serving"),
                         timeout=120)
    assert syncfail["hookPhase"] == "Succeeded", syncfail
    report = argo.finished("cutover-syncfail-llm-serving")
    assert "failed: Job/cutover-presync-llm-serving: Container cutover" in report.log, report.log[-2000:]
    # rollback.auto: SyncFail brings Git back to what the Service still selects, which ArgoCD syncs
    back = argo.git.cutover_commits()[0]
    assert "Git goes back to vllm" in report.log and back[:12] in report.log
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=back, timeout=180)
    assert argo.service().spec.selector == VLLM


def hooks_of(argo: gitops.GitOpsTier) -> dict[str, dict[str, object]]:
    state = argo.app("llm-serving").get("status", {}).get("operationState", {})
    return {r["name"]: r for r in state.get("syncResult", {}).get("resources", []) if r.get("hookType")}


def test_e_a_sync_that_runs_no_hook_is_verified_by_the_audit(argo: gitops.GitOpsTier) -> None:
    """argo-cd#22795: a selective sync runs no hook. With automated sync off for a maintenance window, a manual
    `cutover-run` commits the switch and is stopped before ArgoCD applies it; a person then syncs the Service alone.
    No PostSync verified it: the `cutover-audit` CronJob's Job does."""
    assert argo.service().spec.selector == VLLM
    argo.kubectl("-n", "argocd", "patch", "application", "llm-serving", "--type", "merge",
                 "-p", '{"spec": {"syncPolicy": {"automated": null}}}')
    try:
        before = argo.git.cutover_commits()[0]
        argo.kubectl("-n", "cutover", "create", "job", "--from=cronjob/cutover-run-llm-serving", "cutover-run-e2e")
        switch = argo.wait("cutover-run's commit", lambda: next(
            (sha for sha in argo.git.cutover_commits()[:1] if sha != before), None), timeout=120)
        argo.kubectl("-n", "cutover", "delete", "job", "cutover-run-e2e", "--wait=true")
        argo.refresh("llm-serving")
        argo.wait("ArgoCD to see cutover-run's commit", lambda: argo.app("llm-serving")["status"]["sync"].get(
            "revision") == switch, timeout=60)
        argo.sync_only("llm-serving", switch, kind="Service", name="reasoning-long-predictor",
                       namespace="llm-serving")
        state = argo.wait_operation("llm-serving", switch)
        assert state["phase"] == "Succeeded", state.get("message")
        assert not [r for r in state["syncResult"]["resources"] if r.get("hookType")]  # no hook ran
        assert argo.service().spec.selector == CANDLE
        # the CronJob's own schedule (every 5 minutes) may have come first: one of its Jobs verified the switch,
        # and the other found it verified (the Lease's note) and checked the names
        logs = argo.audited("cutover-audit-e2e")
        assert f"verified the switch to candle that no hook verified ({switch[:12]})" in logs, logs[-3000:]
    finally:
        argo.kubectl("apply", "-f", str(argo.dir / "applications.yaml"))  # automated sync back, as the user has it


SERVER_MODE = f"""    argocd:
      application: llm-serving
      namespace: argocd
      refresh: true
      server: {gitops.argocd.SERVER_URL}
      tokenFile: /var/run/secrets/cutover/argocd/token
"""


def test_g_argocd_server_mode_with_an_account_that_may_only_get(argo: gitops.GitOpsTier) -> None:
    """`argocd.server`: the render check through `/manifests` and the Application read through the real
    argocd-server, as an ArgoCD account whose only permission is `applications, get` on the one Application; the
    cutover ServiceAccount never writes the Application."""
    argo.argocd_token_secret()
    serving = "candle" if argo.service().spec.selector == CANDLE else "vllm"
    target = "vllm" if serving == "candle" else "candle"
    plan = gitops.with_target((gitops.cluster.ROOT / gitops.PLAN).read_text(), target).replace(
        "        compare: true\n", "        compare: false\n")  # vLLM's shorter context is not the point here
    _, found, _ = plan.partition("    argocd:\n      application: llm-serving\n      namespace: argocd\n"
                                    "      refresh: true\n")
    assert found
    plan = plan.replace(found, SERVER_MODE)
    since = time.time()
    before = argo.git.cutover_commits()[:1]
    argo.commit({gitops.PLAN: plan}, f"reasoning-long to {target}, through the ArgoCD API\n")
    argo.wait("cutover's commit", lambda: argo.git.cutover_commits()[:1] != before, timeout=120)
    commit = argo.git.cutover_commits()[0]
    app = argo.wait_app("llm-serving", synced=True, healthy=True, revision=commit, timeout=180)
    assert app["status"]["operationState"]["phase"] == "Succeeded"
    assert argo.service().spec.selector == (VLLM if target == "vllm" else CANDLE)
    message = next(e.message for e in argo.git.repo.log(limit=5) if e.sha == commit)
    assert "Render-checked through the ArgoCD API" in message  # /manifests of the real repo-server's render
    served = (argo.plane.dir / "argocd-server.log").read_text()
    answered = served.count('"grpc.code":"OK","grpc.component":"server","grpc.method":"GetManifests"')
    assert answered >= 2, "argocd-server answered no GetManifests"  # the branch head and the candidate
    # the PostSync that committed read the Application through the API and, its sync still Running, asked for no
    # refresh (argo-cd#27875: docs/sources.md); its Job is gone since (BeforeHookCreation), the shim keeps its log
    logs = "".join(path.read_text() for path in sorted(argo.shim.dir.glob("cutover_cutover-postsync-*.log"))
                   if path.stat().st_mtime >= since)
    assert '"event": "argocd.refresh_deferred"' in logs, logs[-2000:]
    assert '"grpc.method":"Get"' in served  # the Application read as the account
    writes = [e for e in argo.audit() if e["objectRef"].get("resource") == "applications"
              and e["verb"] in ("patch", "update") and e["requestReceivedTimestamp"] >= _stamp(since)]
    assert writes == []  # the refresh went through the API, as the account


def test_i_plain_git_pushed_by_the_with_git_image(argo: gitops.GitOpsTier) -> None:
    """`git.provider: git`: a person's commit sets the target, turns the plan to plain Git over HTTPS and the
    workload's hooks to the image's with-git target (its digest, the pod policy's `also`; with CUTOVER_E2E_IMAGE the
    shim runs `cutover:dev-git`). The PostSync proves the target and pushes the switch with git itself (the token as the
    password of `x-access-token`, the Git host's CA from the Secret) to the smart HTTP server ArgoCD fetches from;
    ArgoCD syncs it. Two more commits put the plan, then the hooks, back as the later scenarios expect them (found in
    image mode: one commit that leaves both runs the default image's PreSync with the live plain-Git plan)."""
    serving = "candle" if argo.service().spec.selector == CANDLE else "vllm"
    target = "vllm" if serving == "candle" else "candle"
    plan = gitops.with_target((gitops.cluster.ROOT / gitops.PLAN).read_text(), target).replace(
        "        compare: true\n", "        compare: false\n")  # vLLM's shorter context is not the point here
    plain = plan.replace("      provider: github\n", "      provider: git\n").replace(
        "      apiUrl: https://10.250.0.20:8443\n", "")
    assert "provider: git\n" in plain and "apiUrl" not in plain
    workload = (gitops.cluster.ROOT / gitops.WORKLOAD).read_text()
    digest = IMAGE_GIT.split("@")[1]
    with_git = workload + f"images:\n  - {{name: cutover.invalid/cutover, digest: '{digest}'}}   # with-git\n"

    def pushes() -> int:
        return sum(1 for method, path, header in argo.git.smart.requests if method == "POST"
                   and path.endswith("/git-receive-pack") and header and _user(header) == "x-access-token")

    pushed, before = pushes(), argo.git.cutover_commits()[:1]
    argo.commit({gitops.PLAN: plain, gitops.WORKLOAD: with_git},
                f"reasoning-long to {target}, pushed with plain Git\n")
    argo.wait("cutover's commit", lambda: argo.git.cutover_commits()[:1] != before, timeout=180)
    commit = argo.git.cutover_commits()[0]
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=commit, timeout=180)
    assert argo.service().spec.selector == (VLLM if target == "vllm" else CANDLE)
    assert pushes() > pushed  # through git-receive-pack, as the token's user
    job = argo.batch.read_namespaced_job("cutover-postsync-llm-serving", "cutover")
    assert job.spec.template.spec.containers[0].image == IMAGE_GIT

    # back in two commits, the plan first: PreSync runs its commit's image with the live plan (the sync applies the
    # new plan after it), so one commit leaving both has the default image read Git with git (`git_missing`)
    back = argo.commit({gitops.PLAN: plan}, "The plan back to the GitHub API\n")
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=back, timeout=180)
    back = argo.commit({gitops.WORKLOAD: workload}, "The hooks back to the default image\n")
    argo.wait_app("llm-serving", synced=True, healthy=True, revision=back, timeout=180)
    assert argo.service().spec.selector == (VLLM if target == "vllm" else CANDLE)


def _user(header: str) -> str:
    return base64.b64decode(header.removeprefix("Basic ")).decode().partition(":")[0]


def _stamp(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
