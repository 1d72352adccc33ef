"""Logging: structlog configured once, with secrets redacted before anything renders or ships.

Processor order (each has one job):
  1. merge_contextvars      cutover id, service and phase bound once per command
  2. add_log_level
  3. TimeStamper            ISO-8601 UTC
  4. format_exc_info        tracebacks become text, so that step 5 sees them (JSON only)
  5. Redactor               configured secrets and token-shaped strings become [REDACTED]
  6. sinks                  e.g. a `Fanout` that the Slack sink joins once the plan is read
  7. renderer               JSON lines off a TTY (in a pod), console on a TTY
Sinks sit between 5 and 7, so they only ever see redacted events. Kubernetes Events are not a sink: the
phases record them at their milestones. Called by the CLI once per command, and by the demo.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Iterable, MutableMapping
from typing import Any, TextIO

import structlog

REDACTED = "[REDACTED]"

# Shapes of credentials worth catching even when nobody told us the value.
TOKEN_SHAPES = re.compile(
    r"(?:gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub tokens
    r"|github_pat_[A-Za-z0-9_]{20,}"
    r"|gl(?:pat|dt|rt|cbt|ptt|ft|imt|soat|oas|agent)-[A-Za-z0-9_\-]{16,}"  # GitLab's tokens, by their prefixes
    r"|xox[abposr]-[A-Za-z0-9\-]{10,}"  # Slack tokens
    r"|https://hooks\.slack\.com/services/[A-Za-z0-9/_\-]+"  # Slack webhook URLs
    r"|eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]+"  # JWTs (service account tokens)
    r"|(?<=://)[^/\s:@]+:[^/\s@]+(?=@)"  # user:password@ inside URLs
    r"|(?i:(?<=bearer )[A-Za-z0-9._~+/\-]{8,}=*)"  # Authorization: Bearer <token>
    r")"
)


class Redactor:
    """Replace configured secrets and token-shaped strings in every value of an event."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        """Hide more values from now on (secrets named by the plan are known only once it is read)."""
        # Short strings would redact ordinary words; real secrets are long.
        known = set(self._secrets) | {s for s in secrets if len(s) >= 8}
        self._secrets = sorted(known, key=len, reverse=True)

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for key, value in event.items():
            if key != "exc_info":  # rendered later by a formatter that redacts the text itself
                event[key] = self.scrub(value)
        return event

    @property
    def secrets(self) -> list[str]:
        return list(self._secrets)

    def scrub(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.scrub_text(value)
        if isinstance(value, dict):
            return {key: self.scrub(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return type(value)(self.scrub(item) for item in value)
        if isinstance(value, BaseException):
            return self.scrub_text(repr(value))
        return value

    def scrub_text(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, REDACTED)
        return TOKEN_SHAPES.sub(REDACTED, text)


class Fanout:
    """A processor that hands each event to its sinks in turn; more may join after logging is configured
    (the Slack sink, once the plan says where Slack is), so logging is configured once."""

    def __init__(self, sinks: Iterable[Any] = ()) -> None:
        self._sinks = list(sinks)

    def add(self, sink: Any) -> None:
        self._sinks.append(sink)

    def __call__(self, logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
        for sink in self._sinks:
            event = sink(logger, method, event)
        return event


def configure(
    *,
    fmt: str | None = None,
    level: str = "info",
    secrets: Iterable[str] = (),
    stream: TextIO | None = None,
    sinks: Iterable[Any] = (),
) -> Redactor:
    """Set up structlog for this process; returns the redactor so output paths can reuse it."""
    stream = stream or sys.stderr
    fmt = fmt or ("console" if stream.isatty() else "json")
    redactor = Redactor(secrets)
    global _ACTIVE  # noqa: PLW0603 (one configuration per process, as structlog's own)
    _ACTIVE = redactor
    renderer: Any
    if fmt == "console":
        renderer = structlog.dev.ConsoleRenderer(colors=stream.isatty(), exception_formatter=_redacted_tb(redactor))
        exc_step: list[Any] = []
    else:
        renderer = structlog.processors.JSONRenderer(sort_keys=False)
        exc_step = [structlog.processors.format_exc_info]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            *exc_step,
            redactor,
            *sinks,  # after the redactor: a sink only ever sees redacted events
            *([_said_by_the_outcome] if fmt == "console" else []),
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelNamesMapping()[level.upper()]),
        # one write per line, its newline included (print writes it apart, and PYTHONUNBUFFERED, the image's, makes
        # that two writes): a container's stdout and stderr are two pipes, read apart, and the outcome line on
        # stdout landed inside a log line's on stderr in a pod's log, where a log collector meets it too
        logger_factory=structlog.WriteLoggerFactory(file=stream),
        cache_logger_on_first_use=False,
    )
    return redactor


_ACTIVE: Redactor | None = None  # the redactor `configure` set up last
OUTCOME_SAYS = ("cutover.failed",)  # what the outcome line says in full at the end of every command


def _said_by_the_outcome(logger: Any, method: str, event: MutableMapping[str, Any]) -> MutableMapping[str, Any]:
    """On a terminal, a failure printed once: the outcome line says it all (cause, message, hint), so its log
    line is not rendered there too. JSON logs keep it (a pod's log is read by machines), and so do the sinks."""
    if event.get("event") in OUTCOME_SAYS:
        raise structlog.DropEvent
    return event


def redact(text: str) -> str:
    """`text` with the configured secrets and token-shaped strings redacted: for what leaves the process other
    than through structlog (Kubernetes Events, report lines)."""
    return (_ACTIVE or Redactor(())).scrub_text(text)


def _redacted_tb(redactor: Redactor) -> Any:
    def render(sio: TextIO, exc_info: Any) -> None:
        import traceback  # noqa: PLC0415 -- only on the rare path that prints a traceback

        text = "".join(traceback.format_exception(*exc_info))
        sio.write("\n" + redactor.scrub_text(text))

    return render
