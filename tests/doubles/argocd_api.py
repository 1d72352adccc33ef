"""A double of the ArgoCD server's REST API over the simulated world: the operations cutover uses.

`GET /api/v1/applications/{name}` answers the Application the emulated API server holds (`GET
/api/v1/applicationsets/{name}` its ApplicationSet), and with
`refresh=normal` sets the refresh annotation (what ArgoCD's server does before it waits for the controller);
`GET /api/v1/applications/{name}/manifests` renders the source at `revision` (or `revisions` with
`sourcePositions`) exactly as the simulated ArgoCD does (real kustomize, or the directory's files), one JSON
string per object, as `repositoryManifestResponse`. A bearer token is required. Every request and answer goes
through a validator (tests/contracts.SwaggerRecorder: ArgoCD 3.6's swagger.json).
"""

from __future__ import annotations

import json
import ssl
from typing import Any

from aiohttp import web

from cutover.demo import argocd as sim_argocd
from cutover.demo.gitrepo import BareRepo
from cutover.demo.hosts import serve_local
from cutover.demo.world import World


class FakeArgoCDApi:
    def __init__(self, world: World, repo: BareRepo, *, token: str, validator: Any = None) -> None:
        self.world, self.repo, self.token, self.validator = world, repo, token, validator
        self.requests: list[tuple[str, str]] = []  # (path, query string)
        self.url = ""
        self._runner: web.AppRunner | None = None
        self.ssl_context: ssl.SSLContext | None = None  # set before entering: serve HTTPS with this certificate

    async def __aenter__(self) -> FakeArgoCDApi:
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("GET", "/api/v1/applications/{name}", self._get)
        app.router.add_route("GET", "/api/v1/applications/{name}/manifests", self._manifests)
        app.router.add_route("GET", "/api/v1/applicationsets/{name}", self._applicationset)
        self._runner, self.url = await serve_local(app, ssl_context=self.ssl_context)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.path, request.query_string))
        if self.validator is not None:
            self.validator.request(request.method, request.path, request.query)
        if request.headers.get("Authorization") != f"Bearer {self.token}":
            response: web.StreamResponse = web.json_response(
                {"error": "invalid session: token is malformed", "code": 16, "message": "invalid session"},
                status=401)
        else:
            response = await handler(request)
        if self.validator is not None and isinstance(response, web.Response) and response.body:
            assert isinstance(response.body, bytes)
            self.validator.response(request.method, request.path, response.status, json.loads(response.body))
        return response

    def _application(self, name: str) -> dict[str, Any] | None:
        return self.world.kube.stored(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, name)

    async def _get(self, request: web.Request) -> web.Response:
        app = self._application(request.match_info["name"])
        if app is None:
            return web.json_response({"error": "not found", "code": 5, "message": "not found"}, status=404)
        if request.query.get("refresh"):
            self.world.kube.merge(sim_argocd.APPS, sim_argocd.ARGOCD_NAMESPACE, request.match_info["name"], {
                "metadata": {"annotations": {"argocd.argoproj.io/refresh": request.query["refresh"]}}})
            app = self._application(request.match_info["name"]) or app
        return web.json_response(app)

    async def _applicationset(self, request: web.Request) -> web.Response:
        found = self.world.kube.stored("argoproj.io/v1alpha1/applicationsets",
                                       request.query.get("appsetNamespace") or sim_argocd.ARGOCD_NAMESPACE,
                                       request.match_info["name"])
        if found is None:
            return web.json_response({"error": "not found", "code": 5, "message": "not found"}, status=404)
        return web.json_response(found)

    async def _manifests(self, request: web.Request) -> web.Response:
        app = self._application(request.match_info["name"])
        if app is None:
            return web.json_response({"error": "not found", "code": 5, "message": "not found"}, status=404)
        spec = app["spec"]
        if request.query.getall("sourcePositions", []):
            position = int(request.query["sourcePositions"]) - 1
            source, revision = spec["sources"][position], request.query["revisions"]
        else:
            source, revision = spec["source"], request.query["revision"]
        sha = self.repo.resolve(revision)
        if sha is None:
            return web.json_response({"error": f"unable to resolve '{revision}'", "code": 2,
                                      "message": f"unable to resolve '{revision}'"}, status=500)
        docs = sim_argocd.render(self.repo, sha, source["path"])
        return web.json_response({"manifests": [json.dumps(doc) for doc in docs], "revision": sha,
                                  "namespace": spec["destination"]["namespace"],
                                  "server": spec["destination"]["server"], "sourceType": "Directory"})
