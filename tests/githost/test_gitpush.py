"""Plain Git over smart HTTP against Git's own `git http-backend` with Basic auth, and over SSH against
OpenSSH's server: fetch, edit, commit, push; a rejected push re-applies the edit on the new head; the
token never leaves the environment; host keys are always checked."""

from __future__ import annotations

import shlex
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cutover import plan
from cutover.core.repository import Author
from cutover.core.trailers import Trailers
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.errors import GitError
from cutover.flows import writeback
from cutover.githost import gitpush
from cutover.githost.base import HostUnavailable
from cutover.githost.gitpush import GitPush
from cutover.sources import yaml_edit
from doubles.githttp import GitHttpServer
from doubles.gitssh import SshGitServer
from helpers import named

TOKEN = "glpat-" + "S" * 24
FIXTURE = (Path(__file__).parent.parent / "fixtures" / "reasoning-long-service.yaml").read_text()
PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"
AUTHOR = Author("cutover", "cutover@example.invalid")


@pytest.fixture
def the_plan() -> plan.Plan:
    world = World.__new__(World)
    world.port = 8080
    (one,) = plan.parse(world.plan_text())
    return one


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    bare = BareRepo(tmp_path / "gitops.git")
    bare.commit({PATH: FIXTURE, "README.md": "gitops\n"}, "Add the reasoning-long Service\n")
    return bare


@pytest.fixture
async def server(tmp_path: Path, repo: BareRepo) -> AsyncIterator[GitHttpServer]:
    async with GitHttpServer(tmp_path, username="x-access-token", password=TOKEN) as git_server:
        yield git_server


@pytest.fixture
async def host(server: GitHttpServer) -> AsyncIterator[GitPush]:
    client = GitPush(url=f"{server.url}/gitops.git", branch="main", token=TOKEN)
    yield client
    await client.aclose()


def text(the_plan: plan.Plan) -> str:
    return writeback.message(the_plan, proof=None, trailers=Trailers(id="c0ffee", source="vllm", to="candle",
                                                                     plan=the_plan.name))


def cutover_commits(repo: BareRepo) -> list[str]:
    return [e.message.split("\n", 1)[0] for e in repo.log(PATH) if e.message.startswith("cutover(")]


async def test_fetch_edit_commit_push(host: GitPush, server: GitHttpServer, repo: BareRepo,
                                      the_plan: plan.Plan) -> None:
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed and repo.head() == result.sha
    content, _ = repo.read(PATH)  # type: ignore[misc]
    assert yaml_edit.read_selector(content, document=the_plan.git.document,
                                  selector_path="spec.selector") == the_plan.backends["candle"].selector
    assert content.splitlines()[:30] == FIXTURE.splitlines()[:30]
    (newest, *_) = repo.log(PATH)
    assert (newest.name, newest.email) == ("cutover", "cutover@example.invalid")
    assert "Cutover-To: candle" in newest.message
    assert any(auth for _, _, auth in server.requests)  # the token went over the wire, as Basic auth


async def test_a_second_run_pushes_nothing(host: GitPush, repo: BareRepo, the_plan: plan.Plan) -> None:
    first = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    again = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert not again.committed and again.sha == first.sha
    assert cutover_commits(repo) == ["cutover(reasoning-long-predictor): vllm -> candle"]


@pytest.mark.looptime
async def test_a_rejected_push_reapplies_the_edit_on_the_new_head(
        host: GitPush, server: GitHttpServer, repo: BareRepo, the_plan: plan.Plan,
        events: list[dict[str, Any]]) -> None:
    def other_writer() -> None:
        content, _ = repo.read(PATH)  # type: ignore[misc]
        repo.commit({PATH: content.replace("# Ports:", "# Ports (reviewed):")}, "docs: clarify ports\n")

    server.before_push = other_writer
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed and result.attempts == 2
    assert len(named(events, "git.conflict_retry")) == 1
    content, _ = repo.read(PATH)  # type: ignore[misc]
    assert "# Ports (reviewed):" in content and "llm-reasoning-candle" in content
    assert [e.message.split("\n")[0] for e in repo.log()][:2] == [
        "cutover(reasoning-long-predictor): vllm -> candle", "docs: clarify ports"]


@pytest.mark.looptime
async def test_a_failing_server_is_retried(host: GitPush, server: GitHttpServer, repo: BareRepo,
                                           the_plan: plan.Plan, events: list[dict[str, Any]]) -> None:
    server.fail_next = [503]
    result = await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    assert result.committed and len(named(events, "git.retry")) == 1


async def test_a_wrong_token_is_an_auth_error_that_never_shows_the_token(server: GitHttpServer,
                                                                         the_plan: plan.Plan) -> None:
    wrong = "glpat-" + "W" * 24
    client = GitPush(url=f"{server.url}/gitops.git", branch="main", token=wrong)
    try:
        with pytest.raises(GitError) as caught:
            await writeback.commit_selector(client, the_plan, to_backend="candle", text=text(the_plan),
                                            author=AUTHOR)
    finally:
        await client.aclose()
    assert caught.value.cause == "git_auth" and caught.value.exit_code == 5
    assert wrong not in caught.value.message


