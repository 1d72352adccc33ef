"""Git's smart HTTP protocol for a directory of bare repositories, served by Git's own
`git http-backend` (as CGI) behind Basic auth: what a Git server looks like to `git fetch` and
`git push`. A hook can land "someone else's" commit just before a push is taken in.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import subprocess
from collections.abc import Callable
from pathlib import Path

from aiohttp import web


def http_backend() -> str:
    exec_path = subprocess.run(["git", "--exec-path"], capture_output=True, text=True, check=True).stdout.strip()
    return str(Path(exec_path) / "git-http-backend")


class GitHttpServer:
    def __init__(self, root: Path, *, username: str, password: str, more: dict[str, str] | None = None) -> None:
        self.root, self.username, self.password = root, username, password
        self.accounts = {username: password, **(more or {})}  # every user the server lets in, by password
        self.before_push: Callable[[], None] | None = None
        self.fail_next: list[int] = []  # HTTP statuses to answer instead of serving, in order
        self.requests: list[tuple[str, str, str | None]] = []  # (method, path, Authorization header)
        self.hosts: list[tuple[str, str | None]] = []  # (Host header, Authorization header) of every request
        self.ssl_context: ssl.SSLContext | None = None  # set before entering: serve HTTPS with this certificate
        self.moved_to: str | None = None  # a base URL: requests for any other host are redirected there (302)
        self.address: tuple[str, int] = ("127.0.0.1", 0)  # set before entering: where to listen
        self._runner: web.AppRunner | None = None
        self._tls: asyncio.Server | None = None
        self._backend = http_backend()
        self.url = ""

    async def __aenter__(self) -> GitHttpServer:
        app = web.Application(client_max_size=64 << 20)
        app.router.add_route("*", "/{tail:.*}", self._serve)
        # No keep-alive: git runs outside the event loop, so under fake time the loop may jump past a
        # keep-alive timeout while git works and close a connection git is about to reuse.
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False, keepalive_timeout=0)
        await self._runner.setup()
        if self.ssl_context is None:
            await web.TCPSite(self._runner, *self.address).start()
            self.url = f"http://{self.address[0]}:{self._runner.addresses[0][1]}"
            return self
        # TLS by hand: the loop's TLS handshake and shutdown timeouts (60 s, 30 s) would fire at once under fake
        # time, while git shakes hands outside the loop; TCPSite cannot lengthen them.
        assert self._runner.server is not None
        self._tls = await asyncio.get_running_loop().create_server(
            self._runner.server, *self.address, ssl=self.ssl_context, ssl_handshake_timeout=86400,
            ssl_shutdown_timeout=86400)
        self.url = f"https://{self.address[0]}:{self._tls.sockets[0].getsockname()[1]}"
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._tls is not None:
            self._tls.close()
        if self._runner is not None:
            await self._runner.cleanup()

    def _user(self, header: str | None) -> str | None:
        """Who the Basic credentials name, when they are one of the accounts'."""
        for username, password in self.accounts.items():
            if header == "Basic " + base64.b64encode(f"{username}:{password}".encode()).decode():
                return username
        return None

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        header = request.headers.get("Authorization")
        self.hosts.append((request.host, header))
        if self.moved_to is not None and request.host != self.moved_to.split("://", 1)[1]:
            raise web.HTTPFound(self.moved_to + request.path_qs)  # before auth, as a moved repository answers
        self.requests.append((request.method, request.path_qs, header))
        user = self._user(header)
        if user is None:
            return web.Response(status=401, headers={"WWW-Authenticate": 'Basic realm="git"'})
        if self.fail_next:
            return web.Response(status=self.fail_next.pop(0))
        body = await request.read()
        if request.path.endswith("/git-receive-pack") and self.before_push is not None:
            hook, self.before_push = self.before_push, None
            hook()
        env = {"GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1", "PATH_INFO": request.path,
               "QUERY_STRING": request.query_string, "REQUEST_METHOD": request.method,
               "CONTENT_TYPE": request.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
               "REMOTE_USER": user, "REMOTE_ADDR": "127.0.0.1",
               "HTTP_CONTENT_ENCODING": request.headers.get("Content-Encoding", ""),
               "GIT_PROTOCOL": request.headers.get("Git-Protocol", ""), "GIT_CONFIG_NOSYSTEM": "1",
               "HOME": str(self.root)}
        process = await asyncio.create_subprocess_exec(self._backend, env=env, stdin=asyncio.subprocess.PIPE,
                                                       stdout=asyncio.subprocess.PIPE,
                                                       stderr=asyncio.subprocess.PIPE)
        out, _ = await process.communicate(body)
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, headers = 200, {}
        for line in head.decode(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.lower() == "status":
                status = int(value.strip().split()[0])
            elif key:
                headers[key.strip()] = value.strip()
        return web.Response(status=status, body=payload, headers=headers)
