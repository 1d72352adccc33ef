"""GitHub and Gitea/Forgejo REST API doubles over HTTP, storing into a real bare repository.

Serves the three calls cutover makes (contents GET and PUT, commits list) with each host's payload
shapes and answers: 401 for a bad token, 404 for a missing file, a stale `sha` in a PUT refused as
the host refuses it (GitHub 409; Gitea 422 "sha does not match"), 422 for a body without `content`
or without `sha` on an existing file.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from cutover.sim.gitrepo import BareRepo
from cutover.sim.hosts import FakeHost, Fault

__all__ = ["FakeContentsHost", "Fault"]

DOCS = "https://docs.github.com/rest"


class FakeContentsHost(FakeHost):
    def __init__(self, repo: BareRepo, *, flavor: str = "github", owner: str = "acme", name: str = "gitops",
                 token: str = "") -> None:
        super().__init__(repo, token=token)
        self.owner, self.name, self.flavor = owner, name, flavor
        self.prefix = "/api/v1" if flavor == "gitea" else ""

    def routes(self, app: web.Application) -> None:
        prefix = f"{self.prefix}/repos/{self.owner}/{self.name}"
        app.router.add_route("GET", prefix + "/contents/{path:.+}", self._get)
        app.router.add_route("PUT", prefix + "/contents/{path:.+}", self._put)
        app.router.add_route("GET", prefix + "/commits", self._commits)

    def authorized(self, request: web.Request) -> bool:
        scheme = "token" if self.flavor == "gitea" else "Bearer"
        return request.headers.get("Authorization") == f"{scheme} {self.token}"

    def unauthorized(self) -> web.Response:
        return web.json_response({"message": "Bad credentials", "documentation_url": DOCS, "status": "401"},
                                 status=401)

    def _file(self, path: str, content: str, sha: str) -> dict[str, Any]:
        encoded = base64.b64encode(content.encode()).decode()
        html = f"https://github.com/{self.owner}/{self.name}/blob/{self.repo.branch}/{path}"
        return {"type": "file", "encoding": "base64", "size": len(content.encode()), "name": path.rsplit("/", 1)[-1],
                "path": path, "sha": sha, "url": f"{self.url}/repos/{self.owner}/{self.name}/contents/{path}",
                "html_url": html, "git_url": None, "download_url": None,
                "content": "\n".join(encoded[i:i + 60] for i in range(0, len(encoded), 60)) + "\n",
                "_links": {"self": "", "git": None, "html": html}}

    async def _get(self, request: web.Request) -> web.Response:
        path = unquote(request.match_info["path"])
        found = self.repo.read(path, request.query.get("ref"))
        if found is None:
            return web.json_response({"message": "Not Found", "documentation_url": DOCS, "status": "404"}, status=404)
        return web.json_response(self._file(path, *found))

    async def _put(self, request: web.Request) -> web.Response:
        path = unquote(request.match_info["path"])
        body = await request.json()
        message_missing = self.flavor == "github" and not body.get("message")  # optional on Gitea
        if not isinstance(body, dict) or message_missing or "content" not in body:
            return web.json_response({"message": "Invalid request.\n\n\"message\" and \"content\" are required.",
                                      "documentation_url": DOCS, "status": "422"}, status=422)
        self.land_other_writes()
        branch = body.get("branch") or self.repo.branch
        current = self.repo.read(path, branch)
        if current is not None and not body.get("sha"):
            return web.json_response({"message": "Invalid request.\n\n\"sha\" wasn't supplied.",
                                      "documentation_url": DOCS, "status": "422"}, status=422)
        if current is not None and body["sha"] != current[1]:
            if self.flavor == "gitea":  # routers/api/v1/repo/file.go: ErrSHADoesNotMatch is 422 "Invalid"
                return web.json_response({"message": f"sha does not match [given: {body['sha']}, expected: "
                                                     f"{current[1]}]", "url": DOCS}, status=422)
            return web.json_response({"message": f"{path} does not match {body['sha']}",
                                      "documentation_url": DOCS, "status": "409"}, status=409)
        author = body.get("author") or body.get("committer") or {"name": "octocat", "email": "octocat@github.com"}
        content = base64.b64decode(body["content"]).decode()
        sha = self.repo.commit({path: content}, body["message"], name=author["name"], email=author["email"],
                               branch=branch)
        blob = self.repo.read(path, branch)
        assert blob is not None
        html = f"https://github.com/{self.owner}/{self.name}/commit/{sha}"
        return web.json_response({"content": self._file(path, content, blob[1]),
                                  "commit": {"sha": sha, "html_url": html, "message": body["message"]}})

    async def _commits(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit" if self.flavor == "gitea" else "per_page", "30"))
        entries = self.repo.log(request.query.get("path"), branch=request.query.get("sha"), limit=limit)
        return web.json_response([
            {"sha": entry.sha, "html_url": f"https://github.com/{self.owner}/{self.name}/commit/{entry.sha}",
             "commit": {"message": entry.message.rstrip("\n"),
                        "author": {"name": entry.name, "email": entry.email, "date": entry.date},
                        "committer": {"name": entry.name, "email": entry.email, "date": entry.date}}}
            for entry in entries])
