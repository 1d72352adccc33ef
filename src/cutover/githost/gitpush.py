"""Plain Git over HTTPS or SSH: shallow fetch, edit, commit, push; a rejected push is the compare-and-swap.

For hosts without a usable API (or when the plan says `provider: git`). Works in a private temporary
directory (a pod needs only a writable /tmp). Over HTTPS the token reaches git through an askpass program
that reads it from the child's environment: never in argv, a URL, a config file or a log line. Over SSH
git uses the mounted key (copied to a 0600 file: Secret volumes are often 0644, which ssh refuses) and
the mounted known_hosts, with strict host key checking and nothing else from ~/.ssh. A push that
the remote rejects because the branch moved means another writer won: `writeback` fetches again,
re-decides and re-applies the edit on the new head (as Kargo's git-push step does).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shlex
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from cutover import trust
from cutover.core.repository import Author, FileVersion, GitHost, Written
from cutover.core.trailers import Trailers
from cutover.core.views import Commit
from cutover.errors import GitError, InvalidInput
from cutover.githost.base import (
    ANSWER_CAP,
    ARCHIVE_CAP,
    HostUnavailable,
    StaleVersion,
    retrying,
    token,
    too_large,
    unpack,
)
from cutover.plan import GitSettings

SSH_KEY_FILE = "/var/run/secrets/cutover/git/ssh-privatekey"  # the key of a kubernetes.io/ssh-auth Secret
KNOWN_HOSTS_FILE = "/var/run/secrets/cutover/git/known_hosts"
HISTORY_DEPTH = 50  # commits fetched: enough to find the last cutover commit of the file
# git asks "Username for 'https://host'" and "Password for 'https://user@host'": the askpass answers only when
# that host is the configured origin, so a redirect or a submodule elsewhere never receives the token.
_ASKPASS = """#!/bin/sh
url=${1#*\\'}; url=${url%\\'*}
case "$url" in *@*) url="${url%%://*}://${url#*@}" ;; esac
[ "$url" = "$CUTOVER_GIT_ORIGIN" ] || exit 1
case "$1" in
  Username*) printf '%s\\n' "${CUTOVER_GIT_USERNAME:-x-access-token}" ;;
  *) printf '%s\\n' "$CUTOVER_GIT_SECRET" ;;
