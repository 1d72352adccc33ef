"""The "contents API" that GitHub, Gitea and Forgejo share: read a file with its blob sha, write it back
with that sha as compare-and-swap, list the commits that touched it. Subclasses say where the API
lives, how the token is sent, and how the host says "stale".
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from cutover.errors import GitError, InvalidInput
from cutover.githost.base import Author, Commit, FileVersion, HttpHost, Written, trailers


def repository(url: str) -> tuple[str, str]:
    """owner and repo from https://HOST/OWNER/REPO(.git)."""
    parts = [part for part in urlsplit(url).path.split("/") if part]
    if len(parts) != 2:
        raise InvalidInput(f"git.url: expected https://HOST/OWNER/REPO, found {url!r}", cause="invalid_plan",
                           hint="point git.url at the repository")
    return parts[0], parts[1].removesuffix(".git")


class ContentsApi(HttpHost):
    history_limit_param = "per_page"

    def __init__(self, *, url: str, branch: str, token: str | None, api_url: str,
                 transport: httpx.AsyncBaseTransport | None = None) -> None:
        self.owner, self.repo = repository(url)
        self.branch = branch
        super().__init__(api_url=api_url, headers=self.headers(token), transport=transport)

    def headers(self, token: str | None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token}"} if token else {}

    def _contents(self, path: str) -> str:
        return f"/repos/{self.owner}/{self.repo}/contents/{quote(path)}"

    async def read(self, path: str) -> FileVersion:
        response = await self.call("GET", self._contents(path), params={"ref": self.branch},
                                    what=f"read {path}@{self.branch}")
        body = response.json()
        if not isinstance(body, dict) or body.get("type") != "file":
            raise GitError(f"{self.name}: {path} is not a file", cause="git_not_found", hint="check git.path")
        if body.get("encoding") != "base64" or body.get("content") is None:
            raise GitError(f"{self.name}: {path} came without its content (a very large file?)",
                           cause="git_rejected", hint="keep the Service in a smaller file")
        return FileVersion(content=base64.b64decode(body["content"]).decode("utf-8"), version=body["sha"])

    async def write(self, path: str, content: str, *, expected: FileVersion, message: str,
                    author: Author) -> Written:
        person = {"name": author.name, "email": author.email}
        body = {"message": message, "content": base64.b64encode(content.encode()).decode(), "sha": expected.version,
                "branch": self.branch, "committer": person, "author": person}
        response = await self.call("PUT", self._contents(path), json=body, what=f"write {path}@{self.branch}")
        commit = response.json().get("commit") or {}
        return Written(sha=commit.get("sha", ""), url=commit.get("html_url"))

    async def history(self, path: str, *, limit: int = 20) -> list[Commit]:
        response = await self.call("GET", f"/repos/{self.owner}/{self.repo}/commits",
                                    params={"path": path, "sha": self.branch, self.history_limit_param: str(limit)},
                                    what=f"history of {path}")
        return [_commit(item) for item in response.json()]


def _commit(item: dict[str, Any]) -> Commit:
    detail = item.get("commit") or {}
    message = detail.get("message", "")
    who = detail.get("author") or {}
    date = who.get("date")
    return Commit(sha=item.get("sha", ""), title=message.split("\n", 1)[0],
                  author=f"{who.get('name', '?')} <{who.get('email', '?')}>",
                  date=datetime.fromisoformat(date.replace("Z", "+00:00")) if date else None,
                  trailers=trailers(message))
