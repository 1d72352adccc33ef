"""The notice on each workload's Application (what it says: core.notice), written behind the run as milestones are
logged: best effort like an Event (docs/guarantees.md #7; a notice nobody could write changes nothing of the
cutover), at most one write per MIN_GAP seconds while the run goes, and the last word when it ends."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping, MutableMapping
from typing import Any

from cutover import logs
from cutover.core import notice
from cutover.errors import CutoverError
from cutover.kube.cluster import Cluster

MIN_GAP = 10.0  # seconds between writes while a run goes: a wait's progress is news every minute, not every event
FLUSH = 5.0  # seconds the last write may take when the run ends

Where = tuple[str, str]  # the Application's namespace and name


class Board:
    def __init__(self, cluster: Cluster, applications: Mapping[str, Where]) -> None:
        self.cluster = cluster
        self.applications = dict(applications)  # plan name -> its Application
        self.wanted: dict[Where, tuple[str, str]] = {}
        self.written: dict[Where, tuple[str, str]] = {}
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.writing: asyncio.Future[None] | None = None  # the write under way, which a flush lets land first

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        """A structlog processor (logs.Fanout): a milestone of a plan with an Application is a notice to write."""
        found = notice.of(event)
        if found is not None:
            self.say(event.get("cutover"), found)
        return event

    def say(self, plan: object, found: tuple[str, str]) -> None:
        where = self.applications.get(str(plan)) or (next(iter(self.applications.values()))
                                                      if len(self.applications) == 1 else None)
        if where is not None:
            self.wanted[where] = found
            self.changed.set()

    def start(self) -> None:
        self.task = asyncio.get_running_loop().create_task(self._run(), name="cutover-notices")

    async def flush(self) -> None:
        """Stop writing as the run goes, and write the last word (within FLUSH seconds), after the write under way:
        a PATCH cut on the client's side may still land on the apiserver, after the last word if that went first."""
        if self.task is not None:
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(FLUSH):
                if self.writing is not None:
                    await asyncio.gather(self.writing, return_exceptions=True)
                await self._write()

    async def _run(self) -> None:
        while True:
            await self.changed.wait()
            self.changed.clear()
            self.writing = asyncio.ensure_future(self._write())
            await asyncio.shield(self.writing)  # a flush cancels the loop, never a write in flight
            await asyncio.sleep(MIN_GAP)

    async def _write(self) -> None:
        for where, found in list(self.wanted.items()):
            if self.written.get(where) == found:
                continue
            content, severity = found
            said = (notice.clip(logs.redact(content)), severity)  # what leaves the process, redacted like an Event
            try:
                await self.cluster.write_notice(*where, notice.as_annotations(said))
            except CutoverError:
                return  # best effort: the log, the Events and Slack say it all the same
            self.written[where] = found