esac
"""
_REJECTED = ("[rejected]", "non-fast-forward", "fetch first", "stale info", "incorrect old value",
             "failed to update ref", "cannot lock ref")
_AUTH = ("authentication failed", "could not read username", "invalid username or password", "access denied",
         "permission denied", "terminal prompts disabled")
_UNREACHABLE = ("could not resolve host", "connection refused", "connection timed out", "failed to connect",
                "operation timed out", "the remote end hung up", "rpc failed", "early eof", "connection reset")
_STATUS = re.compile(r"returned error: (\d{3})")
# No credential helper but ours, and no redirect followed (git's default follows the first request's, and then
# asks for credentials for wherever it landed): a moved repository is an error that names git.url.
_CONFIG = ("-c", "credential.helper=", "-c", "http.followRedirects=false")
GIT_TIMEOUT = 120.0  # seconds for one git command (a fetch of a GitOps repository takes a few)
SSH_CONNECT_TIMEOUT = 10  # seconds for ssh to connect; ServerAlive then notices a server gone quiet in 30 s


def origin(url: str) -> str:
    """`scheme://host[:port]` of an HTTP(S) URL, as git names it when it asks for credentials."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class GitPush(GitHost):
    name = "git"

    def __init__(self, *, url: str, branch: str, token: str | None = None, username: str | None = None,
                 ssh_key: Path | None = None, known_hosts: Path | None = None, ca_file: str | None = None) -> None:
        self.url, self.branch = url, branch
        self.work = Path(tempfile.mkdtemp(prefix="cutover-git-"))
        askpass = self.work / "askpass"
        askpass.write_text(_ASKPASS)
        askpass.chmod(stat.S_IRWXU)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(self.work), "GIT_TERMINAL_PROMPT": "0",
            "GIT_CONFIG_NOSYSTEM": "1", "GIT_ASKPASS": str(askpass), "CUTOVER_GIT_SECRET": token or "",
            "CUTOVER_GIT_USERNAME": username or "x-access-token", "CUTOVER_GIT_ORIGIN": origin(url), "LC_ALL": "C",
            **trust.git_env(ca_file),
        }
        if ssh_key is not None:
            self.env["GIT_SSH_COMMAND"] = self._ssh_command(ssh_key, known_hosts)
        self.repo = self.work / "repo"
        self._head: str | None = None

    @classmethod
    def connect(cls, settings: GitSettings) -> GitPush:
        """HTTPS with the token, or SSH with the mounted deploy key and known_hosts; git itself must be there."""
        if shutil.which("git") is None:
            raise InvalidInput("git.provider git: expected the git program on PATH, found none",
                               cause="git_missing", hint="use the image built with --target with-git, or a hosting "
                                                         "API provider (github, gitlab, gitea, forgejo); leaving "
                                                         "git.provider git, commit the plan first and the image "
                                                         "after: PreSync runs its commit's image with the live plan")
        if settings.url.startswith(("https://", "http://")):
            return cls(url=settings.url, branch=settings.branch, token=token(settings), ca_file=settings.ca_file)
        key = Path(os.environ.get("CUTOVER_GIT_SSH_KEY_FILE", SSH_KEY_FILE))
        if not key.exists():
            raise InvalidInput(f"git.url is an SSH address but there is no key at {key}", cause="git_ssh_setup",
                               hint="mount the deploy key there, or set CUTOVER_GIT_SSH_KEY_FILE")
        known = Path(os.environ.get("CUTOVER_GIT_KNOWN_HOSTS_FILE", KNOWN_HOSTS_FILE))
        return cls(url=settings.url, branch=settings.branch, ssh_key=key, known_hosts=known)

    def _ssh_command(self, key: Path, known_hosts: Path | None) -> str:
        private = self.work / "ssh-key"
        private.write_bytes(key.read_bytes())
        private.chmod(stat.S_IRUSR | stat.S_IWUSR)
        if known_hosts is None or not known_hosts.exists():
            raise GitError("git over SSH needs a known_hosts file (host keys are always checked)",
                           cause="git_ssh_setup", hint="mount the host's public key as known_hosts")
        # paths quoted (GIT_SSH_COMMAND is run by a shell); a host that stops answering ends the connection
        return (f"ssh -F /dev/null -i {shlex.quote(str(private))} -o IdentitiesOnly=yes -o BatchMode=yes "
                f"-o StrictHostKeyChecking=yes -o UserKnownHostsFile={shlex.quote(str(known_hosts))} "
                f"-o ConnectTimeout={SSH_CONNECT_TIMEOUT} -o ServerAliveInterval=15 -o ServerAliveCountMax=2")

    async def aclose(self) -> None:
        shutil.rmtree(self.work, ignore_errors=True)

    async def git(self, *args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> str:
        return (await self._run(args, stdin=stdin, env=env)).decode()

    async def _run(self, args: tuple[str, ...], *, stdin: bytes | None = None,
                   env: dict[str, str] | None = None) -> bytes:
        """One git command, its stdout; killed after GIT_TIMEOUT seconds of the wall clock (a server that stops
        answering mid-fetch), timed by a thread: git's time is the world's, not the event loop's."""
        process = await asyncio.create_subprocess_exec(
            "git", *_CONFIG, "-c", "core.askPass=" + self.env["GIT_ASKPASS"], *args,
            cwd=self.repo if self.repo.exists() else self.work, env={**self.env, **(env or {})},
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True)  # its own process group: git's helpers (git-remote-https) hold the pipes too
        killed = threading.Event()

        def kill() -> None:
            killed.set()
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)

        overdue = threading.Timer(GIT_TIMEOUT, kill)
        overdue.daemon = True
        overdue.start()
        try:
            out, err = await _outputs(process, stdin, cap=ARCHIVE_CAP if args[0] == "archive" else ANSWER_CAP,
                                      overflow=kill)
        except _TooMuch as exc:
            raise too_large(f"git {args[0]}", f"its output passed {exc.cap >> 20} MiB; stopped there") from None
        finally:
            overdue.cancel()
        if killed.is_set():
            raise HostUnavailable(f"git {args[0]}: no end within {GIT_TIMEOUT:g}s",
                                  hint="the Git server stopped answering; retried")
        if process.returncode != 0:
            raise _failure(args[0], err.decode(errors="replace"), self.env["CUTOVER_GIT_SECRET"])
        return out

    async def _fetch(self) -> str:
        if not self.repo.exists():
            self.repo.mkdir()
            await self.git("init", "--quiet", "--initial-branch=cutover")
            await self.git("remote", "add", "origin", self.url)
        async for attempt in retrying():
            with attempt:
                await self.git("fetch", "--quiet", "--no-tags", f"--depth={HISTORY_DEPTH}", "origin",
                               f"+refs/heads/{self.branch}:refs/remotes/origin/{self.branch}")
        self._head = (await self.git("rev-parse", f"refs/remotes/origin/{self.branch}")).strip()
        return self._head

    async def read(self, path: str, *, ref: str | None = None) -> FileVersion:
        head = await self._fetch()
        if ref is not None:  # a commit of the branch's recent history (a 7-character prefix will do)
            head = (await self.git("rev-parse", "--verify", f"{ref}^{{commit}}")).strip()
        try:
            content = await self.git("show", f"{head}:{path}")
        except GitError as exc:
            if exc.cause == "git_archive_too_large":
                raise
            raise GitError(f"git: {path} not found on {self.branch}", cause="git_not_found",
                           hint="check git.path and git.branch") from exc
        return FileVersion(content=content, version=head, head=head)

    async def snapshot(self, ref: str, into: Path) -> Path:
        head = await self._fetch()
        sha = head if ref == self.branch else (await self.git("rev-parse", "--verify", f"{ref}^{{commit}}")).strip()
        archive = await self._run(("archive", "--format=tar.gz", "--prefix=tree/", sha))
        return await asyncio.to_thread(unpack, archive, into, what=f"git archive {sha[:12]}")  # off the event loop

    async def scratch(self, path: str, content: str, *, message: str, author: Author, branch: str) -> str:
        head = await self._fetch()
        sha = await self._commit_on(head, path, content, message=message, author=author)
        async for attempt in retrying():
            with attempt:
                await self.git("push", "--quiet", "--porcelain", "--force", "origin", f"{sha}:refs/heads/{branch}")
        return sha

    async def drop(self, branch: str) -> None:
        try:
            await self.git("push", "--quiet", "--porcelain", "origin", f":refs/heads/{branch}")
        except GitError:  # best effort: the next render forces it anew
            return

    async def write(self, path: str, content: str, *, expected: FileVersion, message: str,
                    author: Author) -> Written:
        sha = await self._commit_on(expected.version, path, content, message=message, author=author)
        # The lease makes the push a compare-and-swap even against a host that would accept a force push.
        async for attempt in retrying():
            with attempt:
                await self.git("push", "--quiet", "--porcelain",
                               f"--force-with-lease=refs/heads/{self.branch}:{expected.version}",
                               "origin", f"{sha}:refs/heads/{self.branch}")
        return Written(sha=sha)

    async def _commit_on(self, parent: str, path: str, content: str, *, message: str, author: Author) -> str:
        """A commit on `parent` with `path` holding `content`, built with plumbing (no work tree to keep clean)."""
        identity = {"GIT_AUTHOR_NAME": author.name, "GIT_AUTHOR_EMAIL": author.email,
                    "GIT_COMMITTER_NAME": author.name, "GIT_COMMITTER_EMAIL": author.email,
                    "GIT_INDEX_FILE": str(self.work / "index")}
        await self.git("read-tree", parent, env=identity)
        blob = (await self.git("hash-object", "-w", "--stdin", stdin=content.encode())).strip()
        await self.git("update-index", "--cacheinfo", f"100644,{blob},{path}", env=identity)
        tree = (await self.git("write-tree", env=identity)).strip()
        return (await self.git("commit-tree", tree, "-p", parent, stdin=message.encode(), env=identity)).strip()

    async def history(self, path: str, *, limit: int = 20, page: int = 1) -> list[Commit]:
        head = self._head or await self._fetch()
        if page > 1:  # beyond the shallow fetch: fetch deeper (a larger --depth; --deepen trips protocol v2)
            async for attempt in retrying():
                with attempt:
                    await self.git("fetch", "--quiet", "--no-tags", f"--depth={HISTORY_DEPTH * page}", "origin",
                                   f"+refs/heads/{self.branch}:refs/remotes/origin/{self.branch}")
        # NUL between fields and (-z) between commits: the one byte a commit message cannot hold (a person's
        # message with \x1e in it once broke the parse for every later run)
        out = await self.git("log", "-z", f"-{limit}", f"--skip={limit * (page - 1)}",
                             "--format=%H%x00%an%x00%ae%x00%aI%x00%B", head, "--", path)
        fields = out.split("\x00")
        commits = []
        for at in range(0, len(fields) - 4, 5):
            sha, name, email, date, body = fields[at:at + 5]
            commits.append(Commit(sha=sha.strip("\n"), title=body.split("\n", 1)[0], author=f"{name} <{email}>",
                                  date=datetime.fromisoformat(date), trailers=Trailers.parse(body)))
        return commits


