"""The fault table's harness: the stage a case breaks (the emulated cluster, the engine doubles, a Git host
double, a Slack double and an ArgoCD stand-in that polls Git as ArgoCD does), the faults a case arranges, and
`run_case`, which runs a case's commands through the command line in process (`main.arun`), in fake time, and
checks what must come of it: the exit codes, the exact commits in Git, the Service file's comments intact, the
cause on the final line, and the Lease given back. The cases are in `cases_*.py`, one module per outside system.

A kill is a cancellation of the command's task right after it logged a step, which is what SIGTERM does to a
hook Job (docs/commands.md: the Lease is given back, exit 143); a hard kill also leaves the Lease held, as SIGKILL
would. The session prints every case as a table (conftest's terminal summary)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import dataclasses
import functools
import hashlib
import re
import ssl
import tempfile
from collections.abc import AsyncIterator, Callable, MutableMapping
from pathlib import Path
from typing import Any

import kmock
import pytest
import structlog
import trustme

from contracts import Recorder, spec
from cutover.cli import main
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.engines import Blackhole
from cutover.demo.gitrepo import BareRepo
from cutover.demo.hosts import FakeHost, Fault
from cutover.demo.world import BACKENDS, JOB_NAMESPACE, NAMESPACE, SERVICE, Script, SimPod, World
from cutover.demo.world import PODS as PODS_PATH
from cutover.slack import breaker
from doubles.githttp import GitHttpServer
from doubles.gitlab import FakeGitLab
from doubles.slack import FakeSlack
from helpers import outside_the_selector

PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
TOKEN = "ghp_" + "F" * 36
SWITCH = "cutover(reasoning-long-predictor): vllm -> candle"
BACK = "cutover(reasoning-long-predictor): candle -> vllm"
DOCS = "docs: ports"
LEASES = "coordination.k8s.io/v1/leases"
SERVICES = kmock.resource("", "v1", "services")
SLICES = kmock.resource("discovery.k8s.io", "v1", "endpointslices")
EVENTS = kmock.resource("", "v1", "events")
LEASE = kmock.resource("coordination.k8s.io", "v1", "leases")
APPLICATIONS = kmock.resource("argoproj.io", "v1alpha1", "applications")
AUTHORITY = trustme.CA(organization_name="cutover fault CA")  # a private CA: hosts "+tls" serve its certificate
TABLE: list[tuple[str, str, str, str, str]] = []  # (area, fault, outcome, commits, cause), for the summary


@dataclasses.dataclass
class Stage:
    """What a case may break, and when: `when(event, action)` runs the action as the command logs the event."""

    world: World
    repo: BareRepo
    host: FakeHost | GitHttpServer
    slack: FakeSlack
    target: SimPod  # the pod of the backend the cutover goes to
    argocd: dict[str, Any] = dataclasses.field(default_factory=dict)  # options of the ArgoCD stand-in
    env: dict[str, str] = dataclasses.field(default_factory=dict)
    seen: list[str] = dataclasses.field(default_factory=list)
    triggers: dict[str, list[Callable[[], None]]] = dataclasses.field(default_factory=dict)
    cleanups: list[Callable[[], Any]] = dataclasses.field(default_factory=list)
    held: dict[str, Any] | None = None  # the Lease as a hard kill left it
    met: int | None = None  # requests a kmock reaction of the case answered (None: the case has none)
    ended: float = 0.0  # loop time of the command's last word (its Slack sender's aside)
    tail: float = 0.0  # seconds from there to its exit: what Slack and Events may add (at most 5 s: guarantee 7)

    def when(self, event: str, action: Callable[[], None]) -> None:
        self.triggers.setdefault(event, []).append(action)

    def observe(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        self.seen.append(str(event.get("event")))
        if not str(event.get("event")).startswith("slack."):
            self.ended = asyncio.get_running_loop().time()
        for action in self.triggers.pop(str(event.get("event")), []):
            action()
        return event

    def other_commit(self, subject: str, edit: Callable[[str], str]) -> None:
        content, _ = self.repo.read(PATH)  # type: ignore[misc]
        self.repo.commit({PATH: edit(content)}, f"{subject}\n", name="Jo Operator", email="jo@example.invalid")

    def docs_change(self) -> None:
        self.other_commit(DOCS, lambda text: text.replace("# Ports:", "# Ports (see runbook):"))

    def engine(self, fault: str | None) -> Callable[[], None]:
        def act() -> None:
            self.target.engine.fault = fault
        return act


@dataclasses.dataclass(frozen=True)
class Step:
    argv: tuple[str, ...]
    exit: int
    kill_at: str | None = None  # cancel the command right after it logs this event
    hard: bool = False  # the kill leaves the Lease held (SIGKILL: no unwinding)
    later: float = 0.0  # seconds after the previous step that this one starts (ArgoCD retrying a sync)
    pod: bool = True  # runs as a Job's pod (POD_NAME set: the Lease holder is cutover/<pod>), else as a person


RUN = (Step(("run",), 0),)


def nothing(stage: Stage) -> None:
    pass


@dataclasses.dataclass(frozen=True)
class Case:
    area: str
    fault: str
    arrange: Callable[[Stage], None] = nothing
    steps: tuple[Step, ...] = RUN
    commits: tuple[str, ...] = (SWITCH,)
    cause: str = "-"
    saw: tuple[str, ...] = ()  # events that prove the fault was met
    unseen: tuple[str, ...] = ()  # events that must not happen (the fault handled, not merely survived)
    host: str = "github"
    script: Script = dataclasses.field(default_factory=lambda: Script(pull=30, load=240))  # the target pod's
    back: bool = False  # the other way round: candle-vllm serves, a vLLM pod starts, the plan's target is vllm
    slack: bool = False
    plan: Callable[[str], str] = lambda text: text
    within: float | None = None  # seconds of (fake) time all steps may take together
    lease_left: bool = False  # the API was gone at exit: the Lease could not be given back and expires by itself


# --- the faults ----------------------------------------------------------------------------------------------


def kube(verb: Any, resource: Any, reaction: Any) -> Callable[[Stage], None]:
    """A kmock reaction in front of the emulator; the case fails unless it answered at least one request."""
    def arrange(stage: Stage) -> None:
        def counted(request: Any) -> Any:
            answer = reaction(request)  # raises NotImplementedError when it steps aside
            stage.met += 1
            return answer
        stage.met = stage.met or 0  # 0, not None: this case expects its reaction to be met
        stage.world.kube[verb if resource is None else (verb, resource)] << counted
    return arrange


def api_down_from(event: str) -> Callable[[Stage], None]:
    """From `event` on, the Kubernetes API answers every request 503 (a control plane gone): the wait must end
    within verify.maxWait, not retry for ever."""
    def arrange(stage: Stage) -> None:
        down: list[bool] = []

        def react(request: Any) -> Any:
            if not down:
                raise NotImplementedError
            stage.met = (stage.met or 0) + 1
            return kmock.KubernetesError(status=503, reason="ServiceUnavailable", message="etcd is gone")
        stage.met = 0
        stage.world.kube[kmock.method.GET] << react
        stage.when(event, lambda: down.append(True))
    return arrange


def slow(seconds: float, times: int = 10**6) -> Callable[[Any], Any]:
    """Hold the first `times` matching requests `seconds` before the emulator answers them. (One-shot reads
    run in a thread, where looptime cannot skip the wait: keep those few and short.)"""
    held: list[object] = []

    def react(request: Any) -> Any:
        if len(held) >= times:
            raise NotImplementedError
        held.append(request)

        async def later() -> Any:
            await asyncio.sleep(seconds)
            raise NotImplementedError  # then the emulator answers
        return later()
    return react


def host_faults(*faults: Fault) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        assert isinstance(stage.host, FakeHost)
        stage.host.faults.extend(faults)
    return arrange


def before_write(action: Callable[[Stage], None]) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        if isinstance(stage.host, GitHttpServer):
            stage.host.before_push = lambda: action(stage)
        else:
            stage.host.before_write = lambda: action(stage)
    return arrange


def moved_away(stage: Stage) -> None:
    """The Git server answers 302 to another origin (the same server as `localhost`); the token must reach
    neither: the cleanup reads which Authorization headers each host received."""
    assert isinstance(stage.host, GitHttpServer)
    server = stage.host
    server.moved_to = "http://localhost:" + server.url.rsplit(":", 1)[1]

    def no_token_moved() -> None:
        assert [auth for host, auth in server.hosts if auth or not host.startswith("127.0.0.1:")] == []
    stage.cleanups.append(no_token_moved)


@functools.cache
def ca_file() -> str:
    path = Path(tempfile.mkdtemp(prefix="cutover-ca-")) / "ca.pem"
    AUTHORITY.cert_pem.write_to_path(str(path))
    return str(path)


def serving_tls() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    AUTHORITY.issue_cert("127.0.0.1").configure_cert(context)
    return context


def with_ca(path: str | None = None) -> Callable[[str], str]:
    """The plan's git block with `caFile` (the private CA's bundle unless another path is named)."""
    return lambda text: text.replace("  allowInsecure: true\n",
                                     f"  allowInsecure: true\n  caFile: {path or ca_file()}\n", 1)


def job_pod(name: str, phase: str) -> Callable[[Stage], None]:
    """The pod of a killed Job as the cluster shows it afterwards, in cutover's namespace."""
    def arrange(stage: Stage) -> None:
        stage.world.kube.apply(PODS_PATH, {"metadata": {"name": name, "namespace": JOB_NAMESPACE, "uid": "u-" + name},
                                           "spec": {"containers": [{"name": "cutover", "image": "cutover"}]},
                                           "status": {"phase": phase}})
    return arrange


