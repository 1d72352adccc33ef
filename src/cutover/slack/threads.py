"""A cutover's Slack thread and announced milestones, kept as notes that outlive the process, so that the next
hook Job (a later phase, or a re-run) finds the thread and does not announce a milestone twice.

The CLI hands it the Service's Lease annotations (`kube.lease.Notes`): the Lease is the one object cutover may
write in the Service's namespace (docs/guarantees.md #3), its annotations outlive each holder, and writes are
compare-and-swap, retried on conflict with the holder's renewals. This module knows only the `Notes` it is given;
the Slack sender asks it through `sink.ThreadStore`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple, Protocol

KEY = "cutover.dev/slack-key"
TS = "cutover.dev/slack-thread-ts"
LINE = "cutover.dev/slack-line-ts"  # a fleet's cluster: its line in the fleet change's thread (docs/fleet.md)
ANNOUNCED = "cutover.dev/slack-announced"


class Kept(NamedTuple):
    ts: str | None  # the thread's head
    line: str | None  # a fleet's cluster: its line under that head
    announced: set[str]


class Notes(Protocol):
    """Key-value notes kept somewhere durable; reading what cannot be read gives none, writing is best effort."""

    async def read(self) -> Mapping[str, str]: ...

    async def add(self, values: Mapping[str, str]) -> None: ...


class LeaseThreads:
    def __init__(self, notes: Notes) -> None:
        self.notes = notes

    async def load(self, key: str) -> Kept:
        notes = await self.notes.read()  # none when unreadable: at worst a new thread
        if notes.get(KEY) != key:
            return Kept(None, None, set())  # another cutover's thread
        return Kept(notes.get(TS) or None, notes.get(LINE) or None,
                    {stage for stage in notes.get(ANNOUNCED, "").split(",") if stage})

    async def save(self, key: str, kept: Kept) -> None:
        # a key's first save writes the line too, empty where there is none: never another cutover's line
        await self.notes.add({KEY: key, ANNOUNCED: ",".join(sorted(kept.announced)), **({TS: kept.ts} if kept.ts
                                                                                         else {}),
                              LINE: kept.line or ""})
