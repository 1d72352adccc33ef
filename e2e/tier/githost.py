"""The tier's Git host: one real bare repository, served twice at the tier's own address 10.250.0.20 with a
certificate of the tier's Git CA. Its API (the GitHub double, src/cutover/demo/contents.py) on 8443 is what cutover
writes through (its pods trust the CA through `git.caFile`, the `cutover-git` Secret); Git's own smart HTTP
(`git http-backend`, behind Basic auth) on 8444 is what ArgoCD's repo-server fetches, so ArgoCD syncs exactly what
cutover committed, and what cutover pushes to with `git.provider: git`. The repository starts as this one's
manifests, so the plan's `git.path` is the example's own Service file."""

from __future__ import annotations

import asyncio
import os
import ssl
import subprocess
import sys
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
SEEDED = ("manifests", "hooks", "jobs", "fleet", "e2e/fixtures")  # what of this repository the tier's repository holds


# the example's cutover kustomization, which the platform's repository holds with the release's files
CUTOVER = "manifests/examples/llm-serving/cutover"


def from_release(root: Path, out: Path, bin_dir: Path, files: dict[str, str]) -> dict[str, str]:
    """docs/install.md, "Without kustomize remote bases": `make release`'s install.yaml and image.yaml in place of
    the base in cutover's kustomization, its Component and replacements as they are; so cutover's Application in
    the tier installs what a release ships, not the checkout's base."""
    done = subprocess.run([sys.executable, str(root / "packaging" / "release.py"), str(out)],
                          capture_output=True, text=True, check=False,
                          env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    if done.returncode != 0:
        raise RuntimeError(f"make release failed: {done.stderr.strip()[-500:]}")
    made = {Path(line).name: Path(line) for line in done.stdout.split()}
    kustomization = files[f"{CUTOVER}/kustomization.yaml"]
    base = "  - ../../../base\n"
    assert kustomization.count(base) == 1, "the example's cutover kustomization no longer names the base so"
    return {f"{CUTOVER}/kustomization.yaml": kustomization.replace(base, "  - install.yaml\n  - image.yaml\n"),
            f"{CUTOVER}/install.yaml": made["install.yaml"].read_text(),
            f"{CUTOVER}/image.yaml": made["image.yaml"].read_text()}


class TierGitHost:
    def __init__(self, root: Path, run_dir: Path, ca: trustme.CA, *, bin_dir: Path) -> None:
        (run_dir / "git" / "acme").mkdir(parents=True, exist_ok=True)
        self.repo = BareRepo(run_dir / "git" / "acme" / "gitops.git")
        files = {str(p.relative_to(root)): p.read_text() for top in SEEDED for p in sorted((root / top).rglob("*"))
                 if p.is_file()}
        self.seed = self.repo.commit(files, "The workloads' GitOps repository\n")
        self.platform = BareRepo(run_dir / "git" / "acme" / "platform.git")
        self.platform.commit({**files, **from_release(root, run_dir / "dist", bin_dir, files)},
                             "The platform team's repository: cutover's own Application, from the release\n")
        self.host = FakeContentsHost(self.repo, token=TOKEN)
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(ADDRESS[0]).configure_cert(context)
        self.host.ssl_context = context
        self.host.address = ADDRESS
        # ArgoCD reads; cutover's token pushes, as `git.provider: git` does (git's username x-access-token)
        self.smart = GitHttpServer(run_dir / "git", username=READER[0], password=READER[1],
                                   more={"x-access-token": TOKEN})
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
