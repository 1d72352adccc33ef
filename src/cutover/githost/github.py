"""GitHub and GitHub Enterprise through the REST contents API.

Read: `GET /repos/{owner}/{repo}/contents/{path}?ref=BRANCH` gives the content and the blob `sha`.
Write: `PUT` the same path with that `sha`: GitHub answers 409 when the file has moved since (our
compare-and-swap) and 422 on a bad body. History: `GET /repos/{owner}/{repo}/commits?path=&sha=`.
The API root is `https://api.github.com`, or `git.apiUrl` (GHE: https://HOST/api/v3).
"""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from cutover.errors import GitError, InvalidInput
from cutover.githost.base import (
    Author,
    Commit,
    FileVersion,
    GitHost,
    HostUnavailable,
    StaleVersion,
    Written,
    classify,
    retrying,
    trailers,
)

ACCEPT = "application/vnd.github+json"
API_VERSION = "2022-11-28"


def repository(url: str) -> tuple[str, str]:
    """owner and repo from https://github.com/OWNER/REPO(.git)."""
    parts = [part for part in urlsplit(url).path.split("/") if part]
    if len(parts) != 2:
        raise InvalidInput(f"git.url: expected https://HOST/OWNER/REPO, found {url!r}", cause="invalid_plan",
                           hint="point git.url at the repository")
    return parts[0], parts[1].removesuffix(".git")


def default_api(url: str) -> str:
    host = urlsplit(url).netloc
    return "https://api.github.com" if host in ("github.com", "www.github.com") else f"https://{host}/api/v3"


class GitHub(GitHost):
    name = "github"

    def __init__(self, *, url: str, branch: str, token: str | None, api_url: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, timeout: float = 30.0) -> None:
        self.owner, self.repo = repository(url)
        self.branch = branch
        headers = {"Accept": ACCEPT, "X-GitHub-Api-Version": API_VERSION, "User-Agent": "cutover"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.client = httpx.AsyncClient(base_url=(api_url or default_api(url)).rstrip("/"), headers=headers,
                                        timeout=timeout, transport=transport, trust_env=False)

    async def aclose(self) -> None:
        await self.client.aclose()

    def _contents(self, path: str) -> str:
        return f"/repos/{self.owner}/{self.repo}/contents/{quote(path)}"

    async def _call(self, method: str, url: str, *, what: str, **kwargs: Any) -> httpx.Response:
        async for attempt in retrying():
            with attempt:
                try:
                    response = await self.client.request(method, url, **kwargs)
                except httpx.TransportError as exc:
                    raise HostUnavailable(f"github: {what}: {type(exc).__name__}") from exc
                if response.status_code == 409 and method == "PUT":
                    raise StaleVersion(f"github: {what}: the file changed since it was read (409)")
                error = classify(response, what=what, provider="github")
                if error is not None:
                    raise error
                return response
        raise AssertionError("unreachable")  # pragma: no cover

    async def read(self, path: str) -> FileVersion:
        response = await self._call("GET", self._contents(path), params={"ref": self.branch},
                                    what=f"read {path}@{self.branch}")
        body = response.json()
        if not isinstance(body, dict) or body.get("type") != "file":
            raise GitError(f"github: {path} is not a file", cause="git_not_found", hint="check git.path")
        if body.get("encoding") != "base64":
            raise GitError(f"github: {path} came without its content (a file above 1 MB?)", cause="git_rejected",
                           hint="keep the Service in a smaller file")
        content = base64.b64decode(body["content"]).decode("utf-8")
        return FileVersion(content=content, version=body["sha"])

    async def write(self, path: str, content: str, *, expected: FileVersion, message: str,
                    author: Author) -> Written:
        person = {"name": author.name, "email": author.email}
        body = {"message": message, "content": base64.b64encode(content.encode()).decode(), "sha": expected.version,
                "branch": self.branch, "committer": person, "author": person}
        response = await self._call("PUT", self._contents(path), json=body, what=f"write {path}@{self.branch}")
        commit = response.json().get("commit") or {}
        return Written(sha=commit.get("sha", ""), url=commit.get("html_url"))

    async def history(self, path: str, *, limit: int = 20) -> list[Commit]:
        response = await self._call("GET", f"/repos/{self.owner}/{self.repo}/commits",
                                    params={"path": path, "sha": self.branch, "per_page": str(limit)},
                                    what=f"history of {path}")
        commits = []
        for item in response.json():
            detail = item.get("commit") or {}
            message = detail.get("message", "")
            who = detail.get("author") or {}
            date = who.get("date")
            commits.append(Commit(sha=item.get("sha", ""), title=message.split("\n", 1)[0],
                                  author=f"{who.get('name', '?')} <{who.get('email', '?')}>",
                                  date=datetime.fromisoformat(date.replace("Z", "+00:00")) if date else None,
                                  trailers=trailers(message)))
        return commits
