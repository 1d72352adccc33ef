"""The tier's Git host: the GitHub double (src/cutover/demo/contents.py) over a real bare repository, served over
HTTPS at the tier's own address 10.250.0.20:8443 with a certificate of the tier's Git CA, which the pods trust
through `git.caFile` (the `cutover-git` Secret). The repository starts as this one's manifests, so the plan's
`git.path` is the example's own Service file."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import trustme

from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo

ADDRESS = ("10.250.0.20", 8443)  # 443 is the apiserver's on every address of the namespace
TOKEN = "e2e-git-token-not-a-secret"
SEEDED = ("manifests", "hooks", "jobs")  # what of this repository the tier's repository holds


class TierGitHost:
    def __init__(self, root: Path, run_dir: Path, ca: trustme.CA) -> None:
        (run_dir / "git").mkdir(exist_ok=True)
        self.repo = BareRepo(run_dir / "git" / "gitops.git")
        files = {str(p.relative_to(root)): p.read_text() for top in SEEDED for p in sorted((root / top).rglob("*"))
                 if p.is_file()}
        self.seed = self.repo.commit(files, "The platform's GitOps repository\n")
        self.host = FakeContentsHost(self.repo, token=TOKEN)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(ADDRESS[0]).configure_cert(context)
        self.host.ssl_context = context
        self.host.address = ADDRESS

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.run_coroutine_threadsafe(self.host.__aenter__(), loop).result(30)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.run_coroutine_threadsafe(self.host.__aexit__(None, None, None), loop).result(30)

    def cutover_commits(self) -> list[str]:
        """The commits cutover made (its trailers), newest first."""
        return [e.sha for e in self.repo.log(limit=200) if "Cutover-" in e.message]
