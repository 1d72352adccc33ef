"""GitHub and Gitea/Forgejo REST API doubles over HTTP, storing into a real bare repository.

Serves the calls cutover makes (contents GET and PUT, commits list, the repository archive) with each host's
payload shapes and answers: 401 for a bad token, 404 for a missing file, a stale `sha` in a PUT refused as the
host refuses it (GitHub 409; Gitea 422 "sha does not match"), 422 for a body without `content` or without `sha`
on an existing file. GitHub's tarball answers 302 to a codeload server of the double's own, on another port, as
codeload.github.com is another host that needs no token.
"""

from __future__ import annotations

import base64
from typing import Any
from urllib.parse import unquote

from aiohttp import web

from cutover.core.clock import Clock
from cutover.demo.gitrepo import BareRepo
from cutover.demo.hosts import FakeHost, Fault, serve_local

__all__ = ["FakeContentsHost", "Fault"]

DOCS = "https://docs.github.com/rest"


class FakeContentsHost(FakeHost):
    def __init__(self, repo: BareRepo, *, flavor: str = "github", owner: str = "acme", name: str = "gitops",
                 token: str = "") -> None:
        super().__init__(repo, token=token)
        self.owner, self.name, self.flavor = owner, name, flavor
        self.prefix = "/api/v1" if flavor == "gitea" else ""
        self.codeload_requests: list[web.Request] = []
        self.codeload_url = ""

    def routes(self, app: web.Application) -> None:
        prefix = f"{self.prefix}/repos/{self.owner}/{self.name}"
        app.router.add_route("GET", prefix + "/contents/{path:.+}", self._get)
        app.router.add_route("PUT", prefix + "/contents/{path:.+}", self._put)
        app.router.add_route("GET", prefix + "/commits", self._commits)
        if self.flavor == "github":
            app.router.add_route("GET", prefix + "/tarball/{ref:.+}", self._tarball)
        else:
            app.router.add_route("GET", prefix + "/archive/{archive:.+}", self._archive)
        app.router.add_route("GET", prefix + "/pulls", self._pull_list)
        app.router.add_route("POST", prefix + "/pulls", self._pull_create)
        app.router.add_route("GET", prefix + "/pulls/{number:\\d+}", self._pull_get)
        if self.flavor == "github":
            app.router.add_route("GET", prefix + "/git/ref/heads/{branch:.+}", self._ref_get)
            app.router.add_route("POST", prefix + "/git/refs", self._ref_create)
            app.router.add_route("PATCH", prefix + "/git/refs/heads/{branch:.+}", self._ref_update)
            app.router.add_route("DELETE", prefix + "/git/refs/heads/{branch:.+}", self._ref_delete)
        else:
            app.router.add_route("GET", prefix + "/branches/{branch:.+}", self._branch_get)
            app.router.add_route("DELETE", prefix + "/branches/{branch:.+}", self._branch_delete)
            app.router.add_route("POST", prefix + "/branches", self._branch_create)

    async def __aenter__(self) -> FakeContentsHost:
        await super().__aenter__()
        codeload = web.Application()
        codeload.router.add_route("GET", "/{owner}/{repo}/legacy.tar.gz/{sha}", self._codeload)
        # beside the API, on its scheme (codeload.github.com is https, as an archive's redirect must stay)
        self._codeload_runner, self.codeload_url = await serve_local(codeload, ssl_context=self.ssl_context,
                                                                     address=(self.address[0], 0))
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._codeload_runner.cleanup()
        await super().__aexit__(*exc)

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
                               branch=branch, date=Clock().now())  # dated by the loop's clock, fake time too
        blob = self.repo.read(path, branch)
        assert blob is not None
        html = f"https://github.com/{self.owner}/{self.name}/commit/{sha}"
        return web.json_response({"content": self._file(path, content, blob[1]),
                                  "commit": {"sha": sha, "html_url": html, "message": body["message"]}})

    async def _commits(self, request: web.Request) -> web.Response:
        limit = int(request.query.get("limit" if self.flavor == "gitea" else "per_page", "30"))
        page = int(request.query.get("page", "1"))
        entries = self.repo.log(request.query.get("path"), branch=request.query.get("sha"), limit=limit,
                                skip=limit * (page - 1))
        return web.json_response([
            {"sha": entry.sha, "html_url": f"https://github.com/{self.owner}/{self.name}/commit/{entry.sha}",
             "commit": {"message": entry.message.rstrip("\n"),
                        "author": {"name": entry.name, "email": entry.email, "date": entry.date},
                        "committer": {"name": entry.name, "email": entry.email, "date": entry.date}}}
            for entry in entries])

    # --- archives -----------------------------------------------------------------------------------------

    async def _tarball(self, request: web.Request) -> web.Response:
        sha = self.repo.resolve(request.match_info["ref"])
        if sha is None:
            return web.json_response({"message": "Not Found", "documentation_url": DOCS, "status": "404"}, status=404)
        raise web.HTTPFound(f"{self.codeload_url}/{self.owner}/{self.name}/legacy.tar.gz/{sha}")

    async def _codeload(self, request: web.Request) -> web.Response:
        self.codeload_requests.append(request)
        sha = request.match_info["sha"]
        body = self.repo.archive(sha, prefix=f"{self.owner}-{self.name}-{sha[:7]}")
        return web.Response(body=body, content_type="application/x-gzip") if body else web.Response(status=404)

    async def _archive(self, request: web.Request) -> web.Response:
        ref = request.match_info["archive"].removesuffix(".tar.gz")
        body = self.repo.archive(ref, prefix=self.name) if request.match_info["archive"].endswith(".tar.gz") else None
        if body is None:
            return web.json_response({"message": "The target couldn't be found."}, status=404)
        return web.Response(body=body, content_type="application/octet-stream")

    # --- branches and pull requests ----------------------------------------------------------------------

    def _pull_json(self, pull: Any) -> dict[str, Any]:
        html = f"https://github.com/{self.owner}/{self.name}/pull/{pull.number}"
        return {"number": pull.number, "html_url": html, "title": pull.title, "body": pull.body,
                "state": "open" if pull.state == "open" else "closed", "merged": pull.state == "merged",
                "merge_commit_sha": pull.merge_sha, "head": {"ref": pull.head}, "base": {"ref": pull.base}}

    async def _pull_list(self, request: web.Request) -> web.Response:
        head = request.query.get("head", "")
        pulls = [p for p in self.pulls.values() if request.query.get("state", "open") in ("all", p.state)
                 and (not head or head == f"{self.owner}:{p.head}")]
        return web.json_response([self._pull_json(p) for p in pulls])

    async def _pull_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.repo.head(body.get("head")) is None:
            return web.json_response({"message": "Validation Failed", "documentation_url": DOCS}, status=422)
        if any(p.head == body["head"] and p.state == "open" for p in self.pulls.values()):
            return web.json_response({"message": "A pull request already exists", "documentation_url": DOCS},
                                     status=422)
        pull = self.open_pull(head=body["head"], base=body["base"], title=body.get("title", ""),
                              body=body.get("body", ""))
        return web.json_response(self._pull_json(pull), status=201)

    async def _pull_get(self, request: web.Request) -> web.Response:
        pull = self.pulls.get(int(request.match_info["number"]))
        if pull is None:
            return web.json_response({"message": "Not Found", "documentation_url": DOCS}, status=404)
        return web.json_response(self._pull_json(pull))

    async def _ref_get(self, request: web.Request) -> web.Response:
        branch = request.match_info["branch"]
        sha = self.repo.head(branch)
        if sha is None:
            return web.json_response({"message": "Not Found", "documentation_url": DOCS}, status=404)
        return web.json_response({"ref": f"refs/heads/{branch}", "object": {"sha": sha, "type": "commit"}})

    async def _ref_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        branch = body["ref"].removeprefix("refs/heads/")
        if self.repo.head(branch) is not None:
            return web.json_response({"message": "Reference already exists", "documentation_url": DOCS}, status=422)
        self.repo.set_branch(branch, body["sha"])
        return web.json_response({"ref": body["ref"], "object": {"sha": body["sha"], "type": "commit"}}, status=201)

    async def _ref_update(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.repo.set_branch(request.match_info["branch"], body["sha"])
        return web.json_response({"ref": f"refs/heads/{request.match_info['branch']}",
                                  "object": {"sha": body["sha"], "type": "commit"}})

    async def _ref_delete(self, request: web.Request) -> web.Response:
        if self.repo.head(request.match_info["branch"]) is None:
            return web.json_response({"message": "Reference does not exist", "documentation_url": DOCS}, status=422)
        self.repo.delete_branch(request.match_info["branch"])
        return web.Response(status=204)

    async def _branch_get(self, request: web.Request) -> web.Response:
        sha = self.repo.head(request.match_info["branch"])
        if sha is None:
            return web.json_response({"message": "branch does not exist"}, status=404)
        return web.json_response({"name": request.match_info["branch"], "commit": {"id": sha}})

    async def _branch_delete(self, request: web.Request) -> web.Response:
        self.repo.delete_branch(request.match_info["branch"])
        return web.Response(status=204)

    async def _branch_create(self, request: web.Request) -> web.Response:
        body = await request.json()
        if self.repo.head(body["new_branch_name"]) is not None:
            return web.json_response({"message": "The branch already exists."}, status=409)
        sha = self.repo.head(body.get("old_branch_name"))
        assert sha is not None
        self.repo.set_branch(body["new_branch_name"], sha)
        return web.json_response({"name": body["new_branch_name"], "commit": {"id": sha}}, status=201)
