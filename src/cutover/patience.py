"""How long a person waits for an outside system that does not answer. A hook Job retries through an outage (six
attempts, then the Job's own retry); a person at a terminal running `cutover plan`, `status` or `verify` without
`--wait` is told within about 20 s that the API or the Git host does not answer, instead of after every retry or,
for a pod watch, after `verify.maxWait`. Set once by the CLI for those commands (a context variable, inherited by
the tasks a command starts); read by each wing's retry policy through `bounded`."""

from __future__ import annotations

from contextvars import ContextVar

import tenacity

INTERACTIVE = 20.0  # seconds of trying before an interactive command gives up on one outside system

limit: ContextVar[float | None] = ContextVar("cutover_patience", default=None)


def bounded(stop: tenacity.stop.stop_base) -> tenacity.stop.stop_base:
    """A retry policy's `stop`, or sooner while a person is waiting."""
    within = limit.get()
    return stop if within is None else stop | tenacity.stop_after_delay(within)
