"""What proving found, as the core reads it: a pod's proof of its served names (`PodProof`, its `Problem`s) and
the fitness table's columns (`Side`, `Fitted`). Written by the engines wing (`engines.api`, `engines.fitness`),
judged by the core and the readiness rules. Pure data: no I/O.
"""

from __future__ import annotations

import dataclasses

__all__ = ["Fitted", "PodProof", "Problem", "Shortfall", "Side", "table"]


@dataclasses.dataclass(frozen=True)
class Problem:
    kind: str  # refused | connect_timeout | read_timeout | reset | http_status | bad_json | bad_encoding | too_large |
    #            unhealthy | name_not_listed | name_rejected | no_token | wrong_engine
    message: str
    retryable: bool
    name: str | None = None
    status: int | None = None


@dataclasses.dataclass(frozen=True)
class PodProof:
    """Every served name asked of one pod (or of one Service port): what answered, what did not."""

    pod: str
    address: str
    method: str
    proven: tuple[str, ...]
    problems: tuple[Problem, ...]
    seconds: float

    @property
    def ok(self) -> bool:
        return not self.problems

@dataclasses.dataclass(frozen=True)
class Side:
    """One backend's column of the table. None: not measured (or not reported by the engine)."""

    backend: str
    ready: int | None = None
    context: int | None = None
    p50: float | None = None
    max: float | None = None
    warmup: float | None = None  # seconds from the first trial to the one that passed
    note: str | None = None  # why it was not measured

    def as_data(self) -> dict[str, object]:
        return {"backend": self.backend, "readyPods": self.ready, "context": self.context,
                "latencyP50": _round(self.p50), "latencyMax": _round(self.max), "warmupSeconds": _round(self.warmup),
                **({"note": self.note} if self.note else {})}


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)

@dataclasses.dataclass(frozen=True)
class Shortfall:
    cause: str  # context_shorter | fewer_replicas
    message: str
    hint: str

@dataclasses.dataclass(frozen=True)
class Fitted:
    """The target passed: its column, the live backend's (None: none to compare), and a shortfall found but not
    refused (a switch back to another backend than the plan's target)."""

    new: Side
    old: Side | None = None
    shortfall: Shortfall | None = None

    def table(self) -> tuple[str, ...]:
        shown = table(self.new, self.old)
        return (*shown, f"not refused (a switch back): {self.shortfall.message}") if self.shortfall else shown

    def as_data(self) -> dict[str, object]:
        return {"new": self.new.as_data(), "old": self.old.as_data() if self.old else None,
                "shortfall": self.shortfall.cause if self.shortfall else None, "table": list(self.table())}


def table(new: Side, old: Side | None) -> tuple[str, ...]:
    """Old beside new, as fixed-width lines (commit bodies and Slack code blocks keep the columns)."""
    columns = [old or Side("-", note="no live backend"), new]
    rows = [("", *(f"{label} ({column.backend})" for label, column in zip(("old", "new"), columns, strict=True))),
            ("context", *(_count(column.context) for column in columns)),
            ("Ready pods", *(_count(column.ready) for column in columns)),
            ("latency p50", *(_time(column.p50) for column in columns)),
            ("latency max", *(_time(column.max) for column in columns)),
            ("warm-up", *("-" if column.warmup is None else f"{column.warmup:.0f}s" for column in columns))]
    if columns[0].note:
        rows.append(("note", columns[0].note, ""))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    return tuple("  ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip()
                 for row in rows)


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _time(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}s" if value < 10 else f"{value:.0f}s"