# What git's stderr says, in order: (cause, test on the lowered text and the HTTP status, what, hint).
_KINDS: tuple[tuple[str, Callable[[str, int], bool], str, str], ...] = (
    ("git_host_key", lambda text, _: "host key verification failed" in text
     or "remote host identification has changed" in text, "the server's SSH host key does not match known_hosts",
     "refresh known_hosts from a trusted source; the check stays on"),
    ("git_not_found", lambda text, status: status == 404 or "not found" in text, "repository not found",
     "check git.url; a token without access also reads as not found"),
    ("git_auth", lambda text, status: status in (401, 403) or any(word in text for word in _AUTH),
     "authentication failed", "check the token and that it may read and push to the repository"),
    ("git_tls", lambda text, _: "ssl certificate problem" in text or "certificate verify" in text
     or "server certificate verification failed" in text, "the server's TLS certificate is not trusted",
     "set git.caFile to the PEM bundle of the host's CA (or SSL_CERT_FILE for every HTTPS client)"),
    ("git_redirect", lambda _, status: 300 <= status < 400, "the server answered a redirect, which cutover does "
     "not follow", "set git.url to the repository's current address; the token goes to the host of git.url only"),
)


def _failure(command: str, stderr: str, secret: str) -> GitError:
    text = stderr.replace(secret, "[REDACTED]") if len(secret) >= 8 else stderr  # a real token is long
    lowered = text.lower()
    summary = " ".join(text.split())[:300]
    status = int(found.group(1)) if (found := _STATUS.search(lowered)) else 0
    if command == "push" and any(word in lowered for word in _REJECTED):
        return StaleVersion(f"git push rejected: the branch moved ({summary})")
    for cause, matches, what, hint in _KINDS:
        if matches(lowered, status):
            return GitError(f"git {command}: {what} ({summary})", cause=cause, hint=hint)
    if status >= 500 or status == 429 or any(word in lowered for word in _UNREACHABLE):
        return HostUnavailable(f"git {command}: the remote is unreachable or failing ({summary})")
    return GitError(f"git {command} failed: {summary}", cause="git_error", hint="see the message from git")


