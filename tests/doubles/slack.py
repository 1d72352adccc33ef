"""A Slack double over HTTP: an incoming webhook and the two Web API methods cutover uses
(`chat.postMessage`, `chat.update`), recording every request. Faults: statuses to answer next
(429 with Retry-After, 500), or hanging forever.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import ssl
from typing import Any

from aiohttp import web

from cutover.demo.hosts import serve_local


@dataclasses.dataclass
class Posted:
    path: str
    body: dict[str, Any]
    authorization: str | None


class FakeSlack:
    def __init__(self, *, token: str = "xoxb-test-token-0000",  # noqa: S107 -- the double's own
                 hook: str = "/services/T000/B000/secretpath") -> None:
        self.token, self.hook = token, hook
        self.posted: list[Posted] = []
        self.faults: list[tuple[int, dict[str, str]]] = []  # (status, headers), answered in order
        self.hang = False
        self.always: int | None = None  # answer this status to every request (Slack down)
        self.failed = 0  # requests answered with `always`
        self._released = asyncio.Event()
        self._ts = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.ssl_context: ssl.SSLContext | None = None  # set before entering: serve HTTPS with this certificate

    @property
    def webhook(self) -> str:
        return self.url + self.hook

    async def __aenter__(self) -> FakeSlack:
        app = web.Application()
        app.router.add_post(self.hook, self._webhook)
        app.router.add_post("/api/chat.postMessage", self._post_message)
        app.router.add_post("/api/chat.update", self._update)
        self._runner, self.url = await serve_local(app, ssl_context=self.ssl_context)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._released.set()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _fault(self, request: web.Request) -> web.Response | None:
        if self.hang:
            await self._released.wait()
            return web.Response(status=503)
        if self.always is not None:
            self.failed += 1
            return web.Response(status=self.always, text="error")
        if self.faults:
            status, headers = self.faults.pop(0)
            return web.Response(status=status, headers=headers, text="rate_limited" if status == 429 else "error")
        return None

    async def _record(self, request: web.Request) -> web.Response | None:
        fault = await self._fault(request)
        if fault is not None:
            return fault
        self.posted.append(Posted(request.path, await request.json(), request.headers.get("Authorization")))
        return None

    async def _webhook(self, request: web.Request) -> web.Response:
        return await self._record(request) or web.Response(text="ok")

    def _authorized(self, request: web.Request) -> bool:
        return request.headers.get("Authorization") == f"Bearer {self.token}"

    async def _post_message(self, request: web.Request) -> web.Response:
        return await self._api(request, lambda body: f"1700000000.{next(self._ts):06d}")

    async def _update(self, request: web.Request) -> web.Response:
        return await self._api(request, lambda body: body.get("ts"))

    async def _api(self, request: web.Request, ts: Any) -> web.Response:
        """A Web API method: auth, faults, the record, then Slack's `ok` answer with the message's ts."""
        if not self._authorized(request):
            return web.json_response({"ok": False, "error": "invalid_auth"})
        fault = await self._record(request)
        if fault is not None:
            return fault
        body = self.posted[-1].body
        return web.json_response({"ok": True, "channel": body.get("channel"), "ts": ts(body),
                                  "message": {"text": body.get("text")}})
