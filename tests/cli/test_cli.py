"""The `cutover` command as a user runs it: a subprocess against the simulated world over HTTP, with the
exit codes of docs/commands.md, the one-line outcome last, JSON logs off a TTY, and no secret in any output."""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from cutover.demo.world import Script, World

TOKEN = "ghp_" + "Z" * 36  # token-shaped: must never reach any output


class Result:
    def __init__(self, code: int, stdout: str, stderr: str) -> None:
        self.code, self.stdout, self.stderr = code, stdout, stderr
        said = [line for line in stderr.splitlines() if line.startswith("cutover ")]  # beside a document on stdout
        self.outcome = said[-1] if said else stdout.strip().splitlines()[-1] if stdout.strip() else ""
        self.events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


Run = Callable[..., Awaitable[Result]]


@pytest.fixture
def cutover(world: World, tmp_path: Path) -> Run:
    return cli_runner(world, tmp_path)


def cli_runner(world: World, tmp_path: Path) -> Run:
    """The real CLI in a process of its own, against the simulated cluster (tests/cli/test_fleet.py shares it)."""
    kubeconfig = world.kubeconfig(tmp_path / "kubeconfig")

    async def run(*args: str, plan: str | None = None, env: dict[str, str] | None = None) -> Result:
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(plan if plan is not None else world.plan_text())
        environ = {"PATH": os.environ["PATH"], "CUTOVER_PLAN": str(plan_file), "KUBECONFIG": str(kubeconfig),
                   "CUTOVER_TERMINATION_LOG": str(tmp_path / "termination-log"), "CUTOVER_GIT_TOKEN": TOKEN,
                   **(env or {})}
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cutover", *args, env=environ, stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        async with asyncio.timeout(30):
            out, err = await process.communicate()
        result = Result(process.returncode or 0, out.decode(), err.decode())
        assert TOKEN not in result.stdout + result.stderr
        return result

    return run


async def test_help_lists_every_command(cutover: Run) -> None:
    result = await cutover("--help")
    assert result.code == 0
    for command in ("plan", "diff", "verify", "presync", "postsync", "syncfail", "run", "rollback", "status", "audit",
                    "nudge", "demo"):
        assert command in result.stdout


async def test_verify_a_ready_backend(cutover: Run, world: World, tmp_path: Path) -> None:
    world.add_pod("candle", ready=True)
    await world.settled()
    result = await cutover("verify", "--backend", "candle")
    assert result.code == 0, result.stderr
    assert result.outcome.startswith("cutover verify: OK — backend candle proven: 1 pod(s) serve reasoning-long, "
                                     "reasoning")
    assert (tmp_path / "termination-log").read_text() == result.outcome
    assert [e["event"] for e in result.events if e["event"].startswith(("target.", "names."))] == [
        "target.watching", "target.ready", "names.proven"]
    assert all(e["service"] == "llm-serving/reasoning-long-predictor" for e in result.events
               if e["event"] == "names.proven")


async def test_verify_not_ready_exits_3_with_cause_and_hint(cutover: Run, world: World) -> None:
    world.add_pod("candle")  # still pulling its image
    await world.settled()
    result = await cutover("verify", "--backend", "candle")
    assert result.code == 3
    assert "FAILED (exit 3, cause target_not_ready_now)" in result.outcome and "hint: run with --wait" in result.outcome
    (failed,) = [e for e in result.events if e["event"] == "cutover.failed"]
    assert failed["cause"] == "target_not_ready_now" and failed["hint"]


async def test_a_name_not_served_exits_4(cutover: Run, world: World) -> None:
    world.add_pod("vllm", ready=True)
    await world.settled()
    result = await cutover("verify", "--backend", "vllm", plan=world.plan_text(names=("reasoning-xl",)))
    assert result.code == 4 and "cause name_not_listed" in result.outcome


async def test_a_bad_plan_exits_2_and_touches_nothing(cutover: Run, world: World) -> None:
    bad = world.plan_text().replace("url: https://github.com/acme/gitops.git",
                                    f"url: https://{TOKEN}@github.com/acme/gitops.git")
    result = await cutover("verify", "--backend", "candle", plan=bad)
    assert result.code == 2
    assert "git.url: expected a URL without credentials" in result.outcome
    assert "found 'https://github.com/...' (a URL with credentials in it, not shown)" in result.outcome  # scheme
    assert TOKEN not in result.stdout + result.stderr  # and host only: never the userinfo, not even cut short
    assert list(world.kube) == []  # not one request reached the cluster


