"""Private certificate authorities, against doubles that serve real TLS with a test CA (trustme): the Git
hosting API, plain git (libcurl), the ArgoCD API and Slack each trust `git.caFile` or `SSL_CERT_FILE` and
nothing they should not; an untrusted certificate is a precise, unretried error; a bad CA file is exit 2."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from cutover import trust
from cutover.argocd.api import ArgoCDApi
from cutover.demo import argocd as sim_argocd
from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from cutover.demo.world import World
from cutover.errors import ClusterError, GitError, InvalidInput
from cutover.githost.github import GitHub
from cutover.githost.gitpush import GitPush
from cutover.plan import ArgoCD
from cutover.slack.blocks import Message
from cutover.slack.transports import Webhook
from doubles.argocd_api import FakeArgoCDApi
from doubles.githttp import GitHttpServer
from doubles.slack import FakeSlack
from helpers import named

TOKEN = "ghp_" + "T" * 36
PATH = "k8s/svc.yaml"


@pytest.fixture
def authority() -> trustme.CA:
    return trustme.CA(organization_name="cutover test CA")


@pytest.fixture
def served(authority: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    authority.issue_cert("127.0.0.1", "localhost").configure_cert(context)
    return context


@pytest.fixture
def ca_file(authority: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    authority.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture(autouse=True)
def no_environment_ca(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    yield
    trust._contexts.clear()  # contexts are per process; a test's CA must not outlive it


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    bare = BareRepo(tmp_path / "gitops.git")
    bare.commit({PATH: "kind: Service\n"}, "Add the Service\n")
    return bare


@pytest.fixture
async def github(repo: BareRepo, served: ssl.SSLContext) -> AsyncIterator[FakeContentsHost]:
    fake = FakeContentsHost(repo, flavor="github", token=TOKEN)
    fake.ssl_context = served
    async with fake:
        yield fake


async def read_through(fake: FakeContentsHost, ca_file: str | None) -> str:
    host = GitHub(url="https://github.example/acme/gitops.git", branch="main", token=TOKEN, api_url=fake.url,
                  ca_file=ca_file)
    try:
        return (await host.read(PATH)).content
    finally:
        await host.aclose()


async def test_the_git_api_trusts_git_ca_file(github: FakeContentsHost, ca_file: str) -> None:
    assert github.url.startswith("https://")
    assert await read_through(github, ca_file) == "kind: Service\n"


async def test_the_git_api_trusts_ssl_cert_file(github: FakeContentsHost, ca_file: str,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    assert await read_through(github, None) == "kind: Service\n"


async def test_an_untrusted_certificate_is_git_tls_at_once(github: FakeContentsHost,
                                                           events: list[dict[str, Any]]) -> None:
    with pytest.raises(GitError) as caught:
        await read_through(github, None)
    assert caught.value.cause == "git_tls" and caught.value.exit_code == 5
    assert "not trusted" in caught.value.message and "git.caFile" in caught.value.hint
    assert named(events, "git.retry") == [] and github.requests == []  # permanent: no retries, no request


async def test_plain_git_trusts_git_ca_file_and_refuses_without(tmp_path: Path, repo: BareRepo,
                                                                 served: ssl.SSLContext, ca_file: str) -> None:
    server = GitHttpServer(tmp_path, username="x-access-token", password=TOKEN)
    server.ssl_context = served
    async with server:
        trusting = GitPush(url=f"{server.url}/gitops.git", branch="main", token=TOKEN, ca_file=ca_file)
        doubting = GitPush(url=f"{server.url}/gitops.git", branch="main", token=TOKEN)
        try:
            assert (await trusting.read(PATH)).content == "kind: Service\n"
            with pytest.raises(GitError) as caught:
                await doubting.read(PATH)
        finally:
            await trusting.aclose()
            await doubting.aclose()
    assert caught.value.cause == "git_tls" and "git.caFile" in caught.value.hint
    assert all(auth is not None for _, _, auth in server.requests[1:])  # the trusting one: fetched with the token


async def test_the_argocd_api_trusts_ssl_cert_file_only(world: World, repo: BareRepo, served: ssl.SSLContext,
                                                        ca_file: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sim_argocd.seed_application(world, revision=repo.head())
    api = FakeArgoCDApi(world, repo, token=TOKEN)
    api.ssl_context = served
    async with api:
        settings = ArgoCD(application="llm-serving", server=api.url)
        doubting = ArgoCDApi(settings, token=TOKEN)
        with pytest.raises(ClusterError) as caught:
            await doubting.manifests("main")
        await doubting.aclose()
        monkeypatch.setenv("SSL_CERT_FILE", ca_file)
        trusting = ArgoCDApi(settings, token=TOKEN)
        try:
            await trusting.refresh()
        finally:
            await trusting.aclose()
    assert caught.value.cause == "argocd_tls" and "SSL_CERT_FILE" in caught.value.hint
    assert len(api.requests) == 1  # the trusting client's refresh; the doubting one never got past TLS


async def test_slack_trusts_ssl_cert_file(served: ssl.SSLContext, ca_file: str,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    slack = FakeSlack()
    slack.ssl_context = served
    monkeypatch.setenv("SSL_CERT_FILE", ca_file)
    async with slack:
        hook = Webhook(slack.webhook)
        try:
            await hook.send(Message(key="k", stage="run", event={"event": "cutover.done", "level": "info"}))
        finally:
            await hook.aclose()
    assert len(slack.posted) == 1


@pytest.mark.parametrize(("why", "content", "words"), [
    ("missing", None, "file not found"),
    ("not PEM", b"this is not a certificate\n", "expected PEM certificates"),
    ("a private key, not a certificate", b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
     "expected PEM certificates"),
])
def test_a_bad_ca_file_is_bad_input(tmp_path: Path, why: str, content: bytes | None, words: str) -> None:
    path = tmp_path / "ca.pem"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(InvalidInput) as caught:
        trust.git_env(str(path))
    assert caught.value.exit_code == 2 and caught.value.cause == "ca_file"
    assert caught.value.message.startswith(f"git.caFile {path}: ") and words in caught.value.message


def test_git_hears_the_same_as_httpx(ca_file: str) -> None:
    assert trust.git_env(ca_file) == {"GIT_SSL_CAINFO": ca_file}
    assert trust.git_env(None, environ={"SSL_CERT_FILE": ca_file}) == {"GIT_SSL_CAINFO": ca_file}
    assert trust.git_env(None, environ={"SSL_CERT_DIR": "/etc/ssl/certs"}) == {"GIT_SSL_CAPATH": "/etc/ssl/certs"}
    assert trust.git_env(None, environ={}) == {}
    assert trust.context(ca_file) is trust.context(ca_file)  # built once per CA set