def hung_pod(name: str) -> Callable[[Stage], None]:
    return job_pod(name, "Running")  # its process froze: only the Lease's expiry tells


def failed_pod(name: str) -> Callable[[Stage], None]:
    return job_pod(name, "Failed")  # OOMKilled, or the node's kubelet killed it


def blob_sha(text: str) -> str:
    """The Git blob id of `text`, as a host's contents API reports it."""
    data = text.encode()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()  # noqa: S324 -- Git's object id


def at(event: str, action: Callable[[Stage], None]) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        stage.when(event, lambda: action(stage))
    return arrange


def ready_but_silent(*, hole: bool = False) -> Callable[[Stage], None]:
    """The pod turns Ready 300 s in (its probe passed) while its engine does not listen: connections are refused,
    or with `hole`, SYNs are dropped and connects time out."""
    def arrange(stage: Stage) -> None:
        if hole:
            dropping = Blackhole(stage.target.ip, stage.world.port).__enter__()
            stage.cleanups.append(lambda: dropping.__exit__(None, None, None))
        asyncio.get_running_loop().call_later(300, stage.target.become_ready)
    return arrange


def switch_to_candle(text: str) -> str:
    kserve = "    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods\n"
    return text.replace("name: llm-reasoning ", "name: llm-reasoning-candle ").replace(kserve, "")