async def test_an_unknown_backend_exits_2_before_connecting(cutover: Run, world: World) -> None:
    result = await cutover("verify", "--backend", "sglang")
    assert result.code == 2 and "--backend: expected one of candle, vllm, found 'sglang'" in result.outcome
    assert list(world.kube) == []


async def test_bad_arguments_exit_2(cutover: Run) -> None:
    result = await cutover("verify")
    assert result.code == 2 and result.outcome.startswith("cutover: invalid arguments:")


async def test_status_as_json(cutover: Run, world: World) -> None:
    world.add_pod("vllm", ready=True)
    world.add_pod("candle")
    await world.settled()
    result = await cutover("status", "--output", "json")
    assert result.code == 0
    body: dict[str, Any] = json.loads(result.stdout)  # the document alone: `| jq` reads it
    assert (body["ok"], body["command"]) == (True, "status")  # as a failure's document says them
    assert body["liveBackend"] == "vllm" and body["target"] == "candle"
    assert body["service"] == {"uid": body["service"]["uid"], "clusterIP": world.cluster_ip, "ports": [80, 8080]}
    assert body["backends"]["vllm"]["ready"] == 1 and body["backends"]["candle"]["ready"] == 0
    assert body["backends"]["candle"]["engineProof"] == "generate"
    outcome = result.stderr.strip().splitlines()[-1]  # the outcome line beside it, on stderr
    assert outcome.startswith("cutover status: OK — the Service selects vllm; the plan's target is candle")


async def test_status_says_who_holds_the_lease(cutover: Run, world: World) -> None:
    """A cutover in progress (docs/guarantees.md #4): the Lease's holder and until when, beside the rest."""
    world.add_pod("vllm", ready=True)
    await world.settled()
    idle = json.loads((await cutover("status", "--output", "json")).stdout)
    assert idle["lease"] is None
    world.kube.apply("coordination.k8s.io/v1/leases", {
        "metadata": {"name": "cutover-reasoning-long-predictor", "namespace": "llm-serving"},
        "spec": {"holderIdentity": "cutover/cutover-postsync-abc#1", "leaseDurationSeconds": 60,
                 "renewTime": "2026-12-01T09:00:00.000000Z"}})
    busy = json.loads((await cutover("status", "--output", "json")).stdout)
    assert busy["lease"] == {"holder": "cutover/cutover-postsync-abc#1", "renewed": "2026-12-01T09:00:00+00:00",
                             "expires": "2026-12-01T09:01:00+00:00"}
    text = await cutover("status")
    assert "  in progress: the Lease is held by cutover/cutover-postsync-abc#1 (until 2026-12-01T09:01:00+00:00)" \
        in text.stdout + text.stderr


async def test_status_says_where_a_pending_target_fits(cutover: Run, world: World) -> None:
    """docs/capacity.md: the verdict with its figures, before anyone waits on the target."""
    world.add_node("gpu-1", gpus=1)
    world.add_pod("vllm", ready=True, gpus=1, node="gpu-1")
    world.add_pod("candle", Script(fault="unschedulable"), gpus=1)
    await world.settled()
    result = await cutover("status", "--output", "json")
    assert result.code == 0
    body: dict[str, Any] = json.loads(result.stdout)
    assert body["strategy"] == "parallel" and "capacity" not in body["backends"]["vllm"]
    found = body["backends"]["candle"]["capacity"]
    assert found["fit"] == "fits_once_source_gone" and found["source"] == "vllm"
    assert found["figures"] == ["gpu-1: nvidia.com/gpu 1 allocatable, vllm holds 1, others 0, 0 free"]
    text = await cutover("status")
    assert "  capacity: candle fits only once vllm's pods are gone; candle needs 1 nvidia.com/gpu per pod" in \
        text.stdout + text.stderr


