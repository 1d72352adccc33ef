"""What the Git host doubles share: an aiohttp server, a request log, queued faults, an auth check, a hook
that lets "someone else" commit just before a write lands, and a validator that sees every request.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web

from cutover.demo.gitrepo import BareRepo


@dataclasses.dataclass
class Fault:
    method: str
    status: int
    headers: dict[str, str] = dataclasses.field(default_factory=dict)
    body: Any = None
    reset_connection: bool = False  # drop the connection instead of answering; nothing is written
    after_write: bool = False  # serve the request (the write lands), then drop the connection: the client
    #                            never learns that it succeeded
    raw: bytes | None = None  # answer these bytes (with `headers`) instead of JSON: a proxy's HTML page, say
    drip: bool = False  # serve the request, but send its answer a byte a second


@dataclasses.dataclass
class Pull:
    number: int
    head: str
    base: str
    title: str
    body: str
    state: str = "open"  # open | closed | merged
    merge_sha: str | None = None


async def serve_local(app: web.Application, *, ssl_context: ssl.SSLContext | None = None,
                      address: tuple[str, int] = ("127.0.0.1", 0)) -> tuple[web.AppRunner, str]:
    """`app` on a free loopback port (or `address`: the real tier's Git host lives at an address of its network
    namespace), over TLS with `ssl_context`: its runner (clean it up to stop) and base URL."""
    # a host that goes away ends what it was answering within a second: aiohttp's own wait is 60 s, on the real
    # clock when a test's fake time has ended (a fixture's teardown)
    runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, address[0], address[1], ssl_context=ssl_context).start()
    port = runner.addresses[0][1]
    scheme = "https" if ssl_context else "http"
    default = 443 if ssl_context else 80
    return runner, f"{scheme}://{address[0]}" + ("" if port == default else f":{port}")


class FakeHost:
    prefix = ""  # where the API lives under the server root

    def __init__(self, repo: BareRepo, *, token: str = "") -> None:
        self.repo, self.token = repo, token
        self.faults: list[Fault] = []
        self.requests: list[tuple[str, str, Any]] = []  # (method, path with query, json body)
        self.raw_paths: list[str] = []  # each request's path as sent, its escapes kept
        self.before_write: Callable[[], None] | None = None
        self.validator: Callable[[web.Request, bytes], None] | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""
        self.pulls: dict[int, Pull] = {}
        self.ssl_context: ssl.SSLContext | None = None  # set before entering: serve HTTPS with this certificate
        self.address: tuple[str, int] = ("127.0.0.1", 0)  # set before entering: where to listen

    def open_pull(self, *, head: str, base: str, title: str, body: str) -> Pull:
        pull = Pull(len(self.pulls) + 1, head, base, title, body)
        self.pulls[pull.number] = pull
        return pull

    def merge(self, number: int) -> str:
        """What a reviewer's merge button does."""
        pull = self.pulls[number]
        pull.merge_sha = self.repo.merge(pull.head, pull.base, message=f"Merge '{pull.head}' ({pull.title})\n")
        pull.state = "merged"
        return pull.merge_sha

    def close(self, number: int) -> None:
        self.pulls[number].state = "closed"

    def routes(self, app: web.Application) -> None:
        raise NotImplementedError

    def authorized(self, request: web.Request) -> bool:
        raise NotImplementedError

    def unauthorized(self) -> web.Response:
        return web.json_response({"message": "401 Unauthorized"}, status=401)

    async def __aenter__(self) -> FakeHost:
        app = web.Application(middlewares=[self._middleware])
        self.routes(app)
        self._runner, url = await serve_local(app, ssl_context=self.ssl_context, address=self.address)
        self.url = url + self.prefix
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    def land_other_writes(self) -> None:
        """Run the hook once, as another writer racing the write that is arriving."""
        if self.before_write is not None:
            hook, self.before_write = self.before_write, None
            hook()

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        raw = await request.read()
        self.requests.append((request.method, request.path_qs, json.loads(raw) if raw else None))
        self.raw_paths.append(request.raw_path)
        if self.validator is not None:
            self.validator(request, raw)
        fault = next((f for f in self.faults if f.method == request.method), None)
        if fault is not None:
            self.faults.remove(fault)
            return await _inject(fault, request, handler)
        if self.token and not self.authorized(request):
            return self.unauthorized()
        response: web.StreamResponse = await handler(request)
        return response


async def _inject(fault: Fault, request: web.Request, handler: Any) -> web.StreamResponse:
    """What a fault answers instead of the host (or after it, for a write that lands unbeknown)."""
    if fault.drip:
        return await _drip(request, await handler(request))
    if fault.after_write or fault.reset_connection:
        served: web.StreamResponse = await handler(request) if fault.after_write else web.Response(status=500)
        assert request.transport is not None
        request.transport.abort()  # after_write: the write landed, the client never hears so
        return served
    if fault.raw is not None:
        return web.Response(body=fault.raw, status=fault.status, headers=fault.headers)
    return web.json_response(fault.body or {"message": "injected"}, status=fault.status, headers=fault.headers)


async def _drip(request: web.Request, answer: web.StreamResponse) -> web.StreamResponse:
    """`answer` a byte a second: each read is quick, the whole takes as many seconds as it has bytes."""
    assert isinstance(answer, web.Response)
    assert isinstance(answer.body, bytes)
    dripped = web.StreamResponse(status=answer.status, headers={"Content-Type": answer.content_type})
    await dripped.prepare(request)
    for byte in answer.body:
        await dripped.write(bytes([byte]))
        await asyncio.sleep(1)
    await dripped.write_eof()
    return dripped