def bombed(text: str) -> str:
    """Billion laughs in the Service's own document: nine to the ninth strings, if anything ever expanded it."""
    levels = ["  l0: &l0 [x, x, x, x, x, x, x, x, x]\n"] + [
        f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]\n" for i in range(1, 9)]
    return text.replace("  annotations:\n", "  bombs:\n" + "".join(levels).replace("  l", "    l") + "  annotations:\n")


def switched_by_hand(stage: Stage) -> None:
    """A person commits the switch; ArgoCD's PreSync hook Job for that revision gates it."""
    stage.other_commit("ops: switch to candle", switch_to_candle)
    stage.env["CUTOVER_JOB_NAME"] = f"cutover-presync-{(stage.repo.head() or '')[:7]}-presync-1764457200"


def held_lease(stage: Stage) -> None:
    """Another cutover's Job holds the Lease and renews it every 20 s, as a live one does."""
    async def renewing() -> None:
        while True:
            now = stage.world.kube.now().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
            stage.world.kube.apply(LEASES, {"metadata": {"name": f"cutover-{SERVICE}", "namespace": NAMESPACE},
                                            "spec": {"holderIdentity": "cutover-postsync-other",
                                                     "leaseDurationSeconds": 60, "acquireTime": now,
                                                     "renewTime": now, "leaseTransitions": 1}})
            await asyncio.sleep(20)
    task = asyncio.get_running_loop().create_task(renewing())
    stage.cleanups.append(task.cancel)


def slack_down(stage: Stage) -> None:
    stage.env["CUTOVER_SLACK_WEBHOOK"] = "http://127.0.0.1:9/services/T000/B000/secretpath"  # nothing listens


def slack_faults(*faults: tuple[int, dict[str, str]]) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        stage.slack.faults.extend(faults)
    return arrange


def slack_always(status: int) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        stage.slack.always = status
        stage.cleanups.append(lambda: _at_most(stage.slack.failed, breaker.BREAK_AFTER))
    return arrange


def _at_most(count: int, bound: int) -> None:
    assert 0 < count <= bound, f"Slack was asked {count} times; the breaker opens after {bound}"


def slack_hangs(stage: Stage) -> None:
    stage.slack.hang = True


def argocd(**options: Any) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        stage.argocd.update(options)
    return arrange


def fit(value: str = "{requests: 3, maxLatency: 5s}") -> Callable[[str], str]:
    """The plan with `verify.fitness` set (docs/fitness.md)."""
    return lambda text: text.replace("  requestTimeout: 10s\n", f"  requestTimeout: 10s\n  fitness: {value}\n", 1)


def engine_set(**values: Any) -> Callable[[Stage], None]:
    """Set the target engine double's knobs (latency, max_model_len, fault, ...)."""
    def arrange(stage: Stage) -> None:
        for key, value in values.items():
            setattr(stage.target.engine, key, value)
    return arrange


