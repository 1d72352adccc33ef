"""The circuit breaker: when Slack fails again and again, the process stops asking it."""

from __future__ import annotations

import structlog

from cutover.slack import QUIET
from cutover.slack.transports import SlackFailed

log = structlog.get_logger("cutover.notify")

BREAK_AFTER = 3  # failed requests in a row before Slack is left alone for the rest of the process


class Breaker:
    """Slack failing again and again (5xx, timeouts, no connection): stop trying for the rest of the process and
    say so once, so that a Slack outage costs the work nothing (each flush would otherwise wait its whole budget).
    A rate limit (429 with Retry-After) is Slack working as documented, not a failure."""

    def __init__(self, after: int = BREAK_AFTER) -> None:
        self.after, self.failures, self.open = after, 0, False

    def record(self, exc: BaseException | None) -> None:
        if exc is None:
            self.failures = 0
        elif not (isinstance(exc, SlackFailed) and (exc.retry_after is not None or not exc.retryable)):
            self.failures += 1
            if self.failures >= self.after:
                self.trip(f"{self.failures} failures in a row, the last: {exc or type(exc).__name__}")

    def trip(self, why: str) -> None:
        if not self.open:
            self.open = True
            log.warning("slack.circuit_open", why=why, then="no more Slack messages from this process",
                        **{QUIET: True})
