"""The `Cutover-*` trailers of a cutover commit (docs/reporting.md): rendered once, parsed once, here. Pure.

Git history is the state the commands read back, so the trailers are a format: `Cutover-Id`, `Cutover-From`,
`Cutover-To`, `Cutover-Plan`, the Service's `Cutover-Service-Uid` and `Cutover-Cluster-Ip` recorded before
the switch, and `Cutover-Hold` on a rollback; a commit that frees or restores a backend's workload
(docs/capacity.md) says so with `Cutover-Step`, `Cutover-Backend` and what the field held before (`Cutover-Previous`,
`Cutover-Added`); a switch on a path through a bridge names it (`Cutover-Bridge`) and, on the hop to the bridge, where
the path goes on to (`Cutover-Toward`). Written by `writeback`, read back through the Git providers.
"""

from __future__ import annotations

import dataclasses
import re

__all__ = ["Trailers"]

_LINE = re.compile(r"^(Cutover-[A-Za-z-]+):\s*(.+?)\s*$", re.MULTILINE)
UNKNOWN = "unknown"  # what Cutover-From says when Git held no backend of the plan


@dataclasses.dataclass(frozen=True)
class Trailers:
    id: str | None = None
    source: str | None = None  # Cutover-From: the backend the Service left
    to: str | None = None
    plan: str | None = None
    service_uid: str | None = None
    cluster_ip: str | None = None
    hold: str | None = None  # a rollback holds the Service on this backend
    # docs/capacity.md: a commit that frees or restores a backend's workload instead of switching the selector
    step: str | None = None  # Cutover-Step: free | restore (absent: a selector switch)
    backend: str | None = None  # Cutover-Backend: the backend freed or restored
    previous: str | None = None  # Cutover-Previous: the field's value before a free (`absent`), written back later
    added: str | None = None  # Cutover-Added: mappings the free added on the way to the field (a restore drops them)
    # docs/capacity.md, strategy bridge: the bridge backend of the path this switch is a hop of, and on the hop to
    # the bridge, where the path goes next
    bridge: str | None = None  # Cutover-Bridge
    toward: str | None = None  # Cutover-Toward

    # field, trailer key, rendered even when empty
    _KEYS = (("id", "Cutover-Id", True), ("source", "Cutover-From", True), ("to", "Cutover-To", True),
             ("plan", "Cutover-Plan", True), ("service_uid", "Cutover-Service-Uid", False),
             ("cluster_ip", "Cutover-Cluster-Ip", False), ("hold", "Cutover-Hold", False),
             ("step", "Cutover-Step", False), ("backend", "Cutover-Backend", False),
             ("previous", "Cutover-Previous", False), ("added", "Cutover-Added", False),
             ("bridge", "Cutover-Bridge", False), ("toward", "Cutover-Toward", False))

    def render(self) -> str:
        """The trailer block: the last paragraph of a commit message."""
        lines = []
        for field, key, always in self._KEYS:
            value = getattr(self, field)
            if value or always:
                lines.append(f"{key}: {value or UNKNOWN}")
        return "\n".join(lines)

    @classmethod
    def parse(cls, message: str) -> Trailers:
        """The trailers of a commit message (its last paragraph); a message without them has none."""
        found = dict(_LINE.findall(message.strip().split("\n\n")[-1]))
        values = {field: found.get(key) for field, key, _ in cls._KEYS}
        if values["source"] == UNKNOWN:
            values["source"] = None
        return cls(**values)

    def as_dict(self) -> dict[str, str]:
        """Trailer keys to values, as they stand in the message."""
        return {key: getattr(self, field) for field, key, _ in self._KEYS if getattr(self, field)}

    @property
    def is_cutover(self) -> bool:
        return self.plan is not None