def live_set(**values: Any) -> Callable[[Stage], None]:
    """The same on every pod the Service selects before the cutover."""
    def arrange(stage: Stage) -> None:
        for live in (pod for pod in stage.world.pods.values() if pod is not stage.target):
            for key, value in values.items():
                setattr(live.engine, key, value)
    return arrange


def cold(seconds: float) -> Callable[[Stage], None]:
    """From now (the target turning Ready), every generation takes 8 s, over maxLatency, for `seconds`."""
    def arrange(stage: Stage) -> None:
        stage.target.engine.cold_until = asyncio.get_running_loop().time() + seconds
    return arrange


def both(*arranges: Callable[[Stage], None]) -> Callable[[Stage], None]:
    def arrange(stage: Stage) -> None:
        for one in arranges:
            one(stage)
    return arrange


def kill(argv: tuple[str, ...], event: str, *, hard: bool = False, before: tuple[Step, ...] = (),
         pod: bool = True) -> tuple[Step, ...]:
    """Killed at `event`, then run again at once: as a Job's next pod, or (`pod=False`) by a person whose
    identity is host and pid, whose Lease can only be waited out."""
    return (*before, Step(argv, 143, kill_at=event, hard=hard, pod=pod), Step(argv, 0, pod=pod))


# --- the harness ---------------------------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def git_host(kind: str, repo: BareRepo, root: Path) -> AsyncIterator[tuple[FakeHost | GitHttpServer, str]]:
    """A Git host double over the repository, and the plan's git block pointing at it ("+tls": over HTTPS with
    a certificate of the private CA)."""
    tls = serving_tls() if kind.endswith("+tls") else None
    kind = kind.removesuffix("+tls")
    if kind == "git":
        server = GitHttpServer(root, username="x-access-token", password=TOKEN)
        server.ssl_context = tls
        async with server:
            yield server, f"provider: git\n  url: {server.url}/gitops.git\n  allowInsecure: true"
        return
    if kind == "gitlab":
        async with FakeGitLab(repo, token=TOKEN) as lab:
            yield lab, f"provider: gitlab\n  url: https://gitlab.example/acme/gitops.git\n  apiUrl: {lab.url}\n" \
                       "  apiHosts: [127.0.0.1]\n  allowInsecure: true"
        return
    contents = FakeContentsHost(repo, flavor=kind, token=TOKEN)
    contents.ssl_context = tls
    async with contents as fake:
        recorder = Recorder(spec("github"), "https://api.github.com") if kind == "github" else \
            Recorder(spec("forgejo"), "http://127.0.0.1")
        fake.validator = recorder
        url = "https://github.com/acme/gitops.git" if kind == "github" else "https://codeberg.example/acme/gitops.git"
        yield fake, f"provider: {kind}\n  url: {url}\n  apiUrl: {fake.url}\n  apiHosts: [127.0.0.1]\n" \
                    "  allowInsecure: true"
        assert recorder.violations == [], recorder.violations  # every request, faults or not, is one the host accepts


def plan_text(world: World, git: str, *, slack: bool) -> str:
    text = world.plan_text(git_api_url="http://replaced", slack=slack)
    block = re.search(r"provider: github\n  url: \S+\n  apiUrl: \S+\n  apiHosts: \S+\n  allowInsecure: true", text)
    assert block is not None
    return text.replace(block.group(0), git)