async def test_the_token_is_in_no_file_url_or_config(host: GitPush, the_plan: plan.Plan) -> None:
    await writeback.commit_selector(host, the_plan, to_backend="candle", text=text(the_plan), author=AUTHOR)
    for path in host.work.rglob("*"):
        if path.is_file():
            assert TOKEN.encode() not in path.read_bytes(), path
    assert TOKEN not in await host.git("remote", "get-url", "origin")


async def test_a_missing_repository_is_not_found(server: GitHttpServer, the_plan: plan.Plan) -> None:
    client = GitPush(url=f"{server.url}/nothing-here.git", branch="main", token=TOKEN)
    try:
        with pytest.raises(GitError) as caught:
            await writeback.commit_selector(client, the_plan, to_backend="candle", text=text(the_plan),
                                            author=AUTHOR)
    finally:
        await client.aclose()
    assert caught.value.cause == "git_not_found" and "check git.url" in caught.value.hint


async def test_a_redirect_to_another_host_is_refused_and_only_the_origin_sees_the_token(
        server: GitHttpServer, the_plan: plan.Plan) -> None:
    """`localhost` and `127.0.0.1` are one server but two origins: git's default follows the first redirect and
    then asks for credentials for the host it landed on, which an askpass that answers everything would give."""
    port = server.url.rsplit(":", 1)[1]
    server.moved_to = f"http://localhost:{port}"  # 127.0.0.1 answers 302 to localhost
    client = GitPush(url=f"{server.url}/gitops.git", branch="main", token=TOKEN)
    try:
        with pytest.raises(GitError) as caught:
            await writeback.commit_selector(client, the_plan, to_backend="candle", text=text(the_plan),
                                            author=AUTHOR)
    finally:
        await client.aclose()
    assert caught.value.cause == "git_redirect" and caught.value.exit_code == 5 and "git.url" in caught.value.hint
    assert {host for host, _ in server.hosts} == {f"127.0.0.1:{port}"}  # never followed
    assert [auth for _, auth in server.hosts] == [None] * len(server.hosts)


@pytest.mark.parametrize(("prompt", "answer"), [
    ("Username for 'http://127.0.0.1:8080': ", "x-access-token"),
    ("Password for 'http://x-access-token@127.0.0.1:8080': ", TOKEN),
    ("Username for 'http://localhost:8080': ", None),
    ("Password for 'http://x-access-token@127.0.0.1:8081': ", None),
    ("Password for 'https://x-access-token@127.0.0.1:8080': ", None),
    ("Password for 'http://x-access-token@evil.example/127.0.0.1:8080': ", None),
])
def test_the_askpass_answers_for_the_origin_only(prompt: str, answer: str | None) -> None:
    """The program git runs for credentials, run as git runs it: the token only for the configured origin."""
    client = GitPush(url="http://127.0.0.1:8080/gitops.git", branch="main", token=TOKEN)
    try:
        done = subprocess.run([client.env["GIT_ASKPASS"], prompt], env=client.env, capture_output=True, text=True,
                              check=False)
    finally:
        shutil.rmtree(client.work)
    assert (done.stdout.rstrip("\n") if done.returncode == 0 else None) == answer


# --- over SSH ---------------------------------------------------------------------------------------------

@pytest.fixture
async def ssh_server(tmp_path: Path, repo: BareRepo) -> AsyncIterator[SshGitServer]:
    async with SshGitServer(tmp_path, workdir=tmp_path / "sshd") as server:
        yield server


async def test_over_ssh_with_a_deploy_key_and_known_hosts(ssh_server: SshGitServer, repo: BareRepo,
                                                          the_plan: plan.Plan) -> None:
    key = ssh_server.client_key
    key.chmod(0o644)  # as a Secret volume mounts it: the provider must still make ssh accept it
    client = GitPush(url=ssh_server.url("gitops.git"), branch="main", ssh_key=key,
                     known_hosts=ssh_server.known_hosts)
    try:
        result = await writeback.commit_selector(client, the_plan, to_backend="candle", text=text(the_plan),
                                                 author=AUTHOR)
    finally:
        await client.aclose()
    assert result.committed and repo.head() == result.sha
    assert "llm-reasoning-candle" in repo.read(PATH)[0]  # type: ignore[index]
    assert "git-receive-pack" in {command.split()[0] for command in ssh_server.commands}  # pushed over SSH


