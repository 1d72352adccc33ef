"""A real bare Git repository driven with git plumbing: the store behind the Git host fakes.

Writes build a commit from a temporary index and move the branch with `git update-ref NEW OLD`, which
fails if the branch moved meanwhile: the same compare-and-swap a hosting service performs.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import tempfile
from datetime import datetime
from pathlib import Path


@dataclasses.dataclass(frozen=True)
class LogEntry:
    sha: str
    message: str
    name: str
    email: str
    date: str


class BareRepo:
    def __init__(self, path: Path, *, branch: str = "main") -> None:
        self.path, self.branch = path, branch
        self.git("init", "--quiet", "--bare", f"--initial-branch={branch}", str(path), cwd=path.parent)

    def git(self, *args: str, cwd: Path | None = None, stdin: bytes | None = None,
            env: dict[str, str] | None = None) -> str:
        result = subprocess.run(["git", *args], cwd=cwd or self.path, input=stdin, capture_output=True, check=True,
                                env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "HOME": str(self.path),
                                     **(env or {})})
        return result.stdout.decode()

    def head(self, branch: str | None = None) -> str | None:
        try:
            return self.git("rev-parse", "--verify", "--quiet", f"refs/heads/{branch or self.branch}").strip()
        except subprocess.CalledProcessError:
            return None

    def resolve(self, ref: str | None) -> str | None:
        """A branch name or a (possibly abbreviated) commit, as the commit it names."""
        head = self.head(ref)
        if head is not None or ref is None:
            return head
        try:
            return self.git("rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").strip()
        except subprocess.CalledProcessError:
            return None

    def read(self, path: str, branch: str | None = None) -> tuple[str, str] | None:
        """(content, blob sha) of a file at a branch head or a commit, or None."""
        head = self.resolve(branch)
        if head is None:
            return None
        try:
            blob = self.git("rev-parse", "--verify", "--quiet", f"{head}:{path}").strip()
        except subprocess.CalledProcessError:
            return None
        return self.git("cat-file", "blob", blob), blob

    def commit(self, files: dict[str, str], message: str, *, name: str = "Platform Team",
               email: str = "platform@example.invalid", branch: str | None = None,
               expected_head: str | None = None, date: datetime | None = None) -> str:
        """Commit `files` on top of the branch; fails if the branch is no longer at `expected_head`. `date` is the
        commit's (a host double passes its loop's clock, so that fake time dates the commits it makes)."""
        branch = branch or self.branch
        parent = self.head(branch)
        old = expected_head if expected_head is not None else parent
        with tempfile.TemporaryDirectory() as scratch:
            env = {"GIT_INDEX_FILE": str(Path(scratch) / "index"), "GIT_AUTHOR_NAME": name,
                   "GIT_AUTHOR_EMAIL": email, "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}
            if date is not None:
                env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = f"{int(date.timestamp())} +0000"
            if parent:
                self.git("read-tree", parent, env=env)
            for path, content in files.items():
                blob = self.git("hash-object", "-w", "--stdin", stdin=content.encode()).strip()
                self.git("update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", env=env)
            tree = self.git("write-tree", env=env).strip()
            parents = ["-p", parent] if parent else []
            sha = self.git("commit-tree", tree, *parents, stdin=message.encode(), env=env).strip()
        self.git("update-ref", f"refs/heads/{branch}", sha, *([old] if old else []))
        return sha

    def log(self, path: str | None = None, *, branch: str | None = None, limit: int = 20,
            skip: int = 0) -> list[LogEntry]:
        start = self.resolve(branch)
        if start is None:
            return []
        out = self.git("log", f"-{limit}", f"--skip={skip}", "--format=%H%x00%an%x00%ae%x00%aI%x00%B%x1e", start,
                       *(["--", path] if path else []))
        entries = []
        for record in out.split("\x1e"):
            if record.strip():
                sha, name, email, date, message = record.strip("\n").split("\x00", 4)
                entries.append(LogEntry(sha, message, name, email, date))
        return entries

    def archive(self, ref: str, *, prefix: str) -> bytes | None:
        """The tree at `ref` as a .tar.gz whose entries sit under `prefix/`, as hosts serve archives; None for an
        unknown ref."""
        sha = self.resolve(ref)
        if sha is None:
            return None
        return subprocess.run(["git", "archive", "--format=tar.gz", f"--prefix={prefix}/", sha], cwd=self.path,
                              capture_output=True, check=True, env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}).stdout

    def checkout(self, ref: str, into: Path) -> Path:
        """The tree at `ref` (a branch or a commit), written out under `into` as ArgoCD's repo-server checks it
        out before rendering."""
        sha = self.resolve(ref)
        assert sha is not None, ref
        into.mkdir(parents=True, exist_ok=True)
        # git's own checkout through an index of its own: the bare repository is left as it was, and nothing
        # depends on tarfile's extraction filters (Python 3.11.4 and later only).
        with tempfile.TemporaryDirectory(prefix="checkout-index-") as scratch:
            env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_INDEX_FILE": str(Path(scratch) / "index")}
            for argv in (["read-tree", sha], [f"--work-tree={into}", "checkout-index", "--all"]):
                subprocess.run(["git", *argv], cwd=self.path, capture_output=True, check=True, env=env)
        return into

    def set_branch(self, branch: str, sha: str) -> None:
        self.git("update-ref", f"refs/heads/{branch}", sha)

    def delete_branch(self, branch: str) -> None:
        self.git("update-ref", "-d", f"refs/heads/{branch}")

    def merge(self, source: str, target: str, *, message: str) -> str:
        """Merge branch `source` into `target` as a hosting service's merge button does."""
        theirs, ours = self.head(source), self.head(target)
        assert theirs is not None
        assert ours is not None
        tree = self.git("merge-tree", "--write-tree", ours, theirs).splitlines()[0].strip()
        env = {"GIT_AUTHOR_NAME": "Reviewer", "GIT_AUTHOR_EMAIL": "reviewer@example.invalid",
               "GIT_COMMITTER_NAME": "Reviewer", "GIT_COMMITTER_EMAIL": "reviewer@example.invalid"}
        sha = self.git("commit-tree", tree, "-p", ours, "-p", theirs, stdin=message.encode(), env=env).strip()
        self.git("update-ref", f"refs/heads/{target}", sha, ours)
        return sha
