"""The hosting-API providers (GitHub, Gitea/Forgejo, GitLab) and the write-back story, over HTTP against
doubles that store into a real bare repository; every request the GitHub and Forgejo doubles receive
is checked against the host's official OpenAPI description."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from contracts import Recorder, spec
from cutover import plan
from cutover.core import proofs
from cutover.core.repository import Author, GitHost
from cutover.core.trailers import Trailers
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.hosts import FakeHost, Fault
from cutover.demo.world import World
from cutover.errors import GitError, InvalidInput
from cutover.flows import writeback
from cutover.githost.gitea import Gitea
from cutover.githost.github import GitHub
from cutover.githost.gitlab import GitLab
from doubles.gitlab import FakeGitLab
from helpers import named

TOKEN = "ghp_" + "T" * 36
FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
AUTHOR = Author("cutover", "cutover@example.invalid")


@pytest.fixture
def the_plan() -> plan.Plan:
    world = World.__new__(World)  # only for its plan text
    world.port = 8080
    (one,) = plan.parse(world.plan_text())
    return one


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    bare = BareRepo(tmp_path / "gitops.git")
    bare.commit({PATH: FIXTURE, "README.md": "gitops\n"}, "Add the reasoning-long Service\n")
    return bare


@pytest.fixture(autouse=True)
def _no_token_in_any_event(events: list[dict[str, Any]]) -> Iterator[None]:
    yield
    assert TOKEN not in repr(events)


@pytest.fixture(params=["github", "gitea", "gitlab"])
def flavor(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
async def fake(repo: BareRepo, flavor: str) -> AsyncIterator[FakeHost]:
    if flavor == "gitlab":  # no official OpenAPI description of GitLab's v4 API here: the double checks bodies
        async with FakeGitLab(repo, token=TOKEN) as lab:
            yield lab
        return
    async with FakeContentsHost(repo, flavor=flavor, token=TOKEN) as server:
        recorder = Recorder(spec("github"), "https://api.github.com") if flavor == "github" else \
            Recorder(spec("forgejo"), "http://127.0.0.1")
        server.validator = recorder
        yield server
        recorder.assert_clean()


def provider(flavor: str, fake: FakeHost, token: str = TOKEN) -> GitHost:
    if flavor == "gitlab":
        return GitLab(url="https://gitlab.example/acme/gitops.git", branch="main", token=token, api_url=fake.url)
    if flavor == "github":
        return GitHub(url="https://github.com/acme/gitops.git", branch="main", token=token, api_url=fake.url)
    return Gitea(url="https://codeberg.example/acme/gitops.git", branch="main", token=token, api_url=fake.url)


@pytest.fixture
async def host(fake: FakeHost, flavor: str) -> AsyncIterator[GitHost]:
    client = provider(flavor, fake)
    yield client
    await client.aclose()


def text(the_plan: plan.Plan, to: str = "candle") -> str:
    return writeback.message(the_plan, proof=None, trailers=Trailers(
        id="c0ffee", source="vllm", to=to, plan=the_plan.name, service_uid="uid-1", cluster_ip="10.96.40.17"))


def cutover_commits(repo: BareRepo) -> list[str]:
    return [entry.message.split("\n", 1)[0] for entry in repo.log(PATH) if entry.message.startswith("cutover(")]


@pytest.mark.parametrize("flavor", ["github", "gitea"])
async def test_every_ref_and_path_segment_reaches_the_host_escaped(fake: FakeHost, flavor: str) -> None:
    """A branch holding URL syntax ('#') stays one segment of its place in the URL (unescaped, '#1' became a
    fragment and the branch `cutover/feature` was asked for); one that would climb ('..') is refused before any
    request (issue: plan names reach hosting URLs unescaped)."""
    host = provider(flavor, fake)
    try:
        await host.scratch(PATH, FIXTURE, message="candidate\n", author=AUTHOR, branch="cutover/feature#1")
        branch_paths = [path for path in fake.raw_paths if "/cutover/feature" in path]
        assert branch_paths and all(path.endswith("/cutover/feature%231") for path in branch_paths), branch_paths
        before = len(fake.requests)
        for climbing in ("x/../../main", "a//b", "./main"):
            with pytest.raises(InvalidInput) as refused:
                await host.drop(climbing)
            assert refused.value.cause == "invalid_plan" and repr(climbing) in refused.value.message
        with pytest.raises(InvalidInput):
            await host.read("k8s/../../../etc/passwd")
        assert len(fake.requests) == before
    finally:
        await host.aclose()


async def test_read_gives_content_and_the_version_to_compare(host: GitHost, repo: BareRepo, flavor: str) -> None:
    version = await host.read(PATH)
    assert version.content == FIXTURE
    if flavor == "gitlab":  # the last commit that touched the file
        assert version.version == repo.log(PATH, limit=1)[0].sha
    else:  # the file's blob sha
        assert version.version == repo.read(PATH)[1]  # type: ignore[index]


async def test_a_snapshot_is_the_whole_tree_at_a_branch_or_a_commit(host: GitHost, repo: BareRepo, fake: FakeHost,
                                                                     tmp_path: Path, flavor: str) -> None:
    first = repo.head() or ""
    repo.commit({"k8s/apps/llm-serving/kustomization.yaml": "resources: [reasoning-long-service.yaml]\n"},
                "kustomize\n")
    now = await host.snapshot("main", tmp_path / "now")
    assert (now / PATH).read_text() == FIXTURE and (now / "README.md").read_text() == "gitops\n"
    assert (now / "k8s/apps/llm-serving/kustomization.yaml").exists()
    then = await host.snapshot(first, tmp_path / "then")
    assert (then / PATH).exists() and not (then / "k8s/apps/llm-serving/kustomization.yaml").exists()
    if isinstance(fake, FakeContentsHost) and flavor == "github":  # followed to codeload, without the token
        assert fake.codeload_requests and all("Authorization" not in r.headers for r in fake.codeload_requests)


async def test_a_snapshot_of_an_unknown_revision_is_not_found(host: GitHost, tmp_path: Path) -> None:
    with pytest.raises(GitError) as caught:
        await host.snapshot("0" * 40, tmp_path / "none")
    assert caught.value.cause == "git_not_found"


async def test_commit_changes_only_the_selector_with_message_and_trailers(
        host: GitHost, repo: BareRepo, the_plan: plan.Plan, events: list[dict[str, Any]]) -> None:
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed and result.attempts == 1
    (newest, *_) = repo.log(PATH)
    assert newest.sha == result.sha and (newest.name, newest.email) == ("cutover", "cutover@example.invalid")
    assert newest.message.startswith("cutover(reasoning-long-predictor): vllm -> candle\n\n")
    assert "Cutover-Id: c0ffee\nCutover-From: vllm\nCutover-To: candle\nCutover-Plan: reasoning-long\n" \
           "Cutover-Service-Uid: uid-1\nCutover-Cluster-Ip: 10.96.40.17" in newest.message
    content, _ = repo.read(PATH)  # type: ignore[misc]
    assert content == FIXTURE.replace(
        "    app.kubernetes.io/name: llm-reasoning             # the vLLM deployment\n",
        "    app.kubernetes.io/name: llm-reasoning-candle             # the vLLM deployment\n").replace(
        "    serving.kserve.io/inferenceservice: reasoning     # KServe's own label on the vLLM pods\n", "")
    assert named(events, "git.committed")[0]["commit"] == result.sha
    assert TOKEN not in newest.message


async def test_a_second_run_commits_nothing_and_names_the_commit(host: GitHost, repo: BareRepo,
                                                                the_plan: plan.Plan) -> None:
    first = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    again = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert not again.committed and again.sha == first.sha
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]


@pytest.mark.looptime
async def test_someone_commits_elsewhere_in_the_file_between_read_and_write(
        host: GitHost, fake: FakeHost, repo: BareRepo, the_plan: plan.Plan,
        events: list[dict[str, Any]]) -> None:
    def other_writer() -> None:
        content, _ = repo.read(PATH)  # type: ignore[misc]
        repo.commit({PATH: content.replace("port: 80 ", "port: 80 ")
                     .replace("# Ports:", "# Ports (reviewed):")}, "docs: clarify ports\n")

    fake.before_write = other_writer
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed and result.attempts == 2
    assert [e["attempt"] for e in named(events, "git.conflict_retry")] == [1]
    content, _ = repo.read(PATH)  # type: ignore[misc]
    assert "# Ports (reviewed):" in content and "llm-reasoning-candle" in content  # both changes kept
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]


@pytest.mark.looptime
async def test_someone_else_sets_the_same_selector_first(host: GitHost, fake: FakeHost, repo: BareRepo,
                                                        the_plan: plan.Plan) -> None:
    def other_cutover() -> None:
        content, _ = repo.read(PATH)  # type: ignore[misc]
        from cutover.sources import yaml_edit

        edit = yaml_edit.edit_selector(content, document=the_plan.git.document, selector_path="spec.selector",
                                      selector=the_plan.backends["candle"].selector)
        repo.commit({PATH: edit.after}, text(the_plan), name="cutover", email="cutover@example.invalid")

    fake.before_write = other_cutover
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert not result.committed
    assert len(cutover_commits(repo)) == 1  # never two for one cutover


@pytest.mark.looptime
async def test_someone_sets_a_different_selector_stops_with_who_and_where(
        host: GitHost, fake: FakeHost, repo: BareRepo, the_plan: plan.Plan) -> None:
    def hand_edit() -> None:
        content, _ = repo.read(PATH)  # type: ignore[misc]
        repo.commit({PATH: content.replace("component: predictor", "component: canary")},
                    "Try the canary pods\n", name="Jo Operator", email="jo@example.invalid")

    fake.before_write = hand_edit
    with pytest.raises(GitError) as caught:
        await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert caught.value.cause == "git_conflict" and caught.value.exit_code == 5
    assert "component=canary" in caught.value.message
    assert "by Jo Operator <jo@example.invalid> ('Try the canary pods')" in caught.value.message
    assert cutover_commits(repo) == []


@pytest.mark.looptime
@pytest.mark.parametrize("fault", [
    Fault("WRITE", 502),
    Fault("GET", 503),
    Fault("GET", 429, {"Retry-After": "7"}),
    Fault("WRITE", 403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "0"},
          {"message": "API rate limit exceeded", "documentation_url": "https://docs.github.com/rest"}),
    Fault("WRITE", 0, reset_connection=True),
], ids=["write-502", "read-503", "read-429-retry-after", "write-403-rate-limit", "write-connection-reset"])
async def test_transient_failures_are_retried_and_commit_once(host: GitHost, fake: FakeHost, repo: BareRepo,
                                                              the_plan: plan.Plan, fault: Fault,
                                                              events: list[dict[str, Any]]) -> None:
    write = "POST" if isinstance(fake, FakeGitLab) else "PUT"
    fake.faults.append(dataclasses.replace(fault, method=write if fault.method == "WRITE" else fault.method))
    loop = asyncio.get_running_loop()
    start = loop.time()
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed
    assert len(cutover_commits(repo)) == 1
    (retry,) = named(events, "git.retry")
    if fault.headers.get("Retry-After"):
        assert loop.time() - start == pytest.approx(7, abs=0.5)  # waited as asked
        assert retry["next_in"] == 7


@pytest.mark.parametrize(("status", "cause", "hint"), [
    (401, "git_auth", "scopes"),
    (404, "git_not_found", "git.url, git.branch and git.path"),
])
async def test_permanent_failures_exit_5_with_a_hint(host: GitHost, fake: FakeHost, the_plan: plan.Plan,
                                                     status: int, cause: str, hint: str) -> None:
    fake.faults.append(Fault("GET", status))
    with pytest.raises(GitError) as caught:
        await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert (caught.value.cause, caught.value.exit_code) == (cause, 5) and hint in caught.value.hint
    assert TOKEN not in str(caught.value) + caught.value.hint


async def test_an_expired_token_is_an_auth_error(fake: FakeHost, flavor: str, the_plan: plan.Plan) -> None:
    stale = provider(flavor, fake, token="ghp_" + "0" * 36)
    try:
        with pytest.raises(GitError) as caught:
            await writeback.commit_selector(stale, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    finally:
        await stale.aclose()
    assert caught.value.cause == "git_auth"


@pytest.mark.looptime
async def test_a_file_that_never_stops_changing_gives_up_after_ten_tries(
        host: GitHost, fake: FakeHost, repo: BareRepo, the_plan: plan.Plan,
        events: list[dict[str, Any]]) -> None:
    counter = iter(range(1000))

    def busy_writer() -> None:
        content, _ = repo.read(PATH)  # type: ignore[misc]
        repo.commit({PATH: content + f"# touch {next(counter)}\n"}, "bot: touch\n")
        fake.before_write = busy_writer

    fake.before_write = busy_writer
    loop = asyncio.get_running_loop()
    start = loop.time()
    with pytest.raises(GitError) as caught:
        await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert caught.value.cause == "git_conflict" and "10 compare-and-swap attempts" in caught.value.message
    assert len(named(events, "git.conflict_retry")) == 9
    assert 1 + 1.5 + 2.25 < loop.time() - start < 9 * 30 + 5  # backoff 1 s × 1.5, capped at 30 s
    assert cutover_commits(repo) == []


async def test_the_contract_check_catches_a_request_github_would_refuse(repo: BareRepo) -> None:
    import httpx

    async with FakeContentsHost(repo, token=TOKEN) as server:
        recorder = Recorder(spec("github"), "https://api.github.com")
        server.validator = recorder
        async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"}) as client:
            await client.put(f"/repos/acme/gitops/contents/{PATH}", json={"message": "no content", "sha": 5})
            await client.get(f"/repos/acme/gitops/contents/{PATH}", params={"ref": "main"})
    assert recorder.checked == 2
    (violation,) = recorder.violations
    assert violation.startswith("PUT /repos/acme/gitops/contents/")


async def test_a_commit_to_another_file_between_read_and_write_is_no_conflict(
        host: GitHost, fake: FakeHost, repo: BareRepo, the_plan: plan.Plan, events: list[dict[str, Any]]) -> None:
    fake.before_write = lambda: repo.commit({"README.md": "gitops, reviewed\n"}, "docs: README\n")
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed and result.attempts == 1 and named(events, "git.conflict_retry") == []
    assert repo.read("README.md")[0] == "gitops, reviewed\n"  # type: ignore[index]
    assert "llm-reasoning-candle" in repo.read(PATH)[0]  # type: ignore[index]


# --- pull-request mode ----------------------------------------------------------------------------------

def pr_plan(the_plan: plan.Plan) -> plan.Plan:
    return dataclasses.replace(the_plan, git=dataclasses.replace(the_plan.git, mode="pull-request"))


@pytest.mark.looptime
async def test_pull_request_mode_opens_one_request_and_waits_for_the_merge(
        host: GitHost, fake: FakeHost, repo: BareRepo, the_plan: plan.Plan, events: list[dict[str, Any]]) -> None:
    reviewed = pr_plan(the_plan)

    async def reviewer() -> None:
        await asyncio.sleep(95)
        fake.merge(1)

    review = asyncio.create_task(reviewer())
    loop = asyncio.get_running_loop()
    start = loop.time()
    result = await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR)
    await review
    assert result.committed and result.change is not None and result.url == result.change.url
    assert result.change.branch == "cutover/reasoning-long-to-candle"
    assert result.sha == repo.head() == fake.pulls[1].merge_sha
    assert loop.time() - start == pytest.approx(120, abs=1)  # looked every 30 s: 0, 30, 60, 90, 120
    assert len(named(events, "git.change_waiting")) == 4
    assert list(fake.pulls) == [1] and fake.pulls[1].title == "cutover(reasoning-long-predictor): vllm -> candle"
    assert "Cutover-To: candle" in fake.pulls[1].body
    content, _ = repo.read(PATH)  # type: ignore[misc]
    assert "llm-reasoning-candle" in content
    again = await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR)
    assert not again.committed and list(fake.pulls) == [1]  # merged: nothing more to open


@pytest.mark.looptime
async def test_a_rerun_finds_its_open_pull_request(host: GitHost, fake: FakeHost, repo: BareRepo,
                                                   the_plan: plan.Plan) -> None:
    reviewed = pr_plan(the_plan)
    with pytest.raises(GitError) as caught:
        await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR,
                                        merge_wait=60)
    assert caught.value.cause == "git_change_pending" and "merge it, then re-run" in caught.value.hint
    fake.merge(1)
    result = await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed),
                                             author=AUTHOR)
    assert not result.committed  # the merge already put the selector on the base branch
    assert list(fake.pulls) == [1]


@pytest.mark.looptime
async def test_in_a_pod_the_branches_cutover_makes_are_its_own_workloads(host: GitHost, fake: FakeHost,
                                                                        repo: BareRepo, the_plan: plan.Plan) -> None:
    """The review's N10: a plan names its branches by metadata.name, which another workload's plan may share; in a
    pod they sit under the pod's own namespace (one per workload), so no plan can reset another's."""
    reviewed = dataclasses.replace(pr_plan(the_plan), branch_scope="cutover-chat/")
    with pytest.raises(GitError):
        await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR,
                                        merge_wait=30)
    assert fake.pulls[1].head == "cutover/cutover-chat/reasoning-long-to-candle"
    assert repo.head("cutover/cutover-chat/reasoning-long-to-candle") is not None
    assert repo.head("cutover/reasoning-long-to-candle") is None
    assert reviewed.branch("check-reasoning-long") == "cutover/cutover-chat/check-reasoning-long"


@pytest.mark.looptime
async def test_a_rerun_while_the_request_is_open_waits_on_the_same_one(host: GitHost, fake: FakeHost,
                                                                       the_plan: plan.Plan) -> None:
    reviewed = pr_plan(the_plan)
    with pytest.raises(GitError):
        await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR,
                                        merge_wait=30)

    async def reviewer() -> None:
        await asyncio.sleep(40)
        fake.merge(1)

    review = asyncio.create_task(reviewer())
    result = await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR)
    await review
    assert result.committed and list(fake.pulls) == [1]


@pytest.mark.looptime
async def test_a_closed_pull_request_stops_with_exit_5(host: GitHost, fake: FakeHost, the_plan: plan.Plan) -> None:
    reviewed = pr_plan(the_plan)

    async def reviewer() -> None:
        await asyncio.sleep(31)
        fake.close(1)

    review = asyncio.create_task(reviewer())
    with pytest.raises(GitError) as caught:
        await writeback.commit_selector(host, reviewed, to_backend="candle", text=text(reviewed), author=AUTHOR)
    await review
    assert (caught.value.cause, caught.value.exit_code) == ("git_change_closed", 5)


def test_the_commit_message_carries_the_proof_and_every_trailer(the_plan: plan.Plan) -> None:
    proof = writeback.Proof(pods=("candle-0 (10.0.0.5:8080)", "candle-1 (10.0.0.6:8080)"),
                            names=("reasoning-long", "reasoning"), method="generate", waited=712.4,
                            proven_at="2026-11-29T23:00:00Z")
    message = writeback.message(the_plan, proof=proof, trailers=Trailers(
        id="c0ffee", source="candle", to="vllm", plan=the_plan.name, service_uid="uid-1", cluster_ip="10.96.40.17",
        hold="vllm"))
    assert message == (
        "cutover(reasoning-long-predictor): candle -> vllm\n\n"
        "Proven 2026-11-29T23:00:00Z: 2 Ready pod(s) answered reasoning-long, reasoning (generate) after "
        "waiting 712s.\nPods: candle-0 (10.0.0.5:8080), candle-1 (10.0.0.6:8080)\n\n"
        "Cutover-Id: c0ffee\nCutover-From: candle\nCutover-To: vllm\nCutover-Plan: reasoning-long\n"
        "Cutover-Service-Uid: uid-1\nCutover-Cluster-Ip: 10.96.40.17\nCutover-Hold: vllm\n")
    assert Trailers.parse(message).as_dict() == {"Cutover-Id": "c0ffee", "Cutover-From": "candle", "Cutover-To": "vllm",
                                 "Cutover-Plan": "reasoning-long", "Cutover-Service-Uid": "uid-1",
                                 "Cutover-Cluster-Ip": "10.96.40.17", "Cutover-Hold": "vllm"}


def test_the_commit_message_carries_the_fitness_table_before_the_trailers(the_plan: plan.Plan) -> None:
    table = proofs.table(proofs.Side("candle", ready=1, context=40960, p50=0.3, max=0.4, warmup=240.0),
                          proofs.Side("vllm", ready=1, context=32768, p50=0.4, max=0.5))
    proof = writeback.Proof(pods=("candle-0 (10.0.0.5:8080)",), names=("reasoning-long",), method="generate",
                            waited=700.0, proven_at="2026-11-29T23:00:00Z", table=table)
    message = writeback.message(the_plan, proof=proof, trailers=Trailers(id="c0ffee", source="vllm", to="candle",
                                                                          plan=the_plan.name))
    body = message.split("\n\n")
    assert "Fitness (verify.fitness):\n" + "\n".join(f"    {line}" for line in table) in message
    assert body[-1].startswith("Cutover-Id: c0ffee\n")  # the trailers stay the last paragraph
    assert Trailers.parse(message).as_dict() == {"Cutover-Id": "c0ffee", "Cutover-From": "vllm",
                                                 "Cutover-To": "candle", "Cutover-Plan": "reasoning-long"}


async def test_a_scratch_branch_holds_a_candidate_and_goes_again(host: GitHost, repo: BareRepo) -> None:
    head = repo.head()
    sha = await host.scratch(PATH, FIXTURE.replace("llm-reasoning ", "llm-reasoning-candle "), message="candidate\n",
                             author=AUTHOR, branch="cutover/check-reasoning-long")
    assert repo.head("cutover/check-reasoning-long") == sha and repo.head() == head  # the base branch untouched
    content, _ = repo.read(PATH, sha)  # type: ignore[misc]
    assert "llm-reasoning-candle" in content
    again = await host.scratch(PATH, FIXTURE, message="candidate\n", author=AUTHOR,
                               branch="cutover/check-reasoning-long")  # a leftover branch is made anew
    assert repo.head("cutover/check-reasoning-long") == again
    await host.drop("cutover/check-reasoning-long")
    assert repo.head("cutover/check-reasoning-long") is None and repo.head() == head


@pytest.mark.looptime
async def test_a_host_nobody_answers_is_named_with_what_to_check() -> None:
    """A connection that fails names the host and port and says DNS, egress, proxy (it hinted "the Git host is
    overloaded", naming nothing)."""
    client = GitHub(url="https://github.example/acme/gitops.git", branch="main", token="t",
                    api_url="http://127.0.0.1:9")  # nothing listens on port 9
    try:
        with pytest.raises(GitError) as caught:
            await client.read("k8s/service.yaml")
    finally:
        await client.aclose()
    assert caught.value.cause == "git_host_unavailable"
    assert "no connection to 127.0.0.1:9 (ConnectError" in caught.value.message
    assert "127.0.0.1:9 did not answer" in caught.value.hint and "DNS" in caught.value.hint
    assert "egress" in caught.value.hint and "proxy" in caught.value.hint