async def run_step(stage: Stage, step: Step, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    command: asyncio.Task[int]

    def killed() -> None:
        if step.hard:  # SIGKILL: whatever the process does on its way out never reaches the cluster
            stage.held = copy.deepcopy(stage.world.kube.stored(LEASES, NAMESPACE, f"cutover-{SERVICE}"))
        command.cancel()

    if step.kill_at:
        stage.when(step.kill_at, killed)
    stage.held = None
    command = asyncio.create_task(main.arun(["--log-format", "json", *step.argv], observers=[stage.observe]))
    try:
        code = await command
    finally:
        structlog.reset_defaults()
    stage.tail = asyncio.get_running_loop().time() - stage.ended
    if stage.held is not None:
        stage.world.kube.apply(LEASES, stage.held)
    output = capsys.readouterr()
    assert TOKEN not in output.out + output.err and "secretpath" not in output.out + output.err
    return code, output.out.strip().splitlines()[-1]


def label(subject: str) -> str:
    return {SWITCH: "vllm->candle", BACK: "candle->vllm"}.get(subject, f"theirs ({subject})")


async def run_case(case: Case, world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                     capsys: pytest.CaptureFixture[str]) -> None:
    """One case, start to end: the world arranged, its steps run, and every promise of the table checked."""
    source, target = ("candle", "vllm") if case.back else ("vllm", "candle")
    repo = BareRepo(tmp_path / "gitops.git")
    repo.commit({PATH: switch_to_candle(FIXTURE) if case.back else FIXTURE}, "Add the Service\n")
    if case.back:
        world.kube.merge("/v1/services", NAMESPACE, SERVICE, {"spec": {"selector": None}})
        world.kube.merge("/v1/services", NAMESPACE, SERVICE, {"spec": {"selector": BACKENDS["candle"]["labels"]}})
    world.add_pod(source, ready=True)
    pod = world.add_pod(target, case.script)
    await world.settled()
    world.sync_endpoints()
    sim_argocd.seed_application(world, revision=repo.head())
    async with git_host(case.host, repo, tmp_path) as (host, git), FakeSlack() as slack:
        stage = Stage(world, repo, host, slack, pod, env={"CUTOVER_SLACK_WEBHOOK": slack.webhook})
        case.arrange(stage)
        text = case.plan(plan_text(world, git, slack=case.slack))
        (tmp_path / "plan.yaml").write_text(text.replace("target: candle", f"target: {target}"))
        environ = {"CUTOVER_PLAN": str(tmp_path / "plan.yaml"), "CUTOVER_GIT_TOKEN": TOKEN,
                   "KUBECONFIG": str(world.kubeconfig(tmp_path / "kubeconfig")),
                   "CUTOVER_TERMINATION_LOG": str(tmp_path / "termination-log"), **stage.env}
        for name, value in environ.items():
            monkeypatch.setenv(name, value)
        codes = []
        began = asyncio.get_running_loop().time()
        try:
            async with sim_argocd.running(world, repo, PATH, poll=180, **stage.argocd):
                for number, step in enumerate(case.steps):
                    monkeypatch.setenv("HOSTNAME", f"cutover-job-{number}")  # each Job is a new pod
                    if step.pod:
                        monkeypatch.setenv("POD_NAME", f"cutover-job-{number}")
                    else:
                        monkeypatch.delenv("POD_NAME", raising=False)
                    await asyncio.sleep(step.later)
                    code, outcome = await run_step(stage, step, capsys)
                    codes.append(code)
            took = asyncio.get_running_loop().time() - began
        finally:
            for cleanup in stage.cleanups:
                cleanup()
        left = (host.faults if isinstance(host, FakeHost) else host.fail_next, slack.faults)
        assert TOKEN not in repr([posted.body for posted in slack.posted])  # docs/guarantees.md #6, in Slack too
    history = repo.log(PATH)
    assert not any(TOKEN in entry.message for entry in history)  # and in commits
    commits = [entry.message.split("\n")[0] for entry in reversed(history)][1:]
    found = re.search(r"cause (\w+)", outcome)
    cause = found.group(1) if found else "-"
    TABLE.append((case.area, case.fault, "→".join(map(str, codes)), ", ".join(map(label, commits)) or "none", cause))

    assert codes == [step.exit for step in case.steps], outcome
    assert case.within is None or took <= case.within, f"took {took:.0f} s, more than {case.within:.0f} s"
    assert commits == list(case.commits)
    assert cause == case.cause, outcome
    assert [event for event in case.saw if event not in stage.seen] == [], "the fault was never met"
    assert [event for event in case.unseen if event in stage.seen] == [], "the fault was survived, not handled"
    assert left == ([], []) and stage.met != 0, "an injected fault was never met"
    assert stage.tail <= 5.5, f"the exit waited {stage.tail:.1f} s after the outcome"
    theirs = next(entry.sha for entry in repo.log(PATH) if not entry.message.startswith("cutover("))
    final, _ = repo.read(PATH)  # type: ignore[misc]
    before, _ = repo.read(PATH, theirs)  # type: ignore[misc]
    assert outside_the_selector(final) == outside_the_selector(before)  # comments and all, byte for byte
    lease = world.kube.stored(LEASES, NAMESPACE, f"cutover-{SERVICE}") or {}
    dead = {f"{JOB_NAMESPACE}/cutover-job-{number}" if step.pod else f"cutover-job-{number}"
            for number, step in enumerate(case.steps) if step.hard or case.lease_left} | {
        "cutover-postsync-other"}  # a hard-killed Job's Lease expires by itself; another cutover's is theirs
    holder = (lease.get("spec") or {}).get("holderIdentity")
    assert holder is None or holder.partition("#")[0] in dead, "the Lease was left held"  # <pod>#<process nonce>