class _TooMuch(Exception):
    def __init__(self, cap: int) -> None:
        super().__init__(cap)
        self.cap = cap


async def _outputs(process: asyncio.subprocess.Process, stdin: bytes | None, *, cap: int,
                   overflow: Callable[[], None]) -> tuple[bytes, bytes]:
    """What `communicate` gives, read under a cap: a repository's file or archive far past anything a GitOps
    repository holds stops git there (`overflow`) instead of filling the Job's memory; what is still in the pipes
    is read and dropped, so the process ends and is reaped as usual. stderr is kept under 1 MiB likewise."""
    assert process.stdin is not None
    assert process.stdout is not None
    assert process.stderr is not None
    if stdin:
        process.stdin.write(stdin)
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await process.stdin.drain()
    process.stdin.close()
    out, err = await asyncio.gather(_read(process.stdout, cap, overflow), _read(process.stderr, 1 << 20, overflow))
    await process.wait()
    if out is None or err is None:
        raise _TooMuch(cap if out is None else 1 << 20)
    return out, err


async def _read(stream: asyncio.StreamReader, cap: int, overflow: Callable[[], None]) -> bytes | None:
    """The stream's bytes, or None once past `cap` (then read to its end and dropped)."""
    chunks: list[bytes] | None = []
    size = 0
    while chunk := await stream.read(1 << 16):
        size += len(chunk)
        if chunks is not None and size > cap:
            chunks = None
            overflow()
        if chunks is not None:
            chunks.append(chunk)
    return None if chunks is None else b"".join(chunks)
