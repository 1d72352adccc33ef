"""Small helpers shared by the tests: kmock fault reactions, request and event filters, file lines."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import kmock

from cutover.cli import outcome
from cutover.core.results import Result
from cutover.demo.world import World
from cutover.plan import Plan

PODS = kmock.resource("", "v1", "pods")


def fail_first(count: int, status: int) -> Callable[[Any], Any]:
    """A kmock reaction: answer `status` to the first `count` matching requests, then step aside."""
    seen: list[object] = []

    def react(request: Any) -> Any:
        if len(seen) >= count:
            raise NotImplementedError  # kmock: not ours to answer, try the next reaction
        seen.append(request)
        return kmock.KubernetesError(status=status, reason="Injected", message=f"injected {status}")

    return react


def requests(world: World, *, watch: bool | None = None, path: str = "/pods") -> list[Any]:
    """Requests the emulated API server received for a path, optionally only watches or only the rest."""
    found = [r for r in world.kube if r.url.path.endswith(path)]
    if watch is not None:
        found = [r for r in found if (r.params.get("watch") == "true") is watch]
    return found


def told(result: Result, plan: Plan) -> outcome.Report:
    """A typed result as the CLI renders it: the summary and the data `--output json` prints."""
    return outcome.render(result, plan)


def named(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [event for event in events if event["event"] == name]


def outside_the_selector(text: str) -> list[str]:
    """The file's lines except the selector block: what a commit must never change."""
    lines, inside = [], False
    for line in text.splitlines():
        if line.startswith("  selector:"):
            inside = True
            continue
        if inside and line.startswith("    "):
            continue
        inside = False
        lines.append(line)
    return lines


@dataclasses.dataclass
class Client:
    """Calls the Service's name once a second, as the poimen client does, and counts failures."""

    url: str
    sent: int = 0
    failed: int = 0

    async def run(self) -> None:
        # A new connection per request, so that each one goes where kube-proxy sends new connections.
        async with httpx.AsyncClient(timeout=10, limits=httpx.Limits(max_keepalive_connections=0)) as http:
            while True:
                self.sent += 1
                try:
                    answer = await http.post(self.url, json={"model": "reasoning-long", "max_tokens": 1,
                                                             "messages": [{"role": "user", "content": "hi"}]})
                    ok = answer.status_code == 200 and bool(answer.json().get("choices"))
                except (httpx.HTTPError, ValueError):
                    ok = False
                self.failed += 0 if ok else 1
                await asyncio.sleep(1)


class _StreamedBody(httpx.AsyncByteStream):
    def __init__(self, body: bytes) -> None:
        self.body = body

    async def __aiter__(self) -> Any:
        for start in range(0, len(self.body), 1 << 16):
            yield self.body[start:start + (1 << 16)]


def streamed(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> httpx.Response:
    """An answer for httpx.MockTransport whose body arrives as a stream, as over a socket: httpx reads a body given
    as bytes at once, and then a client reading the raw stream under a cap (core/bounded.py) finds it consumed."""
    return httpx.Response(status, headers=headers, stream=_StreamedBody(body))


def kubeconfig_at(path: Path, server: str) -> Path:
    """A kubeconfig of one context, for `server` (namespace cutover): an API that is gone, mostly."""
    path.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "gone",
        "clusters": [{"name": "gone", "cluster": {"server": server}}],
        "users": [{"name": "gone", "user": {"token": "t"}}],
        "contexts": [{"name": "gone", "context": {"cluster": "gone", "user": "gone", "namespace": "cutover"}}]}))
    return path
