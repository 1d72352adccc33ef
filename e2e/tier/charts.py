"""The tier's Helm repository: the charts of e2e/fixtures/charts packaged and indexed by the pinned helm itself
(`helm package`, `helm repo index`), served over HTTPS at the Git host's address with a certificate of the same
CA, so the repo-server fetches the helm-values example's chart as it fetches one from a chart repository."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from pathlib import Path

import trustme
from aiohttp import web

ADDRESS = ("10.250.0.20", 8445)
URL = f"https://{ADDRESS[0]}:{ADDRESS[1]}/llm"  # what the example's https://charts.example.invalid/llm becomes


class ChartRepository:
    def __init__(self, charts: Path, run_dir: Path, ca: trustme.CA) -> None:
        self.dir = run_dir / "charts" / "llm"
        self.dir.mkdir(parents=True, exist_ok=True)
        for chart in sorted(p for p in charts.iterdir() if (p / "Chart.yaml").is_file()):
            helm("package", str(chart), "--destination", str(self.dir))
        helm("repo", "index", str(self.dir), "--url", URL)
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(ADDRESS[0]).configure_cert(self.context)
        self.requests: list[str] = []  # the paths asked for
        self._runner: web.AppRunner | None = None

    async def __aenter__(self) -> ChartRepository:
        app = web.Application(middlewares=[self._record])
        app.router.add_static("/llm", self.dir)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, *ADDRESS, ssl_context=self.context).start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    @web.middleware
    async def _record(self, request: web.Request, handler: web.RequestHandler) -> web.StreamResponse:
        self.requests.append(request.path)
        return await handler(request)

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.run_coroutine_threadsafe(self.__aenter__(), loop).result(30)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        asyncio.run_coroutine_threadsafe(self.__aexit__(None, None, None), loop).result(30)


def helm(*args: str) -> None:
    subprocess.run(["helm", *args], check=True, capture_output=True, text=True, timeout=60)