async def test_a_failure_with_json_output_is_one_json_document_too(cutover: Run, world: World) -> None:
    world.add_pod("candle")  # still pulling its image
    await world.settled()
    result = await cutover("verify", "--backend", "candle", "--output", "json")
    assert result.code == 3
    body = json.loads(result.stdout)
    assert body["ok"] is False and body["exitCode"] == 3 and body["cause"] == "target_not_ready_now"
    assert body["command"] == "verify" and "--wait" in body["hint"] and body["message"]
    assert "FAILED (exit 3, cause target_not_ready_now)" in result.stderr.strip().splitlines()[-1]


async def test_no_kubeconfig_is_a_clear_failure(cutover: Run, tmp_path: Path) -> None:
    result = await cutover("status", env={"KUBECONFIG": str(tmp_path / "absent")})
    assert result.code == 1 and "cause cluster_config" in result.outcome and "hint: run in a pod" in result.outcome


def test_the_cli_module_imports_no_heavy_client() -> None:
    import subprocess

    code = "import sys, cutover.cli; print(sorted(m for m in ('kubernetes', 'httpx', 'structlog') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


async def test_a_secret_in_a_file_the_plan_names_is_redacted_everywhere(cutover: Run, world: World,
                                                                      tmp_path: Path) -> None:
    secret = "plan-named-secret-value-42"
    token_file = tmp_path / "git" / "token"
    token_file.parent.mkdir()
    token_file.write_text(secret + "\n")
    world.add_pod("candle", ready=True)
    await world.settled()
    # Someone pasted the token where the plan's name belongs: it must still never be printed.
    text = world.plan_text().replace("name: reasoning-long\n", f"name: {secret}\n", 1).replace(
        "  branch: main\n", f"  branch: main\n  tokenFile: {token_file}\n")
    result = await cutover("verify", "--backend", "candle", plan=text, env={"CUTOVER_SECRETS_DIR": str(tmp_path)})
    assert result.code == 0, result.stderr
    assert secret not in result.stdout + result.stderr
    assert any(e.get("cutover") == "[REDACTED]" for e in result.events)


FIXTURE = Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml"


async def test_a_report_goes_through_the_redactor_as_log_lines_do(cutover: Run, tmp_path: Path) -> None:
    """A report prints what it read (here a diff of a Service file whose selector line carries a pasted token):
    its lines meet the redactor too, CUTOVER_ARGOCD_TOKEN among its secrets."""
    secret = "argocd-token-pasted-in-a-comment-42"
    copy = tmp_path / "svc.yaml"
    copy.write_text(FIXTURE.read_text().replace("# the vLLM deployment", f"# {secret} ghp_{'x' * 36}", 1))
    result = await cutover("diff", "--file", str(copy), "--to", "candle", env={"CUTOVER_ARGOCD_TOKEN": secret})
    assert result.code == 0, result.stderr
    assert "llm-reasoning-candle" in result.stdout  # the diff itself is there
    assert secret not in result.stdout + result.stderr and "ghp_" not in result.stdout
    assert result.stdout.count("[REDACTED]") >= 2


async def test_diff_prints_a_patch_that_git_applies(cutover: Run, world: World, tmp_path: Path) -> None:
    copy = tmp_path / "svc.yaml"
    copy.write_bytes(FIXTURE.read_bytes())
    result = await cutover("diff", "--file", str(copy), "--to", "candle")
    assert result.code == 0, result.stderr
    patch = result.stdout  # the patch alone (`cutover diff > x.patch`): the outcome line goes to stderr
    assert patch.startswith("--- a/k8s/apps/llm-serving/reasoning-long-service.yaml\n")
    assert result.outcome == ("cutover diff: OK — 3 line(s) change in k8s/apps/llm-serving/reasoning-long-service.yaml"
                              ", all inside spec.selector")  # git.path, where it would be committed
    assert list(world.kube) == []  # offline: the cluster is never asked
    repo = tmp_path / "repo"
    target = repo / "k8s/apps/llm-serving/reasoning-long-service.yaml"
    target.parent.mkdir(parents=True)
    target.write_bytes(FIXTURE.read_bytes())
    applied = await asyncio.create_subprocess_exec("git", "apply", "-", cwd=repo, stdin=asyncio.subprocess.PIPE)
    await applied.communicate(patch.encode())
    assert applied.returncode == 0
    assert "llm-reasoning-candle" in target.read_text()


