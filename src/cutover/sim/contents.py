"""GitHub and Gitea/Forgejo REST API doubles over HTTP, storing into a real bare repository.

Serves the three calls cutover makes (contents GET and PUT, commits list) with each host's payload
shapes and answers: 401 for a bad token, 404 for a missing file, a stale `sha` in a PUT refused as
the host refuses it (GitHub 409; Gitea 422 "sha does not match"), 422 for a body without `content`
or without `sha` on an existing file. Faults can be queued per method (status, headers), a hook can
commit "someone else's" change just before a PUT lands, and a validator (the tests give an OpenAPI one)
sees every request.
"""

from __future__ import annotations

import base64
import dataclasses
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from cutover.sim.gitrepo import BareRepo

DOCS = "https://docs.github.com/rest"


@dataclasses.dataclass
class Fault:
    method: str
    status: int
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: Any = None
    reset_connection: bool = False


class FakeContentsHost:
    def __init__(self, repo: BareRepo, *, flavor: str = "github", owner: str = "acme", name: str = "gitops",
                 token: str = "") -> None:
        self.repo, self.owner, self.name, self.token, self.flavor = repo, owner, name, token, flavor
        self.prefix = "/api/v1" if flavor == "gitea" else ""
        self.auth = f"token {token}" if flavor == "gitea" else f"Bearer {token}"
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, Any]] = []  # (method, path with query, json body)
        self.before_put: Callable[[], None] | None = None
        self.validator: Callable[[web.Request, bytes], None] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def __aenter__(self) -> FakeContentsHost:
        app = web.Application()
        prefix = f"{self.prefix}/repos/{self.owner}/{self.name}"
        app.router.add_route("GET", prefix + "/contents/{path:.+}", self._get)
        app.router.add_route("PUT", prefix + "/contents/{path:.+}", self._put)
        app.router.add_route("GET", prefix + "/commits", self._commits)
        app.middlewares.append(self._middleware)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}{self.prefix}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        self.requests.append((request.method, request.path_qs, json.loads(raw) if raw else None))
        if self.validator is not None:
            self.validator(request, raw)
        fault = next((f for f in self.faults if f.method == request.method), None)
        if fault is not None:
            self.faults.remove(fault)
            if fault.reset_connection:
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=500)
            return web.json_response(fault.body or {"message": "injected", "documentation_url": DOCS},
                                     status=fault.status, headers=fault.headers)
        if self.token and request.headers.get("Authorization") != self.auth:
            return web.json_response({"message": "Bad credentials", "documentation_url": DOCS, "status": "401"},
                                     status=401)
        response: web.StreamResponse = await handler(request)
        return response

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
        if self.before_put is not None:
            hook, self.before_put = self.before_put, None
            hook()
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
