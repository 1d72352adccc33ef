"""Draining (docs/capacity.md): when a backend the Service no longer selects has no request left in flight. Pure:
reads of its pods' `/metrics` in, a verdict out; the loop that reads is `flows.drain`.

vLLM's gauge `vllm:num_requests_running` counts the requests in its batches. A pod is idle when it reads 0 twice in a
row (one read can fall between two requests of a client still pinned to it by keep-alive, kubernetes#38456; the
GPUStack operator's preStop hook waits for the same second idle read). A pod that no longer answers has nothing in
flight. Engines without the gauge (candle-vllm has no /metrics) are waited on for `handoff.drainTimeout` instead.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping

IDLE_READS = 2  # reads in a row at 0 that make a pod idle
POLL = 1.0  # seconds between reads
_SAMPLE = re.compile(r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{[^}]*\})?\s+(?P<value>\S+)(?:\s+\S+)?$")


def gauge(text: str, name: str) -> float | None:
    """The sum of a metric's samples over its label sets in Prometheus' text format; None when it is absent."""
    total, found = 0.0, False
    for line in text.splitlines():
        match = _SAMPLE.match(line.strip())
        if match is None or match["name"] != name:
            continue
        try:
            total += float(match["value"])
        except ValueError:
            continue
        found = True
    return total if found else None


@dataclasses.dataclass(frozen=True)
class Reads:
    """What the reads so far say: per pod, the latest value (None: it did not answer) and how many zeros in a row."""

    latest: Mapping[str, float | None] = dataclasses.field(default_factory=dict)
    zeros: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def after(self, pod: str, value: float | None) -> Reads:
        """One more read of `pod`: a pod that does not answer counts as idle (its requests are gone with it)."""
        zeros = self.zeros.get(pod, 0) + 1 if not value else 0
        return Reads({**self.latest, pod: value}, {**self.zeros, pod: zeros})

    def idle(self, pods: Iterable[str]) -> bool:
        return all(self.zeros.get(pod, 0) >= IDLE_READS for pod in pods)

    def running(self) -> dict[str, float]:
        """The pods with requests in flight at their latest read, and how many."""
        return {pod: value for pod, value in sorted(self.latest.items()) if value}