async def test_over_ssh_an_unknown_host_key_is_refused(ssh_server: SshGitServer, tmp_path: Path,
                                                       the_plan: plan.Plan) -> None:
    stranger = tmp_path / "other_known_hosts"
    stranger.write_text(f"[127.0.0.1]:{ssh_server.port} ssh-ed25519 "
                        "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
    client = GitPush(url=ssh_server.url("gitops.git"), branch="main", ssh_key=ssh_server.client_key,
                     known_hosts=stranger)
    try:
        with pytest.raises(GitError) as caught:
            await writeback.commit_selector(client, the_plan, to_backend="candle", text=text(the_plan),
                                            author=AUTHOR)
    finally:
        await client.aclose()
    assert caught.value.cause == "git_host_key" and "does not match known_hosts" in caught.value.message


def test_over_ssh_without_known_hosts_nothing_starts(tmp_path: Path) -> None:
    key = tmp_path / "key"
    key.write_text("not a key")
    with pytest.raises(GitError) as caught:
        GitPush(url="ssh://git@example.invalid/acme/gitops.git", branch="main", ssh_key=key,
                known_hosts=tmp_path / "absent")
    assert caught.value.cause == "git_ssh_setup"


async def test_a_snapshot_is_the_tree_at_the_branch_or_a_commit(host: GitPush, repo: BareRepo, tmp_path: Path) -> None:
    first = repo.head() or ""
    repo.commit({"README.md": "moved on\n"}, "docs\n")
    assert (await host.snapshot("main", tmp_path / "now") / "README.md").read_text() == "moved on\n"
    then = await host.snapshot(first[:7], tmp_path / "then")
    assert (then / "README.md").read_text() == "gitops\n" and (then / PATH).read_text() == FIXTURE


async def test_a_scratch_branch_is_pushed_and_deleted(host: GitPush, repo: BareRepo) -> None:
    head = repo.head()
    sha = await host.scratch(PATH, FIXTURE + "# candidate\n", message="candidate\n", author=AUTHOR,
                             branch="cutover/check")
    assert repo.head("cutover/check") == sha and repo.head() == head
    await host.drop("cutover/check")
    assert repo.head("cutover/check") is None


async def test_history_pages_past_the_shallow_fetch(host: GitPush, repo: BareRepo) -> None:
    for number in range(60):  # beyond the 50 commits the first fetch brings
        repo.commit({"README.md": f"gitops {number}\n", PATH: FIXTURE + f"# {number}\n"}, f"docs {number}\n")
    first = await host.history(PATH, limit=20)
    third = await host.history(PATH, limit=20, page=3)
    fourth = await host.history(PATH, limit=20, page=4)
    assert [c.title for c in first][:2] == ["docs 59", "docs 58"]
    assert [c.title for c in third][-1] == "docs 0" and [c.title for c in fourth] == [
        "Add the reasoning-long Service"]


async def test_a_message_with_any_byte_but_nul_keeps_the_history_readable(host: GitPush, repo: BareRepo) -> None:
    """A person's message holding \\x1e (the old record separator) once broke the parse for every later run."""
    repo.commit({PATH: FIXTURE + "# tuned\n"}, "tune\x1eit\n\nCutover-Hold: vllm\n")
    repo.commit({PATH: FIXTURE + "# again\n"}, "again\n")
    commits = await host.history(PATH, limit=5)
    assert [c.title for c in commits] == ["again", "tune\x1eit", "Add the reasoning-long Service"]
    assert commits[1].trailers.hold == "vllm" and all(len(c.sha) == 40 for c in commits)


@pytest.mark.looptime  # the retries' waits in fake time; git and its kill timer in real time
async def test_a_git_server_that_stops_answering_is_given_up_on(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """git has no deadline of its own over HTTP: each command is killed after GIT_TIMEOUT, then retried."""
    monkeypatch.setattr(gitpush, "GIT_TIMEOUT", 0.5)
    listener = socket.create_server(("127.0.0.1", 0))  # accepts (the kernel's backlog) and never answers
    client = GitPush(url=f"http://127.0.0.1:{listener.getsockname()[1]}/gitops.git", branch="main", token=TOKEN)
    try:
        with pytest.raises(HostUnavailable) as caught:
            await client.read(PATH)
    finally:
        await client.aclose()
        listener.close()
    assert "no end within 0.5s" in caught.value.message


def test_the_ssh_command_quotes_its_paths_and_bounds_a_quiet_server(tmp_path: Path) -> None:
    key, known = tmp_path / "deploy key", tmp_path / "my hosts" / "known_hosts"
    key.write_text("not a key")
    known.parent.mkdir()
    known.write_text("[127.0.0.1]:22 ssh-ed25519 AAAA\n")
    client = GitPush(url="ssh://git@example.invalid/acme/gitops.git", branch="main", ssh_key=key, known_hosts=known)
    words = shlex.split(client.env["GIT_SSH_COMMAND"])
    assert f"UserKnownHostsFile={known}" in words
    assert {"ConnectTimeout=10", "ServerAliveInterval=15", "ServerAliveCountMax=2"} <= set(words)


async def test_a_file_past_any_gitops_file_stops_at_the_cap_instead_of_filling_memory(
        host: GitPush, repo: BareRepo) -> None:
    """git's output is read under a cap (16 MiB for a file, 32 MiB for an archive): a repository whose selector file
    someone swelled is `git_archive_too_large`, said once, and git is stopped there."""
    repo.commit({PATH: "# " + "x" * (17 << 20) + "\n"}, "a very large comment\n")
    with pytest.raises(GitError) as caught:
        await host.read(PATH)
    assert caught.value.cause == "git_archive_too_large"
    assert "git show: its output passed 16 MiB" in caught.value.message
