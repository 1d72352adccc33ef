"""A cutover's Slack thread and announced milestones, kept as notes that outlive the process, so that the next
hook Job (a later phase, or a re-run) finds the thread and does not announce a milestone twice.

The CLI hands it the Service's Lease annotations (`kube.lease.Notes`): the Lease is the one object cutover may
write in the Service's namespace (docs/guarantees.md #3), its annotations outlive each holder, and writes are
compare-and-swap, retried on conflict with the holder's renewals. This module knows only the `Notes` it is given;
the Slack sender asks it through `sink.ThreadStore`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

KEY = "cutover.dev/slack-key"
TS = "cutover.dev/slack-thread-ts"
ANNOUNCED = "cutover.dev/slack-announced"


class Notes(Protocol):
    """Key-value notes kept somewhere durable; reading what cannot be read gives none, writing is best effort."""

    async def read(self) -> Mapping[str, str]: ...

    async def add(self, values: Mapping[str, str]) -> None: ...


class LeaseThreads:
    def __init__(self, notes: Notes) -> None:
        self.notes = notes

    async def load(self, key: str) -> tuple[str | None, set[str]]:
        notes = await self.notes.read()  # none when unreadable: at worst a new thread
        if notes.get(KEY) != key:
            return None, set()  # another cutover's thread
        return notes.get(TS) or None, {stage for stage in notes.get(ANNOUNCED, "").split(",") if stage}

    async def save(self, key: str, ts: str | None, announced: set[str]) -> None:
        await self.notes.add({KEY: key, ANNOUNCED: ",".join(sorted(announced)), **({TS: ts} if ts else {})})
