"""The "contents API" that GitHub, Gitea and Forgejo share: read a file with its blob sha, write it back
with that sha as compare-and-swap, list the commits that touched it. Subclasses say where the API
lives, how the token is sent, and how the host says "stale".
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, Self
from urllib.parse import urlsplit

import httpx
import structlog

from cutover.core.repository import Author, ChangeRequest, ChangeState, FileVersion, Written
from cutover.core.trailers import Trailers
from cutover.core.views import Commit
from cutover.errors import GitError, InvalidInput
from cutover.githost.base import HttpHost, decoded, escaped, token, unpack
from cutover.plan import GitSettings

log = structlog.get_logger("cutover.git")


def repository(url: str) -> tuple[str, str]:
    """owner and repo from https://HOST/OWNER/REPO(.git)."""
    parts = [part for part in urlsplit(url).path.split("/") if part]
    if len(parts) != 2:
        raise InvalidInput(f"git.url: expected https://HOST/OWNER/REPO, found {url!r}", cause="invalid_plan",
                           hint="point git.url at the repository")
    return parts[0], parts[1].removesuffix(".git")


class ContentsApi(HttpHost):
    history_limit_param = "per_page"
    archive = "tarball/{ref}"  # GitHub's; Gitea and Forgejo serve archive/{ref}.tar.gz
    branch_ref = "{root}/git/refs/heads/{branch}"  # what DELETE removes; Gitea: branches/{branch}

    def __init__(self, *, url: str, branch: str, token: str | None, api_url: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, ca_file: str | None = None) -> None:
        self.owner, self.repo = repository(url)
        self.root = f"/repos/{escaped(self.owner)}/{escaped(self.repo)}"  # every path below it escaped too
        self.branch = branch
        super().__init__(api_url=api_url or self.api_root(url), headers=self.headers(token), transport=transport,
                         ca_file=ca_file)

    @classmethod
    def connect(cls, settings: GitSettings) -> Self:
        return cls(url=settings.url, branch=settings.branch, token=token(settings), api_url=settings.api_url,
                   ca_file=settings.ca_file)

    @staticmethod
    def api_root(url: str) -> str:
        """The API root for a repository URL when the plan gives no git.apiUrl."""
        raise NotImplementedError

    def headers(self, token: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _contents(self, path: str) -> str:
        return f"{self.root}/contents/{escaped(path)}"

    async def read(self, path: str, *, ref: str | None = None) -> FileVersion:
        response = await self.call("GET", self._contents(path), params={"ref": ref or self.branch},
                                   what=f"read {path}@{ref or self.branch}")
        body = _answer(response, what=f"{self.name}: read {path}")
        if not isinstance(body, dict) or body.get("type") != "file":
            raise GitError(f"{self.name}: {path} is not a file", cause="git_not_found", hint="check git.path")
        if body.get("encoding") != "base64" or not isinstance(body.get("content"), str) or not body.get("sha"):
            raise GitError(f"{self.name}: {path} came without its content (a very large file?)",
                           cause="git_rejected", hint="keep the Service in a smaller file")
        return FileVersion(content=decoded(body["content"], where=f"{self.name}: {path}"), version=str(body["sha"]))

    async def write(self, path: str, content: str, *, expected: FileVersion, message: str, author: Author,
                    branch: str | None = None) -> Written:
        person = {"name": author.name, "email": author.email}
        target = branch or self.branch
        body = {"message": message, "content": base64.b64encode(content.encode()).decode(), "sha": expected.version,
                "branch": target, "committer": person, "author": person}
        response = await self.call("PUT", self._contents(path), json=body, what=f"write {path}@{target}")
        commit = _json(response).get("commit") or {}
        if not isinstance(commit, dict) or not commit.get("sha"):
            raise GitError(f"{self.name}: write {path}@{target}: answered {response.status_code} without a commit",
                           cause="git_rejected", hint="the host did not say it committed; nothing is counted as "
                                                      "committed until it does")
        return Written(sha=str(commit["sha"]), url=commit.get("html_url"))

    async def snapshot(self, ref: str, into: Path) -> Path:
        url = f"{self.root}/{self.archive.format(ref=escaped(ref))}"
        with await self.download(url, what=f"the archive of {ref}") as archive:
            return await asyncio.to_thread(unpack, archive, into, what=f"the archive of {ref}")  # off the loop

    async def scratch(self, path: str, content: str, *, message: str, author: Author, branch: str) -> str:
        await self._branch_from_base(branch)
        current = await self.read(path, ref=branch)
        return (await self.write(path, content, expected=current, message=message, author=author,
                                 branch=branch)).sha

    async def drop(self, branch: str) -> None:
        try:
            await self.call("DELETE", self.branch_ref.format(root=self.root, branch=escaped(branch)),
                            what=f"delete branch {branch}")
        except GitError as exc:  # a leftover scratch branch is reset by the next render anyway
            log.info("git.scratch_left", branch=branch, error=exc.message)

    # --- pull requests ------------------------------------------------------------------------------

    async def open_change(self, path: str, rewrite: Callable[[str], str], *, message: str, author: Author,
                          branch: str, title: str, body: str) -> ChangeRequest:
        existing = await self._open_request(branch)
        if existing is not None:
            return existing
        await self._branch_from_base(branch)
        current = await self.read(path, ref=branch)
        await self.write(path, rewrite(current.content), expected=current, message=message, author=author,
                         branch=branch)
        response = await self.call("POST", f"{self.root}/pulls",
                                   json={"title": title, "head": branch, "base": self.branch, "body": body},
                                   what=f"open a pull request from {branch}")
        created = response.json()
        return ChangeRequest(number=str(created["number"]), url=created.get("html_url", ""), branch=branch)

    async def change_state(self, change: ChangeRequest) -> ChangeState:
        response = await self.call("GET", f"{self.root}/pulls/{change.number}",
                                   what=f"read pull request {change.number}")
        pull = response.json()
        if pull.get("merged"):
            return ChangeState("merged", pull.get("merge_commit_sha"))
        return ChangeState("open" if pull.get("state") == "open" else "closed")

    async def _open_request(self, branch: str) -> ChangeRequest | None:
        response = await self.call("GET", f"{self.root}/pulls", params=self._pulls_query(branch),
                                   what=f"find an open pull request from {branch}")
        for pull in response.json():
            if (pull.get("head") or {}).get("ref") == branch and pull.get("state") == "open":
                return ChangeRequest(number=str(pull["number"]), url=pull.get("html_url", ""), branch=branch)
        return None

    def _pulls_query(self, branch: str) -> dict[str, str]:
        return {"state": "open"}

    async def _branch_from_base(self, branch: str) -> None:
        raise NotImplementedError

    async def history(self, path: str, *, limit: int = 20, page: int = 1) -> list[Commit]:
        response = await self.call("GET", f"{self.root}/commits",
                                    params={"path": path, "sha": self.branch, self.history_limit_param: str(limit),
                                            **({"page": str(page)} if page > 1 else {})},
                                    what=f"history of {path}")
        return [_commit(item) for item in response.json()]


def _answer(response: httpx.Response, *, what: str) -> Any:
    """The JSON of a host's answer; a page of HTML (a proxy, a login wall) is a refusal, not a crash."""
    try:
        return response.json()
    except ValueError:
        kind = response.headers.get("content-type", "?").split(";")[0]
        raise GitError(f"{what}: the host answered {response.status_code} with {kind}, not JSON",
                       cause="git_rejected", hint="a proxy or a login page answers for the host; check "
                                                  "git.apiUrl") from None


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _commit(item: dict[str, Any]) -> Commit:
    detail = item.get("commit") or {}
    message = detail.get("message", "")
    who = detail.get("author") or {}
    date = who.get("date")
    return Commit(sha=item.get("sha", ""), title=message.split("\n", 1)[0],
                  author=f"{who.get('name', '?')} <{who.get('email', '?')}>",
                  date=datetime.fromisoformat(date.replace("Z", "+00:00")) if date else None,
                  trailers=Trailers.parse(message))
