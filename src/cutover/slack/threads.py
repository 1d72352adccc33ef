"""A cutover's Slack thread and announced milestones, kept in annotations on the Service's Lease so that
the next hook Job (a later phase, or a re-run) finds the thread and does not announce a milestone twice.

The Lease is the one object cutover may write in the Service's namespace (docs/guarantees.md #3); its annotations
outlive each holder. Writes are compare-and-swap, retried on conflict with the holder's renewals.
Called by the CLI, which hands it to the Slack sender (`sink.ThreadStore`).
"""

from __future__ import annotations

from cutover.errors import ClusterError
from cutover.kube import lease, lease_rules
from cutover.kube.cluster import Cluster

KEY = "cutover.dev/slack-key"
TS = "cutover.dev/slack-thread-ts"
ANNOUNCED = "cutover.dev/slack-announced"


class LeaseThreads:
    def __init__(self, cluster: Cluster, *, namespace: str, service: str) -> None:
        self.cluster, self.namespace, self.service = cluster, namespace, service
        self.name = lease_rules.lease_name(service)

    async def load(self, key: str) -> tuple[str | None, set[str]]:
        try:
            current = await self.cluster.lease(self.namespace, self.name)
        except ClusterError:
            return None, set()  # best effort: at worst a new thread
        notes = current.annotations if current else {}
        if notes.get(KEY) != key:
            return None, set()  # another cutover's thread
        return notes.get(TS) or None, {stage for stage in notes.get(ANNOUNCED, "").split(",") if stage}

    async def save(self, key: str, ts: str | None, announced: set[str]) -> None:
        notes = {KEY: key, ANNOUNCED: ",".join(sorted(announced)), **({TS: ts} if ts else {})}
        await lease.annotate(self.cluster, namespace=self.namespace, service=self.service, notes=notes)
