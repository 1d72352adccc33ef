"""A local checkout of the GitOps repository as the tree a source renders from, for the offline `cutover diff`:
the file passed with `--file` sits at `git.path` inside it, and the checkout's root is what lies above that.

Only what Git would commit is copied (tracked files and untracked ones `.gitignore` does not hide), so a
virtualenv or a build directory beside the manifests never reaches a render; outside a Git work tree, every file
but hidden directories. Called by `commands.diff` through `sources.offline`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import shutil
from pathlib import Path, PurePosixPath

from cutover.errors import InvalidInput

LIST_TIMEOUT = 30.0  # seconds for `git ls-files` on a large checkout


@dataclasses.dataclass(frozen=True)
class LocalCheckout:
    file: Path  # the local copy of git.path
    git_path: str

    def root(self) -> Path:
        """The checkout's root: `file` less `git.path`, or an error that says how to run the diff."""
        parts = PurePosixPath(self.git_path).parts
        resolved = self.file.resolve()
        if resolved.parts[-len(parts):] != parts:
            raise InvalidInput(f"--file {self.file}: a kustomize source is rendered from its checkout, so the file "
                               f"must be git.path ({self.git_path}) inside one",
                               hint=f"run the diff on <checkout>/{self.git_path}")
        return Path(*resolved.parts[:-len(parts)])

    async def snapshot(self, ref: str, into: Path) -> Path:
        """The checkout as it is on disk (`ref` is the branch the plan names; the working tree stands for it)."""
        root = self.root()
        for relative in await _files(root):
            target = into / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / relative, target)
        return into


async def _files(root: Path) -> list[str]:
    """What Git would commit under `root`: tracked files and untracked ones .gitignore does not hide."""
    try:
        process = await asyncio.create_subprocess_exec(
            "git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL)
    except OSError:  # no git program: every file but hidden directories
        return _walk(root)
    try:
        async with asyncio.timeout(LIST_TIMEOUT):
            out, _ = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        return _walk(root)
    if process.returncode != 0:  # not a Git work tree
        return _walk(root)
    return [name for name in out.decode("utf-8", "surrogateescape").split("\0")
            if name and (root / name).is_file() and not (root / name).is_symlink()]


def _walk(root: Path) -> list[str]:
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = [name for name in subdirs if not name.startswith(".")]
        found += [os.path.relpath(os.path.join(directory, name), root) for name in files
                  if not os.path.islink(os.path.join(directory, name))]
    return found
