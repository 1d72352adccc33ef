"""Repository archives (the render's input): what a host's redirect may do with them, and with the token.

GitHub sends its tarballs from another host (codeload.github.com), so an archive's redirect is followed, but
with no credential at all, only from https to https, and a few times at most: httpx drops only `Authorization`
when a redirect leaves the origin, and GitLab's token travels as `PRIVATE-TOKEN`.
"""

from __future__ import annotations

import gzip
import io
import os
import ssl
import tarfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from aiohttp import web

from cutover.demo.gitrepo import BareRepo
from cutover.demo.hosts import serve_local
from cutover.errors import GitError
from cutover.githost.base import ARCHIVE_CAP, MEMBERS_CAP, UNPACKED_CAP, unpack
from cutover.githost.gitlab import GitLab
from doubles.gitlab import FakeGitLab
from helpers import named

TOKEN = "glpat-archive-token-not-to-travel"
PATH = "k8s/apps/llm-serving/reasoning-long-service.yaml"


@pytest.fixture
def repo(tmp_path: Path) -> BareRepo:
    made = BareRepo(tmp_path / "gitops.git")
    made.commit({PATH: "kind: Service\n"}, "seed\n")
    return made


class Elsewhere:
    """Another server a redirect points at: it records each request's headers and serves the archive."""

    def __init__(self, repo: BareRepo) -> None:
        self.repo = repo
        self.seen: list[dict[str, str]] = []
        self.url = ""
        self.body: bytes | None = None  # served instead of the repository's archive
        self.headers: dict[str, str] = {}  # sent besides

    async def _serve(self, request: web.Request) -> web.Response:
        self.seen.append(dict(request.headers))
        if request.path == "/loop":
            raise web.HTTPFound(f"{self.url}/loop")
        body = self.body if self.body is not None else self.repo.archive("main", prefix="gitops-main")
        return web.Response(body=body, content_type="application/x-gzip", headers=self.headers)


@pytest.fixture
async def elsewhere(repo: BareRepo) -> AsyncIterator[Elsewhere]:
    other = Elsewhere(repo)
    app = web.Application()
    app.router.add_route("GET", "/{tail:.*}", other._serve)
    runner, other.url = await serve_local(app)
    yield other
    await runner.cleanup()


async def snapshot(repo: BareRepo, into: Path, *, moved_to: str, ssl_context: ssl.SSLContext | None = None,
                   ca_file: Path | None = None) -> Path:
    """cutover's GitLab provider taking the archive of main from a GitLab double whose archive answers 302
    to `moved_to` (over TLS with `ssl_context`, trusted through `ca_file`)."""
    lab = FakeGitLab(repo, token=TOKEN)
    lab.ssl_context = ssl_context
    async with lab:
        lab.archive_moved_to = moved_to
        host = GitLab(url="https://gitlab.example/acme/gitops.git", branch="main", token=TOKEN, api_url=lab.url,
                      ca_file=str(ca_file) if ca_file else None)
        try:
            return await host.snapshot("main", into)
        finally:
            await host.aclose()


async def test_a_redirected_archive_is_fetched_without_the_token(repo: BareRepo, elsewhere: Elsewhere,
                                                                 tmp_path: Path) -> None:
    tree = await snapshot(repo, tmp_path / "tree", moved_to=f"{elsewhere.url}/cdn/archive.tar.gz")
    assert (tree / PATH).read_text() == "kind: Service\n"
    assert len(elsewhere.seen) == 1
    assert TOKEN not in str(elsewhere.seen) and "PRIVATE-TOKEN" not in {k.upper() for k in elsewhere.seen[0]}


async def test_an_archive_redirect_is_followed_a_few_times_at_most(repo: BareRepo, elsewhere: Elsewhere,
                                                                  tmp_path: Path) -> None:
    with pytest.raises(GitError) as caught:
        await snapshot(repo, tmp_path / "tree", moved_to=f"{elsewhere.url}/loop")
    assert caught.value.cause == "git_redirect" and "more than 3 redirects" in caught.value.message
    assert len(elsewhere.seen) == 3


