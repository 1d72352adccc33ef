"""The Application's notice, written behind the run (kube/notices.py): redacted like an Event, within ArgoCD's 500
characters, the last word written when the run ends, and best effort."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import structlog

from cutover import logs
from cutover.core import notice
from cutover.errors import ClusterUnavailable
from cutover.kube import notices


class Cluster:
    def __init__(self, *, refuse: bool = False) -> None:
        self.written: list[tuple[str, str, dict[str, str]]] = []
        self.refuse = refuse

    async def write_notice(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        if self.refuse:
            raise ClusterUnavailable("gone", hint="")
        self.written.append((namespace, name, annotations))


async def test_the_last_word_is_written_redacted_and_within_bounds() -> None:
    logs.configure(fmt="json", secrets=["s3cret-t0ken"])
    try:
        cluster = Cluster()
        board = notices.Board(cluster, {"reasoning-long": ("argocd", "llm-serving")})  # type: ignore[arg-type]
        board.say("reasoning-long", notice.ended("reasoning-long", "postsync", ok=False,
                                                  said="git refused s3cret-t0ken " + "x" * 600))
        await board.flush()
    finally:
        structlog.reset_defaults()
    ((namespace, name, written),) = cluster.written
    assert (namespace, name) == ("argocd", "llm-serving")
    assert "s3cret-t0ken" not in written[notice.CONTENT] and len(written[notice.CONTENT]) <= notice.LIMIT
    assert written[notice.SEVERITY] == "critical"


async def test_a_notice_nobody_can_write_changes_nothing() -> None:
    board = notices.Board(Cluster(refuse=True), {"p": ("argocd", "app")})  # type: ignore[arg-type]
    event: dict[str, Any] = {"event": "cutover.started", "cutover": "p"}
    assert board(None, "info", event) is event  # a log processor: the event goes on unchanged
    await board.flush()  # no error: best effort


class Apiserver:
    """A PATCH on the wire lands whatever its client does next; the first one lands a second late."""

    def __init__(self) -> None:
        self.landed: list[str] = []
        self.sent = 0
        self.wire: asyncio.Task[None] | None = None

    async def write_notice(self, namespace: str, name: str, annotations: dict[str, str]) -> None:
        late, self.sent = self.sent == 0, self.sent + 1

        async def land() -> None:
            if late:
                await asyncio.sleep(1.0)
            self.landed.append(annotations[notice.CONTENT])

        self.wire = asyncio.get_running_loop().create_task(land())
        await asyncio.shield(self.wire)  # a client that gives up does not call a PATCH back


@pytest.mark.looptime  # the late PATCH's second and the flush's wait pass on the loop's fake clock
async def test_the_last_word_lands_after_a_milestone_still_on_the_wire() -> None:
    """Found on the real tier: the run's outcome written while a milestone's PATCH was in flight, the milestone's
    landing last left the Application saying "verified" instead of the outcome line."""
    apiserver = Apiserver()
    board = notices.Board(apiserver, {"p": ("argocd", "app")})  # type: ignore[arg-type]
    board.start()
    board.say("p", notice.ended("p", "postsync", ok=True, said="a milestone, still on the wire"))
    await asyncio.sleep(0.1)  # the loop has sent it
    board.say("p", notice.ended("p", "postsync", ok=True, said="verified: the outcome"))
    await board.flush()
    await asyncio.sleep(2)  # anything still on the wire has landed
    assert apiserver.landed[-1].endswith("verified: the outcome"), apiserver.landed
