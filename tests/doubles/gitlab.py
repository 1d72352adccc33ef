"""A GitLab REST API (v4) double over HTTP, storing into a real bare repository.

Repository files GET (content, `last_commit_id` = the last commit that touched the file), commits POST
with `update` actions (400 "You are attempting to update a file that has changed since you started
editing it." when `last_commit_id` is stale; 400 for a malformed body), commits list, and
`PRIVATE-TOKEN` auth (401 otherwise).
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from cutover.demo.gitrepo import BareRepo
from cutover.demo.hosts import FakeHost

STALE = "You are attempting to update a file that has changed since you started editing it."


class FakeGitLab(FakeHost):
    prefix = "/api/v4"

    def __init__(self, repo: BareRepo, *, project: str = "acme/gitops", token: str = "") -> None:
        super().__init__(repo, token=token)
        self.project = project
        self.archive_moved_to: str | None = None  # a URL: the archive answers 302 there (a CDN, or an attacker's)

    def routes(self, app: web.Application) -> None:
        # aiohttp decodes %2F in the path before matching, so the routes see the plain project path.
        base = f"{self.prefix}/projects/{{project:.+?}}/repository"
        app.router.add_route("GET", base + "/files/{path:.+}", self._get)
        app.router.add_route("POST", base + "/commits", self._commit)
        app.router.add_route("GET", base + "/commits", self._commits)
        app.router.add_route("GET", base + "/archive.tar.gz", self._archive)
        app.router.add_route("DELETE", base + "/branches/{branch:.+}", self._branch_delete)
        requests = f"{self.prefix}/projects/{{project:.+?}}/merge_requests"
        app.router.add_route("GET", requests, self._mr_list)
        app.router.add_route("POST", requests, self._mr_create)
        app.router.add_route("GET", requests + "/{iid:\\d+}", self._mr_get)

    def authorized(self, request: web.Request) -> bool:
        return request.headers.get("PRIVATE-TOKEN") == self.token

    def _known(self, request: web.Request) -> bool:
        return unquote(request.match_info["project"]) == self.project

    def _last_commit(self, path: str, branch: str) -> str:
        entries = self.repo.log(path, branch=branch, limit=1)
        return entries[0].sha if entries else ""

    async def _get(self, request: web.Request) -> web.Response:
        path, ref = unquote(request.match_info["path"]), request.query.get("ref", self.repo.branch)
        found = self.repo.read(path, ref) if self._known(request) else None
        if found is None:
            return web.json_response({"message": "404 File Not Found"}, status=404)
        content, blob = found
        return web.json_response({
            "file_name": path.rsplit("/", 1)[-1], "file_path": path, "size": len(content.encode()),
            "encoding": "base64", "content": base64.b64encode(content.encode()).decode(), "ref": ref,
            "blob_id": blob, "commit_id": self.repo.head(ref), "last_commit_id": self._last_commit(path, ref)})

    async def _commit(self, request: web.Request) -> web.Response:
        body = await request.json()
        if not self._known(request):
            return web.json_response({"message": "404 Project Not Found"}, status=404)
        if not isinstance(body, dict) or not body.get("branch") or not body.get("commit_message") or \
                not isinstance(body.get("actions"), list):
            return web.json_response({"error": "branch, commit_message, actions are missing"}, status=400)
        self.land_other_writes()
        branch, files = body["branch"], {}
        start = body.get("start_branch") or branch
        if start != branch:  # a new branch from start_branch; `force` replaces an existing one
            if self.repo.head(branch) is not None and not body.get("force"):
                return web.json_response({"message": f"A branch called '{branch}' already exists"}, status=400)
            self.repo.set_branch(branch, self.repo.head(start) or "")
        for action in body["actions"]:
            path = action.get("file_path", "")
            if action.get("action") != "update" or self.repo.read(path, branch) is None:
                return web.json_response({"message": "A file with this name doesn't exist"}, status=400)
            if action.get("last_commit_id") and action["last_commit_id"] != self._last_commit(path, start):
                return web.json_response({"message": STALE}, status=400)
            content = action.get("content", "")
            files[path] = base64.b64decode(content).decode() if action.get("encoding") == "base64" else content
        sha = self.repo.commit(files, body["commit_message"], name=body.get("author_name", "Administrator"),
                               email=body.get("author_email", "admin@example.com"), branch=branch)
        return web.json_response({"id": sha, "short_id": sha[:8], "title": body["commit_message"].split("\n")[0],
                                  "message": body["commit_message"],
                                  "web_url": f"https://gitlab.example/{self.project}/-/commit/{sha}"}, status=201)

    async def _branch_delete(self, request: web.Request) -> web.Response:
        branch = unquote(request.match_info["branch"])
        if not self._known(request) or self.repo.head(branch) is None:
            return web.json_response({"message": "404 Branch Not Found"}, status=404)
        self.repo.delete_branch(branch)
        return web.Response(status=204)

    async def _archive(self, request: web.Request) -> web.Response:
        """GET /projects/:id/repository/archive.tar.gz?sha=: the tree under <project>-<ref>-<sha>/."""
        if not self._known(request):
            return web.json_response({"message": "404 Project Not Found"}, status=404)
        if self.archive_moved_to is not None:
            raise web.HTTPFound(self.archive_moved_to)
        ref = request.query.get("sha") or self.repo.branch
        sha = self.repo.resolve(ref)
        body = self.repo.archive(ref, prefix=f"gitops-{ref}-{sha}") if sha else None
        if body is None:
            return web.json_response({"message": "404 File Not Found"}, status=404)
        return web.Response(body=body, content_type="application/x-gzip")

    async def _commits(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("per_page", "20"))
        entries = self.repo.log(request.query.get("path"), branch=request.query.get("ref_name"), limit=limit,
                                skip=limit * (int(request.query.get("page", "1")) - 1))
        return web.json_response([
            {"id": entry.sha, "short_id": entry.sha[:8], "title": entry.message.split("\n", 1)[0],
             "message": entry.message, "author_name": entry.name, "author_email": entry.email,
             "authored_date": entry.date, "web_url": f"https://gitlab.example/{self.project}/-/commit/{entry.sha}"}
            for entry in entries])

    def _mr_json(self, pull: Any) -> dict[str, Any]:
        state = {"open": "opened", "closed": "closed", "merged": "merged"}[pull.state]
        return {"iid": pull.number, "web_url": f"https://gitlab.example/{self.project}/-/merge_requests/{pull.number}",
                "state": state, "source_branch": pull.head, "target_branch": pull.base, "title": pull.title,
                "merge_commit_sha": pull.merge_sha}

    async def _mr_list(self, request: web.Request) -> web.Response:
        state = {"opened": "open", "merged": "merged", "closed": "closed"}.get(request.query.get("state", ""), "")
        source = request.query.get("source_branch", "")
        return web.json_response([self._mr_json(p) for p in self.pulls.values()
                                  if (not state or p.state == state) and (not source or p.head == source)])

    async def _mr_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if any(p.head == body["source_branch"] and p.state == "open" for p in self.pulls.values()):
            return web.json_response({"message": ["Another open merge request already exists for this source "
                                                  "branch"]}, status=409)
        pull = self.open_pull(head=body["source_branch"], base=body["target_branch"], title=body.get("title", ""),
                              body=body.get("description", ""))
        return web.json_response(self._mr_json(pull), status=201)

    async def _mr_get(self, request: web.Request) -> web.Response:
        pull = self.pulls.get(int(request.match_info["iid"]))
        if pull is None:
            return web.json_response({"message": "404 Not found"}, status=404)
        return web.json_response(self._mr_json(pull))