@pytest.mark.parametrize(("args", "words"), [
    (("--selector", "app=x,component"), "--selector: pair 2 of 'app=x,component': expected K=V pairs separated by "
                                         "commas, found 'component'"),
    (("--selector", "app=x", "--to", "candle"), "expected exactly one of --to BACKEND or --selector"),
    (("--selector", "app=not ok"), "label value 'not ok' holds ' ': only alphanumerics"),
])
async def test_diff_bad_arguments_exit_2(cutover: Run, tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    copy = tmp_path / "svc.yaml"
    copy.write_bytes(FIXTURE.read_bytes())
    result = await cutover("diff", "--file", str(copy), *args)
    assert result.code == 2 and words in result.outcome


async def test_diff_of_a_missing_or_broken_file_exits_2(cutover: Run, tmp_path: Path) -> None:
    missing = await cutover("diff", "--file", str(tmp_path / "absent.yaml"), "--to", "candle")
    assert missing.code == 2 and "cannot read: No such file or directory" in missing.outcome
    broken = tmp_path / "broken.yaml"
    broken.write_text("kind: [unclosed\n")
    result = await cutover("diff", "--file", str(broken), "--to", "candle")
    assert result.code == 2 and "not valid YAML" in result.outcome


async def test_plan_shows_the_exact_diff_it_would_commit(cutover: Run, world: World, tmp_path: Path) -> None:
    from cutover.demo.contents import FakeContentsHost
    from cutover.demo.gitrepo import BareRepo

    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({"k8s/apps/llm-serving/reasoning-long-service.yaml": FIXTURE.read_text()}, "seed\n")
    vllm = world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    world.kube.merge("/v1/pods", "llm-serving", vllm.name, {"spec": {"terminationGracePeriodSeconds": 30}})
    async with FakeContentsHost(repo, token=TOKEN) as host:
        result = await cutover("plan", plan=world.plan_text(git_api_url=host.url))
    assert result.code == 0, result.stderr
    assert "  target candle: proven now on 1 pod(s)" in result.stdout
    # candle-vllm answers any name: said plainly, since the plan names no `model` for it to report
    assert "  proof of candle: candle-vllm answers any model name, so a misspelt served name is answered too: the " \
           "names prove generation, not the weights; set backends.candle.model" in result.stdout
    assert "proof of vllm" not in result.stdout  # vLLM lists its names: a name it does not serve is refused
    assert "    -    app.kubernetes.io/name: llm-reasoning             # the vLLM deployment" in result.stdout
    assert "    +    app.kubernetes.io/name: llm-reasoning-candle             # the vLLM deployment" in result.stdout
    assert [m for m, _, _ in host.requests] == ["GET"]  # read only: a plan never writes
    assert len(repo.log()) == 1
    # its grace period (30 s) no longer covers vLLM's --shutdown-timeout (60 s): deleting it would cut its streams
    assert "  drain safety: vllm: reasoning-long-predictor-vllm-00001's terminationGracePeriodSeconds (30s) is " \
           "below its preStop sleep plus --shutdown-timeout (60s)" in result.stdout
    assert "  jobs: a sync of this plan may run its hooks for 2400s: keep ArgoCD's sync timeout" in result.stdout


async def test_plan_with_a_git_host_refusing_the_token_still_reports(cutover: Run, world: World,
                                                                     tmp_path: Path) -> None:
    from cutover.demo.contents import FakeContentsHost
    from cutover.demo.gitrepo import BareRepo

    repo = BareRepo(tmp_path / "gitops.git")
    world.add_pod("candle", ready=True)  # the target provable: what is asserted is the report of a refused read
    await world.settled()
    async with FakeContentsHost(repo, token="ghp_" + "9" * 36) as host:
        result = await cutover("--log-level", "error", "plan", plan=world.plan_text(git_api_url=host.url))
    assert result.code == 0
    assert "  diff: not available: github refused read k8s/apps/llm-serving/reasoning-long-service.yaml@main " \
           "(401) [git_auth]" in result.stdout


async def test_presync_passes_without_a_change_and_aborts_a_change_to_an_unschedulable_backend(
        cutover: Run, world: World, tmp_path: Path) -> None:
    from cutover.demo.contents import FakeContentsHost
    from cutover.demo.gitrepo import BareRepo
    from cutover.demo.world import Script
    from cutover.sources import yaml_edit

    path = "k8s/apps/llm-serving/reasoning-long-service.yaml"
    repo = BareRepo(tmp_path / "gitops.git")
    first = repo.commit({path: FIXTURE.read_text()}, "seed\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(fault="unschedulable"))
    await world.settled()
    async with FakeContentsHost(repo, token=TOKEN) as host:
        text = world.plan_text(git_api_url=host.url)
        quiet = await cutover("presync", plan=text, env={"CUTOVER_JOB_NAME": f"cutover-presync-{first[:7]}-presync-"
                                                                             "1764457200"})
        edit = yaml_edit.edit_selector(FIXTURE.read_text(), document=plan_document(), selector_path="spec.selector",
                                      selector={"app.kubernetes.io/name": "llm-reasoning-candle",
                                                "component": "predictor"})
        second = repo.commit({path: edit.after}, "switch\n")
        gate = await cutover("presync", plan=text, env={"CUTOVER_JOB_NAME": f"cutover-presync-{second[:7]}-presync-"
                                                                            "1764457200"})
    assert quiet.code == 0 and "nothing to gate" in quiet.outcome
    assert gate.code == 3 and "cause unschedulable" in gate.outcome and "nvidia.com/gpu" in gate.outcome


def plan_document() -> Any:
    from cutover.plan import GitDocument

    return GitDocument("Service", "reasoning-long-predictor")


@pytest.mark.parametrize(("signal_name", "code", "said"), [
    # off a pod no hook Job was deleted (the newcomer's P3): the hint says what a person's SIGTERM is
    ("SIGTERM", 143, "FAILED (exit 143, cause terminated) — terminated, nothing half-done — hint: stopped by a "
                     "SIGTERM"),
])
async def test_a_signal_mid_wait_gives_the_lease_back_and_says_so_in_the_outcome_format(
        world: World, tmp_path: Path, signal_name: str, code: int, said: str) -> None:
    """What happens when ArgoCD deletes a running hook Job (the pod gets SIGTERM): the Lease given back, the exit
    code, and the outcome line in the documented format. (A real SIGINT, sent the same way, once went unanswered on a
    loaded CI machine: nothing logged after it, which this test cannot tell from an ignored signal; Ctrl-C's outcome
    line is held to the format below, in process.)"""
    import signal

    from cutover.demo.contents import FakeContentsHost
    from cutover.demo.gitrepo import BareRepo
    from cutover.demo.world import Script

    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({"k8s/apps/llm-serving/reasoning-long-service.yaml": FIXTURE.read_text()}, "seed\n")
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", Script(pull=3600))
    async with FakeContentsHost(repo, token=TOKEN) as host:
        plan_file = tmp_path / "plan.yaml"
        plan_file.write_text(world.plan_text(git_api_url=host.url))
        env = {"PATH": os.environ["PATH"], "CUTOVER_PLAN": str(plan_file), "CUTOVER_GIT_TOKEN": TOKEN,
               "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig")), "HOSTNAME": "cutover-postsync-abc",
               "CUTOVER_TERMINATION_LOG": str(tmp_path / "termination-log")}
        log_file = tmp_path / "stderr"
        with log_file.open("wb") as stderr:
            process = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "cutover", "postsync", env=env, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=stderr)
        for _ in range(400):  # until the wait has begun (the log says so); a bounded poll of another process
            if b"target.watching" in log_file.read_bytes():
                break
            await asyncio.sleep(0.05)
        else:
            pytest.fail(log_file.read_text())
        lease = world.kube.stored("coordination.k8s.io/v1/leases", "llm-serving", "cutover-reasoning-long-predictor")
        assert lease is not None and lease["spec"]["holderIdentity"].startswith(f"cutover-postsync-abc-{process.pid}#")
        process.send_signal(getattr(signal, signal_name))
        try:
            async with asyncio.timeout(20):
                out, _ = await process.communicate()
        except TimeoutError:
            process.kill()
            await process.wait()
            pytest.fail(f"no exit 20 s after {signal_name}; its log:\n" + log_file.read_text()[-6000:])
    assert process.returncode == code
    assert out.decode().strip().splitlines()[-1].startswith(f"cutover postsync: {said}")
    lease = world.kube.stored("coordination.k8s.io/v1/leases", "llm-serving", "cutover-reasoning-long-predictor")
    assert lease is not None and lease["spec"].get("holderIdentity") is None
    assert [e.message for e in repo.log() if e.message.startswith("cutover(")] == []


