"""GitLab (gitlab.com and self-managed) through the repository files and commits APIs (`/api/v4`).

Read: `GET /projects/:id/repository/files/:path?ref=` gives the content and `last_commit_id`, the last
commit that touched the file. Write: `POST /projects/:id/repository/commits` with one `update` action
carrying that `last_commit_id`; GitLab refuses it with 400 "You are attempting to update a file that
has changed since you started editing it." when another commit touched the file since (a commit to
another file does not). Project paths (with subgroups) and file paths are URL-encoded, `/` as `%2F`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from cutover.core.repository import Author, ChangeRequest, ChangeState, FileVersion, Written
from cutover.core.trailers import Trailers
from cutover.core.views import Commit
from cutover.errors import GitError, InvalidInput
from cutover.githost.base import HttpHost, decoded, token, unpack
from cutover.plan import GitSettings

STALE = "has changed since you started editing it"


def project(url: str) -> str:
    path = urlsplit(url).path.strip("/").removesuffix(".git")
    if path.count("/") < 1:
        raise InvalidInput(f"git.url: expected https://HOST/GROUP/PROJECT, found {url!r}", cause="invalid_plan",
                           hint="point git.url at the project")
    return path


def default_api(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}/api/v4"


class GitLab(HttpHost):
    name = "gitlab"

    def __init__(self, *, url: str, branch: str, token: str | None, api_url: str | None = None,
                 transport: httpx.AsyncBaseTransport | None = None, ca_file: str | None = None) -> None:
        self.project = quote(project(url), safe="")
        self.branch = branch
        super().__init__(api_url=api_url or default_api(url), headers={"PRIVATE-TOKEN": token} if token else {},
                         transport=transport, ca_file=ca_file)

    @classmethod
    def connect(cls, settings: GitSettings) -> GitLab:
        return cls(url=settings.url, branch=settings.branch, token=token(settings), api_url=settings.api_url,
                   ca_file=settings.ca_file)

    def stale(self, response: httpx.Response) -> bool:
        return response.status_code in (400, 409) and STALE in response.text

    async def snapshot(self, ref: str, into: Path) -> Path:
        with await self.download(f"/projects/{self.project}/repository/archive.tar.gz", params={"sha": ref},
                                 what=f"the archive of {ref}") as archive:
            return await asyncio.to_thread(unpack, archive, into, what=f"the archive of {ref}")  # off the loop

    def _file(self, path: str) -> str:
        return f"/projects/{self.project}/repository/files/{quote(path, safe='')}"

    async def read(self, path: str, *, ref: str | None = None) -> FileVersion:
        response = await self.call("GET", self._file(path), params={"ref": ref or self.branch},
                                   what=f"read {path}@{ref or self.branch}")
        try:
            body = response.json()
        except ValueError:
            raise GitError(f"gitlab: read {path}: the host answered with {response.headers.get('content-type', '?')}, "
                           "not JSON", cause="git_rejected", hint="a proxy or a login page answers for the host; "
                                                                 "check git.apiUrl") from None
        if not isinstance(body, dict) or not isinstance(body.get("content"), str) or not body.get("last_commit_id"):
            raise GitError(f"gitlab: {path} came without its content", cause="git_rejected",
                           hint="keep the Service in a smaller file")
        return FileVersion(content=decoded(body["content"], where=f"gitlab: {path}"),
                           version=str(body["last_commit_id"]), head=body.get("commit_id"))

    async def write(self, path: str, content: str, *, expected: FileVersion, message: str,
                    author: Author) -> Written:
        body: dict[str, Any] = {
            "branch": self.branch, "commit_message": message, "author_name": author.name,
            "author_email": author.email,
            "actions": [{"action": "update", "file_path": path, "content": content, "encoding": "text",
                         "last_commit_id": expected.version}],
        }
        response = await self.call("POST", f"/projects/{self.project}/repository/commits", json=body,
                                   what=f"commit {path}@{self.branch}")
        commit = response.json()
        return Written(sha=commit.get("id", ""), url=commit.get("web_url"))

    async def history(self, path: str, *, limit: int = 20, page: int = 1) -> list[Commit]:
        response = await self.call("GET", f"/projects/{self.project}/repository/commits",
                                   params={"ref_name": self.branch, "path": path, "per_page": str(limit),
                                           **({"page": str(page)} if page > 1 else {})},
                                   what=f"history of {path}")
        return [Commit(sha=item.get("id", ""), title=item.get("title", ""),
                       author=f"{item.get('author_name', '?')} <{item.get('author_email', '?')}>",
                       date=datetime.fromisoformat(item["authored_date"]) if item.get("authored_date") else None,
                       trailers=Trailers.parse(item.get("message", "")))
                for item in response.json()]

    # --- merge requests ------------------------------------------------------------------------------

    async def scratch(self, path: str, content: str, *, message: str, author: Author, branch: str) -> str:
        commit = {"branch": branch, "start_branch": self.branch, "force": True, "commit_message": message,
                  "author_name": author.name, "author_email": author.email,
                  "actions": [{"action": "update", "file_path": path, "content": content, "encoding": "text"}]}
        created = await self.call("POST", f"/projects/{self.project}/repository/commits", json=commit,
                                  what=f"commit {path}@{branch}")
        return str(created.json()["id"])

    async def drop(self, branch: str) -> None:
        try:
            await self.call("DELETE", f"/projects/{self.project}/repository/branches/{quote(branch, safe='')}",
                            what=f"delete branch {branch}")
        except GitError:  # best effort: the next render replaces it (force)
            return

    async def open_change(self, path: str, rewrite: Callable[[str], str], *, message: str, author: Author,
                          branch: str, title: str, body: str) -> ChangeRequest:
        requests = f"/projects/{self.project}/merge_requests"
        found = await self.call("GET", requests, params={"source_branch": branch, "state": "opened"},
                                what=f"find an open merge request from {branch}")
        for request in found.json():
            return ChangeRequest(number=str(request["iid"]), url=request.get("web_url", ""), branch=branch)
        # `start_branch` makes the branch from the base head; `force` replaces a leftover branch of that name;
        # `last_commit_id` refuses the commit if the file moved on the base since it was read.
        current = await self.read(path)
        commit = {"branch": branch, "start_branch": self.branch, "force": True, "commit_message": message,
                  "author_name": author.name, "author_email": author.email,
                  "actions": [{"action": "update", "file_path": path, "content": rewrite(current.content),
                               "encoding": "text", "last_commit_id": current.version}]}
        await self.call("POST", f"/projects/{self.project}/repository/commits", json=commit,
                        what=f"commit {path}@{branch}")
        created = await self.call("POST", requests, json={"source_branch": branch, "target_branch": self.branch,
                                                           "title": title, "description": body,
                                                           "remove_source_branch": True},
                                  what=f"open a merge request from {branch}")
        request = created.json()
        return ChangeRequest(number=str(request["iid"]), url=request.get("web_url", ""), branch=branch)

    async def change_state(self, change: ChangeRequest) -> ChangeState:
        response = await self.call("GET", f"/projects/{self.project}/merge_requests/{change.number}",
                                   what=f"read merge request !{change.number}")
        request = response.json()
        if request.get("state") == "merged":
            return ChangeState("merged", request.get("merge_commit_sha") or request.get("squash_commit_sha"))
        return ChangeState("open" if request.get("state") in ("opened", "locked") else "closed")
