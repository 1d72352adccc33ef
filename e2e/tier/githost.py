"""The tier's Git host: one real bare repository, served twice at the tier's own address 10.250.0.20 with a
certificate of the tier's Git CA. Its API (the GitHub double, src/cutover/demo/contents.py) on 8443 is what cutover
writes through (its pods trust the CA through `git.caFile`, the `cutover-git` Secret); Git's own smart HTTP
(`git http-backend`, behind Basic auth) on 8444 is what ArgoCD's repo-server fetches, so ArgoCD syncs exactly what
cutover committed. The repository starts as this one's manifests, so the plan's `git.path` is the example's own
Service file."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import trustme

from cutover.demo.contents import FakeContentsHost
from cutover.demo.gitrepo import BareRepo
from doubles.githttp import GitHttpServer

ADDRESS = ("10.250.0.20", 8443)  # 443 is the apiserver's on every address of the namespace
GIT_ADDRESS = (ADDRESS[0], 8444)
TOKEN = "e2e-git-token-not-a-secret"
# ArgoCD's read credentials for the repository (a repository Secret, as docs/install.md has a user create it)
READER = ("argocd", "e2e-git-reader-not-a-secret")
REPO_URL = f"https://{GIT_ADDRESS[0]}:{GIT_ADDRESS[1]}/acme/gitops.git"
# cutover's own Application's repository, which its token does not write (docs/security.md): the same files
PLATFORM_URL = f"https://{GIT_ADDRESS[0]}:{GIT_ADDRESS[1]}/acme/platform.git"
SEEDED = ("manifests", "hooks", "jobs", "e2e/fixtures")  # what of this repository the tier's repository holds


class TierGitHost:
    def __init__(self, root: Path, run_dir: Path, ca: trustme.CA) -> None:
        (run_dir / "git" / "acme").mkdir(parents=True, exist_ok=True)
        self.repo = BareRepo(run_dir / "git" / "acme" / "gitops.git")
        files = {str(p.relative_to(root)): p.read_text() for top in SEEDED for p in sorted((root / top).rglob("*"))
                 if p.is_file()}
        self.seed = self.repo.commit(files, "The workloads' GitOps repository\n")
        self.platform = BareRepo(run_dir / "git" / "acme" / "platform.git")
        self.platform.commit(files, "The platform team's repository: cutover's own Application\n")
        self.host = FakeContentsHost(self.repo, token=TOKEN)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(ADDRESS[0]).configure_cert(context)
        self.host.ssl_context = context
        self.host.address = ADDRESS
        self.smart = GitHttpServer(run_dir / "git", username=READER[0], password=READER[1])
        self.smart.ssl_context, self.smart.address = context, GIT_ADDRESS

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.run_coroutine_threadsafe(self.host.__aenter__(), loop).result(30)
        asyncio.run_coroutine_threadsafe(self.smart.__aenter__(), loop).result(30)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.run_coroutine_threadsafe(self.smart.__aexit__(None, None, None), loop).result(30)
        asyncio.run_coroutine_threadsafe(self.host.__aexit__(None, None, None), loop).result(30)

    def cutover_commits(self, plan: str = "reasoning-long") -> list[str]:
        """The commits cutover made for `plan` (its trailers), newest first."""
        return [e.sha for e in self.repo.log(limit=200) if f"\nCutover-Plan: {plan}\n" in e.message]