def test_the_demo_runs_the_whole_story_and_exits_0() -> None:
    """`make demo`'s command, as a newcomer runs it."""
    import subprocess

    result = subprocess.run([sys.executable, "-m", "cutover", "demo"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = result.stdout.strip().splitlines()
    assert re.fullmatch(r"cutover demo: OK — vllm -> candle, committed once, applied in place, verified; rolled "
                        r"back and held; on one GPU by recreate, a gap of 12 min; by bridge, 0 of \d+ requests for "
                        r"reasoning failed", lines[-1]), lines[-1]
    # Git dates commits to the second: the gap from the free commit is 720 s of fake time, give or take that second
    assert any(re.fullmatch(r"verified: the Service selects candle, same object, 1 endpoint\(s\); the gap in service "
                            r"lasted 72[01]s", line) for line in lines)
    assert "Cutover-Hold: vllm" in lines
    assert "+    app.kubernetes.io/name: llm-reasoning-candle   # which engine's pods: cutover's to change" in lines
    assert "Cutover-To: candle" in lines
    assert not [line for line in lines if line.startswith('{"')]  # off a terminal too: the console's story, no JSON
    assert any(line.startswith("T+1") and "target.ready" in line for line in lines)  # the story's clock: ~12 min
    assert 1 <= sum("target.waiting" in line for line in lines) <= 10  # every 5 simulated minutes, not 48 alike
    # kubectl (hence kustomize) is a prerequisite of the tests: the demo tells the kustomize overlay's story
    assert "--- a/k8s/apps/llm-serving/base/reasoning-long-service.yaml" in lines
    assert "-    serving.kserve.io/inferenceservice: reasoning" in lines  # the overlay adds component: predictor
    assert any(line.startswith("Render-checked: kustomize build") for line in lines)
    # the rollback's commit is shown like the first: its message, then its diff
    assert sum(line.startswith("==> The commit ") and line.endswith("as a reviewer sees it:") for line in lines) == 2
    assert "+    serving.kserve.io/inferenceservice: reasoning" in lines  # the way back, as its diff
    assert not any(re.search(r"slowly for \d+ min", line) for line in lines)  # the table alone says how long


async def both_ready(world: World, tmp_path: Path) -> Any:
    """The repository with the Service file, the Application, both engines Ready: a PostSync's whole run ahead."""
    from cutover.demo.argocd import seed_application
    from cutover.demo.gitrepo import BareRepo

    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({"k8s/apps/llm-serving/reasoning-long-service.yaml": FIXTURE.read_text()}, "seed\n")
    seed_application(world)
    world.add_pod("vllm", ready=True)
    world.add_pod("candle", ready=True)
    await world.settled()
    return repo


async def test_postsync_tells_slack_its_milestones_without_showing_the_webhook(cutover: Run, world: World,
                                                                            tmp_path: Path) -> None:
    from cutover.demo.contents import FakeContentsHost
    from doubles.slack import FakeSlack

    repo = await both_ready(world, tmp_path)
    async with FakeContentsHost(repo, token=TOKEN) as host, FakeSlack() as slack:
        result = await cutover("postsync", plan=world.plan_text(git_api_url=host.url, slack=True),
                               env={"CUTOVER_SLACK_WEBHOOK": slack.webhook})
    assert result.code == 0, result.stderr
    stages = [post.body["blocks"][1]["fields"][0]["text"].split("\n")[1] for post in slack.posted]
    assert stages == ["started", "target ready", "names proven", "committed"]
    assert "secretpath" not in result.stdout + result.stderr


async def test_postsync_leaves_where_it_stands_on_the_applications_notice(cutover: Run, world: World,
                                                                          tmp_path: Path) -> None:
    """ArgoCD 3.5 shows an Application's notice annotations on its page (docs/reporting.md): a PostSync leaves its
    outcome there; a failed one says why, with the severity that colours the banner."""
    from cutover.demo.contents import FakeContentsHost

    repo = await both_ready(world, tmp_path)

    def notice() -> tuple[str, str]:
        app = world.kube.stored("argoproj.io/v1alpha1/applications", "argocd", "llm-serving") or {}
        found = app.get("metadata", {}).get("annotations") or {}
        return found.get("notice.argocd.argoproj.io/content", ""), found.get("notice.argocd.argoproj.io/severity", "")

    async with FakeContentsHost(repo, token=TOKEN) as host:
        failed = await cutover("postsync", plan=world.plan_text(git_api_url=host.url),
                               env={"CUTOVER_GIT_TOKEN": "ghp_" + "W" * 36})  # the host refuses it: nothing written
        assert failed.code == 5, failed.stderr
        content, severity = notice()
        assert content.startswith("cutover reasoning-long (postsync): FAILED — (exit 5, cause git_auth"), content
        assert severity == "critical" and len(content) <= 500
        result = await cutover("postsync", plan=world.plan_text(git_api_url=host.url))
    assert result.code == 0, result.stderr
    content, severity = notice()
    assert content.startswith("cutover reasoning-long (postsync): OK — vllm -> candle: committed "), content
    assert severity == "info"


@pytest.mark.timeout(240)  # the demo posts a message a second (Slack's rate): about 50 s idle, more when loaded
async def test_the_demo_posts_its_milestones_to_slack_when_asked(tmp_path: Path) -> None:
    from doubles.slack import FakeSlack

    async with FakeSlack() as slack:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "cutover", "demo", stdin=asyncio.subprocess.DEVNULL,
            env={"PATH": os.environ["PATH"], "CUTOVER_SLACK_WEBHOOK": slack.webhook},
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
        try:
            async with asyncio.timeout(200):  # before pytest-timeout's, so the process is not left behind
                out, err = await process.communicate()
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
    assert process.returncode == 0, err.decode()[-2000:]
    lines = out.decode().strip().splitlines()
    assert lines[-1] == f"cutover demo: {len(slack.posted)} message(s) posted to Slack (127.0.0.1)"
    stages = [post.body["blocks"][1]["fields"][0]["text"].split("\n")[1] for post in slack.posted]
    assert "committed" in stages and "verified" in stages and "rolled back" in stages and "held" in stages
    # act two, on one GPU: each hop of the handoff is a milestone of its own (docs/capacity.md)
    hops = [stage for stage in stages if stage in ("draining the source", "source freed", "workload restored",
                                                   "gap closed", "switching to the bridge", "bridge committed",
                                                   "bridge serves")]
    assert hops == ["draining the source", "source freed", "workload restored", "gap closed",  # recreate
                    "switching to the bridge", "bridge committed", "bridge serves", "draining the source",
                    "source freed", "workload restored"], hops  # and by bridge
    assert "secretpath" not in out.decode() + err.decode()


@pytest.mark.parametrize("asked", [True, False], ids=["shipped-presync-job", "anything-else"])
async def test_a_first_sync_presync_passes_without_a_plan_only_when_its_job_asks(cutover: Run, world: World,
                                                                                 tmp_path: Path, asked: bool) -> None:
    """The plan ConfigMap is applied in the Sync phase of the Application whose PreSync gate reads it: on its first
    sync it is not there yet (hooks/presync-job.yaml mounts it optional and sets CUTOVER_PRESYNC_WITHOUT_PLAN)."""
    env = {"CUTOVER_PLAN": str(tmp_path / "absent" / "plan.yaml"),
           **({"CUTOVER_PRESYNC_WITHOUT_PLAN": "pass"} if asked else {})}
    result = await cutover("presync", env=env)
    if asked:
        assert result.code == 0
        assert result.outcome.startswith("cutover presync: OK — no plan at ") and "(first sync)" in result.outcome
        assert [e["event"] for e in result.events if e.get("level") == "warning"] == ["gate.no_plan"]
    else:
        assert result.code == 2 and "file not found" in result.outcome
    assert list(world.kube) == []  # nothing to gate: not one request
    verify = await cutover("verify", "--backend", "candle", env={**env, "CUTOVER_PRESYNC_WITHOUT_PLAN": "pass"})
    assert verify.code == 2  # any other command still needs its plan


def test_a_job_whose_deadline_is_shorter_than_the_plan_says_so_first(monkeypatch: pytest.MonkeyPatch,
                                                                     events: list[dict[str, Any]]) -> None:
    """docs/capacity.md: a 40-minute maxWait in a Job with the shipped 2400 s deadline would be killed mid-wait
    without a word; the Job says it at its start (a person's shell, without CUTOVER_DEADLINE_SECONDS, does not)."""
    from cutover import plan
    from cutover.cli import main
    from cutover.demo.world import World

    world = World.__new__(World)
    world.port = 8080
    (long_wait,) = plan.parse(world.plan_text(max_wait="40m"))
    main._say_deadline("postsync", long_wait)
    assert not [e for e in events if e["event"] == "job.deadline_short"]
    monkeypatch.setenv("CUTOVER_DEADLINE_SECONDS", "2400")
    main._say_deadline("postsync", long_wait)
    (said,) = [e for e in events if e["event"] == "job.deadline_short"]
    assert said["cause"] == "deadline_short" and "(2700s: verify.maxWait" in said["message"]
    (fits,) = plan.parse(world.plan_text(max_wait="30m"))
    main._say_deadline("postsync", fits)
    assert len([e for e in events if e["event"] == "job.deadline_short"]) == 1
    main._say_deadline("run", fits)  # a whole run in a hook-sized Job: 30 min + ArgoCD's 10 + 5 is over 40
    assert len([e for e in events if e["event"] == "job.deadline_short"]) == 2
    monkeypatch.setenv("CUTOVER_DEADLINE_SECONDS", "3000")  # what the shipped cutover-run Job gives it
    main._say_deadline("run", fits)
    assert len([e for e in events if e["event"] == "job.deadline_short"]) == 2


async def test_plan_is_a_pre_flight_gate_that_exits_with_why_the_switch_cannot_go_ahead_now(
        cutover: Run, world: World, tmp_path: Path) -> None:
    """The whole report, then a non-zero exit naming the cause when the Service is not on the target and the target
    cannot be proven now (it exited 0: a CI step running `cutover plan` went ahead); exit 0 once it can."""
    from cutover.demo.contents import FakeContentsHost
    from cutover.demo.gitrepo import BareRepo

    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({"k8s/apps/llm-serving/reasoning-long-service.yaml": FIXTURE.read_text()}, "the Service\n")
    async with FakeContentsHost(repo, token=TOKEN) as host:
        text = world.plan_text(git_api_url=host.url)
        blocked = await cutover("--log-level", "error", "plan", plan=text)  # no candle pod yet
        data = json.loads((await cutover("--log-level", "error", "plan", "--output", "json", plan=text)).stdout)
        world.add_pod("candle", ready=True)
        await world.settled()
        ready = await cutover("--log-level", "error", "plan", plan=text)
    assert blocked.code in (3, 4) and blocked.outcome.startswith("cutover plan: NOT READY (exit"), blocked.outcome
    assert "  target candle: not provable now:" in blocked.stdout  # the whole report came first
    assert data["ready"] is False and data["targetProof"]["exitCode"] == blocked.code
    assert ready.code == 0 and ready.outcome.startswith("cutover plan: OK"), ready.outcome


def test_ctrl_c_ends_in_the_documented_outcome_format(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """asyncio.run turns a person's Ctrl-C into the main task's cancellation (the Lease given back, as for SIGTERM),
    then KeyboardInterrupt: exit 130 and the same kind of line as every failure."""
    import structlog

    from cutover.cli import main

    monkeypatch.setenv("CUTOVER_TERMINATION_LOG", str(tmp_path / "termination-log"))
    args = main.build_parser().parse_args(["--log-level", "error", "status"])
    try:
        code = main._ending(args, main._start(args, ()), KeyboardInterrupt())
    finally:
        structlog.reset_defaults()
    assert code == 130
    assert capsys.readouterr().out.strip().splitlines()[-1] == (
        "cutover status: FAILED (exit 130, cause interrupted) — interrupted — hint: run it again: it starts from "
        "what Git and the cluster hold (a Lease a second Ctrl-C left behind expires by itself)")