async def test_an_https_archive_is_never_followed_to_plain_http(repo: BareRepo, elsewhere: Elsewhere,
                                                                tmp_path: Path) -> None:
    ca = trustme.CA()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    ca_file = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    with pytest.raises(GitError) as caught:  # to http://127.0.0.1:…, a downgrade
        await snapshot(repo, tmp_path / "tree", moved_to=f"{elsewhere.url}/archive.tar.gz", ssl_context=context,
                       ca_file=ca_file)
    assert caught.value.cause == "git_redirect" and "http://127.0.0.1" in caught.value.message
    assert "https to https" in caught.value.hint
    assert elsewhere.seen == []  # not a byte went there


# --- what an archive may unpack to ------------------------------------------------------------------------

def tarball(*entries: tarfile.TarInfo, data: dict[str, bytes] | None = None) -> bytes:
    """A .tar.gz of `entries` under one top directory, as hosts make them."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for entry in entries:
            content = (data or {}).get(entry.name)
            tar.addfile(entry, io.BytesIO(content) if content is not None else None)
    return out.getvalue()


def entry(name: str, kind: bytes = tarfile.REGTYPE, *, size: int = 0, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(f"acme-gitops-0123456/{name}")
    info.type, info.size, info.linkname = kind, size, link
    return info


def sizes(tree: Path) -> int:
    return sum(p.lstat().st_size for p in tree.rglob("*"))


def test_a_link_loop_unpacks_to_the_files_alone(tmp_path: Path, events: list[dict[str, Any]]) -> None:
    """`a -> .`, `b -> .` once grew a copy without end (138 MB in 6 s): links are not unpacked at all."""
    archive = tarball(entry("k8s", tarfile.DIRTYPE), entry("k8s/service.yaml", size=14),
                      entry("k8s/a", tarfile.SYMTYPE, link="."), entry("k8s/b", tarfile.SYMTYPE, link="."),
                      entry("k8s/hard", tarfile.LNKTYPE, link="acme-gitops-0123456/k8s/service.yaml"),
                      data={"acme-gitops-0123456/k8s/service.yaml": b"kind: Service\n"})
    tree = unpack(archive, tmp_path / "tree", what="the archive of main")
    assert sorted(str(p.relative_to(tree)) for p in tree.rglob("*")) == ["k8s", "k8s/service.yaml"]
    assert not any(p.is_symlink() for p in tree.rglob("*"))
    (skipped,) = named(events, "git.archive_skipped")
    assert skipped["entries"] == 3


def test_a_single_link_is_skipped_not_an_internal_error(tmp_path: Path) -> None:
    archive = tarball(entry("README", tarfile.SYMTYPE, link="docs/README.md"))
    tree = unpack(archive, tmp_path / "tree", what="the archive of main")
    assert list(tree.iterdir()) == []


def test_a_tar_bomb_is_refused_before_its_bytes_are_written(tmp_path: Path) -> None:
    """255 KiB of gzip once wrote 256 MiB: the sizes the headers declare are counted before writing."""
    zeros = b"\0" * (UNPACKED_CAP // 2 + 1)
    archive = tarball(entry("one.bin", size=len(zeros)), entry("two.bin", size=len(zeros)),
                      data={"acme-gitops-0123456/one.bin": zeros, "acme-gitops-0123456/two.bin": zeros})
    assert len(archive) < 1 << 20  # a small download
    with pytest.raises(GitError) as caught:
        unpack(archive, tmp_path / "tree", what="the archive of main")
    assert caught.value.cause == "git_archive_too_large" and caught.value.exit_code == 5
    assert "more than 64 MiB unpacked" in caught.value.message and "smaller repository" in caught.value.hint
    assert sizes(tmp_path / "tree") <= UNPACKED_CAP // 2 + 1  # the second file never written


def test_an_archive_of_too_many_entries_is_refused(tmp_path: Path) -> None:
    archive = tarball(*(entry(f"f{i}") for i in range(MEMBERS_CAP + 1)))
    with pytest.raises(GitError) as caught:
        unpack(archive, tmp_path / "tree", what="the archive of main")
    assert caught.value.cause == "git_archive_too_large" and f"more than {MEMBERS_CAP} entries" in caught.value.message
    assert not (tmp_path / "tree").exists()  # refused before anything was written


def test_an_entry_that_climbs_out_refuses_the_archive(tmp_path: Path) -> None:
    archive = tarball(entry("../../etc/cron.d/x", size=2), data={"acme-gitops-0123456/../../etc/cron.d/x": b"x\n"})
    with pytest.raises(GitError) as caught:
        unpack(archive, tmp_path / "tree", what="the archive of main")
    assert caught.value.cause == "git_rejected" and "points outside the tree" in caught.value.message
    assert not (tmp_path / "etc").exists()


async def test_a_download_larger_than_the_cap_stops_there(repo: BareRepo, elsewhere: Elsewhere,
                                                          tmp_path: Path) -> None:
    """The archive goes to a temporary file, never whole into memory, and stops at ARCHIVE_CAP."""
    elsewhere.body = os.urandom(ARCHIVE_CAP + 1)
    with pytest.raises(GitError) as caught:
        await snapshot(repo, tmp_path / "tree", moved_to=f"{elsewhere.url}/big")
    assert caught.value.cause == "git_archive_too_large" and "larger than 32 MiB" in caught.value.message


async def test_an_archive_that_inflates_past_the_cap_in_transit_stops_there(repo: BareRepo, elsewhere: Elsewhere,
                                                                           tmp_path: Path) -> None:
    """A few hundred KiB with `Content-Encoding: gzip` that inflate to 64 MiB: inflated under ARCHIVE_CAP as it
    arrives (core/bounded.py), not chunk by chunk whole, and refused at the cap."""
    elsewhere.body = gzip.compress(b"\0" * (64 << 20), compresslevel=9)
    elsewhere.headers = {"Content-Encoding": "gzip"}
    with pytest.raises(GitError) as caught:
        await snapshot(repo, tmp_path / "tree", moved_to=f"{elsewhere.url}/bomb")
    assert caught.value.cause == "git_archive_too_large" and "larger than 32 MiB" in caught.value.message
    assert elsewhere.seen[0].get("Accept-Encoding") == "identity"


class Counted(io.BytesIO):
    """The downloaded archive, counting how much of it was read."""

    high = 0

    def read(self, size: int | None = -1) -> bytes:
        data = super().read(size)
        self.high = max(self.high, self.tell())
        return data


def test_one_huge_member_is_refused_before_it_is_inflated(tmp_path: Path) -> None:
    """The review's F10: 2 MiB of gzip declaring one member of 2 GiB was inflated whole (6.5 s of CPU) on the way to
    the next header before any size was checked. Its header is enough: a skip past the cap inflates nothing."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz", compresslevel=1) as tar:
        tar.addfile(entry("big.bin", size=2 * UNPACKED_CAP), io.BytesIO(b"\0" * (2 * UNPACKED_CAP)))
        tar.addfile(entry("k8s/service.yaml", size=14), io.BytesIO(b"kind: Service\n"))
    archive = Counted(out.getvalue())
    with pytest.raises(GitError) as caught:
        unpack(archive, tmp_path / "tree", what="the archive of main")
    assert caught.value.cause == "git_archive_too_large" and "more than 64 MiB unpacked" in caught.value.message
    assert archive.high < len(archive.getvalue()) // 4  # the headers read, the member's data never inflated
    assert not (tmp_path / "tree" / "big.bin").exists()
