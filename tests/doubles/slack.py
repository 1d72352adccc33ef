"""A Slack double over HTTP: an incoming webhook and the Web API methods cutover uses (`chat.postMessage`,
`chat.update`, `chat.delete`, and `conversations.history` for a fleet's thread), recording every request, keeping
the channel's messages as Slack does (a reply is no message of the history; metadata only when asked with
`include_all_metadata`). Faults: statuses to answer next (429 with Retry-After, 500), or hanging forever; `history`
answers a refusal to `conversations.history` (a bot without `channels:history`: `missing_scope`).
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
                 hook: str = "/services/T000/B000/secretpath", epoch: int = 1700000000) -> None:
        self.token, self.hook = token, hook
        self.epoch = epoch  # the seconds of every ts; a fleet's test gives today's, which `oldest` is measured from
        self.posted: list[Posted] = []
        self.faults: list[tuple[int, dict[str, str]]] = []  # (status, headers), answered in order
        self.hang = False
        self.always: int | None = None  # answer this status to every request (Slack down)
        self.failed = 0  # requests answered with `always`
        self._released = asyncio.Event()
        self._ts = itertools.count(1)
        self.messages: dict[str, dict[str, Any]] = {}  # ts -> the message as Slack keeps it, in the order posted
        self.history: str | None = None  # an error conversations.history answers, e.g. "missing_scope"
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
        app.router.add_post("/api/chat.delete", self._delete)
        app.router.add_get("/api/conversations.history", self._history)
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

    def threads(self) -> dict[str, list[dict[str, Any]]]:
        """Each head message still in the channel, with its replies in order."""
        kept = self.messages.values()
        return {ts: [reply for reply in kept if reply.get("thread_ts") == ts]
                for ts, head in self.messages.items() if "thread_ts" not in head}

    async def _post_message(self, request: web.Request) -> web.Response:
        def posted(body: dict[str, Any]) -> str:
            ts = f"{self.epoch}.{next(self._ts):06d}"
            self.messages[ts] = {"ts": ts, "text": body.get("text"), "metadata": body.get("metadata"),
                                 **({"thread_ts": body["thread_ts"]} if body.get("thread_ts") else {})}
            return ts
        return await self._api(request, posted)

    async def _update(self, request: web.Request) -> web.Response:
        def updated(body: dict[str, Any]) -> str | None:
            if body.get("ts") in self.messages:
                self.messages[body["ts"]]["text"] = body.get("text")
            return body.get("ts")
        return await self._api(request, updated)

    async def _delete(self, request: web.Request) -> web.Response:
        if self._authorized(request) and (await request.json()).get("ts") not in self.messages:
            return web.json_response({"ok": False, "error": "message_not_found"})
        return await self._api(request, lambda body: self.messages.pop(body["ts"])["ts"])

    async def _history(self, request: web.Request) -> web.Response:
        """conversations.history: the channel's messages newest first, replies left out; `metadata` only with
        include_all_metadata; no more than `limit`, none older than `oldest`."""
        if not self._authorized(request):
            return web.json_response({"ok": False, "error": "invalid_auth"})
        query = request.query
        self.posted.append(Posted(request.path, dict(query), request.headers.get("Authorization")))
        if self.history is not None:
            return web.json_response({"ok": False, "error": self.history})
        heads = [dict(message) for message in reversed(self.messages.values()) if "thread_ts" not in message
                 and float(message["ts"]) > float(query.get("oldest", "0"))]
        for head in heads:
            metadata = head.pop("metadata")
            if metadata and query.get("include_all_metadata") in ("true", "1"):
                head["metadata"] = metadata
        limit = int(query.get("limit", "100"))
        return web.json_response({"ok": True, "messages": heads[:limit], "has_more": len(heads) > limit})

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
